// Reference max and average pooling over NHWC. Max pooling's workspace holds, for every output
// element, the flat index into x of the element that won (Int32, shaped like y), so backward just
// routes dy there. Average pooling divides by the window's real elements (pads do not count).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "engine/reference/reference_ops.h"

namespace towers::engine::reference {

namespace {

template <class T> void forward(const Window2d& g, const Tensor& x, Tensor& y, Tensor& argmax)
{
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    std::int32_t* ap = argmax.data<std::int32_t>();
    for (std::int64_t n = 0; n < g.n; ++n)
        for (std::int64_t oy = 0; oy < g.oh; ++oy)
            for (std::int64_t ox = 0; ox < g.ow; ++ox)
                for (std::int64_t c = 0; c < g.c; ++c) {
                    // Padded positions are skipped, i.e. they count as -infinity; the geometry
                    // guarantees every window holds at least one real element.
                    std::int64_t best = -1;
                    for (int i = 0; i < g.kh; ++i) {
                        const std::int64_t iy = oy * g.sh - g.padTop + i;
                        if (iy < 0 || iy >= g.h) continue;
                        for (int j = 0; j < g.kw; ++j) {
                            const std::int64_t ix = ox * g.sw - g.padLeft + j;
                            if (ix < 0 || ix >= g.w) continue;
                            const std::int64_t k = ((n * g.h + iy) * g.w + ix) * g.c + c;
                            // Strictly greater: the first maximum in scan order wins a tie.
                            if (best < 0 || xp[k] > xp[best]) best = k;
                        }
                    }
                    const std::int64_t out = ((n * g.oh + oy) * g.ow + ox) * g.c + c;
                    if (best < 0)
                        throw ShapeError("max pool window without a real element: " + g.str());
                    yp[out] = xp[best];
                    ap[out] = static_cast<std::int32_t>(best);
                }
}

template <class T> void backward(const Tensor& dy, const Tensor& argmax, Tensor& dx)
{
    const T* dyp = dy.data<T>();
    const std::int32_t* ap = argmax.data<std::int32_t>();
    const std::int64_t nx = dx.numel();
    // Overlapping windows can pick the same element, hence a sum (in double, as everywhere here).
    std::vector<double> acc(static_cast<std::size_t>(nx), 0.0);
    for (std::int64_t k = 0; k < dy.numel(); ++k) {
        const std::int64_t src = ap[k];
        if (src < 0 || src >= nx)
            throw InvalidArgument("max pool workspace holds an index outside x; it does not come "
                                  "from maxPoolForward with this descriptor");
        acc[static_cast<std::size_t>(src)] += static_cast<double>(dyp[k]);
    }
    T* dxp = dx.data<T>();
    for (std::int64_t k = 0; k < nx; ++k) dxp[k] = static_cast<T>(acc[static_cast<std::size_t>(k)]);
}

// The real (not padded) rows [y0, y1) and columns [x0, x1) of output (oy, ox)'s window.
struct WindowSpan
{
    std::int64_t y0, y1, x0, x1;
    std::int64_t count() const { return (y1 - y0) * (x1 - x0); }
};

WindowSpan spanOf(const Window2d& g, std::int64_t oy, std::int64_t ox)
{
    const std::int64_t top = oy * g.sh - g.padTop, left = ox * g.sw - g.padLeft;
    WindowSpan s{std::max<std::int64_t>(top, 0), std::min<std::int64_t>(top + g.kh, g.h),
                 std::max<std::int64_t>(left, 0), std::min<std::int64_t>(left + g.kw, g.w)};
    if (s.y1 <= s.y0 || s.x1 <= s.x0)
        throw ShapeError("average pool window without a real element: " + g.str());
    return s;
}

template <class T> void avgForward(const Window2d& g, const Tensor& x, Tensor& y)
{
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    for (std::int64_t n = 0; n < g.n; ++n)
        for (std::int64_t oy = 0; oy < g.oh; ++oy)
            for (std::int64_t ox = 0; ox < g.ow; ++ox) {
                const WindowSpan s = spanOf(g, oy, ox);
                for (std::int64_t c = 0; c < g.c; ++c) {
                    double sum = 0;
                    for (std::int64_t iy = s.y0; iy < s.y1; ++iy)
                        for (std::int64_t ix = s.x0; ix < s.x1; ++ix)
                            sum += static_cast<double>(xp[((n * g.h + iy) * g.w + ix) * g.c + c]);
                    yp[((n * g.oh + oy) * g.ow + ox) * g.c + c] =
                        static_cast<T>(sum / static_cast<double>(s.count()));
                }
            }
}

template <class T> void avgBackward(const Window2d& g, const Tensor& dy, Tensor& dx)
{
    const T* dyp = dy.data<T>();
    std::vector<double> acc(static_cast<std::size_t>(dx.numel()), 0.0);
    for (std::int64_t n = 0; n < g.n; ++n)
        for (std::int64_t oy = 0; oy < g.oh; ++oy)
            for (std::int64_t ox = 0; ox < g.ow; ++ox) {
                const WindowSpan s = spanOf(g, oy, ox);
                for (std::int64_t c = 0; c < g.c; ++c) {
                    const double share =
                        static_cast<double>(dyp[((n * g.oh + oy) * g.ow + ox) * g.c + c]) /
                        static_cast<double>(s.count());
                    for (std::int64_t iy = s.y0; iy < s.y1; ++iy)
                        for (std::int64_t ix = s.x0; ix < s.x1; ++ix)
                            acc[static_cast<std::size_t>(((n * g.h + iy) * g.w + ix) * g.c + c)] +=
                                share;
                }
            }
    T* dxp = dx.data<T>();
    for (std::size_t k = 0; k < acc.size(); ++k) dxp[k] = static_cast<T>(acc[k]);
}

} // namespace

void ReferenceOps::avgPoolForwardImpl(const Pool2dDesc& d, const Tensor& x, Tensor& y)
{
    Tensor::ensure(y, d.outputShape(), x.dtype());
    if (x.dtype() == DType::Float64)
        avgForward<double>(d.win, x, y);
    else
        avgForward<float>(d.win, x, y);
}

void ReferenceOps::avgPoolBackwardImpl(const Pool2dDesc& d, const Tensor& dy, Tensor& dx)
{
    Tensor::ensure(dx, d.inputShape(), dy.dtype());
    if (dy.dtype() == DType::Float64)
        avgBackward<double>(d.win, dy, dx);
    else
        avgBackward<float>(d.win, dy, dx);
}

void ReferenceOps::maxPoolForwardImpl(const Pool2dDesc& d, const Tensor& x, Tensor& y,
                                      Tensor& workspace)
{
    if (x.numel() > std::numeric_limits<std::int32_t>::max())
        throw Unsupported("reference max pool: input too large for int32 indices");
    Tensor::ensure(y, d.outputShape(), x.dtype());
    Tensor::ensure(workspace, d.outputShape(), DType::Int32);
    if (x.dtype() == DType::Float64)
        forward<double>(d.win, x, y, workspace);
    else
        forward<float>(d.win, x, y, workspace);
}

void ReferenceOps::maxPoolBackwardImpl(const Pool2dDesc& d, const Tensor& x, const Tensor& /*y*/,
                                       const Tensor& dy, const Tensor& workspace, Tensor& dx)
{
    requireDType(workspace, DType::Int32, "max pool workspace");
    requireShape(workspace, d.outputShape(), "max pool workspace");
    Tensor::ensure(dx, d.inputShape(), x.dtype());
    if (x.dtype() == DType::Float64)
        backward<double>(dy, workspace, dx);
    else
        backward<float>(dy, workspace, dx);
}

} // namespace towers::engine::reference
