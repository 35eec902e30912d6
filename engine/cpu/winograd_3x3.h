#pragma once
// Private to engine/cpu: 3x3 stride-1 convolutions by Winograd's minimal filtering F(4x4, 3x3),
// Towers' own, for the CPUs where oneDNN has none (oneDNN 2.6's jit_wino_4x3 is AVX-512 only, and
// its direct AVX2 kernels already run near the FMA peak: fewer multiplications are the only way
// forward there).
//
// F(4x4, 3x3) computes each 4x4 output tile from a 6x6 input tile with 36 multiplications per
// channel pair instead of 144 (4x fewer; less where the output is not a multiple of 4 and the last
// tiles are partial): the same tiles, points (0, +-1, +-2, infinity), input transform and batched
// products [tiles x C] x [C x K] as the 5x5 Winograd (winograd_5x5.h), with G 6x3 and A^T 4x6
// (winograd_tiles-inl.h). Backward data is the same computation on dy with the kernel flipped and
// its channel roles swapped; backward weights is F(3x3, 4x4) on the same tiles. Normalised error
// against the float64 reference on mnist-convnet's conv2 and conv3 shapes: 1e-7 to 4e-6 in every
// direction (tests/engine/tst_winograd.cpp holds it to the 1e-5 of oneDNN's convolutions).
//
// Written once with Google Highway and run on the instruction set Highway dispatches to: channels
// in vectors of 16 floats on AVX-512, 8 on AVX2, 4 on SSE4, any channel count. Activations NHWC,
// weights OIHW, as the Ops interface.
//
// Whether it pays depends on the instruction sets of both sides and on the amount of work
// (fasterThanDirect). Measured on 2 Zen 4 cores, 2 threads, mnist-convnet's conv2 (64 -> 256,
// 12x12 VALID, batch 128) and conv3 (256 -> 512, 10x10), ms forward / backward data / backward
// weights, the lower instruction sets forced (TOWERS_SIMD_TARGET, ONEDNN_MAX_CPU_ISA):
//                           conv2                 conv3
//   AVX2 Winograd           10.9 / 13.1 / 13.7    38.1 / 88.7 / 34.5
//   oneDNN direct avx2      20.7 / 18.5 / 21.9   108.7 / 103.4 / 113.6
//   AVX-512 Winograd        10.1 / 12.7 / 10.5    33.6 / 79.6 / 41.4
//   oneDNN jit_wino_4x3      9.6 / 12.4 / -       29.4 / 64.4 / 31.1
//   oneDNN direct avx512    17.8 / 16.7 / 19.9    85.7 / 86.1 / 100.1
//   SSE4 Winograd           25.0 / 31.8 / 31.0
//   oneDNN direct sse41     81.2 / 51.5 / 50.9
//   oneDNN direct avx       81.8 / 31.2 / 27.5
// Backward data of conv3 gains least: its 10x10 output takes 3x3 tiles of 4x4 (products for 144
// pixels, 100 of them real) and its products are 512 channels deep. Where oneDNN has its own
// F(4x4, 3x3) (AVX-512 only), the plans keep it (conv_plan.h).
#include <cstdint>
#include <string>

#include "engine/cpu/cpu_common.h"
#include "engine/cpu/winograd_tiles.h"

namespace towers::engine::cpu {

class Winograd3x3 : public WinogradConv
{
public:
    // True when the kernels compute this geometry: a 3x3 kernel, stride 1 (any channel counts,
    // paddings and sizes).
    static bool supports(const Conv2dDesc& d);
    // True when, on the instruction set the kernels run on now, they beat a direct convolution
    // whose kernels do `directVectorFlops` floating-point operations per vector instruction
    // (oneDNN's avx512_core 32, avx2 16, avx 8, sse41 4) for this geometry (supports(d) assumed).
    // Asked again after a forced target (TOWERS_SIMD_TARGET, ForcedSimdTarget), it answers for
    // that target.
    static bool fasterThanDirect(const Conv2dDesc& d, int directVectorFlops);
    // True when the geometry has channels enough on both sides for any F(4x4, 3x3) to pay (16 or
    // more): below, the transforms cost more than the products save (a first layer's 1 or 3
    // input channels). Part of fasterThanDirect; the plans ask it of oneDNN's Winograd too.
    static bool enoughChannels(const Conv2dDesc& d);

    explicit Winograd3x3(const Conv2dDesc& d);
};

} // namespace towers::engine::cpu
