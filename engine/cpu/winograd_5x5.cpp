#include "engine/cpu/winograd_5x5.h"

#include <algorithm>
#include <vector>

#include <omp.h>

#include "engine/cpu/cpu_common.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define TOWERS_HAVE_WINOGRAD 1
#define TOWERS_AVX512 __attribute__((target("avx512f")))
#define TOWERS_AVX512_INLINE __attribute__((target("avx512f"), always_inline)) inline
#else
#define TOWERS_HAVE_WINOGRAD 0
#endif

namespace towers::engine::cpu {

namespace {

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
constexpr int kLanes = 16;                // floats per AVX-512 vector
// Floats of transformed inputs and products one thread keeps for a chunk of tiles: small enough
// to stay in a core's L2 cache (1 MB on the machines measured) next to the kernel.
constexpr std::int64_t kChunkFloats = 196608;
constexpr int kRows = 6; // tiles per block of the matrix products (6 x 4 vectors in registers)

// U[pos][ci][co] = (G g G^T)[pos] for g the 5x5 kernel from input channel ci to output channel co
// of the pass. w is OIHW [K][C][5][5]; backward: the pass maps K channels to C with
// g[i][j] = w[k][c][4 - i][4 - j] (backward data is the correlation with the flipped kernel).
void transformKernel(const float* w, std::int64_t K, std::int64_t C, bool backward, float* U)
{
    const std::int64_t in = backward ? K : C, out = backward ? C : K;
#pragma omp parallel if (in * out > 4096)
    {
        std::vector<float> g(static_cast<std::size_t>(25 * out)),
            t(static_cast<std::size_t>(30 * out));
#pragma omp for schedule(static)
        for (std::int64_t ci = 0; ci < in; ++ci) {
            for (std::int64_t co = 0; co < out; ++co)
                for (int i = 0; i < 5; ++i)
                    for (int j = 0; j < 5; ++j)
                        g[static_cast<std::size_t>((i * 5 + j) * out + co)] =
                            backward ? w[((ci * C + co) * 5 + (4 - i)) * 5 + (4 - j)]
                                     : w[((co * C + ci) * 5 + i) * 5 + j];
            // t[a][j] = sum_i G[a][i] g[i][j], then U[a][b] = sum_j t[a][j] G[b][j], each
            // vectorised over the output channels.
            for (int a = 0; a < kTile; ++a)
                for (int j = 0; j < 5; ++j) {
                    float* tr = t.data() + (a * 5 + j) * out;
                    std::fill(tr, tr + out, 0.0f);
                    for (int i = 0; i < 5; ++i) {
                        const float c = kG[a][i];
                        if (c == 0) continue;
                        const float* gr = g.data() + (i * 5 + j) * out;
                        for (std::int64_t co = 0; co < out; ++co) tr[co] += c * gr[co];
                    }
                }
            for (int a = 0; a < kTile; ++a)
                for (int b = 0; b < kTile; ++b) {
                    float* ur = U + ((a * kTile + b) * in + ci) * out;
                    std::fill(ur, ur + out, 0.0f);
                    for (int j = 0; j < 5; ++j) {
                        const float c = kG[b][j];
                        if (c == 0) continue;
                        const float* tr = t.data() + (a * 5 + j) * out;
                        for (std::int64_t co = 0; co < out; ++co) ur[co] += c * tr[co];
                    }
                }
        }
    }
}

#if TOWERS_HAVE_WINOGRAD

// o = B^T d for six vectors d (one row or column of a tile).
TOWERS_AVX512_INLINE void inputTransform(const __m512 d[6], __m512 o[6])
{
    const __m512 four = _mm512_set1_ps(4.0f), five = _mm512_set1_ps(-5.0f);
    const __m512 two = _mm512_set1_ps(2.0f);
    o[0] = _mm512_fmadd_ps(four, d[0], _mm512_fmadd_ps(five, d[2], d[4]));
    o[1] = _mm512_fnmadd_ps(four, _mm512_add_ps(d[1], d[2]), _mm512_add_ps(d[3], d[4]));
    o[2] = _mm512_fmadd_ps(four, _mm512_sub_ps(d[1], d[2]), _mm512_sub_ps(d[4], d[3]));
    const __m512 a = _mm512_sub_ps(d[4], d[2]), b = _mm512_sub_ps(d[3], d[1]);
    o[3] = _mm512_fmadd_ps(two, b, a);
    o[4] = _mm512_fnmadd_ps(two, b, a);
    o[5] = _mm512_fmadd_ps(four, d[1], _mm512_fmadd_ps(five, d[3], d[5]));
}

// o = A^T m for six vectors m.
TOWERS_AVX512_INLINE void outputTransform(const __m512 m[6], __m512 o[2])
{
    const __m512 s12 = _mm512_add_ps(m[1], m[2]), s34 = _mm512_add_ps(m[3], m[4]);
    const __m512 d12 = _mm512_sub_ps(m[1], m[2]), d34 = _mm512_sub_ps(m[3], m[4]);
    o[0] = _mm512_add_ps(_mm512_add_ps(m[0], s12), s34);
    o[1] = _mm512_add_ps(_mm512_fmadd_ps(_mm512_set1_ps(2.0f), d34, d12), m[5]);
}

// Where mask[i] > 0, v; elsewhere 0 (a fused ReLU's backward).
TOWERS_AVX512_INLINE __m512 masked(__m512 v, const float* mask)
{
    return _mm512_maskz_mov_ps(
        _mm512_cmp_ps_mask(_mm512_loadu_ps(mask), _mm512_setzero_ps(), _CMP_GT_OQ), v);
}

TOWERS_AVX512_INLINE __m512 loadMasked(const float* p, const float* mask, std::int64_t at)
{
    const __m512 v = _mm512_loadu_ps(p + at);
    return mask ? masked(v, mask + at) : v;
}

// V[pos][t][c] = (B^T d B)[pos] for the input tiles t0 .. t0 + count of one image; with a mask
// (same layout as the image), d is the image where mask > 0 and 0 elsewhere.
TOWERS_AVX512 void transformInputs(const Winograd5x5::Pass& p, const float* image,
                                   const float* mask, std::int64_t t0, std::int64_t count, float* V)
{
    const std::int64_t tilesW = p.tilesW(), C = p.inC;
    for (std::int64_t t = 0; t < count; ++t) {
        const std::int64_t th = (t0 + t) / tilesW, tw = (t0 + t) % tilesW;
        const std::int64_t iy0 = 2 * th - p.padTop, ix0 = 2 * tw - p.padLeft;
        bool rowIn[kTile], colIn[kTile];
        for (int i = 0; i < kTile; ++i) {
            rowIn[i] = iy0 + i >= 0 && iy0 + i < p.inH;
            colIn[i] = ix0 + i >= 0 && ix0 + i < p.inW;
        }
        for (std::int64_t cb = 0; cb < C; cb += kLanes) {
            __m512 cols[kTile][kTile]; // cols[j] = B^T (column j of the tile)
            for (int j = 0; j < kTile; ++j) {
                __m512 d[kTile];
                for (int i = 0; i < kTile; ++i) {
                    if (!rowIn[i] || !colIn[j]) {
                        d[i] = _mm512_setzero_ps();
                        continue;
                    }
                    d[i] = loadMasked(image, mask, ((iy0 + i) * p.inW + ix0 + j) * C + cb);
                }
                inputTransform(d, cols[j]);
            }
            for (int i = 0; i < kTile; ++i) {
                const __m512 row[kTile] = {cols[0][i], cols[1][i], cols[2][i],
                                           cols[3][i], cols[4][i], cols[5][i]};
                __m512 o[kTile];
                inputTransform(row, o);
                for (int j = 0; j < kTile; ++j)
                    _mm512_store_ps(V + ((i * kTile + j) * count + t) * C + cb, o[j]);
            }
        }
    }
}

// C[R rows][NQ vectors] = (or +=, Accumulate) A[R rows][depth] * B[depth][NQ vectors], with
// A(r, t) at A[r * rowStride + t * depthStride] and B, C row-major. The products are summed from
// zero and added to C once: a running sum over many calls (the weight gradient's sum over all
// tiles) then rounds once per call, not once per product.
template <int R, int NQ, bool Accumulate>
TOWERS_AVX512_INLINE void gemmBlock(const float* A, std::int64_t rowStride,
                                    std::int64_t depthStride, const float* B, std::int64_t ldb,
                                    float* C, std::int64_t ldc, std::int64_t depth)
{
    __m512 acc[R][NQ];
    for (int r = 0; r < R; ++r)
        for (int q = 0; q < NQ; ++q) acc[r][q] = _mm512_setzero_ps();
    for (std::int64_t t = 0; t < depth; ++t) {
        __m512 b[NQ];
        for (int q = 0; q < NQ; ++q) b[q] = _mm512_load_ps(B + t * ldb + q * kLanes);
        const float* a = A + t * depthStride;
        for (int r = 0; r < R; ++r) {
            const __m512 v = _mm512_set1_ps(a[r * rowStride]);
            for (int q = 0; q < NQ; ++q) acc[r][q] = _mm512_fmadd_ps(v, b[q], acc[r][q]);
        }
    }
    for (int r = 0; r < R; ++r)
        for (int q = 0; q < NQ; ++q) {
            float* c = C + r * ldc + q * kLanes;
            _mm512_store_ps(c,
                            Accumulate ? _mm512_add_ps(_mm512_load_ps(c), acc[r][q]) : acc[r][q]);
        }
}

template <int R, bool Accumulate>
TOWERS_AVX512_INLINE void gemmRows(const float* A, std::int64_t rowStride, std::int64_t depthStride,
                                   const float* B, std::int64_t ldb, std::int64_t cols, float* C,
                                   std::int64_t ldc, std::int64_t depth)
{
    std::int64_t q = 0;
    for (; q + 4 * kLanes <= cols; q += 4 * kLanes)
        gemmBlock<R, 4, Accumulate>(A, rowStride, depthStride, B + q, ldb, C + q, ldc, depth);
    switch ((cols - q) / kLanes) {
    case 3:
        gemmBlock<R, 3, Accumulate>(A, rowStride, depthStride, B + q, ldb, C + q, ldc, depth);
        break;
    case 2:
        gemmBlock<R, 2, Accumulate>(A, rowStride, depthStride, B + q, ldb, C + q, ldc, depth);
        break;
    case 1:
        gemmBlock<R, 1, Accumulate>(A, rowStride, depthStride, B + q, ldb, C + q, ldc, depth);
        break;
    default:
        break;
    }
}

// C[rows x cols] (+)= A[rows x depth] * B[depth x cols]: blocks of kRows rows, then the rest.
template <bool Accumulate>
TOWERS_AVX512 void gemm(const float* A, std::int64_t rowStride, std::int64_t depthStride,
                        std::int64_t rows, const float* B, std::int64_t ldb, std::int64_t cols,
                        float* C, std::int64_t ldc, std::int64_t depth)
{
    std::int64_t r = 0;
    for (; r + kRows <= rows; r += kRows)
        gemmRows<kRows, Accumulate>(A + r * rowStride, rowStride, depthStride, B, ldb, cols,
                                    C + r * ldc, ldc, depth);
    const float* a = A + r * rowStride;
    float* c = C + r * ldc;
    switch (rows - r) {
    case 5:
        gemmRows<5, Accumulate>(a, rowStride, depthStride, B, ldb, cols, c, ldc, depth);
        break;
    case 4:
        gemmRows<4, Accumulate>(a, rowStride, depthStride, B, ldb, cols, c, ldc, depth);
        break;
    case 3:
        gemmRows<3, Accumulate>(a, rowStride, depthStride, B, ldb, cols, c, ldc, depth);
        break;
    case 2:
        gemmRows<2, Accumulate>(a, rowStride, depthStride, B, ldb, cols, c, ldc, depth);
        break;
    case 1:
        gemmRows<1, Accumulate>(a, rowStride, depthStride, B, ldb, cols, c, ldc, depth);
        break;
    default:
        break;
    }
}

// M[pos] = V[pos] * U[pos] for the 36 positions: [count x inC] x [inC x outC].
TOWERS_AVX512 void multiply(const Winograd5x5::Pass& p, const float* V, const float* U,
                            std::int64_t count, float* M)
{
    const std::int64_t C = p.inC, K = p.outC;
    for (int pos = 0; pos < kPositions; ++pos)
        gemm<false>(V + pos * count * C, C, 1, count, U + pos * C * K, K, K, M + pos * count * K, K,
                    C);
}

// The output tiles t0 .. t0 + count of one image: Y = A^T M A, plus bias, then ReLU.
TOWERS_AVX512 void transformOutputs(const Winograd5x5::Pass& p, const float* M, std::int64_t t0,
                                    std::int64_t count, const float* bias, bool relu, float* image)
{
    const std::int64_t tilesW = p.tilesW(), K = p.outC;
    const __m512 zero = _mm512_setzero_ps();
    for (std::int64_t t = 0; t < count; ++t) {
        const std::int64_t oy = 2 * ((t0 + t) / tilesW), ox = 2 * ((t0 + t) % tilesW);
        for (std::int64_t kb = 0; kb < K; kb += kLanes) {
            __m512 cols[kTile][2]; // cols[j] = A^T (column j of M)
            for (int j = 0; j < kTile; ++j) {
                __m512 m[kTile];
                for (int i = 0; i < kTile; ++i)
                    m[i] = _mm512_load_ps(M + ((i * kTile + j) * count + t) * K + kb);
                outputTransform(m, cols[j]);
            }
            const __m512 b = bias ? _mm512_loadu_ps(bias + kb) : zero;
            for (int i = 0; i < 2 && oy + i < p.outH; ++i) {
                const __m512 row[kTile] = {cols[0][i], cols[1][i], cols[2][i],
                                           cols[3][i], cols[4][i], cols[5][i]};
                __m512 o[2];
                outputTransform(row, o);
                for (int j = 0; j < 2 && ox + j < p.outW; ++j) {
                    __m512 v = _mm512_add_ps(o[j], b);
                    // ReLU by a mask (GCC 12 warns about _mm512_max_ps's undefined passthrough).
                    if (relu) v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, zero, _CMP_GT_OQ), v);
                    _mm512_storeu_ps(image + ((oy + i) * p.outW + ox + j) * K + kb, v);
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
TOWERS_AVX512_INLINE void gradientTransform(__m512 u0, __m512 u1, __m512 o[6])
{
    const __m512 sixth = _mm512_set1_ps(1.0f / 6), twelfth = _mm512_set1_ps(1.0f / 12);
    const __m512 u0s = _mm512_mul_ps(u0, _mm512_set1_ps(1.0f / 24));
    o[0] = _mm512_mul_ps(u0, _mm512_set1_ps(0.25f));
    o[1] = _mm512_mul_ps(_mm512_add_ps(u0, u1), _mm512_set1_ps(-1.0f / 6));
    o[2] = _mm512_mul_ps(_mm512_sub_ps(u1, u0), sixth);
    o[3] = _mm512_fmadd_ps(u1, twelfth, u0s);
    o[4] = _mm512_fnmadd_ps(u1, twelfth, u0s);
    o[5] = u1;
}

// o = A'^T m.
TOWERS_AVX512_INLINE void weightTransform(const __m512 m[6], __m512 o[5])
{
    const __m512 s12 = _mm512_add_ps(m[1], m[2]), d12 = _mm512_sub_ps(m[1], m[2]);
    const __m512 s34 = _mm512_add_ps(m[3], m[4]), d34 = _mm512_sub_ps(m[3], m[4]);
    o[0] = _mm512_add_ps(_mm512_add_ps(m[0], s12), s34);
    o[1] = _mm512_fmadd_ps(_mm512_set1_ps(2.0f), d34, d12);
    o[2] = _mm512_fmadd_ps(_mm512_set1_ps(4.0f), s34, s12);
    o[3] = _mm512_fmadd_ps(_mm512_set1_ps(8.0f), d34, d12);
    o[4] = _mm512_add_ps(_mm512_fmadd_ps(_mm512_set1_ps(16.0f), s34, s12), m[5]);
}

// Gt[pos][t][k] = (G' g G'^T)[pos] for the 2x2 output-gradient tiles t0 .. t0 + count of one
// image (zero beyond the image, masked like transformInputs); db[k] (when not null) gains the sum
// of each tile.
TOWERS_AVX512 void transformGradients(const Winograd5x5::Pass& p, const float* image,
                                      const float* mask, std::int64_t t0, std::int64_t count,
                                      float* Gt, float* db)
{
    const std::int64_t tilesW = p.tilesW(), K = p.outC;
    for (std::int64_t t = 0; t < count; ++t) {
        const std::int64_t oy = 2 * ((t0 + t) / tilesW), ox = 2 * ((t0 + t) % tilesW);
        const bool row1 = oy + 1 < p.outH, col1 = ox + 1 < p.outW;
        const std::int64_t at0 = (oy * p.outW + ox) * K, at1 = at0 + p.outW * K;
        for (std::int64_t kb = 0; kb < K; kb += kLanes) {
            const __m512 zero = _mm512_setzero_ps();
            const __m512 g00 = loadMasked(image, mask, at0 + kb);
            const __m512 g01 = col1 ? loadMasked(image, mask, at0 + K + kb) : zero;
            const __m512 g10 = row1 ? loadMasked(image, mask, at1 + kb) : zero;
            const __m512 g11 = row1 && col1 ? loadMasked(image, mask, at1 + K + kb) : zero;
            if (db) {
                const __m512 sum = _mm512_add_ps(_mm512_add_ps(g00, g01), _mm512_add_ps(g10, g11));
                _mm512_store_ps(db + kb, _mm512_add_ps(_mm512_load_ps(db + kb), sum));
            }
            __m512 c0[6], c1[6]; // G' times each column of the tile
            gradientTransform(g00, g10, c0);
            gradientTransform(g01, g11, c1);
            for (int a = 0; a < kTile; ++a) {
                __m512 o[6];
                gradientTransform(c0[a], c1[a], o);
                for (int b = 0; b < kTile; ++b)
                    _mm512_store_ps(Gt + ((a * kTile + b) * count + t) * K + kb, o[b]);
            }
        }
    }
}

// dw[k][c][5][5] (OIHW) = A'^T S A' for output channel k, with S the sum of the threads' partial
// sums S_i[pos][k][c] (`threads` of them, `stride` floats apart).
TOWERS_AVX512 void transformWeightGradient(const float* S, std::int64_t stride, int threads,
                                           std::int64_t K, std::int64_t C, std::int64_t k,
                                           float* dw)
{
    alignas(64) float lanes[kLanes];
    for (std::int64_t cb = 0; cb < C; cb += kLanes) {
        __m512 cols[kTile][5];
        for (int b = 0; b < kTile; ++b) {
            __m512 m[kTile];
            for (int a = 0; a < kTile; ++a) {
                const float* s = S + ((a * kTile + b) * K + k) * C + cb;
                m[a] = _mm512_load_ps(s);
                for (int i = 1; i < threads; ++i)
                    m[a] = _mm512_add_ps(m[a], _mm512_load_ps(s + i * stride));
            }
            weightTransform(m, cols[b]);
        }
        for (int i = 0; i < 5; ++i) {
            const __m512 row[kTile] = {cols[0][i], cols[1][i], cols[2][i],
                                       cols[3][i], cols[4][i], cols[5][i]};
            __m512 o[5];
            weightTransform(row, o);
            for (int j = 0; j < 5; ++j) {
                _mm512_store_ps(lanes, o[j]);
                for (int l = 0; l < kLanes; ++l) dw[((k * C + cb + l) * 5 + i) * 5 + j] = lanes[l];
            }
        }
    }
}

#endif // TOWERS_HAVE_WINOGRAD

} // namespace

bool Winograd5x5::supports(const Conv2dDesc& d)
{
    const Window2d& g = d.win;
    return TOWERS_HAVE_WINOGRAD && cpuIsWide() && g.kh == 5 && g.kw == 5 && g.sh == 1 &&
           g.sw == 1 && g.c % kLanes == 0 && d.outChannels % kLanes == 0;
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
    transformKernel(
        w, m_forward.outC, m_forward.inC, false,
        m_u.floats(static_cast<std::size_t>(kPositions * m_forward.inC * m_forward.outC)));
    run(m_forward, x, nullptr, b, relu, y);
}

void Winograd5x5::backwardData(const float* dy, const float* mask, const float* w, float* dx)
{
    transformKernel(
        w, m_backward.inC, m_backward.outC, true,
        m_u.floats(static_cast<std::size_t>(kPositions * m_backward.inC * m_backward.outC)));
    run(m_backward, dy, mask, nullptr, false, dx);
}

void Winograd5x5::backwardWeights(const float* x, const float* dy, const float* mask, float* dw,
                                  float* db)
{
#if TOWERS_HAVE_WINOGRAD
    const Pass& p = m_forward; // x is its input, g the gradient of its output
    const std::int64_t C = p.inC, K = p.outC;
    const std::int64_t tiles = p.tilesH() * p.tilesW();
    const std::int64_t most = std::max<std::int64_t>(kRows, kChunkFloats / (kPositions * (C + K)));
    const std::int64_t chunks = (tiles + most - 1) / most;
    const std::int64_t per = (tiles + chunks - 1) / chunks;
    // Per thread: transformed inputs and gradients of a chunk, the partial sums S, db's partial.
    const std::int64_t sFloats = kPositions * K * C;
    const std::int64_t perThread = kPositions * per * (C + K) + sFloats + K;
    float* scratch = m_scratch.floats(static_cast<std::size_t>(perThread * omp_get_max_threads()));
    const std::int64_t items = p.n * chunks;
    const std::int64_t inImage = p.inH * p.inW * C, outImage = p.outH * p.outW * K;
#pragma omp parallel
    {
        float* V = scratch + omp_get_thread_num() * perThread;
        float* Gt = V + kPositions * per * C;
        float* S = Gt + kPositions * per * K;
        float* dbPart = S + sFloats;
        std::fill(S, S + sFloats + K, 0.0f);
#pragma omp for schedule(static)
        for (std::int64_t item = 0; item < items; ++item) {
            const std::int64_t n = item / chunks, t0 = (item % chunks) * per;
            const std::int64_t count = std::min(per, tiles - t0);
            transformInputs(p, x + n * inImage, nullptr, t0, count, V);
            transformGradients(p, dy + n * outImage, mask ? mask + n * outImage : nullptr, t0,
                               count, Gt, db ? dbPart : nullptr);
            // S[pos][k][c] += sum over tiles of Gt[pos][t][k] V[pos][t][c]
            for (int pos = 0; pos < kPositions; ++pos)
                gemm<true>(Gt + pos * count * K, 1, K, K, V + pos * count * C, C, C,
                           S + pos * K * C, C, count);
        }
        const int threads = omp_get_num_threads();
        const float* S0 = scratch + kPositions * per * (C + K);
#pragma omp for schedule(static)
        for (std::int64_t k = 0; k < K; ++k)
            transformWeightGradient(S0, perThread, threads, K, C, k, dw);
        if (db) {
#pragma omp for schedule(static)
            for (std::int64_t k = 0; k < K; ++k) {
                float sum = 0;
                for (int i = 0; i < threads; ++i) sum += S0[sFloats + i * perThread + k];
                db[k] = sum;
            }
        }
    }
#else
    (void)x, (void)dy, (void)mask, (void)dw, (void)db;
#endif
}

void Winograd5x5::run(const Pass& p, const float* in, const float* mask, const float* bias,
                      bool relu, float* out)
{
#if TOWERS_HAVE_WINOGRAD
    const std::int64_t tiles = p.tilesH() * p.tilesW();
    // Tiles per chunk: as many as fit the cache budget, spread evenly over the chunks.
    const std::int64_t most =
        std::max<std::int64_t>(kRows, kChunkFloats / (kPositions * (p.inC + p.outC)));
    const std::int64_t chunks = (tiles + most - 1) / most;
    const std::int64_t per = (tiles + chunks - 1) / chunks;
    const std::int64_t scratchPerThread = kPositions * per * (p.inC + p.outC);
    float* scratch =
        m_scratch.floats(static_cast<std::size_t>(scratchPerThread * omp_get_max_threads()));
    const float* U = m_u.floats(0);
    const std::int64_t items = p.n * chunks;
    const std::int64_t inImage = p.inH * p.inW * p.inC, outImage = p.outH * p.outW * p.outC;
#pragma omp parallel for schedule(static) if (items > 1)
    for (std::int64_t item = 0; item < items; ++item) {
        const std::int64_t n = item / chunks, t0 = (item % chunks) * per;
        const std::int64_t count = std::min(per, tiles - t0);
        float* V = scratch + omp_get_thread_num() * scratchPerThread;
        float* M = V + kPositions * per * p.inC;
        transformInputs(p, in + n * inImage, mask ? mask + n * inImage : nullptr, t0, count, V);
        multiply(p, V, U, count, M);
        transformOutputs(p, M, t0, count, bias, relu, out + n * outImage);
    }
#else
    (void)p, (void)in, (void)mask, (void)bias, (void)relu, (void)out;
#endif
}

} // namespace towers::engine::cpu
