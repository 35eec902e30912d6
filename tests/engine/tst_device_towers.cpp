// Tensors on a device and towers whose replicas live there, on a stand-in GPU (fake_device.h):
// host access is refused, copies are explicit, and towers on the device compute bitwise what
// towers on the host compute, through every step of the path a GPU tower takes (replica moved to
// the device, batch slices copied there, averages through host copies, evaluation, EMA,
// checkpoints copied back). The CUDA kernels themselves are tested by tst_gpu_backend on a GPU.
// CUDA graphs on the stand-in are in tst_device_towers_graphs.cpp, batches and the training set
// held on the device in tst_device_towers_data.cpp (device_towers_support.h: what the three share).
#include <QtTest>

#include <atomic>
#include <cmath>

#include "device_towers_support.h"
#include "engine/backends.h"
#include "engine/bench/train_step_bench.h"
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
        QTest::addColumn<double>("clip"); // the gradients' largest norm (0: none)
        for (const char* kind : {"sgd", "momentum", "nesterov", "adam", "adamw"})
            for (int towers : {1, 2})
                for (int nan : {0, 2})
                    QTest::addRow("%s, %d tower(s), NaN at step %d", kind, towers, nan)
                        << QString(kind) << towers << nan << false << 0.0;
        for (int towers : {1, 2})
            QTest::addRow("adam, %d tower(s), NaN at step 2, dropout", towers)
                << QString("adam") << towers << 2 << true << 0.0;
        // The norm summed and the gradients clipped on the device, the norm read with the loss.
        for (int towers : {1, 2})
            QTest::addRow("nesterov, %d tower(s), NaN at step 2, gradients clipped", towers)
                << QString("nesterov") << towers << 2 << false << 0.05;
        QTest::addRow("adamw, 2 towers, NaN at step 0, gradients clipped")
            << QString("adamw") << 2 << 0 << false << 0.05;
    }

    void aDivergedStepIsSkippedOnTheDevice()
    {
        QFETCH(QString, optimizer);
        QFETCH(int, towers);
        QFETCH(int, nanStep);
        QFETCH(bool, dropout);
        QFETCH(double, clip);
        FakeDeviceScope scope;
        {
            TowerSetOptions h = options(towers, false, 0.9), d = options(towers, true, 0.9, true);
            for (TowerSetOptions* o : {&h, &d}) {
                o->optimizer.kind = optimizer.toStdString();
                o->clipGradNorm = clip;
                o->bucketMb = 0.01;
                if (dropout) o->build = withoutBuffers;
                if (optimizer == QLatin1String("adamw")) o->weightDecay = 0.05; // the update's
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
            if (clip > 0) // the bound is below the norm: it did clip
                QVERIFY2(r.gradNorm > clip, qPrintable(QString::number(r.gradNorm)));
            else // measured all the same
                QVERIFY2(std::isfinite(r.gradNorm) && r.gradNorm > 0,
                         qPrintable(QString::number(r.gradNorm)));
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

    // Gradient accumulation on GPU towers (the gated step: the parts' losses copied out beside
    // the step, the sums kept on the device, the buckets started in the last part): bitwise what
    // host towers compute accumulating the same parts, with one collective after backward, a NaN
    // step skipped everywhere included; one tower, and two through the host or where the tensors
    // live.
    void accumulationOnTheDevice_data()
    {
        QTest::addColumn<int>("towers");
        QTest::addColumn<bool>("deviceCollectives");
        QTest::addColumn<double>("bucketMb");
        QTest::addRow("one tower") << 1 << false << 25.0;
        QTest::addRow("2 towers, through the host, 0.01 MiB buckets") << 2 << false << 0.01;
        QTest::addRow("2 towers, device collectives, 0.01 MiB buckets") << 2 << true << 0.01;
        QTest::addRow("2 towers, device collectives, one collective") << 2 << true << 0.0;
    }

    void accumulationOnTheDevice()
    {
        QFETCH(int, towers);
        QFETCH(bool, deviceCollectives);
        QFETCH(double, bucketMb);
        FakeDeviceScope scope;
        {
            TowerSetOptions plain = options(towers, false, 0.99);
            plain.bucketMb = 0;
            plain.accumulate = 2;
            TowerSetOptions accumulating = options(towers, true, 0.99, deviceCollectives);
            accumulating.bucketMb = bucketMb;
            accumulating.firstBucketMb = std::min(bucketMb, 1.0);
            accumulating.accumulate = 2;
            TowerSet host(plain), dev(accumulating);
            expectSameTraining(host, dev, 19, 4, 2);
            QCOMPARE(dev.model().logits().dim(0), std::int64_t(2)); // a part of the 4 examples
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
