// Towers' max pooling kernels (pool_hwy.h), compiled once per instruction set by Highway's
// foreach_target.
#include "engine/cpu/pool_hwy.h"

#include <algorithm>
#include <cstring>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "engine/cpu/pool_hwy.cpp"
#include <hwy/foreach_target.h> // before highway.h
#include <hwy/highway.h>

#include "engine/cpu/hwy_channels-inl.h"

HWY_BEFORE_NAMESPACE();
namespace towers::engine::cpu {
namespace HWY_NAMESPACE {
namespace {

namespace hn = hwy::HWY_NAMESPACE;
using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;
using DI = hn::Rebind<std::int32_t, D>;
using DU8 = hn::Rebind<std::uint8_t, D>;

// A vector's window positions (whole numbers below 256, exact as floats) to and from the bytes of
// the workspace; a partial vector (n < Lanes) moves n bytes through a buffer.
HWY_INLINE void storePositions(D d, V pos, std::uint8_t* p, std::int64_t n)
{
    const DU8 du8;
    const auto bytes = hn::DemoteTo(du8, hn::ConvertTo(DI(), pos));
    if (n >= static_cast<std::int64_t>(hn::Lanes(d))) {
        hn::StoreU(bytes, du8, p);
        return;
    }
    HWY_ALIGN std::uint8_t part[hn::MaxLanes(DU8())];
    hn::Store(bytes, du8, part);
    std::memcpy(p, part, static_cast<std::size_t>(n));
}
HWY_INLINE V loadPositions(D d, const std::uint8_t* p, std::int64_t n)
{
    const DU8 du8;
    if (n >= static_cast<std::int64_t>(hn::Lanes(d)))
        return hn::ConvertTo(d, hn::PromoteTo(DI(), hn::LoadU(du8, p)));
    HWY_ALIGN std::uint8_t part[hn::MaxLanes(DU8())] = {};
    std::memcpy(part, p, static_cast<std::size_t>(n));
    return hn::ConvertTo(d, hn::PromoteTo(DI(), hn::Load(du8, part)));
}

// The window rows (or columns) [lo, hi) of a window starting at `start` that lie in [0, size).
struct Span
{
    int lo, hi;
};
HWY_INLINE Span clip(std::int64_t start, int k, std::int64_t size)
{
    return {static_cast<int>(std::max<std::int64_t>(0, -start)),
            static_cast<int>(std::min<std::int64_t>(k, size - start))};
}

// The next pixel in row-major order of [N, rows, cols]: (col, row, n) counted on by one.
HWY_INLINE void advance(std::int64_t& col, std::int64_t& row, std::int64_t& n, std::int64_t cols,
                        std::int64_t rows)
{
    if (++col < cols) return;
    col = 0;
    if (++row < rows) return;
    row = 0;
    ++n;
}

// The windows [lo, hi] along one axis that cover padded position t (windows of size k every s,
// `count` of them): o * s <= t < o * s + k.
struct Covering
{
    std::int64_t lo, hi;
};
HWY_INLINE Covering covering(std::int64_t t, int k, int s, std::int64_t count)
{
    return {t - k + 1 > 0 ? (t - k + s) / s : 0, std::min(count - 1, t / s)};
}

// One more pixel of a window scanned in order: v takes the lead where strictly greater, so the
// first maximum keeps it; with kPositions, `at` follows the leader's position.
template <bool kPositions> HWY_INLINE void keepGreater(D d, V v, float position, V& best, V& at)
{
    const auto greater = hn::Gt(v, best);
    best = hn::IfThenElse(greater, v, best);
    if constexpr (kPositions) at = hn::IfThenElse(greater, hn::Set(d, position), at);
}

// Output pixels [begin, end) of float32 (T float) or bfloat16 (T uint16_t, compared as float32)
// images, and with kPositions the winners' positions in ws (training's workspace).
template <class T, bool kPositions>
void forward(const Window2d& g, const T* x, T* y, std::uint8_t* ws, std::int64_t begin,
             std::int64_t end)
{
    const D d;
    const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
    const std::int64_t c = g.c;
    // The output pixel's coordinates, counted on from begin's (no divisions per pixel).
    std::int64_t ox = begin % g.ow, oy = (begin / g.ow) % g.oh, n = begin / (g.ow * g.oh);
    for (std::int64_t p = begin; p < end; ++p, advance(ox, oy, n, g.ow, g.oh)) {
        const std::int64_t iy0 = oy * g.sh - g.padTop, ix0 = ox * g.sw - g.padLeft;
        const Span rows = clip(iy0, g.kh, g.h), cols = clip(ix0, g.kw, g.w);
        // Pixel (i, j) of the window is at x + window + (i * W + j) * C (window < 0 where pads
        // lead; only real pixels are read).
        const std::int64_t window = ((n * g.h + iy0) * g.w + ix0) * c;
        T* out = y + p * c;
        if (g.kh == 2 && g.kw == 2 && rows.lo == 0 && rows.hi == 2 && cols.lo == 0 &&
            cols.hi == 2) {
            // The common 2x2 window, wholly inside the image: its four pixels unrolled, the same
            // winners as the loop below (positions 0, 1, 2, 3 in scan order).
            const T* p0 = x + window;
            const T* p1 = p0 + c;
            const T* p2 = p0 + g.w * c;
            const T* p3 = p2 + c;
            for (std::int64_t k = 0; k < c; k += lanes) {
                const std::int64_t m = std::min(lanes, c - k);
                V best = loadRow(d, p0 + k, m);
                V at = hn::Zero(d);
                keepGreater<kPositions>(d, loadRow(d, p1 + k, m), 1.f, best, at);
                keepGreater<kPositions>(d, loadRow(d, p2 + k, m), 2.f, best, at);
                keepGreater<kPositions>(d, loadRow(d, p3 + k, m), 3.f, best, at);
                storeRow(d, best, out + k, m);
                if constexpr (kPositions) storePositions(d, at, ws + p * c + k, m);
            }
            continue;
        }
        for (std::int64_t k = 0; k < c; k += lanes) {
            const std::int64_t m = std::min(lanes, c - k);
            // The first real element, then strictly greater ones: the first maximum in scan order
            // wins, and pads are never looked at.
            V best = loadRow(d, x + (window + (rows.lo * g.w + cols.lo) * c + k), m);
            V at = hn::Set(d, static_cast<float>(rows.lo * g.kw + cols.lo));
            for (int i = rows.lo; i < rows.hi; ++i)
                for (int j = i == rows.lo ? cols.lo + 1 : cols.lo; j < cols.hi; ++j)
                    keepGreater<kPositions>(d, loadRow(d, x + (window + (i * g.w + j) * c + k), m),
                                            static_cast<float>(i * g.kw + j), best, at);
            storeRow(d, best, out + k, m);
            if constexpr (kPositions) storePositions(d, at, ws + p * c + k, m);
        }
    }
}

void backward(const Window2d& g, const float* dy, const std::uint8_t* ws, float* dx,
              std::int64_t begin, std::int64_t end)
{
    const D d;
    const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
    const std::int64_t c = g.c;
    // The input pixel's coordinates, counted on from begin's, and the windows that cover it
    // (oy * sh - padTop <= iy < oy * sh - padTop + kh): no divisions per pixel.
    std::int64_t ix = begin % g.w, iy = (begin / g.w) % g.h, n = begin / (g.w * g.h);
    std::vector<Covering> colsOf(static_cast<std::size_t>(g.w));
    for (std::int64_t x = 0; x < g.w; ++x)
        colsOf[static_cast<std::size_t>(x)] = covering(x + g.padLeft, g.kw, g.sw, g.ow);
    Covering rowsOf = covering(iy + g.padTop, g.kh, g.sh, g.oh);
    for (std::int64_t p = begin; p < end; ++p, advance(ix, iy, n, g.w, g.h)) {
        if (ix == 0 && p != begin) rowsOf = covering(iy + g.padTop, g.kh, g.sh, g.oh);
        const std::int64_t ty = iy + g.padTop, tx = ix + g.padLeft;
        const std::int64_t oyLo = rowsOf.lo, oyHi = rowsOf.hi;
        const std::int64_t oxLo = colsOf[static_cast<std::size_t>(ix)].lo,
                           oxHi = colsOf[static_cast<std::size_t>(ix)].hi;
        float* out = dx + p * c;
        for (std::int64_t k = 0; k < c; k += lanes) {
            const std::int64_t m = std::min(lanes, c - k);
            // In the windows' scan order, as a scatter in output order would add them.
            V sum = hn::Zero(d);
            for (std::int64_t oy = oyLo; oy <= oyHi; ++oy)
                for (std::int64_t ox = oxLo; ox <= oxHi; ++ox) {
                    const std::int64_t o = ((n * g.oh + oy) * g.ow + ox) * c + k;
                    const auto position =
                        static_cast<float>((ty - oy * g.sh) * g.kw + tx - ox * g.sw);
                    const auto chosen = hn::Eq(loadPositions(d, ws + o, m), hn::Set(d, position));
                    sum = hn::Add(sum, hn::IfThenElseZero(chosen, loadChannels(d, dy + o, m)));
                }
            storeChannels(d, sum, out + k, m);
        }
    }
}

} // namespace

void PoolForward(const Window2d& g, const float* x, float* y, std::uint8_t* ws, std::int64_t begin,
                 std::int64_t end)
{
    forward<float, true>(g, x, y, ws, begin, end);
}

void PoolBackward(const Window2d& g, const float* dy, const std::uint8_t* ws, float* dx,
                  std::int64_t begin, std::int64_t end)
{
    backward(g, dy, ws, dx, begin, end);
}

void PoolForwardBf16(const Window2d& g, const std::uint16_t* x, std::uint16_t* y,
                     std::int64_t begin, std::int64_t end)
{
    forward<std::uint16_t, false>(g, x, y, nullptr, begin, end);
}

const char* PoolTarget()
{
    return hwy::TargetName(HWY_TARGET);
}

} // namespace HWY_NAMESPACE
} // namespace towers::engine::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace towers::engine::cpu {

HWY_EXPORT(PoolForward);
HWY_EXPORT(PoolBackward);
HWY_EXPORT(PoolForwardBf16);
HWY_EXPORT(PoolTarget);

void maxPoolForwardPixels(const Window2d& g, const float* x, float* y, std::uint8_t* ws,
                          std::int64_t begin, std::int64_t end)
{
    HWY_DYNAMIC_DISPATCH(PoolForward)(g, x, y, ws, begin, end);
}

void maxPoolBackwardPixels(const Window2d& g, const float* dy, const std::uint8_t* ws, float* dx,
                           std::int64_t begin, std::int64_t end)
{
    HWY_DYNAMIC_DISPATCH(PoolBackward)(g, dy, ws, dx, begin, end);
}

void maxPoolForwardBf16Pixels(const Window2d& g, const std::uint16_t* x, std::uint16_t* y,
                              std::int64_t begin, std::int64_t end)
{
    HWY_DYNAMIC_DISPATCH(PoolForwardBf16)(g, x, y, begin, end);
}

std::string poolTargetName()
{
    return HWY_DYNAMIC_DISPATCH(PoolTarget)();
}

} // namespace towers::engine::cpu
#endif // HWY_ONCE
