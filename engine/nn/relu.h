#pragma once
#include "engine/nn/layer.h"

namespace towers::engine {

// A stand-alone ReLU (convolutions and linear layers fuse theirs).
class Relu final : public Layer
{
public:
    using Layer::Layer;
    std::string kind() const override { return "relu"; }
    std::string describe() const override { return "ReLU"; }
    Shape outputShape(const Shape& input) const override { return input; }
    void forward(ExecContext& ctx, const Tensor& x, Tensor& y) override
    {
        ctx.ops.reluForward(x, y);
    }
    void backward(ExecContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                  Tensor* dx) override
    {
        (void)x;
        if (dx) ctx.ops.reluBackward(y, dy, *dx);
    }
};

} // namespace towers::engine
