#include "engine/selftest/selftest.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>

#include "engine/backends.h"
#include "engine/cpu/onednn_ops.h"
#include "engine/errors.h"
#include "engine/gpu/gpu_backend.h"
#include "engine/tensor/rng.h"
#include "engine/train/tower_set.h"

namespace towers::engine {

namespace {

// ---- tensors ----

Tensor uniformTensor(const Shape& shape, Rng& rng, double lo = -1, double hi = 1)
{
    Tensor t(shape, DType::Float32);
    for (std::int64_t i = 0; i < t.numel(); ++i) t.setAt(i, rng.uniform(lo, hi));
    return t;
}

Tensor toFloat64(const Tensor& t)
{
    Tensor d(t.shape(), DType::Float64);
    for (std::int64_t i = 0; i < t.numel(); ++i) d.setAt(i, t.at(i));
    return d;
}

Tensor labelsTensor(std::int64_t n, int classes, Rng& rng)
{
    Tensor l({n}, DType::Int32);
    for (std::int64_t i = 0; i < n; ++i)
        l.data<std::int32_t>()[i] = static_cast<std::int32_t>(rng.below(classes));
    return l;
}

// The backend under test. The cases run on its own device: a GPU backend gets its inputs uploaded
// and gives its outputs back, as in training.
std::unique_ptr<Ops> makeBackend(const SelfTestOptions& o)
{
    return makeBackendOps(o.backend, {std::max(o.gpu, 0), o.allowTf32, o.precision});
}

// ---- training ----

Batch syntheticBatch(const Shape& image, int classes, int towers, std::int64_t perTower,
                     std::uint64_t seed)
{
    Rng rng(seed);
    Batch b;
    const std::int64_t n = towers * perTower;
    b.images = uniformTensor({n, image[0], image[1], image[2]}, rng, -1.5, 1.5);
    b.labels = labelsTensor(n, classes, rng);
    b.towers = towers;
    return b;
}

std::vector<Tensor> weights(TowerSet& set)
{
    std::vector<Tensor> w;
    for (const auto* p : set.model().parameters()) w.push_back(toFloat64(p->value.onHost()));
    return w;
}

// The normalised error of a's update against b's (each run's weights less the start) over all
// parameters: how far apart two runs' updates are, relative to the updates themselves (the
// weights alone would hide it).
double updateError(const std::vector<Tensor>& start, TowerSet& a, TowerSet& b)
{
    std::int64_t n = 0;
    for (const auto& s : start) n += s.numel();
    Tensor ua({n}, DType::Float64), ub({n}, DType::Float64);
    const auto& pa = a.model().parameters();
    const auto& pb = b.model().parameters();
    std::int64_t k = 0;
    for (std::size_t i = 0; i < pa.size(); ++i) {
        const Tensor va = pa[i]->value.onHost(), vb = pb[i]->value.onHost();
        for (std::int64_t j = 0; j < va.numel(); ++j, ++k) {
            ua.setAt(k, va.at(j) - start[i].at(j));
            ub.setAt(k, vb.at(j) - start[i].at(j));
        }
    }
    return normalisedError(ua, ub);
}

// Two towers of `model` on the backend under test, dropout off (the masks would differ between
// a split and a whole batch), one thread each.
TowerSetOptions towerOptions(const SelfTestOptions& o, const std::string& model,
                             const std::string& optimizer)
{
    TowerSetOptions t;
    t.model = model;
    t.backend = o.backend;
    t.allowTf32 = o.allowTf32;
    t.precision = o.precision;
    t.towers = 2;
    if (o.backend == "cuda" && o.gpu >= 0) t.gpus = {o.gpu, o.gpu};
    t.optimizer.kind = optimizer;
    t.seed = o.seed;
    t.dropout = false;
    return t;
}

SelfTestResult trainingCheck(const SelfTestOptions& o)
{
    // Two towers of fashion-fast (convolutions, batch norm, max-pool, linear layers) overfit one
    // fixed batch with Nesterov momentum: the loss must fall, and the replicas stay identical.
    SelfTestResult r;
    r.name = "training: 2 towers x 16 of fashion-fast, 12 Nesterov steps on one batch: loss falls, "
             "replicas identical";
    TowerSet set(towerOptions(o, "fashion-fast", "nesterov"));
    const Batch batch =
        syntheticBatch(set.model().inputShape(), set.model().numClasses(), 2, 16, o.seed + 50);
    double first = 0, last = 0;
    for (int s = 0; s < 12; ++s) {
        const auto step = set.step(batch, s, 0.02);
        if (!step.finite) {
            r.detail = "the loss or a gradient was not finite at step " + std::to_string(s);
            return r;
        }
        (s == 0 ? first : last) = step.loss;
        if (const auto diff = set.compareReplicas(); !diff.empty()) {
            r.detail = "the replicas differ after step " + std::to_string(s) + ": " + diff;
            return r;
        }
    }
    r.error = last / first;
    r.tolerance = 0.5;
    r.passed = last < 0.5 * first;
    char buf[160];
    std::snprintf(buf, sizeof buf, "loss %.4f -> %.4f", first, last);
    r.detail = buf;
    return r;
}

SelfTestResult replicationCheck(const SelfTestOptions& o)
{
    // Replicated training equals single-tower training on the same global batch: 2 towers x 8
    // against 1 tower x 16, both on the backend, 3 momentum steps of cifar10-tutorial (no batch
    // norm: its statistics are per tower, as in PyTorch's DDP, so a batch-norm model is not
    // expected to match). Only rounding may differ: the order of the gradient sums.
    SelfTestResult r;
    r.name = "replication: 2 towers x 8 update the weights as 1 tower x 16 (cifar10-tutorial, 3 "
             "momentum steps)";
    const TowerSetOptions t = towerOptions(o, "cifar10-tutorial", "momentum");
    TowerSetOptions single = t;
    single.towers = 1;
    if (single.gpus.size() > 1) single.gpus.erase(single.gpus.begin() + 1, single.gpus.end());
    TowerSet two(t), one(single);
    const auto start = weights(one);
    const Batch twoSlices =
        syntheticBatch(two.model().inputShape(), two.model().numClasses(), 2, 8, o.seed + 60);
    Batch oneSlice = twoSlices;
    oneSlice.towers = 1;
    for (int s = 0; s < 3; ++s) {
        two.step(twoSlices, s, 0.05);
        one.step(oneSlice, s, 0.05);
    }
    r.error = updateError(start, two, one);
    // In bf16 on cuDNN, whose bfloat16 convolutions write their weight gradients in bfloat16 too
    // (its one bf16 configuration; PyTorch's autocast gets the same), each tower's gradient is
    // rounded to bfloat16 before the average, the single tower's once: towers agree to that
    // rounding (up to 2^-8 of each element of the convolutions' gradients), not to float32's.
    // oneDNN writes them in float32.
    r.tolerance = o.precision == Precision::BFloat16 && o.backend == "cuda" ? 5e-3 : 1e-4;
    r.passed = r.error <= r.tolerance;
    return r;
}

} // namespace

MathMode selfTestMathMode(const SelfTestOptions& options)
{
    if (options.precision == Precision::BFloat16) return MathMode::BFloat16;
    if (options.backend == "cuda")
        return options.allowTf32 ? MathMode::Tf32 : MathMode::Float32Fast;
    return MathMode::Float32;
}

std::vector<SelfTestOpSummary> summarizeByOp(const std::vector<SelfTestResult>& results)
{
    std::vector<SelfTestOpSummary> ops;
    for (const auto& r : results) {
        if (r.op.empty()) continue;
        auto it = std::find_if(ops.begin(), ops.end(),
                               [&](const SelfTestOpSummary& s) { return s.op == r.op; });
        if (it == ops.end()) {
            SelfTestOpSummary summary;
            summary.op = r.op;
            ops.push_back(std::move(summary));
            it = ops.end() - 1;
        }
        ++it->cases;
        it->failed += r.passed ? 0 : 1;
        // The worst case: a failure first, else the one nearest its tolerance.
        const double ratio = r.tolerance > 0 ? r.error / r.tolerance : (r.error > 0 ? 1e300 : 0);
        const bool worse = it->cases == 1 || (!r.passed && it->worstPassed) ||
                           (r.passed == it->worstPassed && ratio > it->worstRatio);
        if (worse) {
            it->worstCase = r.caseName;
            it->worstError = r.error;
            it->worstTolerance = r.tolerance;
            it->worstRatio = ratio;
            it->worstPassed = r.passed;
        }
    }
    return ops;
}

std::vector<std::string> selfTestBackends()
{
    std::vector<std::string> names{"onednn"};
    if (const auto* gpu = cudaBackend(); gpu && gpu->deviceCount() > 0) names.push_back("cuda");
    return names;
}

std::vector<SelfTestResult> runSelfTest(const SelfTestOptions& options,
                                        const std::function<void(const SelfTestResult&)>& onResult)
{
    auto backend = options.makeOps ? options.makeOps() : makeBackend(options);
    std::vector<SelfTestResult> results;
    auto record = [&](SelfTestResult r) {
        if (onResult) onResult(r);
        results.push_back(std::move(r));
    };
    const MathMode mode = selfTestMathMode(options);
    for (const OpCase& c : opCases()) {
        if (!options.filter.empty() && c.label().find(options.filter) == std::string::npos)
            continue;
        const OpCaseResult checked = runOpCase(c, *backend, mode, options.seed, options.tolerance);
        SelfTestResult r;
        r.name = c.label();
        r.op = c.op;
        r.caseName = c.name;
        r.passed = checked.passed;
        r.error = checked.error;
        r.tolerance = checked.tolerance;
        r.detail = checked.detail();
        r.outputs = checked.outputs;
        record(std::move(r));
    }
    if (options.training) {
        const std::pair<const char*, SelfTestResult (*)(const SelfTestOptions&)> checks[] = {
            {"training", trainingCheck}, {"replication", replicationCheck}};
        for (const auto& [name, check] : checks) {
            try {
                record(check(options));
            } catch (const std::exception& e) {
                SelfTestResult r;
                r.name = name;
                r.detail = e.what();
                record(std::move(r));
            }
        }
    }
    return results;
}

} // namespace towers::engine
