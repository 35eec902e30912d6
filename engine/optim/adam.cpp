#include "engine/optim/adam.h"

#include <cmath>

#include "engine/ops/step_scalars.h"

namespace towers::engine {

Adam::Adam(AdamOptions options) : m_opt(options)
{
    if (!(m_opt.beta1 >= 0 && m_opt.beta1 < 1))
        throw InvalidArgument("Adam beta1 must be in [0, 1), got " + std::to_string(m_opt.beta1));
    if (!(m_opt.beta2 >= 0 && m_opt.beta2 < 1))
        throw InvalidArgument("Adam beta2 must be in [0, 1), got " + std::to_string(m_opt.beta2));
    if (!(m_opt.epsilon > 0) || !std::isfinite(m_opt.epsilon))
        throw InvalidArgument("Adam epsilon must be a positive number, got " +
                              std::to_string(m_opt.epsilon));
}

void Adam::fillScalars(StepScalars& scalars, double lr) const
{
    Optimizer::fillScalars(scalars, lr);
    const AdamCorrections c = adamCorrections(m_opt.beta1, m_opt.beta2, stepCount() + 1);
    scalars.values[StepScalars::AdamCorrection1] = c.first;
    scalars.values[StepScalars::AdamCorrection2Sqrt] = c.secondSqrt;
}

void Adam::update(Ops& ops, Parameter& p, double lr, bool first, const Tensor& skip,
                  const Tensor& scalars)
{
    (void)first;
    AdamStep s;
    s.lr = lr;
    s.beta1 = m_opt.beta1;
    s.beta2 = m_opt.beta2;
    s.epsilon = m_opt.epsilon;
    s.step = stepCount() + 1;
    if (m_opt.decoupled) s.weightDecay = p.weightDecay;
    ops.adamUpdate(s, p.grad, slot(p, 0), slot(p, 1), p.value, skip, scalars);
}

} // namespace towers::engine
