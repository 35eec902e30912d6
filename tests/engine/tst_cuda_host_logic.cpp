// The CUDA backend's host-side decisions, on the CPU (no GPU, no CUDA library): which convolution
// algorithm cuDNN's measurements lead to (deterministic, exact float32 unless TF32 is allowed,
// NHWC given up only for "not supported"), which stream a block of device memory is allocated and
// freed on (the running op's, else the legacy one; the allocation's own when it dies later),
// which devices allocate from memory pools, where memory work goes during a capture and the
// count of the blocks a capture allocated (made void when it makes no graph), and the bookkeeping
// of the same-device communicator's asynchronous averages (ticket order, the last rank to start
// enqueueing, complete() waiting only for that, aborts). The plugin runs exactly these
// (conv_algorithm.h, stream_policy.h, ticket_board.h), and joining an NCCL world of several
// processes (nccl_world.h: whether this process's towers can be its ranks; the id's exchange, made
// exactly once by every process whatever fails, so that none is left waiting in it). What only a
// GPU shows is tst_gpu_backend's.
#include <QtTest>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine/cuda/conv_algorithm.h"
#include "engine/cuda/nccl_world.h"
#include "engine/cuda/stream_policy.h"
#include "engine/cuda/ticket_board.h"

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

// A rank's part: its name; what the enqueue makes: the ticket times 10, plus 7.
using Board = TicketBoard<std::string, int>;

struct Enqueued
{
    std::uint64_t ticket;
    std::vector<std::string> parts;
};

// An enqueue that logs what it was given.
auto logTo(std::vector<Enqueued>& log)
{
    return [&log](std::uint64_t ticket, std::vector<std::string>& parts) {
        log.push_back({ticket, parts});
        return int(ticket) * 10 + 7;
    };
}

// Runs f on a thread; fails the whole test (instead of hanging it) unless it is back within
// `limit`. Returns what it threw ("" = nothing).
std::string onThreadWithin(std::chrono::seconds limit, const std::function<void()>& f,
                           std::atomic<bool>* returned = nullptr)
{
    auto done = std::make_shared<std::atomic<bool>>(false);
    auto error = std::make_shared<std::string>();
    std::thread t([=] {
        try {
            f();
        } catch (const towers::engine::CollectiveAborted& e) {
            *error = std::string("aborted: ") + e.what();
        } catch (const std::exception& e) {
            *error = e.what();
        }
        if (returned) *returned = true;
        *done = true;
    });
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!*done) {
        if (std::chrono::steady_clock::now() > deadline)
            qFatal("a rank was not released within %d s: a hang", int(limit.count()));
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    t.join();
    return *error;
}

// What one process's side of the id's exchange did.
struct Exchange
{
    std::string result;
    int made = 0;                    // makeId calls
    std::vector<std::string> shared; // the bytes at each shareId call, as it was called
    std::vector<unsigned char> id;   // the id afterwards
};

// exchangeNcclId with a 16-byte id: makeId writes `made` (or fails with `makeFails`, or throws),
// shareId records what it was given and, off the root, delivers `delivered`.
Exchange exchange(bool root, const std::string& localFailure, const std::string& makeFails = "",
                  bool makeThrows = false, std::vector<unsigned char> delivered = {})
{
    Exchange out;
    out.id.assign(16, 0xEE); // garbage before the call
    out.result = exchangeNcclId(
        root, localFailure, out.id.data(), out.id.size(),
        [&](void* id) -> std::string {
            ++out.made;
            if (makeThrows) throw std::runtime_error("no network interface");
            std::memset(id, 0x5A, 16);
            return makeFails;
        },
        [&](void* bytes, std::size_t size) {
            QCOMPARE(size, std::size_t(16));
            auto* p = static_cast<unsigned char*>(bytes);
            out.shared.emplace_back(reinterpret_cast<char*>(p), size);
            if (!root) std::memcpy(p, delivered.data(), size);
        });
    return out;
}

bool allZero(const std::string& bytes)
{
    return allZeroBytes(bytes.data(), bytes.size());
}

} // namespace

class TestCudaHostLogic : public QObject
{
    Q_OBJECT
private slots:
    // The NOT_SUPPORTED family but the statuses that say the installation cannot run cuDNN
    // (driver, runtime, architecture, a sub-library missing), which no other layout mends.
    void notSupportedIsACategory()
    {
        for (int s = 3000; s <= 3014; ++s)
            QVERIFY2(isNotSupportedStatus(s) == (s < 3005 || s > 3009),
                     qPrintable(QString::number(s)));
        for (int s : {0, 1001, kBadParam, 2999, 4000, kDeviceAllocationFailed, kExecutionFailed})
            QVERIFY2(!isNotSupportedStatus(s), qPrintable(QString::number(s)));
        for (int s = 3005; s <= 3009; ++s) {
            const auto v = chooseAlgorithm(s, {}, rules());
            QCOMPARE(int(v.choice), int(AlgorithmChoice::Failed));
            QCOMPARE(v.status, s);
        }
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
        // A measured algorithm that the workspace given was too small for says so with
        // INTERNAL_ERROR_HOST_ALLOCATION_FAILED: too large, not a failure.
        v = chooseAlgorithm(
            kCudnnSuccess, std::vector{failed(kCudnnWorkspaceTooSmall), failed(kNotSupportedShape)},
            rules());
        QCOMPARE(int(v.choice), int(AlgorithmChoice::NotSupported));
        QCOMPARE(QString::fromStdString(v.why),
                 QStringLiteral("1 not supported, 1 needing more workspace than the limit"));
        v = chooseAlgorithm(kCudnnSuccess, std::vector{failed(kCudnnWorkspaceTooSmall), ok()},
                            rules());
        QCOMPARE(v.index, 1);
    }

    // An algorithm cuDNN ranked but refused to run when the pass first ran it is passed over when
    // the pass ranks again, as PyTorch's algorithm iterator does: the next one is taken, and with
    // none left the case is NotSupported (an NHWC plan tries NCHW). Which first-run statuses are
    // refusals: not supported, a parameter, an execution failure; never out of memory, an
    // uninitialised library or an installation cuDNN cannot use.
    void refusedAlgorithmsArePassedOver()
    {
        for (int s : {3000, kNotSupportedShape, kNotSupportedLayout, kBadParam, 2003, 2011,
                      kExecutionFailed, 5003})
            QVERIFY2(isRefusedRunStatus(s), qPrintable(QString::number(s)));
        for (int s : {kCudnnSuccess, 1001, 3005, 3009, 4000, kDeviceAllocationFailed,
                      kCudnnWorkspaceTooSmall})
            QVERIFY2(!isRefusedRunStatus(s), qPrintable(QString::number(s)));
        MeasuredAlgorithm refused = ok();
        refused.refusedWhenRun = true;
        auto v = chooseAlgorithm(kCudnnSuccess, std::vector{refused, ok(0, false), ok()}, rules());
        QCOMPARE(int(v.choice), int(AlgorithmChoice::Chosen));
        QCOMPARE(v.index, 2);
        v = chooseAlgorithm(kCudnnSuccess, std::vector{refused, refused, ok(0, false)}, rules());
        QCOMPARE(int(v.choice), int(AlgorithmChoice::NotSupported));
        QCOMPARE(QString::fromStdString(v.why),
                 QStringLiteral("1 not deterministic, 2 refused when run"));
        // A failure among them is still an error with its status.
        v = chooseAlgorithm(kCudnnSuccess, std::vector{refused, failed(kExecutionFailed)}, rules());
        QCOMPARE(int(v.choice), int(AlgorithmChoice::Failed));
        QCOMPARE(v.status, kExecutionFailed);
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

    // During a capture on this thread, memory work for the capture's device that no op has bound
    // goes on the capture stream (a layer's copy between ops is recorded with them); the running
    // op's stream still comes first, other devices and other threads are not concerned.
    void captureBindingTakesTheUnboundWork()
    {
        QVERIFY(!capturedOn(kNone));
        bindCapture(0, stream(0x30));
        QCOMPARE(boundStream(0), stream(0x30));
        QCOMPARE(boundStream(1), kNone);
        QVERIFY(capturedOn(stream(0x30)));
        QVERIFY(!capturedOn(stream(0x10)));
        QVERIFY(!capturedOn(kNone)); // the legacy stream never captures
        {
            const BindStream op(0, stream(0x30)); // an op of the capturing context
            QCOMPARE(boundStream(0), stream(0x30));
            {
                const BindStream other(0, stream(0x10)); // another context's op on this thread
                QCOMPARE(boundStream(0), stream(0x10));
                QVERIFY(!capturedOn(boundStream(0)));
            }
            QCOMPARE(boundStream(0), stream(0x30));
        }
        void* seen = stream(0x99);
        bool captured = true;
        std::thread other([&] {
            seen = boundStream(0);
            captured = capturedOn(stream(0x30));
        });
        other.join();
        QCOMPARE(seen, kNone);
        QVERIFY(!captured);
        unbindCapture();
        QCOMPARE(boundStream(0), kNone);
        QVERIFY(!capturedOn(stream(0x30)));
    }

    // The blocks allocated during a capture are counted per stream until they are freed (inside
    // the capture: the graph's free nodes); those still live when the capture makes no graph
    // become void, and freeing one then calls nothing (no memory ever stood behind it).
    void capturedBlocksAreCountedAndVoided()
    {
        AllocationTable table;
        int before = 0, temp = 0, kept1 = 0, kept2 = 0, otherCapture = 0, legacy = 0;
        void* const capture = stream(0x30);
        table.add(&before, {stream(0x10), true});             // made before the capture
        table.add(&temp, {capture, true, true});              // a temporary of the capture
        table.add(&kept1, {capture, true, true});             // outlives it
        table.add(&kept2, {capture, true, true});             // outlives it
        table.add(&otherCapture, {stream(0x40), true, true}); // another thread's capture
        table.add(&legacy, {nullptr, true});
        QCOMPARE(table.captured(capture), std::size_t(3));
        QCOMPARE(table.captured(stream(0x40)), std::size_t(1));
        QCOMPARE(table.captured(stream(0x10)), std::size_t(0));
        QCOMPARE(table.captured(nullptr), std::size_t(0));
        std::vector<std::pair<void*, Allocation>> freed;
        auto record = [&](void* p, const Allocation& x) { freed.emplace_back(p, x); };
        QVERIFY(table.release(&temp, record)); // freed inside the capture, on its stream
        QCOMPARE(freed.back().second.stream, capture);
        QVERIFY(freed.back().second.captured);
        QCOMPARE(table.captured(capture), std::size_t(2));
        QCOMPARE(table.voidCaptured(capture), std::size_t(2)); // refused: two outlive it
        QCOMPARE(table.captured(capture), std::size_t(0));
        QCOMPARE(table.voidCaptured(capture), std::size_t(0));
        QCOMPARE(table.captured(stream(0x40)), std::size_t(1)); // not this capture's
        QVERIFY(table.find(&kept1)->voided);
        QVERIFY(!table.find(&kept1)->captured);
        QVERIFY(!table.find(&before)->voided);
        const std::size_t calls = freed.size();
        QVERIFY(table.release(&kept1, record)); // known, forgotten, nothing called
        QCOMPARE(freed.size(), calls);
        QVERIFY(!table.find(&kept1).has_value());
        table.retire(capture); // the capture stream goes: a void block stays void
        QVERIFY(table.find(&kept2)->voided);
        QVERIFY(table.release(&kept2, record));
        QCOMPARE(freed.size(), calls);
        QVERIFY(table.release(&before, record)); // the others as before
        QCOMPARE(freed.back().second.stream, stream(0x10));
        QVERIFY(!freed.back().second.captured);
        QCOMPARE(table.size(), std::size_t(2));
    }

    // A void block's address that CUDA hands out again while the void block is held never gets a
    // second owner: the new block is quarantined (add refuses it; the caller allocates again)
    // and freed when the void one goes, once; a capture's block there is refused, not kept.
    void aVoidBlocksAddressGetsNoSecondOwner()
    {
        AllocationTable table;
        int kept = 0;
        void* const capture = stream(0x30);
        QVERIFY(table.add(&kept, {capture, true, true}));
        QCOMPARE(table.voidCaptured(capture), std::size_t(1));
        std::vector<std::pair<void*, Allocation>> freed;
        auto record = [&](void* p, const Allocation& x) { freed.emplace_back(p, x); };
        // A graph allocation of a later capture at that address: refused, nothing kept.
        QVERIFY(!table.add(&kept, {stream(0x40), true, true}));
        QCOMPARE(table.size(), std::size_t(1));
        // A block of the pool there: refused and quarantined, held with the void one.
        QVERIFY(!table.add(&kept, {stream(0x10), true}));
        QCOMPARE(table.size(), std::size_t(2));
        QVERIFY(table.find(&kept)->voided); // the void block still answers for the address
        table.retire(stream(0x10));         // its stream goes: freed on the legacy one then
        // The void block let go: the quarantined one is freed with it, once.
        QVERIFY(table.release(&kept, record));
        QCOMPARE(freed.size(), std::size_t(1));
        QCOMPARE(freed.front().first, static_cast<void*>(&kept));
        QCOMPARE(freed.front().second.stream, nullptr);
        QVERIFY(freed.front().second.pooled);
        QCOMPARE(table.size(), std::size_t(0));
        QVERIFY(!table.release(&kept, record));
        // The address is free again: a new owner has it.
        QVERIFY(table.add(&kept, {stream(0x10), false}));
        QVERIFY(table.release(&kept, record));
        QCOMPARE(freed.size(), std::size_t(2));
        QVERIFY(!freed.back().second.pooled);
    }

    // The count is exact while other threads allocate and free, captured or not, at once.
    void capturedBlocksCountAcrossThreads()
    {
        AllocationTable table;
        constexpr int kThreads = 4, kBlocks = 2000;
        std::vector<std::vector<char>> memory(kThreads, std::vector<char>(kBlocks));
        std::atomic<bool> stop{false}, outOfRange{false};
        std::thread counter([&] {
            while (!stop)
                if (table.captured(stream(0x30)) > std::size_t(kThreads * kBlocks))
                    outOfRange = true;
        });
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t)
            threads.emplace_back([&, t] {
                // Even threads capture on 0x30, odd ones run uncaptured on 0x10.
                const bool captured = t % 2 == 0;
                void* const s = captured ? stream(0x30) : stream(0x10);
                auto& mine = memory[std::size_t(t)];
                for (int i = 0; i < kBlocks; ++i)
                    table.add(&mine[std::size_t(i)], {s, true, captured});
                for (int i = 0; i < kBlocks; i += 2)
                    table.release(&mine[std::size_t(i)], [](void*, const Allocation&) {});
            });
        for (auto& t : threads) t.join();
        stop = true;
        counter.join();
        QVERIFY(!outOfRange);
        QCOMPARE(table.captured(stream(0x30)), std::size_t(kThreads / 2 * kBlocks / 2));
        QCOMPARE(table.captured(stream(0x10)), std::size_t(0));
        QCOMPARE(table.size(), std::size_t(kThreads * kBlocks / 2));
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
    // Each rank registers and goes on; the last rank to start a collective enqueues it, with
    // every rank's part in rank order, and the collectives are enqueued in ticket order whoever
    // comes last. complete() then hands each rank the enqueue's result and its own part, and
    // the last rank to complete a ticket gets the result back to recycle.
    void ticketBoardEnqueuesOnTheLastStart()
    {
        Board board(3);
        std::vector<Enqueued> log;
        auto start = [&](int rank, std::uint64_t expected) {
            const std::uint64_t t = board.start(rank,
                                                std::string("r")
                                                    .append(std::to_string(rank))
                                                    .append("k")
                                                    .append(std::to_string(expected)),
                                                logTo(log));
            QCOMPARE(t, expected);
        };
        for (std::uint64_t k = 0; k < 3; ++k) start(0, k); // rank 0 runs ahead
        start(1, 0);
        start(1, 1);
        QVERIFY(log.empty());
        start(2, 0); // the last part of collective 0
        QCOMPARE(log.size(), std::size_t(1));
        start(2, 1);
        start(1, 2);
        QCOMPARE(log.size(), std::size_t(2));
        start(2, 2);
        QCOMPARE(log.size(), std::size_t(3));
        for (std::uint64_t k = 0; k < 3; ++k) {
            QCOMPARE(log[k].ticket, k);
            const std::string tail = "k" + std::to_string(k);
            QCOMPARE(log[k].parts,
                     (std::vector<std::string>{"r0" + tail, "r1" + tail, "r2" + tail}));
        }
        QCOMPARE(board.inFlight(), std::size_t(3));
        // Every ticket is enqueued: nothing waits.
        for (std::uint64_t k = 0; k < 3; ++k)
            for (int r = 0; r < 3; ++r) {
                int seenDone = -1;
                std::string seenPart;
                const auto recycle =
                    board.complete(r, k, "complete", [&](int done, std::string& p) {
                        seenDone = done;
                        seenPart = p;
                    });
                QCOMPARE(seenDone, int(k) * 10 + 7);
                QCOMPARE(seenPart, "r" + std::to_string(r) + "k" + std::to_string(k));
                QCOMPARE(recycle.has_value(), r == 2);
                if (recycle) QCOMPARE(*recycle, int(k) * 10 + 7);
            }
        QCOMPARE(board.inFlight(), std::size_t(0));
        QVERIFY(!board.aborted());
    }

    // complete() waits on the host until the collective is enqueued, that is until the last
    // rank has started it, and no longer.
    void ticketBoardCompleteWaitsForTheLastStart()
    {
        Board board(2);
        std::vector<Enqueued> log;
        QCOMPARE(board.start(0, "a", logTo(log)), std::uint64_t(0));
        std::atomic<bool> returned{false};
        int seen = -1;
        std::thread rank1([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(150));
            if (returned) return; // complete() did not wait: the check below fails
            board.start(1, "b", logTo(log));
        });
        const std::string error = onThreadWithin(
            std::chrono::seconds(20),
            [&] { board.complete(0, 0, "complete", [&](int done, std::string&) { seen = done; }); },
            &returned);
        rank1.join();
        QVERIFY2(error.empty(), error.c_str());
        QCOMPARE(log.size(), std::size_t(1));
        QCOMPARE(seen, 7);
        board.complete(1, 0, "complete", [](int, std::string&) {});
        QCOMPARE(board.inFlight(), std::size_t(0));
    }

    // An abort releases a rank waiting in complete() with CollectiveAborted and its reason; then
    // every start and complete throws it at once.
    void ticketBoardAbortReleasesComplete()
    {
        Board board(3);
        std::vector<Enqueued> log;
        board.start(0, "a", logTo(log));
        board.start(1, "b", logTo(log));
        std::thread aborter([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            board.abort("tower 2 failed: out of memory");
        });
        const auto t0 = std::chrono::steady_clock::now();
        const std::string error = onThreadWithin(std::chrono::seconds(20), [&] {
            board.complete(0, 0, "complete", [](int, std::string&) {});
        });
        aborter.join();
        QVERIFY(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
        QCOMPARE(QString::fromStdString(error),
                 QStringLiteral("aborted: tower 2 failed: out of memory"));
        QVERIFY(board.aborted());
        QVERIFY_THROWS_EXCEPTION(towers::engine::CollectiveAborted,
                                 board.start(2, "c", logTo(log)));
        QVERIFY_THROWS_EXCEPTION(towers::engine::CollectiveAborted,
                                 board.complete(1, 0, "complete", [](int, std::string&) {}));
        QVERIFY(log.empty());
        board.abort("another reason"); // the first reason stays
        QCOMPARE(QString::fromStdString(board.reason()),
                 QStringLiteral("tower 2 failed: out of memory"));
    }

    // Tickets completed out of order, twice, or never started are refused (InvalidArgument) and
    // change nothing; a failing ordered() leaves the ticket to complete.
    void ticketBoardRefusesTicketsOutOfOrder()
    {
        Board board(1);
        std::vector<Enqueued> log;
        board.start(0, "a", logTo(log));
        board.start(0, "b", logTo(log));
        QCOMPARE(log.size(), std::size_t(2)); // one rank: each start enqueues
        auto nothing = [](int, std::string&) {};
        auto refused = [&](std::uint64_t ticket, const QString& text) {
            try {
                board.complete(0, ticket, "complete", nothing);
            } catch (const towers::engine::InvalidArgument& e) {
                QCOMPARE(QString::fromUtf8(e.what()), text);
                return;
            }
            QFAIL(qPrintable("not refused: " + text));
        };
        refused(1, "complete: rank 0 must complete collective 0 before 1 (the order they started "
                   "in)");
        refused(5, "complete: rank 0 started no collective 5");
        QVERIFY_THROWS_EXCEPTION(std::runtime_error,
                                 board.complete(0, 0, "complete", [](int, std::string&) {
                                     throw std::runtime_error("cudaStreamWaitEvent failed");
                                 }));
        board.complete(0, 0, "complete", nothing);
        refused(0, "complete: rank 0 completed collective 0 already");
        board.complete(0, 1, "complete", nothing);
        refused(1, "complete: rank 0 completed collective 1 already");
        QCOMPARE(board.inFlight(), std::size_t(0));
        QVERIFY(!board.aborted());

        TicketOrder order;
        QCOMPARE(order.start(), std::uint64_t(0));
        QCOMPARE(order.start(), std::uint64_t(1));
        QCOMPARE(order.pending(), std::uint64_t(2));
        order.requireOldest(0, "complete", 3);
        QVERIFY_THROWS_EXCEPTION(towers::engine::InvalidArgument,
                                 order.requireOldest(1, "complete", 3));
        order.completed();
        QCOMPARE(order.oldest(), std::uint64_t(1));
        QCOMPARE(order.next(), std::uint64_t(2));
    }

    // This process's towers as ranks of an NCCL world: caller mistakes are Invalid (the plugin
    // throws InvalidArgument, after sharing the id), two towers on one GPU Refused (nullptr: the
    // caller averages through the host), each saying why.
    void ncclWorldCheck()
    {
        auto check = [](std::vector<int> gpus, int worldSize, int firstRank, int gpuCount = 4) {
            return checkNcclWorld(gpus, worldSize, firstRank, gpuCount);
        };
        auto expect = [](const WorldCheck& c, WorldVerdict verdict, const char* why) {
            QCOMPARE(int(c.verdict), int(verdict));
            QCOMPARE(QString::fromStdString(c.why), QString::fromUtf8(why));
        };
        expect(check({0, 1}, 4, 2), WorldVerdict::Fine, "");
        expect(check({0, 1, 2, 3}, 4, 0), WorldVerdict::Fine, "");
        expect(check({3}, 1, 0), WorldVerdict::Fine, "");
        expect(check({2}, 9, 8), WorldVerdict::Fine, "");
        expect(check({}, 2, 0), WorldVerdict::Invalid, "a communicator needs at least one rank");
        expect(check({0, 4}, 4, 0), WorldVerdict::Invalid,
               "there is no GPU 4 (this machine has 4)");
        expect(check({-1}, 4, 0), WorldVerdict::Invalid, "there is no GPU -1 (this machine has 4)");
        expect(check({0}, 2, 0, 0), WorldVerdict::Invalid,
               "there is no GPU 0 (this machine has 0)");
        expect(check({0, 1, 2}, 2, 0), WorldVerdict::Invalid,
               "an NCCL world of 2 ranks cannot hold this process's 3 towers");
        expect(check({0}, 0, 0), WorldVerdict::Invalid,
               "an NCCL world of 0 ranks cannot hold this process's 1 tower");
        expect(check({0, 1}, 4, 3), WorldVerdict::Invalid,
               "global ranks 3 to 4 are not all in an NCCL world of 4 ranks");
        expect(check({0}, 4, -1), WorldVerdict::Invalid,
               "global ranks -1 to -1 are not all in an NCCL world of 4 ranks");
        expect(check({0, 1}, 2147483647, 2147483647), WorldVerdict::Invalid,
               "global ranks 2147483647 to 2147483648 are not all in an NCCL world of 2147483647 "
               "ranks");
        expect(check({1, 0, 1}, 6, 3), WorldVerdict::Refused,
               "two towers of this process on GPU 1: NCCL takes one rank per GPU");
        // A mistake is reported before a refusal.
        expect(check({1, 1}, 1, 0), WorldVerdict::Invalid,
               "an NCCL world of 1 ranks cannot hold this process's 2 towers");
    }

    // The process of global rank 0 makes the id and shares it, once; another process receives
    // it, once, and goes on.
    void ncclIdExchangeShares()
    {
        const Exchange root = exchange(true, "");
        QCOMPARE(QString::fromStdString(root.result), QString());
        QCOMPARE(root.made, 1);
        QCOMPARE(root.shared.size(), std::size_t(1));
        QCOMPARE(root.shared[0], std::string(16, '\x5A'));
        const Exchange other = exchange(false, "", "", false, std::vector<unsigned char>(16, 7));
        QCOMPARE(QString::fromStdString(other.result), QString());
        QCOMPARE(other.made, 0); // only the root makes one
        QCOMPARE(other.shared.size(), std::size_t(1));
        QVERIFY(allZero(other.shared[0])); // zeroed before the call, not garbage
        QCOMPARE(other.id, std::vector<unsigned char>(16, 7));
    }

    // Whatever fails, every process calls shareId exactly once (the others wait in it
    // otherwise); the root shares zeros when it has no id, and the others then fail at once
    // instead of waiting for it inside NCCL.
    void ncclIdExchangeFailures()
    {
        // ncclGetUniqueId fails, or throws, on the root.
        for (bool throws : {false, true}) {
            const Exchange e = exchange(true, "",
                                        "NCCL could not make the world's id: system "
                                        "error",
                                        throws);
            QCOMPARE(e.made, 1);
            QCOMPARE(e.shared.size(), std::size_t(1));
            QVERIFY(allZero(e.shared[0]));
            QCOMPARE(QString::fromStdString(e.result),
                     throws ? QStringLiteral("no network interface")
                            : QStringLiteral("NCCL could not make the world's id: system error"));
        }
        // The root's own towers cannot join (two on one GPU): no id made, zeros shared.
        const std::string twoOnOne = "two towers of this process on GPU 0: NCCL takes one rank "
                                     "per GPU";
        Exchange e = exchange(true, twoOnOne);
        QCOMPARE(e.made, 0);
        QCOMPARE(e.shared.size(), std::size_t(1));
        QVERIFY(allZero(e.shared[0]));
        QCOMPARE(e.result, twoOnOne);
        // Another process receives zeros: the root failed, and this one says so.
        e = exchange(false, "", "", false, std::vector<unsigned char>(16, 0));
        QCOMPARE(e.shared.size(), std::size_t(1));
        QCOMPARE(QString::fromStdString(e.result),
                 QStringLiteral("the process of global rank 0 could not start NCCL (it shared no "
                                "id)"));
        // Another process that cannot join still receives, and reports its own reason first.
        e = exchange(false, twoOnOne, "", false, std::vector<unsigned char>(16, 0));
        QCOMPARE(e.shared.size(), std::size_t(1));
        QCOMPARE(e.made, 0);
        QCOMPARE(e.result, twoOnOne);
        // An id of zeros from NCCL itself would read as a failure elsewhere: refused here too.
        std::vector<unsigned char> id(8, 0xEE);
        int shares = 0;
        const std::string empty = exchangeNcclId(
            true, "", id.data(), id.size(), [](void*) { return std::string(); },
            [&](void*, std::size_t) { ++shares; });
        QCOMPARE(shares, 1);
        QCOMPARE(QString::fromStdString(empty), QStringLiteral("NCCL made an empty id"));
        // The launcher's collective failing is the caller's: it propagates.
        QVERIFY_THROWS_EXCEPTION(
            std::runtime_error,
            exchangeNcclId(
                false, "", id.data(), id.size(), [](void*) { return std::string(); },
                [](void*, std::size_t) { throw std::runtime_error("process 0 failed"); }));
        QVERIFY(!allZeroBytes("\0\0\1", 3));
        QVERIFY(allZeroBytes("\0\0\0", 3));
        QVERIFY(allZeroBytes(nullptr, 0));
    }

    // After the id, every process says once whether it will not start NCCL (anyRefuses, the
    // launcher's "any"): a process that cannot join (two of its towers on one GPU, which only it
    // checks) keeps the others from starting NCCL and waiting there for a rank that never comes.
    void ncclWorldAgreesBeforeStarting()
    {
        const std::string twoOnOne = "two towers of this process on GPU 1: NCCL takes one rank "
                                     "per GPU";
        // Processes 0 (the root, fine) and 1 (refusing), played as threads; the vote is theirs.
        std::vector<unsigned char> ids[2] = {std::vector<unsigned char>(16, 0xEE),
                                             std::vector<unsigned char>(16, 0xEE)};
        std::string results[2];
        int votes[2] = {0, 0};
        bool said[2] = {false, false};
        std::mutex m;
        std::condition_variable cv;
        int arrived = 0, shared = 0;
        bool anyTrue = false;
        std::vector<unsigned char> box(16, 0);
        auto process = [&](int k) {
            results[k] = exchangeNcclId(
                k == 0, k == 1 ? twoOnOne : "", ids[k].data(), 16,
                [](void* id) {
                    std::memset(id, 0x5A, 16);
                    return std::string();
                },
                [&](void* bytes, std::size_t size) { // rank 0's bytes to both
                    std::unique_lock lock(m);
                    if (k == 0) std::memcpy(box.data(), bytes, size);
                    ++shared;
                    cv.notify_all();
                    cv.wait(lock, [&] { return shared == 2; });
                    if (k != 0) std::memcpy(bytes, box.data(), size);
                },
                [&](bool mine) {
                    std::unique_lock lock(m);
                    ++votes[k];
                    said[k] = mine;
                    anyTrue = anyTrue || mine;
                    ++arrived;
                    cv.notify_all();
                    cv.wait(lock, [&] { return arrived == 2; });
                    return anyTrue;
                });
        };
        std::thread p0(process, 0), p1(process, 1);
        p0.join();
        p1.join();
        QCOMPARE(votes[0], 1);
        QCOMPARE(votes[1], 1);
        QVERIFY(!said[0]);
        QVERIFY(said[1]);
        QCOMPARE(results[1], twoOnOne);
        QCOMPARE(QString::fromStdString(results[0]),
                 QStringLiteral("another process of the world cannot start NCCL (its log says "
                                "why)"));
        // Everyone fine: the vote says so, and every process goes on with the root's id.
        int calls = 0;
        std::vector<unsigned char> id(16, 0xEE);
        const std::string fine = exchangeNcclId(
            false, "", id.data(), id.size(), [](void*) { return std::string(); },
            [](void* bytes, std::size_t size) { std::memset(bytes, 0x5A, size); },
            [&](bool mine) {
                ++calls;
                return mine;
            });
        QCOMPARE(calls, 1);
        QCOMPARE(fine, std::string());
        QCOMPARE(id[15], static_cast<unsigned char>(0x5A));
    }

    // An enqueue that fails (the ranks' tensors do not match, a CUDA error) aborts the board
    // with its message: the rank that ran it gets the error, those waiting are released with it.
    void ticketBoardEnqueueFailureAborts()
    {
        Board board(2);
        std::vector<Enqueued> log;
        board.start(0, "a", logTo(log));
        std::thread rank1([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            try {
                board.start(1, "b", [](std::uint64_t, std::vector<std::string>&) -> int {
                    throw towers::engine::InvalidArgument(
                        "allReduceMean: rank 1 tensor 0 is float32 [3], rank 0's is float32 [4]");
                });
            } catch (const towers::engine::InvalidArgument&) {
                return;
            }
            qFatal("the enqueue's error did not reach its rank");
        });
        const std::string error = onThreadWithin(std::chrono::seconds(20), [&] {
            board.complete(0, 0, "complete", [](int, std::string&) {});
        });
        rank1.join();
        QCOMPARE(QString::fromStdString(error),
                 QStringLiteral("aborted: allReduceMean: rank 1 tensor 0 is float32 [3], rank "
                                "0's is float32 [4]"));
        QVERIFY(board.aborted());
    }
};

QTEST_APPLESS_MAIN(TestCudaHostLogic)
#include "tst_cuda_host_logic.moc"
