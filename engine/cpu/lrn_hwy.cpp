// Towers' LRN kernels (lrn_hwy.h), compiled once per instruction set by Highway's foreach_target.
//
// Per block of pixels, pass 1 writes each pixel's window terms (x^2 forward, dy x q r backward)
// into a zero-padded row, and pass 2 sums 2r + 1 shifted unaligned loads of the row per vector of
// channels. The zeros stand for the channels outside [0, C), so windows clip without branches for
// any C and any radius. A whole block's rows are written before any is read: a row read right
// after it was written would have every unaligned load straddle two stores still in flight.
#include "engine/cpu/lrn_hwy.h"

#include <algorithm>
#include <cstring>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "engine/cpu/lrn_hwy.cpp"
#include <hwy/aligned_allocator.h>
#include <hwy/foreach_target.h> // before highway.h
#include <hwy/highway.h>

#include "engine/cpu/hwy_channels-inl.h"

#include <hwy/contrib/math/math-inl.h>

HWY_BEFORE_NAMESPACE();
namespace towers::engine::cpu {
namespace HWY_NAMESPACE {
namespace {

namespace hn = hwy::HWY_NAMESPACE;
using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

// Floats of padded rows per block (4 KiB): with the block's inputs they stay in L1 between the
// two passes.
constexpr std::int64_t kBlockFloats = 1024;

// A block of pixels' window terms in padded rows, [r zeros][C terms][zeros to whole vectors, r
// more], and for backward the block's dy q in rows of whole vectors.
class Block
{
public:
    Block(D d, std::int64_t channels, int radius, bool withDirect)
        : m_radius(radius), m_vectorChannels(static_cast<std::int64_t>(
                                hwy::RoundUpTo(static_cast<std::size_t>(channels), hn::Lanes(d)))),
          m_stride(m_vectorChannels + 2 * radius),
          m_pixels(std::max<std::int64_t>(1, kBlockFloats / m_stride)),
          m_rows(hwy::AllocateAligned<float>(static_cast<std::size_t>(m_pixels * m_stride))),
          m_direct(withDirect ? hwy::AllocateAligned<float>(
                                    static_cast<std::size_t>(m_pixels * m_vectorChannels))
                              : nullptr)
    {
        // Pass 1 writes each row's middle, zeros past C included; the padding around it stays.
        for (std::int64_t i = 0; i < m_pixels; ++i) {
            float* row = m_rows.get() + i * m_stride;
            std::fill(row, row + radius, 0.0f);
            std::fill(row + radius + m_vectorChannels, row + m_stride, 0.0f);
        }
    }

    std::int64_t pixels() const { return m_pixels; }
    // Where pixel i's term of channel 0 goes: C terms, then zeros up to a whole vector.
    float* terms(std::int64_t i) { return m_rows.get() + i * m_stride + m_radius; }
    // The window of channel c of pixel i is the 2r + 1 floats from window(i) + c.
    const float* window(std::int64_t i) const { return m_rows.get() + i * m_stride; }
    float* direct(std::int64_t i) { return m_direct.get() + i * m_vectorChannels; }

private:
    int m_radius;
    std::int64_t m_vectorChannels, m_stride, m_pixels;
    hwy::AlignedFreeUniquePtr<float[]> m_rows, m_direct;
};

// The sum of the 2r + 1 floats from w (two chains, for the adds' latency).
HWY_INLINE V windowSum(D d, const float* w, int width)
{
    V even = hn::LoadU(d, w), odd = hn::Zero(d);
    int k = 1;
    for (; k + 1 < width; k += 2) {
        odd = hn::Add(odd, hn::LoadU(d, w + k));
        even = hn::Add(even, hn::LoadU(d, w + k + 1));
    }
    if (k < width) odd = hn::Add(odd, hn::LoadU(d, w + k));
    return hn::Add(even, odd);
}

// q = s^-beta = r^beta from r = 1/s (0 < r <= 1/bias). The betas that have one use correctly
// rounded square roots (TensorFlow's and the tutorial's 0.75 among them); any other exp and log.
struct Beta075
{
    HWY_INLINE V operator()(D, V r) const
    {
        const V root = hn::Sqrt(r); // r^1/2
        return hn::Mul(root, hn::Sqrt(root));
    }
};
struct Beta05
{
    HWY_INLINE V operator()(D, V r) const { return hn::Sqrt(r); }
};
struct Beta1
{
    HWY_INLINE V operator()(D, V r) const { return r; }
};
struct BetaAny
{
    float beta;
    HWY_INLINE V operator()(D d, V r) const
    {
        return hn::Exp(d, hn::Mul(hn::Set(d, beta), hn::Log(d, r)));
    }
};

// y from x of T (float, or uint16_t for bfloat16), and r = 1/s into r unless it is null (no
// backward follows).
template <class Power, class T>
void forward(const LrnGeometry& g, const Power& power, const T* x, T* y, float* r,
             std::int64_t begin, std::int64_t end)
{
    const D d;
    const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
    const std::int64_t channels = g.channels;
    const int width = 2 * g.radius + 1;
    const V alpha = hn::Set(d, g.alpha), bias = hn::Set(d, g.bias), one = hn::Set(d, 1.0f);
    Block block(d, channels, g.radius, false);
    for (std::int64_t p0 = begin; p0 < end; p0 += block.pixels()) {
        const std::int64_t n = std::min(block.pixels(), end - p0);
        for (std::int64_t i = 0; i < n; ++i) {
            const T* xp = x + (p0 + i) * channels;
            float* t = block.terms(i);
            for (std::int64_t c = 0; c < channels; c += lanes) {
                const V v = loadRow(d, xp + c, std::min(lanes, channels - c));
                hn::StoreU(hn::Mul(v, v), d, t + c);
            }
        }
        for (std::int64_t i = 0; i < n; ++i) {
            const std::int64_t o = (p0 + i) * channels;
            const float* w = block.window(i);
            for (std::int64_t c = 0; c < channels; c += lanes) {
                const std::int64_t m = std::min(lanes, channels - c);
                const V s = hn::MulAdd(alpha, windowSum(d, w + c, width), bias);
                const V rv = hn::Div(one, s);
                storeRow(d, hn::Mul(loadRow(d, x + o + c, m), power(d, rv)), y + o + c, m);
                if (r) storeChannels(d, rv, r + o + c, m);
            }
        }
    }
}

// dx[j] = dy[j] q[j] - 2 alpha beta x[j] sum_{c in window(j)} dy[c] x[c] q[c] r[c]
template <class Power>
void backward(const LrnGeometry& g, const Power& power, const float* x, const float* dy,
              const float* r, float* dx, std::int64_t begin, std::int64_t end)
{
    const D d;
    const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
    const std::int64_t channels = g.channels;
    const int width = 2 * g.radius + 1;
    const V k = hn::Set(d, -2.0f * g.alpha * g.beta);
    Block block(d, channels, g.radius, true);
    for (std::int64_t p0 = begin; p0 < end; p0 += block.pixels()) {
        const std::int64_t n = std::min(block.pixels(), end - p0);
        for (std::int64_t i = 0; i < n; ++i) {
            const std::int64_t o = (p0 + i) * channels;
            float* t = block.terms(i);
            float* direct = block.direct(i);
            for (std::int64_t c = 0; c < channels; c += lanes) {
                const std::int64_t m = std::min(lanes, channels - c);
                const V rv = loadChannels(d, r + o + c, m);
                const V dyq = hn::Mul(loadChannels(d, dy + o + c, m), power(d, rv));
                hn::Store(dyq, d, direct + c);
                hn::StoreU(hn::Mul(dyq, hn::Mul(loadChannels(d, x + o + c, m), rv)), d, t + c);
            }
        }
        for (std::int64_t i = 0; i < n; ++i) {
            const std::int64_t o = (p0 + i) * channels;
            const float* w = block.window(i);
            const float* direct = block.direct(i);
            for (std::int64_t c = 0; c < channels; c += lanes) {
                const std::int64_t m = std::min(lanes, channels - c);
                const V xv = loadChannels(d, x + o + c, m);
                storeChannels(
                    d,
                    hn::MulAdd(hn::Mul(k, xv), windowSum(d, w + c, width), hn::Load(d, direct + c)),
                    dx + o + c, m);
            }
        }
    }
}

// Runs f with the power function of g.beta.
template <class F> void withPower(const LrnGeometry& g, const F& f)
{
    if (g.beta == 0.75f)
        f(Beta075{});
    else if (g.beta == 0.5f)
        f(Beta05{});
    else if (g.beta == 1.0f)
        f(Beta1{});
    else
        f(BetaAny{g.beta});
}

} // namespace

void LrnForward(const LrnGeometry& g, const float* x, float* y, float* r, std::int64_t begin,
                std::int64_t end)
{
    withPower(g, [&](const auto& power) { forward(g, power, x, y, r, begin, end); });
}

void LrnBackward(const LrnGeometry& g, const float* x, const float* dy, const float* r, float* dx,
                 std::int64_t begin, std::int64_t end)
{
    withPower(g, [&](const auto& power) { backward(g, power, x, dy, r, dx, begin, end); });
}

void LrnForwardBf16(const LrnGeometry& g, const std::uint16_t* x, std::uint16_t* y,
                    std::int64_t begin, std::int64_t end)
{
    withPower(g, [&](const auto& power) { forward(g, power, x, y, nullptr, begin, end); });
}

const char* LrnTarget()
{
    return hwy::TargetName(HWY_TARGET);
}

} // namespace HWY_NAMESPACE
} // namespace towers::engine::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace towers::engine::cpu {

HWY_EXPORT(LrnForward);
HWY_EXPORT(LrnBackward);
HWY_EXPORT(LrnForwardBf16);
HWY_EXPORT(LrnTarget);

void lrnForwardPixels(const LrnGeometry& g, const float* x, float* y, float* r, std::int64_t begin,
                      std::int64_t end)
{
    HWY_DYNAMIC_DISPATCH(LrnForward)(g, x, y, r, begin, end);
}

void lrnBackwardPixels(const LrnGeometry& g, const float* x, const float* dy, const float* r,
                       float* dx, std::int64_t begin, std::int64_t end)
{
    HWY_DYNAMIC_DISPATCH(LrnBackward)(g, x, dy, r, dx, begin, end);
}

void lrnForwardBf16Pixels(const LrnGeometry& g, const std::uint16_t* x, std::uint16_t* y,
                          std::int64_t begin, std::int64_t end)
{
    HWY_DYNAMIC_DISPATCH(LrnForwardBf16)(g, x, y, begin, end);
}

std::string lrnTargetName()
{
    return HWY_DYNAMIC_DISPATCH(LrnTarget)();
}

} // namespace towers::engine::cpu
#endif // HWY_ONCE
