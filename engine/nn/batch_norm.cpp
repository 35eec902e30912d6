#include "engine/nn/batch_norm.h"

#include <cstdio>

namespace towers::engine {

BatchNorm::BatchNorm(std::string name, std::int64_t channels, double epsilon, double momentum,
                     Activation activation)
    : Layer(std::move(name)), m_channels(channels), m_epsilon(epsilon), m_momentum(momentum),
      m_activation(activation)
{
    if (channels <= 0)
        throw InvalidArgument("batchnorm '" + this->name() + "': channels must be positive");
    const std::string& n = this->name();
    m_gamma = {n + ".weight", Tensor::filled({channels}, DType::Float32, 1.0), {}, true, 0};
    m_beta = {n + ".bias", Tensor::zeros({channels}, DType::Float32), {}, true, 0};
    m_runningMean = {n + ".running_mean", Tensor::zeros({channels}, DType::Float32), {}, false, 0};
    m_runningVar = {
        n + ".running_var", Tensor::filled({channels}, DType::Float32, 1.0), {}, false, 0};
    m_batches = {n + ".num_batches_tracked", Tensor::zeros(Shape{}, DType::Int64), {}, false, 0};
}

std::string BatchNorm::describe() const
{
    char buf[96];
    std::snprintf(buf, sizeof buf, "batch norm, %lld channels%s",
                  static_cast<long long>(m_channels),
                  m_activation == Activation::Relu ? ", ReLU" : "");
    return buf;
}

BatchNormDesc BatchNorm::desc(const Shape& x) const
{
    if ((x.rank() != 2 && x.rank() != 4) || x[x.rank() - 1] != m_channels)
        throw ShapeError("batchnorm '" + name() + "' expects [N, " + std::to_string(m_channels) +
                         "] or [N, H, W, " + std::to_string(m_channels) + "], got " + x.str());
    return makeBatchNormDesc(x, m_epsilon, m_momentum);
}

Shape BatchNorm::outputShape(const Shape& input) const
{
    return desc(input).shape;
}

void BatchNorm::forward(ExecContext& ctx, const Tensor& x, Tensor& y)
{
    const BatchNormDesc d = desc(x.shape());
    m_savedValid = ctx.training;
    if (ctx.training) {
        ctx.ops.batchNormActForwardTraining(d, x, m_gamma.value, m_beta.value, m_activation, y,
                                            m_runningMean.value, m_runningVar.value, m_saveMean,
                                            m_saveVar, m_saved);
        // Counted on the host, at every replay of a captured step too.
        ctx.ops.hostWork([this] { m_batches.value.data<std::int64_t>()[0] += 1; });
    } else {
        ctx.ops.batchNormActForwardInference(d, x, m_gamma.value, m_beta.value, m_runningMean.value,
                                             m_runningVar.value, m_activation, y);
    }
}

void BatchNorm::backward(ExecContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                         Tensor* dx)
{
    Tensor::ensure(m_gamma.grad, m_gamma.value.shape(), m_gamma.value.dtype(),
                   m_gamma.value.device());
    Tensor::ensure(m_beta.grad, m_beta.value.shape(), m_beta.value.dtype(), m_beta.value.device());
    // The op always computes dx; without a caller's dx it goes to scratch.
    // The backend's state from forward only holds after a training forward; without it the
    // ReLU's mask comes from y.
    ctx.ops.batchNormActBackward(desc(x.shape()), x, y, dy, m_activation, m_gamma.value, m_saveMean,
                                 m_saveVar, m_savedValid ? m_saved : Tensor(), dx ? *dx : m_dx,
                                 m_gamma.grad, m_beta.grad);
}

void BatchNorm::collectParameters(std::vector<Parameter*>& out)
{
    out.insert(out.end(), {&m_gamma, &m_beta, &m_runningMean, &m_runningVar, &m_batches});
}

void BatchNorm::initialize(Rng& rng)
{
    (void)rng;
    m_gamma.value.fill(1.0);
    m_beta.value.fill(0.0);
    m_runningMean.value.fill(0.0);
    m_runningVar.value.fill(1.0);
    m_batches.value.fill(0.0);
}

} // namespace towers::engine
