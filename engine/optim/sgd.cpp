#include "engine/optim/sgd.h"

#include <cmath>

namespace towers::engine {

Sgd::Sgd(double learningRate) : m_lr(0) { setLearningRate(learningRate); }

void Sgd::setLearningRate(double lr)
{
    if (!(lr > 0) || !std::isfinite(lr)) throw InvalidArgument("learning rate must be a positive number");
    m_lr = lr;
}

void Sgd::step(Ops& ops, const std::vector<Parameter*>& params) const
{
    for (auto* p : params) {
        if (!p->trainable) continue;
        if (p->grad.empty()) throw InvalidArgument("parameter '" + p->name + "' has no gradient: run backward first");
        ops.axpy(-m_lr, p->grad, p->value);
    }
}

} // namespace towers::engine
