// Softmax cross-entropy over rows of k logits (k is small: the classes), and the sum of squares
// used by weight decay and gradient norms.
#include "engine/cuda/kernel_math.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/launch.cuh"
#include "engine/cuda/stream_memory.h"

namespace towers::engine::cuda {

namespace {

__global__ void softmaxXentForwardKernel(const float* logits, const std::int32_t* labels,
                                         float* probs, double* rowLoss, std::int32_t* firstBadRow,
                                         std::int64_t n, std::int64_t k)
{
    TOWERS_GRID_STRIDE(r, n)
    {
        bool bad = false;
        rowLoss[r] = softmaxCrossEntropyRow(r, logits, labels, probs, k, &bad);
        if (bad) atomicMin(firstBadRow, static_cast<std::int32_t>(r));
    }
}

__global__ void softmaxXentBackwardKernel(const float* probs, const std::int32_t* labels,
                                          float* dlogits, std::int64_t n, std::int64_t k,
                                          float scale)
{
    TOWERS_GRID_STRIDE(i, n * k) softmaxCrossEntropyBackwardAt(i, probs, labels, dlogits, k, scale);
}

constexpr int kSumBlocks = 512;

__global__ void sumSquaresPartialKernel(const float* x, double* partial, std::int64_t n)
{
    __shared__ double part[kThreads];
    double sum = 0;
    TOWERS_GRID_STRIDE(i, n) sum += double(x[i]) * x[i];
    part[threadIdx.x] = sum;
    __syncthreads();
    for (int stride = kThreads / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) part[threadIdx.x] += part[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = part[0];
}

__global__ void sumFinalKernel(const double* partial, double* out, int count)
{
    __shared__ double part[kThreads];
    double sum = 0;
    for (int i = threadIdx.x; i < count; i += kThreads) sum += partial[i];
    part[threadIdx.x] = sum;
    __syncthreads();
    for (int stride = kThreads / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) part[threadIdx.x] += part[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[0] = part[0];
}

} // namespace

void softmaxCrossEntropyForward(cudaStream_t s, const float* logits, const std::int32_t* labels,
                                float* probs, double* rowLoss, std::int32_t* firstBadRow,
                                std::int64_t n, std::int64_t k)
{
    if (n == 0) return;
    softmaxXentForwardKernel<<<gridFor(n, 128), 128, 0, s>>>(logits, labels, probs, rowLoss,
                                                             firstBadRow, n, k);
    TOWERS_CUDA_LAUNCHED();
}

void softmaxCrossEntropyBackward(cudaStream_t s, const float* probs, const std::int32_t* labels,
                                 float* dlogits, std::int64_t n, std::int64_t k, float scale)
{
    if (n * k == 0) return;
    softmaxXentBackwardKernel<<<gridFor(n * k), kThreads, 0, s>>>(probs, labels, dlogits, n, k,
                                                                  scale);
    TOWERS_CUDA_LAUNCHED();
}

void sumSquares(cudaStream_t s, const float* x, double* out, std::int64_t n)
{
    // A fixed grid, so the order of the additions (and the result) never changes between runs.
    const ScratchBuffer scratch(sizeof(double) * kSumBlocks, s);
    auto* partial = static_cast<double*>(scratch.get());
    sumSquaresPartialKernel<<<kSumBlocks, kThreads, 0, s>>>(x, partial, n);
    TOWERS_CUDA_LAUNCHED();
    sumFinalKernel<<<1, kThreads, 0, s>>>(partial, out, kSumBlocks);
    TOWERS_CUDA_LAUNCHED();
}

} // namespace towers::engine::cuda
