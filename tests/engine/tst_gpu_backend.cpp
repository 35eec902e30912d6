// The CUDA backend plugin. Everywhere: it loads (in a build with CUDA) or says why not, and
// refuses a program of another build. On a machine with an NVIDIA GPU: every op against the
// float64 reference (the self-test's checks, also with TF32), training on GPU towers (the loss
// falls, the replicas stay identical, 2 and 4 towers equal 1 tower of the same global batch, the
// averaging kernel equals the host's average bitwise), device
// errors as typed exceptions, convolutions that repeat bitwise (deterministic algorithms), two
// execution contexts sharing a GPU from two threads (stream-ordered memory on each one's stream),
// captured steps (CUDA graphs) replayed bitwise as issued op by op, what a capture cannot hold
// refused and the context usable after, batch-norm statistics over more rows than one grid
// dimension holds, steps issued ahead of their results (bitwise those stepped one at a time),
// and, with two GPUs, an NCCL collective released by an abort. NCCL worlds of several processes
// (GpuBackend::NcclWorld), the processes played by threads of this one: everywhere, the id is
// shared exactly once whatever fails; on a GPU, a world of one process, two processes on one GPU
// (joined or refused with a reason, never a hang) and, with two GPUs, two processes averaging,
// broadcasting and meeting across the world. Without a GPU those skip, saying why.
#include <QtTest>

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include "engine/gpu/gpu_backend.h"
#include "engine/ops/precision.h"
#include "engine/ops/step_scalar_values.h"
#include "engine/selftest/op_cases.h"
#include "engine/selftest/selftest.h"
#include "engine/tensor/rng.h"
#include "engine/train/tower_set.h"
#include "engine/train/train_config.h"
#include "gradcheck.h"
#include "replication.h"
#include "synthetic_batches.h"

using namespace towers::engine;
using towers::test::randomTensor;
using towers::test::sameBytes;

namespace {

// The GPU backend when it can run, else nullptr with the reason to skip.
GpuBackend* gpuOrWhy(QString& why)
{
    std::string reason;
    GpuBackend* gpu = cudaBackend(&reason);
    if (!gpu) {
        why = QString::fromStdString(reason);
        return nullptr;
    }
    if (gpu->deviceCount() == 0) {
        why = QStringLiteral("no GPU: ") + QString::fromStdString(gpu->unavailableReason());
        return nullptr;
    }
    return gpu;
}

#define REQUIRE_GPU(gpu)                                                                           \
    QString why_;                                                                                  \
    GpuBackend* gpu = gpuOrWhy(why_);                                                              \
    if (!gpu) QSKIP(qPrintable(QStringLiteral("needs an NVIDIA GPU and the CUDA backend: ") + why_))

// Towers of `model` on the GPU (GPU 0 for all of them, or one each), trained by `optimizer`.
TowerSetOptions onTheGpu(const char* model, int towers, const char* optimizer,
                         std::uint64_t seed = 1)
{
    TowerSetOptions o;
    o.model = model;
    o.backend = "cuda";
    o.towers = towers;
    o.optimizer.kind = optimizer;
    o.seed = seed;
    return o;
}

void runSelfTest(bool tf32)
{
    SelfTestOptions o;
    o.backend = "cuda";
    o.allowTf32 = tf32;
    o.training = !tf32;
    int failed = 0;
    const auto results = towers::engine::runSelfTest(o, [&](const SelfTestResult& r) {
        qInfo().noquote() << (r.passed ? "PASS" : "FAIL") << QString::fromStdString(r.name)
                          << r.error << "<=" << r.tolerance << QString::fromStdString(r.detail);
        failed += r.passed ? 0 : 1;
    });
    QVERIFY(results.size() > 20);
    QCOMPARE(failed, 0);
}

// Runs f on a thread and waits for it at most `limit`; a hang stops the process (with the
// reason) rather than the test run.
void withinOrFatal(std::chrono::seconds limit, const char* what, const std::function<void()>& f)
{
    auto done = std::make_shared<std::pair<std::mutex, std::condition_variable>>();
    auto finished = std::make_shared<bool>(false);
    std::thread t([=] {
        f();
        std::lock_guard lock(done->first);
        *finished = true;
        done->second.notify_all();
    });
    std::unique_lock lock(done->first);
    if (!done->second.wait_for(lock, limit, [&] { return *finished; }))
        qFatal("%s did not finish within %d s: a hang", what, int(limit.count()));
    lock.unlock();
    t.join();
}

// The id's way from the process of global rank 0 to the others, when the processes are threads.
struct IdMailbox
{
    std::promise<std::vector<char>> promise;
    std::shared_future<std::vector<char>> future = promise.get_future().share();
};

// What shareId saw in one process.
struct Shares
{
    std::atomic<int> calls{0};
    std::vector<char> first; // the bytes given to the first call
};

// Global ranks firstRank.. of a world of worldSize: rank 0's process posts the id to the
// mailbox, the others take it from there (a launcher's broadcast).
GpuBackend::NcclWorld worldOf(int worldSize, int firstRank, IdMailbox& box, Shares& shares)
{
    GpuBackend::NcclWorld world;
    world.worldSize = worldSize;
    world.firstRank = firstRank;
    world.shareId = [&box, &shares, firstRank](void* bytes, std::size_t size) {
        auto* p = static_cast<char*>(bytes);
        if (shares.calls++ == 0) shares.first.assign(p, p + size);
        if (firstRank == 0) {
            box.promise.set_value(std::vector<char>(p, p + size));
            return;
        }
        const std::vector<char>& id = box.future.get();
        std::memcpy(p, id.data(), std::min(size, id.size()));
    };
    return world;
}

bool allZero(const std::vector<char>& bytes)
{
    return std::all_of(bytes.begin(), bytes.end(), [](char c) { return c == 0; });
}

// One process's communicators, abortable from any process's thread (the launcher's
// announceFailure): a failing process releases the others instead of leaving them to time out.
struct World
{
    std::mutex mutex;
    std::vector<Communicator*> comms;
    void add(Communicator* c)
    {
        std::lock_guard lock(mutex);
        comms.push_back(c);
    }
    void remove(Communicator* c)
    {
        std::lock_guard lock(mutex);
        comms.erase(std::remove(comms.begin(), comms.end(), c), comms.end());
    }
    void abortAll(const std::string& why)
    {
        std::lock_guard lock(mutex);
        for (Communicator* c : comms) c->abort(why);
    }
};

// Global rank `k` of a world of `processes` processes, one tower each: the collectives of the
// communicator `comm` of that process. Returns what went wrong ("" = nothing); `mean` is the
// average it received (compared across processes by the caller).
std::string collectivesOfProcess(Communicator& comm, int k, int processes, int gpuIndex,
                                 Tensor& mean)
{
    const Device dev{DeviceKind::Cuda, gpuIndex};
    auto expectEqual = [](const Tensor& t, double value, const char* what) -> std::string {
        const Tensor h = t.onHost();
        for (std::int64_t i = 0; i < h.numel(); ++i)
            if (h.at(i) != value)
                return std::string(what) + ": element " + std::to_string(i) + " is " +
                       std::to_string(h.at(i)) + ", expected " + std::to_string(value);
        return {};
    };
    if (comm.size() != 1) return "size() is " + std::to_string(comm.size()) + ", not 1";
    // The mean over the whole world: process k's random values, and a constant 2k + 1.
    Rng rng(40 + std::uint64_t(k));
    std::vector<Tensor> t = {randomTensor({100003}, DType::Float32, rng, -10, 10).copyTo(dev),
                             Tensor::filled({3, 5}, DType::Float32, 2 * k + 1).copyTo(dev)};
    comm.allReduceMean(0, t);
    mean = t[0].onHost();
    if (auto e = expectEqual(t[1], processes, "allReduceMean"); !e.empty()) return e;
    // The asynchronous form: 2 and 6 -> 4 (the mean of 2 + 4k).
    std::vector<Tensor> a = {Tensor::filled({4097}, DType::Float32, 2 + 4 * k).copyTo(dev)};
    comm.complete(0, comm.startAllReduceMean(0, a));
    if (auto e = expectEqual(a[0], 2 * processes, "startAllReduceMean"); !e.empty()) return e;
    comm.barrier(0);
    // Global rank 0's tensors, of any dtype, everywhere; no other root.
    std::vector<Tensor> b = {Tensor::filled({33}, DType::Int32, 100 + k).copyTo(dev),
                             Tensor::filled({5}, DType::Float32, -k).copyTo(dev)};
    comm.broadcast(0, 0, b);
    if (auto e = expectEqual(b[0], 100, "broadcast"); !e.empty()) return e;
    if (auto e = expectEqual(b[1], 0, "broadcast"); !e.empty()) return e;
    try {
        comm.broadcast(0, 1, b);
        return "broadcast from root 1 was accepted in a world";
    } catch (const InvalidArgument&) {
    }
    comm.barrier(0);
    return {};
}

// What one process of a world of two (a thread here) saw.
struct ProcessOutcome
{
    bool joined = false;
    std::string whyNot; // makeCommunicator's reason when it returned nullptr
    std::string error;  // anything that went wrong after
    Tensor mean;
};

// Two processes of one world, global ranks 0 and 1 on GPUs gpuOf[0] and gpuOf[1], as two threads.
// Each joins; the collectives run only where both joined (as the launcher would agree on it).
std::array<ProcessOutcome, 2> twoProcesses(GpuBackend* gpu, std::array<int, 2> gpuOf)
{
    std::array<ProcessOutcome, 2> out;
    IdMailbox box;
    Shares shares[2];
    World world;
    std::barrier joined(2);
    std::thread threads[2];
    for (int k = 0; k < 2; ++k)
        threads[k] = std::thread([&, k] {
            ProcessOutcome& mine = out[std::size_t(k)];
            std::unique_ptr<Communicator> comm;
            try {
                const auto w = worldOf(2, k, box, shares[k]);
                comm = gpu->makeCommunicator({gpuOf[std::size_t(k)]}, &mine.whyNot, &w);
            } catch (const std::exception& e) {
                mine.error = std::string("makeCommunicator threw: ") + e.what();
            }
            mine.joined = comm != nullptr;
            if (comm) world.add(comm.get());
            joined.arrive_and_wait();
            if (comm && out[0].joined && out[1].joined) {
                try {
                    mine.error =
                        collectivesOfProcess(*comm, k, 2, gpuOf[std::size_t(k)], mine.mean);
                } catch (const std::exception& e) {
                    mine.error = e.what();
                }
                if (!mine.error.empty())
                    world.abortAll("process " + std::to_string(k) + ": " + mine.error);
            }
            world.remove(comm.get());
            comm.reset(); // the normal end (bounded when the other process is gone)
            if (shares[k].calls != 1 && mine.error.empty())
                mine.error = "shareId was called " + std::to_string(shares[k].calls) + " times";
        });
    for (auto& t : threads) t.join();
    return out;
}

// A small classifier's training step as ops, for the captures: a linear layer with ReLU, the
// cross-entropy and its gradient, the composite backward (its ReLU mask a temporary), the weight
// decay's sum of squares (a scratch buffer inside), what a layer does between ops (a copy with
// Tensor::copyFrom, a tensor made and dropped) and two SGD updates reading their learning rate
// from the step's scalars.
struct TinyStep
{
    Tensor x, labels, w, b, y, probs, loss, dlogits, dw, db, decay, scalars, snapshot, twice;
    Tensor hostScalars = Tensor::pinned({StepScalars::kCount}, DType::Float64);

    explicit TinyStep(const Device& dev)
    {
        Rng rng(21);
        x = randomTensor({64, 96}, DType::Float32, rng).copyTo(dev);
        Tensor l({64}, DType::Int32);
        for (int i = 0; i < 64; ++i) l.data<std::int32_t>()[i] = (i * 7) % 10;
        labels = l.copyTo(dev);
        w = randomTensor({10, 96}, DType::Float32, rng, -0.1, 0.1).copyTo(dev);
        b = Tensor::zeros({10}, DType::Float32).copyTo(dev);
        decay = Tensor::zeros({1}, DType::Float64).copyTo(dev);
        scalars = Tensor::zeros({StepScalars::kCount}, DType::Float64).copyTo(dev);
        snapshot = Tensor({10, 96}, DType::Float32, dev);
        twice = Tensor({64, 10}, DType::Float32, dev);
    }
    // The step's learning rate into its scalars, on the context's stream before the step's work
    // (the host tensor must then stay as it is until the stream has copied it).
    void setLearningRate(Ops& ops, double lr)
    {
        StepScalars s;
        s.values[StepScalars::LearningRate] = lr;
        std::memcpy(hostScalars.data<double>(), s.values, sizeof s.values);
        ops.upload(hostScalars, scalars);
    }
    void issue(Ops& ops)
    {
        ops.linearForward(x, w, b, y, Activation::Relu);
        ops.softmaxCrossEntropyForward(y, labels, 0.0, probs, loss);
        ops.softmaxCrossEntropyBackward(probs, labels, 0.0, 1.0 / 64, dlogits);
        ops.linearBackward(x, w, y, dlogits, Activation::Relu, nullptr, dw, &db);
        ops.sumSquares(w, 0.5, decay);
        snapshot.copyFrom(w);
        Tensor scratch(y.shape(), DType::Float32, y.device());
        scratch.copyFrom(y);
        ops.add(scratch, y, twice);
        ops.sgdUpdate(0, dw, w, Tensor(), scalars);
        ops.sgdUpdate(0, db, b, Tensor(), scalars);
    }
};

// "" when f throws Unsupported saying "during a capture", else what happened instead.
QString refusedDuringCapture(const char* what, const std::function<void()>& f)
{
    try {
        f();
        return QStringLiteral("%1 was accepted during a capture").arg(what);
    } catch (const Unsupported& e) {
        if (QByteArray(e.what()).contains("during a capture")) return {};
        return QStringLiteral("%1: %2").arg(what, e.what());
    } catch (const std::exception& e) {
        return QStringLiteral("%1 threw another error: %2").arg(what, e.what());
    }
}

} // namespace

class TestGpuBackend : public QObject
{
    Q_OBJECT
private slots:
    void loadsOrSaysWhy()
    {
        std::string why;
        GpuBackend* gpu = cudaBackend(&why);
        if (!TOWERS_HAS_CUDA) {
            QVERIFY(!gpu);
            QVERIFY2(why.find("no CUDA backend") != std::string::npos, why.c_str());
            return;
        }
        // A CUDA build finds its plugin in the build tree; whether a GPU is there is another
        // matter.
        QVERIFY2(gpu, why.c_str());
        const std::string versions = gpu->versions();
        qInfo() << "CUDA backend:" << versions.c_str();
        QVERIFY2(versions.find("cuDNN 9") != std::string::npos, versions.c_str());
        QVERIFY2(versions.find("NCCL") != std::string::npos, versions.c_str());
        if (gpu->deviceCount() == 0) {
            qInfo() << "no GPU:" << gpu->unavailableReason().c_str();
            QVERIFY(!gpu->unavailableReason().empty());
            QVERIFY_THROWS_EXCEPTION(InvalidArgument, gpu->deviceInfo(0));
            QVERIFY_THROWS_EXCEPTION(InvalidArgument, gpu->makeOps(0, {}));
        }
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, gpu->deviceInfo(gpu->deviceCount()));
    }

    void refusesAnotherBuild()
    {
#ifndef TOWERS_CUDA_PLUGIN_FILE
        QSKIP("this build has no CUDA backend plugin");
#else
        const char* env = std::getenv("TOWERS_CUDA_PLUGIN"); // a carried build: the plugin is there
        void* handle = dlopen(env && *env ? env : TOWERS_CUDA_PLUGIN_FILE, RTLD_NOW | RTLD_LOCAL);
        QVERIFY2(handle, dlerror());
        using Entry = GpuBackend* (*)(int, const char*, char*, std::size_t);
        auto entry = reinterpret_cast<Entry>(dlsym(handle, "towers_cuda_backend"));
        QVERIFY(entry);
        char error[512] = {};
        QVERIFY(!entry(kGpuBackendAbi + 1, gpuBackendBuildId(), error, sizeof error));
        QVERIFY2(QByteArray(error).contains("ABI"), error);
        QVERIFY(!entry(kGpuBackendAbi, "towers 0.0.0 another compiler", error, sizeof error));
        QVERIFY2(QByteArray(error).contains("install matching versions"), error);
#endif
    }

    void everyOpMatchesTheReference()
    {
        REQUIRE_GPU(gpu);
        for (int i = 0; i < gpu->deviceCount(); ++i) {
            const auto info = gpu->deviceInfo(i);
            qInfo() << "GPU" << i << info.name.c_str() << info.computeMajor << info.computeMinor
                    << info.pciBusId.c_str();
            QVERIFY(info.totalMemory > 0);
        }
        runSelfTest(false);
    }

    void everyOpMatchesTheReferenceWithTf32()
    {
        REQUIRE_GPU(gpu);
        runSelfTest(true);
    }

    // The convolutions in NCHW, the layout a plan falls back to where cuDNN supports no NHWC
    // algorithm for a shape (or refuses every one): the transposes around cuDNN, the OIHW filter
    // as stored, the padded gradient's crop. No shape may take that path on a given GPU otherwise.
    void convolutionsInNchwMatchTheReference()
    {
        REQUIRE_GPU(gpu);
        for (const Precision precision : {Precision::Float32, Precision::BFloat16}) {
            if (precision == Precision::BFloat16) {
                if (const std::string no =
                        TrainConfig::precisionUnavailable("cuda", Precision::BFloat16);
                    !no.empty()) {
                    qInfo().noquote() << "NCHW convolutions in bf16 not run:" << no.c_str();
                    continue;
                }
            }
            GpuOpsOptions o;
            o.convolutionsInNchw = true;
            o.precision = precision;
            auto ops = gpu->makeOps(0, o);
            const MathMode mode =
                precision == Precision::BFloat16 ? MathMode::BFloat16 : MathMode::Float32Fast;
            int ran = 0, failed = 0;
            for (const OpCase& c : opCases()) {
                if (c.op.rfind("conv2d", 0) != 0) continue;
                const OpCaseResult r = runOpCase(c, *ops, mode);
                ++ran;
                if (!r.passed) {
                    ++failed;
                    qWarning().noquote() << "FAIL" << QString::fromStdString(c.label())
                                         << QString::fromStdString(r.detail());
                }
            }
            const std::string_view name = precisionName(precision);
            qInfo().noquote() << "NCHW convolutions,"
                              << QString::fromUtf8(name.data(), qsizetype(name.size())) << ":"
                              << ran << "cases," << failed << "failed";
            QVERIFY(ran >= 10);
            QCOMPARE(failed, 0);
        }
        gpu->synchronize(0); // nothing faulted
    }

    void towersOnEveryGpu()
    {
        REQUIRE_GPU(gpu);
        // One tower per GPU, or two on the one GPU: replicas identical after real steps, bitwise.
        const TowerSetOptions o =
            onTheGpu("cifar10-resnet", std::max(2, gpu->deviceCount()), "nesterov");
        TowerSet set(o);
        towers::test::SyntheticBatches data(set.model().inputShape(), set.model().numClasses(),
                                            o.towers, 16, 256, 3);
        double first = 0, last = 0;
        for (int s = 0; s < 8; ++s) {
            const auto r = set.step(data.next(), s, 0.05);
            QVERIFY(r.finite);
            (s == 0 ? first : last) = r.loss;
        }
        qInfo() << "loss" << first << "->" << last;
        QVERIFY(last < first);
        QCOMPARE(QString::fromStdString(set.compareReplicas()), QString());
        const auto eval = set.evaluate(64, 32, data.evaluationBatches(), false);
        QCOMPARE(eval.examples, 64);
    }

    // Two towers sharing the GPU average with the backend's kernel (in buckets started while
    // backward runs, or in one collective after it) what the host averages from copies (sums in
    // double in rank order, as the kernel): the same losses, NaN step skipped, weights and
    // optimizer state, bitwise (cuDNN's heuristic picks the same algorithms for both sets).
    void kernelAveragesAsTheHostDoes_data()
    {
        QTest::addColumn<double>("bucketMb");
        QTest::newRow("buckets while backward runs") << 25.0;
        QTest::newRow("one collective after backward") << 0.0;
    }
    void kernelAveragesAsTheHostDoes()
    {
        REQUIRE_GPU(gpu);
        QFETCH(double, bucketMb);
        // fashion-fast: convolutions, batch norm, max-pool, dropout, linear layers
        TowerSetOptions o = onTheGpu("fashion-fast", 2, "nesterov", 3);
        o.bucketMb = bucketMb;
        TowerSetOptions h = o;
        h.allreduce = "host";
        TowerSet host(h), kernel(o);
        QCOMPARE(QString::fromStdString(kernel.allReduceDescription()), QStringLiteral("on GPU 0"));
        QVERIFY2(QString::fromStdString(host.allReduceDescription()).startsWith("on the host"),
                 host.allReduceDescription().c_str());
        towers::test::expectSameTraining(host, kernel, 11, 5, 2);
    }

    // Replication on the GPU: 2 x 32 and 4 x 16 towers sharing it against 1 x 64 on the same
    // global batches of cifar10-tutorial (no batch norm, no dropout), held to tst_tower_set's
    // float32 measures (losses to 1e-5 at every step; weights to 1e-3 of the largest weight, 1e-4
    // of their norm and 1e-2 of the distance travelled); 2 x 32 one step short is caught.
    void replicationEqualsSingleTowerOnTheGpu()
    {
        REQUIRE_GPU(gpu);
        const TowerSetOptions o = onTheGpu("cifar10-tutorial", 1, "momentum", 5);
        towers::test::expectFloat32Replication(towers::test::replicate(o, o, 5));
    }

    // Steps issued one ahead of their results, as the trainer drives GPU towers (the host issues
    // step s + 1 while the GPU still computes step s, from batches whose memory the next batch
    // reuses): bitwise what towers stepped one at a time compute; a NaN step found one step late
    // discards the step behind it, and issued again the run goes on bitwise.
    void stepsIssuedAheadOnTheGpu()
    {
        REQUIRE_GPU(gpu);
        TowerSetOptions o = onTheGpu("fashion-fast", 2, "adam");
        o.emaDecay = 0.99;
        TowerSet one(o), ahead(o);
        QVERIFY(ahead.pipelines());
        constexpr int kSteps = 8, kNan = 4;
        towers::test::SyntheticBatches a(one.model().inputShape(), one.model().numClasses(), 2, 64,
                                         1024, 7),
            b(one.model().inputShape(), one.model().numClasses(), 2, 64, 1024, 7);
        a.injectNanAt(kNan);
        b.injectNanAt(kNan);
        std::vector<TowerStepResult> expected;
        for (int s = 0; s < kSteps; ++s) expected.push_back(one.step(a.next(), s, 0.01));
        std::int64_t next = 0, collected = 0;
        while (collected < kSteps) {
            if (next < kSteps) {
                b.seek(next);
                ahead.issue(b.next(), next, 0.01);
                ++next;
            }
            if (ahead.inFlight() < TowerSet::kMaxInFlight && next < kSteps) continue;
            const TowerStepResult r = ahead.collect();
            QCOMPARE(r.step, collected);
            QCOMPARE(r.finite, collected != kNan);
            QCOMPARE(r.finite, expected[std::size_t(collected)].finite);
            if (r.finite) QCOMPARE(r.loss, expected[std::size_t(collected)].loss);
            if (!r.finite) {
                QCOMPARE(r.discarded, 1);
                next = collected + 1;
            }
            ++collected;
        }
        QCOMPARE(ahead.optimizer().stepCount(), one.optimizer().stepCount());
        QCOMPARE(QString::fromStdString(ahead.compareReplicas()), QString());
        const auto& p1 = one.model().parameters();
        const auto& p2 = ahead.model().parameters();
        for (std::size_t i = 0; i < p1.size(); ++i)
            QVERIFY2(sameBytes(p1[i]->value.onHost(), p2[i]->value.onHost()), p1[i]->name.c_str());
    }

    // prefetch(): the copy runs on a copy stream beside the ops issued before it (here a queue
    // of busy work), and the ops issued after it see its bytes, round after round.
    void prefetchOrdersBeforeLaterOps()
    {
        REQUIRE_GPU(gpu);
        auto ops = gpu->makeOps(0, {});
        const Device dev{DeviceKind::Cuda, 0};
        Rng rng(5);
        const Tensor big = randomTensor({64, 64, 64, 32}, DType::Float32, rng).copyTo(dev);
        Tensor host = Tensor::pinned({1 << 20}, DType::Float32), fetched, busy, y;
        for (int round = 0; round < 4; ++round) {
            for (std::int64_t i = 0; i < host.numel(); ++i)
                host.data<float>()[i] = float((i * 7 + round * 13) % 101) - 50.0f;
            for (int i = 0; i < 20; ++i) ops->reluForward(big, busy);
            ops->prefetch(host, fetched); // round 0 makes `fetched`; then the copy stream
            ops->reluForward(fetched, y);
            const Tensor got = y.onHost();
            for (std::int64_t i = 0; i < host.numel(); ++i)
                if (got.data<float>()[i] != std::max(0.0f, host.data<float>()[i]))
                    QFAIL(qPrintable(QStringLiteral("round %1, element %2").arg(round).arg(i)));
            ops->synchronize(); // `host` and `fetched` are free again
        }
    }

    void deviceErrorsAreTypedAndSayWhat()
    {
        REQUIRE_GPU(gpu);
        const Device dev{DeviceKind::Cuda, 0};
        try {
            Tensor huge({std::int64_t(1) << 40}, DType::Float32, dev); // 4 TiB
            QFAIL("a 4 TiB tensor was allocated");
        } catch (const DeviceOutOfMemory& e) {
            QVERIFY2(QByteArray(e.what()).contains("asked for"), e.what());
            QVERIFY2(QByteArray(e.what()).contains("cuda:0"), e.what());
        }
        // The device still works after an out-of-memory error.
        Tensor t = Tensor::zeros({3}, DType::Float32).copyTo(dev);
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, t.at(0));
        auto ops = gpu->makeOps(0, {});
        Tensor y;
        // A host tensor given to GPU ops is refused, naming it.
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 ops->reluForward(Tensor::zeros({3}, DType::Float32), y));
        // float64 is the reference's; the GPU says so.
        QVERIFY_THROWS_EXCEPTION(
            Unsupported, ops->reluForward(Tensor::zeros({3}, DType::Float64).copyTo(dev), y));
        // A label outside the classes: the GPU does not stop to look, the loss becomes NaN
        // (op_list.h); the same labels in host memory name their row.
        Tensor logits = Tensor::zeros({4, 10}, DType::Float32).copyTo(dev);
        Tensor labels({4}, DType::Int32);
        for (int i = 0; i < 4; ++i) labels.data<std::int32_t>()[i] = i == 2 ? 10 : 1;
        Tensor probs, loss;
        ops->softmaxCrossEntropyForward(logits, labels.copyTo(dev), 0.0, probs, loss);
        QCOMPARE(loss.device(), dev);
        QVERIFY(std::isnan(loss.onHost().at(0)));
        labels.data<std::int32_t>()[2] = 3;
        ops->softmaxCrossEntropyForward(logits, labels.copyTo(dev), 0.0, probs, loss);
        QVERIFY(std::fabs(loss.onHost().at(0) - std::log(10.0)) < 1e-6); // uniform logits
        gpu->synchronize(0);
    }

    // Deterministic algorithms only (the default): the same convolution twice gives the same
    // bits, in every pass.
    // A convolution repeats bitwise: on one context, and with cuDNN's heuristics (the default)
    // on a second context too, as a second process makes it (a resumed run): the same algorithms,
    // so the same sums. The algorithms cuDNN measures fastest (--cudnn-benchmark) agree with them
    // within float32 rounding.
    void convolutionsRepeatBitwise_data()
    {
        QTest::addColumn<bool>("measured");
        QTest::addRow("cuDNN's heuristics") << false;
        QTest::addRow("cuDNN's measurement") << true;
    }
    void convolutionsRepeatBitwise()
    {
        REQUIRE_GPU(gpu);
        QFETCH(bool, measured);
        const Device dev{DeviceKind::Cuda, 0};
        Rng rng(11);
        const auto d = makeConv2dDesc({16, 24, 24, 32}, 64, 5, 5, 1, 1, Padding::Same);
        const Tensor x = randomTensor(d.inputShape(), DType::Float32, rng).copyTo(dev);
        const Tensor w = randomTensor(d.weightShape(), DType::Float32, rng).copyTo(dev);
        const Tensor dy = randomTensor(d.outputShape(), DType::Float32, rng).copyTo(dev);
        const Tensor none;
        // [context][repeat]; the third context chooses the other way.
        Tensor y[3][2], dx[3][2], dw[3][2], db[3][2];
        for (int c = 0; c < 3; ++c) {
            GpuOpsOptions o;
            o.measureAlgorithms = c < 2 ? measured : !measured;
            auto ops = gpu->makeOps(0, o);
            for (int i = 0; i < 2; ++i) {
                ops->conv2dForward(d, x, w, none, y[c][i], Activation::None);
                ops->conv2dBackwardData(d, dy, w, dx[c][i]);
                ops->conv2dBackwardWeights(d, x, dy, dw[c][i], &db[c][i]);
            }
            ops->synchronize();
        }
        const auto close = [](const Tensor& got, const Tensor& want) { // normalised L2
            const Tensor g = got.onHost(), h = want.onHost();
            double num = 0, den = 0;
            for (std::int64_t i = 0; i < h.numel(); ++i) {
                num += (g.at(i) - h.at(i)) * (g.at(i) - h.at(i));
                den += h.at(i) * h.at(i);
            }
            return std::sqrt(num / std::max(den, 1e-300)) < 1e-4;
        };
        const std::pair<const char*, Tensor(*)[2]> results[] = {
            {"y", y}, {"dx", dx}, {"dw", dw}, {"db", db}};
        for (const auto& [name, r] : results) {
            for (int c = 0; c < 3; ++c) QVERIFY2(sameBytes(r[c][0], r[c][1]), name);
            if (!measured) QVERIFY2(sameBytes(r[0][0], r[1][0]), name);
            QVERIFY2(close(r[2][0], r[0][0]), name);
        }
    }

    // A step captured as a CUDA graph and replayed is bitwise the step issued op by op, step
    // after step, each replay reading the weights as the previous one left them and its learning
    // rate from the step's scalars; the copies and the tensor a layer makes between ops are part
    // of it (the graph's own memory for that tensor and the ops' temporaries). Replays and ops
    // issued op by op interleave on the one context.
    void capturedStepReplaysBitwise()
    {
        REQUIRE_GPU(gpu);
        const Device dev{DeviceKind::Cuda, 0};
        auto ops = gpu->makeOps(0, {});
        QCOMPARE(QString::fromStdString(ops->captureUnavailable()), QString());
        TinyStep plain(dev), captured(dev);
        const Tensor w0 = plain.w.onHost();
        auto lr = [](int step) { return 0.5 / (1 + step); };
        // Step 0 op by op in both: it makes every tensor the step writes.
        for (TinyStep* t : {&plain, &captured}) {
            t->setLearningRate(*ops, lr(0));
            t->issue(*ops);
        }
        ops->synchronize();
        ops->beginCapture();
        QVERIFY(ops->capturing());
        captured.issue(*ops);
        const std::unique_ptr<CapturedWork> work = ops->endCapture();
        QVERIFY(!ops->capturing());
        QVERIFY(work);
        qInfo() << "graph nodes:" << work->size();
        QVERIFY(work->size() >= 9);
        for (int step = 1; step < 6; ++step) {
            plain.setLearningRate(*ops, lr(step));
            plain.issue(*ops);
            captured.setLearningRate(*ops, lr(step));
            work->replay();
            ops->synchronize(); // the host scalars are free again
        }
        QVERIFY(!sameBytes(plain.w, w0)); // the steps did something
        const std::pair<const char*, Tensor TinyStep::*> compared[] = {
            {"w", &TinyStep::w},
            {"b", &TinyStep::b},
            {"y", &TinyStep::y},
            {"probs", &TinyStep::probs},
            {"loss", &TinyStep::loss},
            {"dw", &TinyStep::dw},
            {"db", &TinyStep::db},
            {"decay", &TinyStep::decay},
            {"snapshot", &TinyStep::snapshot},
            {"twice", &TinyStep::twice}};
        for (const auto& [name, member] : compared)
            QVERIFY2(sameBytes(plain.*member, captured.*member), name);
        gpu->synchronize(0); // nothing faulted
    }

    // What would wait for the device during a capture is refused, saying so, before CUDA sees
    // it; so is a convolution's first run (it would make its workspace and measure). After
    // abandonCapture() nothing captured has run, and ops and captures work as before.
    void captureRefusesWaitingAndAbandons()
    {
        REQUIRE_GPU(gpu);
        const Device dev{DeviceKind::Cuda, 0};
        auto ops = gpu->makeOps(0, {});
        Rng rng(23);
        const Tensor x = randomTensor({1000}, DType::Float32, rng).copyTo(dev);
        const Tensor x2 = randomTensor({1000}, DType::Float32, rng).copyTo(dev);
        Tensor y;
        ops->reluForward(x, y);
        const Tensor expected = y.onHost();
        const Tensor pageable = Tensor::zeros({1000}, DType::Float32);
        ops->beginCapture();
        ops->reluForward(x2, y);
        const QString refusals[] = {
            refusedDuringCapture("synchronize", [&] { ops->synchronize(); }),
            refusedDuringCapture("mark", [&] { ops->mark(); }),
            refusedDuringCapture("a copy to the host", [&] { (void)y.onHost(); }),
            refusedDuringCapture("an upload from pageable memory",
                                 [&] { ops->upload(pageable, y); }),
        };
        for (const QString& r : refusals) QVERIFY2(r.isEmpty(), qPrintable(r));
        ops->abandonCapture();
        QVERIFY(!ops->capturing());
        Tensor z;
        ops->reluForward(x, z);
        ops->synchronize();
        QVERIFY(sameBytes(y, expected)); // the captured relu of x2 never ran
        QVERIFY(sameBytes(z, expected));

        // A convolution's first run inside a capture, refused; the tensor it made in the capture
        // has no memory and is let go.
        const auto d = makeConv2dDesc({4, 9, 9, 8}, 16, 3, 3, 1, 1, Padding::Same);
        const Tensor cx = randomTensor(d.inputShape(), DType::Float32, rng).copyTo(dev);
        const Tensor cw = randomTensor(d.weightShape(), DType::Float32, rng).copyTo(dev);
        Tensor cy;
        ops->beginCapture();
        const QString conv = refusedDuringCapture("a convolution's first run", [&] {
            ops->conv2dForward(d, cx, cw, Tensor(), cy, Activation::None);
        });
        QVERIFY2(conv.isEmpty(), qPrintable(conv));
        ops->abandonCapture();
        cy = Tensor();
        Tensor cy1, cy2;
        ops->conv2dForward(d, cx, cw, Tensor(), cy1, Activation::None);
        auto fresh = gpu->makeOps(0, {}); // it may measure another algorithm faster: not bitwise
        fresh->conv2dForward(d, cx, cw, Tensor(), cy2, Activation::None);
        const Tensor h1 = cy1.onHost(), h2 = cy2.onHost();
        for (std::int64_t i = 0; i < h1.numel(); ++i)
            QVERIFY2(
                std::abs(h1.at(i) - h2.at(i)) <= 1e-4 * (1 + std::abs(h2.at(i))),
                qPrintable(
                    QStringLiteral("element %1: %2 vs %3").arg(i).arg(h1.at(i)).arg(h2.at(i))));

        // And a capture again, replayed.
        ops->beginCapture();
        ops->reluForward(x2, y);
        const auto work = ops->endCapture();
        QVERIFY(sameBytes(y, expected)); // not run yet
        work->replay();
        ops->reluForward(x2, z);
        QVERIFY(sameBytes(y, z));
        gpu->synchronize(0); // nothing faulted
    }

    // --precision bf16 on the GPU: convolutions and matrix products on operands that bfloat16
    // holds exactly compute what float64 computes, to the rounding of their outputs (a
    // convolution's: bfloat16, each value then exactly a bfloat16; a matrix product's: float32);
    // on operands it does not hold, they compute what float32 computes on their bfloat16 roundings
    // (the copies round to nearest even).
    void bf16ProductsOnTheGpu()
    {
        REQUIRE_GPU(gpu);
        if (const std::string no = TrainConfig::precisionUnavailable("cuda", Precision::BFloat16);
            !no.empty())
            QSKIP(no.c_str());
        GpuOpsOptions o;
        o.precision = Precision::BFloat16;
        auto bf = gpu->makeOps(0, o);
        QVERIFY(bf->precision() == Precision::BFloat16);
        auto f32 = gpu->makeOps(0, {});
        auto ref = makeReferenceOps();
        const Device dev{DeviceKind::Cuda, 0};
        Rng rng(31);
        const auto rounded = [](const Tensor& t) { // t's bfloat16 roundings, as float32
            return t.to(DType::BFloat16).to(DType::Float32);
        };
        const auto error = [](const Tensor& got, const Tensor& want) { // normalised L2
            const Tensor g = got.onHost(), w = want.onHost();
            double num = 0, den = 0;
            for (std::int64_t i = 0; i < w.numel(); ++i) {
                num += (g.at(i) - w.at(i)) * (g.at(i) - w.at(i));
                den += w.at(i) * w.at(i);
            }
            return std::sqrt(num / std::max(den, 1e-300));
        };
        const auto allBf16 = [](const Tensor& t) { // every value exactly a bfloat16
            const Tensor h = t.onHost();
            const auto* bits = static_cast<const std::uint32_t*>(h.raw());
            for (std::int64_t i = 0; i < h.numel(); ++i)
                if (bits[i] & 0xffffu) return false;
            return true;
        };
        for (const auto& d : {makeConv2dDesc({8, 12, 12, 3}, 16, 5, 5, 1, 1, Padding::Same),
                              makeConv2dDesc({4, 9, 9, 32}, 64, 3, 3, 2, 2, Padding::Same)}) {
            const QString what = QString::fromStdString(d.win.str());
            const Tensor x = rounded(randomTensor(d.inputShape(), DType::Float32, rng));
            const Tensor w = rounded(randomTensor(d.weightShape(), DType::Float32, rng));
            const Tensor dy = rounded(randomTensor(d.outputShape(), DType::Float32, rng));
            const Tensor xd = x.copyTo(dev), wd = w.copyTo(dev), dyd = dy.copyTo(dev);
            Tensor y, dx, dw, ry, rdx, rdw;
            bf->conv2dForward(d, xd, wd, Tensor(), y, Activation::None);
            bf->conv2dBackwardData(d, dyd, wd, dx);
            bf->conv2dBackwardWeights(d, xd, dyd, dw, nullptr);
            const Tensor x64 = x.to(DType::Float64), w64 = w.to(DType::Float64),
                         dy64 = dy.to(DType::Float64);
            ref->conv2dForward(d, x64, w64, Tensor(), ry, Activation::None);
            ref->conv2dBackwardData(d, dy64, w64, rdx);
            ref->conv2dBackwardWeights(d, x64, dy64, rdw, nullptr);
            for (const auto& [name, got, want] : {std::tuple{"forward", &y, &ry},
                                                  {"backward data", &dx, &rdx},
                                                  {"backward weights", &dw, &rdw}}) {
                const double e = error(*got, *want);
                QVERIFY2(e <= 3e-3, qPrintable(QStringLiteral("%1 %2: %3").arg(what, name).arg(e)));
                QVERIFY2(allBf16(*got), qPrintable(what + " " + name + ": not bfloat16 outputs"));
            }
        }
        // A matrix product on operands bfloat16 does not hold: float32's on their roundings.
        const Tensor x = randomTensor({64, 300}, DType::Float32, rng);
        const Tensor w = randomTensor({10, 300}, DType::Float32, rng);
        const Tensor dy = randomTensor({64, 10}, DType::Float32, rng);
        Tensor y, dx, dw, fy, fdx, fdw;
        bf->linearForward(x.copyTo(dev), w.copyTo(dev), Tensor(), y, Activation::None);
        bf->linearBackwardData(dy.copyTo(dev), w.copyTo(dev), dx);
        bf->linearBackwardWeights(x.copyTo(dev), dy.copyTo(dev), dw, nullptr);
        const Tensor xr = rounded(x).copyTo(dev), wr = rounded(w).copyTo(dev),
                     dyr = rounded(dy).copyTo(dev);
        f32->linearForward(xr, wr, Tensor(), fy, Activation::None);
        f32->linearBackwardData(dyr, wr, fdx);
        f32->linearBackwardWeights(xr, dyr, fdw, nullptr);
        for (const auto& [name, got, want] : {std::tuple{"linear forward", &y, &fy},
                                              {"linear backward data", &dx, &fdx},
                                              {"linear backward weights", &dw, &fdw}}) {
            const double e = error(*got, *want);
            QVERIFY2(e <= 1e-5, qPrintable(QStringLiteral("%1: %2").arg(name).arg(e)));
        }
        Tensor unrounded; // float32 on the operands themselves: not what bf16 computes
        f32->linearForward(x.copyTo(dev), w.copyTo(dev), Tensor(), unrounded, Activation::None);
        QVERIFY2(error(y, unrounded) > 1e-4, "the bf16 product did not round its operands");
        gpu->synchronize(0); // nothing faulted
    }

    // A capture cut by work outside it (Ops::outsideCapture, as a collective between a step's
    // parts): two graphs, and the work between them runs at its place in each replay, on the
    // host's side of the stream: the part after it sees what it wrote, and it sees what the part
    // before it computed from the replay's own input.
    void captureInPartsRunsTheWorkBetween()
    {
        REQUIRE_GPU(gpu);
        auto ops = gpu->makeOps(0, {});
        Tensor host = Tensor::pinned({4096}, DType::Float32);
        Tensor x, y, z, w;
        const auto fill = [&](float v) {
            for (std::int64_t i = 0; i < host.numel(); ++i)
                host.data<float>()[i] = (i % 2 ? v : -v) + float(i % 7);
        };
        fill(1);
        ops->upload(host, x);
        ops->reluForward(x, y);
        ops->reluForward(y, z);
        ops->reluForward(z, w);
        ops->synchronize();
        int between = 0;
        ops->beginCapture();
        ops->upload(host, x);
        ops->reluForward(x, y);
        ops->outsideCapture([&] {
            ++between;
            z.copyFrom(y);         // outside ops, ordered after the part before it
            ops->axpy(-2.0, y, z); // z = -y, an op issued between the parts
        });
        ops->reluForward(z, w); // what survives: relu(-relu(x)) = 0
        ops->axpy(1.0, y, w);   // w = relu(x)
        const auto work = ops->endCapture();
        QCOMPARE(between, 0);
        for (float v : {2.f, -3.f, 5.f}) {
            ops->synchronize(); // the host's input is free again
            fill(v);
            work->replay();
            ops->synchronize();
            Tensor expected;
            ops->upload(host, x);
            ops->reluForward(x, expected);
            ops->synchronize();
            QVERIFY(sameBytes(w, expected));
        }
        QCOMPARE(between, 3);
        gpu->synchronize(0); // nothing faulted
    }

    // A capture that leaves tensors made during it behind is refused by endCapture, counting
    // them: their memory was the graph's, which is never made; they are let go without a fault,
    // and the context goes on, op by op and capturing. Captured work outliving its context
    // refuses to replay.
    void captureRefusesTensorsThatOutliveIt()
    {
        REQUIRE_GPU(gpu);
        const Device dev{DeviceKind::Cuda, 0};
        auto ops = gpu->makeOps(0, {});
        Rng rng(29);
        const Tensor x = randomTensor({4096}, DType::Float32, rng).copyTo(dev);
        Tensor y;
        ops->reluForward(x, y);
        const Tensor expected = y.onHost();
        Tensor made, alsoMade;
        ops->beginCapture();
        ops->reluForward(x, made);
        ops->reluForward(x, alsoMade);
        ops->reluForward(x, y);
        try {
            (void)ops->endCapture();
            QFAIL("a capture leaving two tensors behind was accepted");
        } catch (const Unsupported& e) {
            QVERIFY2(QByteArray(e.what()).contains("2 tensors on cuda:0 that outlive the capture"),
                     e.what());
        }
        QVERIFY(!ops->capturing());
        made = Tensor();
        alsoMade = Tensor();
        Tensor z;
        ops->reluForward(x, z);
        QVERIFY(sameBytes(z, expected));

        // Temporaries made and dropped inside a capture are the graph's own: accepted.
        Tensor sum(x.shape(), DType::Float32, dev), reference;
        ops->beginCapture();
        {
            Tensor temp;
            ops->reluForward(x, temp);
            ops->add(temp, x, sum);
        }
        const auto work = ops->endCapture();
        work->replay();
        work->replay();
        Tensor temp;
        ops->reluForward(x, temp);
        ops->add(temp, x, reference);
        QVERIFY(sameBytes(sum, reference));
        gpu->synchronize(0); // nothing faulted
        ops.reset();
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, work->replay());
    }

    // Two execution contexts on one GPU, driven from two threads at once (two towers sharing
    // it): each one's temporaries are allocated and freed on its own stream, and each computes
    // exactly what it computes alone.
    void twoContextsShareAGpu()
    {
        REQUIRE_GPU(gpu);
        const Device dev{DeviceKind::Cuda, 0};
        Rng rng(12);
        const auto d = makeConv2dDesc({8, 15, 15, 16}, 32, 5, 5, 2, 2, Padding::Same);
        const Tensor x = randomTensor(d.inputShape(), DType::Float32, rng).copyTo(dev);
        const Tensor w = randomTensor(d.weightShape(), DType::Float32, rng).copyTo(dev);
        const Tensor dy = randomTensor(d.outputShape(), DType::Float32, rng).copyTo(dev);
        auto a = gpu->makeOps(0, {}), b = gpu->makeOps(0, {});
        Tensor alone[2];
        for (int k = 0; k < 2; ++k) {
            Ops& ops = k == 0 ? *a : *b;
            Tensor dx, dw, db;
            ops.conv2dBackwardWeights(d, x, dy, dw, &db);
            ops.conv2dBackwardData(d, dy, w, dx);
            alone[k] = dw.onHost();
        }
        std::string errors[2];
        Tensor together[2];
        withinOrFatal(std::chrono::seconds(120), "two contexts on one GPU", [&] {
            std::thread threads[2];
            for (int k = 0; k < 2; ++k)
                threads[k] = std::thread([&, k] {
                    try {
                        Ops& ops = k == 0 ? *a : *b;
                        Tensor dx, dw, db, y;
                        for (int i = 0; i < 50; ++i) {
                            ops.conv2dForward(d, x, w, Tensor(), y, Activation::Relu);
                            ops.conv2dBackwardWeights(d, x, dy, dw, &db);
                            ops.conv2dBackwardData(d, dy, w, dx);
                        }
                        together[k] = dw.onHost();
                    } catch (const std::exception& e) {
                        errors[k] = e.what();
                    }
                });
            for (auto& t : threads) t.join();
        });
        for (int k = 0; k < 2; ++k) {
            QVERIFY2(errors[k].empty(), errors[k].c_str());
            QVERIFY(sameBytes(together[k], alone[k]));
        }
    }

    // Batch-norm statistics over more rows (N·H·W) than 65,535 blocks of 256 rows: the grid's
    // y dimension is bounded, the kernel strides over the rest; the means and variances are
    // still right.
    void batchNormBeyondTheGridLimit()
    {
        REQUIRE_GPU(gpu);
        const Device dev{DeviceKind::Cuda, 0};
        const Shape shape{1, 4097, 4097, 2}; // 16,785,409 rows > 65,535 * 256
        Tensor x(shape, DType::Float32);
        float* px = x.data<float>();
        double sum[2] = {0, 0}, squares[2] = {0, 0};
        const std::int64_t rows = shape.numel() / 2;
        for (std::int64_t r = 0; r < rows; ++r)
            for (int c = 0; c < 2; ++c) {
                const float v = float((r * 7 + c * 3) % 101) * 0.01f + float(c);
                px[r * 2 + c] = v;
                sum[c] += v;
            }
        double mean[2];
        for (int c = 0; c < 2; ++c) mean[c] = sum[c] / double(rows);
        for (std::int64_t r = 0; r < rows; ++r)
            for (int c = 0; c < 2; ++c) {
                const double e = px[r * 2 + c] - mean[c];
                squares[c] += e * e;
            }
        auto ops = gpu->makeOps(0, {});
        const auto d = makeBatchNormDesc(shape, 1e-5, 0.1);
        Tensor gamma = Tensor::filled({2}, DType::Float32, 1).copyTo(dev);
        Tensor beta = Tensor::zeros({2}, DType::Float32).copyTo(dev);
        Tensor rm = Tensor::zeros({2}, DType::Float32).copyTo(dev);
        Tensor rv = Tensor::filled({2}, DType::Float32, 1).copyTo(dev);
        Tensor y, saveMean, saveVar;
        ops->batchNormForwardTraining(d, x.copyTo(dev), gamma, beta, y, rm, rv, saveMean, saveVar);
        const Tensor m = saveMean.onHost(), v = saveVar.onHost();
        for (int c = 0; c < 2; ++c) {
            QVERIFY2(std::abs(m.at(c) - mean[c]) <= 1e-6 * std::abs(mean[c]) + 1e-7,
                     qPrintable(QStringLiteral("%1 vs %2").arg(m.at(c)).arg(mean[c])));
            const double var = squares[c] / double(rows);
            QVERIFY2(std::abs(v.at(c) - var) <= 1e-6 * var,
                     qPrintable(QStringLiteral("%1 vs %2").arg(v.at(c)).arg(var)));
        }
    }

    // With a world, every process calls shareId exactly once, whatever fails (the others wait in
    // it otherwise); the process of global rank 0 shares zeros when it cannot start, and another
    // receiving zeros gives up at once. Runs wherever the plugin loads: the failures come before
    // any GPU is touched.
    void ncclWorldSharesItsIdWhateverFails()
    {
        std::string whyNoPlugin;
        GpuBackend* gpu = cudaBackend(&whyNoPlugin);
        if (!gpu) QSKIP(qPrintable(QStringLiteral("no CUDA backend: ") + whyNoPlugin.c_str()));
        GpuBackend::NcclWorld silent{2, 0, {}, {}};
        std::string why;
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, gpu->makeCommunicator({0}, &why, &silent));
        const int missing = gpu->deviceCount(); // no such GPU
        for (int first : {0, 1}) {
            IdMailbox box;
            Shares shares;
            if (first == 1) box.promise.set_value(std::vector<char>(128, 0));
            const auto world = worldOf(2, first, box, shares);
            try {
                gpu->makeCommunicator({missing}, &why, &world);
                QFAIL("a GPU out of range was accepted");
            } catch (const InvalidArgument& e) {
                QVERIFY2(QByteArray(e.what()).contains("there is no GPU"), e.what());
            }
            QCOMPARE(shares.calls.load(), 1);
            QVERIFY(!shares.first.empty());
            if (first == 0) QVERIFY(allZero(shares.first));
        }
        if (gpu->deviceCount() == 0) return; // the rest needs a GPU
        // Two towers of this process on one GPU: refused, after sharing zeros.
        IdMailbox box;
        Shares shares;
        auto world = worldOf(4, 0, box, shares);
        why.clear();
        QVERIFY(!gpu->makeCommunicator({0, 0}, &why, &world));
        QCOMPARE(
            QString::fromStdString(why),
            QStringLiteral("two towers of this process on GPU 0: NCCL takes one rank per GPU"));
        QCOMPARE(shares.calls.load(), 1);
        QVERIFY(allZero(shares.first));
        // Another process receiving those zeros: nullptr at once, saying why.
        IdMailbox zeros;
        zeros.promise.set_value(std::vector<char>(shares.first.size(), 0));
        Shares received;
        world = worldOf(4, 1, zeros, received);
        why.clear();
        const auto t0 = std::chrono::steady_clock::now();
        QVERIFY(!gpu->makeCommunicator({0}, &why, &world));
        QVERIFY(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
        QVERIFY2(why.find("could not start NCCL (it shared no id)") != std::string::npos,
                 why.c_str());
        QCOMPARE(received.calls.load(), 1);
    }

    // A world of one process (all of it here, through the world's path): each of this process's
    // GPUs (two at most) a rank, the mean over them, the world's barrier, global rank 0's
    // broadcast; root 1 refused even where this process holds rank 1; the asynchronous averages
    // ordered on each rank's stream.
    void ncclWorldOfOneProcess()
    {
        REQUIRE_GPU(gpu);
        const int n = std::min(2, gpu->deviceCount());
        std::vector<int> gpus;
        for (int i = 0; i < n; ++i) gpus.push_back(i);
        IdMailbox box;
        Shares shares;
        const auto world = worldOf(n, 0, box, shares);
        std::string why;
        std::unique_ptr<Communicator> comm;
        withinOrFatal(std::chrono::seconds(180), "a world of one process starting",
                      [&] { comm = gpu->makeCommunicator(gpus, &why, &world); });
        if (!comm) QFAIL(qPrintable(QStringLiteral("NCCL did not start: ") + why.c_str()));
        QCOMPARE(shares.calls.load(), 1);
        QVERIFY(!allZero(shares.first));
        QCOMPARE(comm->size(), n);
        std::vector<std::string> errors(static_cast<std::size_t>(n));
        withinOrFatal(std::chrono::seconds(120), "the collectives of a world of one process", [&] {
            std::vector<std::thread> ranks;
            for (int r = 0; r < n; ++r)
                ranks.emplace_back([&, r] {
                    try {
                        const Device dev{DeviceKind::Cuda, r};
                        std::vector<Tensor> t = {
                            Tensor::filled({1000}, DType::Float32, 1 + 2 * r).copyTo(dev)};
                        comm->allReduceMean(r, t);
                        comm->barrier(r);
                        std::vector<Tensor> b = {
                            Tensor::filled({9}, DType::Int32, 7 + r).copyTo(dev)};
                        comm->broadcast(r, 0, b);
                        const Tensor m = t[0].onHost(), h = b[0].onHost();
                        if (m.at(0) != n || m.at(999) != n || h.at(8) != 7)
                            errors[std::size_t(r)] = "wrong values";
                        // The asynchronous averages as towers start them: attached to the
                        // rank's stream, two in flight, each after the work that wrote it and
                        // before the work that reads it (events, no host wait between).
                        auto ops = gpu->makeOps(r, {});
                        comm->attach(r, *ops);
                        const Tensor one =
                            Tensor::filled({4097}, DType::Float32, 1 + r).copyTo(dev);
                        Tensor x({4097}, DType::Float32, dev), y({4097}, DType::Float32, dev),
                            sum({4097}, DType::Float32, dev);
                        ops->add(one, one, x); // 2 + 2r
                        ops->add(x, one, y);   // 3 + 3r
                        const auto kx = comm->startAllReduceMean(r, std::span<Tensor>(&x, 1));
                        const auto ky = comm->startAllReduceMean(r, std::span<Tensor>(&y, 1));
                        comm->complete(r, kx);
                        comm->complete(r, ky);
                        ops->add(x, y, sum); // the means' sum: 5 + 2.5 (n - 1)
                        ops->synchronize();
                        const Tensor hs = sum.onHost();
                        for (std::int64_t i : {std::int64_t(0), std::int64_t(4096)})
                            if (hs.at(i) != 5 + 2.5 * (n - 1))
                                errors[std::size_t(r)] = "the asynchronous averages: element " +
                                                         std::to_string(i) + " of their sum is " +
                                                         std::to_string(hs.at(i)) + ", expected " +
                                                         std::to_string(5 + 2.5 * (n - 1));
                        try {
                            comm->broadcast(r, 1, b);
                            errors[std::size_t(r)] = "root 1 accepted";
                        } catch (const InvalidArgument&) {
                        }
                    } catch (const std::exception& e) {
                        errors[std::size_t(r)] = e.what();
                        comm->abort(e.what());
                    }
                });
            for (auto& t : ranks) t.join();
            comm.reset();
        });
        for (const auto& e : errors) QVERIFY2(e.empty(), e.c_str());
    }

    // Two processes of one world on one GPU: NCCL refuses ("Duplicate GPU detected"), both
    // returning nullptr with NCCL's reason, or takes them, and then their collectives are right.
    // Either is accepted; a hang is not (the watchdog), nor a nullptr without a reason.
    void ncclWorldTwoProcessesOnOneGpu()
    {
        REQUIRE_GPU(gpu);
        std::array<ProcessOutcome, 2> out;
        withinOrFatal(std::chrono::seconds(300), "two processes of a world on one GPU", [&] {
            out = twoProcesses(gpu, {0, 0});
        });
        for (int k = 0; k < 2; ++k) {
            const auto& o = out[std::size_t(k)];
            qInfo() << "process" << k << (o.joined ? "joined" : "refused:") << o.whyNot.c_str();
            QVERIFY2(o.error.empty(), o.error.c_str());
            QVERIFY2(o.joined || !o.whyNot.empty(), "nullptr without a reason");
        }
        if (out[0].joined && out[1].joined) QVERIFY(sameBytes(out[0].mean, out[1].mean));
    }

    // Two processes of one world on GPUs 0 and 1: the mean over both, bitwise the same in each
    // and equal to the mean in double rounded once, the asynchronous average, the world's
    // barrier, global rank 0's broadcast, root 1 refused, and both end cleanly.
    void ncclWorldOfTwoProcesses()
    {
        REQUIRE_GPU(gpu);
        if (gpu->deviceCount() < 2)
            QSKIP("needs two GPUs: NCCL takes one rank per GPU, so two processes of one world "
                  "need two (ncclWorldTwoProcessesOnOneGpu covers one)");
        std::array<ProcessOutcome, 2> out;
        withinOrFatal(std::chrono::seconds(300), "two processes of a world on two GPUs", [&] {
            out = twoProcesses(gpu, {0, 1});
        });
        for (int k = 0; k < 2; ++k) {
            const auto& o = out[std::size_t(k)];
            QVERIFY2(o.joined,
                     qPrintable(QStringLiteral("process %1: %2").arg(k).arg(o.whyNot.c_str())));
            QVERIFY2(o.error.empty(), o.error.c_str());
        }
        QVERIFY(sameBytes(out[0].mean, out[1].mean));
        Rng r0(40), r1(41);
        const Tensor a = randomTensor({100003}, DType::Float32, r0, -10, 10);
        const Tensor b = randomTensor({100003}, DType::Float32, r1, -10, 10);
        for (std::int64_t i = 0; i < a.numel(); ++i) {
            const double expect = double(float((a.at(i) + b.at(i)) / 2));
            if (out[0].mean.at(i) != expect)
                QFAIL(qPrintable(QStringLiteral("element %1: %2, expected %3")
                                     .arg(i)
                                     .arg(out[0].mean.at(i))
                                     .arg(expect)));
        }
    }

    // Declared last: it leaves an aborted collective behind on GPUs 0 and 1. Rank 0 waits in an
    // all-reduce that rank 1 never joins; an abort from another thread releases it within
    // seconds (the watchdog stops the test on a hang), and the communicator then goes quietly.
    void ncclAbortReleasesAWaitingRank()
    {
        REQUIRE_GPU(gpu);
        if (gpu->deviceCount() < 2) QSKIP("needs two GPUs for an NCCL communicator");
        std::string why;
        auto comm = gpu->makeCommunicator({0, 1}, &why);
        if (!comm) QSKIP(qPrintable(QStringLiteral("NCCL did not start: ") + why.c_str()));
        std::vector<Tensor> data = {
            Tensor::zeros({1 << 20}, DType::Float32).copyTo({DeviceKind::Cuda, 0})};
        std::string outcome;
        const auto t0 = std::chrono::steady_clock::now();
        withinOrFatal(std::chrono::seconds(60), "an aborted NCCL all-reduce", [&] {
            std::thread rank0([&] {
                try {
                    comm->allReduceMean(0, data);
                    outcome = "returned";
                } catch (const CollectiveAborted& e) {
                    outcome = std::string("aborted: ") + e.what();
                } catch (const std::exception& e) {
                    outcome = e.what();
                }
            });
            std::this_thread::sleep_for(std::chrono::milliseconds(500));
            comm->abort("tower 1 failed");
            rank0.join();
            comm.reset();
        });
        qInfo() << "released after"
                << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
                << "s:" << outcome.c_str();
        QVERIFY2(outcome.rfind("aborted: ", 0) == 0, outcome.c_str());
        QVERIFY2(outcome.find("tower 1 failed") != std::string::npos, outcome.c_str());
    }
};

QTEST_APPLESS_MAIN(TestGpuBackend)
#include "tst_gpu_backend.moc"
