#pragma once
#include "engine/nn/layer.h"

namespace towers::engine {

// What max and average pooling share: a square window of `kernel` moved by `stride` with SAME or
// VALID padding, or, `global`, each channel's whole plane pooled to 1x1.
class Pool2d : public Layer
{
public:
    std::string describe() const override;
    Shape outputShape(const Shape& input) const override;

    int kernel() const { return m_kernel; }
    int stride() const { return m_stride; }
    Padding padding() const { return m_padding; }
    bool isGlobal() const { return m_global; }

protected:
    // `what`: "max", "average" (in descriptions and messages).
    Pool2d(std::string name, const char* what, int kernel, int stride, Padding padding,
           bool global);
    Pool2dDesc desc(const Shape& input) const;

private:
    const char* m_what;
    int m_kernel, m_stride;
    Padding m_padding;
    bool m_global;
};

// Max pooling over NHWC input.
class MaxPool2d final : public Pool2d
{
public:
    MaxPool2d(std::string name, int kernel, int stride, Padding padding);
    static std::unique_ptr<MaxPool2d> global(std::string name);

    std::string kind() const override { return "maxpool"; }
    void forward(ExecContext& ctx, const Tensor& x, Tensor& y) override;
    bool takesBf16() const override { return true; }
    void backward(ExecContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                  Tensor* dx) override;

private:
    MaxPool2d(std::string name); // global
    Tensor m_workspace;
};

// Average pooling over NHWC input: a window's mean over its real elements (pads do not count, as
// PyTorch's AvgPool2d with count_include_pad=False and ONNX's AveragePool); global, the mean of
// each channel (PyTorch's AdaptiveAvgPool2d(1), ONNX's GlobalAveragePool).
class AvgPool2d final : public Pool2d
{
public:
    AvgPool2d(std::string name, int kernel, int stride, Padding padding);
    static std::unique_ptr<AvgPool2d> global(std::string name);

    std::string kind() const override { return "avgpool"; }
    void forward(ExecContext& ctx, const Tensor& x, Tensor& y) override;
    void backward(ExecContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                  Tensor* dx) override;

private:
    AvgPool2d(std::string name); // global
};

} // namespace towers::engine
