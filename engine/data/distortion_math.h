#pragma once
// The arithmetic of one image's preprocessing (preprocessing.h) as plain C++ that compiles for the
// host and for a GPU, as engine/cuda/kernel_math.h is for the ops: which output pixels come from
// the source and which are padding, where an output pixel reads, and the per-channel affine map
// out = a_c x + b_c that brightness, contrast and the normalisation make of a source byte x, from
// the crop's integer channel sums. The CPU pipeline (distortion.cpp) runs its fast loops with
// these; a GPU kernel can run them per element from the same draws; tst_preprocessing checks a
// plain per-element loop over them against the pipeline, bit for bit. C++17, no CUDA header.
#include <math.h>

#include <cstdint>

#include "engine/host_device.h"

namespace towers::engine::preprocess {

constexpr int kMaxChannels = 64;

// Preprocessing::Normalization's values.
enum class Normalization : int
{
    PerImage,
    MeanStd,
    Scale
};

// The output pixels that come from source bytes rather than padding, for a crop of
// height x width shifted by (shiftY, shiftX): rows [i0, i1) read crop rows i - shiftY, unflipped
// columns [j0, j1) crop columns j - shiftX.
struct OutputWindow
{
    int i0, i1, j0, j1;
};

TOWERS_HD inline int clampTo(int v, int hi)
{
    return v < 0 ? 0 : v > hi ? hi : v;
}

TOWERS_HD inline OutputWindow outputWindow(int height, int width, int shiftY, int shiftX)
{
    return {clampTo(shiftY, height), clampTo(height + shiftY, height), clampTo(shiftX, width),
            clampTo(width + shiftX, width)};
}

// One image's draws, in the kernels' terms (Distortion's fields).
struct ImageDraw
{
    int cropY, cropX, shiftY, shiftX;
    bool flip;
    double brightness, contrast;
};

// preprocessImages' draws: one row of kDrawColumns doubles per image (every value exact in a
// double): the source image's index, the crop's corner, the translation, the flip (0 or 1), the
// brightness and the contrast.
enum DrawColumn : int
{
    kDrawIndex,
    kDrawCropY,
    kDrawCropX,
    kDrawShiftY,
    kDrawShiftX,
    kDrawFlip,
    kDrawBrightness,
    kDrawContrast,
    kDrawColumns
};

TOWERS_HD inline void packDraw(std::int64_t index, const ImageDraw& d, double* row)
{
    row[kDrawIndex] = double(index);
    row[kDrawCropY] = d.cropY;
    row[kDrawCropX] = d.cropX;
    row[kDrawShiftY] = d.shiftY;
    row[kDrawShiftX] = d.shiftX;
    row[kDrawFlip] = d.flip ? 1.0 : 0.0;
    row[kDrawBrightness] = d.brightness;
    row[kDrawContrast] = d.contrast;
}

// Whether a row describes an image that exists and a crop of height x width inside a source of
// sourceHeight x sourceWidth (whole numbers where whole numbers belong, a finite brightness and
// contrast). A kernel that finds a row that does not writes NaN for its image.
TOWERS_HD inline bool drawFits(const double* row, std::int64_t sourceCount, int sourceHeight,
                               int sourceWidth, int height, int width)
{
    const auto whole = [](double v, double lo, double hi) {
        return v >= lo && v <= hi && v == double(std::int64_t(v));
    };
    const double limit = 1e9; // translations beyond any image are whole numbers still
    return whole(row[kDrawIndex], 0, double(sourceCount - 1)) &&
           whole(row[kDrawCropY], 0, sourceHeight - height) &&
           whole(row[kDrawCropX], 0, sourceWidth - width) &&
           whole(row[kDrawShiftY], -limit, limit) && whole(row[kDrawShiftX], -limit, limit) &&
           (row[kDrawFlip] == 0.0 || row[kDrawFlip] == 1.0) && isfinite(row[kDrawBrightness]) &&
           isfinite(row[kDrawContrast]);
}

// A row (that fits) as the draw it packs, and the source image it names.
TOWERS_HD inline ImageDraw unpackDraw(const double* row)
{
    return {int(row[kDrawCropY]),  int(row[kDrawCropX]),  int(row[kDrawShiftY]),
            int(row[kDrawShiftX]), row[kDrawFlip] != 0.0, row[kDrawBrightness],
            row[kDrawContrast]};
}
TOWERS_HD inline std::int64_t drawIndex(const double* row)
{
    return std::int64_t(row[kDrawIndex]);
}

// The source pixel (an index into an HWC image of sourceWidth columns: times the channel count
// for its first byte) that output pixel (i, j) shows, or -1 for padding. The flip mirrors the
// output after the translation.
TOWERS_HD inline std::int64_t sourcePixel(int i, int j, int width, const OutputWindow& w,
                                          const ImageDraw& d, std::int64_t sourceWidth)
{
    const int u = d.flip ? width - 1 - j : j; // the unflipped column
    if (i < w.i0 || i >= w.i1 || u < w.j0 || u >= w.j1) return -1;
    return std::int64_t(d.cropY + i - d.shiftY) * sourceWidth + d.cropX + u - d.shiftX;
}

// Whether the coefficients need the channel sums of the crop (contrast or per-image
// standardisation); without them the sums are taken as zeros.
TOWERS_HD inline bool needsSums(Normalization n, const ImageDraw& d)
{
    return d.contrast != 1.0 || n == Normalization::PerImage;
}

// a[k], b[k] for channel k < channels of a height x width output, from the sums and sums of
// squares of the source bytes it shows (padding counts as zeros; null when !needsSums), and, for
// MeanStd, the training set's mean and std per channel (else null). Every distortion up to the
// normalisation is affine per channel, so the chain is too: with m_c the channel mean, brightness
// then contrast gives v = f x + (1 - f) m_c + brightness, and each normalisation maps v affinely.
TOWERS_HD inline void affineCoefficients(Normalization norm, int channels, int height, int width,
                                         const ImageDraw& d, const double* sum, const double* sq,
                                         const double* setMean, const double* setStd, float* a,
                                         float* b)
{
    // Per channel, recomputed where needed rather than kept in arrays: a GPU thread's arrays live
    // in local memory, reserved for every thread the GPU can hold. The same operations in the same
    // order either way.
    const double n = double(height) * width; // pads count, as zeros
    const bool sums = sum && sq;
    const auto mean = [&](int k) { return sums ? sum[k] / n : 0.0; };
    const auto var = [&](int k) {
        const double m = mean(k);
        return sums ? fmax(0.0, sq[k] / n - m * m) : 0.0;
    };
    // v = alpha x + beta_c (brightness and contrast), then the normalisation.
    const double alpha = d.contrast;
    const auto beta = [&](int k) { return (1.0 - d.contrast) * mean(k) + d.brightness; };
    switch (norm) {
    case Normalization::PerImage: {
        // tf.image.per_image_standardization: (v - mean) / max(stddev, 1 / sqrt(numel)).
        double mu = 0;
        for (int k = 0; k < channels; ++k) mu += alpha * mean(k) + beta(k);
        mu /= channels;
        double total = 0;
        for (int k = 0; k < channels; ++k) {
            const double dm = alpha * mean(k) + beta(k) - mu;
            total += alpha * alpha * var(k) + dm * dm;
        }
        const double numel = double(height) * width * channels;
        const double scale = fmax(sqrt(total / channels), 1.0 / sqrt(numel));
        for (int k = 0; k < channels; ++k) {
            a[k] = float(alpha / scale);
            b[k] = float((beta(k) - mu) / scale);
        }
        break;
    }
    case Normalization::MeanStd:
        for (int k = 0; k < channels; ++k) {
            a[k] = float(alpha / (255.0 * setStd[k]));
            b[k] = float((beta(k) / 255.0 - setMean[k]) / setStd[k]);
        }
        break;
    case Normalization::Scale:
        for (int k = 0; k < channels; ++k) {
            a[k] = float(alpha / 255.0);
            b[k] = float(beta(k) / 255.0);
        }
        break;
    }
}

// One output value: a source byte x (0 for padding) through the channel's affine map: a product
// rounded, then a sum rounded, on every processor (a GPU compiler would otherwise fuse them into
// one rounding, and the GPU's images would differ from the CPU's in the last bit).
TOWERS_HD inline float affineValue(float a, float b, std::uint8_t x)
{
#ifdef __CUDA_ARCH__
    return __fadd_rn(__fmul_rn(a, float(x)), b);
#else
    return a * float(x) + b;
#endif
}

} // namespace towers::engine::preprocess
