#pragma once
#include "engine/nn/layer.h"

namespace towers::engine {

// Batch normalisation over channels, PyTorch's BatchNorm2d/1d: parameters "weight" (gamma) and
// "bias" (beta), buffers "running_mean", "running_var" and "num_batches_tracked"; with an optional
// fused ReLU after it (PyTorch's F.relu(bn(x)), the ReLU a module without parameters).
class BatchNorm final : public Layer
{
public:
    BatchNorm(std::string name, std::int64_t channels, double epsilon = 1e-5, double momentum = 0.1,
              Activation activation = Activation::None);

    std::string kind() const override { return "batchnorm"; }
    std::string describe() const override;
    Shape outputShape(const Shape& input) const override;
    void forward(ExecContext& ctx, const Tensor& x, Tensor& y) override;
    void backward(ExecContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                  Tensor* dx) override;
    void collectParameters(std::vector<Parameter*>& out) override;
    void initialize(Rng& rng) override;

    double epsilon() const { return m_epsilon; }
    double momentum() const { return m_momentum; }
    Activation activation() const { return m_activation; }
    std::int64_t channels() const { return m_channels; }
    // Its parameters and running statistics (a convolution before it folds them in).
    const Tensor& gamma() const { return m_gamma.value; }
    const Tensor& beta() const { return m_beta.value; }
    const Tensor& runningMean() const { return m_runningMean.value; }
    const Tensor& runningVar() const { return m_runningVar.value; }

private:
    BatchNormDesc desc(const Shape& input) const;
    std::int64_t m_channels;
    double m_epsilon, m_momentum;
    Activation m_activation;
    Parameter m_gamma, m_beta, m_runningMean, m_runningVar, m_batches;
    Tensor m_saveMean, m_saveVar, m_saved, m_dx;
    bool m_savedValid = false;
};

} // namespace towers::engine
