// Softmax cross-entropy over rows of k logits (k is small: the classes), and the sum of squares
// used by weight decay; their results stay on the device.
#include <math_constants.h>

#include "engine/cuda/kernel_math.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/launch.cuh"
#include "engine/cuda/stream_memory.h"

namespace towers::engine::cuda {

namespace {

// A row with a label outside [0, k) gets a NaN loss, and so does the mean: nothing waits here to
// look (TowerSet checks labels on the host before they come to the GPU).
__global__ void softmaxXentForwardKernel(const float* logits, const std::int32_t* labels,
                                         float* probs, double* rowLoss, std::int64_t n,
                                         std::int64_t k, double smoothing)
{
    TOWERS_GRID_STRIDE(r, n)
    {
        bool bad = false;
        const double loss = softmaxCrossEntropyRow(r, logits, labels, probs, k, smoothing, &bad);
        rowLoss[r] = bad ? CUDART_NAN : loss;
    }
}

__global__ void softmaxXentBackwardKernel(const float* probs, const std::int32_t* labels,
                                          float* dlogits, std::int64_t n, std::int64_t k, float hit,
                                          float spread, float scale)
{
    TOWERS_GRID_STRIDE(i, n * k)
    softmaxCrossEntropyBackwardAt(i, probs, labels, dlogits, k, hit, spread, scale);
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

// out[0] = (accumulate ? out[0] : 0) + scale * the sum of partial[0 .. count), in a fixed order.
__global__ void sumFinalKernel(const double* partial, double* out, std::int64_t count, double scale,
                               bool accumulate)
{
    __shared__ double part[kThreads];
    double sum = 0;
    for (std::int64_t i = threadIdx.x; i < count; i += kThreads) sum += partial[i];
    part[threadIdx.x] = sum;
    __syncthreads();
    for (int stride = kThreads / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) part[threadIdx.x] += part[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[0] = (accumulate ? out[0] : 0.0) + scale * part[0];
}

} // namespace

void softmaxCrossEntropyForward(cudaStream_t s, const float* logits, const std::int32_t* labels,
                                float* probs, double* loss, std::int64_t n, std::int64_t k,
                                double smoothing)
{
    if (n == 0) {
        sumFinalKernel<<<1, kThreads, 0, s>>>(nullptr, loss, 0, 0.0, false); // 0
        TOWERS_CUDA_LAUNCHED();
        return;
    }
    const ScratchBuffer scratch(sizeof(double) * std::size_t(n), s);
    auto* rowLoss = static_cast<double*>(scratch.get());
    softmaxXentForwardKernel<<<gridFor(n, 128), 128, 0, s>>>(logits, labels, probs, rowLoss, n, k,
                                                             smoothing);
    TOWERS_CUDA_LAUNCHED();
    // The mean in one block, in a fixed order: the same loss on every run.
    sumFinalKernel<<<1, kThreads, 0, s>>>(rowLoss, loss, n, 1.0 / double(n), false);
    TOWERS_CUDA_LAUNCHED();
}

void softmaxCrossEntropyBackward(cudaStream_t s, const float* probs, const std::int32_t* labels,
                                 float* dlogits, std::int64_t n, std::int64_t k, double smoothing,
                                 float scale)
{
    if (n * k == 0) return;
    const float hit = static_cast<float>(1.0 - smoothing);
    const float spread = static_cast<float>(smoothing / double(k));
    softmaxXentBackwardKernel<<<gridFor(n * k), kThreads, 0, s>>>(probs, labels, dlogits, n, k, hit,
                                                                  spread, scale);
    TOWERS_CUDA_LAUNCHED();
}

void sumSquares(cudaStream_t s, const float* x, double* sum, std::int64_t n, double scale)
{
    // A fixed grid, so the order of the additions (and the result) never changes between runs.
    const ScratchBuffer scratch(sizeof(double) * kSumBlocks, s);
    auto* partial = static_cast<double*>(scratch.get());
    sumSquaresPartialKernel<<<kSumBlocks, kThreads, 0, s>>>(x, partial, n);
    TOWERS_CUDA_LAUNCHED();
    sumFinalKernel<<<1, kThreads, 0, s>>>(partial, sum, kSumBlocks, scale, true);
    TOWERS_CUDA_LAUNCHED();
}

} // namespace towers::engine::cuda
