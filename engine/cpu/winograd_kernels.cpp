// Towers' Winograd kernels for both sizes, F(2x2, 5x5) and F(4x4, 3x3): the one template of
// winograd_tiles-inl.h instantiated for each (m, r), compiled by foreach_target for every x86-64
// instruction set Highway knows (AVX-512, AVX2, SSE4, SSSE3 and the portable baseline, SCALAR or
// EMU128); each call runs on the target Highway dispatches to then. WinogradConv (winograd_tiles.h)
// is what calls them; Winograd5x5 and Winograd3x3 add only each size's geometry and policy.
#include "engine/cpu/winograd_tiles.h"

#include <omp.h>

#include <algorithm>

#include "engine/cpu/cores.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "engine/cpu/winograd_kernels.cpp"
#include <hwy/foreach_target.h> // before highway.h
#include <hwy/highway.h>

#include "engine/cpu/winograd_tiles-inl.h"

// The three passes of F(M x M, R x R) on the target being compiled.
#define TOWERS_WINOGRAD_SIZE(M, R)                                                                 \
    void WinogradForward##R(const WinogradPass& p, const float* x, const float* w, const float* b, \
                            bool relu, float* y, AlignedBuffer& u, AlignedBuffer& scratch)         \
    {                                                                                              \
        winograd::forward<M, R>(p, x, w, b, relu, y, u, scratch);                                  \
    }                                                                                              \
    void WinogradBackwardData##R(const WinogradPass& p, const float* dy, const float* mask,        \
                                 const float* w, float* dx, AlignedBuffer& u,                      \
                                 AlignedBuffer& scratch)                                           \
    {                                                                                              \
        winograd::backwardData<M, R>(p, dy, mask, w, dx, u, scratch);                              \
    }                                                                                              \
    void WinogradBackwardWeights##R(const WinogradPass& p, const float* x, const float* dy,        \
                                    const float* mask, float* dw, float* db,                       \
                                    AlignedBuffer& scratch)                                        \
    {                                                                                              \
        winograd::backwardWeights<M, R>(p, x, dy, mask, dw, db, scratch);                          \
    }

HWY_BEFORE_NAMESPACE();
namespace towers::engine::cpu {
namespace HWY_NAMESPACE {

TOWERS_WINOGRAD_SIZE(2, 5)
TOWERS_WINOGRAD_SIZE(4, 3)

std::int64_t WinogradTarget()
{
    return HWY_TARGET;
}

int WinogradVectorFlops()
{
    return winograd::vectorFlops();
}

} // namespace HWY_NAMESPACE
} // namespace towers::engine::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace towers::engine::cpu {

HWY_EXPORT(WinogradForward5);
HWY_EXPORT(WinogradBackwardData5);
HWY_EXPORT(WinogradBackwardWeights5);
HWY_EXPORT(WinogradForward3);
HWY_EXPORT(WinogradBackwardData3);
HWY_EXPORT(WinogradBackwardWeights3);
HWY_EXPORT(WinogradTarget);
HWY_EXPORT(WinogradVectorFlops);

std::int64_t WinogradConv::target()
{
    return HWY_DYNAMIC_DISPATCH(WinogradTarget)();
}

std::string WinogradConv::targetName()
{
    return hwy::TargetName(target());
}

int WinogradConv::vectorFlops()
{
    return HWY_DYNAMIC_DISPATCH(WinogradVectorFlops)();
}

std::int64_t WinogradConv::streamAboveBytes()
{
    static const std::int64_t lastLevel = levelThreeCacheBytes();
    return std::max(levelTwoCacheBytes() * omp_get_max_threads(), lastLevel / 2);
}

bool WinogradConv::streamsOutput(const WinogradPass& p)
{
    return p.n * p.outH * p.outW * p.outC * std::int64_t{sizeof(float)} > streamAboveBytes();
}

void WinogradConv::setStreaming(bool forward, bool backwardData)
{
    m_forward.streamOutput = forward;
    m_backward.streamOutput = backwardData;
}

void WinogradConv::forward(const float* x, const float* w, const float* b, bool relu, float* y)
{
    if (m_k == 5)
        HWY_DYNAMIC_DISPATCH(WinogradForward5)(m_forward, x, w, b, relu, y, m_u, m_scratch);
    else
        HWY_DYNAMIC_DISPATCH(WinogradForward3)(m_forward, x, w, b, relu, y, m_u, m_scratch);
}

void WinogradConv::backwardData(const float* dy, const float* mask, const float* w, float* dx)
{
    if (m_k == 5)
        HWY_DYNAMIC_DISPATCH(WinogradBackwardData5)(m_backward, dy, mask, w, dx, m_u, m_scratch);
    else
        HWY_DYNAMIC_DISPATCH(WinogradBackwardData3)(m_backward, dy, mask, w, dx, m_u, m_scratch);
}

void WinogradConv::backwardWeights(const float* x, const float* dy, const float* mask, float* dw,
                                   float* db)
{
    if (m_k == 5)
        HWY_DYNAMIC_DISPATCH(WinogradBackwardWeights5)(m_forward, x, dy, mask, dw, db, m_scratch);
    else
        HWY_DYNAMIC_DISPATCH(WinogradBackwardWeights3)(m_forward, x, dy, mask, dw, db, m_scratch);
}

std::string WinogradConv::algorithm() const
{
    const std::string k = std::to_string(m_k);
    return "winograd " + k + "x" + k;
}

std::string WinogradConv::implementation() const
{
    const std::string k = std::to_string(m_k);
    return "towers:winograd" + k + "x" + k + ":" + targetName();
}

} // namespace towers::engine::cpu
#endif // HWY_ONCE
