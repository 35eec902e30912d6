#include "gradcheck.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace towers::test {

Tensor randomTensor(const Shape& shape, DType dtype, Rng& rng, double lo, double hi)
{
    Tensor t(shape, dtype);
    for (std::int64_t i = 0; i < t.numel(); ++i) t.setAt(i, rng.uniform(lo, hi));
    return t;
}

Tensor distinctTensor(const Shape& shape, DType dtype, Rng& rng, double gap)
{
    Tensor t(shape, dtype);
    const std::int64_t n = t.numel();
    std::vector<std::int64_t> order(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    for (std::int64_t i = n - 1; i > 0; --i)
        std::swap(order[static_cast<std::size_t>(i)], order[rng.below(static_cast<std::uint64_t>(i + 1))]);
    // A ramp centred on zero with steps of 3 * gap, jittered by less than gap: neighbours in value
    // stay at least gap apart, and no value is within gap of zero.
    for (std::int64_t i = 0; i < n; ++i) {
        double v = (static_cast<double>(order[static_cast<std::size_t>(i)]) - (n - 1) / 2.0) * 3 * gap;
        v += (rng.uniform() - 0.5) * gap;
        if (std::fabs(v) < gap) v = v < 0 ? -1.5 * gap : 1.5 * gap;
        t.setAt(i, v);
    }
    return t;
}

Tensor randomLabels(std::int64_t n, int classes, Rng& rng)
{
    Tensor t(Shape{n}, DType::Int32);
    for (std::int64_t i = 0; i < n; ++i) t.data<std::int32_t>()[i] = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(classes)));
    return t;
}

double dot(const Tensor& a, const Tensor& b)
{
    if (a.numel() != b.numel()) throw engine::ShapeError("dot: sizes differ");
    double s = 0;
    for (std::int64_t i = 0; i < a.numel(); ++i) s += a.at(i) * b.at(i);
    return s;
}

std::string GradCheckResult::str() const
{
    return "max relative error " + std::to_string(maxRelError) + " (absolute " +
           std::to_string(maxAbsError) + ") at element " + std::to_string(worstIndex) +
           ": analytic " + std::to_string(worstAnalytic) + ", numeric " + std::to_string(worstNumeric);
}

GradCheckResult checkGradient(const std::function<double()>& f, Tensor& x, const Tensor& analytic,
                              double step, std::int64_t maxElements, std::uint64_t seed, double floor)
{
    if (x.dtype() != DType::Float64) throw engine::InvalidArgument("checkGradient needs a float64 x");
    if (analytic.numel() != x.numel()) throw engine::ShapeError("checkGradient: gradient size differs from x");
    const std::int64_t n = x.numel();
    std::vector<std::int64_t> idx;
    if (n <= maxElements) {
        idx.resize(static_cast<std::size_t>(n));
        std::iota(idx.begin(), idx.end(), 0);
    } else {
        Rng rng(seed);
        for (std::int64_t k = 0; k < maxElements; ++k) idx.push_back(static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(n))));
    }
    GradCheckResult r;
    double* p = x.data<double>();
    for (auto i : idx) {
        const double orig = p[i];
        p[i] = orig + step;
        const double fp = f();
        p[i] = orig - step;
        const double fm = f();
        p[i] = orig;
        const double numeric = (fp - fm) / (2 * step);
        const double a = analytic.at(i);
        const double abs = std::fabs(a - numeric);
        const double rel = abs / std::max({std::fabs(a), std::fabs(numeric), floor});
        r.maxAbsError = std::max(r.maxAbsError, abs);
        if (rel > r.maxRelError || r.worstIndex < 0) {
            r.maxRelError = rel;
            r.worstIndex = i;
            r.worstAnalytic = a;
            r.worstNumeric = numeric;
        }
    }
    return r;
}

double normalisedError(const Tensor& a, const Tensor& b)
{
    if (a.numel() != b.numel()) throw engine::ShapeError("normalisedError: sizes differ: " + a.describe() + " vs " + b.describe());
    double num = 0, den = 0;
    for (std::int64_t i = 0; i < a.numel(); ++i) {
        const double d = a.at(i) - b.at(i);
        num += d * d;
        den += b.at(i) * b.at(i);
    }
    if (den == 0) return num == 0 ? 0 : std::sqrt(num);
    return std::sqrt(num / den);
}

double maxAbsDiff(const Tensor& a, const Tensor& b)
{
    if (a.numel() != b.numel()) throw engine::ShapeError("maxAbsDiff: sizes differ");
    double m = 0;
    for (std::int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::fabs(a.at(i) - b.at(i)));
    return m;
}

} // namespace towers::test
