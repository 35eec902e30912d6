#pragma once
// Private to engine/cpu: a ceiling on the instruction set of Towers' own Highway kernels (LRN,
// max pooling, Winograd, the Adam update), to run on one machine what a CPU without the better
// instruction sets runs.
//
// TOWERS_SIMD_TARGET=AVX2 (Highway's names, any case: AVX3 for AVX-512, AVX2, SSE4, SSSE3, and the
// baseline, SCALAR or EMU128 as this Highway build has it), read once, makes every Highway kernel
// of the process run on that target or a lower one: with ONEDNN_MAX_CPU_ISA=AVX2 for oneDNN's
// kernels, an AVX-512 machine then trains as an AVX2 one would (the kernels, and the algorithms
// chosen for them, e.g. Winograd5x5::fasterThanDirect). Unset or empty: the best target the CPU
// has. Tests force single targets with ForcedSimdTarget (below) instead.
#include <cstdint>
#include <string>
#include <vector>

namespace towers::engine::cpu {

// Applies TOWERS_SIMD_TARGET the first time it is called; later calls only repeat its verdict.
// Throws InvalidArgument naming the variable and the accepted names when it holds another value.
// Cheap after the first call: call it before choosing anything by the current target.
void applySimdTargetLimit();

// The value applied ("" when unset), for reports.
std::string simdTargetLimit();

struct SimdTarget
{
    std::int64_t id = 0;    // Highway's bit for the target, for ForcedSimdTarget
    std::string name;       // Highway's name: "AVX3" (AVX-512), "AVX2", "SSE4", "SSSE3", "SCALAR"
    bool supported = false; // this CPU can run it, and TOWERS_SIMD_TARGET allows it
};
// Every target Towers' Highway kernels were compiled for, best first. Applies TOWERS_SIMD_TARGET
// first: InvalidArgument when it names no target.
std::vector<SimdTarget> simdTargets();

// Whether the element-wise kernels' AVX-512 copies may run (cpu_common.h's cpuIsWide): an AVX3
// target is among simdTargets() that are supported, i.e. the CPU has AVX-512 and
// TOWERS_SIMD_TARGET does not hold the process below it.
bool avx512Allowed();

// For tests: while it lives, every Highway kernel of the process runs on `id` (a supported target
// of simdTargets()); then again on the best one this process may run. Not while kernels run.
class ForcedSimdTarget
{
public:
    explicit ForcedSimdTarget(std::int64_t id);
    ~ForcedSimdTarget();
    ForcedSimdTarget(const ForcedSimdTarget&) = delete;
    ForcedSimdTarget& operator=(const ForcedSimdTarget&) = delete;
};

} // namespace towers::engine::cpu
