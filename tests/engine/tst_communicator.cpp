// The in-process communicator and the tower threads: the mean against a double-precision oracle,
// bitwise the same result on every rank and in every run, broadcast, refusal of mismatched calls
// on every rank, and an abort that releases the ranks waiting in a collective. Then the NCCL
// communicator's error paths (engine/cuda/abortable_communicator.h) over a stand-in for NCCL whose
// collectives never finish unless told to: an abort from any thread releases every waiting rank
// within a time bound (a watchdog fails the test on a hang), a failing rank releases the others,
// nothing touches the communicators once they are torn down, and a collective that never ends
// times out. And its asynchronous averages (startAllReduceMean, complete) over the stand-in:
// started and completed in order on every rank, synchronous collectives keeping their place,
// no NCCL call while the last one is still being enqueued, no host wait for the GPU; an abort
// releases a rank waiting in complete(), an asynchronous error surfaces from complete() and
// releases the others, and tickets out of order or completed twice are refused. A tower's wait
// for its step across processes ends when another process's failure is announced.
#include <QtTest>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "engine/backends.h"
#include "engine/cuda/abortable_communicator.h"
#include "engine/reference/reference_ops.h"
#include "engine/train/host_communicator.h"
#include "engine/train/tower_thread.h"
#include "gradcheck.h"
#include "replication.h"

using namespace towers::engine;
using namespace towers::test;

namespace {

// Runs f(rank) on one thread per rank; returns the error text of each rank ("" = none).
std::vector<std::string> onRanks(int n, const std::function<void(int)>& f)
{
    std::vector<std::string> errors(static_cast<std::size_t>(n));
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
        threads.emplace_back([&, r] {
            try {
                f(r);
            } catch (const CollectiveAborted& e) {
                errors[std::size_t(r)] = std::string("aborted: ") + e.what();
            } catch (const std::exception& e) {
                errors[std::size_t(r)] = e.what();
            }
        });
    for (auto& t : threads) t.join();
    return errors;
}

// Each rank's tensors: a float32 vector of odd length, a float64 matrix, a scalar.
std::vector<Tensor> rankTensors(int rank)
{
    Rng rng(100 + std::uint64_t(rank));
    return {randomTensor({100003}, DType::Float32, rng, -10, 10),
            randomTensor({7, 9}, DType::Float64, rng),
            randomTensor(Shape(std::vector<std::int64_t>{}), DType::Float32, rng)};
}

// onRanks, failing the whole test (not hanging it) when the ranks are not all back within
// `limit`: the threads of a hang cannot be joined, so the process stops with the reason.
std::vector<std::string> onRanksWithin(int n, std::chrono::seconds limit,
                                       const std::function<void(int)>& f)
{
    struct Shared
    {
        std::mutex mutex;
        std::condition_variable cv;
        int done = 0;
        std::vector<std::string> errors;
    };
    auto shared = std::make_shared<Shared>();
    shared->errors.resize(std::size_t(n));
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
        threads.emplace_back([shared, f, r] {
            std::string error;
            try {
                f(r);
            } catch (const CollectiveAborted& e) {
                error = std::string("aborted: ") + e.what();
            } catch (const std::exception& e) {
                error = e.what();
            }
            std::lock_guard lock(shared->mutex);
            shared->errors[std::size_t(r)] = error;
            ++shared->done;
            shared->cv.notify_all();
        });
    {
        std::unique_lock lock(shared->mutex);
        if (!shared->cv.wait_for(lock, limit, [&] { return shared->done == n; }))
            qFatal("the ranks were not all released within %d s: a hang", int(limit.count()));
    }
    for (auto& t : threads) t.join();
    return shared->errors;
}

// A stand-in for NCCL behind AbortableCommunicator: collectives are pending until the test says
// how many polls they take (never, by default), or fail on one rank; it records the teardowns and
// any use of a handle after its teardown (what would be a use after free with NCCL).
struct FakeNcclState
{
    std::atomic<int> pollsToFinish{-1}; // -1: never
    std::atomic<int> failingRank{-1};   // this rank's poll fails
    std::atomic<bool> slowPolls{false}; // each call takes a little while (races widen)
    std::atomic<bool> tornDown{false};
    std::atomic<int> aborts{0}, destroys{0}, usesAfterTeardown{0}, launches{0};
    // Asynchronous averages: how many polls of enqueued() NCCL takes to enqueue one (0: at once,
    // -1: never), the rank whose enqueued() reports an asynchronous error.
    std::atomic<int> enqueuePolls{0};
    std::atomic<int> asyncFailingRank{-1};
    std::atomic<int> asyncLaunches{0}, attached{0};
    std::atomic<int> gpuWaits{0}; // poll() calls: the host waiting for a collective to finish
    std::atomic<int> callsWhileEnqueuing{0}; // what NCCL forbids (a call before the last is in)
    std::atomic<int> orderedTooEarly{0};     // ordered() of a collective not yet enqueued
    std::atomic<int> tokensHeld{0};          // launched and neither ordered nor torn down
    std::atomic<int> releasedAtTeardown{0};
    std::atomic<bool> world{false}; // the ranks are one process's part of an NCCL world
};

class FakeNcclDriver
{
public:
    FakeNcclDriver(int ranks, std::shared_ptr<FakeNcclState> state)
        : m_ranks(ranks), m_state(std::move(state)), m_polls(std::size_t(ranks), 0),
          m_enqueueLeft(std::size_t(ranks), 0), m_enqueuing(std::size_t(ranks), false),
          m_nextToken(std::size_t(ranks), 0), m_log(std::size_t(ranks)),
          m_ordered(std::size_t(ranks)), m_launched(std::size_t(ranks))
    {
    }
    int size() const { return m_ranks; }
    Device device(int) const { return Device::host(); }
    const char* name() const { return "NCCL"; }
    bool spansProcesses() const { return m_state->world; }
    void attach(int, Ops&)
    {
        touch();
        ++m_state->attached;
    }
    cuda::CollectiveStatus launch(int rank, cuda::CollectiveKind kind, int root, std::span<Tensor>)
    {
        touch();
        nccl(rank);
        ++m_state->launches;
        m_log[std::size_t(rank)].push_back(
            kind == cuda::CollectiveKind::AllReduceMean ? "allReduceMean"
            : kind == cuda::CollectiveKind::Barrier     ? "barrier"
                                                        : "broadcast from " + std::to_string(root));
        m_polls[std::size_t(rank)] = 0;
        return {cuda::CollectiveState::Pending, {}};
    }
    cuda::CollectiveStatus poll(int rank)
    {
        touch();
        ++m_state->gpuWaits;
        if (m_state->slowPolls) std::this_thread::sleep_for(std::chrono::microseconds(50));
        touch();
        if (rank == m_state->failingRank)
            return {cuda::CollectiveState::Failed, "unhandled cuda error"};
        const int need = m_state->pollsToFinish;
        if (need >= 0 && ++m_polls[std::size_t(rank)] >= need) return {};
        return {cuda::CollectiveState::Pending, {}};
    }
    cuda::AsyncLaunch launchAsync(int rank, std::span<Tensor> tensors)
    {
        touch();
        nccl(rank);
        ++m_state->asyncLaunches;
        ++m_state->tokensHeld;
        const std::uint64_t token = 1000 + m_nextToken[std::size_t(rank)]++;
        m_log[std::size_t(rank)].push_back("async " + std::to_string(tensors.size()));
        m_launched[std::size_t(rank)] = token;
        const int need = m_state->enqueuePolls;
        if (need == 0) return {{}, token};
        m_enqueueLeft[std::size_t(rank)] = need;
        m_enqueuing[std::size_t(rank)] = true;
        return {{cuda::CollectiveState::Pending, {}}, token};
    }
    cuda::CollectiveStatus enqueued(int rank)
    {
        touch();
        if (m_state->slowPolls) std::this_thread::sleep_for(std::chrono::microseconds(50));
        touch();
        if (rank == m_state->asyncFailingRank && m_nextToken[std::size_t(rank)] > 0)
            return {cuda::CollectiveState::Failed, "remote process exited or there was a network "
                                                   "error"};
        if (!m_enqueuing[std::size_t(rank)]) return {};
        int& left = m_enqueueLeft[std::size_t(rank)];
        if (left < 0 || --left > 0) return {cuda::CollectiveState::Pending, {}};
        m_enqueuing[std::size_t(rank)] = false;
        return {};
    }
    cuda::CollectiveStatus ordered(int rank, std::uint64_t token)
    {
        touch();
        if (m_enqueuing[std::size_t(rank)] && token == m_launched[std::size_t(rank)])
            ++m_state->orderedTooEarly;
        m_ordered[std::size_t(rank)].push_back(token);
        --m_state->tokensHeld;
        return {};
    }
    void abortAll() noexcept
    {
        ++m_state->aborts;
        m_state->tornDown = true;
        m_state->releasedAtTeardown += m_state->tokensHeld.exchange(0);
    }
    void destroyAll() noexcept
    {
        ++m_state->destroys;
        m_state->tornDown = true;
        m_state->releasedAtTeardown += m_state->tokensHeld.exchange(0);
    }

    // Each rank's collectives in the order they reached the driver, and the tokens ordered.
    const std::vector<std::string>& log(int rank) const { return m_log[std::size_t(rank)]; }
    const std::vector<std::uint64_t>& orderedTokens(int rank) const
    {
        return m_ordered[std::size_t(rank)];
    }

private:
    void touch() const
    {
        if (m_state->tornDown) ++m_state->usesAfterTeardown;
    }
    // A call that enqueues: NCCL takes none while the rank's last one is still being enqueued.
    void nccl(int rank)
    {
        if (m_enqueuing[std::size_t(rank)]) ++m_state->callsWhileEnqueuing;
    }
    int m_ranks;
    std::shared_ptr<FakeNcclState> m_state;
    // Per rank, each touched by its own thread only:
    std::vector<int> m_polls;
    std::vector<int> m_enqueueLeft;
    std::vector<char> m_enqueuing; // not vector<bool>: each rank's thread writes its own
    std::vector<std::uint64_t> m_nextToken;
    std::vector<std::vector<std::string>> m_log;
    std::vector<std::vector<std::uint64_t>> m_ordered;
    std::vector<std::uint64_t> m_launched;
};

using FakeNcclCommunicator = cuda::AbortableCommunicator<FakeNcclDriver>;

std::unique_ptr<FakeNcclCommunicator>
fakeNccl(int ranks, const std::shared_ptr<FakeNcclState>& state,
         std::chrono::milliseconds timeout = std::chrono::minutes(10))
{
    return std::make_unique<FakeNcclCommunicator>(FakeNcclDriver(ranks, state), timeout);
}

std::vector<Tensor> floats(int rank)
{
    return {Tensor::filled({5}, DType::Float32, rank)};
}

// Ranks 0 and 2 of three, released by rank 1's out-of-memory abort, say its reason.
void expectReleasedByRankOneOutOfMemory(const std::vector<std::string>& errors)
{
    for (int r : {0, 2})
        QCOMPARE(QString::fromStdString(errors[std::size_t(r)]),
                 QStringLiteral("aborted: NCCL allReduceMean: another tower failed: tower 1 "
                                "on cuda:1: out of memory on cuda:1"));
}

// Destroying an aborted communicator tears nothing down again: the one abort, no destruction,
// and nothing used after the teardown.
void expectNoSecondTeardown(std::unique_ptr<FakeNcclCommunicator>& comm, const FakeNcclState& state)
{
    comm.reset();
    QCOMPARE(state.aborts.load(), 1);
    QCOMPARE(state.destroys.load(), 0);
    QCOMPARE(state.usesAfterTeardown.load(), 0);
}

// A rank's gradient buckets: bucket b holds b + 1 float32 tensors.
std::vector<std::vector<Tensor>> buckets(int rank, int count)
{
    std::vector<std::vector<Tensor>> out;
    for (int b = 0; b < count; ++b) {
        out.emplace_back();
        for (int i = 0; i <= b; ++i)
            out.back().push_back(Tensor::filled({3 + i}, DType::Float32, rank));
    }
    return out;
}

// Throws (so that the rank's thread reports it) unless f() is refused with InvalidArgument
// saying `text`.
void expectRefused(const std::function<void()>& f, const std::string& text)
{
    try {
        f();
    } catch (const InvalidArgument& e) {
        if (std::string(e.what()).find(text) == std::string::npos)
            throw Error(std::string("refused, but with '") + e.what() + "', not '" + text + "'");
        return;
    }
    throw Error("not refused: expected '" + text + "'");
}

} // namespace

class TestCommunicator : public QObject
{
    Q_OBJECT
private slots:
    void allReduceMean_data()
    {
        QTest::addColumn<int>("ranks");
        for (int n : {1, 2, 3, 4}) QTest::newRow(qPrintable(QString::number(n) + " ranks")) << n;
    }
    void allReduceMean()
    {
        QFETCH(int, ranks);
        std::vector<std::vector<Tensor>> data, inputs;
        for (int r = 0; r < ranks; ++r) {
            data.push_back(rankTensors(r));
            std::vector<Tensor> copy;
            for (const auto& t : data.back()) copy.push_back(t.clone());
            inputs.push_back(copy);
        }
        HostCommunicator comm(ranks);
        QCOMPARE(comm.size(), ranks);
        const auto errors = onRanks(ranks, [&](int r) {
            for (int repeat = 0; repeat < 3; ++repeat) {
                // Reset, so that each round averages the same inputs.
                for (std::size_t i = 0; i < data[std::size_t(r)].size(); ++i)
                    data[std::size_t(r)][i].copyFrom(inputs[std::size_t(r)][i]);
                comm.barrier(r);
                comm.allReduceMean(r, data[std::size_t(r)]);
            }
        });
        for (const auto& e : errors) QVERIFY2(e.empty(), e.c_str());
        // Oracle: the mean in double of the inputs, rounded once.
        for (std::size_t i = 0; i < inputs[0].size(); ++i) {
            for (std::int64_t k = 0; k < inputs[0][i].numel(); ++k) {
                double sum = 0;
                for (int r = 0; r < ranks; ++r) sum += inputs[std::size_t(r)][i].at(k);
                const double mean = sum / ranks;
                const double got = data[0][i].at(k);
                const double expect =
                    data[0][i].dtype() == DType::Float32 ? double(float(mean)) : mean;
                if (got != expect)
                    QFAIL(qPrintable(QStringLiteral("tensor %1 element %2: %3, expected %4")
                                         .arg(i)
                                         .arg(k)
                                         .arg(got)
                                         .arg(expect)));
            }
            for (int r = 1; r < ranks; ++r) QVERIFY(sameBytes(data[std::size_t(r)][i], data[0][i]));
        }
    }

    void broadcast()
    {
        const int ranks = 3;
        std::vector<std::vector<Tensor>> data;
        for (int r = 0; r < ranks; ++r) data.push_back(rankTensors(r));
        data[0].push_back(Tensor::filled(Shape{}, DType::Int64, 0));
        data[1].push_back(Tensor::filled(Shape{}, DType::Int64, 42));
        data[2].push_back(Tensor::filled(Shape{}, DType::Int64, 7));
        std::vector<Tensor> root;
        for (const auto& t : data[1]) root.push_back(t.clone());
        HostCommunicator comm(ranks);
        const auto errors =
            onRanks(ranks, [&](int r) { comm.broadcast(r, 1, data[std::size_t(r)]); });
        for (const auto& e : errors) QVERIFY2(e.empty(), e.c_str());
        for (int r = 0; r < ranks; ++r)
            for (std::size_t i = 0; i < root.size(); ++i)
                QVERIFY(sameBytes(data[std::size_t(r)][i], root[i]));
    }

    // A rank with other tensors: every rank refuses the call (none reads past a tensor).
    void mismatchRefusedEverywhere()
    {
        HostCommunicator comm(3);
        std::vector<std::vector<Tensor>> data = {rankTensors(0), rankTensors(1), rankTensors(2)};
        data[2][1] = Tensor::zeros({3}, DType::Float64);
        const auto errors = onRanks(3, [&](int r) { comm.allReduceMean(r, data[std::size_t(r)]); });
        for (const auto& e : errors)
            QVERIFY2(e.find("rank 2 tensor 1 is float64 [3], rank 0's is float64 [7, 9]") !=
                         std::string::npos,
                     e.c_str());
        QVERIFY(comm.aborted());

        HostCommunicator ints(2);
        std::vector<std::vector<Tensor>> labels = {{Tensor::zeros({4}, DType::Int32)},
                                                   {Tensor::zeros({4}, DType::Int32)}};
        const auto e2 = onRanks(2, [&](int r) { ints.allReduceMean(r, labels[std::size_t(r)]); });
        for (const auto& e : e2)
            QVERIFY2(e.find("only float32 and float64") != std::string::npos, e.c_str());
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, HostCommunicator(0));
        HostCommunicator one(1);
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, one.barrier(1));
    }

    // One rank fails before the collective: the others are released with an error, not left
    // waiting (the test would hang otherwise), and later calls fail at once.
    void abortReleasesWaiters()
    {
        HostCommunicator comm(4);
        std::vector<std::vector<Tensor>> data = {rankTensors(0), rankTensors(1), rankTensors(2),
                                                 rankTensors(3)};
        const auto t0 = std::chrono::steady_clock::now();
        const auto errors = onRanks(4, [&](int r) {
            if (r == 2) {
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
                comm.abort("tower 2 failed: out of memory");
                throw Error("out of memory");
            }
            comm.allReduceMean(r, data[std::size_t(r)]);
        });
        QVERIFY(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
        for (int r : {0, 1, 3})
            QCOMPARE(QString::fromStdString(errors[std::size_t(r)]),
                     QStringLiteral("aborted: tower 2 failed: out of memory"));
        QCOMPARE(QString::fromStdString(errors[2]), QStringLiteral("out of memory"));
        QVERIFY_THROWS_EXCEPTION(CollectiveAborted, comm.barrier(0));
    }

    // A rank fails outside any collective (out of memory, a bad label) while the others wait in
    // one that can never finish: the abort tears the communicators down once and releases them.
    void ncclAbortReleasesWaitingRanks()
    {
        auto state = std::make_shared<FakeNcclState>();
        auto comm = fakeNccl(3, state);
        std::vector<std::vector<Tensor>> data = {floats(0), floats(1), floats(2)};
        const auto t0 = std::chrono::steady_clock::now();
        const auto errors = onRanksWithin(3, std::chrono::seconds(20), [&](int r) {
            if (r == 1) {
                std::this_thread::sleep_for(std::chrono::milliseconds(100));
                comm->abort("tower 1 on cuda:1: out of memory on cuda:1");
                throw Error("out of memory");
            }
            comm->allReduceMean(r, data[std::size_t(r)]);
        });
        QVERIFY(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
        expectReleasedByRankOneOutOfMemory(errors);
        QCOMPARE(state->aborts.load(), 1);
        QCOMPARE(state->usesAfterTeardown.load(), 0);
        QVERIFY(comm->aborted());
        // Later calls fail at once, without touching the torn-down handles.
        QVERIFY_THROWS_EXCEPTION(CollectiveAborted, comm->broadcast(0, 0, data[0]));
        QVERIFY_THROWS_EXCEPTION(CollectiveAborted, comm->barrier(0));
        expectNoSecondTeardown(comm, *state);
    }

    // A rank's collective fails (NCCL's asynchronous error, a CUDA fault): it reports that, and
    // the others are released with its reason.
    void ncclFailureReleasesTheOthers()
    {
        auto state = std::make_shared<FakeNcclState>();
        state->failingRank = 2;
        auto comm = fakeNccl(3, state);
        std::vector<std::vector<Tensor>> data = {floats(0), floats(1), floats(2)};
        const auto errors = onRanksWithin(3, std::chrono::seconds(20), [&](int r) {
            if (r == 2) std::this_thread::sleep_for(std::chrono::milliseconds(50));
            comm->allReduceMean(r, data[std::size_t(r)]);
        });
        const std::string why = "NCCL allReduceMean failed on host: unhandled cuda error";
        QCOMPARE(QString::fromStdString(errors[2]), QString::fromStdString(why));
        for (int r : {0, 1})
            QCOMPARE(QString::fromStdString(errors[std::size_t(r)]),
                     QString::fromStdString("aborted: NCCL allReduceMean: another tower failed: " +
                                            why));
        QCOMPARE(state->aborts.load(), 1);
        QCOMPARE(state->usesAfterTeardown.load(), 0);
    }

    // Aborts from outside (another tower's thread, a stop) racing with ranks in and out of
    // collectives: one teardown, after the last call that used the handles, and every rank
    // released.
    void ncclAbortRacesWithCollectives()
    {
        std::mt19937 random(7);
        for (int round = 0; round < 40; ++round) {
            auto state = std::make_shared<FakeNcclState>();
            state->pollsToFinish = int(random() % 4);
            state->slowPolls = true;
            auto comm = fakeNccl(4, state);
            const auto delay = std::chrono::microseconds(random() % 3000);
            std::vector<std::vector<Tensor>> data = {floats(0), floats(1), floats(2), floats(3)};
            std::thread aborter([&] {
                std::this_thread::sleep_for(delay);
                comm->abort("stopped");
            });
            const auto errors = onRanksWithin(4, std::chrono::seconds(20), [&](int r) {
                for (;;) comm->allReduceMean(r, data[std::size_t(r)]);
            });
            aborter.join();
            for (const auto& e : errors)
                QVERIFY2(e.rfind("aborted: ", 0) == 0 && e.find("stopped") != std::string::npos,
                         e.c_str());
            QCOMPARE(state->aborts.load(), 1);
            QCOMPARE(state->usesAfterTeardown.load(), 0);
            expectNoSecondTeardown(comm, *state);
        }
    }

    // Collectives that finish, then the normal end: each rank's launch, and one destruction.
    void ncclNormalEnd()
    {
        auto state = std::make_shared<FakeNcclState>();
        state->pollsToFinish = 3;
        auto comm = fakeNccl(2, state);
        std::vector<std::vector<Tensor>> data = {floats(0), floats(1)};
        const auto errors = onRanksWithin(2, std::chrono::seconds(20), [&](int r) {
            for (int i = 0; i < 5; ++i) {
                comm->allReduceMean(r, data[std::size_t(r)]);
                comm->barrier(r);
            }
            comm->broadcast(r, 1, data[std::size_t(r)]);
        });
        for (const auto& e : errors) QVERIFY2(e.empty(), e.c_str());
        QCOMPARE(state->launches.load(), 12);
        QVERIFY(!comm->aborted());
        // Refusals on the calling rank: wrong dtype, wrong device, no such rank or root.
        std::vector<Tensor> ints = {Tensor::zeros({2}, DType::Int32)};
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, comm->allReduceMean(0, ints));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, comm->allReduceMean(2, data[0]));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, comm->broadcast(0, 5, data[0]));
        comm.reset();
        QCOMPARE(state->destroys.load(), 1);
        QCOMPARE(state->aborts.load(), 0);
    }

    // A collective a rank never joins, and nobody aborts: it fails after the time limit instead
    // of waiting forever, and releases the other ranks.
    void ncclCollectiveTimesOut()
    {
        auto state = std::make_shared<FakeNcclState>();
        auto comm = fakeNccl(2, state, std::chrono::milliseconds(300));
        std::vector<std::vector<Tensor>> data = {floats(0), floats(1)};
        const auto t0 = std::chrono::steady_clock::now();
        const auto errors = onRanksWithin(2, std::chrono::seconds(20), [&](int r) {
            comm->allReduceMean(r, data[std::size_t(r)]);
        });
        QVERIFY(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
        int timedOut = 0;
        for (const auto& e : errors) {
            if (e.find("not finished after 300 ms") != std::string::npos) ++timedOut;
            QVERIFY2(e.find("not finished after 300 ms") != std::string::npos, e.c_str());
        }
        QVERIFY(timedOut >= 1);
        QCOMPARE(state->aborts.load(), 1);
        QCOMPARE(state->usesAfterTeardown.load(), 0);
    }

    // Asynchronous averages on every rank, synchronous collectives between and among them: the
    // tickets count up in the order started, every rank's collectives reach the driver in the
    // same order, none while NCCL is still enqueuing the rank's previous one, each is ordered
    // (the driver's ordered()) once, in order, after it was enqueued, and the host never waits
    // for the GPU (poll(), the wait for a collective to finish, serves the synchronous ones only).
    void ncclAsyncInOrder()
    {
        auto state = std::make_shared<FakeNcclState>();
        state->pollsToFinish = 2;
        state->enqueuePolls = 3; // ncclInProgress at first, enqueued after a few polls
        const int ranks = 3, steps = 4, count = 3;
        auto comm = fakeNccl(ranks, state);
        auto ops = makeBackendOps("reference");
        std::vector<std::vector<std::vector<Tensor>>> grads;
        std::vector<std::vector<Tensor>> other;
        for (int r = 0; r < ranks; ++r) {
            grads.push_back(buckets(r, count));
            other.push_back(floats(r));
        }
        std::vector<std::vector<std::uint64_t>> tickets(ranks);
        const auto errors = onRanksWithin(ranks, std::chrono::seconds(20), [&](int r) {
            comm->attach(r, *ops);
            auto& mine = grads[std::size_t(r)];
            for (int step = 0; step < steps; ++step) {
                std::vector<std::uint64_t> started;
                for (int b = 0; b < count; ++b) {
                    started.push_back(comm->startAllReduceMean(r, mine[std::size_t(b)]));
                    // A synchronous collective while averages are in flight keeps its place.
                    if (step == 2 && b == 0) comm->allReduceMean(r, other[std::size_t(r)]);
                }
                for (std::uint64_t t : started) comm->complete(r, t);
                tickets[std::size_t(r)].insert(tickets[std::size_t(r)].end(), started.begin(),
                                               started.end());
                if (step == 1) comm->allReduceMean(r, other[std::size_t(r)]);
                comm->barrier(r);
            }
        });
        for (const auto& e : errors) QVERIFY2(e.empty(), e.c_str());
        for (int r = 0; r < ranks; ++r) {
            std::vector<std::uint64_t> expected(steps * count), tokens(steps * count);
            for (std::size_t i = 0; i < expected.size(); ++i) {
                expected[i] = i;
                tokens[i] = 1000 + i;
            }
            QCOMPARE(tickets[std::size_t(r)], expected);
            QCOMPARE(comm->driver().orderedTokens(r), tokens);
            QCOMPARE(comm->driver().log(r), comm->driver().log(0));
        }
        const std::vector<std::string> expectedLog = {
            "async 1", "async 2",       "async 3",                  // step 0
            "async 1", "async 2",       "async 3", "allReduceMean", // step 1
            "async 1", "allReduceMean", "async 2", "async 3",       // step 2
            "async 1", "async 2",       "async 3"};                 // step 3
        QCOMPARE(comm->driver().log(0), expectedLog);
        QCOMPARE(state->attached.load(), ranks);
        QCOMPARE(state->asyncLaunches.load(), ranks * steps * count);
        QCOMPARE(state->callsWhileEnqueuing.load(), 0);
        QCOMPARE(state->orderedTooEarly.load(), 0);
        QCOMPARE(state->gpuWaits.load(), ranks * 2 * 2); // two synchronous calls, two polls each
        QCOMPARE(state->tokensHeld.load(), 0);
        QVERIFY(!comm->aborted());
        comm.reset();
        QCOMPARE(state->destroys.load(), 1);
        QCOMPARE(state->aborts.load(), 0);
        QCOMPARE(state->releasedAtTeardown.load(), 0);
        QCOMPARE(state->usesAfterTeardown.load(), 0);
    }

    // start returns while NCCL is still enqueuing (it never finishes here); complete() waits
    // for that, and an abort from another rank's thread releases it with CollectiveAborted
    // within moments (the watchdog fails the test on a hang). The teardown, once, releases what
    // the ranks had started.
    void ncclAbortReleasesRankInComplete()
    {
        auto state = std::make_shared<FakeNcclState>();
        state->enqueuePolls = -1;
        auto comm = fakeNccl(3, state);
        std::vector<std::vector<Tensor>> data = {floats(0), floats(1), floats(2)};
        std::atomic<int> started{0};
        const auto t0 = std::chrono::steady_clock::now();
        const auto errors = onRanksWithin(3, std::chrono::seconds(20), [&](int r) {
            if (r == 1) {
                std::this_thread::sleep_for(std::chrono::milliseconds(200));
                comm->abort("tower 1 on cuda:1: out of memory on cuda:1");
                throw Error("out of memory");
            }
            const std::uint64_t ticket = comm->startAllReduceMean(r, data[std::size_t(r)]);
            ++started; // at once: nothing waits for the enqueue here
            comm->complete(r, ticket);
        });
        QVERIFY(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
        QCOMPARE(started.load(), 2);
        expectReleasedByRankOneOutOfMemory(errors);
        QCOMPARE(state->aborts.load(), 1);
        QCOMPARE(state->releasedAtTeardown.load(), 2);
        QCOMPARE(state->usesAfterTeardown.load(), 0);
        // Later calls fail at once, without touching the torn-down handles.
        QVERIFY_THROWS_EXCEPTION(CollectiveAborted, comm->startAllReduceMean(0, data[0]));
        QVERIFY_THROWS_EXCEPTION(CollectiveAborted, comm->complete(0, 0));
        QVERIFY_THROWS_EXCEPTION(CollectiveAborted, comm->allReduceMean(2, data[2]));
        expectNoSecondTeardown(comm, *state);
    }

    // NCCL reports an asynchronous error on rank 2 after its average was enqueued: complete()
    // throws BackendError there, and the other ranks, wherever they are (completing, in the
    // barrier after), are released with its reason.
    void ncclAsyncFailureSurfacesFromComplete()
    {
        auto state = std::make_shared<FakeNcclState>();
        state->asyncFailingRank = 2;
        auto comm = fakeNccl(3, state);
        std::vector<std::vector<Tensor>> data = {floats(0), floats(1), floats(2)};
        const auto errors = onRanksWithin(3, std::chrono::seconds(20), [&](int r) {
            const std::uint64_t ticket = comm->startAllReduceMean(r, data[std::size_t(r)]);
            if (r == 2) std::this_thread::sleep_for(std::chrono::milliseconds(50));
            comm->complete(r, ticket);
            comm->barrier(r);
        });
        const std::string why = "NCCL allReduceMean failed on host: remote process exited or "
                                "there was a network error";
        QCOMPARE(QString::fromStdString(errors[2]), QString::fromStdString(why));
        for (int r : {0, 1})
            QVERIFY2(errors[std::size_t(r)].rfind("aborted: ", 0) == 0 &&
                         errors[std::size_t(r)].find(why) != std::string::npos,
                     errors[std::size_t(r)].c_str());
        QCOMPARE(state->aborts.load(), 1);
        QCOMPARE(state->usesAfterTeardown.load(), 0);
    }

    // A ticket completed out of order, twice, or never started: refused on the calling rank
    // (InvalidArgument), changing nothing; the communicator goes on.
    void ncclTicketsOutOfOrderRefused()
    {
        auto state = std::make_shared<FakeNcclState>();
        state->enqueuePolls = 2;
        auto comm = fakeNccl(2, state);
        std::vector<std::vector<std::vector<Tensor>>> data = {buckets(0, 2), buckets(1, 2)};
        const auto errors = onRanksWithin(2, std::chrono::seconds(20), [&](int r) {
            auto& mine = data[std::size_t(r)];
            const std::uint64_t t0 = comm->startAllReduceMean(r, mine[0]);
            const std::uint64_t t1 = comm->startAllReduceMean(r, mine[1]);
            expectRefused([&] { comm->complete(r, t1); },
                          "NCCL complete: rank " + std::to_string(r) +
                              " must complete collective 0 before 1");
            comm->complete(r, t0);
            expectRefused([&] { comm->complete(r, t0); }, "completed collective 0 already");
            expectRefused([&] { comm->complete(r, 7); }, "started no collective 7");
            comm->complete(r, t1);
            expectRefused([&] { comm->complete(r, t1); }, "completed collective 1 already");
            expectRefused([&] { comm->complete(r, 2); }, "started no collective 2");
        });
        for (const auto& e : errors) QVERIFY2(e.empty(), e.c_str());
        QVERIFY(!comm->aborted());
        for (int r = 0; r < 2; ++r)
            QCOMPARE(comm->driver().orderedTokens(r), (std::vector<std::uint64_t>{1000, 1001}));
        QCOMPARE(state->tokensHeld.load(), 0);
        QCOMPARE(state->callsWhileEnqueuing.load(), 0);
        // Refusals on the calling rank: no such rank, a tensor the average does not take.
        std::vector<Tensor> ints = {Tensor::zeros({2}, DType::Int32)};
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, comm->startAllReduceMean(0, ints));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, comm->startAllReduceMean(2, data[0][0]));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, comm->complete(-1, 0));
        QVERIFY(!comm->aborted());
    }

    // NCCL never finishes enqueuing, and nobody aborts: complete() gives up after the time
    // limit instead of waiting forever, and releases the other ranks.
    void ncclAsyncEnqueueTimesOut()
    {
        auto state = std::make_shared<FakeNcclState>();
        state->enqueuePolls = -1;
        auto comm = fakeNccl(2, state, std::chrono::milliseconds(300));
        std::vector<std::vector<Tensor>> data = {floats(0), floats(1)};
        const auto t0 = std::chrono::steady_clock::now();
        const auto errors = onRanksWithin(2, std::chrono::seconds(20), [&](int r) {
            comm->complete(r, comm->startAllReduceMean(r, data[std::size_t(r)]));
        });
        QVERIFY(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
        for (const auto& e : errors)
            QVERIFY2(e.find("not finished after 300 ms") != std::string::npos, e.c_str());
        QCOMPARE(state->aborts.load(), 1);
        QCOMPARE(state->usesAfterTeardown.load(), 0);
    }

    // Aborts from outside racing with ranks starting and completing averages (and synchronous
    // ones): one teardown, after the last call that used the handles, every rank released, no
    // NCCL call while one is being enqueued.
    void ncclAbortRacesWithAsyncCollectives()
    {
        std::mt19937 random(11);
        for (int round = 0; round < 40; ++round) {
            auto state = std::make_shared<FakeNcclState>();
            state->pollsToFinish = int(random() % 3);
            state->enqueuePolls = int(random() % 4);
            state->slowPolls = true;
            auto comm = fakeNccl(4, state);
            const auto delay = std::chrono::microseconds(random() % 3000);
            std::vector<std::vector<std::vector<Tensor>>> data;
            for (int r = 0; r < 4; ++r) data.push_back(buckets(r, 2));
            std::thread aborter([&] {
                std::this_thread::sleep_for(delay);
                comm->abort("stopped");
            });
            const auto errors = onRanksWithin(4, std::chrono::seconds(20), [&](int r) {
                auto& mine = data[std::size_t(r)];
                for (int i = 0;; ++i) {
                    const std::uint64_t a = comm->startAllReduceMean(r, mine[0]);
                    const std::uint64_t b = comm->startAllReduceMean(r, mine[1]);
                    comm->complete(r, a);
                    comm->complete(r, b);
                    if (i % 3 == 0) comm->allReduceMean(r, mine[1]);
                }
            });
            aborter.join();
            for (const auto& e : errors)
                QVERIFY2(e.rfind("aborted: ", 0) == 0 && e.find("stopped") != std::string::npos,
                         e.c_str());
            QCOMPARE(state->aborts.load(), 1);
            QCOMPARE(state->usesAfterTeardown.load(), 0);
            QCOMPARE(state->callsWhileEnqueuing.load(), 0);
            QCOMPARE(state->orderedTooEarly.load(), 0);
            expectNoSecondTeardown(comm, *state);
            QCOMPARE(state->tokensHeld.load(), 0);
        }
    }

    // One process's ranks of an NCCL world of several (GpuBackend::NcclWorld): the barrier is
    // the driver's collective (every rank of the world), in its place among the others, not a
    // rendezvous of this process's ranks; broadcast takes root 0 only (global rank 0), refusing
    // another on the calling rank; an abort releases a rank waiting in the world's barrier for
    // processes that never come.
    void ncclWorldBarrierAndRoot()
    {
        auto state = std::make_shared<FakeNcclState>();
        state->world = true;
        state->pollsToFinish = 2;
        auto comm = fakeNccl(2, state);
        std::vector<std::vector<Tensor>> data = {floats(0), floats(1)};
        const auto errors = onRanksWithin(2, std::chrono::seconds(20), [&](int r) {
            auto& mine = data[std::size_t(r)];
            comm->allReduceMean(r, mine);
            comm->barrier(r);
            comm->broadcast(r, 0, mine);
            expectRefused([&] { comm->broadcast(r, 1, mine); },
                          "NCCL broadcast: with ranks in several processes the root is global "
                          "rank 0 (root 0), not 1");
            comm->barrier(r);
        });
        for (const auto& e : errors) QVERIFY2(e.empty(), e.c_str());
        const std::vector<std::string> expectedLog = {"allReduceMean", "barrier",
                                                      "broadcast from 0", "barrier"};
        for (int r = 0; r < 2; ++r) QCOMPARE(comm->driver().log(r), expectedLog);
        QCOMPARE(state->launches.load(), 8);
        QCOMPARE(state->gpuWaits.load(), 8 * 2); // each waited for, two polls each
        QVERIFY(!comm->aborted());
        comm.reset();
        QCOMPARE(state->destroys.load(), 1);

        auto waiting = std::make_shared<FakeNcclState>();
        waiting->world = true; // collectives never finish: the other processes never come
        auto lone = fakeNccl(1, waiting);
        const auto t0 = std::chrono::steady_clock::now();
        std::thread aborter([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            lone->abort("process 1 failed: out of memory");
        });
        const auto released =
            onRanksWithin(1, std::chrono::seconds(20), [&](int r) { lone->barrier(r); });
        aborter.join();
        QVERIFY(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
        QCOMPARE(QString::fromStdString(released[0]),
                 QStringLiteral("aborted: NCCL barrier: another tower failed: process 1 failed: "
                                "out of memory"));
        QCOMPARE(waiting->aborts.load(), 1);
        QCOMPARE(waiting->usesAfterTeardown.load(), 0);
    }

    // A tower's wait for its step across processes (waitWatching): a device wait that nothing
    // interrupts (a step whose collectives wait for a process that failed) is polled instead,
    // and ends when the watch throws that process's failure; a step that ends is waited for.
    void aWatchedWaitEndsWithTheWatch()
    {
        // Ops whose marks complete when the test says: waitFor blocks until then, as a GPU's
        // event wait does, and reached() says whether it would return.
        class HeldOps final : public reference::ReferenceOps
        {
        public:
            std::atomic<bool> done{false};
            std::atomic<int> blockingWaits{0};
            bool reached(int mark) override
            {
                reference::ReferenceOps::reached(mark);
                return done.load();
            }
            void waitFor(int mark) override
            {
                ++blockingWaits;
                while (!done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
                reference::ReferenceOps::waitFor(mark);
            }
        };
        HeldOps ops;
        const int m = ops.mark();
        int polls = 0;
        const auto t0 = std::chrono::steady_clock::now();
        try {
            waitWatching(ops, m, [&] {
                if (++polls == 20) throw ProcessFailed(1, "process 1 failed: out of memory");
            });
            QFAIL("the wait returned while the work was not done");
        } catch (const ProcessFailed& e) {
            QCOMPARE(QString(e.what()), QStringLiteral("process 1 failed: out of memory"));
        }
        QCOMPARE(polls, 20);
        QCOMPARE(ops.blockingWaits.load(), 0);
        QVERIFY(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
        // Work that ends: the wait returns, having waited for it (its faults surface there).
        std::thread finish([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            ops.done = true;
        });
        waitWatching(ops, m, [] {});
        finish.join();
        QCOMPARE(ops.blockingWaits.load(), 1);
    }

    void towerThread()
    {
        TowerThread t;
        std::thread::id id;
        t.post([&] { id = std::this_thread::get_id(); });
        t.wait();
        QVERIFY(id != std::this_thread::get_id());
        std::thread::id again;
        t.post([&] { again = std::this_thread::get_id(); });
        t.wait();
        QCOMPARE(again, id); // persistent: the same thread for every job
        t.post([] { throw InvalidArgument("bad job"); });
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, t.wait());
        std::atomic<int> n{0};
        t.post([&] { ++n; });
        t.wait();
        QCOMPARE(n.load(), 1);
    }
};

QTEST_APPLESS_MAIN(TestCommunicator)
#include "tst_communicator.moc"
