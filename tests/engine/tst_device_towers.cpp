// Tensors on a device and towers whose replicas live there, on a stand-in GPU (fake_device.h):
// host access is refused, copies are explicit, and towers on the device compute bitwise what
// towers on the host compute, through every step of the path a GPU tower takes (replica moved to
// the device, batch slices copied there, averages through host copies, evaluation, EMA,
// checkpoints copied back). The CUDA kernels themselves are tested by tst_gpu_backend on a GPU.
#include <QtTest>

#include <atomic>
#include <cstring>

#include "engine/bench/train_step_bench.h"
#include "engine/data/batch_loader.h"
#include "engine/nn/conv2d.h"
#include "engine/nn/dropout.h"
#include "engine/nn/flatten.h"
#include "engine/nn/linear.h"
#include "engine/nn/pool2d.h"
#include "engine/ops/backends.h"
#include "engine/ops/staged_ops.h"
#include "engine/train/checkpoint.h"
#include "engine/train/tower_set.h"
#include "error_message.h"
#include "fake_device.h"
#include "gradcheck.h"
#include "replication.h"
#include "synthetic_batches.h"

using namespace towers::engine;
using namespace towers::test;

namespace {

const Device kGpu0{DeviceKind::Cuda, 0};

// Checks that `got` holds what `want` holds, byte for byte: every parameter and buffer, the
// optimizer's state and step count, the moving averages.
void expectSameState(TowerSet& want, TowerSet& got)
{
    QCOMPARE(got.optimizer().stepCount(), want.optimizer().stepCount());
    const auto& wp = want.model().parameters();
    const auto& gp = got.model().parameters();
    QCOMPARE(gp.size(), wp.size());
    for (std::size_t i = 0; i < wp.size(); ++i)
        QVERIFY2(sameBytes(gp[i]->value, wp[i]->value), wp[i]->name.c_str());
    const auto ws = want.optimizer().state(wp), gs = got.optimizer().state(gp);
    QCOMPARE(gs.size(), ws.size());
    for (std::size_t i = 0; i < ws.size(); ++i)
        QVERIFY2(sameBytes(gs[i].second, ws[i].second), ws[i].first.c_str());
    QCOMPARE(got.ema() != nullptr, want.ema() != nullptr);
    if (!want.ema()) return;
    const auto we = want.ema()->state(), ge = got.ema()->state();
    for (std::size_t i = 0; i < we.size(); ++i)
        QVERIFY2(sameBytes(ge[i].second, we[i].second), we[i].first.c_str());
}

// A device communicator (the staging stand-in) that counts what it is asked to do.
class CountingCommunicator final : public Communicator
{
public:
    explicit CountingCommunicator(int ranks) : m_inner(makeStagingCommunicator(ranks)) {}
    int size() const override { return m_inner->size(); }
    void allReduceMean(int rank, std::span<Tensor> tensors) override
    {
        ++allReduces;
        m_inner->allReduceMean(rank, tensors);
    }
    void broadcast(int rank, int root, std::span<Tensor> tensors) override
    {
        ++broadcasts;
        m_inner->broadcast(rank, root, tensors);
    }
    void barrier(int rank) override { m_inner->barrier(rank); }
    void abort(const std::string& reason) override
    {
        ++aborts;
        m_inner->abort(reason);
    }
    bool aborted() const override { return m_inner->aborted(); }

    inline static std::atomic<int> allReduces{0}, broadcasts{0}, aborts{0};

private:
    std::unique_ptr<Communicator> m_inner;
};

TowerSetOptions options(int towers, bool onDevice, double ema = 0, bool deviceCollectives = false,
                        const std::string& backend = "reference")
{
    TowerSetOptions o;
    o.model = "fashion-fast"; // convolutions, batch norm, max-pool, dropout, linear layers
    o.backend = backend;
    o.towers = towers;
    o.optimizer.kind = "nesterov";
    o.seed = 3;
    o.emaDecay = ema;
    if (onDevice) o.makeOps = [backend](int t) { return makeFakeDeviceOps(backend, t % 2); };
    if (deviceCollectives) o.makeCommunicator = [](int n) { return makeStagingCommunicator(n); };
    return o;
}

// A small network without buffers (no batch norm), for fashion-fast's 28x28 grayscale batches:
// only the flag of the step before it can skip a step.
std::unique_ptr<Sequential> withoutBuffersNet()
{
    Conv2dOptions c;
    c.inChannels = 1;
    c.outChannels = 4;
    c.kernelH = c.kernelW = 3;
    c.padding = Padding::Same;
    c.activation = Activation::Relu;
    LinearOptions l;
    l.inFeatures = 14 * 14 * 4;
    l.outFeatures = 10;
    auto net = std::make_unique<Sequential>();
    net->add(std::make_unique<Conv2d>("conv", c));
    net->add(std::make_unique<MaxPool2d>("pool", 2, 2, Padding::Valid));
    net->add(std::make_unique<Flatten>("flatten"));
    net->add(std::make_unique<Dropout>("drop", 0.25));
    net->add(std::make_unique<Linear>("dense", l));
    return net;
}

std::unique_ptr<Model> withoutBuffers()
{
    return std::make_unique<Model>("without-buffers", Shape{28, 28, 1}, 10, withoutBuffersNet());
}

// A set of fashion-fast's 28x28 grayscale images, larger than the input (a crop is drawn), and a
// recipe that draws every distortion: crop, translation, flip, brightness, contrast and per-image
// standardisation.
ImageSet heldSet(std::int64_t count)
{
    ImageSet set;
    set.count = count;
    set.height = 30;
    set.width = 31;
    set.channels = 1;
    set.pixels.resize(std::size_t(count * set.imageBytes()));
    set.labels.resize(std::size_t(count));
    Rng rng(11);
    for (auto& b : set.pixels) b = std::uint8_t(rng.below(256));
    for (std::size_t i = 0; i < set.labels.size(); ++i) set.labels[i] = std::int32_t(i % 10);
    return set;
}

Preprocessing heldRecipe()
{
    Preprocessing p;
    p.height = p.width = 28;
    p.channels = 1;
    p.translate = 3;
    p.flip = true;
    p.brightnessDelta = 40;
    p.contrastLower = 0.3;
    p.contrastUpper = 1.7;
    p.normalization = Preprocessing::Normalization::PerImage;
    return p;
}

// The identity, with a forward that waits for the device (as a layer that looked at what it
// computed would) on the GPU of index `on` (-1: on any): a step through it there cannot be
// captured.
class WaitingLayer final : public Layer
{
public:
    // Waits in its forward, or with `inBackward` in its backward: after every later layer's
    // backward, so after every gradient bucket of the network behind it has been started.
    WaitingLayer(std::string name, int on, bool inBackward)
        : Layer(std::move(name)), m_on(on), m_inBackward(inBackward)
    {
    }
    std::string kind() const override { return "waiting"; }
    std::string describe() const override { return "identity that waits for the device"; }
    Shape outputShape(const Shape& input) const override { return input; }
    void forward(ExecContext& ctx, const Tensor& x, Tensor& y) override
    {
        ctx.ops.copy(x, y);
        if (!m_inBackward) wait(ctx);
    }
    void backward(ExecContext& ctx, const Tensor&, const Tensor&, const Tensor& dy,
                  Tensor* dx) override
    {
        if (dx) ctx.ops.copy(dy, *dx);
        if (m_inBackward) wait(ctx);
    }

private:
    void wait(ExecContext& ctx)
    {
        if (m_on < 0 || ctx.ops.device().index == m_on) ctx.ops.synchronize();
    }
    int m_on;
    bool m_inBackward;
};

std::unique_ptr<Model> waitingModel(int on, bool inBackward)
{
    auto net = std::make_unique<Sequential>();
    // The first layer: its backward comes last.
    net->add(std::make_unique<WaitingLayer>("wait", on, inBackward));
    net->add(withoutBuffersNet());
    return std::make_unique<Model>("waiting", Shape{28, 28, 1}, 10, std::move(net));
}

// Drives `towers` through steps [from, to) on batch(s) with a learning rate that changes every
// step, one at a time or issued one ahead of their results (the step discarded behind a step
// that is not finite issued again); appends each step's result to `results`, in step order.
void drive(TowerSet& towers, std::int64_t from, std::int64_t to,
           const std::function<const Batch&(std::int64_t)>& batch, bool ahead,
           std::vector<TowerStepResult>& results)
{
    const auto lr = [](std::int64_t s) { return 0.05 / double(1 + s); };
    std::int64_t next = from, collected = from;
    while (collected < to) {
        if (next < to) {
            towers.issue(batch(next), next, lr(next));
            ++next;
        }
        if (ahead && towers.inFlight() < TowerSet::kMaxInFlight && next < to) continue;
        const TowerStepResult r = towers.collect();
        if (!r.finite) next = collected + 1; // what was discarded behind it goes again
        results.push_back(r);
        ++collected;
    }
}

// Drives `plain` and `graphed` (the same towers with graphs off and on) through the same 6 steps,
// issued ahead, and checks that they lose and end the same.
void expectTheSameSixSteps(TowerSet& plain, TowerSet& graphed, int towers)
{
    SyntheticBatches data(plain.model().inputShape(), plain.model().numClasses(), towers, 4, 64, 5);
    const auto batch = [&](std::int64_t s) -> const Batch& {
        data.seek(s);
        return data.next();
    };
    std::vector<TowerStepResult> a, b;
    drive(plain, 0, 6, batch, true, a);
    drive(graphed, 0, 6, batch, true, b);
    QCOMPARE(b.size(), a.size());
    for (std::size_t i = 0; i < a.size(); ++i) QCOMPARE(b[i].loss, a[i].loss);
    expectSameState(plain, graphed);
    QCOMPARE(QString::fromStdString(graphed.compareReplicas()), QString());
}

LoaderOptions heldLoader(bool drawsOnly)
{
    LoaderOptions o;
    o.towers = 2;
    o.batchPerTower = 8;
    o.seed = 5;
    o.workers = 0;
    o.drawsOnly = drawsOnly;
    return o;
}

} // namespace

class TestDeviceTowers : public QObject
{
    Q_OBJECT
private slots:
    void tensorsNeedTheirBackend()
    {
        QVERIFY_THROWS_EXCEPTION(Unsupported, Tensor({4}, DType::Float32, kGpu0));
    }

    void tensorsOnADevice()
    {
        FakeDeviceScope scope;
        {
            Tensor host = Tensor::zeros({2, 3}, DType::Float32);
            for (int i = 0; i < 6; ++i) host.setAt(i, i + 0.5);
            Tensor dev = host.copyTo(kGpu0);
            QCOMPARE(dev.device(), kGpu0);
            QVERIFY(QString::fromStdString(dev.describe()).endsWith(QStringLiteral("on cuda:0")));
            // Host access to device bytes is refused with words, never a crash.
            QVERIFY_THROWS_EXCEPTION(InvalidArgument, dev.at(0));
            QVERIFY_THROWS_EXCEPTION(InvalidArgument, dev.data<float>());
            QVERIFY_THROWS_EXCEPTION(InvalidArgument, dev.fill(1.0));
            QVERIFY_THROWS_EXCEPTION(InvalidArgument, dev.to(DType::Float64));
            try {
                dev.at(0);
            } catch (const InvalidArgument& e) {
                QVERIFY2(QString::fromUtf8(e.what()).contains(QStringLiteral("copyTo")), e.what());
            }
            Tensor clone = dev.clone();
            QCOMPARE(clone.device(), kGpu0);
            QVERIFY(sameBytes(clone, host));
            Tensor back = Tensor::zeros({2, 3}, DType::Float32);
            back.copyFrom(dev.slice(0, 2));
            QCOMPARE(back.at(5), 5.5);
            dev.setZero();
            QCOMPARE(dev.copyTo(Device::host()).at(4), 0.0);
            // ensure() reuses a buffer only on the same device.
            Tensor t = Tensor::zeros({6}, DType::Float32);
            const void* before = t.raw();
            Tensor::ensure(t, {6}, DType::Float32, kGpu0);
            QCOMPARE(t.device(), kGpu0);
            QVERIFY(t.raw() != before);
            const void* onDevice = t.raw();
            Tensor::ensure(t, {3}, DType::Float32, kGpu0);
            QCOMPARE(t.raw(), onDevice);
        }
        QCOMPARE(scope.memory().liveAllocations(), 0);
    }

    void stagedOpsComputeWhatTheInnerBackendComputes()
    {
        FakeDeviceScope scope;
        Rng rng(4);
        const auto d = makeConv2dDesc({2, 9, 8, 5}, 3, 5, 5, 2, 2, Padding::Same);
        const Tensor x = randomTensor(d.inputShape(), DType::Float32, rng);
        const Tensor w = randomTensor(d.weightShape(), DType::Float32, rng);
        const Tensor b = randomTensor({3}, DType::Float32, rng);
        auto host = makeReferenceOps();
        auto staged = makeFakeDeviceOps("reference");
        QCOMPARE(staged->device(), kGpu0);
        Tensor want, got;
        host->conv2dForward(d, x, w, b, want, Activation::Relu);
        staged->conv2dForward(d, x.copyTo(kGpu0), w.copyTo(kGpu0), b.copyTo(kGpu0), got,
                              Activation::Relu);
        QCOMPARE(got.device(), kGpu0);
        QVERIFY(sameBytes(got, want));
        // A host tensor given to ops on the device is refused, naming it.
        Tensor y;
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 staged->conv2dForward(d, x, w, b, y, Activation::None));
    }

    // The stand-in device's captures keep to a CUDA graph's rules: the ops are recorded, not run;
    // a replay runs them on the tensors' storage with the values they had, reading a host
    // tensor's bytes as they are then; host work runs at each replay; waiting is refused in a
    // capture; a replay that would write a tensor made anew, or use one that nothing else holds
    // any more (freed memory, on a GPU), throws.
    void stagedOpsCaptureAsAGraphDoes()
    {
        FakeDeviceScope scope;
        auto ops = makeFakeDeviceOps("reference", 0, true);
        QCOMPARE(QString::fromStdString(ops->captureUnavailable()), QString());
        QVERIFY(!makeFakeDeviceOps("reference")->captureUnavailable().empty());
        Tensor host = Tensor::pinned({4}, DType::Float32);
        host.fill(1);
        Tensor x, y;
        ops->upload(host, x);
        ops->reluForward(x, y); // made before the capture
        int counted = 0;
        ops->beginCapture();
        QVERIFY(ops->capturing());
        ops->upload(host, x);
        ops->axpy(2.0, x, y);
        ops->hostWork([&] { ++counted; });
        QVERIFY_THROWS_EXCEPTION(Unsupported, ops->synchronize());
        QVERIFY_THROWS_EXCEPTION(Unsupported, ops->mark());
        Tensor fresh;
        QVERIFY_THROWS_EXCEPTION(Unsupported, ops->upload(host, fresh)); // it would make one
        auto work = ops->endCapture();
        QVERIFY(!ops->capturing());
        QCOMPARE(work->size(), std::size_t(2));
        QCOMPARE(counted, 0);
        QCOMPARE(y.onHost().at(0), 1.0); // nothing has run
        work->replay();
        QCOMPARE(counted, 1);
        QCOMPARE(y.onHost().at(0), 3.0);
        host.fill(-1); // read when replayed
        work->replay();
        QCOMPARE(counted, 2);
        QCOMPARE(y.onHost().at(3), 1.0);
        // y remade: the replay would write memory nobody has any more.
        y = Tensor();
        QVERIFY_THROWS_EXCEPTION(Error, work->replay());
        // An exception in a capture: abandoned, nothing kept, the ops as before.
        ops->beginCapture();
        ops->abandonCapture();
        QVERIFY(!ops->capturing());
        ops->reluForward(x, y);
        QCOMPARE(y.onHost().at(0), 0.0);
        // Host ops cannot capture at all.
        QVERIFY_THROWS_EXCEPTION(Unsupported, makeReferenceOps()->beginCapture());
    }

    // Work outside a capture (Ops::outsideCapture: a collective between a step's captured parts)
    // runs at its place in each replay: after the part before it (and that part's host work),
    // before the part after it, which sees what it did; never during the capture. An exception
    // after a cut abandons every part, nothing of them run.
    void outsideWorkCutsACapture()
    {
        FakeDeviceScope scope;
        auto ops = makeFakeDeviceOps("reference", 0, true);
        Tensor host = Tensor::pinned({3}, DType::Float32);
        host.fill(2);
        Tensor x, y, z, w;
        ops->upload(host, x);
        ops->reluForward(x, y);
        ops->reluForward(y, z);
        ops->reluForward(z, w);
        std::vector<std::string> order;
        // Not capturing: at once.
        ops->outsideCapture([&] { order.push_back("now"); });
        QCOMPARE(order, std::vector<std::string>{"now"});
        order.clear();
        ops->beginCapture();
        ops->upload(host, x);
        ops->reluForward(x, y);
        ops->hostWork([&] { order.push_back("host work"); });
        // Between the parts: z = 3 y, through the host (as a staged collective would).
        ops->outsideCapture([&] {
            order.push_back("outside");
            Tensor h = y.onHost();
            for (std::int64_t i = 0; i < h.numel(); ++i) h.data<float>()[i] *= 3;
            z.copyFrom(h);
        });
        QVERIFY(ops->capturing());
        ops->reluForward(z, w);
        ops->hostWork([&] { order.push_back("host work after"); });
        auto work = ops->endCapture();
        QVERIFY(order.empty()); // nothing ran while capturing
        QCOMPARE(work->size(), std::size_t(3));
        work->replay();
        QCOMPARE(order, (std::vector<std::string>{"host work", "outside", "host work after"}));
        QCOMPARE(w.onHost().at(1), 6.0);
        host.fill(5);
        work->replay();
        QCOMPARE(w.onHost().at(2), 15.0);
        // Abandoned after a cut: no part of it kept, the outside work never run.
        order.clear();
        ops->beginCapture();
        ops->reluForward(x, y);
        ops->outsideCapture([&] { order.push_back("outside"); });
        ops->reluForward(y, z);
        ops->abandonCapture();
        QVERIFY(!ops->capturing());
        QVERIFY(order.empty());
        // A part that cannot end (it used a tensor made in it and let go) ends the capture
        // there, and says why; the outside work never runs, the ops go on.
        ops->beginCapture();
        ops->reluForward(x, y);
        ops->outsideCapture([&] { order.push_back("first"); });
        {
            Tensor gone;
            Tensor::ensure(gone, {3}, DType::Float32, kGpu0);
            ops->reluForward(gone, y);
        }
        QVERIFY_THROWS_EXCEPTION(Unsupported,
                                 ops->outsideCapture([&] { order.push_back("second"); }));
        QVERIFY(!ops->capturing());
        ops->abandonCapture(); // as a caller's handler does: nothing left to abandon
        QVERIFY(order.empty());
        ops->reluForward(x, y);
        QCOMPARE(y.onHost().at(0), 5.0);
    }

    // CUDA graphs (TowerSetOptions::graphs) on the stand-in device, whose captures keep a graph's
    // rules: each slot's step is captured once warm and replayed, and the run is bitwise the run
    // issued op by op: the losses, a skipped NaN step, a smaller batch (captures dropped and made
    // again), an evaluation between steps (dropped), the weights, batch-norm statistics and their
    // count, the optimizer's state and step count, the EMA. A lone tower, and two towers with
    // device collectives: each tower's step captured in parts, the buckets' averages (or the one
    // collective after backward) launched between them.
    void capturedStepsEqualStepsOpByOp_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("optimizer");
        QTest::addColumn<bool>("ahead");
        QTest::addColumn<int>("nanStep");
        QTest::addColumn<int>("towers");
        QTest::addColumn<double>("bucketMb");
        for (const char* model : {"fashion-fast", "without-buffers"})
            for (const char* kind : {"momentum", "adam"})
                for (bool ahead : {false, true})
                    QTest::addRow("%s, %s, %s", model, kind, ahead ? "issued ahead" : "one by one")
                        << QString(model) << QString(kind) << ahead << (ahead ? 9 : 3) << 1 << 0.0;
        const struct
        {
            const char* name;
            double mb;
        } buckets[] = {{"a bucket per tensor", 1e-9},
                       {"0.01 MiB buckets", 0.01},
                       {"one bucket", 1e6},
                       {"one collective after backward", 0}};
        for (const auto& b : buckets)
            for (bool ahead : {false, true})
                QTest::addRow("2 towers, %s, %s", b.name, ahead ? "issued ahead" : "one by one")
                    << QString("fashion-fast") << QString(ahead ? "adam" : "momentum") << ahead
                    << (ahead ? 4 : 9) << 2 << b.mb;
    }
    void capturedStepsEqualStepsOpByOp()
    {
        QFETCH(QString, model);
        QFETCH(QString, optimizer);
        QFETCH(bool, ahead);
        QFETCH(int, nanStep);
        QFETCH(int, towers);
        QFETCH(double, bucketMb);
        FakeDeviceScope scope;
        {
            TowerSetOptions plain = options(towers, true, 0.9, towers > 1), graphed = plain;
            for (TowerSetOptions* o : {&plain, &graphed}) {
                o->model = model.toStdString();
                if (model == "without-buffers") o->build = withoutBuffers;
                o->optimizer.kind = optimizer.toStdString();
                o->makeOps = [](int t) { return makeFakeDeviceOps("reference", t, true); };
                o->bucketMb = bucketMb;
                o->firstBucketMb = std::min(bucketMb, 1.0);
            }
            plain.graphs = false;
            TowerSet one(plain), two(graphed);
            QVERIFY2(two.graphDescription().rfind("captured", 0) == 0,
                     two.graphDescription().c_str());
            QCOMPARE(two.graphDescription().find("in parts") != std::string::npos, towers > 1);
            QCOMPARE(QString::fromStdString(one.graphDescription()),
                     QString("issued op by op (CUDA graphs off)"));
            const Shape in = one.model().inputShape();
            const int classes = one.model().numClasses();
            SyntheticBatches big(in, classes, towers, 4, 64, 17),
                small(in, classes, towers, 3, 64, 17);
            big.injectNanAt(nanStep);
            const auto batch = [&](std::int64_t s) -> const Batch& {
                SyntheticBatches& from = s == 11 ? small : big; // a smaller batch, once
                from.seek(s);
                return from.next();
            };
            std::vector<TowerStepResult> a, b;
            for (TowerSet* t : {&one, &two}) {
                auto& results = t == &one ? a : b;
                drive(*t, 0, 7, batch, ahead, results);
                // Larger batches than the steps': the layers' tensors are made anew.
                const auto e = t->evaluate(12, 6, big.evaluationBatches(), true);
                QCOMPARE(e.examples, std::int64_t(12));
                drive(*t, 7, 16, batch, ahead, results);
            }
            QVERIFY2(two.replayedSteps() >= 6, std::to_string(two.replayedSteps()).c_str());
            QCOMPARE(one.replayedSteps(), std::int64_t(0));
            QCOMPARE(b.size(), a.size());
            for (std::size_t i = 0; i < a.size(); ++i) {
                QCOMPARE(b[i].step, a[i].step);
                QCOMPARE(b[i].finite, a[i].finite);
                QCOMPARE(b[i].discarded, a[i].discarded);
                if (a[i].finite) QCOMPARE(b[i].loss, a[i].loss);
            }
            QCOMPARE(a[std::size_t(nanStep)].finite, false);
            QCOMPARE(two.optimizer().stepCount(), std::int64_t(15));
            expectSameState(one, two);
            QCOMPARE(QString::fromStdString(two.compareReplicas()), QString());
        }
        QCOMPARE(scope.memory().liveAllocations(), 0);
    }

    // A step that cannot be captured (a layer waits for the device in it) is issued op by op,
    // as is every step after it, with one line saying why; the run is the same. With two towers
    // where only tower 1's capture fails, tower 0 replays its capture in that step while tower 1
    // goes op by op (the collectives match), and both go op by op from the next. A capture that
    // fails at the end of backward has counted every gradient bucket as started (and started
    // none): the step op by op starts them all again, each once.
    void aFailedCaptureFallsBackToStepsOpByOp_data()
    {
        QTest::addColumn<int>("towers");
        QTest::addColumn<int>("waitsOn");
        QTest::addColumn<bool>("inBackward");
        QTest::addColumn<double>("bucketMb");
        QTest::addColumn<QString>("why");
        QTest::addRow("a lone tower")
            << 1 << -1 << false << 25.0 << "issued op by op: capturing a step failed";
        QTest::addRow("2 towers, tower 1 waits")
            << 2 << 1 << false << 25.0 << "issued op by op: capturing tower 1's step failed";
        QTest::addRow("2 towers, tower 1 waits after backward, a bucket per tensor")
            << 2 << 1 << true << 1e-6 << "issued op by op: capturing tower 1's step failed";
        QTest::addRow("2 towers, both wait after backward, one bucket")
            << 2 << -1 << true << 25.0 << "issued op by op: capturing tower 0's step failed";
    }
    void aFailedCaptureFallsBackToStepsOpByOp()
    {
        QFETCH(int, towers);
        QFETCH(int, waitsOn);
        QFETCH(bool, inBackward);
        QFETCH(double, bucketMb);
        QFETCH(QString, why);
        FakeDeviceScope scope;
        {
            TowerSetOptions plain = options(towers, true, 0.9, towers > 1), graphed = plain;
            for (TowerSetOptions* o : {&plain, &graphed}) {
                o->bucketMb = o->firstBucketMb = bucketMb;
                o->build = [waitsOn, inBackward] { return waitingModel(waitsOn, inBackward); };
                o->makeOps = [](int t) { return makeFakeDeviceOps("reference", t, true); };
            }
            plain.graphs = false;
            TowerSet one(plain), two(graphed);
            expectTheSameSixSteps(one, two, towers);
            // Tower 0 of two captured its third step (its first slot's second) and replayed it,
            // unless it waits too.
            QCOMPARE(two.replayedSteps(), std::int64_t(waitsOn == 1 ? 1 : 0));
            const QString said = QString::fromStdString(two.graphDescription());
            QVERIFY2(said.startsWith(why + " (synchronize during a capture"), qPrintable(said));
        }
        QCOMPARE(scope.memory().liveAllocations(), 0);
    }

    // A graph that the device made and uploaded but refuses to launch has run nothing: that step
    // goes op by op, as every later one, with one line saying why; the run is the same.
    void aRefusedFirstLaunchFallsBackToStepsOpByOp()
    {
        FakeDeviceScope scope;
        {
            TowerSetOptions plain = options(1, true, 0.9), graphed = plain;
            plain.makeOps = [](int t) { return makeFakeDeviceOps("reference", t, true); };
            graphed.makeOps = [](int t) { return makeFakeDeviceOps("reference", t, true, 1); };
            plain.graphs = false;
            TowerSet one(plain), two(graphed);
            expectTheSameSixSteps(one, two, 1);
            QCOMPARE(two.replayedSteps(), std::int64_t(0));
            const QString said = QString::fromStdString(two.graphDescription());
            QVERIFY2(said.startsWith(QStringLiteral(
                         "issued op by op: capturing a step failed (its first launch: the "
                         "stand-in device refused to launch the graph")),
                     qPrintable(said));
        }
        QCOMPARE(scope.memory().liveAllocations(), 0);
    }

    void towersOnTheDeviceEqualTowersOnTheHost()
    {
        FakeDeviceScope scope;
        {
            TowerSet host(options(2, false, 0.99)), dev(options(2, true, 0.99));
            QCOMPARE(dev.device(0), kGpu0);
            QCOMPARE(dev.device(1), (Device{DeviceKind::Cuda, 1}));
            QCOMPARE(host.device(1), Device::host());
            for (auto* p : dev.model(1).parameters())
                if (p->value.dtype() == DType::Float32)
                    QCOMPARE(p->value.device(), (Device{DeviceKind::Cuda, 1}));
            SyntheticBatches data(host.model().inputShape(), host.model().numClasses(), 2, 4, 64,
                                  9);
            for (int s = 0; s < 3; ++s) {
                const Batch& batch = data.next();
                const auto a = host.step(batch, s, 0.05);
                const auto b = dev.step(batch, s, 0.05);
                QCOMPARE(b.loss, a.loss);
                QVERIFY(b.finite);
            }
            QCOMPARE(QString::fromStdString(dev.compareReplicas()), QString());
            const auto& hp = host.model().parameters();
            const auto& dp = dev.model().parameters();
            for (std::size_t i = 0; i < hp.size(); ++i)
                QVERIFY2(sameBytes(dp[i]->value, hp[i]->value), hp[i]->name.c_str());
            // Optimizer state lives beside the weights, and equals the host's.
            const auto hs = host.optimizer().state(host.model().parameters());
            const auto ds = dev.optimizer().state(dev.model().parameters());
            QCOMPARE(ds.size(), hs.size());
            for (std::size_t i = 0; i < hs.size(); ++i)
                QVERIFY2(sameBytes(ds[i].second, hs[i].second), hs[i].first.c_str());

            // Evaluation copies each batch to the tower's device and the logits back.
            const auto ea = host.evaluate(40, 16, data.evaluationBatches(), false);
            const auto eb = dev.evaluate(40, 16, data.evaluationBatches(), false);
            QCOMPARE(eb.correct, ea.correct);
            QCOMPARE(eb.meanCrossEntropy, ea.meanCrossEntropy);
            const auto emaA = host.evaluate(40, 16, data.evaluationBatches(), true);
            const auto emaB = dev.evaluate(40, 16, data.evaluationBatches(), true);
            QCOMPARE(emaB.meanCrossEntropy, emaA.meanCrossEntropy);

            // A checkpoint of a device replica holds host tensors, the same bytes.
            const Checkpoint c = makeCheckpoint(dev.model(), {}, dev.ema()->state(),
                                                dev.optimizer().state(dev.model().parameters()));
            for (const auto& [name, t] : c.weights) QVERIFY2(t.device().isHost(), name.c_str());
            for (const auto& [name, t] : c.optimizer) QVERIFY2(t.device().isHost(), name.c_str());
            const QTemporaryDir dir;
            const auto path =
                std::filesystem::path(dir.path().toStdString()) / "device.safetensors";
            writeCheckpoint(path, c);
            QVERIFY(std::filesystem::file_size(path) > 0);

            // Loading a state copies it onto every device replica.
            NamedTensors weights;
            for (const auto* p : host.model().parameters()) weights.emplace_back(p->name, p->value);
            dev.loadState(weights, host.optimizer().state(host.model().parameters()), {});
            QCOMPARE(QString::fromStdString(dev.compareReplicas()), QString());
        }
        QCOMPARE(scope.memory().liveAllocations(), 0);
    }

    // The path of NCCL and the same-GPU kernel: the communicator takes the tensors where they
    // live, and divergence is found on the device (a sum of squares per tensor).
    void deviceCollectivesEqualHostAveraging()
    {
        FakeDeviceScope scope;
        {
            TowerSet host(options(2, false)), dev(options(2, true, 0, true));
            QVERIFY(QString::fromStdString(dev.allReduceDescription())
                        .contains(QStringLiteral("given communicator")));
            QCOMPARE(QString::fromStdString(host.allReduceDescription()),
                     QStringLiteral("on the host"));
            expectSameTraining(host, dev, 11, 4, 2);
        }
        QCOMPARE(scope.memory().liveAllocations(), 0);
    }

    // Where the averages stay on the device, the update kernels read the step's finiteness flag
    // themselves and the host reads it once, after the step: a NaN step is still skipped on every
    // tower, and a skipped first step does not count (momentum's buffer starts from the next
    // step's gradient, Adam's bias correction from step 1), for every optimizer, with the moving
    // averages, one tower or two; with dropout, whose step the device reads too.
    void aDivergedStepIsSkippedOnTheDevice_data()
    {
        QTest::addColumn<QString>("optimizer");
        QTest::addColumn<int>("towers");
        QTest::addColumn<int>("nanStep");
        QTest::addColumn<bool>("dropout");
        for (const char* kind : {"sgd", "momentum", "nesterov", "adam"})
            for (int towers : {1, 2})
                for (int nan : {0, 2})
                    QTest::addRow("%s, %d tower(s), NaN at step %d", kind, towers, nan)
                        << QString(kind) << towers << nan << false;
        for (int towers : {1, 2})
            QTest::addRow("adam, %d tower(s), NaN at step 2, dropout", towers)
                << QString("adam") << towers << 2 << true;
    }
    void aDivergedStepIsSkippedOnTheDevice()
    {
        QFETCH(QString, optimizer);
        QFETCH(int, towers);
        QFETCH(int, nanStep);
        QFETCH(bool, dropout);
        FakeDeviceScope scope;
        {
            TowerSetOptions h = options(towers, false, 0.9), d = options(towers, true, 0.9, true);
            for (TowerSetOptions* o : {&h, &d}) {
                o->optimizer.kind = optimizer.toStdString();
                o->bucketMb = 0.01;
                if (dropout) o->build = withoutBuffers;
            }
            TowerSet host(h), dev(d);
            expectSameTraining(host, dev, 17, 4, nanStep);
            QCOMPARE(dev.optimizer().stepCount(), std::int64_t(3));
            const auto he = host.ema()->state(), de = dev.ema()->state();
            for (std::size_t i = 0; i < he.size(); ++i)
                QVERIFY2(sameBytes(de[i].second, he[i].second), he[i].first.c_str());
            // Each tower's step split, in device time, is there and sane.
            SyntheticBatches more(host.model().inputShape(), host.model().numClasses(), towers, 4,
                                  64, 3);
            const auto r = dev.step(more.next(), 4, 0.05);
            for (const TowerTimes& tt : r.towers) {
                QVERIFY(tt.computeMs > 0);
                QVERIFY(tt.commMs >= 0 && tt.dataMs >= 0 && tt.updateMs > 0);
            }
        }
        QCOMPARE(scope.memory().liveAllocations(), 0);
    }

    // Steps issued one ahead of their results (TowerSet::issue, collect), as the trainer drives
    // GPU towers: bitwise what towers stepped one at a time compute. A NaN step is found one step
    // late; the step issued behind it is discarded (its updates skipped on the device by the same
    // flag; on host towers, not run) and the towers are as before the NaN step, so that issued
    // again the run goes on bitwise as the one stepped one at a time: weights, buffers, optimizer
    // state and step count, moving averages.
    void stepsIssuedAhead_data()
    {
        QTest::addColumn<bool>("onDevice");
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("optimizer");
        QTest::addColumn<int>("towers");
        QTest::addColumn<int>("nanStep");
        // fashion-fast's batch-norm statistics carry a NaN into the next step's averages; the
        // flag of the next step of a network without buffers is set only by the one before it.
        for (bool device : {true, false})
            for (const char* model : {"fashion-fast", "without-buffers"})
                for (const char* kind : {"momentum", "adam"})
                    for (int towers : {1, 2}) {
                        if (!device && towers == 1) continue;
                        for (int nan : {0, 3})
                            QTest::addRow("%s, %s, %s, %d tower(s), NaN at step %d",
                                          device ? "stand-in GPUs" : "host", model, kind, towers,
                                          nan)
                                << device << QString(model) << QString(kind) << towers << nan;
                    }
    }
    void stepsIssuedAhead()
    {
        QFETCH(bool, onDevice);
        QFETCH(QString, model);
        QFETCH(QString, optimizer);
        QFETCH(int, towers);
        QFETCH(int, nanStep);
        FakeDeviceScope scope;
        {
            // The same towers, stepped one at a time and issued ahead.
            TowerSetOptions h = options(towers, onDevice, 0.9, onDevice), d = h;
            for (TowerSetOptions* o : {&h, &d}) {
                o->model = model.toStdString();
                if (model == "without-buffers") o->build = withoutBuffers;
                o->optimizer.kind = optimizer.toStdString();
            }
            TowerSet one(h), ahead(d);
            QCOMPARE(ahead.pipelines(), onDevice);
            const auto lr = [](std::int64_t s) { return 0.05 / double(1 + s); };
            constexpr int kSteps = 5;
            SyntheticBatches a(one.model().inputShape(), one.model().numClasses(), towers, 4, 64,
                               17),
                b(one.model().inputShape(), one.model().numClasses(), towers, 4, 64, 17);
            a.injectNanAt(nanStep);
            b.injectNanAt(nanStep);
            std::vector<TowerStepResult> expected;
            for (int s = 0; s < kSteps; ++s) expected.push_back(one.step(a.next(), s, lr(s)));

            std::int64_t next = 0, collected = 0;
            int discarded = 0;
            while (collected < kSteps) {
                if (next < kSteps) { // the batch's memory is the next batch's: own copies
                    b.seek(next);
                    ahead.issue(b.next(), next, lr(next));
                    ++next;
                }
                if (ahead.inFlight() < TowerSet::kMaxInFlight && next < kSteps) continue;
                const TowerStepResult r = ahead.collect();
                const TowerStepResult& e = expected[std::size_t(collected)];
                QCOMPARE(r.step, collected);
                QCOMPARE(r.finite, collected != nanStep);
                QCOMPARE(r.finite, e.finite);
                if (r.finite) {
                    QCOMPARE(r.loss, e.loss);
                    QCOMPARE(r.discarded, 0);
                } else { // the step behind it, issued again
                    QCOMPARE(r.discarded, int(next - collected - 1));
                    discarded += r.discarded;
                    next = collected + 1;
                }
                QCOMPARE(int(r.towers.size()), towers);
                for (const TowerTimes& tt : r.towers)
                    QVERIFY(tt.computeMs >= 0 && tt.commMs >= 0 && tt.dataMs >= 0);
                ++collected;
            }
            QCOMPARE(ahead.inFlight(), std::size_t(0));
            if (nanStep >= 0 && nanStep < kSteps - 1) QCOMPARE(discarded, 1);
            QCOMPARE(QString::fromStdString(ahead.compareReplicas()), QString());
            expectSameState(one, ahead);
        }
        QCOMPARE(scope.memory().liveAllocations(), 0);
    }

    // What needs the towers' state refuses while steps are in flight; more than kMaxInFlight is
    // refused; a collect() with nothing issued is refused.
    void stepsInFlightGuardTheState()
    {
        FakeDeviceScope scope;
        CountingCommunicator::aborts = 0;
        {
            auto o = options(2, true, 0, true);
            o.makeCommunicator = [](int n) { return std::make_unique<CountingCommunicator>(n); };
            TowerSet set(o);
            SyntheticBatches data(set.model().inputShape(), set.model().numClasses(), 2, 4, 64, 5);
            QVERIFY_THROWS_EXCEPTION(InvalidArgument, set.collect());
            set.issue(data.next(), 0, 0.01);
            set.issue(data.next(), 1, 0.01);
            QVERIFY_THROWS_EXCEPTION(InvalidArgument, set.issue(data.next(), 2, 0.01));
            QVERIFY_THROWS_EXCEPTION(InvalidArgument, set.step(data.next(), 2, 0.01));
            QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                     set.evaluate(8, 4, data.evaluationBatches(), false));
            QVERIFY_THROWS_EXCEPTION(InvalidArgument, set.compareReplicas());
            const std::string msg = towers::test::messageOf([&] { set.compareReplicas(); });
            QVERIFY2(msg.find("2 steps issued and not collected") != std::string::npos,
                     msg.c_str());
            QCOMPARE(set.collect().step, std::int64_t(0));
            QCOMPARE(set.collect().step, std::int64_t(1));
            QCOMPARE(set.evaluate(8, 4, data.evaluationBatches(), false).examples, std::int64_t(8));
            // Towers destroyed with steps in flight (leaving on an error) abort their device
            // collectives first (which may wait for a process that failed), let the steps
            // finish, and free everything; collected steps abort nothing.
            set.issue(data.next(), 2, 0.01);
            set.issue(data.next(), 3, 0.01);
            QCOMPARE(CountingCommunicator::aborts.load(), 0);
        }
        QCOMPARE(CountingCommunicator::aborts.load(), 1);
        QCOMPARE(scope.memory().liveAllocations(), std::int64_t(0));
        QCOMPARE(scope.memory().livePinned(), std::int64_t(0));
    }

    // Buckets on GPU towers, averaged while backward runs: through host copies bucket by bucket
    // (a GPU tower with the host's averaging), or where the tensors live (the stand-in for NCCL
    // and the same-GPU kernel), for a bucket per tensor, a few and one: bitwise what host towers
    // compute with one collective after backward, a NaN step skipped everywhere included.
    void bucketsOnTheDevice_data()
    {
        QTest::addColumn<bool>("deviceCollectives");
        QTest::addColumn<double>("bucketMb");
        for (bool device : {false, true}) {
            const char* where = device ? "device collectives" : "through the host";
            QTest::addRow("%s, a bucket per tensor", where) << device << 1e-9;
            QTest::addRow("%s, 0.01 MiB buckets", where) << device << 0.01;
            QTest::addRow("%s, one bucket", where) << device << 1e6;
        }
    }
    void bucketsOnTheDevice()
    {
        QFETCH(bool, deviceCollectives);
        QFETCH(double, bucketMb);
        FakeDeviceScope scope;
        {
            TowerSetOptions plain = options(2, false, 0.99);
            plain.bucketMb = 0;
            TowerSetOptions bucketed = options(2, true, 0.99, deviceCollectives);
            bucketed.bucketMb = bucketMb;
            bucketed.firstBucketMb = std::min(bucketMb, 1.0);
            TowerSet host(plain), dev(bucketed);
            QVERIFY2(dev.bucketDescription().find("while backward runs") != std::string::npos,
                     dev.bucketDescription().c_str());
            expectSameTraining(host, dev, 13, 3, 1);
        }
        QCOMPARE(scope.memory().liveAllocations(), 0);
    }

    // One tower has nothing to average: its gradients stay on its device (no collective, no
    // copy to the host and back), divergence is still found there, and it computes bitwise what
    // one host tower computes.
    void oneTowerAveragesNothing()
    {
        FakeDeviceScope scope;
        {
            TowerSetOptions counted = options(1, true);
            counted.makeCommunicator = [](int n) {
                return std::make_unique<CountingCommunicator>(n);
            };
            CountingCommunicator::allReduces = 0;
            CountingCommunicator::broadcasts = 0;
            TowerSet host(options(1, false)), dev(options(1, true)), given(counted);
            SyntheticBatches data(host.model().inputShape(), host.model().numClasses(), 1, 8, 64,
                                  5);
            data.injectNanAt(1);
            for (int s = 0; s < 3; ++s) {
                const Batch& batch = data.next();
                const auto a = host.step(batch, s, 0.05);
                const auto b = dev.step(batch, s, 0.05);
                const auto c = given.step(batch, s, 0.05);
                QCOMPARE(a.finite, s != 1); // the NaN step is skipped
                QCOMPARE(b.finite, a.finite);
                QCOMPARE(c.finite, a.finite);
                if (a.finite) {
                    QCOMPARE(b.loss, a.loss);
                    QCOMPARE(c.loss, a.loss);
                }
            }
            QCOMPARE(CountingCommunicator::allReduces.load(), 0);
            QCOMPARE(CountingCommunicator::broadcasts.load(), 0);
            const auto& hp = host.model().parameters();
            for (TowerSet* set : {&dev, &given}) {
                const auto& dp = set->model().parameters();
                for (std::size_t i = 0; i < hp.size(); ++i)
                    QVERIFY2(sameBytes(dp[i]->value, hp[i]->value), hp[i]->name.c_str());
            }
        }
        QCOMPARE(scope.memory().liveAllocations(), 0);
    }

    // Out of device memory mid-step: the error keeps its type and says which tower, on which
    // device, and how much was asked; every tower is released.
    void outOfMemorySaysWhichTower()
    {
        FakeDeviceScope scope;
        {
            TowerSet dev(options(2, true));
            SyntheticBatches data(dev.model().inputShape(), dev.model().numClasses(), 2, 64, 256,
                                  3);
            scope.memory().setAllocationLimit(
                64 * 1024); // the weights fit; a batch's activations do not
            try {
                dev.step(data.next(), 0, 0.05);
                QFAIL("a step larger than the device succeeded");
            } catch (const DeviceOutOfMemory& e) {
                const QString what = QString::fromUtf8(e.what());
                QVERIFY2(what.contains(QRegularExpression(
                             QStringLiteral("^tower [01] on cuda:[01]: out of memory"))),
                         e.what());
                QVERIFY2(what.contains(QStringLiteral("asked for")), e.what());
            }
            scope.memory().setAllocationLimit(0);
        }
        QCOMPARE(scope.memory().liveAllocations(), 0);
    }

    // Batches for GPU towers live in page-locked memory from the backend (plain memory without
    // one), with the same contents.
    void pinnedBatches()
    {
        ImageSet set;
        set.count = 40;
        set.height = 4;
        set.width = 4;
        set.channels = 1;
        set.pixels.resize(40 * 16);
        set.labels.resize(40);
        for (std::size_t i = 0; i < set.pixels.size(); ++i) set.pixels[i] = std::uint8_t(i * 7);
        for (std::size_t i = 0; i < set.labels.size(); ++i) set.labels[i] = std::int32_t(i % 3);
        Preprocessing recipe;
        recipe.height = recipe.width = 4;
        recipe.channels = 1;
        LoaderOptions o;
        o.towers = 2;
        o.batchPerTower = 4;
        o.augment = false;
        BatchLoader plain(set, recipe, o);
        const Batch want = plain.next();
        const Tensor wantImages = want.images.clone();
        FakeDeviceScope scope;
        {
            o.pinned = true;
            BatchLoader loader(set, recipe, o);
            const Batch& b = loader.next();
            QVERIFY(scope.memory().livePinned() >= 2);
            QVERIFY(sameBytes(b.images, wantImages));
        }
        QCOMPARE(scope.memory().livePinned(), 0);
    }

    // Issue 17's data that never waits: the towers hold the training set where they compute and
    // the loader sends only each example's draws; the images the device makes are the loader's,
    // bit for bit, so the training is too.
    void heldSetMakesTheLoadersImages()
    {
        FakeDeviceScope scope;
        const ImageSet set = heldSet(40);
        const Preprocessing recipe = heldRecipe();
        BatchLoader images(set, recipe, heldLoader(false)), draws(set, recipe, heldLoader(true));
        Tensor source({set.count, set.height, set.width, set.channels}, DType::UInt8);
        std::memcpy(source.raw(), set.pixels.data(), set.pixels.size());
        for (const char* backend : {"reference", "onednn"}) {
            auto ops = makeFakeDeviceOps(backend);
            Tensor deviceSource, deviceDraws, made;
            ops->upload(source, deviceSource);
            images.seek(3);
            draws.seek(3);
            for (int s = 0; s < 4; ++s) {
                const Batch& want = images.next();
                const Batch& got = draws.next();
                QVERIFY(got.images.empty());
                QCOMPARE(got.draws.shape(), (Shape{16, preprocess::kDrawColumns}));
                QVERIFY(sameBytes(got.labels, want.labels));
                ops->upload(got.draws, deviceDraws);
                ops->preprocessImages(preprocessDesc(recipe), deviceSource, deviceDraws, made);
                QCOMPARE(made.device(), kGpu0);
                QVERIFY2(sameBytes(made, want.images), backend);
                // And on the host, for what shows a batch (TensorBoard's grid).
                Tensor shown;
                imagesOfDraws(set, recipe, got.draws, 16, shown);
                QVERIFY(sameBytes(shown, want.images));
            }
        }
        QCOMPARE(scope.memory().liveAllocations(), 0);
    }

    void heldSetTrainsAsLoaderBatches_data()
    {
        QTest::addColumn<bool>("oneGpu");
        QTest::newRow("a tower per GPU") << false;
        QTest::newRow("two towers sharing a GPU (one copy of the set)") << true;
    }
    void heldSetTrainsAsLoaderBatches()
    {
        QFETCH(bool, oneGpu);
        FakeDeviceScope scope;
        {
            const ImageSet set = heldSet(64);
            const Preprocessing recipe = heldRecipe();
            BatchLoader images(set, recipe, heldLoader(false)),
                draws(set, recipe, heldLoader(true));
            TowerSetOptions onDevice = options(2, true);
            if (oneGpu) onDevice.makeOps = [](int) { return makeFakeDeviceOps("reference", 0); };
            TowerSet host(options(2, false)), dev(onDevice);
            const std::int64_t before = scope.memory().liveAllocations();
            const std::string where = dev.holdTrainingSet(set, recipe);
            QVERIFY2(where.find(oneGpu ? "cuda:0 (" : "cuda:0, cuda:1") != std::string::npos,
                     where.c_str());
            // One copy per device holding towers.
            QCOMPARE(scope.memory().liveAllocations() - before, std::int64_t(oneGpu ? 1 : 2));
            // Towers on the host may hold it too (one copy for all).
            TowerSet hostHeld(options(2, false));
            QVERIFY(hostHeld.holdTrainingSet(set, recipe).find("host") != std::string::npos);
            for (int s = 0; s < 3; ++s) {
                const Batch& a = images.next();
                const Batch& b = draws.next();
                const auto ra = host.step(a, s, 0.05);
                const auto rb = dev.step(b, s, 0.05);
                const auto rc = hostHeld.step(b, s, 0.05);
                QCOMPARE(rb.loss, ra.loss);
                QCOMPARE(rc.loss, ra.loss);
                QVERIFY(rb.finite);
                QVERIFY(rb.towers[0].dataMs >= 0);
            }
            QCOMPARE(QString::fromStdString(dev.compareReplicas()), QString());
            const auto& hp = host.model().parameters();
            for (std::size_t i = 0; i < hp.size(); ++i) {
                QVERIFY2(sameBytes(dev.model().parameters()[i]->value, hp[i]->value),
                         hp[i]->name.c_str());
                QVERIFY2(sameBytes(hostHeld.model().parameters()[i]->value, hp[i]->value),
                         hp[i]->name.c_str());
            }
        }
        QCOMPARE(scope.memory().liveAllocations(), 0);
    }

    // A captured step bakes the address of its input: the images the towers preprocess from a
    // batch's draws (theirs) or a batch's own images (the slot's). Batches of draws, then of
    // images, then of draws again: each change captures anew, and the steps are bitwise those
    // issued op by op (a replay of the draws' capture would read the last draws' images).
    void aCaptureIsKeyedByItsInput()
    {
        FakeDeviceScope scope;
        {
            const ImageSet set = heldSet(64);
            const Preprocessing recipe = heldRecipe();
            TowerSetOptions plain = options(2, true, 0, true), graphed = plain;
            graphed.makeOps = [](int t) { return makeFakeDeviceOps("reference", t, true); };
            plain.graphs = false;
            TowerSet one(plain), two(graphed);
            one.holdTrainingSet(set, recipe);
            two.holdTrainingSet(set, recipe);
            BatchLoader images(set, recipe, heldLoader(false)),
                draws(set, recipe, heldLoader(true));
            for (int s = 0; s < 12; ++s) {
                BatchLoader& from = s >= 4 && s < 8 ? images : draws;
                from.seek(s);
                const Batch& b = from.next();
                const auto a = one.step(b, s, 0.05);
                const auto c = two.step(b, s, 0.05);
                QVERIFY(a.finite);
                QCOMPARE(c.loss, a.loss);
            }
            QVERIFY2(two.replayedSteps() >= 4, std::to_string(two.replayedSteps()).c_str());
            expectSameState(one, two);
        }
        QCOMPARE(scope.memory().liveAllocations(), 0);
    }

    void heldSetRefusals()
    {
        FakeDeviceScope scope;
        const ImageSet set = heldSet(40);
        Preprocessing recipe = heldRecipe();
        BatchLoader draws(set, recipe, heldLoader(true));
        TowerSet dev(options(2, true));
        // Draws for towers that hold nothing.
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, dev.step(draws.next(), 0, 0.05));
        // A recipe that does not make the model's input, or does not fit the set.
        Preprocessing small = recipe;
        small.height = small.width = 24;
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, dev.holdTrainingSet(set, small));
        ImageSet tiny = heldSet(4);
        tiny.height = tiny.width = 20;
        tiny.pixels.resize(std::size_t(tiny.count * tiny.imageBytes()));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, dev.holdTrainingSet(tiny, recipe));
        // Float64 towers.
        TowerSetOptions f64 = options(1, false);
        f64.dtype = DType::Float64;
        TowerSet exact(f64);
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, exact.holdTrainingSet(set, recipe));
        // A GPU without room for it says so.
        scope.memory().setAllocationLimit(std::size_t(set.pixels.size() - 1));
        QVERIFY_THROWS_EXCEPTION(DeviceOutOfMemory, dev.holdTrainingSet(set, recipe));
        scope.memory().setAllocationLimit(0);
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, dev.step(draws.next(), 1, 0.05)); // none held
        // A draw row outside the set, in host memory: refused, naming the row.
        Tensor bad = draws.next().draws.clone();
        bad.data<double>()[3 * preprocess::kDrawColumns + preprocess::kDrawIndex] = 40;
        Tensor source({set.count, set.height, set.width, 1}, DType::UInt8), hostOut;
        try {
            auto host = makeBackendOps("reference");
            host->preprocessImages(preprocessDesc(recipe), source, bad, hostOut);
            QFAIL("a row outside the set was taken");
        } catch (const InvalidArgument& e) {
            QVERIFY2(std::string(e.what()).find("row 3") != std::string::npos, e.what());
        }
    }

    void aModelRefusesInputFromAnotherDevice()
    {
        FakeDeviceScope scope;
        TowerSet dev(options(1, true));
        Model& m = dev.model();
        auto ops = makeFakeDeviceOps("reference");
        ExecContext ctx{*ops, false};
        const Shape in = m.inputShape();
        const Tensor images = Tensor::zeros({2, in[0], in[1], in[2]}, DType::Float32);
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, m.forward(ctx, images));
    }

    // towers-cli bench on a GPU: after the phases, each waited for, the steps issued back to back
    // (the loss read once, at the end), whose time is the step's; on the stand-in GPU the same
    // steps as the host's, to the bit.
    // A bench of fashion-fast on the reference backend: 4 images, one step of warm-up, three timed.
    static TrainStepBenchOptions smallBench(bool inference)
    {
        TrainStepBenchOptions o;
        o.model = "fashion-fast";
        o.backend = "reference";
        o.batchSize = 4;
        o.warmup = 1;
        o.steps = 3;
        o.inference = inference;
        return o;
    }

    void benchIssuesGpuStepsBackToBack()
    {
        FakeDeviceScope scope;
        TrainStepBenchOptions o = smallBench(false);
        TrainStepBenchOptions host = o;
        host.steps = 6; // as many steps as the GPU's phases and its steps back to back
        o.makeOps = [] { return makeFakeDeviceOps("reference"); };
        std::vector<std::pair<int, int>> progress;
        const auto gpu = benchmarkTrainStep(o, [&](int s, int n) { progress.emplace_back(s, n); });
        const auto cpu = benchmarkTrainStep(host);
        QVERIFY(gpu.backToBack && !cpu.backToBack);
        QVERIFY(gpu.stepMs > 0 && gpu.phasesMs > 0);
        QCOMPARE(gpu.imagesPerSec, 4 * 1000.0 / gpu.stepMs);
        QCOMPARE(cpu.stepMs, cpu.phasesMs);
        QCOMPARE(gpu.lastLoss, cpu.lastLoss);
        QCOMPARE(progress.size(), std::size_t(7));
        QCOMPARE(progress.back(), (std::pair<int, int>{7, 7}));
        // Ops that cannot capture: the replayed steps are not timed, and the bench says why; on
        // the CPU there is nothing to say.
        QCOMPARE(gpu.graphStepMs, 0.0);
        QVERIFY(!gpu.graphsUnavailable.empty());
        QVERIFY(cpu.graphsUnavailable.empty() && cpu.graphStepMs == 0);
        // Ops that can: one step captured, replayed back to back, timed.
        o.makeOps = [] { return makeFakeDeviceOps("reference", 0, true); };
        const auto graphed = benchmarkTrainStep(o);
        QCOMPARE(QString::fromStdString(graphed.graphsUnavailable), QString());
        QVERIFY(graphed.graphStepMs > 0);
        QCOMPARE(graphed.graphImagesPerSec, 4 * 1000.0 / graphed.graphStepMs);
        QCOMPARE(graphed.lastLoss, gpu.lastLoss); // read before the replays
        o.graphs = false;
        const auto off = benchmarkTrainStep(o);
        QCOMPARE(off.graphStepMs, 0.0);
        QCOMPARE(QString::fromStdString(off.graphsUnavailable), QString("graphs off"));
        QCOMPARE(scope.memory().liveAllocations(), 0);
    }

    // towers-cli bench --inference on a GPU: the forward passes alone, each waited for, then as
    // many issued back to back; the loss of the last pass, in evaluation mode, equals the host's.
    void benchInferenceIssuesGpuPassesBackToBack()
    {
        FakeDeviceScope scope;
        TrainStepBenchOptions o = smallBench(true);
        const TrainStepBenchOptions host = o;
        o.makeOps = [] { return makeFakeDeviceOps("reference", 0, true); };
        std::vector<std::pair<int, int>> progress;
        const auto gpu = benchmarkTrainStep(o, [&](int s, int n) { progress.emplace_back(s, n); });
        const auto cpu = benchmarkTrainStep(host);
        QVERIFY(gpu.backToBack && !cpu.backToBack);
        QVERIFY(gpu.stepMs > 0 && gpu.forwardMs > 0);
        QCOMPARE(gpu.phasesMs, gpu.forwardMs);
        QCOMPARE(gpu.backwardMs + gpu.updateMs + cpu.backwardMs + cpu.updateMs, 0.0);
        QCOMPARE(cpu.stepMs, cpu.forwardMs);
        QCOMPARE(gpu.imagesPerSec, 4 * 1000.0 / gpu.stepMs);
        QCOMPARE(progress.size(), std::size_t(7));
        QCOMPARE(progress.back(), (std::pair<int, int>{7, 7}));
        QVERIFY(std::isfinite(cpu.lastLoss) && cpu.lastLoss > 0);
        QCOMPARE(gpu.lastLoss, cpu.lastLoss);
        QVERIFY(!gpu.graphsUnavailable.empty() && gpu.graphStepMs == 0);
        // A forward pass's arithmetic: a third of the training step's but for the first layer,
        // whose input needs no gradient (2x its forward there, 3x elsewhere).
        TrainStepBenchOptions training = host;
        training.inference = false;
        training.steps = 1;
        const auto step = benchmarkTrainStep(training);
        QVERIFY(cpu.gflopsPerImage > step.gflopsPerImage / 3 &&
                cpu.gflopsPerImage < step.gflopsPerImage / 2);
        // Evaluation mode: the batch norms normalise with their running statistics (fresh: mean
        // 0, variance 1), not the batch's, so the loss differs from a training forward's.
        QVERIFY(cpu.lastLoss != step.lastLoss);
        QCOMPARE(scope.memory().liveAllocations(), 0);
    }
};

QTEST_APPLESS_MAIN(TestDeviceTowers)
#include "tst_device_towers.moc"
