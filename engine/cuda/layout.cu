// Layout kernels: NHWC <-> NCHW, OIHW <-> OHWI filters, channels copied between tensors (a
// concatenation), and the zero padding / cropping that gives cuDNN (symmetric pads only)
// TensorFlow's asymmetric SAME padding.
#include "engine/cuda/kernel_math.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/launch.cuh"

namespace towers::engine::cuda {

namespace {

// Both layout pairs are one transpose of the inner two dimensions (see transposeInnerAt).
__global__ void transposeInnerKernel(const float* x, float* y, std::int64_t outer, std::int64_t b,
                                     std::int64_t c)
{
    TOWERS_GRID_STRIDE(i, outer * b * c) transposeInnerAt(i, x, y, b, c);
}

__global__ void padKernel(const float* x, float* y, std::int64_t n, std::int64_t h, std::int64_t w,
                          std::int64_t c, std::int64_t h2, std::int64_t w2, int top, int left)
{
    TOWERS_GRID_STRIDE(i, n * h2 * w2 * c) padAt(i, x, y, h, w, c, h2, w2, top, left);
}

__global__ void cropKernel(const float* x, float* y, std::int64_t n, std::int64_t h, std::int64_t w,
                           std::int64_t c, std::int64_t h2, std::int64_t w2, int top, int left)
{
    TOWERS_GRID_STRIDE(i, n * h * w * c) cropAt(i, x, y, h, w, c, h2, w2, top, left);
}

__global__ void copyChannelsKernel(const float* x, float* y, std::int64_t pixels,
                                   std::int64_t count, std::int64_t cx, std::int64_t cy)
{
    TOWERS_GRID_STRIDE(i, pixels * count) copyChannelsAt(i, x, y, count, cx, cy);
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

void copyChannels(cudaStream_t s, const float* x, float* y, std::int64_t pixels, std::int64_t count,
                  std::int64_t cx, std::int64_t cy)
{
    const std::int64_t total = pixels * count;
    if (total == 0) return;
    copyChannelsKernel<<<gridFor(total), kThreads, 0, s>>>(x, y, pixels, count, cx, cy);
    TOWERS_CUDA_LAUNCHED();
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
