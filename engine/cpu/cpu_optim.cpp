// Optimizer updates on the CPU: one pass over each tensor in float, the operation order of
// PyTorch's torch.optim single-tensor implementations (so results agree to a rounding), spread
// over the calling thread's OpenMP team. Element-wise, hence independent of the thread count. A set
// skip flag (read here: oneDNN's tensors are on the host) leaves everything as it is. Adam's loop,
// whose square root and divisions the compiler keeps scalar, is Highway's (optim_hwy.h).
#include <cmath>

#include "engine/cpu/cpu_common.h"
#include "engine/cpu/optim_hwy.h"
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
    AdamConstants k;
    k.stepSize = float(run.lr / run.corrections.first);
    k.correction2Sqrt = float(run.corrections.secondSqrt);
    k.beta1 = float(s.beta1);
    k.beta2 = float(s.beta2);
    k.epsilon = float(s.epsilon);
    k.oneMinusBeta1 = float(1.0 - s.beta1);
    k.oneMinusBeta2 = float(1.0 - s.beta2);
    k.keep = float(1.0 - run.lr * s.weightDecay); // AdamW's decay: exactly 1 without
    const float* pg = g.data<float>();
    float* pm = m.data<float>();
    float* pv = v.data<float>();
    float* pw = w.data<float>();
    // Highway's vectors on the CPU's best instruction set (optim_hwy.h).
    parallelChunks(w.numel(), [=](std::int64_t begin, std::int64_t end) {
        adamUpdateRange(k, pg, pm, pv, pw, begin, end);
    });
}

} // namespace towers::engine::cpu
