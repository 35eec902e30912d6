// CUDA graphs on the stand-in GPU (fake_device.h), whose captures keep a graph's rules: what a
// capture records and replays, work outside a capture between its parts, towers' steps captured
// and replayed bitwise as the steps issued op by op, and a capture or first launch that fails
// falling back to steps op by op. The rest of the GPU towers' path is in tst_device_towers.cpp.
#include <QtTest>

#include <cmath>
#include <functional>

#include "device_towers_support.h"
#include "engine/nn/layer.h"
#include "engine/ops/ops.h"
#include "engine/train/tower_set.h"
#include "fake_device.h"
#include "synthetic_batches.h"

using namespace towers::engine;
using namespace towers::test;

namespace {

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

} // namespace

class TestDeviceTowersGraphs : public QObject
{
    Q_OBJECT
private slots:
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
        QTest::addColumn<double>("clip"); // the gradients' largest norm (0: none)
        QTest::addColumn<int>("accumulate");
        for (const char* model : {"fashion-fast", "without-buffers"})
            for (const char* kind : {"momentum", "adam"})
                for (bool ahead : {false, true})
                    QTest::addRow("%s, %s, %s", model, kind, ahead ? "issued ahead" : "one by one")
                        << QString(model) << QString(kind) << ahead << (ahead ? 9 : 3) << 1 << 0.0
                        << 0.0 << 1;
        // The clipping's norm, sum and scaling in the capture, its norm copied out with the loss.
        QTest::addRow("fashion-fast, momentum, issued ahead, gradients clipped")
            << QString("fashion-fast") << QString("momentum") << true << 9 << 1 << 0.0 << 0.05 << 1;
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
                    << (ahead ? 4 : 9) << 2 << b.mb << 0.0 << 1;
        QTest::addRow("2 towers, 0.01 MiB buckets, one by one, gradients clipped")
            << QString("fashion-fast") << QString("adamw") << false << 4 << 2 << 0.01 << 0.05 << 1;
        // Accumulation: every part's forward and backward in the capture, the parts' losses
        // copied out of it.
        QTest::addRow("fashion-fast, momentum, issued ahead, 2 parts accumulated")
            << QString("fashion-fast") << QString("momentum") << true << 9 << 1 << 0.0 << 0.0 << 2;
        QTest::addRow("2 towers, 0.01 MiB buckets, one by one, 2 parts accumulated")
            << QString("fashion-fast") << QString("adam") << false << 4 << 2 << 0.01 << 0.0 << 2;
    }

    void capturedStepsEqualStepsOpByOp()
    {
        QFETCH(QString, model);
        QFETCH(QString, optimizer);
        QFETCH(bool, ahead);
        QFETCH(int, nanStep);
        QFETCH(int, towers);
        QFETCH(double, bucketMb);
        QFETCH(double, clip);
        QFETCH(int, accumulate);
        FakeDeviceScope scope;
        {
            TowerSetOptions plain = options(towers, true, 0.9, towers > 1), graphed = plain;
            for (TowerSetOptions* o : {&plain, &graphed}) {
                o->model = model.toStdString();
                o->clipGradNorm = clip;
                o->accumulate = accumulate;
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
                small(in, classes, towers, accumulate > 1 ? 2 : 3, 64, 17);
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
                QCOMPARE(std::isnan(b[i].gradNorm), std::isnan(a[i].gradNorm));
                if (!std::isnan(a[i].gradNorm)) QVERIFY(b[i].gradNorm == a[i].gradNorm);
                QCOMPARE(std::isnan(a[i].gradNorm), !a[i].finite); // measured, clipped or not
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
};

QTEST_APPLESS_MAIN(TestDeviceTowersGraphs)
#include "tst_device_towers_graphs.moc"
