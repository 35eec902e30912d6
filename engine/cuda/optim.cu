// Parameter updates: axpy (weight decay, accumulation), gradient clipping, plain SGD, SGD with
// momentum and Adam(W), in PyTorch's formulations (see MomentumStep and AdamStep in
// ops/descriptors.h). An update given a skip flag reads it on the GPU, each thread before its loop
// (kernel_math.h's updateSkipped): a diverged step is skipped without the host waiting for the
// flag.
#include "engine/cuda/kernel_math.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/launch.cuh"
#include "engine/ops/clip_norm.h"

namespace towers::engine::cuda {

namespace {

// axpy and sgdUpdate alike (skip and scalars nullptr for axpy): one kernel, so that sgdUpdate(lr)
// is axpy(-lr) to the bit, whatever the compiler contracts y + alpha * x to. -float(lr) is
// float(-lr): rounding is symmetric.
__global__ void axpyKernel(float alpha, const float* x, float* y, std::int64_t n, const float* skip,
                           const double* scalars)
{
    if (updateSkipped(skip)) return;
    const float a = -static_cast<float>(stepScalar(scalars, StepScalars::LearningRate, -alpha));
    TOWERS_GRID_STRIDE(i, n) y[i] += a * x[i];
}

__global__ void flagNonFiniteKernel(const float* x, float* flag, std::int64_t n)
{
    TOWERS_GRID_STRIDE(i, n) flagNonFiniteAt(i, x, flag);
}

__global__ void clipToNormKernel(const double* sumSquares, double maxNorm, float* x, std::int64_t n)
{
    const float c = clipFactor(*sumSquares, maxNorm);
    if (c == 1.f) return; // x * 1 is x
    TOWERS_GRID_STRIDE(i, n) x[i] *= c;
}

__global__ void emaKernel(const float* value, float* shadow, std::int64_t n, float keep,
                          const float* skip, const double* scalars)
{
    if (updateSkipped(skip)) return;
    const float k = static_cast<float>(stepScalar(scalars, StepScalars::EmaKeep, keep));
    TOWERS_GRID_STRIDE(i, n) emaAt(i, value, shadow, k);
}

__global__ void momentumKernel(const float* g, float* buf, float* w, std::int64_t n, float lr,
                               float momentum, float dampening, bool nesterov, bool first,
                               const float* skip, const double* scalars)
{
    if (updateSkipped(skip)) return;
    const float rate = static_cast<float>(stepScalar(scalars, StepScalars::LearningRate, lr));
    const bool once = stepScalar(scalars, StepScalars::MomentumFirst, first) != 0;
    TOWERS_GRID_STRIDE(i, n) momentumAt(i, g, buf, w, rate, momentum, dampening, nesterov, once);
}

__global__ void adamKernel(const float* g, float* m, float* v, float* w, std::int64_t n, float lr,
                           double beta1, double beta2, double epsilon, double correction1,
                           double correction2Sqrt, double weightDecay, const float* skip,
                           const double* scalars)
{
    if (updateSkipped(skip)) return;
    const float rate = static_cast<float>(stepScalar(scalars, StepScalars::LearningRate, lr));
    const double c1 = stepScalar(scalars, StepScalars::AdamCorrection1, correction1);
    const double c2Sqrt = stepScalar(scalars, StepScalars::AdamCorrection2Sqrt, correction2Sqrt);
    TOWERS_GRID_STRIDE(i, n)
    adamAt(i, g, m, v, w, rate, beta1, beta2, epsilon, c1, c2Sqrt, weightDecay);
}

} // namespace

void axpy(cudaStream_t s, float alpha, const float* x, float* y, std::int64_t n)
{
    if (n == 0) return;
    axpyKernel<<<gridFor(n), kThreads, 0, s>>>(alpha, x, y, n, nullptr, nullptr);
    TOWERS_CUDA_LAUNCHED();
}

void sgdUpdate(cudaStream_t s, float lr, const float* g, float* w, std::int64_t n,
               const float* skip, const double* scalars)
{
    if (n == 0) return;
    // -float(lr) is float(-lr): rounding is symmetric.
    axpyKernel<<<gridFor(n), kThreads, 0, s>>>(-lr, g, w, n, skip, scalars);
    TOWERS_CUDA_LAUNCHED();
}

void flagNonFinite(cudaStream_t s, const float* x, float* flag, std::int64_t n)
{
    if (n == 0) return;
    flagNonFiniteKernel<<<gridFor(n), kThreads, 0, s>>>(x, flag, n);
    TOWERS_CUDA_LAUNCHED();
}

void clipToNorm(cudaStream_t s, const double* sumSquares, double maxNorm, float* x, std::int64_t n)
{
    if (n == 0) return;
    clipToNormKernel<<<gridFor(n), kThreads, 0, s>>>(sumSquares, maxNorm, x, n);
    TOWERS_CUDA_LAUNCHED();
}

void emaUpdate(cudaStream_t s, const float* value, float* shadow, std::int64_t n, float keep,
               const float* skip, const double* scalars)
{
    if (n == 0) return;
    emaKernel<<<gridFor(n), kThreads, 0, s>>>(value, shadow, n, keep, skip, scalars);
    TOWERS_CUDA_LAUNCHED();
}

void momentumUpdate(cudaStream_t s, const float* g, float* buf, float* w, std::int64_t n, float lr,
                    float momentum, float dampening, bool nesterov, bool first, const float* skip,
                    const double* scalars)
{
    if (n == 0) return;
    momentumKernel<<<gridFor(n), kThreads, 0, s>>>(g, buf, w, n, lr, momentum, dampening, nesterov,
                                                   first, skip, scalars);
    TOWERS_CUDA_LAUNCHED();
}

void adamUpdate(cudaStream_t s, const float* g, float* m, float* v, float* w, std::int64_t n,
                float lr, double beta1, double beta2, double epsilon, double correction1,
                double correction2Sqrt, double weightDecay, const float* skip,
                const double* scalars)
{
    if (n == 0) return;
    adamKernel<<<gridFor(n), kThreads, 0, s>>>(g, m, v, w, n, lr, beta1, beta2, epsilon,
                                               correction1, correction2Sqrt, weightDecay, skip,
                                               scalars);
    TOWERS_CUDA_LAUNCHED();
}

} // namespace towers::engine::cuda
