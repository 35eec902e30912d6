#pragma once
// A step's scalars (StepScalars, descriptors.h) as the ops use them: made by the host for a step,
// and read by a backend whose scalars tensor is in host memory (a GPU backend reads them on the
// device, from the same values). One place for each value, so that an op given its host
// arguments and one given a step's scalars compute with the same bits.
#include <cmath>
#include <cstdint>

#include "engine/ops/descriptors.h"
#include "engine/ops/dropout_mask.h"
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

// The values of a host scalars tensor (checked by the op's entry: Float64 [kCount]).
inline double at(const Tensor& scalars, StepScalars::Index i)
{
    return scalars.data<double>()[i];
}

inline double lr(double lr, const Tensor& scalars)
{
    return scalars.empty() ? lr : at(scalars, StepScalars::LearningRate);
}

inline MomentumStep momentum(MomentumStep s, const Tensor& scalars)
{
    if (!scalars.empty()) {
        s.lr = at(scalars, StepScalars::LearningRate);
        s.first = at(scalars, StepScalars::MomentumFirst) != 0;
    }
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
    if (scalars.empty()) return {s.lr, adamCorrections(s.beta1, s.beta2, s.step)};
    return {
        at(scalars, StepScalars::LearningRate),
        {at(scalars, StepScalars::AdamCorrection1), at(scalars, StepScalars::AdamCorrection2Sqrt)}};
}

inline double emaKeep(double keep, const Tensor& scalars)
{
    return scalars.empty() ? keep : at(scalars, StepScalars::EmaKeep);
}

inline std::uint64_t dropoutSeed(std::uint64_t seed, const Tensor& scalars)
{
    return scalars.empty()
               ? seed
               : engine::dropoutSeed(seed, std::uint64_t(at(scalars, StepScalars::DropoutStep)));
}

} // namespace step_scalars
} // namespace towers::engine
