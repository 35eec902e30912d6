#pragma once
// How 8-bit dataset images become model input: the training distortions (the seeds'
// distorted_inputs for CIFAR-10, small translations for the 28x28 sets), the evaluation crop, and
// normalisation. A recipe is plain data with a JSON form, stored in every checkpoint so inference
// preprocesses exactly as training evaluated.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/data/distortion_math.h"
#include "engine/data/preprocess_desc.h"
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
    enum class Normalization
    {
        PerImage,
        MeanStd,
        Scale
    };
    Normalization normalization = Normalization::Scale;
    std::vector<double> mean, stddev; // per channel, for MeanStd

    bool augments() const
    {
        return translate > 0 || flip || brightnessDelta > 0 || contrastLower != 1 ||
               contrastUpper != 1;
    }

    // {"height":24,"width":24,"channels":3,"translate":0,...,"normalization":"per_image"}
    std::string toJson() const;
    // Throws InvalidArgument naming the field that is missing or out of range.
    static Preprocessing fromJson(const std::string& json);
    // Checks that the recipe is coherent for source images of `source` ([H, W, C]): same channels,
    // source at least as large as the output, sensible ranges. Throws InvalidArgument.
    void validateFor(const Shape& source) const;
};

// "per_image", "mean_std" or "scale": the recipe's JSON name of a normalisation (and the ONNX
// export's metadata).
const char* normalizationName(Preprocessing::Normalization n);

// The recipe as the preprocessImages op takes it (its output size and normalisation; the
// distortions travel drawn, as rows of distortion_math.h's draw columns), and back.
PreprocessDesc preprocessDesc(const Preprocessing& p);
Preprocessing preprocessingOf(const PreprocessDesc& d);

// The seeds' distorted_inputs for a model input of `input` ([H, W, C]): random crop to it, flip,
// brightness 63, contrast [0.2, 1.8], per-image standardisation.
Preprocessing distortedInputs(const Shape& input);
// The seeds' CIFAR-10 recipe for a crop of `size` (24 for the tutorial network):
// distortedInputs({size, size, 3}). Throws InvalidArgument unless 1 <= size <= 32.
Preprocessing cifarDistortions(int size);
// The 28x28 grayscale recipe: optional translation by up to `translate` pixels and normalisation
// by the training set's mean and standard deviation (computed from `train`).
Preprocessing translateAndNormalize(const ImageSet& train, int translate);

// The recipe for 32x32 models (the fast CIFAR-10 trainers' choice): no crop, translation by up to
// `translate` pixels (pad with zeros, crop back at a random offset), random left-right flip, and
// per-channel normalisation by the training set's mean and standard deviation (from `train`).
Preprocessing cifarPadCrop(const ImageSet& train, int translate = 4);

// Per-channel mean and population standard deviation of a set's pixels on the 0..1 scale.
void channelStatistics(const ImageSet& set, std::vector<double>& mean, std::vector<double>& stddev);

// The random choices for one example. drawDistortion draws them from `rng` in a fixed order (crop
// offsets, translation, flip, brightness, contrast; each only when the recipe uses it), so a seed
// always gives the same image; centralDistortion is the evaluation form (central crop, nothing
// else).
struct Distortion
{
    int cropY = 0, cropX = 0;   // top-left corner of the crop in the source image
    int shiftY = 0, shiftX = 0; // output(i, j) = crop(i - shiftY, j - shiftX), 0 outside the crop
    bool flip = false;          // mirror left-right (after the translation)
    double brightness = 0;      // added to every value, 0..255 scale
    double contrast = 1;        // (x - channel mean) * contrast + channel mean
};
Distortion drawDistortion(const Preprocessing& p, const Shape& source, Rng& rng);
// The same, in distortion_math.h's terms (a row of preprocessImages' draws with packDraw), and
// back.
preprocess::ImageDraw imageDraw(const Distortion& d);
Distortion distortionOf(const preprocess::ImageDraw& d);
Distortion centralDistortion(const Preprocessing& p, const Shape& source);
// Applies `d` and the normalisation to one HWC image of shape `source` ([H, W, C]), writing
// height * width * channels floats to `out`. Throws InvalidArgument if the recipe does not fit
// the source or `d` lies outside it.
void applyPreprocessing(const Preprocessing& p, const std::uint8_t* image, const Shape& source,
                        const Distortion& d, float* out);

// Preprocesses one image (set.image(i)) into `out` (height * width * channels floats, HWC).
// augment=false gives the evaluation form (central crop, no distortion). `rng` drives the
// distortions and is only drawn from when augmenting.
void preprocessImage(const Preprocessing& p, const ImageSet& set, std::int64_t i, bool augment,
                     Rng& rng, float* out);

} // namespace towers::engine
