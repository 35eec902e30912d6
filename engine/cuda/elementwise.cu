// Element-wise kernels: ReLU, addition, bias with activation, bias gradient, dropout, bfloat16
// copies.
#include "engine/cuda/kernel_math.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/launch.cuh"

namespace towers::engine::cuda {

namespace {

__global__ void reluForwardKernel(const float* x, float* y, std::int64_t n)
{
    TOWERS_GRID_STRIDE(i, n) reluForwardAt(i, x, y);
}

__global__ void reluBackwardKernel(const float* y, const float* dy, float* dx, std::int64_t n)
{
    TOWERS_GRID_STRIDE(i, n) reluBackwardAt(i, y, dy, dx);
}

__global__ void addKernel(const float* a, const float* b, float* y, std::int64_t n)
{
    TOWERS_GRID_STRIDE(i, n) y[i] = a[i] + b[i];
}

__global__ void biasActivationKernel(float* y, const float* b, std::int64_t rows, std::int64_t cols,
                                     bool relu)
{
    TOWERS_GRID_STRIDE(i, rows * cols) biasActivationAt(i, y, b, cols, relu);
}

__global__ void dropoutForwardKernel(const float* x, float* y, std::uint8_t* mask, std::int64_t n,
                                     std::uint64_t seed, std::uint32_t threshold, float scale,
                                     const double* scalars)
{
    const std::uint64_t stepSeed = dropoutSeedOf(scalars, seed);
    TOWERS_GRID_STRIDE(i, n) dropoutForwardAt(i, x, y, mask, stepSeed, threshold, scale);
}

__global__ void dropoutBackwardKernel(const float* dy, const std::uint8_t* mask, float* dx,
                                      std::int64_t n, float scale)
{
    TOWERS_GRID_STRIDE(i, n) dropoutBackwardAt(i, dy, mask, dx, scale);
}

__global__ void toBfloat16Kernel(const float* x, std::uint16_t* y, std::int64_t n)
{
    TOWERS_GRID_STRIDE(i, n) toBfloat16At(i, x, y);
}

__global__ void fromBfloat16Kernel(const std::uint16_t* x, float* y, std::int64_t n)
{
    TOWERS_GRID_STRIDE(i, n) fromBfloat16At(i, x, y);
}

} // namespace

void toBfloat16(cudaStream_t s, const float* x, std::uint16_t* y, std::int64_t n)
{
    if (n == 0) return;
    toBfloat16Kernel<<<gridFor(n), kThreads, 0, s>>>(x, y, n);
    TOWERS_CUDA_LAUNCHED();
}

void fromBfloat16(cudaStream_t s, const std::uint16_t* x, float* y, std::int64_t n)
{
    if (n == 0) return;
    fromBfloat16Kernel<<<gridFor(n), kThreads, 0, s>>>(x, y, n);
    TOWERS_CUDA_LAUNCHED();
}

void reluForward(cudaStream_t s, const float* x, float* y, std::int64_t n)
{
    if (n == 0) return;
    reluForwardKernel<<<gridFor(n), kThreads, 0, s>>>(x, y, n);
    TOWERS_CUDA_LAUNCHED();
}

void reluBackward(cudaStream_t s, const float* y, const float* dy, float* dx, std::int64_t n)
{
    if (n == 0) return;
    reluBackwardKernel<<<gridFor(n), kThreads, 0, s>>>(y, dy, dx, n);
    TOWERS_CUDA_LAUNCHED();
}

void addTensors(cudaStream_t s, const float* a, const float* b, float* y, std::int64_t n)
{
    if (n == 0) return;
    addKernel<<<gridFor(n), kThreads, 0, s>>>(a, b, y, n);
    TOWERS_CUDA_LAUNCHED();
}

void biasActivation(cudaStream_t s, float* y, const float* b, std::int64_t rows, std::int64_t cols,
                    bool relu)
{
    if (rows * cols == 0 || (!b && !relu)) return;
    biasActivationKernel<<<gridFor(rows * cols), kThreads, 0, s>>>(y, b, rows, cols, relu);
    TOWERS_CUDA_LAUNCHED();
}

void dropoutForward(cudaStream_t s, const float* x, float* y, std::uint8_t* mask, std::int64_t n,
                    std::uint64_t seed, std::uint32_t threshold, float scale, const double* scalars)
{
    if (n == 0) return;
    dropoutForwardKernel<<<gridFor(n), kThreads, 0, s>>>(x, y, mask, n, seed, threshold, scale,
                                                         scalars);
    TOWERS_CUDA_LAUNCHED();
}

void dropoutBackward(cudaStream_t s, const float* dy, const std::uint8_t* mask, float* dx,
                     std::int64_t n, float scale)
{
    if (n == 0) return;
    dropoutBackwardKernel<<<gridFor(n), kThreads, 0, s>>>(dy, mask, dx, n, scale);
    TOWERS_CUDA_LAUNCHED();
}

} // namespace towers::engine::cuda
