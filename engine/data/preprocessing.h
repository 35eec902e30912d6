#pragma once
// How 8-bit dataset images become model input: the training distortions (the seeds'
// distorted_inputs for CIFAR-10, small translations for the 28x28 sets), the evaluation crop, and
// normalisation. A recipe is plain data with a JSON form, stored in every checkpoint so inference
// preprocesses exactly as training evaluated.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/tensor/rng.h"

namespace towers::engine {

struct Preprocessing
{
    // The model's input, [height, width, channels]. A source image larger than this is cropped:
    // randomly when augmenting, centrally otherwise (the seeds' 24x24 crops of 32x32 CIFAR-10).
    int height = 0, width = 0, channels = 0;

    // Training distortions, applied only when augmenting, in this order: crop; translation (pad
    // with zeros by `translate` pixels, then crop back at a random offset, i.e. a shift of up to
    // +-translate); left-right flip with probability 1/2; brightness + U(-brightnessDelta,
    // +brightnessDelta) on the 0..255 scale; contrast: (x - mean) * U(contrastLower,
    // contrastUpper) + mean per channel (tf.image.random_contrast).
    int translate = 0;
    bool flip = false;
    double brightnessDelta = 0;
    double contrastLower = 1, contrastUpper = 1;

    // Normalisation, always applied last:
    //   PerImage — tf.image.per_image_standardization: (x - mean) / max(stddev, 1/sqrt(numel))
    //   MeanStd  — (x / 255 - mean[c]) / std[c] with the training set's per-channel statistics
    //   Scale    — x / 255
    enum class Normalization { PerImage, MeanStd, Scale };
    Normalization normalization = Normalization::Scale;
    std::vector<double> mean, stddev; // per channel, for MeanStd

    bool augments() const
    {
        return translate > 0 || flip || brightnessDelta > 0 || contrastLower != 1 || contrastUpper != 1;
    }

    // {"height":24,"width":24,"channels":3,"translate":0,...,"normalization":"per_image"}
    std::string toJson() const;
    // Throws InvalidArgument naming the field that is missing or out of range.
    static Preprocessing fromJson(const std::string& json);
    // Checks that the recipe is coherent for source images of `source` ([H, W, C]): same channels,
    // source at least as large as the output, sensible ranges. Throws InvalidArgument.
    void validateFor(const Shape& source) const;
};

// The seeds' CIFAR-10 recipe for a crop of `size` (24 for the tutorial network): random crop,
// flip, brightness 63, contrast [0.2, 1.8], per-image standardisation.
Preprocessing cifarDistortions(int size);
// The 28x28 grayscale recipe: optional translation by up to `translate` pixels and normalisation
// by the training set's mean and standard deviation (computed from `train`).
Preprocessing translateAndNormalize(const ImageSet& train, int translate);

// Preprocesses one image (set.image(i)) into `out` (height * width * channels floats, HWC).
// augment=false gives the evaluation form (central crop, no distortion). `rng` drives the
// distortions and is only drawn from when augmenting.
void preprocessImage(const Preprocessing& p, const ImageSet& set, std::int64_t i, bool augment,
                     Rng& rng, float* out);

} // namespace towers::engine
