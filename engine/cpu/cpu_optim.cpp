// Optimizer updates on the CPU: one pass over each tensor in float, the operation order of
// PyTorch's torch.optim single-tensor implementations (so results agree to a rounding), spread
// over the calling thread's OpenMP team. Element-wise, hence independent of the thread count. A set
// skip flag (read here: oneDNN's tensors are on the host) leaves everything as it is.
#include <cmath>

#include "engine/cpu/cpu_common.h"
#include "engine/ops/op_checks.h"
#include "engine/ops/step_scalars.h"

namespace towers::engine::cpu {

void OneDnnOps::sgdUpdateImpl(double lr, const Tensor& g, Tensor& w, const Tensor& skip,
                              const Tensor& scalars)
{
    if (checks::updateSkipped(skip)) return;
    // axpy's own loop (cpu_elementwise.cpp), so that the bits are axpy(-lr, g, w)'s.
    OneDnnOps::axpyImpl(-step_scalars::lr(lr, scalars), g, w);
}

void OneDnnOps::momentumUpdateImpl(const MomentumStep& step, const Tensor& g, Tensor& buf,
                                   Tensor& w, const Tensor& skip, const Tensor& scalars)
{
    if (checks::updateSkipped(skip)) return;
    const MomentumStep s = step_scalars::momentum(step, scalars);
    const float lr = float(s.lr), mom = float(s.momentum), keep = float(1.0 - s.dampening);
    const bool first = s.first, nesterov = s.nesterov;
    const float* pg = g.data<float>();
    float* pb = buf.data<float>();
    float* pw = w.data<float>();
    parallelChunks(w.numel(), [=](std::int64_t begin, std::int64_t end) TOWERS_INLINE {
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) {
            const float b = first ? pg[i] : pb[i] * mom + keep * pg[i];
            pb[i] = b;
            pw[i] -= lr * (nesterov ? pg[i] + mom * b : b);
        }
    });
}

void OneDnnOps::emaUpdateImpl(double keep, const Tensor& value, Tensor& shadow, const Tensor& skip,
                              const Tensor& scalars)
{
    if (checks::updateSkipped(skip)) return;
    const float k = static_cast<float>(step_scalars::emaKeep(keep, scalars));
    const float* pv = value.data<float>();
    float* ps = shadow.data<float>();
    parallelChunks(shadow.numel(), [=](std::int64_t begin, std::int64_t end) TOWERS_INLINE {
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) ps[i] -= (ps[i] - pv[i]) * k;
    });
}

void OneDnnOps::adamUpdateImpl(const AdamStep& s, const Tensor& g, Tensor& m, Tensor& v, Tensor& w,
                               const Tensor& skip, const Tensor& scalars)
{
    if (s.step < 1) throw InvalidArgument("adamUpdate: step must be at least 1");
    if (checks::updateSkipped(skip)) return;
    // The scalars are computed in double, as Python does, then used in float.
    const step_scalars::Adam run = step_scalars::adam(s, scalars);
    const float stepSize = float(run.lr / run.corrections.first);
    const float bc2Sqrt = float(run.corrections.secondSqrt);
    const float b1 = float(s.beta1), b2 = float(s.beta2), eps = float(s.epsilon);
    const float c1 = float(1.0 - s.beta1), c2 = float(1.0 - s.beta2);
    const float keep = float(1.0 - run.lr * s.weightDecay); // AdamW's decay: exactly 1 without
    const float* pg = g.data<float>();
    float* pm = m.data<float>();
    float* pv = v.data<float>();
    float* pw = w.data<float>();
    parallelChunks(w.numel(), [=](std::int64_t begin, std::int64_t end) TOWERS_INLINE {
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) {
            const float gi = pg[i];
            const float mi = pm[i] * b1 + c1 * gi;
            const float vi = pv[i] * b2 + c2 * (gi * gi);
            pm[i] = mi;
            pv[i] = vi;
            const float wi = pw[i] * keep; // PyTorch's param.mul_, then its addcdiv_
            pw[i] = wi - stepSize * (mi / (std::sqrt(vi) / bc2Sqrt + eps));
        }
    });
}

} // namespace towers::engine::cpu
