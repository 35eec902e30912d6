#pragma once
// Private to engine/cpu: a ceiling on the instruction set of Towers' own Highway kernels (LRN,
// Winograd 5x5), to run on one machine what a CPU without the better instruction sets runs.
//
// TOWERS_SIMD_TARGET=AVX2 (Highway's names, any case: AVX3 for AVX-512, AVX2, SSE4, SSSE3, and the
// baseline, SCALAR or EMU128 as this Highway build has it), read once, makes every Highway kernel
// of the process run on that target or a lower one: with ONEDNN_MAX_CPU_ISA=AVX2 for oneDNN's
// kernels, an AVX-512 machine then trains as an AVX2 one would (the kernels, and the algorithms
// chosen for them, e.g. Winograd5x5::fasterThanDirect). Unset or empty: the best target the CPU
// has. Tests force single targets with forceSimdTargetForTest (lrn_hwy.h) instead.
#include <string>

namespace towers::engine::cpu {

// Applies TOWERS_SIMD_TARGET the first time it is called; later calls only repeat its verdict.
// Throws InvalidArgument naming the variable and the accepted names when it holds another value.
// Cheap after the first call: call it before choosing anything by the current target.
void applySimdTargetLimit();

// The value applied ("" when unset), for reports.
std::string simdTargetLimit();

} // namespace towers::engine::cpu
