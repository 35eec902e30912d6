// Max pooling (any padding: padded positions never win) and TensorFlow's LRN, NHWC.
#include <cfloat>

#include "engine/cuda/kernels.h"
#include "engine/cuda/launch.cuh"

namespace towers::engine::cuda {

namespace {

// argmax holds the flat index into x of the winner, as the reference backend's workspace does.
__global__ void maxPoolForwardKernel(WindowGeometry g, const float* x, float* y,
                                     std::int32_t* argmax)
{
    TOWERS_GRID_STRIDE(i, g.n * g.oh * g.ow * g.c)
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
                const float v = x[k];
                if (best < 0 || v > bestValue) { // strictly greater: the first maximum wins a tie
                    best = k;
                    bestValue = v;
                }
            }
        }
        y[i] = bestValue;
        argmax[i] = static_cast<std::int32_t>(best);
    }
}

// Gathers, for each input element, dy of every window that picked it: deterministic, no atomics.
__global__ void maxPoolBackwardKernel(WindowGeometry g, const float* dy, const std::int32_t* argmax,
                                      float* dx)
{
    TOWERS_GRID_STRIDE(i, g.n * g.h * g.w * g.c)
    {
        const std::int64_t c = i % g.c, ix = (i / g.c) % g.w, iy = (i / (g.c * g.w)) % g.h,
                           n = i / (g.c * g.w * g.h);
        // Output rows whose window covers iy: oy * sh - padTop <= iy < oy * sh - padTop + kh.
        const std::int64_t py = iy + g.padTop, px = ix + g.padLeft;
        const std::int64_t oyLo = py >= g.kh ? (py - g.kh) / g.sh + 1 : 0;
        const std::int64_t oyHi = min(py / g.sh, g.oh - 1);
        const std::int64_t oxLo = px >= g.kw ? (px - g.kw) / g.sw + 1 : 0;
        const std::int64_t oxHi = min(px / g.sw, g.ow - 1);
        float sum = 0.f;
        for (std::int64_t oy = oyLo; oy <= oyHi; ++oy)
            for (std::int64_t ox = oxLo; ox <= oxHi; ++ox) {
                const std::int64_t o = ((n * g.oh + oy) * g.ow + ox) * g.c + c;
                if (argmax[o] == i) sum += dy[o];
            }
        dx[i] = sum;
    }
}

__global__ void lrnForwardKernel(const float* x, float* y, float* scale, std::int64_t rows,
                                 std::int64_t c, int radius, float bias, float alpha, float beta)
{
    TOWERS_GRID_STRIDE(i, rows * c)
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
}

// dx_j = dy_j s_j^-beta - 2 alpha beta x_j sum over c with |c - j| <= r of dy_c x_c s_c^(-beta-1).
__global__ void lrnBackwardKernel(const float* x, const float* dy, const float* scale, float* dx,
                                  std::int64_t rows, std::int64_t c, int radius, float alpha,
                                  float beta)
{
    TOWERS_GRID_STRIDE(i, rows * c)
    {
        const std::int64_t ch = i % c, row = i - ch;
        const std::int64_t lo = ch > radius ? ch - radius : 0,
                           hi = ch + radius < c ? ch + radius : c - 1;
        float sum = 0.f;
        for (std::int64_t k = lo; k <= hi; ++k) {
            const float s = scale[row + k];
            sum += dy[row + k] * x[row + k] * powf(s, -beta - 1.f);
        }
        dx[i] = dy[i] * powf(scale[i], -beta) - 2.f * alpha * beta * x[i] * sum;
    }
}

} // namespace

void maxPoolForward(cudaStream_t s, const WindowGeometry& g, const float* x, float* y,
                    std::int32_t* argmax)
{
    const std::int64_t total = g.n * g.oh * g.ow * g.c;
    if (total == 0) return;
    maxPoolForwardKernel<<<gridFor(total), kThreads, 0, s>>>(g, x, y, argmax);
    TOWERS_CUDA_LAUNCHED();
}

void maxPoolBackward(cudaStream_t s, const WindowGeometry& g, const float* dy,
                     const std::int32_t* argmax, float* dx)
{
    const std::int64_t total = g.n * g.h * g.w * g.c;
    if (total == 0) return;
    maxPoolBackwardKernel<<<gridFor(total), kThreads, 0, s>>>(g, dy, argmax, dx);
    TOWERS_CUDA_LAUNCHED();
}

void lrnForward(cudaStream_t s, const float* x, float* y, float* scale, std::int64_t rows,
                std::int64_t c, int radius, float bias, float alpha, float beta)
{
    if (rows * c == 0) return;
    lrnForwardKernel<<<gridFor(rows * c), kThreads, 0, s>>>(x, y, scale, rows, c, radius, bias,
                                                            alpha, beta);
    TOWERS_CUDA_LAUNCHED();
}

void lrnBackward(cudaStream_t s, const float* x, const float* y, const float* dy,
                 const float* scale, float* dx, std::int64_t rows, std::int64_t c, int radius,
                 float alpha, float beta)
{
    (void)y;
    if (rows * c == 0) return;
    lrnBackwardKernel<<<gridFor(rows * c), kThreads, 0, s>>>(x, dy, scale, dx, rows, c, radius,
                                                             alpha, beta);
    TOWERS_CUDA_LAUNCHED();
}

} // namespace towers::engine::cuda
