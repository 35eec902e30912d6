#pragma once
// Private to engine/cpu: 5x5 stride-1 convolutions by Winograd's minimal filtering F(2x2, 5x5).
//
// oneDNN 2.6 has Winograd only for 3x3 kernels; its direct 5x5 kernels already run near the FMA
// peak, so the only way to go faster is fewer multiplications. F(2x2, 5x5) computes each 2x2 output
// tile from a 6x6 input tile with 36 multiplications per channel pair instead of 100: the input
// tile and the kernel are transformed (V = B^T d B, U = G g G^T), multiplied element-wise -- for
// all channels at once, 36 small matrix products [tiles x C] x [C x K] -- and transformed back
// (Y = A^T M A). The interpolation points 0, +-1, +-2 and infinity keep the transforms' constants
// small, so float32 rounding stays near that of the direct sum (normalised error ~2e-6 against
// oneDNN's direct convolution on the tutorial's conv2). Backward data is the same computation on
// dy with the kernel flipped and its channel roles swapped; backward weights is F(5x5, 2x2).
//
// Written once with Google Highway (the tile machinery it shares with the 3x3 Winograd:
// winograd_tiles.h, winograd_tiles-inl.h) and run on the instruction set Highway dispatches to:
// channels in vectors of 16 floats on AVX-512, 8 on AVX2, 4 on SSE4, any channel count (the last
// vector of a row is partial). Activations NHWC, weights OIHW, as the Ops interface.
//
// Whether it pays depends on the instruction sets of both sides (fasterThanDirect). Measured on
// 2 Zen 4 cores, 2 threads, batch 128, the tutorial's conv2 (64 -> 64 at 12x12, bias, ReLU), ms
// forward / backward data / backward weights, the lower instruction sets forced
// (TOWERS_SIMD_TARGET, ONEDNN_MAX_CPU_ISA):
//   AVX-512: Winograd  8.2 /  7.9 /  8.4   oneDNN direct avx512_core 13.7 / 15.2 / 14.8
//   AVX2:    Winograd  9.4 /  9.2 /  9.4   oneDNN direct avx2        14.7 / 15.2 / 19.5
//   SSE4:    Winograd 22.9 / 22.9 / 23.0   oneDNN direct sse41       63.3 / 60.0 / 60.7
//                                          oneDNN direct avx         63.1 / 38.5 / 37.3
// so SSE4's Winograd beats oneDNN's sse41 and avx kernels (CPUs without AVX2) but not its avx2.
#include <cstdint>
#include <string>

#include "engine/cpu/cpu_common.h"
#include "engine/cpu/winograd_tiles.h"

namespace towers::engine::cpu {

class Winograd5x5 : public WinogradConv
{
public:
    // True when the kernels compute this geometry: a 5x5 kernel, stride 1 (any channel counts,
    // paddings and sizes).
    static bool supports(const Conv2dDesc& d);
    // True when, on the instruction set the kernels run on now, they beat a direct convolution
    // whose kernels do `directVectorFlops` floating-point operations per vector instruction (as
    // vectorFlops(): oneDNN's avx512_core 32, avx2 16, avx 8, sse41 4) for this geometry
    // (supports(d) assumed): 16 or more channels on both sides, and at least half the direct
    // kernels' arithmetic per instruction. Asked again after a forced target
    // (TOWERS_SIMD_TARGET, ForcedSimdTarget), it answers for that target.
    static bool fasterThanDirect(const Conv2dDesc& d, int directVectorFlops);

    explicit Winograd5x5(const Conv2dDesc& d);
};

} // namespace towers::engine::cpu
