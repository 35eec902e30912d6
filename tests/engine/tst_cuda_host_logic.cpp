// The CUDA backend's host-side decisions, on the CPU (no GPU, no CUDA library): which convolution
// algorithm cuDNN's measurements lead to (deterministic, exact float32 unless TF32 is allowed,
// NHWC given up only for "not supported"), which stream a block of device memory is allocated and
// freed on (the running op's, else the legacy one; the allocation's own when it dies later), and
// which devices allocate from memory pools. The plugin runs exactly these (conv_algorithm.h,
// stream_policy.h); what only a GPU shows is tst_gpu_backend's.
#include <QtTest>

#include <cstdint>
#include <thread>
#include <vector>

#include "engine/cuda/conv_algorithm.h"
#include "engine/cuda/stream_policy.h"

using namespace towers::engine::cuda;

namespace {

// cuDNN 9's numbers (cudnn_graph.h), which cuda_conv.cpp checks against the header.
constexpr int kNotSupportedLayout = 3004;
constexpr int kNotSupportedShape = 3002;
constexpr int kExecutionFailed = 5000;
constexpr int kBadParam = 2000;
constexpr int kDeviceAllocationFailed = 4004;

constexpr std::size_t kLimit = 1000;

MeasuredAlgorithm ok(std::size_t memory = 0, bool deterministic = true, bool exactFloat = true)
{
    return {kCudnnSuccess, memory, deterministic, exactFloat};
}
MeasuredAlgorithm failed(int status)
{
    return {status, 0, true, true};
}

AlgorithmRules rules(bool deterministicOnly = true, bool allowTf32 = false)
{
    return {kLimit, deterministicOnly, allowTf32};
}

void* stream(std::uintptr_t n)
{
    return reinterpret_cast<void*>(n);
}

void* const kNone = nullptr; // nothing bound: the legacy default stream

} // namespace

class TestCudaHostLogic : public QObject
{
    Q_OBJECT
private slots:
    void notSupportedIsACategory()
    {
        for (int s = 3000; s <= 3014; ++s) QVERIFY(isNotSupportedStatus(s));
        for (int s : {0, 1001, kBadParam, 2999, 4000, kDeviceAllocationFailed, kExecutionFailed})
            QVERIFY2(!isNotSupportedStatus(s), qPrintable(QString::number(s)));
    }

    // The fastest usable entry: deterministic, within the workspace limit, exact float32.
    void choosesTheFastestUsable()
    {
        const std::vector<MeasuredAlgorithm> results = {
            ok(0, false),                // fastest, but not deterministic
            ok(kLimit + 1),              // too much workspace
            ok(0, true, false),          // TF32
            failed(kNotSupportedLayout), // not for this layout
            ok(kLimit),                  // this one
            ok(0),
        };
        auto v = chooseAlgorithm(kCudnnSuccess, results, rules());
        QCOMPARE(int(v.choice), int(AlgorithmChoice::Chosen));
        QCOMPARE(v.index, 4);
        // Non-deterministic algorithms when the user allows them; TF32 when allowed.
        v = chooseAlgorithm(kCudnnSuccess, results, rules(false));
        QCOMPARE(v.index, 0);
        v = chooseAlgorithm(kCudnnSuccess, std::vector{ok(0, false), ok(0, true, false), ok()},
                            rules(true, true));
        QCOMPARE(v.index, 1);
        // An algorithm that failed is passed over when a later one ran.
        v = chooseAlgorithm(kCudnnSuccess, std::vector{failed(kExecutionFailed), ok()}, rules());
        QCOMPARE(int(v.choice), int(AlgorithmChoice::Chosen));
        QCOMPARE(v.index, 1);
    }

    // Nothing cuDNN supports, or nothing the rules allow: NotSupported (an NHWC plan then tries
    // NCHW), saying what was offered.
    void notSupportedFallsBack()
    {
        auto v = chooseAlgorithm(kNotSupportedLayout, {}, rules());
        QCOMPARE(int(v.choice), int(AlgorithmChoice::NotSupported));
        v = chooseAlgorithm(
            kCudnnSuccess,
            std::vector{failed(kNotSupportedShape), failed(kNotSupportedLayout), ok(0, false)},
            rules());
        QCOMPARE(int(v.choice), int(AlgorithmChoice::NotSupported));
        QCOMPARE(QString::fromStdString(v.why),
                 QStringLiteral("2 not supported, 1 not deterministic"));
        v = chooseAlgorithm(kCudnnSuccess, std::vector{ok(kLimit + 1), ok(0, true, false)},
                            rules());
        QCOMPARE(int(v.choice), int(AlgorithmChoice::NotSupported));
        QCOMPARE(QString::fromStdString(v.why),
                 QStringLiteral("1 needing more workspace than the limit, 1 using TF32"));
        v = chooseAlgorithm(kCudnnSuccess, {}, rules());
        QCOMPARE(int(v.choice), int(AlgorithmChoice::NotSupported));
        QCOMPARE(QString::fromStdString(v.why), QStringLiteral("no algorithm"));
    }

    // Any other status is an error with that status: never a silent fallback.
    void otherStatusesAreErrors()
    {
        for (int s : {kExecutionFailed, kBadParam, kDeviceAllocationFailed}) {
            const auto v = chooseAlgorithm(s, {}, rules());
            QCOMPARE(int(v.choice), int(AlgorithmChoice::Failed));
            QCOMPARE(v.status, s);
        }
        const auto v =
            chooseAlgorithm(kCudnnSuccess,
                            std::vector{failed(kNotSupportedLayout),
                                        failed(kDeviceAllocationFailed), failed(kExecutionFailed)},
                            rules());
        QCOMPARE(int(v.choice), int(AlgorithmChoice::Failed));
        QCOMPARE(v.status, kDeviceAllocationFailed);
        QCOMPARE(QString::fromStdString(v.why), QStringLiteral("1 not supported, 2 failed"));
    }

    // The op's stream while it runs, for its device only; scopes nest; each thread has its own.
    void streamBindingFollowsTheOp()
    {
        QCOMPARE(boundStream(0), kNone);
        {
            const BindStream op(0, stream(0x10));
            QCOMPARE(boundStream(0), stream(0x10));
            QCOMPARE(boundStream(1), kNone); // another GPU's memory: the legacy stream
            {
                const BindStream inner(1, stream(0x20));
                QCOMPARE(boundStream(1), stream(0x20));
                QCOMPARE(boundStream(0), kNone);
            }
            QCOMPARE(boundStream(0), stream(0x10));
            void* seen = stream(0x99);
            std::thread other([&] { seen = boundStream(0); });
            other.join();
            QCOMPARE(seen, kNone);
        }
        QCOMPARE(boundStream(0), kNone);
    }

    // A block is freed on the stream it was allocated on, wherever it dies; on the legacy
    // stream (nullptr) once that stream is retired.
    void blocksAreFreedOnTheirStream()
    {
        AllocationTable table;
        int a = 0, b = 0, c = 0, d = 0;
        table.add(&a, {stream(0x10), true});
        table.add(&b, {nullptr, true});
        table.add(&c, {nullptr, false});
        table.add(&d, {stream(0x10), true});
        QCOMPARE(table.size(), std::size_t(4));
        std::vector<std::pair<void*, Allocation>> freed;
        auto record = [&](void* p, const Allocation& x) { freed.emplace_back(p, x); };
        QVERIFY(table.release(&a, record));
        QCOMPARE(freed.back().second.stream, stream(0x10));
        QVERIFY(freed.back().second.pooled);
        QVERIFY(table.release(&c, record));
        QVERIFY(!freed.back().second.pooled); // cudaFree, not cudaFreeAsync
        table.retire(stream(0x10));
        QVERIFY(table.release(&d, record));
        QCOMPARE(freed.back().second.stream, kNone);
        QVERIFY(!table.release(&a, record)); // already freed: nothing called
        QCOMPARE(freed.size(), std::size_t(3));
        QVERIFY(table.find(&b).has_value());
        QCOMPARE(table.size(), std::size_t(1));
    }

    // Devices without memory pools allocate with cudaMalloc; a device that refuses a pool at run
    // time (error 801) too, from then on.
    void poolsWhereSupported()
    {
        PoolSupport pools;
        QVERIFY(!pools.use(0)); // before configuration: none
        pools.configure({true, false, true});
        QVERIFY(pools.use(0));
        QVERIFY(!pools.use(1));
        QVERIFY(pools.use(2));
        QVERIFY(!pools.use(3));
        QVERIFY(!pools.use(-1));
        pools.disable(2);
        QVERIFY(!pools.use(2));
        QVERIFY(pools.use(0));
    }
};

QTEST_APPLESS_MAIN(TestCudaHostLogic)
#include "tst_cuda_host_logic.moc"
