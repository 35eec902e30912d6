#pragma once
// Private to engine/cpu: the patches a convolution's window reads, as the rows of a matrix, so that
// a matrix product can stand in for a convolution kernel (conv_plan.h: the backward weights of
// small bfloat16 images on AMX).
#include <cstdint>

#include "engine/ops/descriptors.h"

namespace towers::engine::cpu {

// col[m][(ky * kw + kx) * c + ci] = x[n][oy * sh - padTop + ky][ox * sw - padLeft + kx][ci], or 0
// where that position is padding, for every output pixel m = (n * oh + oy) * ow + ox of the window
// g: an (n * oh * ow) x (kh * kw * c) row-major matrix of 16-bit values (bfloat16) from an NHWC
// input of the same type. Rows are spread over the OpenMP team.
void im2col16(const Window2d& g, const std::uint16_t* x, std::uint16_t* col);

} // namespace towers::engine::cpu
