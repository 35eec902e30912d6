#include "engine/optim/sgd.h"

namespace towers::engine {

Sgd::Sgd(SgdOptions options) : m_opt(options)
{
    if (!(m_opt.momentum >= 0 && m_opt.momentum < 1))
        throw InvalidArgument("SGD momentum must be in [0, 1), got " +
                              std::to_string(m_opt.momentum));
    if (!(m_opt.dampening >= 0 && m_opt.dampening <= 1))
        throw InvalidArgument("SGD dampening must be in [0, 1], got " +
                              std::to_string(m_opt.dampening));
    if (m_opt.nesterov && (m_opt.momentum <= 0 || m_opt.dampening != 0))
        throw InvalidArgument("Nesterov momentum needs a momentum > 0 and zero dampening");
}

std::string Sgd::name() const
{
    if (m_opt.momentum == 0) return "sgd";
    return m_opt.nesterov ? "nesterov" : "momentum";
}

std::vector<std::string> Sgd::slotNames() const
{
    if (m_opt.momentum == 0) return {};
    return {"momentum_buffer"};
}

void Sgd::update(Ops& ops, Parameter& p, double lr, bool first, const Tensor& skip,
                 const Tensor& scalars)
{
    if (m_opt.momentum == 0) {
        ops.sgdUpdate(lr, p.grad, p.value, skip, scalars);
        return;
    }
    MomentumStep s;
    s.lr = lr;
    s.momentum = m_opt.momentum;
    s.dampening = m_opt.dampening;
    s.nesterov = m_opt.nesterov;
    s.first = first;
    ops.momentumUpdate(s, p.grad, slot(p, 0), p.value, skip, scalars);
}

} // namespace towers::engine
