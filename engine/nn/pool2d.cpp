#include "engine/nn/pool2d.h"

namespace towers::engine {

Pool2d::Pool2d(std::string name, const char* what, int kernel, int stride, Padding padding,
               bool global)
    : Layer(std::move(name)), m_what(what), m_kernel(kernel), m_stride(stride), m_padding(padding),
      m_global(global)
{
    if (kernel <= 0 || stride <= 0)
        throw InvalidArgument(std::string(what) + " pool '" + this->name() +
                              "': kernel and stride must be positive");
}

std::string Pool2d::describe() const
{
    if (m_global) return std::string("global ") + m_what + " pool";
    return std::to_string(m_kernel) + "x" + std::to_string(m_kernel) + " " + m_what +
           " pool, stride " + std::to_string(m_stride) +
           (m_padding == Padding::Same ? ", SAME" : ", VALID");
}

Pool2dDesc Pool2d::desc(const Shape& x) const
{
    if (x.rank() != 4)
        throw ShapeError(kind() + " '" + name() + "' expects NHWC input, got " + x.str());
    if (m_global)
        return makePool2dDesc(x, int(x[1]), int(x[2]), int(x[1]), int(x[2]), Padding::Valid);
    return makePool2dDesc(x, m_kernel, m_kernel, m_stride, m_stride, m_padding);
}

Shape Pool2d::outputShape(const Shape& input) const
{
    return desc(input).outputShape();
}

MaxPool2d::MaxPool2d(std::string name, int kernel, int stride, Padding padding)
    : Pool2d(std::move(name), "max", kernel, stride, padding, false)
{
}

MaxPool2d::MaxPool2d(std::string name) : Pool2d(std::move(name), "max", 1, 1, Padding::Valid, true)
{
}

std::unique_ptr<MaxPool2d> MaxPool2d::global(std::string name)
{
    return std::unique_ptr<MaxPool2d>(new MaxPool2d(std::move(name)));
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

AvgPool2d::AvgPool2d(std::string name, int kernel, int stride, Padding padding)
    : Pool2d(std::move(name), "average", kernel, stride, padding, false)
{
}

AvgPool2d::AvgPool2d(std::string name)
    : Pool2d(std::move(name), "average", 1, 1, Padding::Valid, true)
{
}

std::unique_ptr<AvgPool2d> AvgPool2d::global(std::string name)
{
    return std::unique_ptr<AvgPool2d>(new AvgPool2d(std::move(name)));
}

void AvgPool2d::forward(ExecContext& ctx, const Tensor& x, Tensor& y)
{
    ctx.ops.avgPoolForward(desc(x.shape()), x, y);
}

void AvgPool2d::backward(ExecContext& ctx, const Tensor& x, const Tensor& /*y*/, const Tensor& dy,
                         Tensor* dx)
{
    if (dx) ctx.ops.avgPoolBackward(desc(x.shape()), dy, *dx);
}

} // namespace towers::engine
