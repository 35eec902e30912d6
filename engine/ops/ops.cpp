// The default implementations of the composite calls of Ops: each is the sequence of single-step
// calls that defines its meaning (and is the reference the fused backends are tested against).
#include "engine/ops/ops.h"

namespace towers::engine {

namespace {

// What every layer with a fused activation does in backward: dy through the activation, then the
// parameter gradients from the masked gradient, then the input gradient from it.
template <class Weights, class Data>
void throughActivation(Ops& ops, Activation act, const Tensor& y, const Tensor& dy,
                       const Weights& weights, const Data& data)
{
    Tensor masked;
    const Tensor* g = &dy;
    if (act == Activation::Relu) {
        ops.reluBackward(y, dy, masked);
        g = &masked;
    }
    weights(*g);
    data(*g);
}

} // namespace

void Ops::upload(const Tensor& src, Tensor& dst)
{
    Tensor::ensure(dst, src.shape(), src.dtype(), device());
    dst.copyFrom(src);
}

void Ops::conv2dForwardTraining(const Conv2dDesc& d, const Tensor& x, const Tensor& w,
                                const Tensor& b, Tensor& y, Activation act, Tensor& saved)
{
    conv2dForward(d, x, w, b, y, act);
    saved = Tensor();
}

void Ops::conv2dBackward(const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& y,
                         const Tensor& dy, Activation act, const Tensor& saved, Tensor* dx,
                         Tensor& dw, Tensor* db)
{
    (void)saved;
    throughActivation(
        *this, act, y, dy, [&](const Tensor& g) { conv2dBackwardWeights(d, x, g, dw, db); },
        [&](const Tensor& g) {
            if (dx) conv2dBackwardData(d, g, w, *dx);
        });
}

void Ops::linearBackward(const Tensor& x, const Tensor& w, const Tensor& y, const Tensor& dy,
                         Activation act, Tensor* dx, Tensor& dw, Tensor* db)
{
    throughActivation(
        *this, act, y, dy, [&](const Tensor& g) { linearBackwardWeights(x, g, dw, db); },
        [&](const Tensor& g) {
            if (dx) linearBackwardData(g, w, *dx);
        });
}

} // namespace towers::engine
