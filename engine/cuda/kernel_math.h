#pragma once
// What each of the CUDA backend's kernels computes for one element (or one row), as plain C++
// that compiles for the GPU and for the host: the kernels (*.cu) run these in their grid-stride
// loops, and tst_cuda_kernel_math runs the same functions over every index on the CPU against the
// reference backend, so the index arithmetic and the formulas are tested on machines without a
// GPU. C++17, no CUDA header.
#include <math.h>
#include <string.h>

#include <cfloat>
#include <cstdint>

#include "engine/host_device.h"
#include "engine/ops/batch_norm_fold.h"
#include "engine/ops/dropout_mask.h"
#include "engine/ops/step_scalar_values.h"
#include "engine/tensor/bfloat16.h"

namespace towers::engine::cuda {

// A window over NHWC input (pooling), in the kernels' terms.
struct WindowGeometry
{
    std::int64_t n, h, w, c, oh, ow;
    int kh, kw, sh, sw, padTop, padLeft;
};

// ---- element-wise ----

TOWERS_HD inline void reluForwardAt(std::int64_t i, const float* x, float* y)
{
    y[i] = x[i] > 0.f ? x[i] : 0.f;
}

TOWERS_HD inline void reluBackwardAt(std::int64_t i, const float* y, const float* dy, float* dx)
{
    dx[i] = y[i] > 0.f ? dy[i] : 0.f;
}

// y[r, c] += b[c] (b may be null), then ReLU when `relu`.
TOWERS_HD inline void biasActivationAt(std::int64_t i, float* y, const float* b, std::int64_t cols,
                                       bool relu)
{
    const float v = y[i] + (b ? b[i % cols] : 0.f);
    y[i] = relu && v < 0.f ? 0.f : v;
}

// The counter-based mask every backend draws (ops/dropout_mask.h).
TOWERS_HD inline void dropoutForwardAt(std::int64_t i, const float* x, float* y, std::uint8_t* mask,
                                       std::uint64_t seed, std::uint32_t threshold, float scale)
{
    const bool keep = dropoutKeeps(seed, static_cast<std::uint64_t>(i), threshold);
    mask[i] = keep ? 1 : 0;
    y[i] = keep ? x[i] * scale : 0.f;
}

TOWERS_HD inline void dropoutBackwardAt(std::int64_t i, const float* dy, const std::uint8_t* mask,
                                        float* dx, float scale)
{
    dx[i] = mask[i] ? dy[i] * scale : 0.f;
}

// ---- layout ----

// y[a, c, b] = x[a, b, c] for x of [outer, b, c]; i indexes x.
TOWERS_HD inline void transposeInnerAt(std::int64_t i, const float* x, float* y, std::int64_t b,
                                       std::int64_t c)
{
    const std::int64_t ci = i % c, bi = (i / c) % b, a = i / (b * c);
    y[(a * c + ci) * b + bi] = x[i];
}

// y [n,h2,w2,c] from x [n,h,w,c] placed at (top, left), zeros elsewhere; i indexes y.
TOWERS_HD inline void padAt(std::int64_t i, const float* x, float* y, std::int64_t h,
                            std::int64_t w, std::int64_t c, std::int64_t h2, std::int64_t w2,
                            int top, int left)
{
    const std::int64_t ci = i % c, x2 = (i / c) % w2, y2 = (i / (c * w2)) % h2,
                       ni = i / (c * w2 * h2);
    const std::int64_t ix = x2 - left, iy = y2 - top;
    y[i] = (ix >= 0 && ix < w && iy >= 0 && iy < h) ? x[((ni * h + iy) * w + ix) * c + ci] : 0.f;
}

// y [n,h,w,c] from x [n,h2,w2,c] at (top, left); i indexes y.
TOWERS_HD inline void cropAt(std::int64_t i, const float* x, float* y, std::int64_t h,
                             std::int64_t w, std::int64_t c, std::int64_t h2, std::int64_t w2,
                             int top, int left)
{
    const std::int64_t ci = i % c, ix = (i / c) % w, iy = (i / (c * w)) % h, ni = i / (c * w * h);
    y[i] = x[((ni * h2 + iy + top) * w2 + ix + left) * c + ci];
}

// Element i of count * pixels: channel c = i % count of pixel p = i / count, from x's channel
// c (x, y already offset to the first channel copied) with cx and cy channels per pixel.
TOWERS_HD inline void copyChannelsAt(std::int64_t i, const float* x, float* y, std::int64_t count,
                                     std::int64_t cx, std::int64_t cy)
{
    const std::int64_t p = i / count, c = i - p * count;
    y[p * cy + c] = x[p * cx + c];
}

// ---- max pooling: padded positions never win; argmax is the flat index into x ----

TOWERS_HD inline void maxPoolForwardAt(std::int64_t i, const WindowGeometry& g, const float* x,
                                       float* y, std::int32_t* argmax)
{
    const std::int64_t c = i % g.c, ox = (i / g.c) % g.ow, oy = (i / (g.c * g.ow)) % g.oh,
                       n = i / (g.c * g.ow * g.oh);
    std::int64_t best = -1;
    float bestValue = -FLT_MAX;
    for (int a = 0; a < g.kh; ++a) {
        const std::int64_t iy = oy * g.sh - g.padTop + a;
        if (iy < 0 || iy >= g.h) continue;
        for (int b = 0; b < g.kw; ++b) {
            const std::int64_t ix = ox * g.sw - g.padLeft + b;
            if (ix < 0 || ix >= g.w) continue;
            const std::int64_t k = ((n * g.h + iy) * g.w + ix) * g.c + c;
            if (best < 0 || x[k] > bestValue) { // strictly greater: the first maximum wins a tie
                best = k;
                bestValue = x[k];
            }
        }
    }
    y[i] = bestValue;
    argmax[i] = static_cast<std::int32_t>(best);
}

// The outputs whose windows cover input i (NHWC): rows oyLo..oyHi, columns oxLo..oxHi, of image
// n and channel c.
struct CoveringWindows
{
    std::int64_t n, c, oyLo, oyHi, oxLo, oxHi;
};

TOWERS_HD inline CoveringWindows coveringWindows(std::int64_t i, const WindowGeometry& g)
{
    const std::int64_t c = i % g.c, ix = (i / g.c) % g.w, iy = (i / (g.c * g.w)) % g.h,
                       n = i / (g.c * g.w * g.h);
    // Output rows whose window covers iy: oy * sh - padTop <= iy < oy * sh - padTop + kh.
    const std::int64_t py = iy + g.padTop, px = ix + g.padLeft;
    return {n,
            c,
            py >= g.kh ? (py - g.kh) / g.sh + 1 : 0,
            py / g.sh < g.oh - 1 ? py / g.sh : g.oh - 1,
            px >= g.kw ? (px - g.kw) / g.sw + 1 : 0,
            px / g.sw < g.ow - 1 ? px / g.sw : g.ow - 1};
}

// dx[i] gathers dy of every window that picked input i: deterministic, no atomics.
TOWERS_HD inline void maxPoolBackwardAt(std::int64_t i, const WindowGeometry& g, const float* dy,
                                        const std::int32_t* argmax, float* dx)
{
    const CoveringWindows w = coveringWindows(i, g);
    float sum = 0.f;
    for (std::int64_t oy = w.oyLo; oy <= w.oyHi; ++oy)
        for (std::int64_t ox = w.oxLo; ox <= w.oxHi; ++ox) {
            const std::int64_t o = ((w.n * g.oh + oy) * g.ow + ox) * g.c + w.c;
            if (argmax[o] == i) sum += dy[o];
        }
    dx[i] = sum;
}

// ---- average pooling: a window's mean over its real elements (pads do not count) ----

// The real elements of output (oy, ox)'s window: rows [y0, y1), columns [x0, x1).
TOWERS_HD inline std::int64_t avgPoolCount(const WindowGeometry& g, std::int64_t oy,
                                           std::int64_t ox, std::int64_t* y0, std::int64_t* x0,
                                           std::int64_t* y1, std::int64_t* x1)
{
    const std::int64_t top = oy * g.sh - g.padTop, left = ox * g.sw - g.padLeft;
    *y0 = top > 0 ? top : 0;
    *x0 = left > 0 ? left : 0;
    *y1 = top + g.kh < g.h ? top + g.kh : g.h;
    *x1 = left + g.kw < g.w ? left + g.kw : g.w;
    return (*y1 - *y0) * (*x1 - *x0);
}

TOWERS_HD inline void avgPoolForwardAt(std::int64_t i, const WindowGeometry& g, const float* x,
                                       float* y)
{
    const std::int64_t c = i % g.c, ox = (i / g.c) % g.ow, oy = (i / (g.c * g.ow)) % g.oh,
                       n = i / (g.c * g.ow * g.oh);
    std::int64_t y0, x0, y1, x1;
    const std::int64_t count = avgPoolCount(g, oy, ox, &y0, &x0, &y1, &x1);
    float sum = 0.f;
    for (std::int64_t iy = y0; iy < y1; ++iy)
        for (std::int64_t ix = x0; ix < x1; ++ix) sum += x[((n * g.h + iy) * g.w + ix) * g.c + c];
    y[i] = sum / static_cast<float>(count);
}

// dx[i] gathers its share of dy from every window that covers input i: no atomics.
TOWERS_HD inline void avgPoolBackwardAt(std::int64_t i, const WindowGeometry& g, const float* dy,
                                        float* dx)
{
    const CoveringWindows w = coveringWindows(i, g);
    float sum = 0.f;
    for (std::int64_t oy = w.oyLo; oy <= w.oyHi; ++oy)
        for (std::int64_t ox = w.oxLo; ox <= w.oxHi; ++ox) {
            std::int64_t y0, x0, y1, x1;
            const std::int64_t count = avgPoolCount(g, oy, ox, &y0, &x0, &y1, &x1);
            sum += dy[((w.n * g.oh + oy) * g.ow + ox) * g.c + w.c] / static_cast<float>(count);
        }
    dx[i] = sum;
}

// ---- TensorFlow's LRN over the channels of rows of c values ----

TOWERS_HD inline void lrnForwardAt(std::int64_t i, const float* x, float* y, float* scale,
                                   std::int64_t c, int radius, float bias, float alpha, float beta)
{
    const std::int64_t ch = i % c, row = i - ch;
    const std::int64_t lo = ch > radius ? ch - radius : 0,
                       hi = ch + radius < c ? ch + radius : c - 1;
    float sum = 0.f;
    for (std::int64_t k = lo; k <= hi; ++k) sum += x[row + k] * x[row + k];
    const float s = bias + alpha * sum;
    scale[i] = s;
    y[i] = x[i] * powf(s, -beta);
}

// dx_j = dy_j s_j^-beta - 2 alpha beta x_j sum over |c - j| <= r of dy_c x_c s_c^(-beta-1).
TOWERS_HD inline void lrnBackwardAt(std::int64_t i, const float* x, const float* dy,
                                    const float* scale, float* dx, std::int64_t c, int radius,
                                    float alpha, float beta)
{
    const std::int64_t ch = i % c, row = i - ch;
    const std::int64_t lo = ch > radius ? ch - radius : 0,
                       hi = ch + radius < c ? ch + radius : c - 1;
    float sum = 0.f;
    for (std::int64_t k = lo; k <= hi; ++k)
        sum += dy[row + k] * x[row + k] * powf(scale[row + k], -beta - 1.f);
    dx[i] = dy[i] * powf(scale[i], -beta) - 2.f * alpha * beta * x[i] * sum;
}

// ---- batch normalisation over the channels (last dimension) of rows x c ----

// The blocks of the y dimension of a grid over `chunks` pieces: CUDA allows at most 65,535 there,
// and the kernel takes every gridDim.y-th piece (a grid-stride loop), so any count fits.
constexpr std::int64_t kMaxGridY = 65535;
TOWERS_HD inline std::int64_t columnChunkBlocks(std::int64_t chunks)
{
    return chunks < 1 ? 1 : chunks > kMaxGridY ? kMaxGridY : chunks;
}

TOWERS_HD inline void batchNormApplyAt(std::int64_t i, const float* x, const float* mean,
                                       const float* var, const float* gamma, const float* beta,
                                       float* y, std::int64_t c, float epsilon)
{
    const std::int64_t ch = i % c;
    y[i] = (x[i] - mean[ch]) / sqrtf(var[ch] + epsilon) * gamma[ch] + beta[ch];
}

// Element i of w [channels, per] folded with its channel o's batch norm (inference,
// batch_norm_fold.h), and the first element of each channel also writes the channel's bias (b
// null: a layer without bias, 0).
TOWERS_HD inline void foldBatchNormAt(std::int64_t i, std::int64_t per, const float* w,
                                      const float* b, const float* gamma, const float* beta,
                                      const float* mean, const float* var, double epsilon,
                                      float* wOut, float* bOut)
{
    const std::int64_t o = i / per;
    const double s = foldedScale(gamma[o], var[o], epsilon);
    wOut[i] = foldedWeight(w[i], s);
    if (i == o * per) bOut[o] = foldedBias(b ? b[o] : 0.f, mean[o], beta[o], s);
}

// running = (1 - m) running + m batch, the variance unbiased by `unbias` (n / (n - 1)).
TOWERS_HD inline void batchNormRunningAt(std::int64_t ch, float* runningMean, float* runningVar,
                                         const float* mean, const float* var, double unbias,
                                         float momentum)
{
    runningMean[ch] = (1.f - momentum) * runningMean[ch] + momentum * mean[ch];
    runningVar[ch] = (1.f - momentum) * runningVar[ch] + momentum * float(var[ch] * unbias);
}

// What the per-channel sums add up, one element each (see columnSums in batch_norm.cu).
TOWERS_HD inline double centredSquareAt(std::int64_t i, const float* x, const float* mean,
                                        std::int64_t c)
{
    const double d = double(x[i]) - mean[i % c];
    return d * d;
}
TOWERS_HD inline double dyXhatAt(std::int64_t i, const float* x, const float* dy, const float* mean,
                                 const float* var, std::int64_t c, float epsilon)
{
    const std::int64_t ch = i % c;
    return double(dy[i]) * (double(x[i]) - mean[ch]) / sqrt(double(var[ch]) + epsilon);
}

// dx = gamma / sqrt(var + eps) / n * (n dy - dbeta - xhat dgamma), with n the rows.
TOWERS_HD inline void batchNormBackwardAt(std::int64_t i, const float* x, const float* dy,
                                          const float* mean, const float* var, const float* gamma,
                                          const float* dgamma, const float* dbeta, float* dx,
                                          std::int64_t rows, std::int64_t c, float epsilon)
{
    const std::int64_t ch = i % c;
    const double invStd = 1.0 / sqrt(double(var[ch]) + epsilon);
    const double xhat = (double(x[i]) - mean[ch]) * invStd;
    const double n = double(rows);
    dx[i] =
        static_cast<float>(gamma[ch] * invStd / n * (n * dy[i] - dbeta[ch] - xhat * dgamma[ch]));
}

// ---- softmax cross-entropy, one row of k logits ----

// probs = softmax(z); returns -sum_j q_j log p_j for the target q = (1 - smoothing) *
// onehot(label) + smoothing / k: -log p[label] without smoothing (0 for a label outside [0, k),
// which the caller reports).
TOWERS_HD inline double softmaxCrossEntropyRow(std::int64_t r, const float* logits,
                                               const std::int32_t* labels, float* probs,
                                               std::int64_t k, double smoothing, bool* badLabel)
{
    const float* z = logits + r * k;
    float m = -FLT_MAX;
    for (std::int64_t j = 0; j < k; ++j) m = z[j] > m ? z[j] : m;
    double sum = 0;
    for (std::int64_t j = 0; j < k; ++j) sum += exp(double(z[j]) - m);
    for (std::int64_t j = 0; j < k; ++j)
        probs[r * k + j] = static_cast<float>(exp(double(z[j]) - m) / sum);
    const std::int32_t label = labels[r];
    *badLabel = label < 0 || label >= k;
    if (*badLabel) return 0.0;
    double target = double(z[label]) - m;
    if (smoothing > 0) {
        double all = 0;
        for (std::int64_t j = 0; j < k; ++j) all += double(z[j]) - m;
        target = (1.0 - smoothing) * target + smoothing / double(k) * all;
    }
    return log(sum) - target;
}

// `hit` and `spread`: the smoothed target, hit + spread at the label and spread elsewhere
// (float(1 - smoothing) and float(smoothing / k); 1 and 0 without smoothing).
TOWERS_HD inline void softmaxCrossEntropyBackwardAt(std::int64_t i, const float* probs,
                                                    const std::int32_t* labels, float* dlogits,
                                                    std::int64_t k, float hit, float spread,
                                                    float scale)
{
    const std::int64_t r = i / k, j = i % k;
    dlogits[i] = (probs[i] - (labels[r] == j ? hit : 0.f) - spread) * scale;
}

// ---- parameter updates (PyTorch's formulations, see ops/descriptors.h) ----

// Whether an update kernel leaves everything as it is: its skip flag (op_list.h; nullptr when the
// op was given none) is set, i.e. not 0 (a NaN flag skips too). Each thread of an update kernel
// reads it on the GPU before its grid-stride loop, so the host never waits for the flag.
TOWERS_HD inline bool updateSkipped(const float* skip)
{
    return skip != nullptr && *skip != 0.f;
}

// A non-finite element sets the flag (every writer writes the same 1).
TOWERS_HD inline void flagNonFiniteAt(std::int64_t i, const float* x, float* flag)
{
    if (!isfinite(x[i])) *flag = 1.f;
}

// The moving average's step: shadow -= (shadow - value) * keep.
TOWERS_HD inline void emaAt(std::int64_t i, const float* value, float* shadow, float keep)
{
    shadow[i] -= (shadow[i] - value[i]) * keep;
}

TOWERS_HD inline void momentumAt(std::int64_t i, const float* g, float* buf, float* w, float lr,
                                 float momentum, float dampening, bool nesterov, bool first)
{
    const float gi = g[i];
    const float b = first ? gi : momentum * buf[i] + (1.f - dampening) * gi;
    buf[i] = b;
    w[i] -= lr * (nesterov ? gi + momentum * b : b);
}

// The betas and epsilon in double, as the step gives them: 1 - beta2 from a beta2 rounded to float
// first would be 1.3e-5 off (0.999), an error the size of the op cases' whole tolerance on v.
// `weightDecay`: AdamW's decoupled decay, w *= 1 - lr * weightDecay first (AdamStep); 0 for Adam,
// whose factor is then exactly 1.
TOWERS_HD inline void adamAt(std::int64_t i, const float* g, float* m, float* v, float* w, float lr,
                             double beta1, double beta2, double epsilon, double correction1,
                             double correction2Sqrt, double weightDecay)
{
    const double gi = g[i];
    const float mi = static_cast<float>(beta1 * double(m[i]) + (1.0 - beta1) * gi);
    const float vi = static_cast<float>(beta2 * double(v[i]) + (1.0 - beta2) * gi * gi);
    m[i] = mi;
    v[i] = vi;
    const float decayed = static_cast<float>(double(w[i]) * (1.0 - double(lr) * weightDecay));
    const double denom = sqrt(double(vi)) / correction2Sqrt + epsilon;
    w[i] = static_cast<float>(double(decayed) - lr / correction1 * double(mi) / denom);
}

// ---- bfloat16 (--precision bf16): what cuDNN and cuBLAS read and what cuDNN writes ----

// The rounding and its inverse are the engine's own (engine/tensor/bfloat16.h), named here too.
using ::towers::engine::bfloat16Bits;
using ::towers::engine::floatBits;
using ::towers::engine::fromBfloat16Bits;

TOWERS_HD inline void toBfloat16At(std::int64_t i, const float* x, std::uint16_t* y)
{
    y[i] = bfloat16Bits(x[i]);
}

TOWERS_HD inline void fromBfloat16At(std::int64_t i, const std::uint16_t* x, float* y)
{
    y[i] = fromBfloat16Bits(x[i]);
}

// ---- towers sharing a GPU: every rank's copy becomes the rank-ordered mean ----

TOWERS_HD inline void meanAcrossRanksAt(std::int64_t i, float* const* ranks, int count)
{
    double sum = 0;
    for (int r = 0; r < count; ++r) sum += ranks[r][i];
    const float mean = static_cast<float>(sum / count);
    for (int r = 0; r < count; ++r) ranks[r][i] = mean;
}

} // namespace towers::engine::cuda
