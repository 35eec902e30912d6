// The composite training calls (conv2dForwardTraining + conv2dBackward, linearBackward) and every
// convolution algorithm of the oneDNN backend against the reference backend, whose composite calls
// are the plain sequences of single-step calls (engine/ops/ops.cpp). Each convolution case names
// the algorithm it is meant to exercise, checked on CPUs where that algorithm exists, so that the
// oneDNN Winograd, Towers' Winograd F(2x2, 5x5) and the direct path with oneDNN's blocked backward
// layouts are all compared, with their saved state, their fused ReLU mask and their caches reused
// across rounds with new weights.
#include <QtTest>

#include <memory>
#include <string>

#include "engine/cpu/cpu_info.h"
#include "engine/cpu/onednn_ops.h"
#include "engine/ops/ops.h"
#include "gradcheck.h"

using namespace towers::engine;
using towers::test::maxAbsDiff;
using towers::test::normalisedError;
using towers::test::randomTensor;

namespace {

struct ConvCase
{
    ConvCase() = default;
    ConvCase(Shape x_, std::int64_t outC_, int k_ = 3, int stride_ = 1,
             Padding padding_ = Padding::Same, ExplicitPads pads_ = {})
        : x(std::move(x_)), outC(outC_), k(k_), stride(stride_), padding(padding_), pads(pads_)
    {
    }
    Shape x;
    std::int64_t outC = 1;
    int k = 3, stride = 1;
    Padding padding = Padding::Same;
    ExplicitPads pads;
    Conv2dDesc desc() const { return makeConv2dDesc(x, outC, k, k, stride, stride, padding, pads); }
};

constexpr double kTolerance = 1e-5;

// Whether oneDNN's kernels run on AVX-512 here: the instruction set oneDNN uses, which
// ONEDNN_MAX_CPU_ISA may hold below the CPU's.
bool cpuHasAvx512()
{
    return cpu::cpuInfo().isa.rfind("avx512", 0) == 0;
}

} // namespace

Q_DECLARE_METATYPE(ConvCase)

#define TOWERS_COMPARE(got, want)                                                                  \
    do {                                                                                           \
        const double err_ = normalisedError(got, want);                                            \
        QVERIFY2(err_ < kTolerance,                                                                \
                 qPrintable(QStringLiteral(#got ": normalised error %1").arg(err_)));              \
    } while (false)

class TestOpsFused : public QObject
{
    Q_OBJECT

    std::unique_ptr<Ops> m_ref = makeReferenceOps();
    std::unique_ptr<Ops> m_dnn;

private slots:
    void initTestCase()
    {
        // oneDNN's choice of its Winograd depends on the thread count; fix it.
        cpu::setCpuThreads(2);
        m_dnn = cpu::makeOneDnnOps();
    }

    void convolution_data()
    {
        QTest::addColumn<ConvCase>("conv");
        QTest::addColumn<bool>("bias");
        QTest::addColumn<bool>("relu");
        QTest::addColumn<QString>("algorithm"); // expected on AVX-512 CPUs
        const QString direct = QStringLiteral("direct"), w3 = QStringLiteral("winograd 3x3"),
                      w5 = QStringLiteral("winograd 5x5");
        QTest::newRow("direct 3x3 C3, relu") << ConvCase{{2, 7, 6, 3}, 4} << true << true << direct;
        QTest::newRow("direct 5x5 s2 C5, no bias")
            << ConvCase{{2, 9, 8, 5}, 3, 5, 2} << false << false << direct;
        QTest::newRow("direct first layer C3 to 64, relu")
            << ConvCase{{2, 12, 12, 3}, 64, 5} << true << true << direct;
        QTest::newRow("direct C20, partial channel block, relu")
            << ConvCase{{2, 6, 6, 20}, 20, 3} << true << true << direct;
        QTest::newRow("winograd 5x5, tutorial conv2, relu")
            << ConvCase{{2, 12, 12, 64}, 64, 5} << true << true << w5;
        QTest::newRow("winograd 5x5 valid 9x7, K48")
            << ConvCase{{3, 9, 7, 16}, 48, 5, 1, Padding::Valid} << true << false << w5;
        QTest::newRow("winograd 5x5 explicit t1 l3 b2 r0, K80, relu, no bias")
            << ConvCase{{2, 8, 9, 32}, 80, 5, 1, Padding::Explicit, ExplicitPads{1, 3, 2, 0}}
            << false << true << w5;
        QTest::newRow("winograd 5x5, 225 tiles in two chunks")
            << ConvCase{{1, 30, 30, 16}, 16, 5} << true << true << w5;
        QTest::newRow("winograd 3x3 same 16x16 C64, relu")
            << ConvCase{{16, 16, 16, 64}, 64, 3} << true << true << w3;
        QTest::newRow("winograd 3x3 valid 12x12 C32 to 80")
            << ConvCase{{32, 12, 12, 32}, 80, 3, 1, Padding::Valid} << true << false << w3;
    }
    void convolution()
    {
        QFETCH(ConvCase, conv);
        QFETCH(bool, bias);
        QFETCH(bool, relu);
        QFETCH(QString, algorithm);
        const Conv2dDesc d = conv.desc();
        const Activation act = relu ? Activation::Relu : Activation::None;
        const QString got = QString::fromStdString(cpu::convolutionAlgorithm(*m_dnn, d));
        if (cpuHasAvx512())
            QCOMPARE(got, algorithm);
        else
            QVERIFY(got == QStringLiteral("direct") || got == algorithm);

        Rng rng(31);
        const DType f32 = DType::Float32;
        Tensor saved;
        // Twice: the second round reuses every cached primitive, buffer and the saved state's
        // storage with new data and new weights.
        for (int round = 0; round < 2; ++round) {
            const Tensor x = randomTensor(d.inputShape(), f32, rng);
            const Tensor w = randomTensor(d.weightShape(), f32, rng, -0.2, 0.2);
            const Tensor b = bias ? randomTensor({d.outChannels}, f32, rng) : Tensor();
            const Tensor dy = randomTensor(d.outputShape(), f32, rng);
            Tensor* noDb = nullptr;

            Tensor y0, dx0, dw0, db0;
            m_ref->conv2dForward(d, x, w, b, y0, act);
            m_ref->conv2dBackward(d, x, w, y0, dy, act, Tensor(), &dx0, dw0, bias ? &db0 : noDb);

            Tensor y1, dx1, dw1, db1;
            m_dnn->conv2dForwardTraining(d, x, w, b, y1, act, saved);
            TOWERS_COMPARE(y1, y0);
            // Both backends mask with the same y: where the two forwards round a value near
            // zero to opposite signs, the masks would differ by a whole element of dy.
            m_dnn->conv2dBackward(d, x, w, y0, dy, act, saved, &dx1, dw1, bias ? &db1 : noDb);
            QCOMPARE(dx1.shape(), d.inputShape());
            QCOMPARE(dw1.shape(), d.weightShape());
            TOWERS_COMPARE(dx1, dx0);
            TOWERS_COMPARE(dw1, dw0);
            if (bias) TOWERS_COMPARE(db1, db0);

            // Without the saved state (as after an evaluation forward) and without dx: the same
            // numbers, bit for bit.
            Tensor dx2, dw2, db2, dw3, db3;
            m_dnn->conv2dBackward(d, x, w, y0, dy, act, Tensor(), &dx2, dw2, bias ? &db2 : noDb);
            QCOMPARE(maxAbsDiff(dx2, dx1), 0.0);
            QCOMPARE(maxAbsDiff(dw2, dw1), 0.0);
            m_dnn->conv2dBackward(d, x, w, y0, dy, act, saved, nullptr, dw3, bias ? &db3 : noDb);
            QCOMPARE(maxAbsDiff(dw3, dw1), 0.0);
            if (bias) QCOMPARE(maxAbsDiff(db3, db1), 0.0);

            // The single-direction calls take the same algorithm.
            Tensor g0;
            if (relu)
                m_ref->reluBackward(y0, dy, g0);
            else
                g0 = dy;
            Tensor y4, dx4, dw4, db4;
            m_dnn->conv2dForward(d, x, w, b, y4, act);
            TOWERS_COMPARE(y4, y0);
            m_dnn->conv2dBackwardData(d, g0, w, dx4);
            TOWERS_COMPARE(dx4, dx0);
            m_dnn->conv2dBackwardWeights(d, x, g0, dw4, bias ? &db4 : noDb);
            TOWERS_COMPARE(dw4, dw0);
            if (bias) TOWERS_COMPARE(db4, db0);
        }
    }

    // The saved state is checked against the convolution it came from.
    void convolutionSavedStateMismatch()
    {
        Rng rng(32);
        const DType f32 = DType::Float32;
        const auto a = makeConv2dDesc({16, 16, 16, 64}, 64, 3, 3, 1, 1, Padding::Same);
        const auto b = makeConv2dDesc({2, 12, 12, 64}, 64, 5, 5, 1, 1, Padding::Same);
        const Tensor xa = randomTensor(a.inputShape(), f32, rng),
                     wa = randomTensor(a.weightShape(), f32, rng);
        const Tensor xb = randomTensor(b.inputShape(), f32, rng),
                     wb = randomTensor(b.weightShape(), f32, rng);
        Tensor ya, yb, savedA, savedB, dx, dw;
        m_dnn->conv2dForwardTraining(a, xa, wa, Tensor(), ya, Activation::None, savedA);
        m_dnn->conv2dForwardTraining(b, xb, wb, Tensor(), yb, Activation::None, savedB);
        QVERIFY(!savedA.empty());
        QVERIFY_THROWS_EXCEPTION(
            InvalidArgument,
            m_dnn->conv2dBackward(b, xb, wb, yb, yb, Activation::None, savedA, &dx, dw, nullptr));
        QVERIFY_THROWS_EXCEPTION(
            InvalidArgument,
            m_dnn->conv2dBackward(a, xa, wa, ya, ya, Activation::None, savedB, &dx, dw, nullptr));
        Tensor garbage = Tensor::zeros(savedA.shape(), DType::UInt8);
        QVERIFY_THROWS_EXCEPTION(
            InvalidArgument,
            m_dnn->conv2dBackward(a, xa, wa, ya, ya, Activation::None, garbage, &dx, dw, nullptr));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 m_dnn->conv2dBackward(a, xa, wa, ya, ya, Activation::None,
                                                       Tensor::zeros({8}, f32), &dx, dw, nullptr));
        // The right state still works after the failures.
        m_dnn->conv2dBackward(a, xa, wa, ya, ya, Activation::None, savedA, &dx, dw, nullptr);
        QCOMPARE(dw.shape(), a.weightShape());
    }

    void linear_data()
    {
        QTest::addColumn<bool>("bias");
        QTest::addColumn<bool>("relu");
        QTest::addColumn<bool>("wantDx");
        QTest::newRow("bias, relu, dx") << true << true << true;
        QTest::newRow("bias, relu, no dx") << true << true << false;
        QTest::newRow("no bias, relu, dx") << false << true << true;
        QTest::newRow("bias, no activation, dx") << true << false << true;
    }
    void linear()
    {
        QFETCH(bool, bias);
        QFETCH(bool, relu);
        QFETCH(bool, wantDx);
        const Activation act = relu ? Activation::Relu : Activation::None;
        Rng rng(33);
        const DType f32 = DType::Float32;
        for (int round = 0; round < 2; ++round) {
            const Tensor x = randomTensor({6, 37}, f32, rng);
            const Tensor w = randomTensor({19, 37}, f32, rng);
            const Tensor b = bias ? randomTensor({19}, f32, rng) : Tensor();
            const Tensor dy = randomTensor({6, 19}, f32, rng);
            Tensor y, dx0, dw0, db0, dx1, dw1, db1;
            Tensor* noDb = nullptr;
            m_ref->linearForward(x, w, b, y, act);
            // The reference's composite call is the plain sequence; compare it with that too.
            Tensor g, dxSeq, dwSeq, dbSeq;
            if (relu)
                m_ref->reluBackward(y, dy, g);
            else
                g = dy;
            m_ref->linearBackwardWeights(x, g, dwSeq, bias ? &dbSeq : noDb);
            m_ref->linearBackwardData(g, w, dxSeq);
            m_ref->linearBackward(x, w, y, dy, act, wantDx ? &dx0 : nullptr, dw0,
                                  bias ? &db0 : noDb);
            QCOMPARE(maxAbsDiff(dw0, dwSeq), 0.0);
            if (wantDx) QCOMPARE(maxAbsDiff(dx0, dxSeq), 0.0);
            m_dnn->linearBackward(x, w, y, dy, act, wantDx ? &dx1 : nullptr, dw1,
                                  bias ? &db1 : noDb);
            TOWERS_COMPARE(dw1, dw0);
            if (bias) TOWERS_COMPARE(db1, db0);
            if (wantDx)
                TOWERS_COMPARE(dx1, dx0);
            else
                QVERIFY(dx1.empty());
        }
    }
};

QTEST_APPLESS_MAIN(TestOpsFused)
#include "tst_ops_fused.moc"
