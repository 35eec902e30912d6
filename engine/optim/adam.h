#pragma once
#include "engine/optim/optimizer.h"

namespace towers::engine {

struct AdamOptions
{
    double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8; // PyTorch's defaults
    // AdamW: each parameter's weight decay (Parameter::weightDecay) applied by the update,
    // w *= 1 - lr * decay, instead of being part of the model's loss and gradient.
    bool decoupled = false;
};

// Adam as PyTorch's torch.optim.Adam with bias correction (amsgrad off, no weight_decay: weight
// decay is part of the model's loss and gradient), or, decoupled, as torch.optim.AdamW with each
// parameter's own weight_decay (a parameter group each). See AdamStep (ops/descriptors.h).
class Adam final : public Optimizer
{
public:
    // Throws InvalidArgument for betas outside [0, 1) or epsilon <= 0.
    explicit Adam(AdamOptions options = {});

    std::string name() const override { return m_opt.decoupled ? "adamw" : "adam"; }
    bool decaysWeights() const override { return m_opt.decoupled; }
    std::vector<std::string> slotNames() const override { return {"exp_avg", "exp_avg_sq"}; }
    const AdamOptions& options() const { return m_opt; }

    void fillScalars(StepScalars& scalars, double lr) const override;

protected:
    void update(Ops& ops, Parameter& p, double lr, bool first, const Tensor& skip,
                const Tensor& scalars) override;

private:
    AdamOptions m_opt;
};

} // namespace towers::engine
