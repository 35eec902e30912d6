#include "engine/nn/lrn.h"

#include <cstdio>

namespace towers::engine {

Lrn::Lrn(std::string name, int depthRadius, double bias, double alpha, double beta)
    : Layer(std::move(name)), m_radius(depthRadius), m_bias(bias), m_alpha(alpha), m_beta(beta)
{
    makeLrnDesc({1, 1, 1, 1}, depthRadius, bias, alpha, beta); // validates the settings
}

std::string Lrn::describe() const
{
    char buf[128];
    std::snprintf(buf, sizeof buf, "LRN depth radius %d, bias %g, alpha %g, beta %g", m_radius,
                  m_bias, m_alpha, m_beta);
    return buf;
}

Shape Lrn::outputShape(const Shape& input) const
{
    return makeLrnDesc(input, m_radius, m_bias, m_alpha, m_beta).shape;
}

void Lrn::forward(ExecContext& ctx, const Tensor& x, Tensor& y)
{
    ctx.ops.lrnForward(makeLrnDesc(x.shape(), m_radius, m_bias, m_alpha, m_beta), x, y,
                       m_workspace);
}

void Lrn::backward(ExecContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx)
{
    if (dx)
        ctx.ops.lrnBackward(makeLrnDesc(x.shape(), m_radius, m_bias, m_alpha, m_beta), x, y, dy,
                            m_workspace, *dx);
}

} // namespace towers::engine
