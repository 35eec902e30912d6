// The in-process communicator and the tower threads: the mean against a double-precision oracle,
// bitwise the same result on every rank and in every run, broadcast, refusal of mismatched calls
// on every rank, and an abort that releases the ranks waiting in a collective. Then the NCCL
// communicator's error paths (engine/cuda/abortable_communicator.h) over a stand-in for NCCL whose
// collectives never finish unless told to: an abort from any thread releases every waiting rank
// within a time bound (a watchdog fails the test on a hang), a failing rank releases the others,
// nothing touches the communicators once they are torn down, and a collective that never ends
// times out.
#include <QtTest>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "engine/cuda/abortable_communicator.h"
#include "engine/train/host_communicator.h"
#include "engine/train/tower_thread.h"
#include "gradcheck.h"

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

bool sameBytes(const Tensor& a, const Tensor& b)
{
    return a.shape() == b.shape() && a.dtype() == b.dtype() &&
           std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
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
};

class FakeNcclDriver
{
public:
    FakeNcclDriver(int ranks, std::shared_ptr<FakeNcclState> state)
        : m_ranks(ranks), m_state(std::move(state)), m_polls(std::size_t(ranks), 0)
    {
    }
    int size() const { return m_ranks; }
    Device device(int) const { return Device::host(); }
    const char* name() const { return "NCCL"; }
    cuda::CollectiveStatus launch(int rank, cuda::CollectiveKind, int, std::span<Tensor>)
    {
        touch();
        ++m_state->launches;
        m_polls[std::size_t(rank)] = 0;
        return {cuda::CollectiveState::Pending, {}};
    }
    cuda::CollectiveStatus poll(int rank)
    {
        touch();
        if (m_state->slowPolls) std::this_thread::sleep_for(std::chrono::microseconds(50));
        touch();
        if (rank == m_state->failingRank)
            return {cuda::CollectiveState::Failed, "unhandled cuda error"};
        const int need = m_state->pollsToFinish;
        if (need >= 0 && ++m_polls[std::size_t(rank)] >= need) return {};
        return {cuda::CollectiveState::Pending, {}};
    }
    void abortAll() noexcept
    {
        ++m_state->aborts;
        m_state->tornDown = true;
    }
    void destroyAll() noexcept
    {
        ++m_state->destroys;
        m_state->tornDown = true;
    }

private:
    void touch() const
    {
        if (m_state->tornDown) ++m_state->usesAfterTeardown;
    }
    int m_ranks;
    std::shared_ptr<FakeNcclState> m_state;
    std::vector<int> m_polls; // per rank, each touched by its own thread only
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
        for (int r : {0, 2})
            QCOMPARE(QString::fromStdString(errors[std::size_t(r)]),
                     QStringLiteral("aborted: NCCL allReduceMean: another tower failed: tower 1 "
                                    "on cuda:1: out of memory on cuda:1"));
        QCOMPARE(state->aborts.load(), 1);
        QCOMPARE(state->usesAfterTeardown.load(), 0);
        QVERIFY(comm->aborted());
        // Later calls fail at once, without touching the torn-down handles.
        QVERIFY_THROWS_EXCEPTION(CollectiveAborted, comm->broadcast(0, 0, data[0]));
        QVERIFY_THROWS_EXCEPTION(CollectiveAborted, comm->barrier(0));
        comm.reset(); // no second teardown
        QCOMPARE(state->aborts.load(), 1);
        QCOMPARE(state->destroys.load(), 0);
        QCOMPARE(state->usesAfterTeardown.load(), 0);
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
            comm.reset();
            QCOMPARE(state->destroys.load(), 0);
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
