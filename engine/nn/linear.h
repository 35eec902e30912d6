#pragma once
#include "engine/nn/layer.h"

namespace towers::engine {

struct LinearOptions
{
    std::int64_t inFeatures = 0, outFeatures = 0;
    bool bias = true;
    Activation activation = Activation::None;
    Init weightInit = Init::torchDefault();
    Init biasInit = Init::torchDefault();
    double weightDecay = 0;
};

// Fully connected layer on [N, in] with a [out, in] weight, optional bias and fused ReLU.
class Linear final : public Layer
{
public:
    Linear(std::string name, LinearOptions options);

    std::string kind() const override { return "linear"; }
    std::string describe() const override;
    Shape outputShape(const Shape& input) const override;
    double forwardFlops(const Shape& input) const override;
    void forward(ExecContext& ctx, const Tensor& x, Tensor& y) override;
    // y is float32 either way.
    bool takesBf16() const override { return true; }
    void backward(ExecContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                  Tensor* dx) override;
    void collectParameters(std::vector<Parameter*>& out) override;
    void initialize(Rng& rng) override;

    // What it was made with (a model file writes it back: model_file.h).
    const LinearOptions& options() const { return m_opt; }

private:
    LinearOptions m_opt;
    Parameter m_weight, m_bias;
};

} // namespace towers::engine
