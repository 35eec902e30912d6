// The Adam(W) update (optim_hwy.h), compiled once per instruction set by Highway's
// foreach_target.
#include "engine/cpu/optim_hwy.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "engine/cpu/optim_hwy.cpp"
#include <hwy/foreach_target.h> // before highway.h
#include <hwy/highway.h>

#include "engine/cpu/hwy_channels-inl.h"

HWY_BEFORE_NAMESPACE();
namespace towers::engine::cpu {
namespace HWY_NAMESPACE {
namespace {

namespace hn = hwy::HWY_NAMESPACE;
using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

// One vector of n elements at g, m, v, w (a whole vector when n >= Lanes, else a partial one
// padded with zeros whose results are dropped): the same operations, in the same order, as the
// scalar formula of optim_hwy.h.
struct AdamVectors
{
    explicit AdamVectors(D d, const AdamConstants& k)
        : beta1(hn::Set(d, k.beta1)), beta2(hn::Set(d, k.beta2)),
          oneMinusBeta1(hn::Set(d, k.oneMinusBeta1)), oneMinusBeta2(hn::Set(d, k.oneMinusBeta2)),
          epsilon(hn::Set(d, k.epsilon)), stepSize(hn::Set(d, k.stepSize)),
          correction2Sqrt(hn::Set(d, k.correction2Sqrt)), keep(hn::Set(d, k.keep))
    {
    }

    void update(D d, const float* g, float* m, float* v, float* w, std::int64_t n) const
    {
        const V gi = loadChannels(d, g, n);
        const V mi = hn::Add(hn::Mul(loadChannels(d, m, n), beta1), hn::Mul(oneMinusBeta1, gi));
        const V vi =
            hn::Add(hn::Mul(loadChannels(d, v, n), beta2), hn::Mul(oneMinusBeta2, hn::Mul(gi, gi)));
        storeChannels(d, mi, m, n);
        storeChannels(d, vi, v, n);
        // PyTorch's param.mul_, then its addcdiv_.
        const V wi = hn::Mul(loadChannels(d, w, n), keep);
        const V denom = hn::Add(hn::Div(hn::Sqrt(vi), correction2Sqrt), epsilon);
        storeChannels(d, hn::Sub(wi, hn::Mul(stepSize, hn::Div(mi, denom))), w, n);
    }

    V beta1, beta2, oneMinusBeta1, oneMinusBeta2, epsilon, stepSize, correction2Sqrt, keep;
};

} // namespace

void AdamRange(const AdamConstants& k, const float* g, float* m, float* v, float* w,
               std::int64_t begin, std::int64_t end)
{
    const D d;
    const AdamVectors a(d, k);
    const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
    // The last partial vector through hwy_channels-inl.h's zero-padded copies.
    for (std::int64_t i = begin; i < end; i += lanes)
        a.update(d, g + i, m + i, v + i, w + i, end - i);
}

} // namespace HWY_NAMESPACE
} // namespace towers::engine::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace towers::engine::cpu {

HWY_EXPORT(AdamRange);

void adamUpdateRange(const AdamConstants& k, const float* g, float* m, float* v, float* w,
                     std::int64_t begin, std::int64_t end)
{
    HWY_DYNAMIC_DISPATCH(AdamRange)(k, g, m, v, w, begin, end);
}

} // namespace towers::engine::cpu
#endif // HWY_ONCE
