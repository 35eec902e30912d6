// Layout kernels: NHWC <-> NCHW, OIHW <-> OHWI filters, and the zero padding / cropping that
// gives cuDNN (symmetric pads only) TensorFlow's asymmetric SAME padding.
#include "engine/cuda/kernels.h"
#include "engine/cuda/launch.cuh"

namespace towers::engine::cuda {

namespace {

// y[a, c, b] = x[a, b, c] for x of [outer, b, c]: both layout pairs are this transpose.
__global__ void transposeInnerKernel(const float* x, float* y, std::int64_t outer, std::int64_t b,
                                     std::int64_t c)
{
    TOWERS_GRID_STRIDE(i, outer * b * c)
    {
        const std::int64_t ci = i % c, bi = (i / c) % b, a = i / (b * c);
        y[(a * c + ci) * b + bi] = x[i];
    }
}

__global__ void padKernel(const float* x, float* y, std::int64_t n, std::int64_t h, std::int64_t w,
                          std::int64_t c, std::int64_t h2, std::int64_t w2, int top, int left)
{
    TOWERS_GRID_STRIDE(i, n * h2 * w2 * c)
    {
        const std::int64_t ci = i % c, x2 = (i / c) % w2, y2 = (i / (c * w2)) % h2,
                           ni = i / (c * w2 * h2);
        const std::int64_t ix = x2 - left, iy = y2 - top;
        y[i] =
            (ix >= 0 && ix < w && iy >= 0 && iy < h) ? x[((ni * h + iy) * w + ix) * c + ci] : 0.f;
    }
}

__global__ void cropKernel(const float* x, float* y, std::int64_t n, std::int64_t h, std::int64_t w,
                           std::int64_t c, std::int64_t h2, std::int64_t w2, int top, int left)
{
    TOWERS_GRID_STRIDE(i, n * h * w * c)
    {
        const std::int64_t ci = i % c, ix = (i / c) % w, iy = (i / (c * w)) % h,
                           ni = i / (c * w * h);
        y[i] = x[((ni * h2 + iy + top) * w2 + ix + left) * c + ci];
    }
}

void transposeInner(cudaStream_t s, const float* x, float* y, std::int64_t outer, std::int64_t b,
                    std::int64_t c)
{
    const std::int64_t total = outer * b * c;
    if (total == 0) return;
    transposeInnerKernel<<<gridFor(total), kThreads, 0, s>>>(x, y, outer, b, c);
    TOWERS_CUDA_LAUNCHED();
}

} // namespace

void nhwcToNchw(cudaStream_t s, const float* x, float* y, std::int64_t n, std::int64_t h,
                std::int64_t w, std::int64_t c)
{
    transposeInner(s, x, y, n, h * w, c);
}

void nchwToNhwc(cudaStream_t s, const float* x, float* y, std::int64_t n, std::int64_t h,
                std::int64_t w, std::int64_t c)
{
    transposeInner(s, x, y, n, c, h * w);
}

void oihwToOhwi(cudaStream_t s, const float* x, float* y, std::int64_t o, std::int64_t i,
                std::int64_t kh, std::int64_t kw)
{
    transposeInner(s, x, y, o, i, kh * kw);
}

void ohwiToOihw(cudaStream_t s, const float* x, float* y, std::int64_t o, std::int64_t i,
                std::int64_t kh, std::int64_t kw)
{
    transposeInner(s, x, y, o, kh * kw, i);
}

void padNhwc(cudaStream_t s, const float* x, float* y, std::int64_t n, std::int64_t h,
             std::int64_t w, std::int64_t c, std::int64_t h2, std::int64_t w2, int top, int left)
{
    const std::int64_t total = n * h2 * w2 * c;
    if (total == 0) return;
    padKernel<<<gridFor(total), kThreads, 0, s>>>(x, y, n, h, w, c, h2, w2, top, left);
    TOWERS_CUDA_LAUNCHED();
}

void cropNhwc(cudaStream_t s, const float* x, float* y, std::int64_t n, std::int64_t h,
              std::int64_t w, std::int64_t c, std::int64_t h2, std::int64_t w2, int top, int left)
{
    const std::int64_t total = n * h * w * c;
    if (total == 0) return;
    cropKernel<<<gridFor(total), kThreads, 0, s>>>(x, y, n, h, w, c, h2, w2, top, left);
    TOWERS_CUDA_LAUNCHED();
}

} // namespace towers::engine::cuda
