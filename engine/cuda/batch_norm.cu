// Per-column sums of rows x c (channels last): batch normalisation, training and inference, and
// the bias gradient of convolutions and linear layers. The sums run in two deterministic stages:
// fixed row chunks into a scratch table, then one pass over the chunks, in double.
#include "engine/cuda/kernel_math.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/launch.cuh"
#include "engine/cuda/stream_memory.h"

namespace towers::engine::cuda {

namespace {

constexpr int kChunkRows = 256;

struct SumX
{
    const float* x;
    __device__ double operator()(std::int64_t i, std::int64_t) const { return x[i]; }
};
struct SumCentredSquares
{
    const float* x;
    const float* mean;
    std::int64_t channels;
    __device__ double operator()(std::int64_t i, std::int64_t) const
    {
        return centredSquareAt(i, x, mean, channels);
    }
};
struct SumDy
{
    const float* dy;
    __device__ double operator()(std::int64_t i, std::int64_t) const { return dy[i]; }
};
struct SumDyXhat
{
    const float* x;
    const float* dy;
    const float* mean;
    const float* var;
    float epsilon;
    std::int64_t channels;
    __device__ double operator()(std::int64_t i, std::int64_t) const
    {
        return dyXhatAt(i, x, dy, mean, var, channels, epsilon);
    }
};

// partial[chunk, c] = sum over the chunk's rows of f(r * cols + c, c); block (32, 8), grid
// (ceil(cols / 32), columnChunkBlocks(chunks)): a block of the grid's y dimension (at most
// 65,535) takes every gridDim.y-th chunk, and each chunk is summed in the same order whatever the
// grid, so the sums do not depend on it.
template <class F>
__global__ void columnPartialsKernel(F f, double* partial, std::int64_t rows, std::int64_t cols,
                                     std::int64_t chunks)
{
    __shared__ double part[8][32];
    const std::int64_t col = blockIdx.x * 32 + threadIdx.x;
    for (std::int64_t chunk = blockIdx.y; chunk < chunks; chunk += gridDim.y) {
        const std::int64_t begin = chunk * kChunkRows;
        const std::int64_t end = min(begin + kChunkRows, rows);
        double sum = 0;
        if (col < cols)
            for (std::int64_t r = begin + threadIdx.y; r < end; r += 8)
                sum += f(r * cols + col, col);
        part[threadIdx.y][threadIdx.x] = sum;
        __syncthreads();
        if (threadIdx.y == 0 && col < cols) {
            double total = 0;
            for (int k = 0; k < 8; ++k) total += part[k][threadIdx.x];
            partial[chunk * cols + col] = total;
        }
        __syncthreads(); // `part` is rewritten for the next chunk
    }
}

// out[c] = scale * sum over chunks of partial[chunk, c].
__global__ void columnTotalsKernel(const double* partial, float* out, std::int64_t chunks,
                                   std::int64_t cols, double scale)
{
    TOWERS_GRID_STRIDE(c, cols)
    {
        double total = 0;
        for (std::int64_t k = 0; k < chunks; ++k) total += partial[k * cols + c];
        out[c] = static_cast<float>(total * scale);
    }
}

template <class F>
void columnSums(cudaStream_t s, F f, float* out, std::int64_t rows, std::int64_t cols, double scale)
{
    const std::int64_t chunks = (rows + kChunkRows - 1) / kChunkRows;
    const ScratchBuffer scratch(sizeof(double) * std::size_t(chunks * cols), s);
    auto* partial = static_cast<double*>(scratch.get());
    const dim3 grid(static_cast<unsigned>((cols + 31) / 32),
                    static_cast<unsigned>(columnChunkBlocks(chunks)));
    columnPartialsKernel<<<grid, dim3(32, 8), 0, s>>>(f, partial, rows, cols, chunks);
    TOWERS_CUDA_LAUNCHED();
    columnTotalsKernel<<<gridFor(cols), kThreads, 0, s>>>(partial, out, chunks, cols, scale);
    TOWERS_CUDA_LAUNCHED();
}

__global__ void applyKernel(const float* x, const float* mean, const float* var, const float* gamma,
                            const float* beta, float* y, std::int64_t rows, std::int64_t c,
                            float epsilon)
{
    TOWERS_GRID_STRIDE(i, rows * c) batchNormApplyAt(i, x, mean, var, gamma, beta, y, c, epsilon);
}

__global__ void runningKernel(float* runningMean, float* runningVar, const float* mean,
                              const float* var, std::int64_t c, double unbias, float momentum)
{
    TOWERS_GRID_STRIDE(ch, c)
    batchNormRunningAt(ch, runningMean, runningVar, mean, var, unbias, momentum);
}

__global__ void foldKernel(const float* w, const float* b, const float* gamma, const float* beta,
                           const float* mean, const float* var, double epsilon, float* wOut,
                           float* bOut, std::int64_t channels, std::int64_t per)
{
    TOWERS_GRID_STRIDE(i, channels * per)
    foldBatchNormAt(i, per, w, b, gamma, beta, mean, var, epsilon, wOut, bOut);
}

__global__ void backwardKernel(const float* x, const float* dy, const float* mean, const float* var,
                               const float* gamma, const float* dgamma, const float* dbeta,
                               float* dx, std::int64_t rows, std::int64_t c, float epsilon)
{
    TOWERS_GRID_STRIDE(i, rows * c)
    batchNormBackwardAt(i, x, dy, mean, var, gamma, dgamma, dbeta, dx, rows, c, epsilon);
}

} // namespace

void biasGradient(cudaStream_t s, const float* g, float* db, std::int64_t rows, std::int64_t cols)
{
    if (cols == 0) return;
    if (rows == 0) {
        TOWERS_CUDA(cudaMemsetAsync(db, 0, sizeof(float) * cols, s));
        return;
    }
    columnSums(s, SumDy{g}, db, rows, cols, 1.0);
}

void batchNormStatistics(cudaStream_t s, const float* x, float* mean, float* var, std::int64_t rows,
                         std::int64_t c)
{
    if (rows == 0 || c == 0) return;
    columnSums(s, SumX{x}, mean, rows, c, 1.0 / double(rows));
    columnSums(s, SumCentredSquares{x, mean, c}, var, rows, c, 1.0 / double(rows));
}

void batchNormApply(cudaStream_t s, const float* x, const float* mean, const float* var,
                    const float* gamma, const float* beta, float* y, std::int64_t rows,
                    std::int64_t c, float epsilon)
{
    if (rows * c == 0) return;
    applyKernel<<<gridFor(rows * c), kThreads, 0, s>>>(x, mean, var, gamma, beta, y, rows, c,
                                                       epsilon);
    TOWERS_CUDA_LAUNCHED();
}

void batchNormRunningUpdate(cudaStream_t s, float* runningMean, float* runningVar,
                            const float* mean, const float* var, std::int64_t c, std::int64_t rows,
                            float momentum)
{
    if (c == 0) return;
    const double unbias = rows > 1 ? double(rows) / double(rows - 1) : 1.0;
    runningKernel<<<gridFor(c), kThreads, 0, s>>>(runningMean, runningVar, mean, var, c, unbias,
                                                  momentum);
    TOWERS_CUDA_LAUNCHED();
}

void foldBatchNorm(cudaStream_t s, const float* w, const float* b, const float* gamma,
                   const float* beta, const float* mean, const float* var, double epsilon,
                   float* wOut, float* bOut, std::int64_t channels, std::int64_t per)
{
    if (channels * per == 0) return;
    foldKernel<<<gridFor(channels * per), kThreads, 0, s>>>(w, b, gamma, beta, mean, var, epsilon,
                                                            wOut, bOut, channels, per);
    TOWERS_CUDA_LAUNCHED();
}

void batchNormBackward(cudaStream_t s, const float* x, const float* dy, const float* mean,
                       const float* var, const float* gamma, float* dx, float* dgamma, float* dbeta,
                       std::int64_t rows, std::int64_t c, float epsilon)
{
    if (rows == 0 || c == 0) return;
    columnSums(s, SumDy{dy}, dbeta, rows, c, 1.0);
    columnSums(s, SumDyXhat{x, dy, mean, var, epsilon, c}, dgamma, rows, c, 1.0);
    backwardKernel<<<gridFor(rows * c), kThreads, 0, s>>>(x, dy, mean, var, gamma, dgamma, dbeta,
                                                          dx, rows, c, epsilon);
    TOWERS_CUDA_LAUNCHED();
}

} // namespace towers::engine::cuda
