// Parameter updates: axpy (weight decay, accumulation), SGD with momentum and Adam, in PyTorch's
// formulations (see MomentumStep and AdamStep in ops/descriptors.h).
#include "engine/cuda/kernel_math.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/launch.cuh"

namespace towers::engine::cuda {

namespace {

__global__ void axpyKernel(float alpha, const float* x, float* y, std::int64_t n)
{
    TOWERS_GRID_STRIDE(i, n) y[i] += alpha * x[i];
}

__global__ void flagNonFiniteKernel(const float* x, float* flag, std::int64_t n)
{
    TOWERS_GRID_STRIDE(i, n) flagNonFiniteAt(i, x, flag);
}

__global__ void emaKernel(const float* value, float* shadow, std::int64_t n, float keep)
{
    TOWERS_GRID_STRIDE(i, n) emaAt(i, value, shadow, keep);
}

__global__ void momentumKernel(const float* g, float* buf, float* w, std::int64_t n, float lr,
                               float momentum, float dampening, bool nesterov, bool first)
{
    TOWERS_GRID_STRIDE(i, n) momentumAt(i, g, buf, w, lr, momentum, dampening, nesterov, first);
}

__global__ void adamKernel(const float* g, float* m, float* v, float* w, std::int64_t n, float lr,
                           float beta1, float beta2, float epsilon, double correction1,
                           double correction2Sqrt)
{
    TOWERS_GRID_STRIDE(i, n)
    adamAt(i, g, m, v, w, lr, beta1, beta2, epsilon, correction1, correction2Sqrt);
}

} // namespace

void axpy(cudaStream_t s, float alpha, const float* x, float* y, std::int64_t n)
{
    if (n == 0) return;
    axpyKernel<<<gridFor(n), kThreads, 0, s>>>(alpha, x, y, n);
    TOWERS_CUDA_LAUNCHED();
}

void flagNonFinite(cudaStream_t s, const float* x, float* flag, std::int64_t n)
{
    if (n == 0) return;
    flagNonFiniteKernel<<<gridFor(n), kThreads, 0, s>>>(x, flag, n);
    TOWERS_CUDA_LAUNCHED();
}

void emaUpdate(cudaStream_t s, const float* value, float* shadow, std::int64_t n, float keep)
{
    if (n == 0) return;
    emaKernel<<<gridFor(n), kThreads, 0, s>>>(value, shadow, n, keep);
    TOWERS_CUDA_LAUNCHED();
}

void momentumUpdate(cudaStream_t s, const float* g, float* buf, float* w, std::int64_t n, float lr,
                    float momentum, float dampening, bool nesterov, bool first)
{
    if (n == 0) return;
    momentumKernel<<<gridFor(n), kThreads, 0, s>>>(g, buf, w, n, lr, momentum, dampening, nesterov,
                                                   first);
    TOWERS_CUDA_LAUNCHED();
}

void adamUpdate(cudaStream_t s, const float* g, float* m, float* v, float* w, std::int64_t n,
                float lr, float beta1, float beta2, float epsilon, double correction1,
                double correction2)
{
    if (n == 0) return;
    adamKernel<<<gridFor(n), kThreads, 0, s>>>(g, m, v, w, n, lr, beta1, beta2, epsilon,
                                               correction1, sqrt(correction2));
    TOWERS_CUDA_LAUNCHED();
}

} // namespace towers::engine::cuda
