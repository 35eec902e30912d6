#pragma once
// Private to engine/cpu: the gradient a convolution's backward starts from, written straight into
// the layout its oneDNN primitives read. g = dy where y > 0 (a fused ReLU) or dy itself, read from
// NHWC and written as NHWC or as oneDNN's channel-blocked nChw8c / nChw16c, in one pass: a separate
// ReLU backward and reorder would read and write the whole tensor twice.
#include <cstdint>

#include <oneapi/dnnl/dnnl.hpp>

namespace towers::engine::cpu {

// The channel block of md if it is nChw8c or nChw16c for these N, C, H, W; 0 if it is nhwc; -1 for
// any other layout (the caller then reorders with oneDNN).
int channelBlockOf(const dnnl::memory::desc& md, const dnnl::memory::dims& nchw);

// out = dy masked by y > 0 (no mask when y is null), for [n, hw, c] NHWC tensors; block 0 writes
// NHWC, 8 or 16 the blocked layout, whose padding channels in the last block are written as zeros.
void maskedGradient(const float* dy, const float* y, std::int64_t n, std::int64_t hw,
                    std::int64_t c, int block, float* out);

// For [rows, c] NHWC tensors, dy masked by y > 0 (no mask when y is null): into `out` as
// bfloat16 (rounded to nearest even; a bfloat16 convolution's backward reads g so), and, when
// channelSums is not null, its sum per channel from the float32 values (a bias gradient, summed
// in double over chunks and rounded once). One pass does both.
void maskedGradientBf16(const float* dy, const float* y, std::int64_t rows, std::int64_t c,
                        std::uint16_t* out, float* channelSums);

} // namespace towers::engine::cpu
