#pragma once
// Private to engine/cpu: Towers' local response normalisation across channels on NHWC float32,
// TensorFlow's semantics (LrnDesc):
//   s[c] = bias + alpha * sum_{c' in [c - r, c + r], clipped to [0, C)} x[c']^2
//   y[c] = x[c] s[c]^-beta
// The kernels are written once with Google Highway and compiled for every x86-64 instruction set
// it knows (scalar, SSSE3, SSE4, AVX2, AVX-512); each call runs on the best one the CPU has. oneDNN
// 2.6 has a JIT LRN only for AVX-512 in nhwc: on AVX2 it runs its reference loop (lrn_ref), about
// 300 ms per backward of the cifar10-tutorial step, so the oneDNN backend uses these everywhere.
//
// The workspace is r = 1/s, one float per element: backward recomputes q = s^-beta = r^beta
// (two square roots for beta 0.75) and needs no division, and each pass moves one tensor less
// than with a workspace of two (what oneDNN's JIT kernel keeps). Both passes are bound by memory
// traffic, not arithmetic, on 2 cores: forward reads x and writes y and r, backward reads x, dy
// and r and writes dx:
//   dx[j] = dy[j] q[j] - 2 alpha beta x[j] sum_{c in [j - r, j + r]} dy[c] x[c] q[c] r[c]
#include <cstdint>
#include <string>
#include <vector>

namespace towers::engine::cpu {

struct LrnGeometry
{
    std::int64_t channels = 1; // C: NHWC rows of C contiguous floats, one per pixel
    int radius = 0;
    float bias = 1, alpha = 0, beta = 0;
};

// Pixels [begin, end): y and r at the same offsets as x (each the size of x). Any range, on any
// thread: ranges share no writes.
void lrnForwardPixels(const LrnGeometry& g, const float* x, float* y, float* r, std::int64_t begin,
                      std::int64_t end);
// Pixels [begin, end) of dx from x, dy and the r of the forward of the same x.
void lrnBackwardPixels(const LrnGeometry& g, const float* x, const float* dy, const float* r,
                       float* dx, std::int64_t begin, std::int64_t end);

// The instruction set the kernels run on now, in Highway's words: "AVX3" (AVX-512), "AVX2",
// "SSE4", "SSSE3" or "SCALAR".
// Evaluation's bfloat16 images (ExecContext::bf16Activations): y as lrnForwardPixels computes it
// in float32 from the bfloat16 x, rounded to nearest even; no r (no backward follows).
void lrnForwardBf16Pixels(const LrnGeometry& g, const std::uint16_t* x, std::uint16_t* y,
                          std::int64_t begin, std::int64_t end);

std::string lrnTargetName();

} // namespace towers::engine::cpu
