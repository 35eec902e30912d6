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
// and one pass writes A_c x + B_c in the flipped, shifted order. The window, the coefficients and
// the value are distortion_math.h's, which a GPU kernel can run per element. The tests compare
// this with a direct step-by-step implementation of TensorFlow's definitions, and with a plain
// per-element loop over distortion_math.h.
#include <algorithm>
#include <cmath>

#include "engine/data/distortion_math.h"
#include "engine/data/preprocessing.h"

namespace towers::engine {

namespace {

using preprocess::kMaxChannels;
using Window = preprocess::OutputWindow;

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

static_assert(int(Preprocessing::Normalization::PerImage) ==
              int(preprocess::Normalization::PerImage));
static_assert(int(Preprocessing::Normalization::MeanStd) ==
              int(preprocess::Normalization::MeanStd));
static_assert(int(Preprocessing::Normalization::Scale) == int(preprocess::Normalization::Scale));

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
                for (int k = 0; k < c; ++k)
                    dst[j * c + k] = preprocess::affineValue(a[k], b[k], src[j * c + k]);
        } else {
            // Output column first + j shows unflipped column w.j1 - 1 - j.
            const std::uint8_t* src = row + (w.j1 - 1 - d.shiftX) * c;
            for (int j = 0; j < count; ++j)
                for (int k = 0; k < c; ++k)
                    dst[j * c + k] = preprocess::affineValue(a[k], b[k], src[-j * c + k]);
        }
        pad(o + (first + count) * c, width - first - count);
    }
}

template <int kC>
void apply(const Preprocessing& p, const std::uint8_t* image, std::int64_t sourceWidth,
           const Distortion& d, float* out)
{
    const int c = kC ? kC : p.channels;
    const Window w = preprocess::outputWindow(p.height, p.width, d.shiftY, d.shiftX);
    const auto norm = static_cast<preprocess::Normalization>(p.normalization);
    const preprocess::ImageDraw draw = imageDraw(d);
    double sum[kMaxChannels], sq[kMaxChannels];
    const bool sums = preprocess::needsSums(norm, draw);
    if (sums) channelSums<kC>(image, sourceWidth, c, d, w, sum, sq);
    float a[kMaxChannels] = {}, b[kMaxChannels] = {};
    preprocess::affineCoefficients(norm, c, p.height, p.width, draw, sums ? sum : nullptr,
                                   sums ? sq : nullptr, p.mean.data(), p.stddev.data(), a, b);
    writeOutput<kC>(p, image, sourceWidth, d, w, a, b, out);
}

} // namespace

preprocess::ImageDraw imageDraw(const Distortion& d)
{
    return {d.cropY, d.cropX, d.shiftY, d.shiftX, d.flip, d.brightness, d.contrast};
}

Distortion distortionOf(const preprocess::ImageDraw& d)
{
    Distortion out;
    out.cropY = d.cropY;
    out.cropX = d.cropX;
    out.shiftY = d.shiftY;
    out.shiftX = d.shiftX;
    out.flip = d.flip;
    out.brightness = d.brightness;
    out.contrast = d.contrast;
    return out;
}

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
