#include "engine/nn/max_pool2d.h"

namespace towers::engine {

MaxPool2d::MaxPool2d(std::string name, int kernel, int stride, Padding padding)
    : Layer(std::move(name)), m_kernel(kernel), m_stride(stride), m_padding(padding)
{
    if (kernel <= 0 || stride <= 0)
        throw InvalidArgument("maxpool '" + this->name() + "': kernel and stride must be positive");
}

std::unique_ptr<MaxPool2d> MaxPool2d::global(std::string name)
{
    auto p = std::make_unique<MaxPool2d>(std::move(name), 1, 1, Padding::Valid);
    p->m_global = true;
    return p;
}

std::string MaxPool2d::describe() const
{
    if (m_global) return "global max pool";
    return std::to_string(m_kernel) + "x" + std::to_string(m_kernel) + " max pool, stride " +
           std::to_string(m_stride) + (m_padding == Padding::Same ? ", SAME" : ", VALID");
}

Pool2dDesc MaxPool2d::desc(const Shape& x) const
{
    if (x.rank() != 4)
        throw ShapeError("maxpool '" + name() + "' expects NHWC input, got " + x.str());
    if (m_global)
        return makePool2dDesc(x, int(x[1]), int(x[2]), int(x[1]), int(x[2]), Padding::Valid);
    return makePool2dDesc(x, m_kernel, m_kernel, m_stride, m_stride, m_padding);
}

Shape MaxPool2d::outputShape(const Shape& input) const
{
    return desc(input).outputShape();
}

void MaxPool2d::forward(ExecContext& ctx, const Tensor& x, Tensor& y)
{
    ctx.ops.maxPoolForward(desc(x.shape()), x, y, m_workspace);
}

void MaxPool2d::backward(ExecContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                         Tensor* dx)
{
    if (dx) ctx.ops.maxPoolBackward(desc(x.shape()), x, y, dy, m_workspace, *dx);
}

} // namespace towers::engine
