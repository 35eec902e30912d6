#pragma once
#include <vector>

#include "engine/nn/layer.h"

namespace towers::engine {

// Plain stochastic gradient descent, the tutorial's optimizer: w -= lr * grad for every trainable
// parameter (buffers are left alone).
class Sgd
{
public:
    explicit Sgd(double learningRate);
    void setLearningRate(double lr);
    double learningRate() const { return m_lr; }
    void step(Ops& ops, const std::vector<Parameter*>& params) const;

private:
    double m_lr;
};

} // namespace towers::engine
