#include "engine/selftest/selftest.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>

#include "engine/cpu/onednn_ops.h"
#include "engine/errors.h"
#include "engine/gpu/gpu_backend.h"
#include "engine/ops/staged_ops.h"
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

// ||a - b|| / ||b|| (||a - b|| when b is zero).
double normalisedError(const Tensor& a, const Tensor& b)
{
    if (a.numel() != b.numel())
        throw ShapeError("self-test: result sizes differ: " + a.describe() + " vs " + b.describe());
    double num = 0, den = 0;
    for (std::int64_t i = 0; i < a.numel(); ++i) {
        const double d = a.at(i) - b.at(i);
        num += d * d;
        den += b.at(i) * b.at(i);
    }
    return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

std::string shapeText(const Shape& s)
{
    std::string text = "[";
    for (int i = 0; i < s.rank(); ++i) text += (i ? "," : "") + std::to_string(s[i]);
    return text + "]";
}

// ---- the op checks ----

// One comparison: `run` computes the outputs on the given backend from float32 inputs (converted
// to float64 for the reference) and returns them; their errors are combined (the worst).
struct OpCheck
{
    std::string name;
    std::function<std::vector<Tensor>(Ops& ops, DType dtype)> run;
};

// Inputs drawn once per check, then given to both backends in their dtype.
class Inputs
{
public:
    explicit Inputs(DType dtype) : m_dtype(dtype) {}
    Tensor operator()(const Tensor& t) const
    {
        return m_dtype == DType::Float64 ? toFloat64(t) : t;
    }

private:
    DType m_dtype;
};

Tensor labelsTensor(std::int64_t n, int classes, Rng& rng)
{
    Tensor l({n}, DType::Int32);
    for (std::int64_t i = 0; i < n; ++i)
        l.data<std::int32_t>()[i] = static_cast<std::int32_t>(rng.below(classes));
    return l;
}

void addConvChecks(std::vector<OpCheck>& checks, const std::string& what, const Shape& input,
                   std::int64_t outC, int k, int stride, Padding padding, std::uint64_t seed)
{
    const auto d = makeConv2dDesc(input, outC, k, k, stride, stride, padding);
    const std::string geometry = std::to_string(k) + "x" + std::to_string(k) + " s" +
                                 std::to_string(stride) +
                                 (padding == Padding::Same ? " same " : " valid ") +
                                 shapeText(input) + "->" + std::to_string(outC) + " (" + what + ")";
    auto data = [d, seed] {
        Rng rng(seed);
        const double scale = 1.0 / std::sqrt(double(d.win.c * d.win.kh * d.win.kw));
        return std::vector<Tensor>{
            uniformTensor(d.inputShape(), rng), uniformTensor(d.weightShape(), rng, -scale, scale),
            uniformTensor({d.outChannels}, rng, -0.1, 0.1), uniformTensor(d.outputShape(), rng)};
    };
    checks.push_back({"conv2d forward + relu " + geometry, [d, data](Ops& ops, DType dt) {
                          const auto in = data();
                          const Inputs as(dt);
                          Tensor y;
                          ops.conv2dForward(d, as(in[0]), as(in[1]), as(in[2]), y,
                                            Activation::Relu);
                          return std::vector<Tensor>{y};
                      }});
    checks.push_back({"conv2d backward data " + geometry, [d, data](Ops& ops, DType dt) {
                          const auto in = data();
                          const Inputs as(dt);
                          Tensor dx;
                          ops.conv2dBackwardData(d, as(in[3]), as(in[1]), dx);
                          return std::vector<Tensor>{dx};
                      }});
    checks.push_back({"conv2d backward weights " + geometry, [d, data](Ops& ops, DType dt) {
                          const auto in = data();
                          const Inputs as(dt);
                          Tensor dw, db;
                          ops.conv2dBackwardWeights(d, as(in[0]), as(in[3]), dw, &db);
                          return std::vector<Tensor>{dw, db};
                      }});
    // The path the layers take: forward for training, then the fused backward through the ReLU.
    checks.push_back(
        {"conv2d training step (fused relu backward) " + geometry, [d, data](Ops& ops, DType dt) {
             const auto in = data();
             const Inputs as(dt);
             const Tensor x = as(in[0]), w = as(in[1]), b = as(in[2]), dy = as(in[3]);
             Tensor y, saved, dx, dw, db;
             ops.conv2dForwardTraining(d, x, w, b, y, Activation::Relu, saved);
             ops.conv2dBackward(d, x, w, y, dy, Activation::Relu, saved, &dx, dw, &db);
             return std::vector<Tensor>{y, dx, dw, db};
         }});
}

std::vector<OpCheck> opChecks(std::uint64_t seed)
{
    std::vector<OpCheck> checks;
    // The seeds' CIFAR-10 convolutions (5x5 on 24x24 and 12x12), mnist-convnet's 3x3, and odd
    // geometry: a strided VALID convolution with an unused last column.
    addConvChecks(checks, "cifar10-tutorial conv1", {8, 24, 24, 3}, 64, 5, 1, Padding::Same,
                  seed + 1);
    addConvChecks(checks, "cifar10-tutorial conv2", {8, 12, 12, 64}, 64, 5, 1, Padding::Same,
                  seed + 2);
    addConvChecks(checks, "mnist-convnet conv3", {4, 14, 14, 64}, 96, 3, 1, Padding::Same,
                  seed + 3);
    addConvChecks(checks, "odd sizes", {3, 9, 10, 5}, 7, 3, 2, Padding::Valid, seed + 4);

    {
        const auto d = makePool2dDesc({8, 24, 24, 64}, 3, 3, 2, 2, Padding::Same);
        checks.push_back({"max-pool 3x3 s2 same forward + backward " + shapeText(d.inputShape()),
                          [d, seed](Ops& ops, DType dt) {
                              Rng rng(seed + 10);
                              const Inputs as(dt);
                              const Tensor x = as(uniformTensor(d.inputShape(), rng));
                              const Tensor dy = as(uniformTensor(d.outputShape(), rng));
                              Tensor y, ws, dx;
                              ops.maxPoolForward(d, x, y, ws);
                              ops.maxPoolBackward(d, x, y, dy, ws, dx);
                              return std::vector<Tensor>{y, dx};
                          }});
    }
    {
        const auto d = makeLrnDesc({8, 12, 12, 64}, 4, 1.0, 0.001 / 9.0, 0.75);
        checks.push_back(
            {"LRN (radius 4, TensorFlow semantics) forward + backward " + shapeText(d.shape),
             [d, seed](Ops& ops, DType dt) {
                 Rng rng(seed + 11);
                 const Inputs as(dt);
                 const Tensor x = as(uniformTensor(d.shape, rng, -3, 3));
                 const Tensor dy = as(uniformTensor(d.shape, rng));
                 Tensor y, ws, dx;
                 ops.lrnForward(d, x, y, ws);
                 ops.lrnBackward(d, x, y, dy, ws, dx);
                 return std::vector<Tensor>{y, dx};
             }});
    }
    checks.push_back({"linear forward + relu, backward [32,2304]->384", [seed](Ops& ops, DType dt) {
                          Rng rng(seed + 12);
                          const Inputs as(dt);
                          const Tensor x = as(uniformTensor({32, 2304}, rng));
                          const Tensor w = as(uniformTensor({384, 2304}, rng, -0.02, 0.02));
                          const Tensor b = as(uniformTensor({384}, rng, -0.1, 0.1));
                          const Tensor dy = as(uniformTensor({32, 384}, rng));
                          Tensor y, dx, dw, db;
                          ops.linearForward(x, w, b, y, Activation::Relu);
                          ops.linearBackward(x, w, y, dy, Activation::Relu, &dx, dw, &db);
                          return std::vector<Tensor>{y, dx, dw, db};
                      }});
    checks.push_back({"relu, add", [seed](Ops& ops, DType dt) {
                          Rng rng(seed + 13);
                          const Inputs as(dt);
                          const Tensor x = as(uniformTensor({4, 7, 9, 5}, rng));
                          const Tensor dy = as(uniformTensor({4, 7, 9, 5}, rng));
                          Tensor y, dx, sum;
                          ops.reluForward(x, y);
                          ops.reluBackward(y, dy, dx);
                          ops.add(x, dy, sum);
                          return std::vector<Tensor>{y, dx, sum};
                      }});
    checks.push_back(
        {"dropout 0.25 forward + backward (the same masks)", [seed](Ops& ops, DType dt) {
             Rng rng(seed + 14);
             const Inputs as(dt);
             const Tensor x = as(uniformTensor({16, 2048}, rng));
             Tensor y, mask, dx;
             ops.dropoutForward(x, 0.25, seed + 99, y, mask);
             ops.dropoutBackward(x, mask, 0.25, dx);
             return std::vector<Tensor>{y, dx};
         }});
    {
        const auto d = makeBatchNormDesc({8, 10, 10, 32}, 1e-5, 0.1);
        checks.push_back(
            {"batch norm training forward, running statistics, backward, inference " +
                 shapeText(d.shape),
             [d, seed](Ops& ops, DType dt) {
                 Rng rng(seed + 15);
                 const Inputs as(dt);
                 const Tensor x = as(uniformTensor(d.shape, rng, -2, 3));
                 const Tensor gamma = as(uniformTensor({d.channels()}, rng, 0.5, 1.5));
                 const Tensor beta = as(uniformTensor({d.channels()}, rng, -0.5, 0.5));
                 const Tensor dy = as(uniformTensor(d.shape, rng));
                 Tensor runMean = as(uniformTensor({d.channels()}, rng, -0.1, 0.1));
                 Tensor runVar = as(uniformTensor({d.channels()}, rng, 0.9, 1.1));
                 Tensor y, saveMean, saveVar, dx, dgamma, dbeta, yInf;
                 ops.batchNormForwardTraining(d, x, gamma, beta, y, runMean, runVar, saveMean,
                                              saveVar);
                 ops.batchNormBackward(d, x, dy, gamma, saveMean, saveVar, dx, dgamma, dbeta);
                 ops.batchNormForwardInference(d, x, gamma, beta, runMean, runVar, yInf);
                 return std::vector<Tensor>{y, runMean, runVar, dx, dgamma, dbeta, yInf};
             }});
    }
    checks.push_back(
        {"softmax cross-entropy forward + backward [64,10]", [seed](Ops& ops, DType dt) {
             Rng rng(seed + 16);
             const Inputs as(dt);
             const Tensor logits = as(uniformTensor({64, 10}, rng, -4, 4));
             const Tensor labels = labelsTensor(64, 10, rng);
             Tensor probs, dlogits;
             const double loss = ops.softmaxCrossEntropyForward(logits, labels, probs);
             ops.softmaxCrossEntropyBackward(probs, labels, 1.0 / 64, dlogits);
             return std::vector<Tensor>{Tensor::filled({1}, DType::Float64, loss), probs, dlogits};
         }});
    checks.push_back(
        {"layout NHWC <-> NCHW, sum of squares, axpy", [seed](Ops& ops, DType dt) {
             Rng rng(seed + 17);
             const Inputs as(dt);
             const Tensor x = as(uniformTensor({3, 5, 6, 7}, rng));
             Tensor nchw, back;
             ops.nhwcToNchw(x, nchw);
             ops.nchwToNhwc(nchw, back);
             Tensor y = as(uniformTensor({3, 5, 6, 7}, rng));
             ops.axpy(-0.3, x, y);
             const double ss = ops.sumSquares(x);
             return std::vector<Tensor>{nchw, back, y, Tensor::filled({1}, DType::Float64, ss)};
         }});
    checks.push_back(
        {"optimizer updates: Nesterov momentum, Adam", [seed](Ops& ops, DType dt) {
             Rng rng(seed + 18);
             const Inputs as(dt);
             Tensor w1 = as(uniformTensor({1000, 30}, rng)),
                    buf = as(uniformTensor({1000, 30}, rng));
             Tensor w2 = as(uniformTensor({1000, 30}, rng)), m = as(uniformTensor({1000, 30}, rng));
             Tensor v = as(uniformTensor({1000, 30}, rng, 0, 0.01));
             const Tensor g = as(uniformTensor({1000, 30}, rng));
             MomentumStep ms;
             ms.lr = 0.05;
             ms.nesterov = true;
             ops.momentumUpdate(ms, g, buf, w1);
             AdamStep as2;
             as2.step = 3;
             ops.adamUpdate(as2, g, m, v, w2);
             return std::vector<Tensor>{w1, buf, w2, m, v};
         }});
    return checks;
}

std::unique_ptr<Ops> makeBackend(const SelfTestOptions& o)
{
    if (o.backend == "onednn") return cpu::makeOneDnnOps();
    if (o.backend == "reference") return makeReferenceOps();
    if (o.backend == "cuda") {
        std::string why;
        GpuBackend* gpu = cudaBackend(&why);
        if (!gpu) throw Unsupported("self-test on cuda: " + why);
        if (gpu->deviceCount() == 0)
            throw Unsupported("self-test on cuda: " + gpu->unavailableReason());
        // The op checks hand host tensors over; staging copies them to GPU 0 and back.
        return makeStagedOps(gpu->makeOps(0, GpuOpsOptions{o.allowTf32}));
    }
    throw UnknownName("self-test: unknown backend '" + o.backend + "' (known: onednn, cuda)");
}

double toleranceFor(const SelfTestOptions& o)
{
    if (o.tolerance > 0) return o.tolerance;
    if (o.backend == "cuda") return o.allowTf32 ? 1e-2 : 1e-4;
    return 1e-5;
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

// ||(a - start) - (b - start)|| / ||b - start|| over all parameters: how far apart two runs'
// updates are, relative to the updates themselves (the weights alone would hide it).
double updateError(const std::vector<Tensor>& start, TowerSet& a, TowerSet& b)
{
    double num = 0, den = 0;
    const auto& pa = a.model().parameters();
    const auto& pb = b.model().parameters();
    for (std::size_t i = 0; i < pa.size(); ++i) {
        const Tensor va = pa[i]->value.onHost(), vb = pb[i]->value.onHost();
        for (std::int64_t j = 0; j < va.numel(); ++j) {
            const double ua = va.at(j) - start[i].at(j), ub = vb.at(j) - start[i].at(j);
            num += (ua - ub) * (ua - ub);
            den += ub * ub;
        }
    }
    return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
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
    t.towers = 2;
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
    r.tolerance = 1e-4;
    r.passed = r.error <= r.tolerance;
    return r;
}

} // namespace

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
    auto reference = makeReferenceOps();
    std::vector<SelfTestResult> results;
    auto record = [&](SelfTestResult r) {
        if (onResult) onResult(r);
        results.push_back(std::move(r));
    };
    for (const auto& check : opChecks(options.seed)) {
        SelfTestResult r;
        r.name = check.name;
        r.tolerance = toleranceFor(options);
        try {
            const auto got = check.run(*backend, DType::Float32);
            const auto want = check.run(*reference, DType::Float64);
            for (std::size_t i = 0; i < got.size(); ++i)
                r.error = std::max(r.error, normalisedError(got[i], want[i]));
            r.passed = std::isfinite(r.error) && r.error <= r.tolerance;
        } catch (const std::exception& e) {
            r.detail = e.what();
        }
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
