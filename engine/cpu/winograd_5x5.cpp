// Towers' Winograd F(2x2, 5x5) (winograd_5x5.h): which geometries it computes and where it pays;
// its kernels, shared with the other size, are winograd_kernels.cpp's.
#include "engine/cpu/winograd_5x5.h"

namespace towers::engine::cpu {

bool Winograd5x5::supports(const Conv2dDesc& d)
{
    const Window2d& g = d.win;
    return g.kh == 5 && g.kw == 5 && g.sh == 1 && g.sw == 1;
}

bool Winograd5x5::fasterThanDirect(const Conv2dDesc& d, int directVectorFlops)
{
    // It does 2.8x fewer multiplications than a direct convolution, but the transforms and the
    // trips through memory between them cost a good part of that back; measured (see the
    // header), it wins wherever its arithmetic per instruction is at least half the direct
    // kernels' (SSE4 against sse41 and avx, AVX2 against avx2), and loses below (SSE4 against
    // avx2). Below 16 channels on either side, the transforms, which work on whole vectors of
    // channels, cost more than the products save (a first layer's 1 or 3 input channels).
    constexpr std::int64_t kMinChannels = 16;
    return d.win.c >= kMinChannels && d.outChannels >= kMinChannels &&
           2 * vectorFlops() >= directVectorFlops;
}

Winograd5x5::Winograd5x5(const Conv2dDesc& d) : WinogradConv(d, 5) {}

} // namespace towers::engine::cpu
