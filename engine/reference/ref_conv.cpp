// Reference 2-D convolution: x NHWC, w OIHW, y NHWC. All three directions visit the same
// (output pixel, kernel tap) pairs through forEachTap, so backward is visibly the transpose of
// forward; sums are accumulated in double and rounded once.
#include <vector>

#include "engine/reference/reference_ops.h"

namespace towers::engine::reference {

namespace {

// Calls f(xPixel, yPixel, i, j) for every kernel tap (i, j) of every output pixel whose input
// pixel lies inside the image: padded positions contribute zero, so they are simply skipped.
// Pixels are flat indices into [N, H, W] and [N, OH, OW].
template <class F> void forEachTap(const Window2d& g, F&& f)
{
    for (std::int64_t n = 0; n < g.n; ++n)
        for (std::int64_t oy = 0; oy < g.oh; ++oy)
            for (std::int64_t ox = 0; ox < g.ow; ++ox) {
                const std::int64_t yPixel = (n * g.oh + oy) * g.ow + ox;
                for (int i = 0; i < g.kh; ++i) {
                    const std::int64_t iy = oy * g.sh - g.padTop + i;
                    if (iy < 0 || iy >= g.h) continue;
                    for (int j = 0; j < g.kw; ++j) {
                        const std::int64_t ix = ox * g.sw - g.padLeft + j;
                        if (ix < 0 || ix >= g.w) continue;
                        f((n * g.h + iy) * g.w + ix, yPixel, i, j);
                    }
                }
            }
}

// Index of w[o, c, i, j] in OIHW.
inline std::int64_t wIndex(const Window2d& g, std::int64_t o, std::int64_t c, int i, int j)
{
    return ((o * g.c + c) * g.kh + i) * g.kw + j;
}

template <class T> void store(const std::vector<double>& acc, Tensor& out)
{
    T* p = out.data<T>();
    for (std::size_t i = 0; i < acc.size(); ++i) p[i] = static_cast<T>(acc[i]);
}

template <class T>
void forward(const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y,
             Activation act)
{
    const Window2d& g = d.win;
    const std::int64_t outC = d.outChannels;
    const T* xp = x.data<T>();
    const T* wp = w.data<T>();
    std::vector<double> acc(static_cast<std::size_t>(y.numel()), 0.0);
    forEachTap(g, [&](std::int64_t xPixel, std::int64_t yPixel, int i, int j) {
        for (std::int64_t o = 0; o < outC; ++o) {
            double s = 0;
            for (std::int64_t c = 0; c < g.c; ++c)
                s += static_cast<double>(xp[xPixel * g.c + c]) *
                     static_cast<double>(wp[wIndex(g, o, c, i, j)]);
            acc[static_cast<std::size_t>(yPixel * outC + o)] += s;
        }
    });
    if (!b.empty()) {
        const T* bp = b.data<T>();
        for (std::size_t k = 0; k < acc.size(); ++k)
            acc[k] += static_cast<double>(bp[static_cast<std::int64_t>(k) % outC]);
    }
    if (act == Activation::Relu)
        for (double& v : acc) v = v > 0 ? v : 0;
    store<T>(acc, y);
}

template <class T>
void backwardData(const Conv2dDesc& d, const Tensor& dy, const Tensor& w, Tensor& dx)
{
    const Window2d& g = d.win;
    const std::int64_t outC = d.outChannels;
    const T* dyp = dy.data<T>();
    const T* wp = w.data<T>();
    std::vector<double> acc(static_cast<std::size_t>(dx.numel()), 0.0);
    forEachTap(g, [&](std::int64_t xPixel, std::int64_t yPixel, int i, int j) {
        for (std::int64_t o = 0; o < outC; ++o) {
            const double gy = static_cast<double>(dyp[yPixel * outC + o]);
            for (std::int64_t c = 0; c < g.c; ++c)
                acc[static_cast<std::size_t>(xPixel * g.c + c)] +=
                    gy * static_cast<double>(wp[wIndex(g, o, c, i, j)]);
        }
    });
    store<T>(acc, dx);
}

template <class T>
void backwardWeights(const Conv2dDesc& d, const Tensor& x, const Tensor& dy, Tensor& dw, Tensor* db)
{
    const Window2d& g = d.win;
    const std::int64_t outC = d.outChannels;
    const T* xp = x.data<T>();
    const T* dyp = dy.data<T>();
    std::vector<double> acc(static_cast<std::size_t>(dw.numel()), 0.0);
    forEachTap(g, [&](std::int64_t xPixel, std::int64_t yPixel, int i, int j) {
        for (std::int64_t o = 0; o < outC; ++o) {
            const double gy = static_cast<double>(dyp[yPixel * outC + o]);
            for (std::int64_t c = 0; c < g.c; ++c)
                acc[static_cast<std::size_t>(wIndex(g, o, c, i, j))] +=
                    gy * static_cast<double>(xp[xPixel * g.c + c]);
        }
    });
    store<T>(acc, dw);
    if (db) {
        std::vector<double> bacc(static_cast<std::size_t>(outC), 0.0);
        for (std::int64_t k = 0; k < dy.numel(); ++k)
            bacc[static_cast<std::size_t>(k % outC)] += static_cast<double>(dyp[k]);
        store<T>(bacc, *db);
    }
}

} // namespace

void ReferenceOps::conv2dForwardImpl(const Conv2dDesc& d, const Tensor& x, const Tensor& w,
                                     const Tensor& b, Tensor& y, Activation act)
{
    if (!b.empty()) {
    }
    Tensor::ensure(y, d.outputShape(), x.dtype());
    if (x.dtype() == DType::Float64)
        forward<double>(d, x, w, b, y, act);
    else
        forward<float>(d, x, w, b, y, act);
}

void ReferenceOps::conv2dBackwardDataImpl(const Conv2dDesc& d, const Tensor& dy, const Tensor& w,
                                          Tensor& dx)
{
    Tensor::ensure(dx, d.inputShape(), dy.dtype());
    if (dy.dtype() == DType::Float64)
        backwardData<double>(d, dy, w, dx);
    else
        backwardData<float>(d, dy, w, dx);
}

void ReferenceOps::conv2dBackwardWeightsImpl(const Conv2dDesc& d, const Tensor& x, const Tensor& dy,
                                             Tensor& dw, Tensor* db)
{
    Tensor::ensure(dw, d.weightShape(), x.dtype());
    if (db) Tensor::ensure(*db, Shape{d.outChannels}, x.dtype());
    if (x.dtype() == DType::Float64)
        backwardWeights<double>(d, x, dy, dw, db);
    else
        backwardWeights<float>(d, x, dy, dw, db);
}

} // namespace towers::engine::reference
