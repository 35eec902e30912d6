#include "engine/nn/flatten.h"

namespace towers::engine {

Shape Flatten::outputShape(const Shape& x) const
{
    if (x.rank() != 4)
        throw ShapeError("flatten '" + name() + "' expects NHWC input, got " + x.str());
    return {x[0], x[1] * x[2] * x[3]};
}

void Flatten::forward(ExecContext& ctx, const Tensor& x, Tensor& y)
{
    const Shape out = outputShape(x.shape());
    ctx.ops.nhwcToNchw(x, y);
    y = y.reshaped(out); // a view of the same bytes
}

void Flatten::backward(ExecContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                       Tensor* dx)
{
    (void)y;
    if (!dx) return;
    const Shape& s = x.shape();
    ctx.ops.nchwToNhwc(dy.reshaped({s[0], s[3], s[1], s[2]}), *dx);
}

} // namespace towers::engine
