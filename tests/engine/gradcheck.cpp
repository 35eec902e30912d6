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
        std::swap(order[static_cast<std::size_t>(i)],
                  order[rng.below(static_cast<std::uint64_t>(i + 1))]);
    // A ramp centred on zero with steps of 3 * gap, jittered by less than gap: neighbours in value
    // stay at least gap apart, and no value is within gap of zero.
    for (std::int64_t i = 0; i < n; ++i) {
        double v =
            (static_cast<double>(order[static_cast<std::size_t>(i)]) - (n - 1) / 2.0) * 3 * gap;
        v += (rng.uniform() - 0.5) * gap;
        if (std::fabs(v) < gap) v = v < 0 ? -1.5 * gap : 1.5 * gap;
        t.setAt(i, v);
    }
    return t;
}

Tensor randomLabels(std::int64_t n, int classes, Rng& rng)
{
    Tensor t(Shape{n}, DType::Int32);
    for (std::int64_t i = 0; i < n; ++i)
        t.data<std::int32_t>()[i] =
            static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(classes)));
    return t;
}

double meanCrossEntropy(engine::Ops& ops, const Tensor& logits, const Tensor& labels, Tensor& probs)
{
    Tensor loss;
    ops.softmaxCrossEntropyForward(logits, labels, 0.0, probs, loss);
    return loss.onHost().at(0);
}

double sumOfSquares(engine::Ops& ops, const Tensor& x)
{
    Tensor sum = Tensor::zeros({1}, DType::Float64).copyTo(x.device());
    ops.sumSquares(x, 1.0, sum);
    return sum.onHost().at(0);
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
    return std::to_string(checked) + " checked, " + std::to_string(skippedKinks) +
           " skipped at kinks; max relative error " + std::to_string(maxRelError) + " (absolute " +
           std::to_string(maxAbsError) + ") at element " + std::to_string(worstIndex) +
           ": analytic " + std::to_string(worstAnalytic) + ", numeric " +
           std::to_string(worstNumeric);
}

GradCheckResult checkGradient(const std::function<double()>& f, Tensor& x, const Tensor& analytic,
                              double step, std::int64_t maxElements, std::uint64_t seed,
                              double floor)
{
    if (x.dtype() != DType::Float64)
        throw engine::InvalidArgument("checkGradient needs a float64 x");
    if (analytic.numel() != x.numel())
        throw engine::ShapeError("checkGradient: gradient size differs from x");
    const std::int64_t n = x.numel();
    const bool all = n <= maxElements;
    const std::int64_t wanted = all ? n : maxElements;
    Rng rng(seed);
    GradCheckResult r;
    double* p = x.data<double>();
    const double f0 = f();
    for (std::int64_t k = 0; r.checked < wanted && k < (all ? n : 4 * maxElements); ++k) {
        const std::int64_t i =
            all ? k : static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(n)));
        const double orig = p[i];
        auto at = [&](double v) {
            p[i] = v;
            const double y = f();
            p[i] = orig;
            return y;
        };
        const double fp = at(orig + step), fm = at(orig - step);
        const double fp2 = at(orig + step / 2), fm2 = at(orig - step / 2);
        // Jump between the right and left slopes at step h and h/2. Smooth f: D(h) = f''h, so
        // D(h) = 2 D(h/2) up to rounding. A kink within the interval: both are about the jump in
        // slope, so D(h) - 2 D(h/2) is about minus the jump.
        const double dh = (fp - f0) / step - (f0 - fm) / step;
        const double dh2 = (fp2 - f0) / (step / 2) - (f0 - fm2) / (step / 2);
        const double slopeScale = std::max({std::fabs(fp - fm) / (2 * step), floor});
        // Rounding in f (relative 1e-16) divided by the step sets the noise floor.
        const double noise = 64 * 2.2e-16 * std::max(std::fabs(f0), 1.0) / step;
        if (std::fabs(dh - 2 * dh2) > 1e-5 * slopeScale + noise) {
            ++r.skippedKinks;
            continue;
        }
        ++r.checked;
        const double numeric = (fp - fm) / (2 * step);
        const double a = analytic.at(i);
        const double abs = std::fabs(a - numeric);
        // Differences below the rounding noise of the numeric slope are not evidence of an error.
        const double rel =
            std::max(0.0, abs - 4 * noise) / std::max({std::fabs(a), std::fabs(numeric), floor});
        r.maxAbsError = std::max(r.maxAbsError, abs);
        if (rel > r.maxRelError || r.worstIndex < 0) {
            r.maxRelError = rel;
            r.worstIndex = i;
            r.worstAnalytic = a;
            r.worstNumeric = numeric;
        }
    }
    if (r.checked == 0) throw engine::Error("checkGradient: every sampled element sits at a kink");
    return r;
}

GradCheckResult checkDirectionalGradient(const std::function<double()>& f, Tensor& x,
                                         const Tensor& analytic, double step, std::uint64_t seed)
{
    if (x.dtype() != DType::Float64)
        throw engine::InvalidArgument("checkDirectionalGradient needs a float64 x");
    if (analytic.numel() != x.numel())
        throw engine::ShapeError("checkDirectionalGradient: gradient size differs from x");
    const std::int64_t n = x.numel();
    double* p = x.data<double>();
    const std::vector<double> orig(p, p + n);
    Rng rng(seed);
    GradCheckResult r;
    const double f0 = f();
    const double noise = 64 * 2.2e-16 * std::max(std::fabs(f0), 1.0) / step;
    std::string lastKink;
    for (int attempt = 0; attempt < 8 && r.checked == 0; ++attempt) {
        std::vector<double> v(static_cast<std::size_t>(n));
        double norm = 0;
        for (auto& e : v) {
            e = rng.normal();
            norm += e * e;
        }
        norm = std::sqrt(norm);
        double expected = 0;
        for (std::int64_t i = 0; i < n; ++i) {
            v[static_cast<std::size_t>(i)] /= norm;
            expected += analytic.at(i) * v[static_cast<std::size_t>(i)];
        }
        auto at = [&](double t) {
            for (std::int64_t i = 0; i < n; ++i)
                p[i] = orig[static_cast<std::size_t>(i)] + t * v[static_cast<std::size_t>(i)];
            const double y = f();
            std::copy(orig.begin(), orig.end(), p);
            return y;
        };
        const double fp = at(step), fm = at(-step), fp2 = at(step / 2), fm2 = at(-step / 2);
        const double dh = (fp - f0) / step - (f0 - fm) / step;
        const double dh2 = (fp2 - f0) / (step / 2) - (f0 - fm2) / (step / 2);
        const double numeric = (fp - fm) / (2 * step);
        // Along a direction through a whole tensor, small kinks are everywhere (every ReLU and
        // pooling window it feeds); skip only those that could cost more than 5e-4 relative.
        if (std::fabs(dh - 2 * dh2) > 1e-3 * std::fabs(numeric) + noise) {
            ++r.skippedKinks;
            lastKink = "slope jumps " + std::to_string(dh) + " at h, " + std::to_string(dh2) +
                       " at h/2, slope " + std::to_string(numeric) + ", noise " +
                       std::to_string(noise);
            continue;
        }
        r.checked = 1;
        r.maxAbsError = std::fabs(expected - numeric);
        r.maxRelError = std::max(0.0, r.maxAbsError - 4 * noise) /
                        std::max({std::fabs(expected), std::fabs(numeric), 1e-12});
        r.worstIndex = 0;
        r.worstAnalytic = expected;
        r.worstNumeric = numeric;
    }
    if (r.checked == 0)
        throw engine::Error("checkDirectionalGradient: every direction crossed a kink (" +
                            lastKink + ")");
    return r;
}

double maxAbsDiff(const Tensor& a, const Tensor& b)
{
    if (a.numel() != b.numel()) throw engine::ShapeError("maxAbsDiff: sizes differ");
    double m = 0;
    for (std::int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::fabs(a.at(i) - b.at(i)));
    return m;
}

} // namespace towers::test
