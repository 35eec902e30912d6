#pragma once
// Private to engine/cpu: the Adam(W) update of a range of float32 elements (OneDnnOps::
// adamUpdateImpl's loop), written once with Google Highway and compiled for every x86-64
// instruction set it knows; each call runs on the best one the CPU has (or TOWERS_SIMD_TARGET's,
// simd_target.h). The plain loop it replaces did not vectorise at all: std::sqrt may set errno,
// so the compiler kept one scalar square root and two divisions per element, 7 % of an Adam
// training step's time on 2 Zen 4 cores.
#include <cstdint>

namespace towers::engine::cpu {

// An Adam step's constants in float, as the update uses them (AdamStep, ops/descriptors.h):
//   m = m * beta1 + oneMinusBeta1 * g;   v = v * beta2 + oneMinusBeta2 * (g * g)
//   w = w * keep - stepSize * (m / (sqrt(v) / correction2Sqrt + epsilon))
// with keep = 1 - lr * weightDecay (AdamW's decay; exactly 1 for Adam) and stepSize =
// lr / (1 - beta1^step).
struct AdamConstants
{
    float beta1 = 0.9f, beta2 = 0.999f, oneMinusBeta1 = 0.1f, oneMinusBeta2 = 0.001f;
    float epsilon = 1e-8f, stepSize = 0, correction2Sqrt = 1, keep = 1;
};

// Elements [begin, end) of g, m, v and w (m, v and w updated in place). Any range, on any thread:
// ranges share no writes. Every element gets the same arithmetic, the range's last partial
// vector included.
void adamUpdateRange(const AdamConstants& k, const float* g, float* m, float* v, float* w,
                     std::int64_t begin, std::int64_t end);

} // namespace towers::engine::cpu
