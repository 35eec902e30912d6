#pragma once
#include "engine/optim/optimizer.h"

namespace towers::engine {

struct SgdOptions
{
    double momentum = 0; // 0: plain SGD
    double dampening = 0;
    bool nesterov = false;
};

// Stochastic gradient descent as PyTorch's torch.optim.SGD (without its weight_decay: weight
// decay is part of the model's loss and gradient). With momentum 0 it is the tutorial's plain
// w -= lr * grad; otherwise see MomentumStep (ops/descriptors.h) for the exact formulas.
class Sgd final : public Optimizer
{
public:
    // Throws InvalidArgument for momentum outside [0, 1), dampening outside [0, 1], or nesterov
    // without momentum or with dampening (PyTorch's rules).
    explicit Sgd(SgdOptions options = {});

    std::string name() const override;
    std::vector<std::string> slotNames() const override;
    const SgdOptions& options() const { return m_opt; }

protected:
    void update(Ops& ops, Parameter& p, double lr, bool first, const Tensor& skip,
                const Tensor& scalars) override;

private:
    SgdOptions m_opt;
};

} // namespace towers::engine
