// Towers' Winograd F(4x4, 3x3) (winograd_3x3.h): the shared tile machinery of
// winograd_tiles-inl.h with m = 4, r = 3, compiled by foreach_target for every x86-64 instruction
// set Highway knows (AVX-512, AVX2, SSE4, SSSE3 and the portable baseline, SCALAR or EMU128); each
// call runs on the target Highway dispatches to then.
#include "engine/cpu/winograd_3x3.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "engine/cpu/winograd_3x3.cpp"
#include <hwy/foreach_target.h> // before highway.h
#include <hwy/highway.h>

#include "engine/cpu/winograd_tiles-inl.h"

HWY_BEFORE_NAMESPACE();
namespace towers::engine::cpu {
namespace HWY_NAMESPACE {

void Winograd3x3Forward(const WinogradPass& p, const float* x, const float* w, const float* b,
                        bool relu, float* y, AlignedBuffer& u, AlignedBuffer& scratch)
{
    winograd::forward<4, 3>(p, x, w, b, relu, y, u, scratch);
}

void Winograd3x3BackwardData(const WinogradPass& p, const float* dy, const float* mask,
                             const float* w, float* dx, AlignedBuffer& u, AlignedBuffer& scratch)
{
    winograd::backwardData<4, 3>(p, dy, mask, w, dx, u, scratch);
}

void Winograd3x3BackwardWeights(const WinogradPass& p, const float* x, const float* dy,
                                const float* mask, float* dw, float* db, AlignedBuffer& scratch)
{
    winograd::backwardWeights<4, 3>(p, x, dy, mask, dw, db, scratch);
}

std::int64_t Winograd3x3Target()
{
    return HWY_TARGET;
}

int Winograd3x3VectorFlops()
{
    return winograd::vectorFlops();
}

} // namespace HWY_NAMESPACE
} // namespace towers::engine::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace towers::engine::cpu {

HWY_EXPORT(Winograd3x3Forward);
HWY_EXPORT(Winograd3x3BackwardData);
HWY_EXPORT(Winograd3x3BackwardWeights);
HWY_EXPORT(Winograd3x3Target);
HWY_EXPORT(Winograd3x3VectorFlops);

bool Winograd3x3::supports(const Conv2dDesc& d)
{
    const Window2d& g = d.win;
    return g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1;
}

std::int64_t Winograd3x3::target()
{
    return HWY_DYNAMIC_DISPATCH(Winograd3x3Target)();
}

std::string Winograd3x3::targetName()
{
    return hwy::TargetName(target());
}

int Winograd3x3::vectorFlops()
{
    return HWY_DYNAMIC_DISPATCH(Winograd3x3VectorFlops)();
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
    constexpr std::int64_t kMinChannels = 16, kMinPixels = 512;
    const Window2d& g = d.win;
    const std::int64_t tiles = (g.oh + 3) / 4 * ((g.ow + 3) / 4);
    return g.c >= kMinChannels && d.outChannels >= kMinChannels &&
           g.n * g.oh * g.ow >= kMinPixels && 9 * g.oh * g.ow >= 2 * 36 * tiles &&
           2 * vectorFlops() >= directVectorFlops;
}

Winograd3x3::Winograd3x3(const Conv2dDesc& d) : WinogradConv(d, 3) {}

void Winograd3x3::forward(const float* x, const float* w, const float* b, bool relu, float* y)
{
    HWY_DYNAMIC_DISPATCH(Winograd3x3Forward)(m_forward, x, w, b, relu, y, m_u, m_scratch);
}

void Winograd3x3::backwardData(const float* dy, const float* mask, const float* w, float* dx)
{
    HWY_DYNAMIC_DISPATCH(Winograd3x3BackwardData)(m_backward, dy, mask, w, dx, m_u, m_scratch);
}

void Winograd3x3::backwardWeights(const float* x, const float* dy, const float* mask, float* dw,
                                  float* db)
{
    HWY_DYNAMIC_DISPATCH(Winograd3x3BackwardWeights)(m_forward, x, dy, mask, dw, db, m_scratch);
}

std::string Winograd3x3::algorithm() const
{
    return "winograd 3x3";
}

std::string Winograd3x3::implementation() const
{
    return "towers:winograd3x3:" + targetName();
}

} // namespace towers::engine::cpu
#endif // HWY_ONCE
