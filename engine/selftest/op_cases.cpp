// The op-case table's runner and the helpers its families share; the cases themselves are in
// op_cases_window.cpp, op_cases_dense.cpp, op_cases_norm.cpp and op_cases_update.cpp.
#include "engine/selftest/op_cases.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <numeric>
#include <set>
#include <utility>

#include "engine/errors.h"
#include "engine/selftest/op_cases_build.h"

namespace towers::engine {

namespace {

bool isFloat(DType t)
{
    return t == DType::Float32 || t == DType::Float64;
}

template <class A, class B>
void sumSquaredErrors(const A* a, const B* b, std::int64_t n, double& num, double& den)
{
    for (std::int64_t i = 0; i < n; ++i) {
        const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
        num += d * d;
        den += static_cast<double>(b[i]) * static_cast<double>(b[i]);
    }
}

template <class A> void sumSquaredErrors(const A* a, const Tensor& b, double& num, double& den)
{
    if (b.dtype() == DType::Float32)
        sumSquaredErrors(a, b.data<float>(), b.numel(), num, den);
    else
        sumSquaredErrors(a, b.data<double>(), b.numel(), num, den);
}

} // namespace

double normalisedError(const Tensor& a, const Tensor& b)
{
    if (a.numel() != b.numel())
        throw ShapeError("normalisedError: sizes differ: " + a.describe() + " vs " + b.describe());
    double num = 0, den = 0;
    if (a.numel() == 0) return 0;
    if (isFloat(a.dtype()) && isFloat(b.dtype())) {
        // The common case, without a switch per element.
        if (a.dtype() == DType::Float32)
            sumSquaredErrors(a.data<float>(), b, num, den);
        else
            sumSquaredErrors(a.data<double>(), b, num, den);
    } else {
        for (std::int64_t i = 0; i < a.numel(); ++i) {
            const double d = a.at(i) - b.at(i);
            num += d * d;
            den += b.at(i) * b.at(i);
        }
    }
    return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

std::string mathModeName(MathMode mode)
{
    switch (mode) {
    case MathMode::Float32:
        return "float32";
    case MathMode::Float32Fast:
        return "float32 (fast algorithms)";
    case MathMode::Tf32:
        return "TF32";
    case MathMode::BFloat16:
        return "bfloat16";
    }
    return "?";
}

double Tolerance::in(MathMode mode) const
{
    switch (mode) {
    case MathMode::Float32:
        return float32;
    case MathMode::Float32Fast:
        return float32Fast;
    case MathMode::Tf32:
        return tf32;
    case MathMode::BFloat16:
        return bfloat16;
    }
    return float32;
}

namespace op_cases {

namespace {

double toFloat32(double v)
{
    return static_cast<double>(static_cast<float>(v));
}

} // namespace

Tensor uniform(const Shape& shape, Rng& rng, double lo, double hi)
{
    Tensor t(shape, DType::Float64);
    double* p = t.data<double>();
    for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = toFloat32(rng.uniform(lo, hi));
    return t;
}

Tensor distinct(const Shape& shape, Rng& rng, double lo, double hi)
{
    Tensor t(shape, DType::Float64);
    const std::int64_t n = t.numel();
    std::vector<std::int64_t> order(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    for (std::int64_t i = n - 1; i > 0; --i)
        std::swap(order[static_cast<std::size_t>(i)],
                  order[rng.below(static_cast<std::uint64_t>(i + 1))]);
    // Steps of (hi - lo) / n stay far above float32's resolution for the sizes of the table
    // (a million elements in [-1, 1]: steps of 2e-6, resolution 6e-8), so rounding merges none.
    const double step = n > 1 ? (hi - lo) / static_cast<double>(n - 1) : 0;
    double* p = t.data<double>();
    for (std::int64_t i = 0; i < n; ++i)
        p[i] = toFloat32(lo + step * static_cast<double>(order[static_cast<std::size_t>(i)]));
    return t;
}

Tensor levels(const Shape& shape, Rng& rng, int count)
{
    Tensor t(shape, DType::Float64);
    double* p = t.data<double>();
    for (std::int64_t i = 0; i < t.numel(); ++i)
        p[i] = static_cast<double>(rng.below(static_cast<std::uint64_t>(count)));
    return t;
}

Tensor labels(std::int64_t n, int classes, Rng& rng)
{
    Tensor t(Shape{n}, DType::Int32);
    for (std::int64_t i = 0; i < n; ++i)
        t.data<std::int32_t>()[i] =
            static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(classes)));
    return t;
}

Tensor bytes(const Shape& shape, Rng& rng)
{
    Tensor t(shape, DType::UInt8);
    std::uint8_t* p = t.data<std::uint8_t>();
    for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<std::uint8_t>(rng.below(256));
    return t;
}

Tensor mask(const Shape& shape, Rng& rng, double keep)
{
    Tensor t(shape, DType::UInt8);
    for (std::int64_t i = 0; i < t.numel(); ++i)
        t.data<std::uint8_t>()[i] = rng.uniform() < keep ? 1 : 0;
    return t;
}

Tensor scalar(double v)
{
    return Tensor::filled({1}, DType::Float64, v);
}

Tensor roundedToFloat32(const Tensor& t)
{
    Tensor r(t.shape(), DType::Float64);
    const double* p = t.data<double>();
    double* q = r.data<double>();
    for (std::int64_t i = 0; i < t.numel(); ++i) q[i] = toFloat32(p[i]);
    return r;
}

void zeroNearKinks(Tensor& dy, const Tensor& z)
{
    double sum = 0;
    for (std::int64_t i = 0; i < z.numel(); ++i) sum += z.at(i) * z.at(i);
    const double gap =
        0.01 * std::sqrt(sum / static_cast<double>(std::max<std::int64_t>(1, z.numel())));
    for (std::int64_t i = 0; i < z.numel(); ++i)
        if (std::fabs(z.at(i)) < gap) dy.setAt(i, 0);
}

std::string shapeText(const Shape& s)
{
    std::string text = "[";
    for (int i = 0; i < s.rank(); ++i) {
        if (i) text += ",";
        text += std::to_string(s[i]);
    }
    return text + "]";
}

Ops& referenceOps()
{
    thread_local const std::unique_ptr<Ops> ops = makeReferenceOps();
    return *ops;
}

} // namespace op_cases

namespace {

std::vector<OpCase> buildTable()
{
    std::vector<OpCase> cases;
    op_cases::addConvolutionCases(cases);
    op_cases::addPoolingCases(cases);
    op_cases::addLrnCases(cases);
    op_cases::addLinearCases(cases);
    op_cases::addElementwiseCases(cases);
    op_cases::addBatchNormCases(cases);
    op_cases::addLayoutCases(cases);
    op_cases::addLossCases(cases);
    op_cases::addUpdateCases(cases);
    op_cases::addPreprocessCases(cases);
    // Each op's cases together (they report as a group), and every label once (results are
    // named by it).
    std::set<std::string> labels, closed;
    for (std::size_t i = 0; i < cases.size(); ++i) {
        if (!labels.insert(cases[i].label()).second)
            throw Error("op-case table: duplicate case '" + cases[i].label() + "'");
        if (i > 0 && cases[i].op != cases[i - 1].op) {
            closed.insert(cases[i - 1].op);
            if (closed.count(cases[i].op))
                throw Error("op-case table: the cases of '" + cases[i].op + "' are not together");
        }
    }
    return cases;
}

// FNV-1a: a hash of the label that is the same everywhere, so each case draws its own inputs.
std::uint64_t labelHash(const std::string& label)
{
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char c : label) {
        h ^= c;
        h *= 0x100000001b3ull;
    }
    return h;
}

// A float tensor in `dtype` (the same tensor when it is already).
Tensor converted(const Tensor& t, DType dtype)
{
    if (!isFloat(t.dtype()) || t.dtype() == dtype) return t;
    Tensor r(t.shape(), dtype);
    if (dtype == DType::Float32) {
        const double* p = t.data<double>();
        float* q = r.data<float>();
        for (std::int64_t i = 0; i < t.numel(); ++i) q[i] = static_cast<float>(p[i]);
    } else {
        const float* p = t.data<float>();
        double* q = r.data<double>();
        for (std::int64_t i = 0; i < t.numel(); ++i) q[i] = p[i];
    }
    return r;
}

std::vector<OpOutput> runOn(const OpCase& c, Ops& ops, DType dtype,
                            const std::vector<Tensor>& inputs)
{
    std::vector<Tensor> in;
    in.reserve(inputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        const Tensor& t = inputs[i];
        const bool keep = std::find(c.keepDType.begin(), c.keepDType.end(), i) != c.keepDType.end();
        Tensor d;
        if (!t.empty()) ops.upload(keep ? t : converted(t, dtype), d);
        in.push_back(std::move(d));
    }
    auto outputs = c.run(ops, in);
    ops.synchronize();
    for (auto& o : outputs) o.value = o.value.onHost();
    return outputs;
}

std::string number(double v)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2g", v);
    return buf;
}

} // namespace

const std::vector<OpCase>& opCases()
{
    static const std::vector<OpCase> cases = buildTable();
    return cases;
}

std::vector<std::string> opCaseOps()
{
    std::vector<std::string> ops;
    for (const auto& c : opCases())
        if (ops.empty() || ops.back() != c.op) ops.push_back(c.op);
    return ops;
}

std::vector<Tensor> opCaseInputs(const OpCase& c, std::uint64_t seed)
{
    Rng rng(splitmix64(seed) ^ labelHash(c.label()));
    return c.makeInputs(rng);
}

std::vector<OpOutput> opCaseReference(const OpCase& c, const std::vector<Tensor>& inputs)
{
    return runOn(c, op_cases::referenceOps(), DType::Float64, inputs);
}

std::string OpCaseResult::detail() const
{
    std::string text;
    for (const auto& o : outputs) {
        if (!text.empty()) text += ", ";
        text += o.name + " " + number(o.error);
        if (!o.passed) text += " (over " + number(o.tolerance) + ")";
    }
    if (!failure.empty()) text += (text.empty() ? "" : "; ") + failure;
    return text;
}

OpCaseResult runOpCase(const OpCase& c, Ops& ops, MathMode mode, const std::vector<Tensor>& inputs,
                       const std::vector<OpOutput>& reference, double tolerance)
{
    OpCaseResult r;
    const double allowed = tolerance > 0 ? tolerance : c.tolerance.in(mode);
    r.tolerance = allowed;
    try {
        const auto got = runOn(c, ops, DType::Float32, inputs);
        if (got.size() != reference.size())
            throw Error(std::to_string(got.size()) + " outputs, the reference has " +
                        std::to_string(reference.size()));
        double worst = -1;
        bool failed = false;
        for (std::size_t i = 0; i < got.size(); ++i) {
            const OpOutput& want = reference[i];
            if (got[i].value.shape() != want.value.shape())
                throw ShapeError(want.name + " is " + op_cases::shapeText(got[i].value.shape()) +
                                 ", the reference's " + op_cases::shapeText(want.value.shape()));
            OpOutputCheck check;
            check.name = want.name;
            check.tolerance = want.exact ? 0 : allowed;
            check.error = normalisedError(got[i].value, want.value);
            check.passed = std::isfinite(check.error) && check.error <= check.tolerance;
            // Report the output that failed first, else the one nearest its tolerance.
            const double ratio = check.tolerance > 0 ? check.error / check.tolerance
                                 : check.error > 0   ? 1e300
                                                     : 0;
            if (!failed && (!check.passed || ratio > worst)) {
                worst = ratio;
                r.error = check.error;
                r.tolerance = check.tolerance;
                failed = !check.passed;
            }
            r.outputs.push_back(std::move(check));
        }
        r.passed = !failed;
    } catch (const std::exception& e) {
        r.passed = false;
        r.failure = e.what();
    }
    return r;
}

OpCaseResult runOpCase(const OpCase& c, Ops& ops, MathMode mode, std::uint64_t seed,
                       double tolerance)
{
    std::vector<Tensor> inputs;
    std::vector<OpOutput> reference;
    try {
        inputs = opCaseInputs(c, seed);
        reference = opCaseReference(c, inputs);
    } catch (const std::exception& e) {
        OpCaseResult r;
        r.failure = std::string("the reference failed: ") + e.what();
        return r;
    }
    return runOpCase(c, ops, mode, inputs, reference, tolerance);
}

} // namespace towers::engine
