#pragma once
#include "engine/nn/layer.h"

namespace towers::engine {

class BatchNorm;

struct Conv2dOptions
{
    std::int64_t inChannels = 0, outChannels = 0;
    int kernelH = 3, kernelW = 3; // the kernel's height and width (Inception's 1x7 and 7x1)
    int stride = 1;
    Padding padding = Padding::Same;
    ExplicitPads pads{};
    bool bias = true;
    Activation activation = Activation::None;
    Init weightInit = Init::torchDefault();
    Init biasInit = Init::torchDefault();
    double weightDecay = 0;
};

// 2-D convolution over NHWC input with OIHW weights ("<name>.weight", "<name>.bias"), with an
// optional fused ReLU.
class Conv2d final : public Layer
{
public:
    Conv2d(std::string name, Conv2dOptions options);

    std::string kind() const override { return "conv2d"; }
    std::string describe() const override;
    Shape outputShape(const Shape& input) const override;
    double forwardFlops(const Shape& input) const override;
    void forward(ExecContext& ctx, const Tensor& x, Tensor& y) override;
    // In evaluation with bfloat16 activations it also writes bfloat16.
    bool takesBf16() const override { return true; }
    void backward(ExecContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                  Tensor* dx) override;
    void collectParameters(std::vector<Parameter*>& out) override;
    void initialize(Rng& rng) override;

    // What it was made with (a model file writes it back: model_file.h).
    const Conv2dOptions& options() const { return m_opt; }

    // Whether `bn`, right after this convolution, can be folded into it in evaluation mode: this
    // convolution has no activation of its own, and bn normalises its output channels.
    bool canFold(const BatchNorm& bn) const;
    // Evaluation mode (ctx.training false): y = bn(this(x)), bn's activation included, as one
    // convolution with bn folded into the weights and bias (ExecContext::foldBatchNorms).
    void forwardFolding(ExecContext& ctx, const Tensor& x, const BatchNorm& bn, Tensor& y);

private:
    Conv2dDesc desc(const Shape& input) const;
    Conv2dOptions m_opt;
    Parameter m_weight, m_bias;
    Tensor m_saved;              // the backend's state from a training forward for backward
    bool m_savedValid = false;   // m_saved belongs to the latest forward
    Tensor m_foldedW, m_foldedB; // forwardFolding's weights and bias
};

} // namespace towers::engine
