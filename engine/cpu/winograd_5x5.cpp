// Towers' Winograd F(2x2, 5x5) (winograd_5x5.h): the shared tile machinery of
// winograd_tiles-inl.h with m = 2, r = 5, compiled by foreach_target for every x86-64 instruction
// set Highway knows (AVX-512, AVX2, SSE4, SSSE3 and the portable baseline, SCALAR or EMU128); each
// call runs on the target Highway dispatches to then.
#include "engine/cpu/winograd_5x5.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "engine/cpu/winograd_5x5.cpp"
#include <hwy/foreach_target.h> // before highway.h
#include <hwy/highway.h>

#include "engine/cpu/winograd_tiles-inl.h"

HWY_BEFORE_NAMESPACE();
namespace towers::engine::cpu {
namespace HWY_NAMESPACE {

void Winograd5x5Forward(const WinogradPass& p, const float* x, const float* w, const float* b,
                        bool relu, float* y, AlignedBuffer& u, AlignedBuffer& scratch)
{
    winograd::forward<2, 5>(p, x, w, b, relu, y, u, scratch);
}

void Winograd5x5BackwardData(const WinogradPass& p, const float* dy, const float* mask,
                             const float* w, float* dx, AlignedBuffer& u, AlignedBuffer& scratch)
{
    winograd::backwardData<2, 5>(p, dy, mask, w, dx, u, scratch);
}

void Winograd5x5BackwardWeights(const WinogradPass& p, const float* x, const float* dy,
                                const float* mask, float* dw, float* db, AlignedBuffer& scratch)
{
    winograd::backwardWeights<2, 5>(p, x, dy, mask, dw, db, scratch);
}

std::int64_t Winograd5x5Target()
{
    return HWY_TARGET;
}

int Winograd5x5VectorFlops()
{
    return winograd::vectorFlops();
}

} // namespace HWY_NAMESPACE
} // namespace towers::engine::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace towers::engine::cpu {

HWY_EXPORT(Winograd5x5Forward);
HWY_EXPORT(Winograd5x5BackwardData);
HWY_EXPORT(Winograd5x5BackwardWeights);
HWY_EXPORT(Winograd5x5Target);
HWY_EXPORT(Winograd5x5VectorFlops);

bool Winograd5x5::supports(const Conv2dDesc& d)
{
    const Window2d& g = d.win;
    return g.kh == 5 && g.kw == 5 && g.sh == 1 && g.sw == 1;
}

std::int64_t Winograd5x5::target()
{
    return HWY_DYNAMIC_DISPATCH(Winograd5x5Target)();
}

std::string Winograd5x5::targetName()
{
    return hwy::TargetName(target());
}

int Winograd5x5::vectorFlops()
{
    return HWY_DYNAMIC_DISPATCH(Winograd5x5VectorFlops)();
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

void Winograd5x5::forward(const float* x, const float* w, const float* b, bool relu, float* y)
{
    HWY_DYNAMIC_DISPATCH(Winograd5x5Forward)(m_forward, x, w, b, relu, y, m_u, m_scratch);
}

void Winograd5x5::backwardData(const float* dy, const float* mask, const float* w, float* dx)
{
    HWY_DYNAMIC_DISPATCH(Winograd5x5BackwardData)(m_backward, dy, mask, w, dx, m_u, m_scratch);
}

void Winograd5x5::backwardWeights(const float* x, const float* dy, const float* mask, float* dw,
                                  float* db)
{
    HWY_DYNAMIC_DISPATCH(Winograd5x5BackwardWeights)(m_forward, x, dy, mask, dw, db, m_scratch);
}

std::string Winograd5x5::algorithm() const
{
    return "winograd 5x5";
}

std::string Winograd5x5::implementation() const
{
    return "towers:winograd5x5:" + targetName();
}

} // namespace towers::engine::cpu
#endif // HWY_ONCE
