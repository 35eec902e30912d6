#pragma once
// Grid sizing shared by the kernel files.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "engine/cuda/cuda_check.h"

namespace towers::engine::cuda {

constexpr int kThreads = 256;

inline unsigned gridFor(std::int64_t n, int threads = kThreads)
{
    // Grid-stride loops cover the rest; 65535 * 8 blocks keep every GPU busy.
    const std::int64_t blocks = (n + threads - 1) / threads;
    return static_cast<unsigned>(std::clamp<std::int64_t>(blocks, 1, 65535 * 8));
}

#define TOWERS_GRID_STRIDE(i, n)                                                                   \
    for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < (n);            \
         i += std::int64_t(blockDim.x) * gridDim.x)

} // namespace towers::engine::cuda
