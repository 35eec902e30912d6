#include "engine/nn/dropout.h"

#include <cstdio>

#include "engine/ops/dropout_mask.h"

namespace towers::engine {

Dropout::Dropout(std::string name, double rate, std::uint64_t seed)
    : Layer(std::move(name)), m_rate(rate), m_seed(seed)
{
    if (!(rate >= 0 && rate < 1))
        throw InvalidArgument("dropout '" + this->name() + "': rate must be in [0, 1)");
}

std::string Dropout::describe() const
{
    char buf[64];
    std::snprintf(buf, sizeof buf, "dropout, rate %g", m_rate);
    return buf;
}

void Dropout::forward(ExecContext& ctx, const Tensor& x, Tensor& y)
{
    m_lastWasTraining = ctx.training && m_enabled;
    if (m_lastWasTraining) {
        // Replica 0 keeps the single-tower masks; every other tower gets its own stream.
        std::uint64_t seed = m_seed;
        if (ctx.replica != 0) seed = splitmix64(seed ^ splitmix64(0xD1CEull + ctx.replica));
        // The step is mixed in here, or where the step's scalars live (dropoutSeed alike).
        if (ctx.scalars)
            ctx.ops.dropoutForward(x, m_rate, seed, y, m_mask, *ctx.scalars);
        else
            ctx.ops.dropoutForward(x, m_rate, dropoutSeed(seed, ctx.step), y, m_mask, Tensor());
    } else { // on the context's stream: a copy outside its ops would wait for every stream
        ctx.ops.copy(x, y);
    }
}

void Dropout::backward(ExecContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                       Tensor* dx)
{
    (void)x;
    (void)y;
    if (!dx) return;
    if (!m_enabled) {
        if (dx->empty() || dx->raw() != dy.raw()) ctx.ops.copy(dy, *dx);
        return;
    }
    if (!m_lastWasTraining)
        throw InvalidArgument("dropout '" + name() + "': backward after an evaluation forward");
    ctx.ops.dropoutBackward(dy, m_mask, m_rate, *dx);
}

} // namespace towers::engine
