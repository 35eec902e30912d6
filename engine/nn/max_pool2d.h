#pragma once
#include "engine/nn/layer.h"

namespace towers::engine {

// Max pooling over NHWC input. `global` pools each channel's whole plane to 1x1.
class MaxPool2d final : public Layer
{
public:
    MaxPool2d(std::string name, int kernel, int stride, Padding padding);
    static std::unique_ptr<MaxPool2d> global(std::string name);

    std::string kind() const override { return "maxpool"; }
    std::string describe() const override;
    Shape outputShape(const Shape& input) const override;
    void forward(ExecContext& ctx, const Tensor& x, Tensor& y) override;
    void backward(ExecContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                  Tensor* dx) override;

    int kernel() const { return m_kernel; }
    int stride() const { return m_stride; }
    Padding padding() const { return m_padding; }
    bool isGlobal() const { return m_global; }

private:
    Pool2dDesc desc(const Shape& input) const;
    int m_kernel, m_stride;
    Padding m_padding;
    bool m_global = false;
    Tensor m_workspace;
};

} // namespace towers::engine
