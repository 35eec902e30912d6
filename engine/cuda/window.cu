// Max pooling (any padding: padded positions never win), average pooling (pads do not count) and
// TensorFlow's LRN, NHWC.
#include "engine/cuda/kernel_math.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/launch.cuh"

namespace towers::engine::cuda {

namespace {

__global__ void maxPoolForwardKernel(WindowGeometry g, const float* x, float* y,
                                     std::int32_t* argmax)
{
    TOWERS_GRID_STRIDE(i, g.n * g.oh * g.ow * g.c) maxPoolForwardAt(i, g, x, y, argmax);
}

__global__ void maxPoolBackwardKernel(WindowGeometry g, const float* dy, const std::int32_t* argmax,
                                      float* dx)
{
    TOWERS_GRID_STRIDE(i, g.n * g.h * g.w * g.c) maxPoolBackwardAt(i, g, dy, argmax, dx);
}

__global__ void avgPoolForwardKernel(WindowGeometry g, const float* x, float* y)
{
    TOWERS_GRID_STRIDE(i, g.n * g.oh * g.ow * g.c) avgPoolForwardAt(i, g, x, y);
}

__global__ void avgPoolBackwardKernel(WindowGeometry g, const float* dy, float* dx)
{
    TOWERS_GRID_STRIDE(i, g.n * g.h * g.w * g.c) avgPoolBackwardAt(i, g, dy, dx);
}

__global__ void lrnForwardKernel(const float* x, float* y, float* scale, std::int64_t rows,
                                 std::int64_t c, int radius, float bias, float alpha, float beta)
{
    TOWERS_GRID_STRIDE(i, rows * c) lrnForwardAt(i, x, y, scale, c, radius, bias, alpha, beta);
}

__global__ void lrnBackwardKernel(const float* x, const float* dy, const float* scale, float* dx,
                                  std::int64_t rows, std::int64_t c, int radius, float alpha,
                                  float beta)
{
    TOWERS_GRID_STRIDE(i, rows * c) lrnBackwardAt(i, x, dy, scale, dx, c, radius, alpha, beta);
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

void avgPoolForward(cudaStream_t s, const WindowGeometry& g, const float* x, float* y)
{
    const std::int64_t total = g.n * g.oh * g.ow * g.c;
    if (total == 0) return;
    avgPoolForwardKernel<<<gridFor(total), kThreads, 0, s>>>(g, x, y);
    TOWERS_CUDA_LAUNCHED();
}

void avgPoolBackward(cudaStream_t s, const WindowGeometry& g, const float* dy, float* dx)
{
    const std::int64_t total = g.n * g.h * g.w * g.c;
    if (total == 0) return;
    avgPoolBackwardKernel<<<gridFor(total), kThreads, 0, s>>>(g, dy, dx);
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
