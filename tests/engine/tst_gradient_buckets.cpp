// Gradients averaged in buckets while backward runs: the buckets are what the plan says, their
// averages start during backward, and a bucketed step is bitwise an unbucketed one on CPU towers
// for every bucket size; a NaN in one bucket of one tower skips the step on every tower; a fault in
// any tower in the middle of backward, with buckets in flight, stops every tower within seconds
// with that tower's error (a watchdog fails the test on a hang).
#include <QtTest>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <limits>
#include <thread>

#include "engine/nn/batch_norm.h"
#include "engine/nn/conv2d.h"
#include "engine/nn/flatten.h"
#include "engine/nn/linear.h"
#include "engine/nn/pool2d.h"
#include "engine/train/gradient_buckets.h"
#include "engine/train/host_communicator.h"
#include "engine/train/tower_set.h"
#include "replication.h"
#include "synthetic_batches.h"

using namespace towers::engine;
using namespace towers::test;

namespace {

// What a Probe does in its backward on one tower at one step.
struct ProbePlan
{
    enum class Act
    {
        None,
        Nan,   // its gradient becomes NaN
        Throw, // its backward fails
    };
    Act act = Act::None;
    std::uint64_t replica = 0, step = 0;
    // Set by the probe: how many buckets its tower's communicator had seen started when its
    // backward ran (the overlap proof).
    std::atomic<int>* startsSeen = nullptr;
    std::atomic<int>* starts = nullptr;
};

// The identity, with a parameter whose gradient is zero: a place in the network to inject a NaN
// or a failure into one tower's backward, between layers whose buckets are in flight.
class Probe final : public Layer
{
public:
    Probe(std::string name, const ProbePlan& plan) : Layer(std::move(name)), m_plan(plan)
    {
        m_weight.name = this->name() + ".weight";
        m_weight.value = Tensor::zeros({4}, DType::Float32);
    }
    std::string kind() const override { return "probe"; }
    std::string describe() const override { return "probe"; }
    Shape outputShape(const Shape& input) const override { return input; }
    void forward(ExecContext& ctx, const Tensor& x, Tensor& y) override
    {
        (void)ctx;
        Tensor::ensure(y, x.shape(), x.dtype(), x.device());
        y.copyFrom(x);
    }
    void backward(ExecContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                  Tensor* dx) override
    {
        (void)x;
        (void)y;
        if (m_plan.startsSeen && ctx.replica == 0) *m_plan.startsSeen = m_plan.starts->load();
        Tensor::ensure(m_weight.grad, m_weight.value.shape(), m_weight.value.dtype(),
                       m_weight.value.device());
        m_weight.grad.setZero();
        const bool here = ctx.replica == m_plan.replica && ctx.step == m_plan.step;
        if (here && m_plan.act == ProbePlan::Act::Throw)
            throw BackendError("the probe failed on purpose in tower " +
                               std::to_string(ctx.replica));
        if (here && m_plan.act == ProbePlan::Act::Nan)
            m_weight.grad.data<float>()[2] = std::numeric_limits<float>::quiet_NaN();
        if (dx) {
            Tensor::ensure(*dx, dy.shape(), dy.dtype(), dy.device());
            dx->copyFrom(dy);
        }
    }
    void collectParameters(std::vector<Parameter*>& out) override { out.push_back(&m_weight); }

private:
    const ProbePlan& m_plan;
    Parameter m_weight;
};

// conv-bn-pool, a probe, conv, flatten, fc, fc: batch-norm statistics among the averaged tensors,
// and the probe's bucket between buckets started before it and after it.
std::unique_ptr<Model> buildProbed(const ProbePlan& plan)
{
    auto net = std::make_unique<Sequential>();
    Conv2dOptions c1;
    c1.inChannels = 1;
    c1.outChannels = 8;
    c1.kernelH = c1.kernelW = 5;
    c1.bias = false;
    net->add(std::make_unique<Conv2d>("conv1", c1));
    net->add(std::make_unique<BatchNorm>("bn1", 8));
    net->add(std::make_unique<MaxPool2d>("pool1", 2, 2, Padding::Valid));
    net->add(std::make_unique<Probe>("probe", plan));
    Conv2dOptions c2;
    c2.inChannels = 8;
    c2.outChannels = 16;
    c2.kernelH = c2.kernelW = 3;
    c2.activation = Activation::Relu;
    c2.weightDecay = 0.001;
    net->add(std::make_unique<Conv2d>("conv2", c2));
    net->add(std::make_unique<MaxPool2d>("pool2", 2, 2, Padding::Valid));
    net->add(std::make_unique<Flatten>("flatten"));
    LinearOptions f1;
    f1.inFeatures = 7 * 7 * 16;
    f1.outFeatures = 32;
    f1.activation = Activation::Relu;
    f1.weightDecay = 0.004;
    net->add(std::make_unique<Linear>("fc1", f1));
    LinearOptions f2;
    f2.inFeatures = 32;
    f2.outFeatures = 10;
    net->add(std::make_unique<Linear>("fc2", f2));
    return std::make_unique<Model>("probed", Shape{28, 28, 1}, 10, std::move(net));
}

TowerSetOptions options(const ProbePlan& plan, int towers, double bucketMb,
                        const std::string& backend = "onednn")
{
    TowerSetOptions o;
    o.model = "probed";
    o.build = [&plan] { return buildProbed(plan); };
    o.backend = backend;
    o.towers = towers;
    o.optimizer.kind = "momentum";
    o.seed = 7;
    o.bucketMb = bucketMb;
    o.firstBucketMb = std::min(bucketMb, 1.0);
    o.emaDecay = 0.99;
    return o;
}

// Every parameter, buffer and optimizer tensor of a's tower 0 equals b's, byte for byte; "" or
// the first difference.
std::string difference(TowerSet& a, TowerSet& b)
{
    const auto& pa = a.model().parameters();
    const auto& pb = b.model().parameters();
    for (std::size_t i = 0; i < pa.size(); ++i)
        if (!sameBytes(pa[i]->value, pb[i]->value)) return pa[i]->name;
    const auto sa = a.optimizer().state(pa), sb = b.optimizer().state(pb);
    for (std::size_t i = 0; i < sa.size(); ++i)
        if (!sameBytes(sa[i].second, sb[i].second)) return sa[i].first;
    const auto ea = a.ema()->state(), eb = b.ema()->state();
    for (std::size_t i = 0; i < ea.size(); ++i)
        if (!sameBytes(ea[i].second, eb[i].second)) return ea[i].first;
    return {};
}

// Runs f() on another thread and gives it `limit`: a step that hangs ends the test process with
// a failure instead of hanging CI (the hung threads cannot be joined).
template <class F> auto withWatchdog(std::chrono::seconds limit, F f)
{
    auto future = std::async(std::launch::async, std::move(f));
    if (future.wait_for(limit) != std::future_status::ready) {
        std::fprintf(stderr, "FAIL: the towers hung for more than %lld s\n",
                     static_cast<long long>(limit.count()));
        std::fflush(stderr);
        std::_Exit(1);
    }
    return future.get();
}

// Counts the asynchronous starts of a host communicator.
class CountingHost final : public Communicator
{
public:
    CountingHost(int ranks, std::atomic<int>& starts) : m_inner(ranks), m_starts(starts) {}
    int size() const override { return m_inner.size(); }
    void allReduceMean(int rank, std::span<Tensor> t) override { m_inner.allReduceMean(rank, t); }
    std::uint64_t startAllReduceMean(int rank, std::span<Tensor> t) override
    {
        if (rank == 0) ++m_starts;
        return m_inner.startAllReduceMean(rank, t);
    }
    void complete(int rank, std::uint64_t ticket) override { m_inner.complete(rank, ticket); }
    void broadcast(int rank, int root, std::span<Tensor> t) override
    {
        m_inner.broadcast(rank, root, t);
    }
    void barrier(int rank) override { m_inner.barrier(rank); }
    void abort(const std::string& reason) override { m_inner.abort(reason); }
    bool aborted() const override { return m_inner.aborted(); }

private:
    HostCommunicator m_inner;
    std::atomic<int>& m_starts;
};

} // namespace

class TestGradientBuckets : public QObject
{
    Q_OBJECT
private slots:
    // The plan: averaged tensors from the last to the first, the first bucket capped small,
    // integer bookkeeping left out, a tensor never split.
    void plan()
    {
        const ProbePlan none;
        const auto model = buildProbed(none);
        const auto& params = model->parameters();
        // One bucket per tensor.
        const BucketPlan each = BucketPlan::make(params, 1e-9, 1e-9);
        std::size_t averagedCount = 0;
        for (std::size_t i = 0; i < params.size(); ++i) {
            const bool counted = params[i]->trainable || params[i]->value.dtype() == DType::Float32;
            averagedCount += counted ? 1 : 0;
            QCOMPARE(each.bucketOf[i] >= 0, counted);
        }
        QCOMPARE(each.buckets.size(), averagedCount);
        QCOMPARE(QString::fromStdString(params[each.buckets.front().front()]->name),
                 QStringLiteral("fc2.bias")); // the last layer's come first
        QCOMPARE(QString::fromStdString(params[each.buckets.back().front()]->name),
                 QStringLiteral("conv1.weight"));
        QCOMPARE(each.bucketOf[std::size_t(
                     std::find_if(params.begin(), params.end(),
                                  [](auto* p) { return p->name == "bn1.num_batches_tracked"; }) -
                     params.begin())],
                 -1);
        // One bucket for everything.
        const BucketPlan all = BucketPlan::make(params, 1e6, 1e6);
        QCOMPARE(all.buckets.size(), std::size_t(1));
        QCOMPARE(all.buckets.front().size(), averagedCount);
        // fc1.weight (784 x 32 floats = 98 KiB) closes a 0.05 MiB first bucket on its own.
        const BucketPlan small = BucketPlan::make(params, 1e6, 0.05);
        QCOMPARE(small.buckets.size(), std::size_t(2));
        QCOMPARE(QString::fromStdString(params[small.buckets[0].back()]->name),
                 QStringLiteral("fc1.weight"));
        QVERIFY2(QString::fromStdString(small.describe()).startsWith(QStringLiteral("2 buckets (")),
                 small.describe().c_str());
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, BucketPlan::make(params, 0, 1));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, BucketPlan::make(params, 1, -1));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 BucketPlan::make(params, std::nan(""), 1)); // not a size
    }

    // Bitwise the same training, whatever the buckets: one per tensor, a few, one for everything,
    // against one collective after backward (bucketMb = 0), on 3 CPU towers, in float32 with
    // batch-norm statistics, weight decay, momentum and moving averages.
    void bucketedEqualsUnbucketed_data()
    {
        QTest::addColumn<QString>("backend");
        QTest::addColumn<double>("bucketMb");
        for (const char* backend : {"onednn", "reference"}) {
            QTest::addRow("%s, one bucket per tensor", backend) << backend << 1e-9;
            QTest::addRow("%s, 0.02 MiB buckets", backend) << backend << 0.02;
            QTest::addRow("%s, one bucket", backend) << backend << 1e6;
        }
    }
    void bucketedEqualsUnbucketed()
    {
        QFETCH(QString, backend);
        QFETCH(double, bucketMb);
        const ProbePlan none;
        TowerSet plain(options(none, 3, 0, backend.toStdString()));
        TowerSet bucketed(options(none, 3, bucketMb, backend.toStdString()));
        QCOMPARE(QString::fromStdString(plain.bucketDescription()),
                 QStringLiteral("one collective after backward"));
        QVERIFY2(bucketed.bucketDescription().find("while backward runs") != std::string::npos,
                 bucketed.bucketDescription().c_str());
        SyntheticBatches a({28, 28, 1}, 10, 3, 4, 120, 5), b({28, 28, 1}, 10, 3, 4, 120, 5);
        for (int s = 0; s < 4; ++s) {
            const auto ra = plain.step(a.next(), s, 0.05);
            const auto rb = bucketed.step(b.next(), s, 0.05);
            QCOMPARE(rb.loss, ra.loss);
            QVERIFY(ra.finite && rb.finite);
        }
        QCOMPARE(QString::fromStdString(difference(plain, bucketed)), QString());
        QCOMPARE(QString::fromStdString(bucketed.compareReplicas()), QString());
    }

    // The averages start while backward runs: with a bucket per tensor, when the probe's backward
    // runs (the fourth layer of nine), the buckets of every layer after it have been started.
    void bucketsStartDuringBackward()
    {
        std::atomic<int> starts{0}, seen{-1};
        ProbePlan plan;
        plan.starts = &starts;
        plan.startsSeen = &seen;
        TowerSetOptions o = options(plan, 2, 1e-9);
        o.makeCommunicator = [&](int n) { return std::make_unique<CountingHost>(n, starts); };
        TowerSet set(o);
        SyntheticBatches data({28, 28, 1}, 10, 2, 4, 80, 3);
        set.step(data.next(), 0, 0.05);
        // conv2 (weight, bias), fc1 (weight, bias), fc2 (weight, bias): six buckets started
        // before the probe's backward; the probe's, bn1's four and conv1's after it.
        QCOMPARE(seen.load(), 6);
        QCOMPARE(starts.load(), 6 + 1 + 4 + 1);
    }

    // A NaN in one bucket of one tower (the probe's gradient on tower 1 at step 2) skips that step
    // on every tower: the replicas keep the previous step's state and stay identical, and the
    // bucketed run still equals the unbucketed one afterwards.
    void nanInOneBucketSkipsTheStepEverywhere()
    {
        ProbePlan plan;
        plan.act = ProbePlan::Act::Nan;
        plan.replica = 1;
        plan.step = 2;
        TowerSet plain(options(plan, 3, 0)), bucketed(options(plan, 3, 1e-9));
        SyntheticBatches a({28, 28, 1}, 10, 3, 4, 120, 9), b({28, 28, 1}, 10, 3, 4, 120, 9);
        std::vector<Tensor> before;
        for (int s = 0; s < 4; ++s) {
            if (s == 2)
                for (auto* p : bucketed.model().parameters()) before.push_back(p->value.clone());
            const auto ra = plain.step(a.next(), s, 0.05);
            const auto rb = bucketed.step(b.next(), s, 0.05);
            QCOMPARE(rb.finite, s != 2);
            QCOMPARE(ra.finite, rb.finite);
            if (s == 2) {
                const auto& now = bucketed.model().parameters();
                for (std::size_t i = 0; i < now.size(); ++i)
                    QVERIFY2(sameBytes(now[i]->value, before[i]), now[i]->name.c_str());
            }
        }
        QCOMPARE(QString::fromStdString(bucketed.compareReplicas()), QString());
        QCOMPARE(QString::fromStdString(difference(plain, bucketed)), QString());
    }

    // A tower failing in the middle of its backward (its later layers' buckets already started,
    // the other towers' too): every tower stops within seconds, the step throws that tower's own
    // error, and the towers refuse to go on. For each tower, with buckets per tensor and with the
    // default sizes; a hang ends the test with a failure.
    void faultMidBackwardStopsEveryTower_data()
    {
        QTest::addColumn<int>("tower");
        QTest::addColumn<double>("bucketMb");
        for (int t = 0; t < 3; ++t) {
            QTest::addRow("tower %d, a bucket per tensor", t) << t << 1e-9;
            QTest::addRow("tower %d, 0.02 MiB buckets", t) << t << 0.02;
        }
    }
    void faultMidBackwardStopsEveryTower()
    {
        QFETCH(int, tower);
        QFETCH(double, bucketMb);
        ProbePlan plan;
        plan.act = ProbePlan::Act::Throw;
        plan.replica = std::uint64_t(tower);
        plan.step = 1;
        TowerSet set(options(plan, 3, bucketMb));
        SyntheticBatches data({28, 28, 1}, 10, 3, 4, 120, 4);
        set.step(data.next(), 0, 0.05);
        const auto t0 = std::chrono::steady_clock::now();
        const std::string error = withWatchdog(std::chrono::seconds(60), [&]() -> std::string {
            try {
                set.step(data.next(), 1, 0.05);
                return "the step succeeded";
            } catch (const CollectiveAborted& e) {
                return std::string("only 'aborted' came back: ") + e.what();
            } catch (const BackendError& e) {
                return e.what();
            }
        });
        QVERIFY2(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10), error.c_str());
        QVERIFY2(error.find("tower " + std::to_string(tower) + " on ") != std::string::npos &&
                     error.find("failed on purpose") != std::string::npos,
                 error.c_str());
        const std::string again = withWatchdog(std::chrono::seconds(60), [&]() -> std::string {
            try {
                set.step(data.next(), 2, 0.05);
                return "stepped after a failure";
            } catch (const Error& e) {
                return e.what();
            }
        });
        QVERIFY2(again.find("earlier error") != std::string::npos, again.c_str());
    }

    // The host communicator's asynchronous average: the means of allReduceMean, bitwise, whatever
    // the grouping; tickets are per rank; abort releases a rank waiting in complete().
    void hostAsyncEqualsSync()
    {
        const int ranks = 3;
        HostCommunicator sync(ranks), async(ranks);
        std::vector<std::vector<Tensor>> a(ranks), b(ranks);
        Rng rng(3);
        for (int r = 0; r < ranks; ++r)
            for (std::int64_t n : {7, 1000, 3}) {
                Tensor t({n}, DType::Float32);
                for (std::int64_t i = 0; i < n; ++i) t.setAt(i, rng.normal() * (r + 1));
                a[std::size_t(r)].push_back(t);
                b[std::size_t(r)].push_back(t.clone());
            }
        std::vector<std::thread> threads;
        for (int r = 0; r < ranks; ++r)
            threads.emplace_back([&, r] {
                auto& mine = b[std::size_t(r)];
                sync.allReduceMean(r, a[std::size_t(r)]);
                // Three collectives of one tensor each, started before any is completed.
                std::vector<std::uint64_t> tickets;
                for (auto& t : mine) tickets.push_back(async.startAllReduceMean(r, {&t, 1}));
                for (auto ticket : tickets) async.complete(r, ticket);
            });
        for (auto& t : threads) t.join();
        for (int r = 0; r < ranks; ++r)
            for (std::size_t i = 0; i < 3; ++i) QVERIFY(sameBytes(b[std::size_t(r)][i], a[0][i]));

        // A ticket nobody started is refused.
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, async.complete(0, 99));
        // Rank 0 waits for a collective rank 1 never starts; an abort releases it.
        Tensor x = Tensor::zeros({4}, DType::Float32);
        const auto ticket = async.startAllReduceMean(0, {&x, 1});
        const std::string what = withWatchdog(std::chrono::seconds(30), [&]() -> std::string {
            std::thread aborter([&] {
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
                async.abort("tower 2 ran out of memory");
            });
            std::string caught;
            try {
                async.complete(0, ticket);
                caught = "completed";
            } catch (const CollectiveAborted& e) {
                caught = e.what();
            }
            aborter.join();
            return caught;
        });
        QVERIFY2(what.find("tower 2 ran out of memory") != std::string::npos, what.c_str());
        QVERIFY_THROWS_EXCEPTION(CollectiveAborted, async.startAllReduceMean(1, {&x, 1}));
    }

    // Mismatched buckets (a rank passing another shape) are refused on the rank that reduces and
    // abort the others instead of averaging garbage.
    void mismatchedBucketsRefused()
    {
        HostCommunicator comm(2);
        Tensor a = Tensor::zeros({4}, DType::Float32), b = Tensor::zeros({5}, DType::Float32);
        std::string first, second;
        std::thread other([&] {
            try {
                comm.complete(1, comm.startAllReduceMean(1, {&b, 1}));
            } catch (const std::exception& e) {
                second = e.what();
            }
        });
        try {
            comm.complete(0, comm.startAllReduceMean(0, {&a, 1}));
        } catch (const std::exception& e) {
            first = e.what();
        }
        other.join();
        QVERIFY2(first.find("rank") != std::string::npos, first.c_str());
        QVERIFY2(second.find("rank") != std::string::npos, second.c_str());
    }
};

QTEST_APPLESS_MAIN(TestGradientBuckets)
#include "tst_gradient_buckets.moc"
