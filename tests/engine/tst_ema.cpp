// The exponential moving average of the weights (TensorFlow's ExponentialMovingAverage with
// num_updates): values computed by hand, the split of the work between towers, the swap used for
// evaluation, and its state for checkpoints.
#include <QtTest>

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
