// The per-image hot path: crop, translation, flip, brightness, contrast and normalisation in two
// passes over the bytes of the crop, whatever the recipe.
//
// Every step up to the normalisation is affine per channel, so the whole chain is too. With x a
// source byte (0 for a padded pixel), brightness b, contrast f and m_c the channel mean of the
// translated crop (pads included), brightness then contrast gives
//     v = f (x + b - (m_c + b)) + m_c + b = f x + (1 - f) m_c + b,
// and every normalisation is out = A_c x + B_c. Per-image standardisation needs the mean and
// variance of v over the whole image, which follow exactly from the per-channel sums of x and x^2.
// So one pass gathers integer sums (only when contrast or per-image standardisation needs them)
// and one pass writes A_c x + B_c in the flipped, shifted order. The test compares this with a
// direct step-by-step implementation of TensorFlow's definitions.
#include <algorithm>
#include <cmath>

#include "engine/data/preprocessing.h"

namespace towers::engine {

namespace {

constexpr int kMaxChannels = 64;

void checkFits(const Preprocessing& p, const Shape& source)
{
    if (source.rank() != 3 || source[2] != p.channels || source[0] < p.height ||
        source[1] < p.width || p.height < 1 || p.width < 1 || p.channels < 1 ||
        p.channels > kMaxChannels)
        throw InvalidArgument("preprocessing: a " + std::to_string(p.height) + "x" +
                              std::to_string(p.width) + "x" + std::to_string(p.channels) +
                              " recipe does not fit source images of " + source.str());
    if (p.normalization == Preprocessing::Normalization::MeanStd &&
        (static_cast<int>(p.mean.size()) != p.channels ||
         static_cast<int>(p.stddev.size()) != p.channels))
        throw InvalidArgument("preprocessing: mean_std normalisation needs one mean and one std "
                              "per channel");
}

// The part of the output that comes from source bytes rather than padding.
struct Window
{
    int i0, i1; // output rows [i0, i1) read crop rows i - shiftY
    int j0, j1; // unflipped output columns [j0, j1) read crop columns j - shiftX
};

Window window(const Preprocessing& p, const Distortion& d)
{
    const auto clampTo = [](int v, int hi) { return std::clamp(v, 0, hi); };
    return {clampTo(d.shiftY, p.height), clampTo(p.height + d.shiftY, p.height),
            clampTo(d.shiftX, p.width), clampTo(p.width + d.shiftX, p.width)};
}

// Sums and sums of squares per channel over the window's source bytes.
template <int kC>
void channelSums(const std::uint8_t* image, std::int64_t sourceWidth, int channels,
                 const Distortion& d, const Window& w, double* sum, double* sq)
{
    const int c = kC ? kC : channels;
    const int count = w.j1 - w.j0;
    std::uint64_t s[kMaxChannels] = {}, q[kMaxChannels] = {};
    for (int i = w.i0; i < w.i1; ++i) {
        const std::uint8_t* row =
            image + ((d.cropY + i - d.shiftY) * sourceWidth + d.cropX + w.j0 - d.shiftX) * c;
        // 32-bit row sums cannot overflow: at most 4096 pixels of 255^2.
        std::uint32_t rs[kC ? kC : kMaxChannels] = {}, rq[kC ? kC : kMaxChannels] = {};
        for (int j = 0; j < count; ++j)
            for (int k = 0; k < c; ++k) {
                const std::uint32_t x = row[j * c + k];
                rs[k] += x;
                rq[k] += x * x;
            }
        for (int k = 0; k < c; ++k) {
            s[k] += rs[k];
            q[k] += rq[k];
        }
    }
    for (int k = 0; k < c; ++k) {
        sum[k] = static_cast<double>(s[k]);
        sq[k] = static_cast<double>(q[k]);
    }
}

template <int kC>
void writeOutput(const Preprocessing& p, const std::uint8_t* image, std::int64_t sourceWidth,
                 const Distortion& d, const Window& w, const float* a, const float* b, float* out)
{
    const int c = kC ? kC : p.channels;
    const int width = p.width;
    const auto pad = [&](float* o, int pixels) {
        for (int j = 0; j < pixels; ++j)
            for (int k = 0; k < c; ++k) o[j * c + k] = b[k];
    };
    // Output columns [first, first + count) come from the source; the rest is padding.
    const int count = w.j1 - w.j0;
    const int first = d.flip ? width - w.j1 : w.j0;
    for (int i = 0; i < p.height; ++i) {
        float* o = out + static_cast<std::ptrdiff_t>(i) * width * c;
        if (i < w.i0 || i >= w.i1 || count <= 0) {
            pad(o, width);
            continue;
        }
        const std::uint8_t* row = image + ((d.cropY + i - d.shiftY) * sourceWidth + d.cropX) * c;
        pad(o, first);
        float* dst = o + first * c;
        if (!d.flip) {
            const std::uint8_t* src = row + (w.j0 - d.shiftX) * c;
            for (int j = 0; j < count; ++j)
                for (int k = 0; k < c; ++k) dst[j * c + k] = a[k] * float(src[j * c + k]) + b[k];
        } else {
            // Output column first + j shows unflipped column w.j1 - 1 - j.
            const std::uint8_t* src = row + (w.j1 - 1 - d.shiftX) * c;
            for (int j = 0; j < count; ++j)
                for (int k = 0; k < c; ++k) dst[j * c + k] = a[k] * float(src[-j * c + k]) + b[k];
        }
        pad(o + (first + count) * c, width - first - count);
    }
}

template <int kC>
void apply(const Preprocessing& p, const std::uint8_t* image, std::int64_t sourceWidth,
           const Distortion& d, float* out)
{
    const int c = kC ? kC : p.channels;
    const Window w = window(p, d);
    const bool contrast = d.contrast != 1.0;
    const bool perImage = p.normalization == Preprocessing::Normalization::PerImage;

    double mean[kMaxChannels] = {}, var[kMaxChannels] = {};
    if (contrast || perImage) {
        double sum[kMaxChannels], sq[kMaxChannels];
        channelSums<kC>(image, sourceWidth, c, d, w, sum, sq);
        const double n = double(p.height) * p.width; // pads count, as zeros
        for (int k = 0; k < c; ++k) {
            mean[k] = sum[k] / n;
            var[k] = std::max(0.0, sq[k] / n - mean[k] * mean[k]);
        }
    }
    // v = alpha x + beta_c (brightness and contrast), then the normalisation.
    const double alpha = d.contrast;
    double beta[kMaxChannels];
    for (int k = 0; k < c; ++k) beta[k] = (1.0 - d.contrast) * mean[k] + d.brightness;

    float a[kMaxChannels] = {}, b[kMaxChannels] = {};
    switch (p.normalization) {
    case Preprocessing::Normalization::PerImage: {
        // tf.image.per_image_standardization: (v - mean) / max(stddev, 1 / sqrt(numel)).
        double mu = 0;
        for (int k = 0; k < c; ++k) mu += alpha * mean[k] + beta[k];
        mu /= c;
        double total = 0;
        for (int k = 0; k < c; ++k) {
            const double dm = alpha * mean[k] + beta[k] - mu;
            total += alpha * alpha * var[k] + dm * dm;
        }
        const double numel = double(p.height) * p.width * c;
        const double scale = std::max(std::sqrt(total / c), 1.0 / std::sqrt(numel));
        for (int k = 0; k < c; ++k) {
            a[k] = float(alpha / scale);
            b[k] = float((beta[k] - mu) / scale);
        }
        break;
    }
    case Preprocessing::Normalization::MeanStd:
        for (int k = 0; k < c; ++k) {
            const double s = p.stddev[static_cast<std::size_t>(k)];
            a[k] = float(alpha / (255.0 * s));
            b[k] = float((beta[k] / 255.0 - p.mean[static_cast<std::size_t>(k)]) / s);
        }
        break;
    case Preprocessing::Normalization::Scale:
        for (int k = 0; k < c; ++k) {
            a[k] = float(alpha / 255.0);
            b[k] = float(beta[k] / 255.0);
        }
        break;
    }
    writeOutput<kC>(p, image, sourceWidth, d, w, a, b, out);
}

} // namespace

Distortion drawDistortion(const Preprocessing& p, const Shape& source, Rng& rng)
{
    checkFits(p, source);
    Distortion d;
    d.cropY = static_cast<int>(rng.below(static_cast<std::uint64_t>(source[0] - p.height + 1)));
    d.cropX = static_cast<int>(rng.below(static_cast<std::uint64_t>(source[1] - p.width + 1)));
    if (p.translate > 0) {
        const auto span = static_cast<std::uint64_t>(2 * p.translate + 1);
        d.shiftY = static_cast<int>(rng.below(span)) - p.translate;
        d.shiftX = static_cast<int>(rng.below(span)) - p.translate;
    }
    if (p.flip) d.flip = (rng.next() >> 63) != 0;
    if (p.brightnessDelta > 0) d.brightness = rng.uniform(-p.brightnessDelta, p.brightnessDelta);
    if (p.contrastLower != 1 || p.contrastUpper != 1)
        d.contrast = rng.uniform(p.contrastLower, p.contrastUpper);
    return d;
}

Distortion centralDistortion(const Preprocessing& p, const Shape& source)
{
    checkFits(p, source);
    Distortion d;
    // tf.image.resize_image_with_crop_or_pad: offset (size - target) / 2, rounded down.
    d.cropY = static_cast<int>((source[0] - p.height) / 2);
    d.cropX = static_cast<int>((source[1] - p.width) / 2);
    return d;
}

void applyPreprocessing(const Preprocessing& p, const std::uint8_t* image, const Shape& source,
                        const Distortion& d, float* out)
{
    checkFits(p, source);
    if (d.cropY < 0 || d.cropX < 0 || d.cropY > source[0] - p.height ||
        d.cropX > source[1] - p.width)
        throw InvalidArgument("preprocessing: crop offset (" + std::to_string(d.cropY) + ", " +
                              std::to_string(d.cropX) + ") lies outside " + source.str() +
                              " source images");
    if (!std::isfinite(d.brightness) || !std::isfinite(d.contrast))
        throw InvalidArgument("preprocessing: brightness and contrast must be finite");
    switch (p.channels) {
    case 1:
        apply<1>(p, image, source[1], d, out);
        break;
    case 3:
        apply<3>(p, image, source[1], d, out);
        break;
    default:
        apply<0>(p, image, source[1], d, out);
        break;
    }
}

void preprocessImage(const Preprocessing& p, const ImageSet& set, std::int64_t i, bool augment,
                     Rng& rng, float* out)
{
    if (i < 0 || i >= set.count ||
        set.pixels.size() < static_cast<std::size_t>((i + 1) * set.imageBytes()))
        throw InvalidArgument("preprocessImage: image " + std::to_string(i) +
                              " is outside the set of " + std::to_string(set.count));
    const Shape source = set.imageShape();
    const Distortion d = augment ? drawDistortion(p, source, rng) : centralDistortion(p, source);
    applyPreprocessing(p, set.image(i), source, d, out);
}

} // namespace towers::engine
