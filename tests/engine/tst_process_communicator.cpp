// Towers of several processes, with the processes as threads of this test (thread_process_group.h
// stands in for MPI): the ProcessCommunicator's means are bitwise those of one HostCommunicator of
// every tower, however the towers are spread; a global broadcast; a failure in one process stops
// the others with its message, a local abort releases the waiting towers; TowerSets of 2 processes
// x 1 and 2 x 2 towers train and evaluate bitwise as one of 2 and 4 towers; a stop asked on one
// process during an evaluation ends every process's; the launch detection.
#include <QTest>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <future>
#include <random>
#include <thread>

#include "engine/dist/process_state.h"
#include "engine/gpu/gpu_backend.h"
#include "engine/train/host_communicator.h"
#include "engine/train/process_communicator.h"
#include "engine/train/tower_set.h"
#include "replication.h"
#include "synthetic_batches.h"
#include "thread_process_group.h"

using namespace towers::engine;
using namespace towers::test;

namespace {

// Values over many binades and signs, where the order of a sum matters.
Tensor wideRandom(Shape shape, DType dtype, std::uint64_t seed)
{
    Tensor t(shape, dtype);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> mantissa(-1, 1);
    std::uniform_int_distribution<int> exponent(-30, 30);
    for (std::int64_t i = 0; i < t.numel(); ++i) {
        const double v = std::ldexp(mantissa(rng), exponent(rng));
        if (dtype == DType::Float32)
            t.data<float>()[i] = float(v);
        else
            t.data<double>()[i] = v;
    }
    return t;
}

// Runs job(process, rank) on processes x towers threads and rethrows the first error.
void onEveryTower(int processes, int towers, const std::function<void(int, int)>& job)
{
    std::vector<std::future<void>> done;
    for (int p = 0; p < processes; ++p)
        for (int r = 0; r < towers; ++r) done.push_back(std::async(std::launch::async, job, p, r));
    for (auto& d : done) d.get();
}

// Tower slices [first, first + count) of a global batch (views).
Batch sliceOf(const Batch& global, int first, int count)
{
    Batch b;
    const std::int64_t per = global.perTower();
    b.images = global.images.slice(first * per, (first + count) * per);
    b.labels = global.labels.slice(first * per, (first + count) * per);
    b.step = global.step;
    b.epoch = global.epoch;
    b.towers = count;
    return b;
}

TowerSetOptions towerOptions(int towers, const std::string& backend = "onednn")
{
    TowerSetOptions o;
    o.backend = backend;
    o.model = "fashion-fast";
    o.towers = towers;
    o.threadsPerTower = 1;
    o.optimizer.kind = "momentum";
    o.emaDecay = 0.9;
    o.seed = 7;
    o.bucketMb = 0.05; // several buckets, started while backward runs
    o.firstBucketMb = 0.01;
    return o;
}

struct Trained
{
    std::vector<double> losses;
    std::vector<double> gradNorms; // before clipping (NaN: no clipping)
    NamedTensors weights;
    EvalResult eval;
};

NamedTensors weightsOf(TowerSet& set)
{
    NamedTensors out;
    for (const auto* p : set.model().parameters()) out.emplace_back(p->name, p->value.onHost());
    for (auto& t : set.optimizer().state(set.model().parameters())) out.push_back(std::move(t));
    return out;
}

// `steps` steps of a run of processes x towers (processes 0: one process, no group); `clip` > 0
// clips the gradients' norm to it.
Trained train(int processes, int towers, int steps, const std::string& backend = "onednn",
              std::string* averaging = nullptr, double clip = 0, int accumulate = 1)
{
    const int global = std::max(1, processes) * towers;
    auto run = [&](ProcessGroup* group, int first) -> Trained {
        auto o = towerOptions(towers, backend);
        o.processes = group;
        o.clipGradNorm = clip;
        o.accumulate = accumulate;
        TowerSet set(o);
        if (averaging && first == 0) *averaging = set.allReduceDescription();
        SyntheticBatches source({28, 28, 1}, 10, global, 6, 600, 11);
        Trained t;
        for (int s = 0; s < steps; ++s) {
            const auto r = set.step(sliceOf(source.next(), first, towers), s, 0.05);
            t.losses.push_back(r.loss);
            t.gradNorms.push_back(r.gradNorm);
        }
        t.weights = weightsOf(set);
        t.eval = set.evaluate(45, 4, source.evaluationBatches(), true);
        if (set.globalTowers() != global || set.firstTower() != first)
            throw Error("the TowerSet places its towers wrongly in the run");
        return t;
    };
    if (processes == 0) return run(nullptr, 0);
    auto world = makeThreadWorld(processes);
    std::vector<std::future<Trained>> results;
    for (int p = 0; p < processes; ++p)
        results.push_back(std::async(std::launch::async, [&, p] {
            auto group = joinThreadWorld(world, p);
            return run(group.get(), p * towers);
        }));
    std::vector<Trained> all;
    for (auto& r : results) all.push_back(r.get());
    for (std::size_t p = 1; p < all.size(); ++p) { // every process holds the same
        for (std::size_t i = 0; i < all[0].weights.size(); ++i)
            if (!sameBytes(all[p].weights[i].second.onHost(), all[0].weights[i].second.onHost()))
                throw Error("process " + std::to_string(p) + "'s '" + all[p].weights[i].first +
                            "' differs from process 0's");
        if (all[p].losses != all[0].losses) throw Error("the processes report other losses");
    }
    return all.front();
}

} // namespace

class TestProcessCommunicator : public QObject
{
    Q_OBJECT

private slots:
    // Means of 2 processes x 2 towers and 4 x 1 against one HostCommunicator of 4, float32 and
    // float64, synchronous and started asynchronously: bitwise equal everywhere.
    void meansEqualOneProcessOfEveryTower_data()
    {
        QTest::addColumn<int>("processes");
        QTest::addColumn<int>("towers");
        QTest::addColumn<bool>("async");
        QTest::newRow("2x2 sync") << 2 << 2 << false;
        QTest::newRow("2x2 async") << 2 << 2 << true;
        QTest::newRow("4x1 async") << 4 << 1 << true;
        QTest::newRow("1x4 sync") << 1 << 4 << false;
    }
    void meansEqualOneProcessOfEveryTower()
    {
        QFETCH(int, processes);
        QFETCH(int, towers);
        QFETCH(bool, async);
        const int global = processes * towers;
        // The oracle: one process of every tower.
        std::vector<std::vector<Tensor>> expected(static_cast<std::size_t>(global));
        for (int g = 0; g < global; ++g)
            expected[std::size_t(g)] = {wideRandom({3, 70000}, DType::Float32, 100 + g),
                                        wideRandom({17}, DType::Float64, 200 + g),
                                        wideRandom({5}, DType::Float32, 300 + g)};
        std::vector<std::vector<Tensor>> given(static_cast<std::size_t>(global));
        for (int g = 0; g < global; ++g)
            for (const auto& t : expected[std::size_t(g)])
                given[std::size_t(g)].push_back(t.clone());
        HostCommunicator host(global);
        onEveryTower(1, global,
                     [&](int, int r) { host.allReduceMean(r, expected[std::size_t(r)]); });

        auto world = makeThreadWorld(processes);
        std::vector<std::unique_ptr<ProcessGroup>> groups;
        std::vector<std::unique_ptr<ProcessCommunicator>> comms;
        for (int p = 0; p < processes; ++p) {
            groups.push_back(joinThreadWorld(world, p));
            comms.push_back(std::make_unique<ProcessCommunicator>(towers, *groups.back()));
        }
        onEveryTower(processes, towers, [&](int p, int r) {
            auto& tensors = given[std::size_t(p * towers + r)];
            ProcessCommunicator& c = *comms[std::size_t(p)];
            QCOMPARE(c.globalTowers(), global);
            if (!async) {
                c.allReduceMean(r, tensors);
                return;
            }
            // Two buckets started before either completes, as during backward.
            std::span<Tensor> all(tensors);
            const auto first = c.startAllReduceMean(r, all.subspan(2, 1));
            const auto second = c.startAllReduceMean(r, all.subspan(0, 2));
            c.complete(r, first);
            c.complete(r, second);
        });
        for (int g = 0; g < global; ++g)
            for (std::size_t i = 0; i < 3; ++i)
                QVERIFY2(sameBytes(given[std::size_t(g)][i], expected[std::size_t(g)][i]),
                         qPrintable(QStringLiteral("tower %1, tensor %2").arg(g).arg(i)));
    }

    // Processes that differ are refused on every process, naming the first that differs: a
    // command line's difference as a usage error (exit 2), the data's as a failure (exit 1).
    void sameEverywhereOrRefused()
    {
        for (const bool usage : {true, false}) {
            auto world = makeThreadWorld(3);
            std::vector<std::string> errors(3);
            std::vector<int> usageErrors(3, -1);
            std::vector<std::thread> threads;
            for (int p = 0; p < 3; ++p)
                threads.emplace_back([&, p] {
                    auto group = joinThreadWorld(world, p);
                    try {
                        requireSameEverywhere(*group, p == 2 ? "a\nc" : "a\nb", "dataset", usage);
                    } catch (const InvalidArgument& e) {
                        errors[std::size_t(p)] = e.what();
                        usageErrors[std::size_t(p)] = 1;
                    } catch (const Error& e) {
                        errors[std::size_t(p)] = e.what();
                        usageErrors[std::size_t(p)] = 0;
                    }
                });
            for (auto& t : threads) t.join();
            for (int p = 0; p < 3; ++p) {
                QCOMPARE(usageErrors[std::size_t(p)], usage ? 1 : 0);
                QVERIFY2(
                    errors[std::size_t(p)].rfind("rank 2 runs another dataset than rank 0", 0) == 0,
                    errors[std::size_t(p)].c_str());
            }
        }
        auto world = makeThreadWorld(2);
        std::vector<std::thread> same;
        for (int p = 0; p < 2; ++p)
            same.emplace_back([&, p] {
                auto group = joinThreadWorld(world, p);
                requireSameEverywhere(*group, "a", "dataset", false);
            });
        for (auto& t : same) t.join();
    }

    // The settings the processes were started with agree by meaning, not spelling: the same
    // meanings given otherwise and in another order pass; a difference is refused on every
    // process (a usage error), naming the first setting that differs and what it is on each rank,
    // a setting one rank lacks as "not given" there.
    void sameSettingsOrRefused()
    {
        const auto onThree = [](const std::function<std::vector<Setting>(int)>& settingsOf) {
            auto world = makeThreadWorld(3);
            std::vector<std::string> errors(3);
            std::vector<std::thread> threads;
            for (int p = 0; p < 3; ++p)
                threads.emplace_back([&, p] {
                    auto group = joinThreadWorld(world, p);
                    try {
                        requireSameSettings(*group, settingsOf(p));
                    } catch (const InvalidArgument& e) {
                        errors[std::size_t(p)] = e.what();
                    } catch (const Error& e) {
                        errors[std::size_t(p)] = std::string("not a usage error: ") + e.what();
                    }
                });
            for (auto& t : threads) t.join();
            // Every process says the same (rank 0's words), or "differ" for the test to show.
            for (int p = 1; p < 3; ++p)
                if (errors[std::size_t(p)] != errors[0])
                    return "the processes differ: '" + errors[0] + "' and '" +
                           errors[std::size_t(p)] + "'";
            return errors[0];
        };
        const Setting build{"the Towers build", "towers-cli 1", "towers-cli 1"};
        QCOMPARE(
            onThree([&](int p) {
                std::vector<Setting> s{
                    build, {"--lr", "0.10000000000000001", "0.1"}, {"--towers", "2", "2"}};
                if (p == 1)
                    s = {{"--towers", "2", "02"}, build, {"--lr", "0.10000000000000001", "1e-1"}};
                return s;
            }),
            std::string());
        const std::string lr = onThree([&](int p) {
            return std::vector<Setting>{build,
                                        {"--towers", "2", "2"},
                                        {"--lr", p == 1 ? "0.5" : "0.1", p == 1 ? "0.5" : "1e-1"}};
        });
        QVERIFY2(lr.rfind("the processes of the run were started differently: --lr is 1e-1 on "
                          "ranks 0 and 2, 0.5 on rank 1.",
                          0) == 0,
                 lr.c_str());
        const std::string missing = onThree([&](int p) {
            std::vector<Setting> s{build};
            if (p == 2) s.push_back({"--resume", "on", "given"});
            return s;
        });
        QVERIFY2(missing.rfind("the processes of the run were started differently: --resume is "
                               "not given on ranks 0 and 1, given on rank 2.",
                               0) == 0,
                 missing.c_str());
        const std::string builds = onThree([&](int p) {
            return std::vector<Setting>{
                p == 0 ? build : Setting{"the Towers build", "towers-cli 2", "towers-cli 2"},
                {"--lr", "0.2", "0.2"}};
        });
        QVERIFY2(builds.rfind("the processes of the run were started differently: the Towers "
                              "build is towers-cli 1 on rank 0, towers-cli 2 on ranks 1 and 2.",
                              0) == 0,
                 builds.c_str());
    }

    // broadcast takes a global root tower: tower 3 (process 1's second) to all.
    void broadcastFromAGlobalRoot()
    {
        auto world = makeThreadWorld(2);
        std::vector<std::unique_ptr<ProcessGroup>> groups;
        std::vector<std::unique_ptr<ProcessCommunicator>> comms;
        for (int p = 0; p < 2; ++p) {
            groups.push_back(joinThreadWorld(world, p));
            comms.push_back(std::make_unique<ProcessCommunicator>(2, *groups.back()));
        }
        std::vector<std::vector<Tensor>> t(4);
        for (int g = 0; g < 4; ++g)
            t[std::size_t(g)] = {wideRandom({9}, DType::Float32, std::uint64_t(g)),
                                 Tensor({2}, DType::Int32)};
        t[3][1].data<std::int32_t>()[0] = 42;
        const Tensor want = t[3][0].clone();
        onEveryTower(2, 2, [&](int p, int r) {
            comms[std::size_t(p)]->broadcast(r, 3, t[std::size_t(p * 2 + r)]);
        });
        for (int g = 0; g < 4; ++g) {
            QVERIFY(sameBytes(t[std::size_t(g)][0], want));
            QCOMPARE(t[std::size_t(g)][1].data<std::int32_t>()[0], 42);
        }
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, comms[0]->broadcast(0, 4, t[0]));
    }

    // Process 1 fails before it starts the collective: process 0's towers, waiting on it, are
    // released with process 1's message (ProcessFailed), well before the group's timeout.
    void failureInOneProcessReleasesTheOthers()
    {
        auto world = makeThreadWorld(2, 60);
        auto g0 = joinThreadWorld(world, 0), g1 = joinThreadWorld(world, 1);
        ProcessCommunicator c0(2, *g0);
        std::vector<Tensor> a{wideRandom({8}, DType::Float32, 1)},
            b{wideRandom({8}, DType::Float32, 2)};
        const auto start = std::chrono::steady_clock::now();
        auto waiting = std::async(std::launch::async, [&] {
            try {
                c0.allReduceMean(0, a);
            } catch (const ProcessFailed& e) {
                return std::string("ProcessFailed: ") + e.what();
            } catch (const CollectiveAborted& e) {
                return std::string("CollectiveAborted: ") + e.what();
            }
            return std::string("returned");
        });
        auto other = std::async(std::launch::async, [&] {
            try {
                c0.allReduceMean(1, b);
            } catch (const Error& e) {
                return std::string(e.what());
            }
            return std::string("returned");
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        g1->announceFailure("cannot read /data/train-images: truncated");
        QCOMPARE(waiting.wait_for(std::chrono::seconds(10)), std::future_status::ready);
        QCOMPARE(other.wait_for(std::chrono::seconds(10)), std::future_status::ready);
        const std::string first = waiting.get(), second = other.get();
        const std::string both = first + " | " + second;
        QVERIFY2(both.find("rank 1 failed: cannot read /data/train-images: truncated") !=
                     std::string::npos,
                 both.c_str());
        QVERIFY(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
        QVERIFY(c0.aborted());
        // Later collectives fail at once.
        QVERIFY_THROWS_EXCEPTION(CollectiveAborted, c0.startAllReduceMean(0, a));
    }

    // A tower of this process fails: abort() releases the tower waiting on the other process.
    void localAbortReleasesAWaitingTower()
    {
        auto world = makeThreadWorld(2, 60);
        auto g0 = joinThreadWorld(world, 0);
        ProcessCommunicator c0(1, *g0);
        std::vector<Tensor> a{wideRandom({8}, DType::Float32, 1)};
        auto waiting = std::async(std::launch::async, [&] {
            try {
                c0.allReduceMean(0, a); // process 1 never comes
            } catch (const CollectiveAborted& e) {
                return std::string(e.what());
            }
            return std::string("returned");
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        c0.abort("tower 0 failed: out of memory");
        QCOMPARE(waiting.wait_for(std::chrono::seconds(10)), std::future_status::ready);
        QCOMPARE(waiting.get(), std::string("tower 0 failed: out of memory"));
    }

    // A process that never comes: the wait ends with the group's timeout, saying so.
    void silentProcessTimesOut()
    {
        auto world = makeThreadWorld(2, 0.5);
        auto g0 = joinThreadWorld(world, 0);
        ProcessCommunicator c0(1, *g0);
        std::vector<Tensor> a{wideRandom({8}, DType::Float32, 1)};
        try {
            c0.allReduceMean(0, a);
            QFAIL("the collective returned without the other process");
        } catch (const ProcessFailed& e) {
            QVERIFY2(std::string(e.what()).find("no answer") != std::string::npos, e.what());
        }
    }

    // TowerSets of 2 processes x 1 tower and 2 x 2 train (with buckets, momentum and EMA; with
    // the gradients clipped by their norm; accumulating 2 batches a step, whose dropout streams
    // are global too) and evaluate bitwise as one TowerSet of 2 and 4 towers: losses, weights,
    // optimizer state, the norms, and the merged evaluation.
    void towerSetsAcrossProcessesEqualOneProcess_data()
    {
        QTest::addColumn<int>("processes");
        QTest::addColumn<int>("towers");
        QTest::addColumn<double>("clip");
        QTest::addColumn<int>("accumulate");
        QTest::newRow("2 x 1") << 2 << 1 << 0.0 << 1;
        QTest::newRow("2 x 2") << 2 << 2 << 0.0 << 1;
        // Every process clips the global averages with the norm it sums: the same bits.
        QTest::newRow("2 x 2, gradients clipped") << 2 << 2 << 0.05 << 1;
        QTest::newRow("2 x 2, 2 batches accumulated") << 2 << 2 << 0.0 << 2;
    }
    void towerSetsAcrossProcessesEqualOneProcess()
    {
        QFETCH(int, processes);
        QFETCH(int, towers);
        QFETCH(double, clip);
        QFETCH(int, accumulate);
        const Trained one = train(0, processes * towers, 4, "onednn", nullptr, clip, accumulate);
        const Trained many = train(processes, towers, 4, "onednn", nullptr, clip, accumulate);
        QCOMPARE(many.losses, one.losses);
        for (std::size_t s = 0; s < one.gradNorms.size(); ++s) {
            // The same norm at every step, measured whether the run clips or not (above the
            // bound where it clips).
            QVERIFY2(std::isfinite(one.gradNorms[s]) && one.gradNorms[s] > clip,
                     qPrintable(QString::number(one.gradNorms[s])));
            QVERIFY(many.gradNorms[s] == one.gradNorms[s]);
        }
        QCOMPARE(many.weights.size(), one.weights.size());
        for (std::size_t i = 0; i < one.weights.size(); ++i)
            QVERIFY2(sameBytes(many.weights[i].second, one.weights[i].second),
                     one.weights[i].first.c_str());
        QCOMPARE(many.eval.examples, std::int64_t(45));
        QCOMPARE(many.eval.correct, one.eval.correct);
        QCOMPARE(many.eval.confusion, one.eval.confusion);
        QCOMPARE(many.eval.meanCrossEntropy, one.eval.meanCrossEntropy);
    }

    // A stop asked on one process while the processes evaluate (its cancel callback, as a signal
    // to one rank sets it) ends every process's share within a bound, where the others evaluated
    // theirs to the end before the one exchange (a slow batch source: a share takes 10 s and
    // more). Every process merges the same part-way result. The shares differ by a batch (an odd
    // count); without a stop every process completes. A watchdog fails a hang instead of
    // blocking on it.
    void aStopOnOneProcessEndsEveryEvaluation_data()
    {
        QTest::addColumn<int>("processes");
        QTest::addColumn<int>("towers");
        QTest::addColumn<int>("stopper"); // -1: nobody stops
        QTest::addColumn<int>("batches");
        QTest::newRow("2 x 1, stop on rank 0") << 2 << 1 << 0 << 1001;
        QTest::newRow("2 x 1, stop on rank 1") << 2 << 1 << 1 << 1001;
        QTest::newRow("2 x 2, stop on rank 1") << 2 << 2 << 1 << 2001;
        QTest::newRow("3 x 1, stop on rank 2") << 3 << 1 << 2 << 1501;
        QTest::newRow("2 x 1, no stop") << 2 << 1 << -1 << 21;
    }
    void aStopOnOneProcessEndsEveryEvaluation()
    {
        using namespace std::chrono;
        QFETCH(int, processes);
        QFETCH(int, towers);
        QFETCH(int, stopper);
        QFETCH(int, batches);
        constexpr int kBatch = 4;
        const std::int64_t count = std::int64_t(batches) * kBatch - 1; // the last batch short
        constexpr auto kBatchTime = milliseconds(20);
        constexpr auto kBound = seconds(3); // from the stop to every process's end
        constexpr int kStopAfter = 5;       // batches of the stopping process
        SyntheticBatches source({28, 28, 1}, 10, processes * towers, 6, 600, 11);
        const EvalBatchFn slowly = source.evaluationBatches();
        std::vector<std::atomic<bool>> stopAsked(static_cast<std::size_t>(processes));
        std::atomic<int> served{0};
        std::atomic<bool> abandon{false};
        std::atomic<steady_clock::rep> stoppedAt{0};
        auto world = makeThreadWorld(processes, 20);
        struct Ended
        {
            EvalResult eval;
            steady_clock::time_point at;
        };
        std::vector<std::future<Ended>> results;
        for (int p = 0; p < processes; ++p)
            results.push_back(std::async(std::launch::async, [&, p] {
                auto group = joinThreadWorld(world, p);
                auto o = towerOptions(towers);
                o.processes = group.get();
                TowerSet set(o);
                const EvalBatchFn batchesOf = [&, p](std::int64_t begin, std::int64_t end,
                                                     Tensor& images, Tensor& labels) {
                    if (abandon) throw Error("abandoned by the watchdog");
                    std::this_thread::sleep_for(kBatchTime);
                    slowly(begin, end, images, labels);
                    if (p == stopper && ++served == kStopAfter) {
                        stoppedAt = steady_clock::now().time_since_epoch().count();
                        stopAsked[std::size_t(p)] = true;
                    }
                };
                Ended e;
                e.eval = set.evaluate(count, kBatch, batchesOf, false,
                                      [&, p] { return stopAsked[std::size_t(p)].load(); });
                e.at = steady_clock::now();
                return e;
            }));
        // The watchdog: a process still evaluating long after the bound is a hang.
        const auto deadline = steady_clock::now() + seconds(60);
        for (auto& r : results)
            if (r.wait_until(deadline) != std::future_status::ready) abandon = true;
        QVERIFY2(!abandon, "an evaluation still ran 60 s on: the processes hang");
        std::vector<Ended> ended;
        for (auto& r : results) ended.push_back(r.get());
        for (int p = 0; p < processes; ++p) {
            const EvalResult& e = ended[std::size_t(p)].eval;
            QCOMPARE(e.complete, stopper < 0);
            QCOMPARE(e.examples, ended[0].eval.examples); // the same merge everywhere
            QCOMPARE(e.correct, ended[0].eval.correct);
            QCOMPARE(e.confusion, ended[0].eval.confusion);
        }
        if (stopper < 0) {
            QCOMPARE(ended[0].eval.examples, count);
            return;
        }
        QVERIFY(ended[0].eval.examples < count);
        const steady_clock::time_point stop{steady_clock::duration(stoppedAt.load())};
        for (int p = 0; p < processes; ++p) {
            const double after = duration<double>(ended[std::size_t(p)].at - stop).count();
            qInfo("rank %d ended its evaluation %.3f s after the stop on rank %d", p, after,
                  stopper);
            QVERIFY2(ended[std::size_t(p)].at - stop < kBound,
                     qPrintable(QStringLiteral("rank %1 evaluated on for %2 s after the stop")
                                    .arg(p)
                                    .arg(after)));
        }
    }

    // GPU towers of 2 "processes" on one GPU (threads here, the NCCL world or, where NCCL refuses
    // two ranks on one GPU, the host over the group) against one process of 2 towers on it (the
    // same-GPU kernel): every process holds bitwise the same, and the same as one process within
    // float rounding (NCCL's average may round differently from the kernel's).
    void gpuTowersAcrossProcessesAgree()
    {
        std::string why;
        GpuBackend* gpu = cudaBackend(&why);
        if (gpu && gpu->deviceCount() == 0) why = "no GPU: " + gpu->unavailableReason();
        if (!gpu || gpu->deviceCount() == 0)
            QSKIP(qPrintable(
                QString::fromStdString("needs an NVIDIA GPU and the CUDA backend: " + why)));
        std::string averaging;
        const Trained one = train(0, 2, 4, "cuda");
        const Trained many = train(2, 1, 4, "cuda", &averaging);
        qInfo("2 processes on one GPU average %s", averaging.c_str());
        QCOMPARE(many.weights.size(), one.weights.size());
        for (std::size_t i = 0; i < one.weights.size(); ++i) {
            const Tensor a = many.weights[i].second.onHost(), b = one.weights[i].second.onHost();
            double worst = 0, scale = 0;
            for (std::int64_t k = 0; k < b.numel(); ++k) {
                worst = std::max(worst, std::fabs(a.at(k) - b.at(k)));
                scale = std::max(scale, std::fabs(b.at(k)));
            }
            QVERIFY2(worst <= 1e-4 * std::max(scale, 1e-3), one.weights[i].first.c_str());
        }
        for (std::size_t s = 0; s < one.losses.size(); ++s)
            QVERIFY(std::fabs(many.losses[s] - one.losses[s]) <= 1e-4 * std::fabs(one.losses[s]));
        QCOMPARE(many.eval.examples, one.eval.examples);
    }

    // What the launchers set: Open MPI's, PMI's (MPICH, srun --mpi=pmi2), PMIx's with Slurm's
    // task count; a world of one is "alone"; nothing set is alone.
    void launchDetection()
    {
        const char* names[] = {"OMPI_COMM_WORLD_SIZE",
                               "OMPI_COMM_WORLD_RANK",
                               "PMI_SIZE",
                               "PMI_RANK",
                               "PMIX_RANK",
                               "SLURM_NTASKS",
                               "PMIX_SIZE"};
        for (const char* n : names) qunsetenv(n);
        QVERIFY(!detectLaunch().launched);
        qputenv("OMPI_COMM_WORLD_SIZE", "4");
        qputenv("OMPI_COMM_WORLD_RANK", "3");
        LaunchInfo l = detectLaunch();
        QVERIFY(l.launched);
        QCOMPARE(l.rank, 3);
        QCOMPARE(l.size, 4);
        QCOMPARE(l.launcher, std::string("Open MPI"));
        qputenv("OMPI_COMM_WORLD_SIZE", "1");
        qputenv("OMPI_COMM_WORLD_RANK", "0");
        QVERIFY(!detectLaunch().launched); // mpirun -np 1: alone
        qunsetenv("OMPI_COMM_WORLD_SIZE");
        qunsetenv("OMPI_COMM_WORLD_RANK");
        qputenv("PMI_SIZE", "2");
        qputenv("PMI_RANK", "1");
        l = detectLaunch();
        QVERIFY(l.launched);
        QCOMPARE(l.launcher, std::string("PMI"));
        QCOMPARE(l.rank, 1);
        qunsetenv("PMI_SIZE");
        qunsetenv("PMI_RANK");
        qputenv("PMIX_RANK", "5");
        QVERIFY(!detectLaunch().launched); // no size known
        qputenv("SLURM_NTASKS", "8");
        l = detectLaunch();
        QVERIFY(l.launched);
        QCOMPARE(l.size, 8);
        QCOMPARE(l.launcher, std::string("PMIx"));
        qputenv("SLURM_NTASKS", "4"); // a rank beyond the size is not a launch
        QVERIFY(!detectLaunch().launched);
        qputenv("SLURM_NTASKS", "x");
        QVERIFY(!detectLaunch().launched);
        for (const char* n : names) qunsetenv(n);
        // Alone, joining is nothing (no MPI start-up at all).
        QVERIFY(joinProcessGroup() == nullptr);
    }

    // srun without --mpi=pmix or pmi2: Slurm numbers its tasks but gives MPI nothing to join
    // them with, so each would be a world of one. Such a task is told so when it joins (every
    // build), with the srun option that works; a batch script's own shell (SLURM_NTASKS and
    // SLURM_PROCID, but no step of srun's) and a task of one are not refused.
    void srunWithoutPmiIsRefused()
    {
        const char* names[] = {"OMPI_COMM_WORLD_SIZE",
                               "OMPI_COMM_WORLD_RANK",
                               "PMI_SIZE",
                               "PMI_RANK",
                               "PMIX_RANK",
                               "PMIX_SIZE",
                               "SLURM_NTASKS",
                               "SLURM_PROCID",
                               "SLURM_STEP_ID",
                               "SLURM_STEPID",
                               "SLURM_STEP_NUM_TASKS"};
        for (const char* n : names) qunsetenv(n);
        qputenv("SLURM_NTASKS", "4"); // sbatch --ntasks=4: the batch script itself
        qputenv("SLURM_PROCID", "0");
        QVERIFY(!detectLaunch().unjoinable);
        QVERIFY(joinProcessGroup() == nullptr);
        qputenv("SLURM_STEP_NUM_TASKS", "4"); // srun -n 4 without --mpi
        qputenv("SLURM_STEP_ID", "0");
        qputenv("SLURM_PROCID", "2");
        LaunchInfo l = detectLaunch();
        QVERIFY(l.unjoinable);
        QVERIFY(!l.launched);
        QCOMPARE(l.rank, 2);
        QCOMPARE(l.size, 4);
        QCOMPARE(l.launcher, std::string("Slurm"));
        try {
            joinProcessGroup();
            QFAIL("a task of srun without PMI joined");
        } catch (const InvalidArgument& e) {
            const std::string what = e.what();
            QVERIFY2(what.find("srun started 4 tasks") != std::string::npos, e.what());
            QVERIFY2(what.find("srun --mpi=pmix") != std::string::npos, e.what());
        }
        qunsetenv("SLURM_STEP_NUM_TASKS"); // an older srun: its step id and the task count
        QVERIFY(detectLaunch().unjoinable);
        qputenv("SLURM_STEP_ID", "batch");
        QVERIFY(!detectLaunch().unjoinable);
        qputenv("SLURM_STEP_NUM_TASKS", "1"); // srun -n 1: one process, nothing to join
        qputenv("SLURM_STEP_ID", "0");
        QVERIFY(!detectLaunch().unjoinable);
        qputenv("SLURM_STEP_NUM_TASKS", "4"); // srun --mpi=pmix: PMIx joins them
        qputenv("PMIX_RANK", "2");
        l = detectLaunch();
        QVERIFY(l.launched && !l.unjoinable);
        QCOMPARE(l.launcher, std::string("PMIx"));
        for (const char* n : names) qunsetenv(n);
    }
};

QTEST_APPLESS_MAIN(TestProcessCommunicator)
#include "tst_process_communicator.moc"
