#pragma once
// Class-balanced sampling (TrainConfig::sampling "balanced"): an epoch's order of a training set in
// which every class that has images comes up equally often, its images repeated where it has few
// and only some of them drawn where it has many, as PyTorch's WeightedRandomSampler with inverse
// class frequencies samples an epoch, but without replacement within a class as far as its images
// go, and as a pure function of the epoch's generator: a run resumes bitwise, and every process of
// a run draws the same order.
#include <cstdint>
#include <span>
#include <vector>

#include "engine/tensor/rng.h"

namespace towers::engine {

// The examples of each class in index order, for classes 0 .. the largest label (a class without
// examples has an empty list). Negative labels are not counted.
std::vector<std::vector<std::int64_t>> examplesByClass(std::span<const std::int32_t> labels);

// An epoch's order of `count` examples drawn from `byClass`: the classes with examples share the
// count evenly (the first count % classes of them in class order one more), each class's share
// taken from its examples in random orders one after the other (so that each image of a class
// comes up as often as any other of it, or once more), and the whole shuffled. Empty where no class
// has an example.
std::vector<std::int64_t> balancedOrder(const std::vector<std::vector<std::int64_t>>& byClass,
                                        std::int64_t count, Rng& rng);

} // namespace towers::engine
