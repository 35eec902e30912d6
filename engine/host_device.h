#pragma once
// TOWERS_HD marks the plain C++ functions that compile for the host and, under nvcc, for a GPU
// too: the CUDA kernels' per-element code (engine/cuda/kernel_math.h), the batch-norm fold
// (engine/ops/batch_norm_fold.h) and the preprocessing arithmetic (engine/data/distortion_math.h).
// No CUDA header.
#ifdef __CUDACC__
#define TOWERS_HD __host__ __device__
#else
#define TOWERS_HD
#endif
