// The reduction kernel of towers that share one GPU (same_device_communicator.cpp): every rank's
// copy read in rank order, summed in double, the mean written into all of them.
#include "engine/cuda/kernel_math.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/launch.cuh"

namespace towers::engine::cuda {

namespace {

__global__ void meanAcrossRanksKernel(RankPointers ranks, int count, std::int64_t n)
{
    TOWERS_GRID_STRIDE(i, n) meanAcrossRanksAt(i, ranks.p, count);
}

} // namespace

void meanAcrossRanks(cudaStream_t s, const RankPointers& ranks, int count, std::int64_t n)
{
    if (n == 0) return;
    meanAcrossRanksKernel<<<gridFor(n), kThreads, 0, s>>>(ranks, count, n);
    TOWERS_CUDA_LAUNCHED();
}

} // namespace towers::engine::cuda
