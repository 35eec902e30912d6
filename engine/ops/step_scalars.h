#pragma once
// A step's scalars (StepScalars, step_scalar_values.h) as the host backends read them from a
// tensor in host memory, through the same stepScalar and dropoutSeedOf as the CUDA kernels; and
// Adam's bias corrections, computed in one place for the host arguments and the scalars alike, so
// that an op given its host arguments and one given a step's scalars compute with the same bits.
#include <cmath>
#include <cstdint>

#include "engine/ops/descriptors.h"
#include "engine/ops/step_scalar_values.h"
#include "engine/tensor/tensor.h"

namespace towers::engine {

// Adam's bias corrections for AdamStep::step: 1 - beta1^step and sqrt(1 - beta2^step), in double.
struct AdamCorrections
{
    double first = 1, secondSqrt = 1;
};
inline AdamCorrections adamCorrections(double beta1, double beta2, std::int64_t step)
{
    return {1.0 - std::pow(beta1, double(step)), std::sqrt(1.0 - std::pow(beta2, double(step)))};
}

namespace step_scalars {

// A host scalars tensor's elements (checked by the op's entry: Float64 [kCount]), or nullptr for
// none: what stepScalar and dropoutSeedOf read, as the CUDA kernels read theirs.
inline const double* values(const Tensor& scalars)
{
    return scalars.empty() ? nullptr : scalars.data<double>();
}

inline double lr(double lr, const Tensor& scalars)
{
    return stepScalar(values(scalars), StepScalars::LearningRate, lr);
}

inline MomentumStep momentum(MomentumStep s, const Tensor& scalars)
{
    s.lr = stepScalar(values(scalars), StepScalars::LearningRate, s.lr);
    s.first = stepScalar(values(scalars), StepScalars::MomentumFirst, s.first) != 0;
    return s;
}

// An Adam step's learning rate and bias corrections.
struct Adam
{
    double lr = 0;
    AdamCorrections corrections;
};
inline Adam adam(const AdamStep& s, const Tensor& scalars)
{
    const double* v = values(scalars);
    if (!v) return {s.lr, adamCorrections(s.beta1, s.beta2, s.step)};
    return {v[StepScalars::LearningRate],
            {v[StepScalars::AdamCorrection1], v[StepScalars::AdamCorrection2Sqrt]}};
}

inline double emaKeep(double keep, const Tensor& scalars)
{
    return stepScalar(values(scalars), StepScalars::EmaKeep, keep);
}

inline std::uint64_t dropoutSeed(std::uint64_t seed, const Tensor& scalars)
{
    return dropoutSeedOf(values(scalars), seed);
}

} // namespace step_scalars
} // namespace towers::engine
