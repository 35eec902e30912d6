#pragma once
#include "engine/nn/layer.h"

namespace towers::engine {

// [N, H, W, C] -> [N, C*H*W] in C,H,W order (PyTorch's flatten of NCHW), so that the next linear
// layer's weight has PyTorch's layout.
class Flatten final : public Layer
{
public:
    using Layer::Layer;
    std::string kind() const override { return "flatten"; }
    std::string describe() const override { return "flatten (C, H, W order)"; }
    Shape outputShape(const Shape& input) const override;
    void forward(ExecContext& ctx, const Tensor& x, Tensor& y) override;
    bool takesBf16() const override { return true; }
    void backward(ExecContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                  Tensor* dx) override;
};

} // namespace towers::engine
