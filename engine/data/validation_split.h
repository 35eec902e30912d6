#pragma once
// A validation set held out of a training set (TrainConfig::validation): the images a run
// evaluates on while it trains, so that the test set stays unseen until the user measures the
// chosen checkpoint on it.
#include <cstdint>
#include <vector>

#include "engine/data/dataset.h"

namespace towers::engine {

// How many of a class's `images` a share holds out (splitValidation's rule): round(images x share),
// at least 1 and at most images - 1 of a class of two or more; none of a class of one, or for 0.
std::int64_t heldOutOfClass(std::int64_t images, double share);
// How many images of a set with these class counts a share holds out.
std::int64_t validationImages(const std::vector<std::int64_t>& classCounts, double share);

// The largest share a validation set may take of a training set (TrainConfig::validation, the
// command line, the form): half.
inline constexpr double kMaxValidationShare = 0.5;

// The draw TrainConfig::validation uses: one fixed seed, so that every run on a dataset with the
// same share holds out the same images and their validation accuracies compare.
inline constexpr std::uint64_t kValidationSeed = 0x7a11d;

struct ValidationSplit
{
    ImageSet train, validation;
    // Where each validation image is in the set split, ascending: validation image i is image
    // validationIndex[i] of it (what an index into the validation set names, traced back).
    std::vector<std::int64_t> validationIndex;
};

// The same share of each class's images of `set`, drawn at random: round(count x share) of a
// class, at least one of a class of two or more images and never all of it (a class of one image
// stays in training). The draw depends only on `set`'s labels, `classes`, `share` and `seed`, so
// a resumed run, another process of the run and a run with another weight seed hold out the same
// images; both parts keep the images' order. share = 0 gives an empty validation set.
// InvalidArgument for a share outside [0, 0.5] or a label outside [0, classes).
ValidationSplit splitValidation(const ImageSet& set, int classes, double share,
                                std::uint64_t seed = kValidationSeed);
} // namespace towers::engine
