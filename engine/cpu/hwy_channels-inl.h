// Private to engine/cpu: loads and stores of a row's channels in whole vectors with a zero-filled
// partial vector at the tail, for Towers' Highway kernels (lrn_hwy.cpp, pool_hwy.cpp,
// winograd_5x5.cpp).
// Included once per target from inside foreach_target, as Highway's -inl.h headers are: the guard
// toggles with HWY_TARGET_TOGGLE so that each target gets its own copy in its HWY_NAMESPACE.
#if defined(TOWERS_ENGINE_CPU_HWY_CHANNELS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TOWERS_ENGINE_CPU_HWY_CHANNELS_INL_H_
#undef TOWERS_ENGINE_CPU_HWY_CHANNELS_INL_H_
#else
#define TOWERS_ENGINE_CPU_HWY_CHANNELS_INL_H_
#endif

#include <cstdint>
#include <cstring>

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace towers::engine::cpu {
namespace HWY_NAMESPACE {

// n (< a vector) floats from p, zeros after them; and the converse store of n lanes. Out of line:
// they run once per row tail, away from the hot loops.
template <class D>
HWY_NOINLINE hwy::HWY_NAMESPACE::Vec<D> loadPart(D d, const float* p, std::int64_t n)
{
    HWY_ALIGN float part[hwy::HWY_NAMESPACE::MaxLanes(D())] = {};
    std::memcpy(part, p, static_cast<std::size_t>(n) * sizeof(float));
    return hwy::HWY_NAMESPACE::Load(d, part);
}
template <class D>
HWY_NOINLINE void storePart(D d, hwy::HWY_NAMESPACE::Vec<D> v, float* p, std::int64_t n)
{
    HWY_ALIGN float part[hwy::HWY_NAMESPACE::MaxLanes(D())];
    hwy::HWY_NAMESPACE::Store(v, d, part);
    std::memcpy(p, part, static_cast<std::size_t>(n) * sizeof(float));
}

// The n channels from p: a whole vector when n >= Lanes, else the last n and zeros; and the
// converse store, which never writes past p + n.
template <class D>
HWY_INLINE hwy::HWY_NAMESPACE::Vec<D> loadChannels(D d, const float* p, std::int64_t n)
{
    return n >= static_cast<std::int64_t>(hwy::HWY_NAMESPACE::Lanes(d))
               ? hwy::HWY_NAMESPACE::LoadU(d, p)
               : loadPart(d, p, n);
}
template <class D>
HWY_INLINE void storeChannels(D d, hwy::HWY_NAMESPACE::Vec<D> v, float* p, std::int64_t n)
{
    if (n >= static_cast<std::int64_t>(hwy::HWY_NAMESPACE::Lanes(d)))
        hwy::HWY_NAMESPACE::StoreU(v, d, p);
    else
        storePart(d, v, p, n);
}

} // namespace HWY_NAMESPACE
} // namespace towers::engine::cpu
HWY_AFTER_NAMESPACE();

#endif // TOWERS_ENGINE_CPU_HWY_CHANNELS_INL_H_
