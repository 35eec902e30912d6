#include "engine/nn/linear.h"

#include <cstdio>

namespace towers::engine {

Linear::Linear(std::string name, LinearOptions options) : Layer(std::move(name)), m_opt(options)
{
    if (m_opt.inFeatures <= 0 || m_opt.outFeatures <= 0)
        throw InvalidArgument("linear '" + this->name() + "': feature counts must be positive");
    m_weight.name = this->name() + ".weight";
    m_weight.value = Tensor::zeros({m_opt.outFeatures, m_opt.inFeatures}, DType::Float32);
    m_weight.weightDecay = m_opt.weightDecay;
    if (m_opt.bias) {
        m_bias.name = this->name() + ".bias";
        m_bias.value = Tensor::zeros({m_opt.outFeatures}, DType::Float32);
    }
}

std::string Linear::describe() const
{
    std::string s = "fully connected " + std::to_string(m_opt.inFeatures) + " -> " +
                    std::to_string(m_opt.outFeatures);
    if (!m_opt.bias) s += ", no bias";
    if (m_opt.activation == Activation::Relu) s += ", ReLU";
    if (m_opt.weightDecay > 0) {
        char buf[48];
        std::snprintf(buf, sizeof buf, ", weight decay %g", m_opt.weightDecay);
        s += buf;
    }
    return s;
}

Shape Linear::outputShape(const Shape& input) const
{
    if (input.rank() != 2 || input[1] != m_opt.inFeatures)
        throw ShapeError("linear '" + name() + "' expects input [N, " +
                         std::to_string(m_opt.inFeatures) + "], got " + input.str());
    return {input[0], m_opt.outFeatures};
}

double Linear::forwardFlops(const Shape& input) const
{
    return 2.0 * double(outputShape(input).numel()) * double(m_opt.inFeatures);
}

void Linear::forward(ExecContext& ctx, const Tensor& x, Tensor& y)
{
    outputShape(x.shape());
    ctx.ops.linearForward(x, m_weight.value, m_bias.value, y, m_opt.activation);
}

void Linear::backward(ExecContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                      Tensor* dx)
{
    ctx.ops.linearBackward(x, m_weight.value, y, dy, m_opt.activation, dx, m_weight.grad,
                           biasGradient(m_bias));
}

void Linear::collectParameters(std::vector<Parameter*>& out)
{
    out.push_back(&m_weight);
    if (m_opt.bias) out.push_back(&m_bias);
}

void Linear::initialize(Rng& rng)
{
    m_opt.weightInit.apply(m_weight.value, m_opt.inFeatures, m_opt.outFeatures, rng);
    if (m_opt.bias) m_opt.biasInit.apply(m_bias.value, m_opt.inFeatures, m_opt.outFeatures, rng);
}

} // namespace towers::engine
