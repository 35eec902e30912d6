// The op contract (engine/ops/op_list.h, ops.cpp): one list of ops; arguments checked once, in
// the public entries, alike for every backend; an op a backend leaves out runs staged through a
// host backend with one log line, or is refused naming it; the backends by name in one place.
#include <QtTest>

#include <set>
#include <string>
#include <vector>

#include "engine/cpu/onednn_ops.h"
#include "engine/errors.h"
#include "engine/ops/backends.h"
#include "engine/ops/staged_ops.h"
#include "error_message.h"
#include "fake_device.h"

using namespace towers::engine;
using towers::test::FakeDeviceScope;
using towers::test::makeFakeDeviceOps;

namespace {

// A backend that implements ReLU alone, by hand; everything else is the fallback's.
class ReluOnlyOps final : public Ops
{
public:
    ReluOnlyOps() : Ops(opSet({Op::reluForward})) {}
    std::string name() const override { return "relu-only"; }
    Device device() const override { return Device::host(); }
    int reluCalls = 0;

protected:
    void reluForwardImpl(const Tensor& x, Tensor& y) override
    {
        ++reluCalls;
        Tensor::ensure(y, x.shape(), x.dtype());
        for (std::int64_t i = 0; i < x.numel(); ++i) y.setAt(i, std::max(0.0, x.at(i)));
    }
};

Tensor ramp(const Shape& shape)
{
    Tensor t(shape, DType::Float32);
    for (std::int64_t i = 0; i < t.numel(); ++i) t.setAt(i, double(i % 7) - 3.0);
    return t;
}

} // namespace

class TestOpContract : public QObject
{
    Q_OBJECT

private slots:
    void theListNamesEveryOpOnce()
    {
        std::set<std::string> names;
        for (int i = 0; i < kOpCount; ++i) {
            const std::string n = opName(Op(i));
            QVERIFY2(!n.empty() && names.insert(n).second, n.c_str());
        }
        QCOMPARE(int(names.size()), kOpCount);
        QVERIFY(isComposite(Op::conv2dBackward) && isComposite(Op::linearBackward) &&
                isComposite(Op::conv2dForwardTraining));
        QVERIFY(!isComposite(Op::conv2dForward) && !isComposite(Op::adamUpdate));
        QCOMPARE(int(allOps().count()), kOpCount);
    }

    // Every backend here implements every single op itself.
    void backendsSupportEveryOp_data()
    {
        QTest::addColumn<QString>("backend");
        QTest::newRow("reference") << "reference";
        QTest::newRow("onednn") << "onednn";
    }
    void backendsSupportEveryOp()
    {
        QFETCH(QString, backend);
        auto ops = makeBackendOps(backend.toStdString());
        for (int i = 0; i < kOpCount; ++i) QVERIFY2(ops->supports(Op(i)), opName(Op(i)));
    }

    void anOpLeftOutIsRefusedByName()
    {
        ReluOnlyOps ops;
        QVERIFY(ops.supports(Op::reluForward));
        QVERIFY(!ops.supports(Op::add));
        QVERIFY(ops.supports(Op::linearBackward)); // composed of single ops
        const Tensor x = ramp({2, 3});
        Tensor y;
        ops.reluForward(x, y);
        QCOMPARE(ops.reluCalls, 1);
        QCOMPARE(y.at(0), 0.0);
        QCOMPARE(y.at(5), 2.0);
        QVERIFY_THROWS_EXCEPTION(Unsupported, ops.add(x, x, y));
        const std::string msg = towers::test::messageOf([&] { ops.add(x, x, y); });
        QVERIFY2(msg.find("relu-only") != std::string::npos && msg.find("add") != std::string::npos,
                 msg.c_str());
    }

    void anOpLeftOutRunsOnTheHostFallbackWithOneLogLine()
    {
        ReluOnlyOps ops;
        std::vector<std::string> lines;
        ops.setLog([&](const std::string& l) { lines.push_back(l); });
        ops.setHostFallback([] { return makeReferenceOps(); });
        const Tensor a = ramp({2, 3}), b = ramp({2, 3});
        Tensor y;
        ops.add(a, b, y);
        ops.add(a, b, y);
        for (std::int64_t i = 0; i < y.numel(); ++i) QCOMPARE(y.at(i), 2 * a.at(i));
        QCOMPARE(int(lines.size()), 1);
        QVERIFY2(lines[0].find("add") != std::string::npos &&
                     lines[0].find("reference") != std::string::npos,
                 lines[0].c_str());
        // The implemented op still runs here, and a composite op composes the fallback's pieces
        // with this backend's ReLU.
        ops.reluForward(a, y);
        QCOMPARE(ops.reluCalls, 1);
        const Tensor x = ramp({4, 3}), w = ramp({2, 3}), dy = ramp({4, 2});
        Tensor yl, dx, dw, db;
        ops.linearForward(x, w, Tensor(), yl, Activation::Relu);
        ops.linearBackward(x, w, yl, dy, Activation::Relu, &dx, dw, &db);
        auto ref = makeReferenceOps();
        Tensor ryl, rdx, rdw, rdb;
        ref->linearForward(x, w, Tensor(), ryl, Activation::Relu);
        ref->linearBackward(x, w, ryl, dy, Activation::Relu, &rdx, rdw, &rdb);
        for (std::int64_t i = 0; i < dw.numel(); ++i) QCOMPARE(dw.at(i), rdw.at(i));
        for (std::int64_t i = 0; i < dx.numel(); ++i) QCOMPARE(dx.at(i), rdx.at(i));
        for (std::int64_t i = 0; i < db.numel(); ++i) QCOMPARE(db.at(i), rdb.at(i));
        // add, linearForward, reluBackward, linearBackwardWeights, linearBackwardData
        QCOMPARE(int(lines.size()), 5);
    }

    // The checks are the entry's, not a backend's: the same call is refused the same way on each
    // (CUDA's max-pool backward once ignored y; it is checked before any backend sees it now).
    void everyBackendRefusesTheSameCalls_data()
    {
        QTest::addColumn<QString>("backend");
        QTest::newRow("reference") << "reference";
        QTest::newRow("onednn") << "onednn";
        QTest::newRow("onednn staged") << "staged";
        QTest::newRow("onednn on a stand-in GPU") << "fake";
    }
    void everyBackendRefusesTheSameCalls()
    {
        QFETCH(QString, backend);
        FakeDeviceScope scope;
        std::unique_ptr<Ops> ops = backend == "staged" ? makeStagedOps(cpu::makeOneDnnOps())
                                   : backend == "fake" ? makeFakeDeviceOps("onednn")
                                                       : makeBackendOps(backend.toStdString());
        const Device dev = ops->device();
        const auto p = makePool2dDesc({2, 5, 5, 3}, 3, 3, 2, 2, Padding::Same);
        const Tensor x = ramp(p.inputShape()).copyTo(dev);
        Tensor y, ws, dx;
        ops->maxPoolForward(p, x, y, ws);
        const Tensor wrongY = ramp({2, 3, 3, 4}).copyTo(dev);
        const std::string msg =
            towers::test::messageOf([&] { ops->maxPoolBackward(p, x, wrongY, y, ws, dx); });
        QVERIFY2(msg.find("max pool y") != std::string::npos, msg.c_str());
        QVERIFY_THROWS_EXCEPTION(ShapeError, ops->maxPoolBackward(p, x, wrongY, y, ws, dx));
        // A tensor that is not where the backend runs.
        const Device elsewhere = dev.isHost() ? Device{DeviceKind::Cuda, 0} : Device::host();
        const Tensor away = x.copyTo(elsewhere);
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, ops->maxPoolForward(p, away, y, ws));
        const std::string where =
            towers::test::messageOf([&] { ops->maxPoolForward(p, away, y, ws); });
        QVERIFY2(where.find("max pool x") != std::string::npos &&
                     where.find(dev.str()) != std::string::npos,
                 where.c_str());
        // An empty input; an integer tensor where a float one belongs.
        QVERIFY_THROWS_EXCEPTION(ShapeError, ops->reluForward(Tensor(), y));
        QVERIFY_THROWS_EXCEPTION(Unsupported,
                                 ops->reluForward(Tensor::zeros({3}, DType::Int32).copyTo(dev), y));
    }

    void backendsByName()
    {
        QCOMPARE(backendNamesText(), std::string("onednn, reference, cuda"));
        QCOMPARE(backendNamesText(" or "), std::string("onednn, reference or cuda"));
        for (const auto& n : backendNames()) QVERIFY(isBackendName(n));
        QVERIFY(isHostBackend("onednn") && isHostBackend("reference") && !isHostBackend("cuda"));
        QVERIFY_THROWS_EXCEPTION(UnknownName, makeBackendOps("tpu"));
        const std::string msg = towers::test::messageOf([] { requireBackendName("tpu"); });
        QCOMPARE(msg, std::string("unknown backend 'tpu' (known: onednn, reference, cuda)"));
        QCOMPARE(makeBackendOps("onednn")->name(), std::string("onednn"));
        QCOMPARE(makeBackendOps("reference")->name(), std::string("reference"));
        QVERIFY(describeBackend("onednn").rfind("onednn ", 0) == 0);
    }
};

QTEST_APPLESS_MAIN(TestOpContract)
#include "tst_op_contract.moc"
