// Towers' Winograd F(2x2, 5x5) (winograd_5x5.h), written once with Google Highway and compiled by
// foreach_target for every x86-64 instruction set it knows (AVX-512, AVX2, SSE4, SSSE3 and the
// portable baseline, SCALAR or EMU128); each call runs on the target Highway dispatches to then.
//
// Channels go in vectors of N = Lanes floats (16 on AVX-512, 8 on AVX2, 4 on SSE4). The
// transformed tiles and the products keep their channel rows padded to whole vectors with zeros
// (inputs and gradients are read with zero-filled partial vectors at the tail; the transformed
// kernel's padding columns are zero), so the products need no tail case and any channel count
// works; only the final stores and the weight gradient's scatter stop at the real channels.
#include "engine/cpu/winograd_5x5.h"

#include <algorithm>
#include <cstring>

#include <omp.h>

#include "engine/cpu/cpu_common.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "engine/cpu/winograd_5x5.cpp"
#include <hwy/aligned_allocator.h>
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
using Pass = Winograd5x5::Pass;

// The matrices of F(2x2, 5x5) for the points 0, 1, -1, 2, -2 and infinity (Lavin & Gray's
// construction; B^T and A^T appear as the arithmetic of inputTransform and outputTransform):
//   B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
//   A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 1]
constexpr float kG[6][5] = {
    {1.0f / 4, 0, 0, 0, 0},
    {-1.0f / 6, -1.0f / 6, -1.0f / 6, -1.0f / 6, -1.0f / 6},
    {-1.0f / 6, 1.0f / 6, -1.0f / 6, 1.0f / 6, -1.0f / 6},
    {1.0f / 24, 1.0f / 12, 1.0f / 6, 1.0f / 3, 2.0f / 3},
    {1.0f / 24, -1.0f / 12, 1.0f / 6, -1.0f / 3, 2.0f / 3},
    {0, 0, 0, 0, 1},
};

constexpr int kTile = 6;                  // input tile side
constexpr int kPositions = kTile * kTile; // products per channel pair and output tile
// Floats of transformed inputs and products one thread keeps for a chunk of tiles: small enough
// to stay in a core's L2 cache (1 MB on the machines measured) next to the kernel.
constexpr std::int64_t kChunkFloats = 196608;
// The matrix products' register block: kRows rows by kCols vectors of accumulators, plus kCols
// vectors of the right-hand side and one broadcast. x86 before AVX-512 has 16 vector registers
// (6 x 2 + 2 + 1 = 15), AVX-512 32 (6 x 4 + 4 + 1 = 29).
constexpr int kRows = 6;
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
constexpr int kCols = 2;
#else
constexpr int kCols = 4;
#endif

std::int64_t lanes()
{
    return static_cast<std::int64_t>(hn::Lanes(D()));
}

// n rounded up to whole vectors.
std::int64_t padded(std::int64_t n)
{
    const std::int64_t l = lanes();
    return (n + l - 1) / l * l;
}

// n channels of p, zero where mask <= 0 (a fused ReLU's backward); no mask: p itself.
HWY_INLINE V loadMasked(D d, const float* p, const float* mask, std::int64_t n)
{
    const V v = loadChannels(d, p, n);
    return mask ? hn::IfThenElseZero(hn::Gt(loadChannels(d, mask, n), hn::Zero(d)), v) : v;
}

// U[pos][ci][co] = (G g G^T)[pos] for g the 5x5 kernel from input channel ci to output channel co
// of the pass, rows of padded(outC) floats (zero past outC). w is OIHW; forward: [outC][inC][5][5];
// backward: [inC][outC][5][5] with g[i][j] = w[ci][co][4 - i][4 - j] (backward data is the
// correlation with the flipped kernel, the channel roles swapped).
void transformKernel(const Pass& p, const float* w, bool backward, float* U)
{
    const D d;
    const std::int64_t in = p.inC, out = p.outC, outP = padded(out), N = lanes();
#pragma omp parallel if (in * out > 4096)
    {
        // g[i][j][co] and t[a][j][co] = sum_i G[a][i] g[i][j][co], rows of outP floats.
        auto g = hwy::AllocateAligned<float>(static_cast<std::size_t>(25 * outP));
        auto t = hwy::AllocateAligned<float>(static_cast<std::size_t>(30 * outP));
        std::fill(g.get(), g.get() + 25 * outP, 0.0f);
#pragma omp for schedule(static)
        for (std::int64_t ci = 0; ci < in; ++ci) {
            for (std::int64_t co = 0; co < out; ++co)
                for (int i = 0; i < 5; ++i)
                    for (int j = 0; j < 5; ++j)
                        g[static_cast<std::size_t>((i * 5 + j) * outP + co)] =
                            backward ? w[((ci * out + co) * 5 + (4 - i)) * 5 + (4 - j)]
                                     : w[((co * in + ci) * 5 + i) * 5 + j];
            for (std::int64_t c = 0; c < outP; c += N) {
                for (int a = 0; a < kTile; ++a)
                    for (int j = 0; j < 5; ++j) {
                        V s = hn::Zero(d);
                        for (int i = 0; i < 5; ++i)
                            if (kG[a][i] != 0)
                                s = hn::MulAdd(hn::Set(d, kG[a][i]),
                                               hn::Load(d, g.get() + (i * 5 + j) * outP + c), s);
                        hn::Store(s, d, t.get() + (a * 5 + j) * outP + c);
                    }
                for (int a = 0; a < kTile; ++a)
                    for (int b = 0; b < kTile; ++b) {
                        V s = hn::Zero(d);
                        for (int j = 0; j < 5; ++j)
                            if (kG[b][j] != 0)
                                s = hn::MulAdd(hn::Set(d, kG[b][j]),
                                               hn::Load(d, t.get() + (a * 5 + j) * outP + c), s);
                        hn::Store(s, d, U + ((a * kTile + b) * in + ci) * outP + c);
                    }
            }
        }
    }
}

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

// o = A^T m for six vectors m.
HWY_INLINE void outputTransform(D d, const V m[6], V o[2])
{
    const V s12 = hn::Add(m[1], m[2]), s34 = hn::Add(m[3], m[4]);
    const V d12 = hn::Sub(m[1], m[2]), d34 = hn::Sub(m[3], m[4]);
    o[0] = hn::Add(hn::Add(m[0], s12), s34);
    o[1] = hn::Add(hn::MulAdd(hn::Set(d, 2.0f), d34, d12), m[5]);
}

// A vector of input channels: whole, or the last n < Lanes and zeros (Partial); with Masked, zero
// where mask <= 0.
template <bool Partial, bool Masked>
HWY_INLINE V loadInput(D d, const float* p, const float* mask, std::int64_t n)
{
    V v, m;
    if constexpr (Partial)
        v = loadPart(d, p, n);
    else
        v = hn::LoadU(d, p);
    if constexpr (!Masked) return v;
    if constexpr (Partial)
        m = loadPart(d, mask, n);
    else
        m = hn::LoadU(d, mask);
    return hn::IfThenElseZero(hn::Gt(m, hn::Zero(d)), v);
}

// transformInputs for the channels [cb, cb + Lanes) (fewer for Partial). Tiles overlap by 4
// columns: a tile right of the previous one shares 4 of its column transforms (B^T times a column
// of the tile), so those stay in a ring of 6 and only 2 are computed anew.
template <bool Partial, bool Masked>
void transformInputBlock(const Pass& p, const float* image, const float* mask, std::int64_t t0,
                         std::int64_t count, std::int64_t cb, float* Vt)
{
    const D d;
    const std::int64_t tilesW = p.tilesW(), C = p.inC, CP = padded(C), n = C - cb;
    V cols[kTile][kTile]; // the ring: cols[slot[j]] = B^T (column j of the tile)
    int base = 0;
    std::int64_t previous = -2; // the tile before, when it is in the same row
    for (std::int64_t t = 0; t < count; ++t) {
        const std::int64_t th = (t0 + t) / tilesW, tw = (t0 + t) % tilesW;
        const std::int64_t iy0 = 2 * th - p.padTop, ix0 = 2 * tw - p.padLeft;
        const bool next = tw > 0 && previous == t0 + t - 1;
        previous = t0 + t;
        base = next ? (base + 2) % kTile : 0;
        int slot[kTile];
        for (int j = 0; j < kTile; ++j) slot[j] = (base + j) % kTile;
        bool rowIn[kTile];
        for (int i = 0; i < kTile; ++i) rowIn[i] = iy0 + i >= 0 && iy0 + i < p.inH;
        for (int j = next ? kTile - 2 : 0; j < kTile; ++j) {
            const bool colIn = ix0 + j >= 0 && ix0 + j < p.inW;
            V in[kTile];
            for (int i = 0; i < kTile; ++i) {
                const std::int64_t at = ((iy0 + i) * p.inW + ix0 + j) * C + cb;
                in[i] =
                    rowIn[i] && colIn
                        ? loadInput<Partial, Masked>(d, image + at, Masked ? mask + at : nullptr, n)
                        : hn::Zero(d);
            }
            inputTransform(d, in, cols[slot[j]]);
        }
        for (int i = 0; i < kTile; ++i) {
            const V row[kTile] = {cols[slot[0]][i], cols[slot[1]][i], cols[slot[2]][i],
                                  cols[slot[3]][i], cols[slot[4]][i], cols[slot[5]][i]};
            V o[kTile];
            inputTransform(d, row, o);
            for (int j = 0; j < kTile; ++j)
                hn::Store(o[j], d, Vt + ((i * kTile + j) * count + t) * CP + cb);
        }
    }
}

// V[pos][t][c] = (B^T d B)[pos] for the input tiles t0 .. t0 + count of one image, rows of
// padded(inC) floats; with a mask (same layout as the image), d is the image where mask > 0 and 0
// elsewhere.
void transformInputs(const Pass& p, const float* image, const float* mask, std::int64_t t0,
                     std::int64_t count, float* Vt)
{
    const std::int64_t C = p.inC, N = lanes();
    for (std::int64_t cb = 0; cb < C; cb += N) {
        if (C - cb >= N) {
            if (mask)
                transformInputBlock<false, true>(p, image, mask, t0, count, cb, Vt);
            else
                transformInputBlock<false, false>(p, image, mask, t0, count, cb, Vt);
        } else {
            if (mask)
                transformInputBlock<true, true>(p, image, mask, t0, count, cb, Vt);
            else
                transformInputBlock<true, false>(p, image, mask, t0, count, cb, Vt);
        }
    }
}

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

// R rows of C over `cols` (whole vectors) columns: blocks of NQ vectors, then fewer.
template <int R, int NQ, bool Accumulate>
HWY_INLINE void gemmRows(const float* A, std::int64_t rowStride, std::int64_t depthStride,
                         const float* B, std::int64_t ldb, std::int64_t cols, float* C,
                         std::int64_t ldc, std::int64_t depth)
{
    const std::int64_t width = NQ * lanes();
    std::int64_t q = 0;
    for (; q + width <= cols; q += width)
        gemmBlock<R, NQ, Accumulate>(A, rowStride, depthStride, B + q, ldb, C + q, ldc, depth);
    if constexpr (NQ > 1)
        if (q < cols)
            gemmRows<R, NQ - 1, Accumulate>(A, rowStride, depthStride, B + q, ldb, cols - q, C + q,
                                            ldc, depth);
}

// The last rows (< kRows) of a product, R of them or fewer.
template <int R, bool Accumulate>
HWY_INLINE void gemmTail(const float* A, std::int64_t rowStride, std::int64_t depthStride,
                         std::int64_t rows, const float* B, std::int64_t ldb, std::int64_t cols,
                         float* C, std::int64_t ldc, std::int64_t depth)
{
    if (rows == R)
        gemmRows<R, kCols, Accumulate>(A, rowStride, depthStride, B, ldb, cols, C, ldc, depth);
    else if constexpr (R > 1)
        gemmTail<R - 1, Accumulate>(A, rowStride, depthStride, rows, B, ldb, cols, C, ldc, depth);
}

// C[rows x cols] (+)= A[rows x depth] * B[depth x cols], cols whole vectors: blocks of kRows
// rows, then the rest.
template <bool Accumulate>
void gemm(const float* A, std::int64_t rowStride, std::int64_t depthStride, std::int64_t rows,
          const float* B, std::int64_t ldb, std::int64_t cols, float* C, std::int64_t ldc,
          std::int64_t depth)
{
    std::int64_t r = 0;
    for (; r + kRows <= rows; r += kRows)
        gemmRows<kRows, kCols, Accumulate>(A + r * rowStride, rowStride, depthStride, B, ldb, cols,
                                           C + r * ldc, ldc, depth);
    if (r < rows)
        gemmTail<kRows - 1, Accumulate>(A + r * rowStride, rowStride, depthStride, rows - r, B, ldb,
                                        cols, C + r * ldc, ldc, depth);
}

// M[pos] = V[pos] * U[pos] for the 36 positions: [count x inC] x [inC x outC], the padding
// channels of V (zero) left out of the sums.
void multiply(const Pass& p, const float* Vt, const float* U, std::int64_t count, float* M)
{
    const std::int64_t C = p.inC, CP = padded(C), KP = padded(p.outC);
    for (int pos = 0; pos < kPositions; ++pos)
        gemm<false>(Vt + pos * count * CP, CP, 1, count, U + pos * C * KP, KP, KP,
                    M + pos * count * KP, KP, C);
}

// The output tiles t0 .. t0 + count of one image: Y = A^T M A, plus bias, then ReLU.
void transformOutputs(const Pass& p, const float* M, std::int64_t t0, std::int64_t count,
                      const float* bias, bool relu, float* image)
{
    const D d;
    const std::int64_t tilesW = p.tilesW(), K = p.outC, KP = padded(K), N = lanes();
    const V zero = hn::Zero(d);
    for (std::int64_t t = 0; t < count; ++t) {
        const std::int64_t oy = 2 * ((t0 + t) / tilesW), ox = 2 * ((t0 + t) % tilesW);
        for (std::int64_t kb = 0; kb < K; kb += N) {
            const std::int64_t n = K - kb;
            V cols[kTile][2]; // cols[j] = A^T (column j of M)
            for (int j = 0; j < kTile; ++j) {
                V m[kTile];
                for (int i = 0; i < kTile; ++i)
                    m[i] = hn::Load(d, M + ((i * kTile + j) * count + t) * KP + kb);
                outputTransform(d, m, cols[j]);
            }
            const V b = bias ? loadChannels(d, bias + kb, n) : zero;
            for (int i = 0; i < 2 && oy + i < p.outH; ++i) {
                const V row[kTile] = {cols[0][i], cols[1][i], cols[2][i],
                                      cols[3][i], cols[4][i], cols[5][i]};
                V o[2];
                outputTransform(d, row, o);
                for (int j = 0; j < 2 && ox + j < p.outW; ++j) {
                    V v = hn::Add(o[j], b);
                    if (relu) v = hn::IfThenElseZero(hn::Gt(v, zero), v);
                    storeChannels(d, v, image + ((oy + i) * p.outW + ox + j) * K + kb, n);
                }
            }
        }
    }
}

// The weight gradient is the correlation of each 6x6 input tile with its 2x2 output-gradient tile,
// a 5x5 result: Winograd F(5x5, 2x2) on the same points, so the input transform is the forward's
// and the products are summed over all tiles in the transformed domain:
//   dW = A'^T [sum over tiles of (G' g G'^T) . (B^T d B)] A',
//   G' = [1/4 0; -1/6 -1/6; -1/6 1/6; 1/24 1/12; 1/24 -1/12; 0 1],
//   A'^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 0; 0 1 1 16 16 1].

// o = G' (u0, u1)^T.
HWY_INLINE void gradientTransform(D d, V u0, V u1, V o[6])
{
    const V sixth = hn::Set(d, 1.0f / 6), twelfth = hn::Set(d, 1.0f / 12);
    const V u0s = hn::Mul(u0, hn::Set(d, 1.0f / 24));
    o[0] = hn::Mul(u0, hn::Set(d, 0.25f));
    o[1] = hn::Mul(hn::Add(u0, u1), hn::Set(d, -1.0f / 6));
    o[2] = hn::Mul(hn::Sub(u1, u0), sixth);
    o[3] = hn::MulAdd(u1, twelfth, u0s);
    o[4] = hn::NegMulAdd(u1, twelfth, u0s);
    o[5] = u1;
}

// o = A'^T m.
HWY_INLINE void weightTransform(D d, const V m[6], V o[5])
{
    const V s12 = hn::Add(m[1], m[2]), d12 = hn::Sub(m[1], m[2]);
    const V s34 = hn::Add(m[3], m[4]), d34 = hn::Sub(m[3], m[4]);
    o[0] = hn::Add(hn::Add(m[0], s12), s34);
    o[1] = hn::MulAdd(hn::Set(d, 2.0f), d34, d12);
    o[2] = hn::MulAdd(hn::Set(d, 4.0f), s34, s12);
    o[3] = hn::MulAdd(hn::Set(d, 8.0f), d34, d12);
    o[4] = hn::Add(hn::MulAdd(hn::Set(d, 16.0f), s34, s12), m[5]);
}

// Gt[pos][t][k] = (G' g G'^T)[pos] for the 2x2 output-gradient tiles t0 .. t0 + count of one
// image (zero beyond the image, masked like transformInputs), rows of padded(outC) floats; db[k]
// (when not null, padded(outC) floats) gains the sum of each tile.
void transformGradients(const Pass& p, const float* image, const float* mask, std::int64_t t0,
                        std::int64_t count, float* Gt, float* db)
{
    const D d;
    const std::int64_t tilesW = p.tilesW(), K = p.outC, KP = padded(K), N = lanes();
    const V zero = hn::Zero(d);
    const auto at = [&](std::int64_t i, std::int64_t n) {
        return loadMasked(d, image + i, mask ? mask + i : nullptr, n);
    };
    for (std::int64_t t = 0; t < count; ++t) {
        const std::int64_t oy = 2 * ((t0 + t) / tilesW), ox = 2 * ((t0 + t) % tilesW);
        const bool row1 = oy + 1 < p.outH, col1 = ox + 1 < p.outW;
        const std::int64_t at0 = (oy * p.outW + ox) * K, at1 = at0 + p.outW * K;
        for (std::int64_t kb = 0; kb < K; kb += N) {
            const std::int64_t n = K - kb;
            const V g00 = at(at0 + kb, n);
            const V g01 = col1 ? at(at0 + K + kb, n) : zero;
            const V g10 = row1 ? at(at1 + kb, n) : zero;
            const V g11 = row1 && col1 ? at(at1 + K + kb, n) : zero;
            if (db) {
                const V sum = hn::Add(hn::Add(g00, g01), hn::Add(g10, g11));
                hn::Store(hn::Add(hn::Load(d, db + kb), sum), d, db + kb);
            }
            V c0[6], c1[6]; // G' times each column of the tile
            gradientTransform(d, g00, g10, c0);
            gradientTransform(d, g01, g11, c1);
            for (int a = 0; a < kTile; ++a) {
                V o[6];
                gradientTransform(d, c0[a], c1[a], o);
                for (int b = 0; b < kTile; ++b)
                    hn::Store(o[b], d, Gt + ((a * kTile + b) * count + t) * KP + kb);
            }
        }
    }
}

// dw[k][c][5][5] (OIHW) = A'^T S A' for output channel k, with S the sum of the threads' partial
// sums S_i[pos][k][c] (`threads` of them, `stride` floats apart, rows of padded(inC) floats).
void transformWeightGradient(const Pass& p, const float* S, std::int64_t stride, int threads,
                             std::int64_t k, float* dw)
{
    const D d;
    const std::int64_t K = p.outC, C = p.inC, CP = padded(C), N = lanes();
    HWY_ALIGN float part[hn::MaxLanes(D())];
    for (std::int64_t cb = 0; cb < C; cb += N) {
        const std::int64_t n = std::min(N, C - cb);
        V cols[kTile][5];
        for (int b = 0; b < kTile; ++b) {
            V m[kTile];
            for (int a = 0; a < kTile; ++a) {
                const float* s = S + ((a * kTile + b) * K + k) * CP + cb;
                m[a] = hn::Load(d, s);
                for (int i = 1; i < threads; ++i) m[a] = hn::Add(m[a], hn::Load(d, s + i * stride));
            }
            weightTransform(d, m, cols[b]);
        }
        for (int i = 0; i < 5; ++i) {
            const V row[kTile] = {cols[0][i], cols[1][i], cols[2][i],
                                  cols[3][i], cols[4][i], cols[5][i]};
            V o[5];
            weightTransform(d, row, o);
            for (int j = 0; j < 5; ++j) {
                hn::Store(o[j], d, part);
                for (std::int64_t l = 0; l < n; ++l)
                    dw[((k * C + cb + l) * 5 + i) * 5 + j] = part[l];
            }
        }
    }
}

// Tiles per chunk of work: as many as fit the cache budget (floatsPerTile each), spread evenly
// over the chunks of an image.
struct Chunks
{
    std::int64_t chunks, per;
};
Chunks chunksOf(std::int64_t tiles, std::int64_t floatsPerTile)
{
    const std::int64_t most = std::max<std::int64_t>(kRows, kChunkFloats / floatsPerTile);
    const std::int64_t chunks = (tiles + most - 1) / most;
    return {chunks, (tiles + chunks - 1) / chunks};
}

// One pass by tiles: transform the inputs, multiply by U, transform back.
void run(const Pass& p, const float* in, const float* mask, const float* bias, bool relu,
         const float* U, AlignedBuffer& scratchBuffer, float* out)
{
    const std::int64_t CP = padded(p.inC), KP = padded(p.outC);
    const std::int64_t tiles = p.tilesH() * p.tilesW();
    const Chunks ch = chunksOf(tiles, kPositions * (CP + KP));
    const std::int64_t scratchPerThread = kPositions * ch.per * (CP + KP);
    float* scratch =
        scratchBuffer.floats(static_cast<std::size_t>(scratchPerThread * omp_get_max_threads()));
    const std::int64_t items = p.n * ch.chunks;
    const std::int64_t inImage = p.inH * p.inW * p.inC, outImage = p.outH * p.outW * p.outC;
#pragma omp parallel for schedule(static) if (items > 1)
    for (std::int64_t item = 0; item < items; ++item) {
        const std::int64_t n = item / ch.chunks, t0 = (item % ch.chunks) * ch.per;
        const std::int64_t count = std::min(ch.per, tiles - t0);
        float* Vt = scratch + omp_get_thread_num() * scratchPerThread;
        float* M = Vt + kPositions * ch.per * CP;
        transformInputs(p, in + n * inImage, mask ? mask + n * inImage : nullptr, t0, count, Vt);
        multiply(p, Vt, U, count, M);
        transformOutputs(p, M, t0, count, bias, relu, out + n * outImage);
    }
}

} // namespace

void WinogradForward(const Pass& p, const float* x, const float* w, const float* b, bool relu,
                     float* y, AlignedBuffer& u, AlignedBuffer& scratch)
{
    float* U = u.floats(static_cast<std::size_t>(kPositions * p.inC * padded(p.outC)));
    transformKernel(p, w, false, U);
    run(p, x, nullptr, b, relu, U, scratch, y);
}

void WinogradBackwardData(const Pass& p, const float* dy, const float* mask, const float* w,
                          float* dx, AlignedBuffer& u, AlignedBuffer& scratch)
{
    float* U = u.floats(static_cast<std::size_t>(kPositions * p.inC * padded(p.outC)));
    transformKernel(p, w, true, U);
    run(p, dy, mask, nullptr, false, U, scratch, dx);
}

// p is the forward pass: x its input, dy the gradient of its output.
void WinogradBackwardWeights(const Pass& p, const float* x, const float* dy, const float* mask,
                             float* dw, float* db, AlignedBuffer& scratchBuffer)
{
    const std::int64_t C = p.inC, K = p.outC, CP = padded(C), KP = padded(K);
    const std::int64_t tiles = p.tilesH() * p.tilesW();
    const Chunks ch = chunksOf(tiles, kPositions * (CP + KP));
    // Per thread: transformed inputs and gradients of a chunk, the partial sums S, db's partial.
    const std::int64_t sFloats = kPositions * K * CP;
    const std::int64_t perThread = kPositions * ch.per * (CP + KP) + sFloats + KP;
    float* scratch =
        scratchBuffer.floats(static_cast<std::size_t>(perThread * omp_get_max_threads()));
    const std::int64_t items = p.n * ch.chunks;
    const std::int64_t inImage = p.inH * p.inW * C, outImage = p.outH * p.outW * K;
#pragma omp parallel
    {
        float* Vt = scratch + omp_get_thread_num() * perThread;
        float* Gt = Vt + kPositions * ch.per * CP;
        float* S = Gt + kPositions * ch.per * KP;
        float* dbPart = S + sFloats;
        std::fill(S, S + sFloats + KP, 0.0f);
#pragma omp for schedule(static)
        for (std::int64_t item = 0; item < items; ++item) {
            const std::int64_t n = item / ch.chunks, t0 = (item % ch.chunks) * ch.per;
            const std::int64_t count = std::min(ch.per, tiles - t0);
            transformInputs(p, x + n * inImage, nullptr, t0, count, Vt);
            transformGradients(p, dy + n * outImage, mask ? mask + n * outImage : nullptr, t0,
                               count, Gt, db ? dbPart : nullptr);
            // S[pos][k][c] += sum over tiles of Gt[pos][t][k] V[pos][t][c]
            for (int pos = 0; pos < kPositions; ++pos)
                gemm<true>(Gt + pos * count * KP, 1, KP, K, Vt + pos * count * CP, CP, CP,
                           S + pos * K * CP, CP, count);
        }
        const int threads = omp_get_num_threads();
        const float* S0 = scratch + kPositions * ch.per * (CP + KP);
#pragma omp for schedule(static)
        for (std::int64_t k = 0; k < K; ++k)
            transformWeightGradient(p, S0, perThread, threads, k, dw);
        if (db) {
#pragma omp for schedule(static)
            for (std::int64_t k = 0; k < K; ++k) {
                float sum = 0;
                for (int i = 0; i < threads; ++i) sum += S0[sFloats + i * perThread + k];
                db[k] = sum;
            }
        }
    }
}

std::int64_t WinogradTarget()
{
    return HWY_TARGET;
}

int WinogradVectorFlops()
{
    return static_cast<int>(lanes()) * (HWY_NATIVE_FMA ? 2 : 1);
}

} // namespace HWY_NAMESPACE
} // namespace towers::engine::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace towers::engine::cpu {

HWY_EXPORT(WinogradForward);
HWY_EXPORT(WinogradBackwardData);
HWY_EXPORT(WinogradBackwardWeights);
HWY_EXPORT(WinogradTarget);
HWY_EXPORT(WinogradVectorFlops);

bool Winograd5x5::supports(const Conv2dDesc& d)
{
    const Window2d& g = d.win;
    return g.kh == 5 && g.kw == 5 && g.sh == 1 && g.sw == 1;
}

std::int64_t Winograd5x5::target()
{
    return HWY_DYNAMIC_DISPATCH(WinogradTarget)();
}

std::string Winograd5x5::targetName()
{
    return hwy::TargetName(target());
}

int Winograd5x5::vectorFlops()
{
    return HWY_DYNAMIC_DISPATCH(WinogradVectorFlops)();
}

bool Winograd5x5::fasterThanDirect(const Conv2dDesc& d, int directVectorFlops)
{
    // It does 2.8x fewer multiplications than a direct convolution, but the transforms and the
    // trips through memory between them cost a good part of that back; measured (see the
    // header), it wins wherever its arithmetic per instruction is at least half the direct
    // kernels' (SSE4 against sse41 and avx, AVX2 against avx2), and loses below (SSE4 against
    // avx2). Below 16 channels on either side, the transforms, which work on whole vectors of
    // channels, cost more than the products save (a first layer's 1 or 3 input channels).
    constexpr std::int64_t kMinChannels = 16;
    return d.win.c >= kMinChannels && d.outChannels >= kMinChannels &&
           2 * vectorFlops() >= directVectorFlops;
}

Winograd5x5::Winograd5x5(const Conv2dDesc& d)
{
    const Window2d& g = d.win;
    m_forward = {g.n, g.h, g.w, g.c, g.oh, g.ow, d.outChannels, g.padTop, g.padLeft};
    // dx[iy] = sum_i w[i] dy[iy + padTop - i] = sum_i' w[4 - i'] dy[iy + i' - (4 - padTop)].
    m_backward = {g.n, g.oh, g.ow, d.outChannels, g.h, g.w, g.c, 4 - g.padTop, 4 - g.padLeft};
}

void Winograd5x5::forward(const float* x, const float* w, const float* b, bool relu, float* y)
{
    HWY_DYNAMIC_DISPATCH(WinogradForward)(m_forward, x, w, b, relu, y, m_u, m_scratch);
}

void Winograd5x5::backwardData(const float* dy, const float* mask, const float* w, float* dx)
{
    HWY_DYNAMIC_DISPATCH(WinogradBackwardData)(m_backward, dy, mask, w, dx, m_u, m_scratch);
}

void Winograd5x5::backwardWeights(const float* x, const float* dy, const float* mask, float* dw,
                                  float* db)
{
    HWY_DYNAMIC_DISPATCH(WinogradBackwardWeights)(m_forward, x, dy, mask, dw, db, m_scratch);
}

} // namespace towers::engine::cpu
#endif // HWY_ONCE
