#pragma once
// bfloat16 (the upper half of a float32) to and from float32, as plain C++ that compiles for the
// host and, under nvcc, for a GPU: the one rounding every bfloat16 in Towers gets, whether a
// tensor element (Tensor::setAt), a oneDNN-backend loop over evaluation's bfloat16 images
// (engine/cpu) or a CUDA kernel (engine/cuda/kernel_math.h). No CUDA header.
#include <string.h>

#include <cstdint>

#include "engine/host_device.h"

namespace towers::engine {

TOWERS_HD inline std::uint32_t floatBits(float f)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    std::uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
#endif
}

// The bfloat16 of a float32: its upper 16 bits, rounded to nearest, ties to even (as oneDNN's
// reorders and CUDA's __float2bfloat16_rn round); a NaN stays a NaN (quiet, its sign kept), an
// overflow rounds to infinity. Without branches, so that loops over it vectorise.
TOWERS_HD inline std::uint16_t bfloat16Bits(float f)
{
    const std::uint32_t b = floatBits(f);
    const bool nan = (b & 0x7fffffffu) > 0x7f800000u;
    return std::uint16_t(nan ? (b >> 16) | 0x0040u : (b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

// The float32 a bfloat16 stands for (exact).
TOWERS_HD inline float fromBfloat16Bits(std::uint16_t h)
{
    const std::uint32_t b = std::uint32_t(h) << 16;
#ifdef __CUDA_ARCH__
    return __uint_as_float(b);
#else
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
#endif
}

} // namespace towers::engine
