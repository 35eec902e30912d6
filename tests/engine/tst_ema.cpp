// The exponential moving average of the weights (TensorFlow's ExponentialMovingAverage with
// num_updates): values computed by hand, the split of the work between towers, the update with
// the backends' ops and its skip flag, the swap used for evaluation, and its state for checkpoints.
#include <QtTest>

#include <cstring>

#include "engine/cpu/onednn_ops.h"
#include "engine/optim/ema.h"
#include "gradcheck.h"

using namespace towers::engine;
using namespace towers::test;

namespace {

struct Params
{
    std::vector<Parameter> storage;
    std::vector<Parameter*> list;
    explicit Params(std::uint64_t seed)
    {
        Rng rng(seed);
        storage.push_back({"a.weight", randomTensor({5, 7}, DType::Float64, rng), {}, true, 0});
        storage.push_back({"a.bias", randomTensor({5}, DType::Float64, rng), {}, true, 0});
        storage.push_back({"bn.running_var", randomTensor({3}, DType::Float64, rng), {}, false, 0});
        storage.push_back({"b.weight", randomTensor({70000}, DType::Float32, rng), {}, true, 0});
        for (auto& p : storage) list.push_back(&p);
    }
};

} // namespace

class TestEma : public QObject
{
    Q_OBJECT
private slots:
    void effectiveDecay()
    {
        Ema ema(0.9999);
        QCOMPARE(ema.effectiveDecay(0), 0.1);
        QCOMPARE(ema.effectiveDecay(1), 2.0 / 11.0);
        QCOMPARE(ema.effectiveDecay(1000), 1001.0 / 1010.0);
        QCOMPARE(ema.effectiveDecay(100000000), 0.9999);
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, Ema(1.0));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, Ema(0.0));
    }

    // shadow_k = d_k * shadow_{k-1} + (1 - d_k) * value_k, computed independently in double.
    void handComputed()
    {
        Params ps(1);
        Ema ema(0.5);
        ema.reset(ps.list);
        std::vector<double> expect;
        for (std::int64_t i = 0; i < ps.storage[0].value.numel(); ++i)
            expect.push_back(ps.storage[0].value.at(i));
        Rng rng(3);
        for (std::int64_t n = 1; n <= 4; ++n) {
            for (auto& p : ps.storage)
                p.value = randomTensor(p.value.shape(), p.value.dtype(), rng);
            const double d = std::min(0.5, (1.0 + n) / (10.0 + n));
            for (std::size_t i = 0; i < expect.size(); ++i)
                expect[i] = d * expect[i] + (1 - d) * ps.storage[0].value.at(std::int64_t(i));
            ema.update(ps.list, n);
        }
        const Tensor& avg = ema.average("a.weight");
        for (std::size_t i = 0; i < expect.size(); ++i)
            QVERIFY(std::fabs(avg.at(std::int64_t(i)) - expect[i]) < 1e-14);
        QVERIFY_THROWS_EXCEPTION(UnknownName,
                                 ema.average("bn.running_var")); // buffers are not averaged
    }

    // Towers share the work by ranges; the result is the same bytes as one update.
    void partsEqualWhole()
    {
        Params ps(2);
        Ema whole(0.99), split(0.99);
        whole.reset(ps.list);
        split.reset(ps.list);
        Rng rng(4);
        for (auto& p : ps.storage) p.value = randomTensor(p.value.shape(), p.value.dtype(), rng);
        whole.update(ps.list, 7);
        for (int part = 0; part < 3; ++part) split.update(ps.list, 7, part, 3);
        for (const auto* p : ps.list) {
            if (!p->trainable) continue;
            QCOMPARE(maxAbsDiff(whole.average(p->name), split.average(p->name)), 0.0);
        }
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, split.update(ps.list, 7, 3, 3));
    }

    void swapRestores()
    {
        Params ps(5);
        Ema ema(0.9);
        ema.reset(ps.list);
        Rng rng(6);
        const Tensor live = randomTensor(ps.storage[0].value.shape(), DType::Float64, rng);
        ps.storage[0].value.copyFrom(live);
        ema.update(ps.list, 3);
        {
            EmaSwap swap(ema, ps.list);
            QCOMPARE(maxAbsDiff(ps.storage[0].value, ema.average("a.weight")), 0.0);
        }
        QCOMPARE(maxAbsDiff(ps.storage[0].value, live), 0.0);
    }

    // The update with the backends' ops (a GPU tower's path): a set skip flag leaves every
    // average as it is, bit for bit; a flag of 0 updates as no flag does; on the reference in
    // float64 and oneDNN in float32.
    void skipFlagKeepsTheAverages_data()
    {
        QTest::addColumn<bool>("f64");
        QTest::newRow("f32 onednn") << false;
        QTest::newRow("f64 reference") << true;
    }
    void skipFlagKeepsTheAverages()
    {
        QFETCH(bool, f64);
        const DType dtype = f64 ? DType::Float64 : DType::Float32;
        std::unique_ptr<Ops> ops = f64 ? makeReferenceOps() : cpu::makeOneDnnOps();
        Rng rng(8);
        std::vector<Parameter> storage;
        storage.push_back({"a.weight", randomTensor({5, 7}, dtype, rng), {}, true, 0});
        storage.push_back({"bn.running_var", randomTensor({3}, dtype, rng), {}, false, 0});
        storage.push_back({"b.weight", randomTensor({70000}, dtype, rng), {}, true, 0});
        std::vector<Parameter*> list;
        for (auto& p : storage) list.push_back(&p);
        Ema skipped(0.9), cleared(0.9), plain(0.9);
        for (Ema* e : {&skipped, &cleared, &plain}) e->reset(list);
        std::vector<Tensor> initial; // what reset() copied
        for (auto& p : storage) {
            initial.push_back(p.value.clone());
            p.value = randomTensor(p.value.shape(), dtype, rng);
        }
        skipped.update(*ops, list, 3, Tensor::filled({1}, dtype, 1.0));
        cleared.update(*ops, list, 3, Tensor::zeros({1}, dtype));
        plain.update(*ops, list, 3);
        for (const std::size_t i : {std::size_t(0), std::size_t(2)}) {
            const std::string& name = storage[i].name;
            const Tensor& kept = skipped.average(name);
            QCOMPARE(kept.dtype(), dtype);
            QCOMPARE(std::memcmp(kept.raw(), initial[i].raw(), kept.bytes()), 0);
            QCOMPARE(maxAbsDiff(cleared.average(name), plain.average(name)), 0.0);
            QVERIFY(maxAbsDiff(plain.average(name), kept) > 0);
        }
        // A flag of another dtype than the averages' is refused.
        const DType other = f64 ? DType::Float32 : DType::Float64;
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 skipped.update(*ops, list, 4, Tensor::zeros({1}, other)));
    }

    void stateRoundTrip()
    {
        Params ps(7);
        Ema ema(0.9);
        ema.reset(ps.list);
        const auto state = ema.state();
        QCOMPARE(state.size(), std::size_t(3));
        QCOMPARE(state[0].first, std::string("ema.a.weight"));
        Ema other(0.9);
        other.loadState(state, ps.list);
        QCOMPARE(maxAbsDiff(other.average("b.weight"), ema.average("b.weight")), 0.0);
        NamedTensors missing(state.begin(), state.end() - 1);
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, other.loadState(missing, ps.list));
        NamedTensors extra = state;
        extra.emplace_back("ema.c.weight", Tensor::zeros({1}, DType::Float32));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, other.loadState(extra, ps.list));
        NamedTensors wrong = state;
        wrong[1].second = Tensor::zeros({4}, DType::Float64);
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, other.loadState(wrong, ps.list));
    }
};

QTEST_APPLESS_MAIN(TestEma)
#include "tst_ema.moc"
