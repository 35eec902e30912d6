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

// n (<= a vector's lanes) bfloat16 values (uint16 bits) from p as float32 (exact: a bfloat16 is a
// float32's upper half), zeros after them. Evaluation's bfloat16 images (ExecContext::
// bf16Activations) in Towers' kernels.
template <class D>
HWY_INLINE hwy::HWY_NAMESPACE::Vec<D> loadBf16(D d, const std::uint16_t* p, std::int64_t n)
{
    namespace hn = hwy::HWY_NAMESPACE;
    const hn::Rebind<std::uint16_t, D> du16;
    const hn::Rebind<std::uint32_t, D> du32;
    hn::Vec<decltype(du16)> half;
    if (n >= static_cast<std::int64_t>(hn::Lanes(d))) {
        half = hn::LoadU(du16, p);
    } else {
        HWY_ALIGN std::uint16_t part[hn::MaxLanes(decltype(du16)())] = {};
        std::memcpy(part, p, static_cast<std::size_t>(n) * sizeof(std::uint16_t));
        half = hn::Load(du16, part);
    }
    return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(du32, half)));
}
// The converse store of n lanes' upper halves: exact for values bfloat16 holds (a maximum of
// bfloat16 inputs). storeBf16Rounded rounds any float32 to nearest even first (a NaN stays one).
template <class D>
HWY_INLINE void storeBf16(D d, hwy::HWY_NAMESPACE::Vec<D> v, std::uint16_t* p, std::int64_t n)
{
    namespace hn = hwy::HWY_NAMESPACE;
    const hn::Rebind<std::uint16_t, D> du16;
    // The upper halves, below 2^16 as int32 (Highway 1.0 demotes signed lanes to uint16).
    const auto upper = hn::ShiftRight<16>(hn::BitCast(hn::Rebind<std::uint32_t, D>(), v));
    const auto half = hn::DemoteTo(du16, hn::BitCast(hn::Rebind<std::int32_t, D>(), upper));
    if (n >= static_cast<std::int64_t>(hn::Lanes(d))) {
        hn::StoreU(half, du16, p);
        return;
    }
    HWY_ALIGN std::uint16_t part[hn::MaxLanes(decltype(du16)())];
    hn::Store(half, du16, part);
    std::memcpy(p, part, static_cast<std::size_t>(n) * sizeof(std::uint16_t));
}
template <class D>
HWY_INLINE void storeBf16Rounded(D d, hwy::HWY_NAMESPACE::Vec<D> v, std::uint16_t* p,
                                 std::int64_t n)
{
    namespace hn = hwy::HWY_NAMESPACE;
    const hn::Rebind<std::uint32_t, D> du32;
    const auto bits = hn::BitCast(du32, v);
    const auto lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(du32, 1u));
    const auto rounded = hn::Add(bits, hn::Add(hn::Set(du32, 0x7FFFu), lsb));
    // A NaN keeps its upper half, made quiet, whatever its lower half would carry into.
    const auto quietNan = hn::Or(bits, hn::Set(du32, 0x400000u));
    const auto nan = hn::Ne(v, v);
    const auto out = hn::IfThenElse(hn::RebindMask(du32, nan), quietNan, rounded);
    storeBf16(d, hn::BitCast(d, out), p, n);
}

// A row's n channels by element type, for kernels written once for both: float32 as it is,
// bfloat16 (uint16 bits) as float32, stored rounded to nearest even (which leaves a value
// bfloat16 holds, a maximum of bfloat16 inputs, as it is).
template <class D>
HWY_INLINE hwy::HWY_NAMESPACE::Vec<D> loadRow(D d, const float* p, std::int64_t n)
{
    return loadChannels(d, p, n);
}
template <class D>
HWY_INLINE hwy::HWY_NAMESPACE::Vec<D> loadRow(D d, const std::uint16_t* p, std::int64_t n)
{
    return loadBf16(d, p, n);
}
template <class D>
HWY_INLINE void storeRow(D d, hwy::HWY_NAMESPACE::Vec<D> v, float* p, std::int64_t n)
{
    storeChannels(d, v, p, n);
}
template <class D>
HWY_INLINE void storeRow(D d, hwy::HWY_NAMESPACE::Vec<D> v, std::uint16_t* p, std::int64_t n)
{
    storeBf16Rounded(d, v, p, n);
}

} // namespace HWY_NAMESPACE
} // namespace towers::engine::cpu
HWY_AFTER_NAMESPACE();

#endif // TOWERS_ENGINE_CPU_HWY_CHANNELS_INL_H_
