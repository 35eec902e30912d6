#pragma once
// A step's scalars (the values that change from step to step) and how an op reads them, as plain
// C++17 that the host backends and the CUDA kernels share (kernel_math.h includes it; constexpr,
// so device code can call it), as dropout_mask.h is shared: one layout and one reading for both.
#include <cstdint>

#include "engine/ops/dropout_mask.h"

namespace towers::engine {

// The scalars of a training step, as a Float64 tensor of StepScalars::kCount elements where the
// step's tensors live: the updates and dropout read them from there when they run, instead of
// from their host arguments, so that a step's ops recorded once (a CUDA graph) and replayed would
// read each step's values (the host writes the tensor before the step). An op given an empty
// tensor reads its host arguments, as before.
struct StepScalars
{
    enum Index : int
    {
        LearningRate,        // lr of sgdUpdate, MomentumStep and AdamStep
        MomentumFirst,       // MomentumStep::first, as 0 or 1
        AdamCorrection1,     // 1 - beta1^step (AdamStep)
        AdamCorrection2Sqrt, // sqrt(1 - beta2^step) (AdamStep)
        EmaKeep,             // emaUpdate's keep
        DropoutStep,         // the step dropout mixes into its seed (dropoutSeed), a whole number
        kCount
    };
    double values[kCount] = {0, 0, 1, 1, 0, 0};
};

// The value an op runs with: the step's scalar `index` when it has scalars (not nullptr: their
// elements, where the op computes), else its host argument.
constexpr double stepScalar(const double* scalars, int index, double host)
{
    return scalars != nullptr ? scalars[index] : host;
}

// dropoutForward's seed: the host's as it is, or dropoutSeed(seed, the scalars' DropoutStep).
constexpr std::uint64_t dropoutSeedOf(const double* scalars, std::uint64_t seed)
{
    return scalars != nullptr
               ? dropoutSeed(seed, static_cast<std::uint64_t>(scalars[StepScalars::DropoutStep]))
               : seed;
}

} // namespace towers::engine
