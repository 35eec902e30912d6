// The in-process communicator and the tower threads: the mean against a double-precision oracle,
// bitwise the same result on every rank and in every run, broadcast, refusal of mismatched calls
// on every rank, and an abort that releases the ranks waiting in a collective.
#include <QtTest>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

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
