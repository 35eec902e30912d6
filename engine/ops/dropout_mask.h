#pragma once
// Dropout masks from a counter-based hash, so every backend and any number of threads draw the
// same mask for the same (seed, element) pair.
#include <cstdint>

#include "engine/tensor/splitmix64.h"

namespace towers::engine {

// Keep threshold on 32 bits: element kept when its hash is >= rate * 2^32.
constexpr std::uint32_t dropoutThreshold(double rate)
{
    return rate <= 0 ? 0u : static_cast<std::uint32_t>(rate * 4294967296.0);
}

// A step's dropout seed from a layer's (on its tower) and the step: dropoutForward's seed where the
// step comes from a step's StepScalars (and what a layer passes when the host mixes it in).
constexpr std::uint64_t dropoutSeed(std::uint64_t seed, std::uint64_t step)
{
    return splitmix64(seed ^ splitmix64(step));
}

constexpr bool dropoutKeeps(std::uint64_t seed, std::uint64_t index, std::uint32_t threshold)
{
    return static_cast<std::uint32_t>(splitmix64(seed ^ splitmix64(index)) >> 32) >= threshold;
}

} // namespace towers::engine
