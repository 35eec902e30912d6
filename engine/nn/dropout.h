#pragma once
#include "engine/nn/layer.h"

namespace towers::engine {

// Inverted dropout: in training, drops each element with probability `rate` and scales the rest by
// 1 / (1 - rate); identity in evaluation. The mask is a pure function of (seed, step, replica,
// element), so runs are reproducible whatever the backend or thread count, and towers differ.
class Dropout final : public Layer
{
public:
    Dropout(std::string name, double rate, std::uint64_t seed = 0);

    std::string kind() const override { return "dropout"; }
    std::string describe() const override;
    Shape outputShape(const Shape& input) const override { return input; }
    void forward(ExecContext& ctx, const Tensor& x, Tensor& y) override;
    void backward(ExecContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                  Tensor* dx) override;
    void initialize(Rng& rng) override { m_seed = rng.next(); }

    double rate() const { return m_rate; }
    // A disabled dropout is the identity in training too: for exact comparisons between runs
    // that split a batch differently (one tower of 64 against two of 32).
    void setEnabled(bool enabled) { m_enabled = enabled; }
    bool enabled() const { return m_enabled; }
    // The mask of the latest training forward (UInt8, 1 = kept).
    const Tensor& mask() const { return m_mask; }

private:
    double m_rate;
    std::uint64_t m_seed;
    bool m_enabled = true;
    bool m_lastWasTraining = false;
    Tensor m_mask;
};

} // namespace towers::engine
