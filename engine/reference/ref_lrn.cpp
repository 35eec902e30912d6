// Reference local response normalisation across channels, TensorFlow's semantics (LrnDesc):
//   s[c] = bias + alpha * sum_{c' in [c-r, c+r], clipped to [0, C)} x[c']^2
//   y[c] = x[c] * s[c]^-beta
// and its gradient (c's window contains j exactly when j's window contains c)
//   dx[j] = dy[j] s[j]^-beta - 2 alpha beta x[j] sum_{c in [j-r, j+r]} dy[c] x[c] s[c]^(-beta-1)
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/reference/reference_ops.h"

namespace towers::engine::reference {

namespace {

// s[c] for the C channels of one pixel, in double.
template <class T> void scales(const LrnDesc& d, const T* x, std::int64_t channels, double* s)
{
    for (std::int64_t c = 0; c < channels; ++c) {
        const std::int64_t lo = std::max<std::int64_t>(0, c - d.depthRadius);
        const std::int64_t hi = std::min<std::int64_t>(channels - 1, c + d.depthRadius);
        double sum = 0;
        for (std::int64_t k = lo; k <= hi; ++k)
            sum += static_cast<double>(x[k]) * static_cast<double>(x[k]);
        s[c] = d.bias + d.alpha * sum;
    }
}

template <class T> void forward(const LrnDesc& d, const Tensor& x, Tensor& y, Tensor& saved)
{
    const std::int64_t channels = d.shape[3];
    const std::int64_t pixels = x.numel() / channels;
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    T* sp = saved.data<T>();
    std::vector<double> s(static_cast<std::size_t>(channels));
    for (std::int64_t p = 0; p < pixels; ++p) {
        const std::int64_t base = p * channels;
        scales(d, xp + base, channels, s.data());
        for (std::int64_t c = 0; c < channels; ++c) {
            const double sc = s[static_cast<std::size_t>(c)];
            yp[base + c] =
                static_cast<T>(static_cast<double>(xp[base + c]) * std::pow(sc, -d.beta));
            sp[base + c] = static_cast<T>(sc);
        }
    }
}

template <class T> void backward(const LrnDesc& d, const Tensor& x, const Tensor& dy, Tensor& dx)
{
    const std::int64_t channels = d.shape[3];
    const std::int64_t pixels = x.numel() / channels;
    const T* xp = x.data<T>();
    const T* dyp = dy.data<T>();
    T* dxp = dx.data<T>();
    std::vector<double> s(static_cast<std::size_t>(channels));
    std::vector<double> t(static_cast<std::size_t>(channels)); // dy[c] x[c] s[c]^(-beta-1)
    for (std::int64_t p = 0; p < pixels; ++p) {
        const std::int64_t base = p * channels;
        // Recomputed from x in double rather than read from the workspace, so the oracle does not
        // inherit the rounding of a float32 saved scale.
        scales(d, xp + base, channels, s.data());
        for (std::int64_t c = 0; c < channels; ++c) {
            const auto i = static_cast<std::size_t>(c);
            t[i] = static_cast<double>(dyp[base + c]) * static_cast<double>(xp[base + c]) *
                   std::pow(s[i], -d.beta - 1);
        }
        for (std::int64_t j = 0; j < channels; ++j) {
            const std::int64_t lo = std::max<std::int64_t>(0, j - d.depthRadius);
            const std::int64_t hi = std::min<std::int64_t>(channels - 1, j + d.depthRadius);
            double sum = 0;
            for (std::int64_t c = lo; c <= hi; ++c) sum += t[static_cast<std::size_t>(c)];
            const double xj = static_cast<double>(xp[base + j]);
            const double v = static_cast<double>(dyp[base + j]) *
                                 std::pow(s[static_cast<std::size_t>(j)], -d.beta) -
                             2 * d.alpha * d.beta * xj * sum;
            dxp[base + j] = static_cast<T>(v);
        }
    }
}

} // namespace

void ReferenceOps::lrnForwardImpl(const LrnDesc& d, const Tensor& x, Tensor& y, Tensor& workspace)
{
    Tensor::ensure(y, d.shape, x.dtype());
    // The workspace keeps s (x's dtype and shape), as a backend with a saved scale would.
    Tensor::ensure(workspace, d.shape, x.dtype());
    if (x.dtype() == DType::Float64)
        forward<double>(d, x, y, workspace);
    else
        forward<float>(d, x, y, workspace);
}

void ReferenceOps::lrnBackwardImpl(const LrnDesc& d, const Tensor& x, const Tensor& /*y*/,
                                   const Tensor& dy, const Tensor& workspace, Tensor& dx)
{
    requireDType(workspace, x.dtype(), "lrn workspace");
    requireShape(workspace, d.shape, "lrn workspace");
    Tensor::ensure(dx, d.shape, x.dtype());
    if (x.dtype() == DType::Float64)
        backward<double>(d, x, dy, dx);
    else
        backward<float>(d, x, dy, dx);
}

} // namespace towers::engine::reference
