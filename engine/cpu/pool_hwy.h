#pragma once
// Private to engine/cpu: Towers' max pooling on NHWC float32, the op's semantics (op_list.h): a
// window's maximum over its real elements (pads never win), the first in scan order on a tie.
// Written once with Google Highway, compiled for every x86-64 instruction set it knows and run on
// the best one the CPU has (simd_target.h). oneDNN 2.6's AVX2 max pooling with a training
// workspace is 3-4x slower than its AVX-512 kernel on the same machine (the cifar10-tutorial's
// pool1, [128, 24, 24, 64] 3x3/2: 7.1 ms forward and 4.5 ms backward against 1.9 and 2.6, Intel
// Xeon held to AVX2), a fifth of that step.
//
// The workspace is one byte per output element: the winner's position in its window, i * kw + j
// for row i and column j of the unclipped window (windows of up to 256 positions).
//
// Backward gathers rather than scatters: each input pixel sums, in scan order of the windows
// (row by row, left to right), the dy of the windows that cover it and chose it. Every dx element
// is written once, no zero fill, and any range of input pixels can go to any thread.
#include <cstdint>
#include <string>

#include "engine/ops/descriptors.h"

namespace towers::engine::cpu {

// The largest window the byte workspace can index.
constexpr int kMaxPoolWindowPositions = 256;

// Output pixels [begin, end) of the N * OH * OW: y and the workspace ws at the same offsets.
void maxPoolForwardPixels(const Window2d& g, const float* x, float* y, std::uint8_t* ws,
                          std::int64_t begin, std::int64_t end);
// Input pixels [begin, end) of the N * H * W of dx, from dy and the forward's workspace.
void maxPoolBackwardPixels(const Window2d& g, const float* dy, const std::uint8_t* ws, float* dx,
                           std::int64_t begin, std::int64_t end);

// The instruction set the kernels run on now, in Highway's words (as lrnTargetName()).
// Evaluation's bfloat16 max pooling (ExecContext::bf16Activations): output pixels [begin, end) as
// maxPoolForwardPixels computes them, the same element winning, without the workspace.
void maxPoolForwardBf16Pixels(const Window2d& g, const std::uint16_t* x, std::uint16_t* y,
                              std::int64_t begin, std::int64_t end);

std::string poolTargetName();

} // namespace towers::engine::cpu
