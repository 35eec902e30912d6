#pragma once
// Test support for the bfloat16 tests (tst_bf16, tst_bf16_activations): rounding to bfloat16 as
// the oracle does it, operands bfloat16 holds exactly, and the convolution shapes they run.
#include <cstdint>
#include <cstring>

#include "engine/ops/descriptors.h"
#include "gradcheck.h"

namespace towers::test {

// Round to nearest even at bfloat16's 8-bit mantissa (finite values), from float32.
inline float roundToBf16(float f)
{
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    u += 0x7FFFu + ((u >> 16) & 1u);
    u &= 0xFFFF0000u;
    std::memcpy(&f, &u, 4);
    return f;
}

// Float32 values in [lo, hi), rounded to bfloat16 (so that it holds them exactly) when `exact`.
inline Tensor bf16Operand(const Shape& shape, Rng& rng, bool exact = true, double lo = -1,
                          double hi = 1)
{
    Tensor t = randomTensor(shape, DType::Float32, rng, lo, hi);
    if (exact)
        for (std::int64_t i = 0; i < t.numel(); ++i)
            t.data<float>()[i] = roundToBf16(static_cast<float>(t.at(i)));
    return t;
}

// A convolution of the kind the registered models have, by name.
struct ConvShape
{
    const char* name;
    Shape input;
    std::int64_t out;
    int k, stride;
    engine::Padding padding;

    engine::Conv2dDesc desc() const
    {
        return engine::makeConv2dDesc(input, out, k, k, stride, stride, padding);
    }
};

} // namespace towers::test
