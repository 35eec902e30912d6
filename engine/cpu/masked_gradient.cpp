#include "engine/cpu/masked_gradient.h"

#include <algorithm>
#include <cstring>

#include "engine/cpu/cpu_common.h"

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

void maskedGradientBf16(const float* dy, const float* y, std::int64_t count, std::uint16_t* out)
{
    // Round to nearest even on the bits (finite gradients; a NaN's payload may become infinity's
    // pattern or another NaN, still non-finite, which the step's check catches either way).
    parallelChunks(count, [=](std::int64_t b, std::int64_t e) TOWERS_INLINE {
#pragma omp simd
        for (std::int64_t i = b; i < e; ++i) {
            const float v = !y || y[i] > 0.0f ? dy[i] : 0.0f;
            std::uint32_t u;
            std::memcpy(&u, &v, 4);
            u += 0x7FFFu + ((u >> 16) & 1u);
            out[i] = static_cast<std::uint16_t>(u >> 16);
        }
    });
}

} // namespace towers::engine::cpu
