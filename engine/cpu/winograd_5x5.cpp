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

// V[pos][t][c] = (B^T d B)[pos] for the input tiles t0 .. t0 + count of one image.
TOWERS_AVX512 void transformInputs(const Winograd5x5::Pass& p, const float* image, std::int64_t t0,
                                   std::int64_t count, float* V)
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
                for (int i = 0; i < kTile; ++i)
                    d[i] = rowIn[i] && colIn[j]
                               ? _mm512_loadu_ps(image + ((iy0 + i) * p.inW + ix0 + j) * C + cb)
                               : _mm512_setzero_ps();
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

// M[R rows][NQ vectors] = V[R rows][k] * U[k][NQ vectors], all row-major.
template <int R, int NQ>
TOWERS_AVX512_INLINE void multiplyBlock(const float* V, std::int64_t ldv, const float* U,
                                        std::int64_t ldu, float* M, std::int64_t ldm,
                                        std::int64_t k)
{
    __m512 acc[R][NQ];
    for (int r = 0; r < R; ++r)
        for (int q = 0; q < NQ; ++q) acc[r][q] = _mm512_setzero_ps();
    for (std::int64_t c = 0; c < k; ++c) {
        __m512 u[NQ];
        for (int q = 0; q < NQ; ++q) u[q] = _mm512_load_ps(U + c * ldu + q * kLanes);
        for (int r = 0; r < R; ++r) {
            const __m512 v = _mm512_set1_ps(V[r * ldv + c]);
            for (int q = 0; q < NQ; ++q) acc[r][q] = _mm512_fmadd_ps(v, u[q], acc[r][q]);
        }
    }
    for (int r = 0; r < R; ++r)
        for (int q = 0; q < NQ; ++q) _mm512_store_ps(M + r * ldm + q * kLanes, acc[r][q]);
}

template <int R>
TOWERS_AVX512_INLINE void multiplyRows(const float* V, std::int64_t ldv, const float* U,
                                       std::int64_t ldu, float* M, std::int64_t ldm, std::int64_t k,
                                       std::int64_t cols)
{
    std::int64_t q = 0;
    for (; q + 4 * kLanes <= cols; q += 4 * kLanes)
        multiplyBlock<R, 4>(V, ldv, U + q, ldu, M + q, ldm, k);
    switch ((cols - q) / kLanes) {
    case 3:
        multiplyBlock<R, 3>(V, ldv, U + q, ldu, M + q, ldm, k);
        break;
    case 2:
        multiplyBlock<R, 2>(V, ldv, U + q, ldu, M + q, ldm, k);
        break;
    case 1:
        multiplyBlock<R, 1>(V, ldv, U + q, ldu, M + q, ldm, k);
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
    for (int pos = 0; pos < kPositions; ++pos) {
        const float* v = V + pos * count * C;
        const float* u = U + pos * C * K;
        float* m = M + pos * count * K;
        std::int64_t t = 0;
        for (; t + kRows <= count; t += kRows)
            multiplyRows<kRows>(v + t * C, C, u, K, m + t * K, K, C, K);
        switch (count - t) {
        case 5:
            multiplyRows<5>(v + t * C, C, u, K, m + t * K, K, C, K);
            break;
        case 4:
            multiplyRows<4>(v + t * C, C, u, K, m + t * K, K, C, K);
            break;
        case 3:
            multiplyRows<3>(v + t * C, C, u, K, m + t * K, K, C, K);
            break;
        case 2:
            multiplyRows<2>(v + t * C, C, u, K, m + t * K, K, C, K);
            break;
        case 1:
            multiplyRows<1>(v + t * C, C, u, K, m + t * K, K, C, K);
            break;
        default:
            break;
        }
    }
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
    run(m_forward, x, b, relu, y);
}

void Winograd5x5::backwardData(const float* dy, const float* w, float* dx)
{
    transformKernel(
        w, m_backward.inC, m_backward.outC, true,
        m_u.floats(static_cast<std::size_t>(kPositions * m_backward.inC * m_backward.outC)));
    run(m_backward, dy, nullptr, false, dx);
}

void Winograd5x5::run(const Pass& p, const float* in, const float* bias, bool relu, float* out)
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
        transformInputs(p, in + n * inImage, t0, count, V);
        multiply(p, V, U, count, M);
        transformOutputs(p, M, t0, count, bias, relu, out + n * outImage);
    }
#else
    (void)p, (void)in, (void)bias, (void)relu, (void)out;
#endif
}

} // namespace towers::engine::cpu
