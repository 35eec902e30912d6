// Private to engine/cpu: the tile machinery of Towers' Winograd convolutions F(m x m, r x r) with
// m + r - 1 = 6 (winograd_tiles.h), one template over m and r, written once with Google Highway.
// Included per target from inside foreach_target by winograd_5x5.cpp (m = 2, r = 5) and
// winograd_3x3.cpp (m = 4, r = 3), as Highway's -inl.h headers are: the guard toggles with
// HWY_TARGET_TOGGLE so that each target gets its own copy in its HWY_NAMESPACE.
//
// The matrices, for the points 0, 1, -1, 2, -2 and infinity (Lavin & Gray's construction): the
// input transform B^T is the same 6 x 6 matrix for every (m, r) with m + r - 1 = 6,
//   B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1],
// the kernel transform G (6 x r) has rows c_j (p_j^0, ..., p_j^(r-1)) for the five finite points
// p_j with c = 1/4, -1/6, -1/6, 1/24, 1/24, and (0, ..., 0, 1) for infinity, and the output
// transform A^T (m x 6) has rows (p_0^i, ..., p_4^i, [i = m - 1]) (filterTransform and
// outputTransform below, for any r and m). The weight gradient is the correlation of each 6 x 6
// input tile with its m x m output-gradient tile, an r x r result: F(r x r, m x m) on the same
// points, whose matrices are the same functions with m and r swapped, and whose input transform is
// the forward's.
//
// Channels go in vectors of N = Lanes floats (16 on AVX-512, 8 on AVX2, 4 on SSE4). The
// transformed tiles and the products keep their channel rows padded to whole vectors with zeros
// (inputs and gradients are read with zero-filled partial vectors at the tail; the transformed
// kernel's padding columns are zero), so the products need no tail case and any channel count
// works; only the final stores and the weight gradient's scatter stop at the real channels.
//
// Work goes in chunks of tiles, one chunk per thread at a time, numbered across the images of the
// batch (a 8x8 output has only four 4x4 tiles per image: chunks within one image would reuse each
// transformed kernel for four rows). A chunk's transformed inputs and products stay in a core's
// L2 cache where the channel counts allow; where the transformed kernel is too large to stay in
// cache (256 -> 512 channels: 19 MB), chunks take enough tiles that reading it once per chunk
// costs little beside the products.
#if defined(TOWERS_ENGINE_CPU_WINOGRAD_TILES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TOWERS_ENGINE_CPU_WINOGRAD_TILES_INL_H_
#undef TOWERS_ENGINE_CPU_WINOGRAD_TILES_INL_H_
#else
#define TOWERS_ENGINE_CPU_WINOGRAD_TILES_INL_H_
#endif

#include <algorithm>
#include <cstdint>
#include <vector>

#include <omp.h>

#include <hwy/aligned_allocator.h>
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include "engine/cpu/hwy_channels-inl.h"
#include "engine/cpu/winograd_tiles.h"

HWY_BEFORE_NAMESPACE();
namespace towers::engine::cpu {
namespace HWY_NAMESPACE {
namespace winograd {

namespace hn = hwy::HWY_NAMESPACE;
using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;
using Pass = WinogradPass;

constexpr int kTile = 6;                  // input tile side
constexpr int kPositions = kTile * kTile; // products per channel pair and output tile
// Floats of transformed inputs and products one thread keeps for a chunk of tiles: small enough
// to stay in a core's L2 cache (1 MB on the machines measured) next to the kernel.
constexpr std::int64_t kChunkFloats = 196608;
// Tiles per chunk at least when the transformed kernel (or the weight gradient's partial sums) is
// larger than that budget and is read from memory once per chunk: each float read serves this
// many rows of the products (32, 64 and 128 measured on mnist-convnet's conv3: 64 the best over
// the three directions).
constexpr std::int64_t kMinChunkTiles = 64;
// The matrix products' register block: kRows rows by kCols vectors of accumulators, plus kCols
// vectors of the right-hand side and one broadcast. x86 before AVX-512 has 16 vector registers
// (6 x 2 + 2 + 1 = 15), AVX-512 32 (6 x 4 + 4 + 1 = 29).
constexpr int kRows = 6;
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
constexpr int kCols = 2;
#else
constexpr int kCols = 4;
#endif
// Floats of the right-hand side's panel (kCols vectors wide) that the products keep in the L1
// cache while every row block of the left-hand side passes over it: 16 KB.
constexpr std::int64_t kPanelFloats = 4096;

HWY_INLINE std::int64_t lanes()
{
    return static_cast<std::int64_t>(hn::Lanes(D()));
}

// n rounded up to whole vectors.
HWY_INLINE std::int64_t padded(std::int64_t n)
{
    const std::int64_t l = lanes();
    return (n + l - 1) / l * l;
}

// The right-hand sides of the products are packed: a [depth x cols] matrix (cols whole vectors)
// is stored as panels of kCols vectors (the last one narrower), each [depth x its width]
// row-major, one after the other. The rows of a panel, which the products pass over again and
// again, are then consecutive in memory, not a row of the whole matrix apart: with a row stride of
// 256 or 512 floats all the rows of a panel fell in 2 to 4 of the L1 cache's 64 sets (and each on
// its own page), so that the panel came again from L2 at every pass (the weight gradient of
// mnist-convnet's conv3 took 103 ms on one core with row-major right-hand sides, 67 packed).
HWY_INLINE std::int64_t panelWidth()
{
    return kCols * lanes();
}
// Where element (row, col) of a packed [depth x cols] matrix is; col a multiple of Lanes.
HWY_INLINE std::int64_t packedAt(std::int64_t row, std::int64_t col, std::int64_t depth,
                                 std::int64_t cols)
{
    const std::int64_t width = panelWidth(), q = col / width * width;
    return q * depth + row * std::min(width, cols - q) + (col - q);
}

// Row stride of the transformed output gradients, the left-hand side of the weight gradient's
// products, which read one float of it per row: padded(n), and a cache line more where that would
// be a multiple of 1 KB (the rows would share few cache sets).
HWY_INLINE std::int64_t gradientStride(std::int64_t n)
{
    const std::int64_t p = padded(n);
    return p % 256 == 0 ? p + 16 : p;
}

// --- the tiling: m x m output tiles, numbered across the batch ---

template <int M> struct Tiling
{
    std::int64_t tilesW, perImage;
    explicit Tiling(const Pass& p)
        : tilesW((p.outW + M - 1) / M), perImage((p.outH + M - 1) / M * tilesW)
    {
    }
    std::int64_t total(const Pass& p) const { return p.n * perImage; }
    // Tile g: its image, and its output origin (oy, ox) in that image.
    struct At
    {
        std::int64_t n, oy, ox;
        bool rowStart; // the first tile of a row of tiles
    };
    At at(std::int64_t g) const
    {
        const std::int64_t n = g / perImage, r = g % perImage, tw = r % tilesW;
        return {n, M * (r / tilesW), M * tw, tw == 0};
    }
};

// --- the transforms ---

// o = B^T d for six vectors d (one row or column of a tile).
HWY_INLINE void inputTransform(D d, const V in[6], V o[6])
{
    const V four = hn::Set(d, 4.0f), minusFive = hn::Set(d, -5.0f), two = hn::Set(d, 2.0f);
    o[0] = hn::MulAdd(four, in[0], hn::MulAdd(minusFive, in[2], in[4]));
    o[1] = hn::NegMulAdd(four, hn::Add(in[1], in[2]), hn::Add(in[3], in[4]));
    o[2] = hn::MulAdd(four, hn::Sub(in[1], in[2]), hn::Sub(in[4], in[3]));
    const V a = hn::Sub(in[4], in[2]), b = hn::Sub(in[3], in[1]);
    o[3] = hn::MulAdd(two, b, a);
    o[4] = hn::NegMulAdd(two, b, a);
    o[5] = hn::MulAdd(four, in[1], hn::MulAdd(minusFive, in[3], in[5]));
}

// o = A^T m for six vectors m, A^T the Rows x 6 matrix whose row i holds the i-th powers of the
// points 0, 1, -1, 2, -2 and, in the last row, 1 for infinity: the forward's output transform
// (Rows = m) and the weight gradient's (Rows = r).
template <int Rows> HWY_INLINE void outputTransform(D d, const V m[6], V o[Rows])
{
    static_assert(Rows >= 2 && Rows <= 5);
    const V s12 = hn::Add(m[1], m[2]), s34 = hn::Add(m[3], m[4]);
    const V d12 = hn::Sub(m[1], m[2]), d34 = hn::Sub(m[3], m[4]);
    o[0] = hn::Add(hn::Add(m[0], s12), s34);
    for (int i = 1; i < Rows; ++i) {
        const V f = hn::Set(d, static_cast<float>(1 << i));
        o[i] = i % 2 ? hn::MulAdd(f, d34, d12) : hn::MulAdd(f, s34, s12);
    }
    o[Rows - 1] = hn::Add(o[Rows - 1], m[5]);
}

// o = G u for Taps vectors u, G the 6 x Taps matrix with rows c_j (1, p_j, ..., p_j^(Taps-1)) for
// the points 0, 1, -1, 2, -2 (c = 1/4, -1/6, -1/6, 1/24, 1/24) and (0, ..., 0, 1) for infinity:
// the kernel transform (Taps = r) and the weight gradient's transform of an output-gradient tile
// (Taps = m).
template <int Taps> HWY_INLINE void filterTransform(D d, const V u[Taps], V o[6])
{
    static_assert(Taps >= 2 && Taps <= 5);
    // Sums of the even and the odd taps, at the points +-1 and (weighted by 2^k) +-2.
    V even = u[0], odd = u[1], even2 = u[0], odd2 = hn::Add(u[1], u[1]);
    for (int k = 2; k < Taps; ++k) {
        const V f = hn::Set(d, static_cast<float>(1 << k));
        if (k % 2) {
            odd = hn::Add(odd, u[k]);
            odd2 = hn::MulAdd(f, u[k], odd2);
        } else {
            even = hn::Add(even, u[k]);
            even2 = hn::MulAdd(f, u[k], even2);
        }
    }
    const V sixth = hn::Set(d, 1.0f / 6), twentyFourth = hn::Set(d, 1.0f / 24);
    o[0] = hn::Mul(u[0], hn::Set(d, 0.25f));
    o[1] = hn::Mul(hn::Add(even, odd), hn::Neg(sixth));
    o[2] = hn::Mul(hn::Sub(odd, even), sixth);
    o[3] = hn::Mul(hn::Add(even2, odd2), twentyFourth);
    o[4] = hn::Mul(hn::Sub(even2, odd2), twentyFourth);
    o[5] = u[Taps - 1];
}

// U[pos][ci][co] = (G g G^T)[pos] for g the r x r kernel from input channel ci to output channel
// co of the pass, each U[pos] a packed [inC x padded(outC)] matrix (zero past outC). w is OIHW;
// forward: [outC][inC][r][r]; backward: [inC][outC][r][r] with g[i][j] = w[ci][co][r-1-i][r-1-j]
// (backward data is the correlation with the flipped kernel, the channel roles swapped).
template <int R> void transformKernel(const Pass& p, const float* w, bool backward, float* U)
{
    const D d;
    const std::int64_t in = p.inC, out = p.outC, outP = padded(out), N = lanes();
#pragma omp parallel if (in * out > 4096)
    {
        // g[i][j][co] and t[a][j][co] = (G g)[a][j][co], rows of outP floats.
        auto g = hwy::AllocateAligned<float>(static_cast<std::size_t>(R * R * outP));
        auto t = hwy::AllocateAligned<float>(static_cast<std::size_t>(kTile * R * outP));
        std::fill(g.get(), g.get() + R * R * outP, 0.0f);
#pragma omp for schedule(static)
        for (std::int64_t ci = 0; ci < in; ++ci) {
            for (std::int64_t co = 0; co < out; ++co) {
                const float* k =
                    backward ? w + (ci * out + co) * R * R : w + (co * in + ci) * R * R;
                for (int i = 0; i < R; ++i)
                    for (int j = 0; j < R; ++j)
                        g[static_cast<std::size_t>((i * R + j) * outP + co)] =
                            backward ? k[(R - 1 - i) * R + (R - 1 - j)] : k[i * R + j];
            }
            for (std::int64_t c = 0; c < outP; c += N) {
                for (int j = 0; j < R; ++j) {
                    V u[R], o[kTile];
                    for (int i = 0; i < R; ++i)
                        u[i] = hn::Load(d, g.get() + (i * R + j) * outP + c);
                    filterTransform<R>(d, u, o);
                    for (int a = 0; a < kTile; ++a)
                        hn::Store(o[a], d, t.get() + (a * R + j) * outP + c);
                }
                for (int a = 0; a < kTile; ++a) {
                    V u[R], o[kTile];
                    for (int j = 0; j < R; ++j)
                        u[j] = hn::Load(d, t.get() + (a * R + j) * outP + c);
                    filterTransform<R>(d, u, o);
                    for (int b = 0; b < kTile; ++b)
                        hn::Store(o[b], d,
                                  U + (a * kTile + b) * in * outP + packedAt(ci, c, in, outP));
                }
            }
        }
    }
}

// Vectors of channels the input transform takes together: a 64-byte cache line (2 on AVX2, 1 on
// AVX-512, 4 on SSE4), so that its loads and its stores of the transformed tiles (rows of a tile's
// 36 positions, count * padded(inC) floats apart) use whole lines.
constexpr int kGroup =
    static_cast<int>(std::clamp<std::size_t>(64 / (sizeof(float) * hn::MaxLanes(D())), 1, 4));

// A vector of input channels: whole, or (Tail) n channels, whole when n >= Lanes, else the last n
// and zeros; with Masked, zero where mask <= 0.
template <bool Tail, bool Masked>
HWY_INLINE V loadInput(D d, const float* p, const float* mask, std::int64_t n)
{
    const V v = Tail ? loadChannels(d, p, n) : hn::LoadU(d, p);
    if constexpr (!Masked) return v;
    const V m = Tail ? loadChannels(d, mask, n) : hn::LoadU(d, mask);
    return hn::IfThenElseZero(hn::Gt(m, hn::Zero(d)), v);
}

// transformInputs for `groups` vectors of channels from cb: kGroup whole vectors, or (Tail) the
// last vectors of a row up to padded(inC), the last of them partial or zero. A tile right of the
// previous one overlaps it by 6 - m columns, whose column transforms (B^T times a column of the
// tile) it shares: those stay in a ring of 6 and only m are computed anew.
template <int M, bool Packed, bool Tail, bool Masked>
void transformInputBlock(const Pass& p, const float* in, const float* mask, std::int64_t t0,
                         std::int64_t count, std::int64_t cb, int groups, float* Vt)
{
    const D d;
    const Tiling<M> tiling(p);
    const std::int64_t C = p.inC, CP = padded(C), N = lanes(), inImage = p.inH * p.inW * C;
    const int G = Tail ? groups : kGroup;
    V cols[kTile][kGroup][kTile]; // the ring: cols[slot[j]][g] = B^T (column j of the tile)
    int base = 0;
    for (std::int64_t t = 0; t < count; ++t) {
        const auto at = tiling.at(t0 + t);
        const std::int64_t iy0 = at.oy - p.padTop, ix0 = at.ox - p.padLeft;
        const float* image = in + at.n * inImage;
        const float* imageMask = Masked ? mask + at.n * inImage : nullptr;
        const bool next = t > 0 && !at.rowStart; // the previous tile is its left neighbour
        base = next ? (base + M) % kTile : 0;
        int slot[kTile];
        for (int j = 0; j < kTile; ++j) slot[j] = (base + j) % kTile;
        bool rowIn[kTile];
        for (int i = 0; i < kTile; ++i) rowIn[i] = iy0 + i >= 0 && iy0 + i < p.inH;
        for (int j = next ? kTile - M : 0; j < kTile; ++j) {
            const bool colIn = ix0 + j >= 0 && ix0 + j < p.inW;
            for (int g = 0; g < G; ++g) {
                V v[kTile];
                for (int i = 0; i < kTile; ++i) {
                    const std::int64_t off = ((iy0 + i) * p.inW + ix0 + j) * C + cb + g * N;
                    v[i] = rowIn[i] && colIn
                               ? loadInput<Tail, Masked>(d, image + off,
                                                         Masked ? imageMask + off : nullptr,
                                                         C - cb - g * N)
                               : hn::Zero(d);
                }
                inputTransform(d, v, cols[slot[j]][g]);
            }
        }
        for (int i = 0; i < kTile; ++i) {
            for (int g = 0; g < G; ++g) {
                const std::int64_t c = cb + g * N;
                // Position (i, j) of the tile at Vt + (i * 6 + j) * step.
                float* dst = Vt + (Packed ? packedAt(t, c, count, CP) : t * CP + c);
                const std::int64_t step = count * CP;
                const V row[kTile] = {cols[slot[0]][g][i], cols[slot[1]][g][i],
                                      cols[slot[2]][g][i], cols[slot[3]][g][i],
                                      cols[slot[4]][g][i], cols[slot[5]][g][i]};
                V o[kTile];
                inputTransform(d, row, o);
                for (int j = 0; j < kTile; ++j) hn::Store(o[j], d, dst + (i * kTile + j) * step);
            }
        }
    }
}

// V[pos][t][c] = (B^T d B)[pos] for the input tiles t0 .. t0 + count of the batch, each V[pos] a
// [count x padded(inC)] matrix, row-major (the forward's left-hand side) or packed (Packed: the
// weight gradient's right-hand side); with a mask (same layout as the input), d is the input where
// mask > 0 and 0 elsewhere.
template <int M, bool Packed>
void transformInputs(const Pass& p, const float* in, const float* mask, std::int64_t t0,
                     std::int64_t count, float* Vt)
{
    const std::int64_t C = p.inC, N = lanes(), width = kGroup * N;
    std::int64_t cb = 0;
    for (; cb + width <= C; cb += width) {
        if (mask)
            transformInputBlock<M, Packed, false, true>(p, in, mask, t0, count, cb, kGroup, Vt);
        else
            transformInputBlock<M, Packed, false, false>(p, in, mask, t0, count, cb, kGroup, Vt);
    }
    if (cb < C) {
        const int groups = static_cast<int>((padded(C) - cb) / N);
        if (mask)
            transformInputBlock<M, Packed, true, true>(p, in, mask, t0, count, cb, groups, Vt);
        else
            transformInputBlock<M, Packed, true, false>(p, in, mask, t0, count, cb, groups, Vt);
    }
}

// --- the products ---

// C[R rows][NQ vectors] = (or +=, Accumulate) A[R rows][depth] * B[depth][NQ vectors], with
// A(r, t) at A[r * rowStride + t * depthStride] and B, C row-major, aligned. The products are
// summed from zero and added to C once: a running sum over many calls (the weight gradient's sum
// over all tiles) then rounds once per call, not once per product.
template <int R, int NQ, bool Accumulate>
HWY_INLINE void gemmBlock(const float* A, std::int64_t rowStride, std::int64_t depthStride,
                          const float* B, std::int64_t ldb, float* C, std::int64_t ldc,
                          std::int64_t depth)
{
    const D d;
    const std::int64_t N = lanes();
    V acc[R][NQ];
    for (int r = 0; r < R; ++r)
        for (int q = 0; q < NQ; ++q) acc[r][q] = hn::Zero(d);
    for (std::int64_t t = 0; t < depth; ++t) {
        V b[NQ];
        for (int q = 0; q < NQ; ++q) b[q] = hn::Load(d, B + t * ldb + q * N);
        const float* a = A + t * depthStride;
        for (int r = 0; r < R; ++r) {
            const V v = hn::Set(d, a[r * rowStride]);
            for (int q = 0; q < NQ; ++q) acc[r][q] = hn::MulAdd(v, b[q], acc[r][q]);
        }
    }
    for (int r = 0; r < R; ++r)
        for (int q = 0; q < NQ; ++q) {
            float* c = C + r * ldc + q * N;
            hn::Store(Accumulate ? hn::Add(hn::Load(d, c), acc[r][q]) : acc[r][q], d, c);
        }
}

// R rows of C over a panel of `cols` (at most kCols vectors) columns: NQ vectors, or fewer.
template <int R, int NQ, bool Accumulate>
HWY_INLINE void gemmPanelRows(const float* A, std::int64_t rowStride, std::int64_t depthStride,
                              const float* B, std::int64_t ldb, std::int64_t cols, float* C,
                              std::int64_t ldc, std::int64_t depth)
{
    if constexpr (NQ > 1)
        if (cols < NQ * lanes())
            return gemmPanelRows<R, NQ - 1, Accumulate>(A, rowStride, depthStride, B, ldb, cols, C,
                                                        ldc, depth);
    gemmBlock<R, NQ, Accumulate>(A, rowStride, depthStride, B, ldb, C, ldc, depth);
}

// The last rows (< kRows) of a panel, R of them or fewer.
template <int R, bool Accumulate>
HWY_INLINE void gemmPanelTail(const float* A, std::int64_t rowStride, std::int64_t depthStride,
                              std::int64_t rows, const float* B, std::int64_t ldb,
                              std::int64_t cols, float* C, std::int64_t ldc, std::int64_t depth)
{
    if (rows == R)
        gemmPanelRows<R, kCols, Accumulate>(A, rowStride, depthStride, B, ldb, cols, C, ldc, depth);
    else if constexpr (R > 1)
        gemmPanelTail<R - 1, Accumulate>(A, rowStride, depthStride, rows, B, ldb, cols, C, ldc,
                                         depth);
}

// Every row of C over one panel of B (cols at most kCols vectors), for one block of the depth.
template <bool Accumulate>
void gemmPanel(const float* A, std::int64_t rowStride, std::int64_t depthStride, std::int64_t rows,
               const float* B, std::int64_t ldb, std::int64_t cols, float* C, std::int64_t ldc,
               std::int64_t depth)
{
    std::int64_t r = 0;
    for (; r + kRows <= rows; r += kRows)
        gemmPanelRows<kRows, kCols, Accumulate>(A + r * rowStride, rowStride, depthStride, B, ldb,
                                                cols, C + r * ldc, ldc, depth);
    if (r < rows)
        gemmPanelTail<kRows - 1, Accumulate>(A + r * rowStride, rowStride, depthStride, rows - r, B,
                                             ldb, cols, C + r * ldc, ldc, depth);
}

// C[rows x cols] (+)= A[rows x depth] * B[depth x cols], B packed (packedAt), cols whole vectors.
// Each panel of B, by a block of the depth that fits the L1 cache, is passed over by every row of
// A (which stays in L2) before the next: each float of B is read from memory once.
template <bool Accumulate>
void gemm(const float* A, std::int64_t rowStride, std::int64_t depthStride, std::int64_t rows,
          const float* B, std::int64_t cols, float* C, std::int64_t ldc, std::int64_t depth)
{
    const std::int64_t width = panelWidth();
    const std::int64_t block = std::max<std::int64_t>(kRows, kPanelFloats / width);
    for (std::int64_t k = 0; k < depth; k += block) {
        const std::int64_t dk = std::min(block, depth - k);
        const float* a = A + k * depthStride;
        for (std::int64_t q = 0; q < cols; q += width) {
            const std::int64_t w = std::min(width, cols - q);
            const float* b = B + q * depth + k * w;
            if (Accumulate || k > 0)
                gemmPanel<true>(a, rowStride, depthStride, rows, b, w, w, C + q, ldc, dk);
            else
                gemmPanel<false>(a, rowStride, depthStride, rows, b, w, w, C + q, ldc, dk);
        }
    }
}

// M[pos] = V[pos] * U[pos] for the 36 positions: [count x inC] x [inC x outC], the padding
// channels of V (zero) left out of the sums.
inline void multiply(const Pass& p, const float* Vt, const float* U, std::int64_t count, float* M)
{
    const std::int64_t C = p.inC, CP = padded(C), KP = padded(p.outC);
    for (int pos = 0; pos < kPositions; ++pos)
        gemm<false>(Vt + pos * count * CP, CP, 1, count, U + pos * C * KP, KP, M + pos * count * KP,
                    KP, C);
}

// The output tiles t0 .. t0 + count of the batch: Y = A^T M A, plus bias, then ReLU; only the
// pixels inside the output are written, with non-temporal stores where `stream` (whole vectors,
// aligned: the caller checks that outC is whole vectors and out aligned).
template <int M>
void transformOutputs(const Pass& p, const float* prod, std::int64_t t0, std::int64_t count,
                      const float* bias, bool relu, bool stream, float* out)
{
    const D d;
    const Tiling<M> tiling(p);
    const std::int64_t K = p.outC, KP = padded(K), N = lanes(), outImage = p.outH * p.outW * K;
    const V zero = hn::Zero(d);
    for (std::int64_t t = 0; t < count; ++t) {
        const auto at = tiling.at(t0 + t);
        float* image = out + at.n * outImage;
        const int rows = static_cast<int>(std::min<std::int64_t>(M, p.outH - at.oy));
        const int cols = static_cast<int>(std::min<std::int64_t>(M, p.outW - at.ox));
        for (std::int64_t kb = 0; kb < K; kb += N) {
            const std::int64_t n = K - kb;
            V colT[kTile][M]; // colT[j] = A^T (column j of M)
            for (int j = 0; j < kTile; ++j) {
                V m[kTile];
                for (int i = 0; i < kTile; ++i)
                    m[i] = hn::Load(d, prod + ((i * kTile + j) * count + t) * KP + kb);
                outputTransform<M>(d, m, colT[j]);
            }
            const V b = bias ? loadChannels(d, bias + kb, n) : zero;
            for (int i = 0; i < rows; ++i) {
                const V row[kTile] = {colT[0][i], colT[1][i], colT[2][i],
                                      colT[3][i], colT[4][i], colT[5][i]};
                V o[M];
                outputTransform<M>(d, row, o);
                for (int j = 0; j < cols; ++j) {
                    V v = hn::Add(o[j], b);
                    if (relu) v = hn::IfThenElseZero(hn::Gt(v, zero), v);
                    float* dst = image + ((at.oy + i) * p.outW + at.ox + j) * K + kb;
                    if (stream)
                        hn::Stream(v, d, dst);
                    else
                        storeChannels(d, v, dst, n);
                }
            }
        }
    }
}

// Tiles per chunk of work: as many as fit the cache budget (floatsPerTile each), or, where the
// data read once per chunk (sharedFloats: the transformed kernel, or the weight gradient's
// partial sums) does not fit it, at least kMinChunkTiles; the chunks spread evenly over the
// batch's tiles and over the threads.
struct Chunks
{
    std::int64_t chunks, per;
};
inline Chunks chunksOf(std::int64_t tiles, std::int64_t floatsPerTile, std::int64_t sharedFloats,
                       int threads)
{
    std::int64_t most = std::max<std::int64_t>(kRows, kChunkFloats / floatsPerTile);
    if (sharedFloats > kChunkFloats) most = std::max(most, kMinChunkTiles);
    std::int64_t chunks = (tiles + most - 1) / most;
    chunks = std::min(tiles, (chunks + threads - 1) / threads * threads);
    const std::int64_t per = (tiles + chunks - 1) / chunks;
    return {(tiles + per - 1) / per, per};
}

// One pass by tiles: transform the inputs, multiply by U, transform back.
template <int M>
void run(const Pass& p, const float* in, const float* mask, const float* bias, bool relu,
         const float* U, AlignedBuffer& scratchBuffer, float* out)
{
    const std::int64_t C = p.inC, CP = padded(C), KP = padded(p.outC);
    const Tiling<M> tiling(p);
    const int threads = omp_get_max_threads();
    const Chunks ch =
        chunksOf(tiling.total(p), kPositions * (CP + KP), kPositions * C * KP, threads);
    const std::int64_t scratchPerThread = kPositions * ch.per * (CP + KP);
    float* scratch = scratchBuffer.floats(static_cast<std::size_t>(scratchPerThread * threads));
    const std::int64_t tiles = tiling.total(p);
    // Non-temporal stores need whole vectors at aligned addresses: every pixel's channels start
    // one where outC is whole vectors and out is aligned (a tensor's data is, to 64 bytes).
    const bool stream = p.streamOutput && p.outC % lanes() == 0 &&
                        reinterpret_cast<std::uintptr_t>(out) % (lanes() * sizeof(float)) == 0;
#pragma omp parallel if (ch.chunks > 1)
    {
#pragma omp for schedule(static)
        for (std::int64_t chunk = 0; chunk < ch.chunks; ++chunk) {
            const std::int64_t t0 = chunk * ch.per, count = std::min(ch.per, tiles - t0);
            float* Vt = scratch + omp_get_thread_num() * scratchPerThread;
            float* prod = Vt + kPositions * ch.per * CP;
            transformInputs<M, false>(p, in, mask, t0, count, Vt);
            multiply(p, Vt, U, count, prod);
            transformOutputs<M>(p, prod, t0, count, bias, relu, stream, out);
        }
        // Non-temporal stores are ordered by nothing else: each thread's are made visible before
        // the region ends and another thread (or the caller) reads the output.
        if (stream) hwy::FlushStream();
    }
}

// y = conv(x, w) (+ b), then ReLU when asked; p the forward pass.
template <int M, int R>
void forward(const Pass& p, const float* x, const float* w, const float* b, bool relu, float* y,
             AlignedBuffer& u, AlignedBuffer& scratch)
{
    float* U = u.floats(static_cast<std::size_t>(kPositions * p.inC * padded(p.outC)));
    transformKernel<R>(p, w, false, U);
    run<M>(p, x, nullptr, b, relu, U, scratch, y);
}

// dx from dy (masked) and w; p the backward-data pass.
template <int M, int R>
void backwardData(const Pass& p, const float* dy, const float* mask, const float* w, float* dx,
                  AlignedBuffer& u, AlignedBuffer& scratch)
{
    float* U = u.floats(static_cast<std::size_t>(kPositions * p.inC * padded(p.outC)));
    transformKernel<R>(p, w, true, U);
    run<M>(p, dy, mask, nullptr, false, U, scratch, dx);
}

// --- the weight gradient: F(r x r, m x m) on the same tiles ---
//   dW = A'^T [sum over tiles of (G' g G'^T) . (B^T d B)] A',
// G' the 6 x m filterTransform, A'^T the r x 6 outputTransform.

// Gt[pos][t][k] = (G' g G'^T)[pos] for the m x m output-gradient tiles t0 .. t0 + count of the
// batch (zero beyond the output, masked like transformInputs), rows of gradientStride(outC) floats;
// db[k]
// (when not null, padded(outC) floats) gains the sum of each tile.
template <int M, bool Masked>
void transformGradients(const Pass& p, const float* dy, const float* mask, std::int64_t t0,
                        std::int64_t count, float* Gt, float* db)
{
    const D d;
    const Tiling<M> tiling(p);
    const std::int64_t K = p.outC, ldg = gradientStride(K), N = lanes();
    const std::int64_t outImage = p.outH * p.outW * K;
    const V zero = hn::Zero(d);
    for (std::int64_t t = 0; t < count; ++t) {
        const auto at = tiling.at(t0 + t);
        const float* image = dy + at.n * outImage + (at.oy * p.outW + at.ox) * K;
        const float* imageMask = Masked ? mask + (image - dy) : nullptr;
        const int rows = static_cast<int>(std::min<std::int64_t>(M, p.outH - at.oy));
        const int cols = static_cast<int>(std::min<std::int64_t>(M, p.outW - at.ox));
        const bool full = rows == M && cols == M;
        for (std::int64_t kb = 0; kb < K; kb += N) {
            const std::int64_t n = K - kb;
            V g[M][M]; // g[column][row]
            if (full && n >= N) {
                for (int j = 0; j < M; ++j)
                    for (int i = 0; i < M; ++i) {
                        const std::int64_t off = (i * p.outW + j) * K + kb;
                        g[j][i] = loadInput<false, Masked>(d, image + off,
                                                           Masked ? imageMask + off : nullptr, n);
                    }
            } else {
                for (int j = 0; j < M; ++j)
                    for (int i = 0; i < M; ++i) {
                        const std::int64_t off = (i * p.outW + j) * K + kb;
                        g[j][i] = i < rows && j < cols
                                      ? loadInput<true, Masked>(
                                            d, image + off, Masked ? imageMask + off : nullptr, n)
                                      : zero;
                    }
            }
            if (db) {
                V sum = zero;
                for (int j = 0; j < M; ++j)
                    for (int i = 0; i < M; ++i) sum = hn::Add(sum, g[j][i]);
                hn::Store(hn::Add(hn::Load(d, db + kb), sum), d, db + kb);
            }
            V colT[M][kTile]; // G' times each column of the tile
            for (int j = 0; j < M; ++j) filterTransform<M>(d, g[j], colT[j]);
            for (int a = 0; a < kTile; ++a) {
                V row[M], o[kTile];
                for (int j = 0; j < M; ++j) row[j] = colT[j][a];
                filterTransform<M>(d, row, o);
                for (int b = 0; b < kTile; ++b)
                    hn::Store(o[b], d, Gt + ((a * kTile + b) * count + t) * ldg + kb);
            }
        }
    }
}

// dw[k][c][r][r] (OIHW) = A'^T S A' for output channel k, with S the sum of the partial sums
// S_i[pos][k][c] of the threads that have one (`parts` of them, each at parts[i]; rows of
// padded(inC) floats).
template <int R>
void transformWeightGradient(const Pass& p, const std::vector<const float*>& parts, std::int64_t k,
                             float* dw)
{
    const D d;
    const std::int64_t K = p.outC, C = p.inC, CP = padded(C), N = lanes();
    HWY_ALIGN float part[hn::MaxLanes(D())];
    for (std::int64_t cb = 0; cb < C; cb += N) {
        const std::int64_t n = std::min(N, C - cb);
        V colT[kTile][R];
        for (int b = 0; b < kTile; ++b) {
            V m[kTile];
            for (int a = 0; a < kTile; ++a) {
                const std::int64_t off = ((a * kTile + b) * K + k) * CP + cb;
                m[a] = hn::Zero(d);
                for (const float* s : parts) m[a] = hn::Add(m[a], hn::Load(d, s + off));
            }
            outputTransform<R>(d, m, colT[b]);
        }
        for (int i = 0; i < R; ++i) {
            const V row[kTile] = {colT[0][i], colT[1][i], colT[2][i],
                                  colT[3][i], colT[4][i], colT[5][i]};
            V o[R];
            outputTransform<R>(d, row, o);
            for (int j = 0; j < R; ++j) {
                hn::Store(o[j], d, part);
                for (std::int64_t l = 0; l < n; ++l)
                    dw[((k * C + cb + l) * R + i) * R + j] = part[l];
            }
        }
    }
}

// dw and db (when not null) from x and dy (masked); p is the forward pass: x its input, dy the
// gradient of its output. Each thread sums its chunks' products into its own S[pos][k][c]
// (36 K C floats: 19 MB for 256 -> 512 channels); the threads' sums are added as they are
// transformed back.
template <int M, int R>
void backwardWeights(const Pass& p, const float* x, const float* dy, const float* mask, float* dw,
                     float* db, AlignedBuffer& scratchBuffer)
{
    const std::int64_t C = p.inC, K = p.outC, CP = padded(C), KP = padded(K);
    const std::int64_t ldg = gradientStride(K);
    const Tiling<M> tiling(p);
    const std::int64_t tiles = tiling.total(p);
    const int threads = omp_get_max_threads();
    const std::int64_t sFloats = kPositions * K * CP;
    const Chunks ch = chunksOf(tiles, kPositions * (CP + ldg), sFloats, threads);
    // Per thread: transformed inputs and gradients of a chunk, the partial sums S, db's partial
    // (after S, which parts[] points to).
    const std::int64_t chunkFloats = kPositions * ch.per * (CP + ldg);
    const std::int64_t perThread = chunkFloats + sFloats + KP;
    float* scratch = scratchBuffer.floats(static_cast<std::size_t>(perThread * threads));
    std::vector<const float*> parts(static_cast<std::size_t>(threads), nullptr);
#pragma omp parallel
    {
        const int thread = omp_get_thread_num();
        float* Vt = scratch + thread * perThread;
        float* Gt = Vt + kPositions * ch.per * CP;
        float* S = Vt + chunkFloats;
        float* dbPart = S + sFloats;
        std::fill(dbPart, dbPart + KP, 0.0f);
        bool first = true; // S is written by the first chunk's products, then summed into
#pragma omp for schedule(static)
        for (std::int64_t chunk = 0; chunk < ch.chunks; ++chunk) {
            const std::int64_t t0 = chunk * ch.per, count = std::min(ch.per, tiles - t0);
            transformInputs<M, true>(p, x, nullptr, t0, count, Vt);
            if (mask)
                transformGradients<M, true>(p, dy, mask, t0, count, Gt, db ? dbPart : nullptr);
            else
                transformGradients<M, false>(p, dy, mask, t0, count, Gt, db ? dbPart : nullptr);
            // S[pos][k][c] (+)= sum over tiles of Gt[pos][t][k] V[pos][t][c]
            for (int pos = 0; pos < kPositions; ++pos) {
                const float* g = Gt + pos * count * ldg;
                const float* v = Vt + pos * count * CP;
                if (first)
                    gemm<false>(g, 1, ldg, K, v, CP, S + pos * K * CP, CP, count);
                else
                    gemm<true>(g, 1, ldg, K, v, CP, S + pos * K * CP, CP, count);
            }
            first = false;
        }
        if (!first) parts[static_cast<std::size_t>(thread)] = S;
#pragma omp barrier
        std::vector<const float*> sums;
        for (const float* part : parts)
            if (part) sums.push_back(part);
#pragma omp for schedule(static)
        for (std::int64_t k = 0; k < K; ++k) transformWeightGradient<R>(p, sums, k, dw);
        if (db) {
#pragma omp for schedule(static)
            for (std::int64_t k = 0; k < K; ++k) {
                float sum = 0;
                for (const float* part : sums) sum += part[sFloats + k];
                db[k] = sum;
            }
        }
    }
}

HWY_INLINE int vectorFlops()
{
    return static_cast<int>(lanes()) * (HWY_NATIVE_FMA ? 2 : 1);
}

} // namespace winograd
} // namespace HWY_NAMESPACE
} // namespace towers::engine::cpu
HWY_AFTER_NAMESPACE();

#endif // TOWERS_ENGINE_CPU_WINOGRAD_TILES_INL_H_
