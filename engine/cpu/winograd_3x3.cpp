// Towers' Winograd F(4x4, 3x3) (winograd_3x3.h): which geometries it computes and where it pays;
// its kernels, shared with the other size, are winograd_kernels.cpp's.
#include "engine/cpu/winograd_3x3.h"

namespace towers::engine::cpu {

bool Winograd3x3::supports(const Conv2dDesc& d)
{
    const Window2d& g = d.win;
    return g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1;
}

bool Winograd3x3::fasterThanDirect(const Conv2dDesc& d, int directVectorFlops)
{
    // Up to 4x fewer multiplications than a direct convolution, less the transforms and the trips
    // through memory between them. Measured on 2 Zen 4 cores (see the header; the small shapes
    // on one thread, CPU time), it beats oneDNN's direct kernels wherever its arithmetic per
    // instruction is at least half theirs (AVX2 against avx2 and AVX-512 against avx512_core by
    // 1.5-3x, SSE4 against sse41 and avx; not SSE4 against avx2), given enough work:
    //  * 16 or more channels on both sides (below, the transforms, which work on whole vectors of
    //    channels, cost more than the products save: a first layer's 1 or 3 input channels);
    //  * at least twice fewer multiplications, partial 4x4 tiles counted whole (not for 5x5
    //    outputs, 2x2 or smaller);
    //  * 512 output pixels or more over the batch: the kernel's transform costs the same whatever
    //    the batch, and below (1 to 8 images of 6x6 or 8x8, 20 to 64 channels) it was slower
    //    than direct or no faster, on AVX2 and AVX-512 alike.
    constexpr std::int64_t kMinPixels = 512;
    const Window2d& g = d.win;
    const std::int64_t tiles = (g.oh + 3) / 4 * ((g.ow + 3) / 4);
    return enoughChannels(d) && g.n * g.oh * g.ow >= kMinPixels &&
           9 * g.oh * g.ow >= 2 * 36 * tiles && 2 * vectorFlops() >= directVectorFlops;
}

bool Winograd3x3::enoughChannels(const Conv2dDesc& d)
{
    constexpr std::int64_t kMinChannels = 16;
    return d.win.c >= kMinChannels && d.outChannels >= kMinChannels;
}

Winograd3x3::Winograd3x3(const Conv2dDesc& d) : WinogradConv(d, 3) {}

} // namespace towers::engine::cpu
