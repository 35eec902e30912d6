// Optimizer updates: plain loops in double, rounded once to the tensor's dtype per stored value;
// a set skip flag (read here: the reference's tensors are on the host) leaves everything as it is.
#include <cmath>

#include "engine/ops/op_checks.h"
#include "engine/ops/step_scalars.h"
#include "engine/reference/ref_common.h"

namespace towers::engine::reference {

void ReferenceOps::sgdUpdateImpl(double lr, const Tensor& g, Tensor& w, const Tensor& skip,
                                 const Tensor& scalars)
{
    if (checks::updateSkipped(skip)) return;
    ReferenceOps::axpyImpl(-step_scalars::lr(lr, scalars), g,
                           w); // axpy's own loop: the bits of axpy(-lr, g, w)
}

void ReferenceOps::momentumUpdateImpl(const MomentumStep& step, const Tensor& g, Tensor& buf,
                                      Tensor& w, const Tensor& skip, const Tensor& scalars)
{
    if (checks::updateSkipped(skip)) return;
    const MomentumStep s = step_scalars::momentum(step, scalars);
    byDType(w.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* pg = g.data<T>();
        T* pb = buf.data<T>();
        T* pw = w.data<T>();
        for (std::int64_t i = 0; i < w.numel(); ++i) {
            const double gi = pg[i];
            const double b = s.first ? gi : s.momentum * double(pb[i]) + (1.0 - s.dampening) * gi;
            pb[i] = static_cast<T>(b);
            const double d = s.nesterov ? gi + s.momentum * double(pb[i]) : double(pb[i]);
            pw[i] = static_cast<T>(double(pw[i]) - s.lr * d);
        }
    });
}

void ReferenceOps::emaUpdateImpl(double hostKeep, const Tensor& value, Tensor& shadow,
                                 const Tensor& skip, const Tensor& scalars)
{
    if (checks::updateSkipped(skip)) return;
    const double keep = step_scalars::emaKeep(hostKeep, scalars);
    byDType(shadow.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* pv = value.data<T>();
        T* ps = shadow.data<T>();
        // In the tensor's own precision, as TensorFlow's assign_moving_average (and the host's
        // Ema::update) compute it: the average is a running state, not a value to refine.
        const T k = static_cast<T>(keep);
        for (std::int64_t i = 0; i < shadow.numel(); ++i) ps[i] -= (ps[i] - pv[i]) * k;
    });
}

void ReferenceOps::adamUpdateImpl(const AdamStep& s, const Tensor& g, Tensor& m, Tensor& v,
                                  Tensor& w, const Tensor& skip, const Tensor& scalars)
{
    if (s.step < 1) throw InvalidArgument("adamUpdate: step must be at least 1");
    if (checks::updateSkipped(skip)) return;
    const step_scalars::Adam run = step_scalars::adam(s, scalars);
    const double lr = run.lr, bc1 = run.corrections.first, bc2Sqrt = run.corrections.secondSqrt;
    const double keep = 1.0 - lr * s.weightDecay; // AdamW's decay: exactly 1 without
    byDType(w.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* pg = g.data<T>();
        T* pm = m.data<T>();
        T* pv = v.data<T>();
        T* pw = w.data<T>();
        for (std::int64_t i = 0; i < w.numel(); ++i) {
            const double gi = pg[i];
            pm[i] = static_cast<T>(s.beta1 * double(pm[i]) + (1.0 - s.beta1) * gi);
            pv[i] = static_cast<T>(s.beta2 * double(pv[i]) + (1.0 - s.beta2) * gi * gi);
            const double denom = std::sqrt(double(pv[i])) / bc2Sqrt + s.epsilon;
            const T decayed = static_cast<T>(double(pw[i]) * keep); // PyTorch's param.mul_
            pw[i] = static_cast<T>(double(decayed) - lr / bc1 * double(pm[i]) / denom);
        }
    });
}

} // namespace towers::engine::reference
