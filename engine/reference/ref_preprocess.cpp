// Dataset images to model input (preprocessImages): per image, plain per-element loops over
// engine/data/distortion_math.h, as a GPU kernel runs them: the integer channel sums over the
// output pixels that show source bytes (when the coefficients need them), the per-channel affine
// coefficients, then every output element on its own through its source pixel (a zero byte for
// padding). The CPU pipeline (distortion.cpp) makes the same values with its fast loops.
#include <cstdint>

#include "engine/data/distortion_math.h"
#include "engine/reference/ref_common.h"

namespace towers::engine::reference {

void ReferenceOps::preprocessImagesImpl(const PreprocessDesc& d, const Tensor& source,
                                        const Tensor& draws, Tensor& y)
{
    namespace pp = preprocess;
    const Tensor src = source, rows = draws;
    const std::int64_t batch = rows.dim(0);
    const int sourceHeight = int(src.dim(1)), sourceWidth = int(src.dim(2));
    const int h = d.height, w = d.width, c = d.channels;
    const std::int64_t imageBytes = std::int64_t(sourceHeight) * sourceWidth * c;
    const std::int64_t perImage = std::int64_t(h) * w * c;
    const auto norm = static_cast<pp::Normalization>(d.normalization);
    Tensor::ensure(y, {batch, h, w, c}, DType::Float32);
    const std::uint8_t* bytes = src.data<std::uint8_t>();
    const double* pr = rows.data<double>();
    float* out = y.data<float>();
    for (std::int64_t b = 0; b < batch; ++b) {
        const double* row = pr + b * pp::kDrawColumns; // fits: the entry checked host rows
        const pp::ImageDraw draw = pp::unpackDraw(row);
        const std::uint8_t* image = bytes + pp::drawIndex(row) * imageBytes;
        const pp::OutputWindow win = pp::outputWindow(h, w, draw.shiftY, draw.shiftX);
        const bool sums = pp::needsSums(norm, draw);
        double sum[pp::kMaxChannels] = {}, sq[pp::kMaxChannels] = {};
        if (sums) {
            std::uint64_t s[pp::kMaxChannels] = {}, q[pp::kMaxChannels] = {};
            for (int i = 0; i < h; ++i)
                for (int j = 0; j < w; ++j) {
                    const std::int64_t px = pp::sourcePixel(i, j, w, win, draw, sourceWidth);
                    if (px < 0) continue;
                    for (int k = 0; k < c; ++k) {
                        const std::uint64_t x = image[px * c + k];
                        s[k] += x;
                        q[k] += x * x;
                    }
                }
            for (int k = 0; k < c; ++k) {
                sum[k] = double(s[k]);
                sq[k] = double(q[k]);
            }
        }
        float a[pp::kMaxChannels] = {}, beta[pp::kMaxChannels] = {};
        pp::affineCoefficients(norm, c, h, w, draw, sums ? sum : nullptr, sums ? sq : nullptr,
                               d.mean.data(), d.stddev.data(), a, beta);
        float* o = out + b * perImage;
        for (std::int64_t e = 0; e < perImage; ++e) {
            const int k = int(e % c);
            const std::int64_t p = e / c;
            const std::int64_t px =
                pp::sourcePixel(int(p / w), int(p % w), w, win, draw, sourceWidth);
            o[e] = pp::affineValue(a[k], beta[k], px < 0 ? std::uint8_t(0) : image[px * c + k]);
        }
    }
}

} // namespace towers::engine::reference
