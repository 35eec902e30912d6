// The Adam(W) update (optim_hwy.h), compiled once per instruction set by Highway's
// foreach_target.
#include "engine/cpu/optim_hwy.h"

#include <algorithm>
#include <cstddef>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "engine/cpu/optim_hwy.cpp"
#include <hwy/foreach_target.h> // before highway.h
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace towers::engine::cpu {
namespace HWY_NAMESPACE {
namespace {

namespace hn = hwy::HWY_NAMESPACE;
using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

// One vector of elements at g, m, v, w: the same operations, in the same order, as the scalar
// formula of optim_hwy.h.
struct AdamVectors
{
    explicit AdamVectors(D d, const AdamConstants& k)
        : beta1(hn::Set(d, k.beta1)), beta2(hn::Set(d, k.beta2)),
          oneMinusBeta1(hn::Set(d, k.oneMinusBeta1)), oneMinusBeta2(hn::Set(d, k.oneMinusBeta2)),
          epsilon(hn::Set(d, k.epsilon)), stepSize(hn::Set(d, k.stepSize)),
          correction2Sqrt(hn::Set(d, k.correction2Sqrt)), keep(hn::Set(d, k.keep))
    {
    }

    void update(D d, const float* g, float* m, float* v, float* w) const
    {
        const V gi = hn::LoadU(d, g);
        const V mi = hn::Add(hn::Mul(hn::LoadU(d, m), beta1), hn::Mul(oneMinusBeta1, gi));
        const V vi = hn::Add(hn::Mul(hn::LoadU(d, v), beta2), hn::Mul(oneMinusBeta2, hn::Mul(gi, gi)));
        hn::StoreU(mi, d, m);
        hn::StoreU(vi, d, v);
        const V wi = hn::Mul(hn::LoadU(d, w), keep); // PyTorch's param.mul_, then its addcdiv_
        const V denom = hn::Add(hn::Div(hn::Sqrt(vi), correction2Sqrt), epsilon);
        hn::StoreU(hn::Sub(wi, hn::Mul(stepSize, hn::Div(mi, denom))), d, w);
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
    std::int64_t i = begin;
    for (; i + lanes <= end; i += lanes) a.update(d, g + i, m + i, v + i, w + i);
    if (i == end) return;
    // The last partial vector through copies of one whole vector each (zeros past the end, whose
    // results are dropped): the same arithmetic as every other element.
    const auto n = static_cast<std::size_t>(end - i);
    HWY_ALIGN float tg[hn::MaxLanes(d)] = {}, tm[hn::MaxLanes(d)] = {}, tv[hn::MaxLanes(d)] = {},
                    tw[hn::MaxLanes(d)] = {};
    std::copy_n(g + i, n, tg);
    std::copy_n(m + i, n, tm);
    std::copy_n(v + i, n, tv);
    std::copy_n(w + i, n, tw);
    a.update(d, tg, tm, tv, tw);
    std::copy_n(tm, n, m + i);
    std::copy_n(tv, n, v + i);
    std::copy_n(tw, n, w + i);
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
