#include "engine/nn/conv2d.h"

#include "engine/nn/batch_norm.h"

namespace towers::engine {

namespace {
const char* paddingName(Padding p)
{
    switch (p) {
    case Padding::Same:
        return "SAME";
    case Padding::Valid:
        return "VALID";
    case Padding::Explicit:
        return "explicit";
    }
    return "?";
}
} // namespace

Conv2d::Conv2d(std::string name, Conv2dOptions options) : Layer(std::move(name)), m_opt(options)
{
    if (m_opt.inChannels <= 0 || m_opt.outChannels <= 0 || m_opt.kernelH <= 0 ||
        m_opt.kernelW <= 0 || m_opt.stride <= 0)
        throw InvalidArgument("conv2d '" + this->name() +
                              "': channels, kernel and stride must be positive");
    m_weight.name = this->name() + ".weight";
    m_weight.value = Tensor::zeros(
        {m_opt.outChannels, m_opt.inChannels, m_opt.kernelH, m_opt.kernelW}, DType::Float32);
    m_weight.weightDecay = m_opt.weightDecay;
    if (m_opt.bias) {
        m_bias.name = this->name() + ".bias";
        m_bias.value = Tensor::zeros({m_opt.outChannels}, DType::Float32);
    }
}

std::string Conv2d::describe() const
{
    std::string s = std::to_string(m_opt.kernelH) + "x" + std::to_string(m_opt.kernelW) +
                    " conv, " + std::to_string(m_opt.outChannels) + " filters, stride " +
                    std::to_string(m_opt.stride) + ", " + paddingName(m_opt.padding);
    if (!m_opt.bias) s += ", no bias";
    if (m_opt.activation == Activation::Relu) s += ", ReLU";
    return s;
}

Conv2dDesc Conv2d::desc(const Shape& input) const
{
    if (input.rank() != 4 || input[3] != m_opt.inChannels)
        throw ShapeError("conv2d '" + name() + "' expects input [N, H, W, " +
                         std::to_string(m_opt.inChannels) + "], got " + input.str());
    return makeConv2dDesc(input, m_opt.outChannels, m_opt.kernelH, m_opt.kernelW, m_opt.stride,
                          m_opt.stride, m_opt.padding, m_opt.pads);
}

Shape Conv2d::outputShape(const Shape& input) const
{
    return desc(input).outputShape();
}

double Conv2d::forwardFlops(const Shape& input) const
{
    const Conv2dDesc d = desc(input);
    return 2.0 * double(d.outputShape().numel()) * double(m_opt.inChannels) * m_opt.kernelH *
           m_opt.kernelW;
}

namespace {
// The type of an evaluation forward's y: bfloat16 with bf16Activations.
DType evaluationOutput(const ExecContext& ctx)
{
    return ctx.bf16Activations && !ctx.training ? DType::BFloat16 : DType::Float32;
}
} // namespace

void Conv2d::forward(ExecContext& ctx, const Tensor& x, Tensor& y)
{
    Conv2dDesc d = desc(x.shape());
    d.outputDType = evaluationOutput(ctx);
    m_savedValid = ctx.training;
    if (ctx.training)
        ctx.ops.conv2dForwardTraining(d, x, m_weight.value, m_bias.value, y, m_opt.activation,
                                      m_saved);
    else
        ctx.ops.conv2dForward(d, x, m_weight.value, m_bias.value, y, m_opt.activation);
}

bool Conv2d::canFold(const BatchNorm& bn) const
{
    return m_opt.activation == Activation::None && bn.channels() == m_opt.outChannels;
}

void Conv2d::forwardFolding(ExecContext& ctx, const Tensor& x, const BatchNorm& bn, Tensor& y)
{
    if (ctx.training || !canFold(bn))
        throw InvalidArgument("conv2d '" + name() + "': batch norm '" + bn.name() +
                              "' folds in only in evaluation mode, after a convolution without "
                              "activation of its own channels");
    Conv2dDesc d = desc(x.shape());
    d.outputDType = evaluationOutput(ctx);
    m_savedValid = false;
    ctx.ops.foldBatchNorm(m_weight.value, m_bias.value, bn.gamma(), bn.beta(), bn.runningMean(),
                          bn.runningVar(), bn.epsilon(), m_foldedW, m_foldedB);
    ctx.ops.conv2dForward(d, x, m_foldedW, m_foldedB, y, bn.activation());
}

void Conv2d::backward(ExecContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                      Tensor* dx)
{
    // The backend's state from forward only holds after a training forward.
    ctx.ops.conv2dBackward(desc(x.shape()), x, m_weight.value, y, dy, m_opt.activation,
                           m_savedValid ? m_saved : Tensor(), dx, m_weight.grad,
                           biasGradient(m_bias));
}

void Conv2d::collectParameters(std::vector<Parameter*>& out)
{
    out.push_back(&m_weight);
    if (m_opt.bias) out.push_back(&m_bias);
}

void Conv2d::initialize(Rng& rng)
{
    const std::int64_t area = std::int64_t{m_opt.kernelH} * m_opt.kernelW;
    const std::int64_t fanIn = m_opt.inChannels * area, fanOut = m_opt.outChannels * area;
    m_opt.weightInit.apply(m_weight.value, fanIn, fanOut, rng);
    if (m_opt.bias) m_opt.biasInit.apply(m_bias.value, fanIn, fanOut, rng);
}

} // namespace towers::engine
