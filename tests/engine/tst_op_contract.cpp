// The op contract (engine/ops/op_list.h, op_checks.cpp, ops.cpp): one list of ops; arguments
// checked once, in the public entries, alike for every backend; an op a backend leaves out runs
// staged through a host backend with one log line, or is refused naming it; the backends by name
// in one place.
#include <QtTest>

#include <cmath>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "engine/backends.h"
#include "engine/cpu/onednn_ops.h"
#include "engine/data/distortion_math.h"
#include "engine/errors.h"
#include "engine/ops/staged_ops.h"
#include "engine/ops/step_scalars.h"
#include "error_message.h"
#include "fake_device.h"
#include "replication.h"

using namespace towers::engine;
using towers::test::FakeDeviceScope;
using towers::test::makeFakeDeviceOps;
using towers::test::sameBytes;

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

// The state of the four optimizer updates on one backend's device, each update changing it.
struct UpdateState
{
    UpdateState(const Device& dev)
        : g(ramp({6}).copyTo(dev)), w(Tensor::filled({6}, DType::Float32, 0.5).copyTo(dev)),
          buf(Tensor::filled({6}, DType::Float32, 0.25).copyTo(dev)),
          m(Tensor::filled({6}, DType::Float32, -0.125).copyTo(dev)),
          v(Tensor::filled({6}, DType::Float32, 0.0625).copyTo(dev)),
          shadow(Tensor::filled({6}, DType::Float32, 2.0).copyTo(dev))
    {
    }
    Tensor g, w, buf, m, v, shadow;

    // Every update, in turn, with `skip`.
    void update(Ops& ops, const Tensor& skip)
    {
        ops.sgdUpdate(0.1, g, w, skip, Tensor());
        MomentumStep ms;
        ms.first = false;
        ops.momentumUpdate(ms, g, buf, w, skip, Tensor());
        ops.adamUpdate(AdamStep{}, g, m, v, w, skip, Tensor());
        ops.emaUpdate(0.3, w, shadow, skip, Tensor());
    }
    std::vector<Tensor> onHost() const
    {
        return {w.onHost().clone(), buf.onHost().clone(), m.onHost().clone(), v.onHost().clone(),
                shadow.onHost().clone()};
    }
};

bool sameState(const std::vector<Tensor>& a, const std::vector<Tensor>& b)
{
    for (std::size_t i = 0; i < a.size(); ++i)
        if (!sameBytes(a[i], b[i])) return false;
    return true;
}

// The backends the contract is checked on, by the data rows' names: "reference", "onednn",
// "staged" (oneDNN through the staging adapter) and "fake" (oneDNN on a stand-in GPU, whose
// FakeDeviceScope the caller holds).
std::unique_ptr<Ops> opsFor(const QString& backend)
{
    return backend == "staged" ? makeStagedOps(cpu::makeOneDnnOps())
           : backend == "fake" ? makeFakeDeviceOps("onednn")
                               : makeBackendOps(backend.toStdString());
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
        std::unique_ptr<Ops> ops = opsFor(backend);
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

    // The copies a step issues among its ops (its slice prefetched, saving buffers, a flag from
    // the step before, the loss on its way to the host) and the marks it waits for: on every
    // backend alike, the copies exact, the wrong places refused, a mark readable until kMarkWindow
    // newer ones.
    void copiesAndMarks_data() { everyBackendRefusesTheSameCalls_data(); }
    void copiesAndMarks()
    {
        QFETCH(QString, backend);
        FakeDeviceScope scope;
        std::unique_ptr<Ops> ops = opsFor(backend);
        const Device dev = ops->device();
        const Device elsewhere = dev.isHost() ? Device{DeviceKind::Cuda, 0} : Device::host();
        const Tensor x = ramp({3, 5}).copyTo(dev);
        Tensor y;
        ops->copy(x, y);
        QCOMPARE(y.device(), dev);
        QVERIFY(y.raw() != x.raw());
        Tensor back = Tensor::pinned({3, 5}, DType::Float32);
        ops->download(y, back);
        const int done = ops->mark();
        ops->waitFor(done);
        QVERIFY(sameBytes(back, ramp({3, 5})));
        // prefetch: an upload, into a tensor it makes and into one already there.
        Tensor fetched;
        for (int round = 0; round < 2; ++round) {
            Tensor host = Tensor::pinned({3, 5}, DType::Float32);
            for (int i = 0; i < 15; ++i) host.data<float>()[i] = float(round * 100 + i);
            ops->prefetch(host, fetched);
            QCOMPARE(fetched.device(), dev);
            ops->synchronize();
            QVERIFY(sameBytes(fetched.onHost(), host));
        }
        const Tensor notOnHost = dev.isHost() ? x.copyTo(elsewhere) : x;
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, ops->prefetch(notOnHost, fetched));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, ops->upload(notOnHost, fetched));
        // Where they must be: the source where the ops compute, the destination on the host and
        // of the source's shape and dtype.
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, ops->copy(x.copyTo(elsewhere), y));
        Tensor wrong = Tensor::pinned({5, 3}, DType::Float32);
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, ops->download(y, wrong));
        if (!dev.isHost()) {
            Tensor onDevice = x.clone();
            QVERIFY_THROWS_EXCEPTION(InvalidArgument, ops->download(y, onDevice));
        }
        // Marks: counted from 0, in order of time; the oldest of more than kMarkWindow refused.
        ops->clearMarks();
        std::vector<int> marks;
        for (int i = 0; i < Ops::kMarkWindow + 3; ++i) marks.push_back(ops->mark());
        QCOMPARE(marks.front(), 0);
        QCOMPARE(marks.back(), Ops::kMarkWindow + 2);
        ops->waitFor(marks.back());
        QVERIFY(ops->millisecondsBetween(marks[3], marks.back()) >= 0);
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, ops->millisecondsBetween(marks[2], marks[3]));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, ops->waitFor(marks.back() + 1));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, ops->waitFor(-1));
        ops->clearMarks();
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, ops->waitFor(0));
        QCOMPARE(ops->mark(), 0);
    }

    // preprocessImages' checks: the recipe, the shapes and dtypes, and, for draws in host memory,
    // every row (a row that does not fit is named); on every backend alike, the stand-in GPU's
    // rows checked by the host backend that runs them.
    // foldBatchNorm refuses, on every backend alike, weights with a dimension of 0 (no output
    // channel, or none of its weights: the CUDA kernel would leave the biases unwritten) and
    // outputs in its inputs' memory, and folds what fits.
    void foldBatchNormChecksItsArguments_data() { everyBackendRefusesTheSameCalls_data(); }
    void foldBatchNormChecksItsArguments()
    {
        QFETCH(QString, backend);
        FakeDeviceScope scope;
        std::unique_ptr<Ops> ops = opsFor(backend);
        const Device dev = ops->device();
        const auto on = [&](const Tensor& t) { return t.copyTo(dev); };
        const Tensor w = on(ramp({3, 2, 2, 2})), b = on(ramp({3})),
                     gamma = on(Tensor::filled({3}, DType::Float32, 2.0)),
                     beta = on(Tensor::filled({3}, DType::Float32, 0.5)),
                     mean = on(Tensor::filled({3}, DType::Float32, 0.25)),
                     var = on(Tensor::filled({3}, DType::Float32, 4.0));
        Tensor wOut, bOut;
        ops->foldBatchNorm(w, b, gamma, beta, mean, var, 0.0, wOut, bOut);
        QCOMPARE(wOut.shape(), w.shape());
        QCOMPARE(bOut.shape(), Shape({3}));
        // γ/√σ² = 1: the weights as they were, the bias (b - μ) + β.
        QVERIFY(sameBytes(wOut.onHost(), w.onHost()));
        const Tensor folded = bOut.onHost(), bias = b.onHost();
        for (int o = 0; o < 3; ++o)
            QCOMPARE(folded.data<float>()[o], bias.data<float>()[o] - 0.25f + 0.5f);

        for (const Shape& empty : {Shape({0, 2, 2, 2}), Shape({3, 0, 2, 2}), Shape({3, 0})}) {
            const Tensor none = on(Tensor::zeros(empty, DType::Float32));
            const std::string msg = towers::test::messageOf([&] {
                ops->foldBatchNorm(none, Tensor(), gamma, beta, mean, var, 0.0, wOut, bOut);
            });
            QVERIFY2(msg.find("foldBatchNorm w: " + empty.str() + " has no weights") !=
                         std::string::npos,
                     msg.c_str());
        }
        for (const Tensor* in : {&b, &gamma, &beta, &mean, &var}) {
            Tensor into = *in;
            QVERIFY_THROWS_EXCEPTION(
                InvalidArgument, ops->foldBatchNorm(w, b, gamma, beta, mean, var, 0.0, wOut, into));
        }
        Tensor same = w;
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 ops->foldBatchNorm(w, b, gamma, beta, mean, var, 0.0, same, bOut));
    }

    void preprocessImagesChecksItsArguments_data() { everyBackendRefusesTheSameCalls_data(); }
    void preprocessImagesChecksItsArguments()
    {
        namespace pp = preprocess;
        QFETCH(QString, backend);
        FakeDeviceScope scope;
        std::unique_ptr<Ops> ops = opsFor(backend);
        const Device dev = ops->device();
        PreprocessDesc d;
        d.height = 3;
        d.width = 4;
        d.channels = 2;
        d.normalization = 2;
        Tensor source({2, 5, 6, 2}, DType::UInt8);
        for (std::int64_t i = 0; i < source.numel(); ++i)
            source.data<std::uint8_t>()[i] = std::uint8_t(i * 7);
        Tensor draws({3, pp::kDrawColumns}, DType::Float64);
        for (int r = 0; r < 3; ++r)
            pp::packDraw(r % 2, {2, 2, r - 1, 9, r == 1, 3.5, 0.75},
                         draws.data<double>() + r * pp::kDrawColumns);
        const Tensor src = source.copyTo(dev);
        Tensor y;
        ops->preprocessImages(d, src, draws.copyTo(dev), y);
        QCOMPARE(y.shape(), Shape({3, 3, 4, 2}));
        QCOMPARE(y.dtype(), DType::Float32);
        QVERIFY(y.device() == dev);

        // A row that does not fit: named, whatever is wrong with it.
        const auto badRow = [&](int column, double value) {
            Tensor bad = draws.clone();
            bad.data<double>()[2 * pp::kDrawColumns + column] = value;
            const Tensor there = bad.copyTo(dev);
            QVERIFY_THROWS_EXCEPTION(InvalidArgument, ops->preprocessImages(d, src, there, y));
            const std::string msg =
                towers::test::messageOf([&] { ops->preprocessImages(d, src, there, y); });
            QVERIFY2(msg.find("preprocessImages: draw row 2") != std::string::npos, msg.c_str());
        };
        badRow(pp::kDrawIndex, 2);     // past the set
        badRow(pp::kDrawIndex, -1);    // before it
        badRow(pp::kDrawIndex, 0.5);   // not a whole number
        badRow(pp::kDrawCropY, 3);     // the crop past the image's bottom
        badRow(pp::kDrawCropX, -1);    // left of it
        badRow(pp::kDrawShiftX, 1.5);  // half a pixel
        badRow(pp::kDrawShiftY, 1e12); // beyond any image
        badRow(pp::kDrawFlip, 0.5);    // neither 0 nor 1
        badRow(pp::kDrawBrightness, std::nan(""));
        badRow(pp::kDrawContrast, HUGE_VAL);
        {
            Tensor bad = draws.clone();
            bad.data<double>()[2 * pp::kDrawColumns + pp::kDrawIndex] = 5;
            const std::string msg =
                towers::test::messageOf([&] { ops->preprocessImages(d, src, bad.copyTo(dev), y); });
            QVERIFY2(msg.find("index 5") != std::string::npos, msg.c_str());
        }

        // The recipe.
        const auto badDesc = [&](const PreprocessDesc& bad, const char* words) {
            QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                     ops->preprocessImages(bad, src, draws.copyTo(dev), y));
            const std::string msg = towers::test::messageOf(
                [&] { ops->preprocessImages(bad, src, draws.copyTo(dev), y); });
            QVERIFY2(msg.find(words) != std::string::npos, msg.c_str());
        };
        PreprocessDesc bad = d;
        bad.channels = 0;
        badDesc(bad, "channels");
        bad.channels = pp::kMaxChannels + 1;
        badDesc(bad, "channels");
        bad = d;
        bad.height = 0;
        badDesc(bad, "0x4x2");
        bad = d;
        bad.normalization = 3;
        badDesc(bad, "normalization");
        bad.normalization = -1;
        badDesc(bad, "normalization");
        bad.normalization = 1;
        bad.mean = {0.5};
        bad.stddev = {0.2, 0.3};
        badDesc(bad, "means and stds");
        bad.mean = {0.5, 0.4};
        bad.stddev = {0.2, 0.0};
        badDesc(bad, "channel 1");
        bad.stddev = {0.2, 0.3};
        ops->preprocessImages(bad, src, draws.copyTo(dev), y); // mean and std: fine
        // An output larger than the source, another channel count.
        bad = d;
        bad.width = 7;
        QVERIFY_THROWS_EXCEPTION(ShapeError, ops->preprocessImages(bad, src, draws.copyTo(dev), y));
        bad = d;
        bad.channels = 3;
        QVERIFY_THROWS_EXCEPTION(ShapeError, ops->preprocessImages(bad, src, draws.copyTo(dev), y));

        // The tensors' shapes and dtypes.
        const Tensor rows = draws.copyTo(dev);
        const std::string msg = towers::test::messageOf([&] {
            ops->preprocessImages(d, source.reshaped({2, 30, 2}).copyTo(dev), rows, y);
        });
        QVERIFY2(msg.find("preprocessImages source") != std::string::npos, msg.c_str());
        QVERIFY_THROWS_EXCEPTION(
            ShapeError, ops->preprocessImages(d, source.reshaped({2, 30, 2}).copyTo(dev), rows, y));
        QVERIFY_THROWS_EXCEPTION(
            InvalidArgument,
            ops->preprocessImages(d, Tensor::zeros({2, 5, 6, 2}, DType::Float32).copyTo(dev), rows,
                                  y));
        QVERIFY_THROWS_EXCEPTION(
            ShapeError, ops->preprocessImages(
                            d, Tensor::zeros({0, 5, 6, 2}, DType::UInt8).copyTo(dev), rows, y));
        QVERIFY_THROWS_EXCEPTION(ShapeError, ops->preprocessImages(d, Tensor(), rows, y));
        QVERIFY_THROWS_EXCEPTION(
            ShapeError,
            ops->preprocessImages(d, src, Tensor::zeros({3, 7}, DType::Float64).copyTo(dev), y));
        QVERIFY_THROWS_EXCEPTION(
            InvalidArgument,
            ops->preprocessImages(d, src, draws.to(DType::Float32).copyTo(dev), y));
        // Where the backend runs.
        const Device elsewhere = dev.isHost() ? Device{DeviceKind::Cuda, 0} : Device::host();
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 ops->preprocessImages(d, source.copyTo(elsewhere), rows, y));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 ops->preprocessImages(d, src, draws.copyTo(elsewhere), y));
        // No draws, no images.
        Tensor none;
        ops->preprocessImages(
            d, src, Tensor::zeros({0, pp::kDrawColumns}, DType::Float64).copyTo(dev), none);
        QCOMPARE(none.shape(), Shape({0, 3, 4, 2}));
    }

    // The optimizer updates' skip flag (op_list.h): empty, or [1] of w's dtype where the backend
    // runs, checked alike everywhere; a set flag leaves w and the state as they are, one of 0
    // updates as no flag does; an empty flag is not copied by the staging adapter, a given one
    // is copied once to where the op runs. sgdUpdate(lr) is axpy(-lr) to the bit.
    void updatesCheckAndObeyTheirSkipFlag_data() { everyBackendRefusesTheSameCalls_data(); }
    void updatesCheckAndObeyTheirSkipFlag()
    {
        QFETCH(QString, backend);
        FakeDeviceScope scope;
        std::unique_ptr<Ops> ops = opsFor(backend);
        const Device dev = ops->device();
        QVERIFY(ops->supports(Op::sgdUpdate) && !isComposite(Op::sgdUpdate));
        QCOMPARE(std::string(opName(Op::sgdUpdate)), std::string("sgdUpdate"));

        UpdateState st(dev);
        const auto f32 = DType::Float32;
        const Device elsewhere = dev.isHost() ? Device{DeviceKind::Cuda, 0} : Device::host();
        struct Bad
        {
            const char* what;
            Tensor skip;
            bool shape; // ShapeError, else InvalidArgument
        };
        const Bad bad[] = {
            {"[2]", Tensor::zeros({2}, f32).copyTo(dev), true},
            {"a scalar", Tensor::zeros(Shape{}, f32).copyTo(dev), true},
            {"[1, 1]", Tensor::zeros({1, 1}, f32).copyTo(dev), true},
            {"float64", Tensor::zeros({1}, DType::Float64).copyTo(dev), false},
            {"int32", Tensor::zeros({1}, DType::Int32).copyTo(dev), false},
            {"elsewhere", Tensor::zeros({1}, f32).copyTo(elsewhere), false},
        };
        const std::vector<std::pair<const char*, std::function<void(const Tensor&)>>> calls = {
            {"sgdUpdate skip",
             [&](const Tensor& k) { ops->sgdUpdate(0.1, st.g, st.w, k, Tensor()); }},
            {"momentumUpdate skip",
             [&](const Tensor& k) {
                 ops->momentumUpdate(MomentumStep{}, st.g, st.buf, st.w, k, Tensor());
             }},
            {"adamUpdate skip",
             [&](const Tensor& k) {
                 ops->adamUpdate(AdamStep{}, st.g, st.m, st.v, st.w, k, Tensor());
             }},
            {"emaUpdate skip",
             [&](const Tensor& k) { ops->emaUpdate(0.3, st.w, st.shadow, k, Tensor()); }},
        };
        const auto before = st.onHost();
        for (const auto& [what, call] : calls)
            for (const Bad& b : bad) {
                const std::string row = std::string(what) + ", " + b.what;
                if (b.shape)
                    QVERIFY_THROWS_EXCEPTION(ShapeError, call(b.skip));
                else
                    QVERIFY_THROWS_EXCEPTION(InvalidArgument, call(b.skip));
                const std::string msg = towers::test::messageOf([&] { call(b.skip); });
                QVERIFY2(msg.find(what) != std::string::npos, (row + ": " + msg).c_str());
            }
        QVERIFY2(sameState(st.onHost(), before), "a refused call changed something");

        // A set flag (1, or anything not 0) changes nothing.
        for (const double flag : {1.0, -2.0, std::nan("")}) {
            st.update(*ops, Tensor::filled({1}, f32, flag).copyTo(dev));
            QVERIFY2(sameState(st.onHost(), before), qPrintable(QString::number(flag)));
        }
        // A flag of 0 updates exactly as no flag does.
        UpdateState none(dev), zero(dev);
        none.update(*ops, Tensor());
        zero.update(*ops, Tensor::zeros({1}, f32).copyTo(dev));
        QVERIFY(sameState(none.onHost(), zero.onHost()));
        QVERIFY(!sameState(none.onHost(), before));
        for (std::size_t i = 0; i < before.size(); ++i)
            QVERIFY2(!sameBytes(none.onHost()[i], before[i]), qPrintable(QString::number(i)));

        // Plain SGD: axpy(-lr)'s bits, with or without a flag of 0.
        Tensor a = ramp({3, 5}).copyTo(dev), b = a.clone(), c = a.clone();
        const Tensor g = Tensor::filled({3, 5}, f32, 0.37).copyTo(dev);
        ops->axpy(-0.013, g, a);
        ops->sgdUpdate(0.013, g, b, Tensor(), Tensor());
        ops->sgdUpdate(0.013, g, c, Tensor::zeros({1}, f32).copyTo(dev), Tensor());
        QVERIFY(sameBytes(a, b));
        QVERIFY(sameBytes(a, c));
        QVERIFY(!sameBytes(a, ramp({3, 5})));

        if (backend == "fake") {
            // Staged from the stand-in GPU: the flag is copied once to where oneDNN runs; an
            // empty one is not copied at all.
            const std::int64_t c0 = scope.memory().copies();
            ops->sgdUpdate(0.013, g, b, Tensor(), Tensor());
            const std::int64_t c1 = scope.memory().copies();
            ops->sgdUpdate(0.013, g, b, Tensor::zeros({1}, f32).copyTo(dev), Tensor());
            const std::int64_t c2 = scope.memory().copies();
            // The second call: one copy to put the flag on the device, one to stage it.
            QCOMPARE(c2 - c1, (c1 - c0) + 2);
        }
    }

    // A step's scalars (StepScalars): given, the updates and dropout read their learning rate,
    // first step, bias corrections, keep and step there, to the bit of the same values passed as
    // host arguments; checked alike everywhere (Float64 [kCount] where the backend runs; values
    // in host memory in range).
    void stepScalarsStandInForTheHostArguments_data() { everyBackendRefusesTheSameCalls_data(); }
    void stepScalarsStandInForTheHostArguments()
    {
        QFETCH(QString, backend);
        FakeDeviceScope scope;
        std::unique_ptr<Ops> ops = opsFor(backend);
        const Device dev = ops->device();
        const auto f64 = DType::Float64;

        StepScalars v;
        v.values[StepScalars::LearningRate] = 0.0625;
        v.values[StepScalars::MomentumFirst] = 0;
        const AdamCorrections k = adamCorrections(0.9, 0.999, 5);
        v.values[StepScalars::AdamCorrection1] = k.first;
        v.values[StepScalars::AdamCorrection2Sqrt] = k.secondSqrt;
        v.values[StepScalars::EmaKeep] = 0.25;
        v.values[StepScalars::DropoutStep] = 12;
        const auto scalarsOf = [&](const StepScalars& values) {
            Tensor t = Tensor::zeros(Shape{StepScalars::kCount}, f64);
            std::memcpy(t.raw(), values.values, sizeof values.values);
            return t.copyTo(dev);
        };
        const Tensor scalars = scalarsOf(v);

        // The same updates with the values as host arguments, and with other host arguments
        // and the scalars.
        UpdateState host(dev), device(dev);
        const auto run = [&](UpdateState& st, bool fromScalars) {
            const Tensor& sc = fromScalars ? scalars : Tensor();
            MomentumStep ms;
            ms.lr = fromScalars ? 9.0 : 0.0625;
            ms.first = fromScalars;
            AdamStep as;
            as.lr = fromScalars ? 9.0 : 0.0625;
            as.step = fromScalars ? 1 : 5;
            for (int i = 0; i < 2; ++i) {
                ops->sgdUpdate(fromScalars ? 9.0 : 0.0625, st.g, st.w, Tensor(), sc);
                ops->momentumUpdate(ms, st.g, st.buf, st.w, Tensor(), sc);
                ops->adamUpdate(as, st.g, st.m, st.v, st.w, Tensor(), sc);
                ops->emaUpdate(fromScalars ? 1.0 : 0.25, st.w, st.shadow, Tensor(), sc);
            }
        };
        const auto before = host.onHost();
        run(host, false);
        run(device, true);
        QVERIFY(sameState(host.onHost(), device.onHost()));
        for (std::size_t i = 0; i < before.size(); ++i)
            QVERIFY2(!sameBytes(host.onHost()[i], before[i]), qPrintable(QString::number(i)));

        // Dropout: the seed mixed with the scalars' step is the host's dropoutSeed.
        const Tensor x = ramp({4, 33}).copyTo(dev);
        Tensor y1, m1, y2, m2, y3, m3;
        ops->dropoutForward(x, 0.5, dropoutSeed(77, 12), y1, m1, Tensor());
        ops->dropoutForward(x, 0.5, 77, y2, m2, scalars);
        ops->dropoutForward(x, 0.5, 77, y3, m3, Tensor());
        QVERIFY(sameBytes(y1, y2) && sameBytes(m1, m2));
        QVERIFY(!sameBytes(m1, m3));

        // Refused alike: the wrong dtype, shape or device; values out of range (in host memory).
        const Device elsewhere = dev.isHost() ? Device{DeviceKind::Cuda, 0} : Device::host();
        const auto call = [&](const Tensor& sc) {
            ops->sgdUpdate(0.1, host.g, host.w, Tensor(), sc);
        };
        QVERIFY_THROWS_EXCEPTION(
            InvalidArgument,
            call(Tensor::zeros({StepScalars::kCount}, DType::Float32).copyTo(dev)));
        QVERIFY_THROWS_EXCEPTION(ShapeError, call(Tensor::zeros({2}, f64).copyTo(dev)));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 call(Tensor::zeros({StepScalars::kCount}, f64).copyTo(elsewhere)));
        const std::string msg = towers::test::messageOf(
            [&] { call(Tensor::zeros({StepScalars::kCount}, f64).copyTo(elsewhere)); });
        QVERIFY2(msg.find("sgdUpdate step scalars") != std::string::npos, msg.c_str());
        if (dev.isHost()) {
            for (const auto& [index, value] :
                 std::vector<std::pair<int, double>>{{StepScalars::LearningRate, -1},
                                                     {StepScalars::LearningRate, std::nan("")},
                                                     {StepScalars::MomentumFirst, 0.5},
                                                     {StepScalars::AdamCorrection1, 0},
                                                     {StepScalars::AdamCorrection2Sqrt, 2},
                                                     {StepScalars::EmaKeep, 1.5},
                                                     {StepScalars::DropoutStep, 2.5}}) {
                StepScalars bad = v;
                bad.values[index] = value;
                QVERIFY_THROWS_EXCEPTION(InvalidArgument, call(scalarsOf(bad)));
            }
        }
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
