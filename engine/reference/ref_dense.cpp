// Fully connected layer: plain triple loops accumulating in double.
#include <algorithm>

#include "engine/ops/op_checks.h"
#include "engine/reference/ref_common.h"

namespace towers::engine::reference {

void ReferenceOps::linearForwardImpl(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y,
                                     Activation act)
{
    const auto d = checks::linearForward(x, w);
    Tensor::ensure(y, {d.n, d.out}, x.dtype());
    byDType(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* px = x.data<T>();
        const T* pw = w.data<T>();
        const T* pb = b.empty() ? nullptr : b.data<T>();
        T* py = y.data<T>();
        for (std::int64_t n = 0; n < d.n; ++n)
            for (std::int64_t o = 0; o < d.out; ++o) {
                double s = pb ? pb[o] : 0.0;
                for (std::int64_t i = 0; i < d.in; ++i)
                    s += double(px[n * d.in + i]) * double(pw[o * d.in + i]);
                if (act == Activation::Relu) s = std::max(s, 0.0);
                py[n * d.out + o] = static_cast<T>(s);
            }
    });
}

void ReferenceOps::linearBackwardDataImpl(const Tensor& dy, const Tensor& w, Tensor& dx)
{
    const auto d = checks::linearBackwardData(dy, w);
    Tensor::ensure(dx, {d.n, d.in}, dy.dtype());
    byDType(dy.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* pdy = dy.data<T>();
        const T* pw = w.data<T>();
        T* pdx = dx.data<T>();
        for (std::int64_t n = 0; n < d.n; ++n)
            for (std::int64_t i = 0; i < d.in; ++i) {
                double s = 0;
                for (std::int64_t o = 0; o < d.out; ++o)
                    s += double(pdy[n * d.out + o]) * double(pw[o * d.in + i]);
                pdx[n * d.in + i] = static_cast<T>(s);
            }
    });
}

void ReferenceOps::linearBackwardWeightsImpl(const Tensor& x, const Tensor& dy, Tensor& dw,
                                             Tensor* db)
{
    const auto d = checks::linearBackwardWeights(x, dy);
    Tensor::ensure(dw, {d.out, d.in}, x.dtype());
    if (db) Tensor::ensure(*db, {d.out}, x.dtype());
    byDType(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* px = x.data<T>();
        const T* pdy = dy.data<T>();
        T* pdw = dw.data<T>();
        for (std::int64_t o = 0; o < d.out; ++o)
            for (std::int64_t i = 0; i < d.in; ++i) {
                double s = 0;
                for (std::int64_t n = 0; n < d.n; ++n)
                    s += double(pdy[n * d.out + o]) * double(px[n * d.in + i]);
                pdw[o * d.in + i] = static_cast<T>(s);
            }
        if (db) {
            T* pdb = db->data<T>();
            for (std::int64_t o = 0; o < d.out; ++o) {
                double s = 0;
                for (std::int64_t n = 0; n < d.n; ++n) s += pdy[n * d.out + o];
                pdb[o] = static_cast<T>(s);
            }
        }
    });
}

} // namespace towers::engine::reference
