#include "engine/cpu/masked_gradient.h"

#include <algorithm>
#include <vector>

#include "engine/cpu/cpu_common.h"
#include "engine/tensor/bfloat16.h"

namespace towers::engine::cpu {

int channelBlockOf(const dnnl::memory::desc& md, const dnnl::memory::dims& nchw)
{
    using Tag = dnnl::memory::format_tag;
    const auto f32 = dnnl::memory::data_type::f32;
    if (md == dnnl::memory::desc(nchw, f32, Tag::nhwc)) return 0;
    if (md == dnnl::memory::desc(nchw, f32, Tag::nChw16c)) return 16;
    if (md == dnnl::memory::desc(nchw, f32, Tag::nChw8c)) return 8;
    return -1;
}

namespace {

// Pixel p of image i, channel ch goes to ((i * blocks + ch / B) * hw + p) * B + ch % B.
template <std::int64_t B>
void toBlocked(const float* dy, const float* y, std::int64_t n, std::int64_t hw, std::int64_t c,
               float* out)
{
    const std::int64_t blocks = (c + B - 1) / B, full = c / B;
    parallelItems(n * hw, blocks * B, [=](std::int64_t b, std::int64_t e) TOWERS_INLINE {
        for (std::int64_t px = b; px < e; ++px) {
            const std::int64_t img = px / hw, p = px % hw;
            const float* src = dy + px * c;
            const float* mask = y ? y + px * c : nullptr;
            float* dst = out + img * blocks * hw * B + p * B;
            for (std::int64_t k = 0; k < full; ++k) {
                const float* s = src + k * B;
                float* d = dst + k * hw * B;
                if (mask) {
                    const float* m = mask + k * B;
#pragma omp simd
                    for (std::int64_t j = 0; j < B; ++j) d[j] = m[j] > 0.0f ? s[j] : 0.0f;
                } else {
#pragma omp simd
                    for (std::int64_t j = 0; j < B; ++j) d[j] = s[j];
                }
            }
            if (full < blocks) { // the partial last block, padded with zeros
                float* d = dst + full * hw * B;
                for (std::int64_t j = 0; j < B; ++j) {
                    const std::int64_t ch = full * B + j;
                    d[j] = ch < c && (!mask || mask[ch] > 0.0f) ? src[ch] : 0.0f;
                }
            }
        }
    });
}

} // namespace

void maskedGradient(const float* dy, const float* y, std::int64_t n, std::int64_t hw,
                    std::int64_t c, int block, float* out)
{
    if (block == 16) return toBlocked<16>(dy, y, n, hw, c, out);
    if (block == 8) return toBlocked<8>(dy, y, n, hw, c, out);
    // Same layout: a plain masked copy over all elements.
    parallelChunks(n * hw * c, [=](std::int64_t b, std::int64_t e) TOWERS_INLINE {
        if (y) {
#pragma omp simd
            for (std::int64_t i = b; i < e; ++i) out[i] = y[i] > 0.0f ? dy[i] : 0.0f;
        } else {
#pragma omp simd
            for (std::int64_t i = b; i < e; ++i) out[i] = dy[i];
        }
    });
}

void maskedGradientBf16(const float* dy, const float* y, std::int64_t rows, std::int64_t c,
                        std::uint16_t* out, float* channelSums)
{
    // Chunks of rows spread over the team. Each element: masked by a select, not a branch (ReLU's
    // mask is a coin toss per element), rounded as every bfloat16 in Towers is (bfloat16Bits:
    // nearest even, a NaN kept a NaN), and added to its chunk's float sum for its channel. The
    // chunks' sums are added in order in double: the same result whatever the thread count.
    constexpr std::int64_t chunkRows = 256;
    const std::int64_t chunks = (rows + chunkRows - 1) / chunkRows;
    std::vector<float> partial(channelSums ? static_cast<std::size_t>(chunks * c) : 0);
    float* const part = partial.data();
    parallelItems(chunks, chunkRows * c, [=](std::int64_t b, std::int64_t e) TOWERS_INLINE {
        for (std::int64_t q = b; q < e; ++q) {
            float* sum = part ? part + q * c : nullptr;
            if (sum)
                for (std::int64_t k = 0; k < c; ++k) sum[k] = 0.0f;
            const std::int64_t r1 = std::min(rows, (q + 1) * chunkRows);
            for (std::int64_t r = q * chunkRows; r < r1; ++r) {
                const float* g = dy + r * c;
                const float* m = y ? y + r * c : g;
                std::uint16_t* o = out + r * c;
#pragma omp simd
                for (std::int64_t k = 0; k < c; ++k) {
                    const float v = !y || m[k] > 0.0f ? g[k] : 0.0f;
                    if (sum) sum[k] += v;
                    o[k] = bfloat16Bits(v);
                }
            }
        }
    });
    if (!channelSums) return;
    for (std::int64_t k = 0; k < c; ++k) {
        double total = 0;
        for (std::int64_t q = 0; q < chunks; ++q) total += part[q * c + k];
        channelSums[k] = static_cast<float>(total);
    }
}

} // namespace towers::engine::cpu
