// Towers' Winograd convolutions, F(2x2, 5x5) (engine/cpu/winograd_5x5.h) and F(4x4, 3x3)
// (engine/cpu/winograd_3x3.h), on every Highway target they are compiled for, each forced in turn
// (QSKIP for those this CPU cannot run): forward (bias, fused ReLU), backward data and backward
// weights (with and without the fused ReLU's mask and the bias gradient) against the reference
// backend, by the normalised error the oneDNN convolution tests use; odd sizes, partial tiles,
// batch 1, chunks of tiles that span images and split rows, explicit asymmetric pads, channel
// counts that are and are not multiples of each target's vector, mnist-convnet's conv2 and conv3
// (backward data 512 channels deep). Then per target: the algorithm the oneDNN backend's plan
// picks (Towers' Winograd only where it beats oneDNN's direct kernels, and the implementation it
// reports), that plan's whole training path against the reference, and central differences of
// the oneDNN backend's conv op.
#include <QtTest>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/cpu/cores.h"
#include "engine/cpu/cpu_info.h"
#include "engine/cpu/onednn_ops.h"
#include "engine/cpu/primitive_implementations.h"
#include "engine/cpu/simd_target.h" // simdTargets, ForcedSimdTarget: every Highway kernel
#include "engine/cpu/winograd_3x3.h"
#include "engine/cpu/winograd_5x5.h"
#include "engine/ops/ops.h"
#include "gradcheck.h"
#include "simd_targets.h"

using namespace towers::engine;
using towers::test::checkGradient;
using towers::test::dot;
using towers::test::normalisedError;
using towers::test::randomTensor;

namespace {

struct WinoCase
{
    Shape x;
    std::int64_t outC = 1;
    Padding padding = Padding::Same;
    ExplicitPads pads;
    bool bias = true, relu = false;
    int k = 5; // kernel size: 5 (F(2x2, 5x5)) or 3 (F(4x4, 3x3))
    Conv2dDesc desc() const { return makeConv2dDesc(x, outC, k, k, 1, 1, padding, pads); }
};

// Towers' Winograd for a k x k kernel, and its implementation's name on `target`.
std::unique_ptr<cpu::WinogradConv> makeWinograd(const Conv2dDesc& d)
{
    if (d.win.kh == 3) return std::make_unique<cpu::Winograd3x3>(d);
    return std::make_unique<cpu::Winograd5x5>(d);
}
QString implementationName(int k, const QString& target)
{
    return QStringLiteral("towers:winograd%1x%1:%2").arg(k).arg(target);
}

// The bound tst_ops_window and tst_ops_fused hold oneDNN's convolutions to.
constexpr double kTolerance = 1e-5;
// Central differences of a float32 convolution: it is linear, so the step only sets how much the
// outputs' rounding (~1e-7 relative) weighs against the slope; at a step of 4 it stays near 1e-6
// of it (and below the checker's kink test), while a wrong term is orders of magnitude larger.
constexpr double kStep = 4;
constexpr double kGradTolerance = 1e-4;
constexpr std::int64_t kElements = 64; // sampled per tensor

// Whether the plans take Towers' Winograd for a convolution it pays for (the tutorial's conv2,
// 64 -> 64; 3x3 shapes with channels and output pixels enough, for which oneDNN 2.6 has no
// Winograd of its own) with Highway on `target` and oneDNN on `onednnIsa`: where its arithmetic
// per instruction (lanes, twice with FMA) is at least half that of oneDNN's direct kernels
// (conv_plan.h), as measured.
bool winogradExpected(const std::string& target, const std::string& onednnIsa)
{
    const int wino = target.rfind("AVX3", 0) == 0            ? 32
                     : target == "AVX2"                      ? 16
                     : target == "SSE4" || target == "SSSE3" ? 4
                                                             : 1;
    const int direct = onednnIsa.rfind("avx512", 0) == 0 ? 32
                       : onednnIsa.rfind("avx2", 0) == 0 ? 16
                       : onednnIsa == "avx"              ? 8
                       : onednnIsa == "sse41"            ? 4
                                                         : 0;
    return 2 * wino >= direct;
}

// Values in [-1, 1) on a grid of 1/1024, so that x +- kStep (and half of it) is exact in float32.
Tensor gridTensor(const Shape& shape, Rng& rng)
{
    Tensor t = randomTensor(shape, DType::Float64, rng);
    double* p = t.data<double>();
    for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = std::round(p[i] * 1024) / 1024;
    return t;
}

} // namespace

Q_DECLARE_METATYPE(WinoCase)

#define TOWERS_COMPARE(got, want)                                                                  \
    do {                                                                                           \
        const double err_ = normalisedError(got, want);                                            \
        QVERIFY2(err_ < kTolerance,                                                                \
                 qPrintable(QStringLiteral(#got ": normalised error %1").arg(err_)));              \
    } while (false)

#define TOWERS_SKIP_UNLESS_SUPPORTED()                                                             \
    TOWERS_RUN_ON_TARGET();                                                                        \
    QCOMPARE(QString::fromStdString(cpu::Winograd5x5::targetName()), targetName);                  \
    QCOMPARE(QString::fromStdString(cpu::Winograd3x3::targetName()), targetName)

class TestWinograd : public QObject
{
    Q_OBJECT

    std::unique_ptr<Ops> m_ref = makeReferenceOps();

    // One round of a case: random inputs and what the reference makes of them.
    struct Expected
    {
        Tensor x, w, b, dy;
        Tensor y, dx, dw, db; // forward (with the case's ReLU), backward from g = dy
        // Backward through a fused ReLU: g = dy where mask > 0, the mask the ReLU's output (the
        // reference's, as a training step masks with its own forward's y).
        Tensor mask, dxMasked, dwMasked, dbMasked;
    };
    // Two rounds per case, computed once for all targets.
    std::map<QString, std::vector<Expected>> m_expected;

    const std::vector<Expected>& expected(const QString& name, const WinoCase& conv)
    {
        auto& rounds = m_expected[name];
        if (!rounds.empty()) return rounds;
        const Conv2dDesc d = conv.desc();
        const DType f32 = DType::Float32;
        Rng rng(41);
        for (int round = 0; round < 2; ++round) {
            Expected e;
            e.x = randomTensor(d.inputShape(), f32, rng);
            e.w = randomTensor(d.weightShape(), f32, rng);
            if (conv.bias) e.b = randomTensor({d.outChannels}, f32, rng);
            e.dy = randomTensor(d.outputShape(), f32, rng);
            m_ref->conv2dForward(d, e.x, e.w, e.b, e.y,
                                 conv.relu ? Activation::Relu : Activation::None);
            m_ref->conv2dBackwardData(d, e.dy, e.w, e.dx);
            m_ref->conv2dBackwardWeights(d, e.x, e.dy, e.dw, &e.db);
            Tensor g;
            m_ref->conv2dForward(d, e.x, e.w, e.b, e.mask, Activation::Relu);
            m_ref->reluBackward(e.mask, e.dy, g);
            m_ref->conv2dBackwardData(d, g, e.w, e.dxMasked);
            m_ref->conv2dBackwardWeights(d, e.x, g, e.dwMasked, &e.dbMasked);
            rounds.push_back(std::move(e));
        }
        return rounds;
    }

    static void addTargetColumns()
    {
        QTest::addColumn<qint64>("target");
        QTest::addColumn<QString>("targetName");
        QTest::addColumn<bool>("supported");
    }

private slots:
    void initTestCase()
    {
        cpu::setCpuThreads(2);
        QVERIFY(cpu::simdTargets().size() >= 2); // at least the best target and the baseline
    }

    // --- the kernels themselves, whatever the plans would choose ---

    void kernels_data()
    {
        addTargetColumns();
        QTest::addColumn<QString>("caseName");
        QTest::addColumn<WinoCase>("conv");
        const std::pair<const char*, WinoCase> cases[] = {
            {"tutorial conv2 at batch 2, bias, relu",
             {{2, 12, 12, 64}, 64, Padding::Same, {}, true, true}},
            {"batch 1, odd 7x9 (partial tiles), C20 K24, bias",
             {{1, 7, 9, 20}, 24, Padding::Same, {}, true, false}},
            {"explicit pads t1 l3 b2 r0, C3 K5, relu",
             {{2, 8, 9, 3}, 5, Padding::Explicit, {1, 3, 2, 0}, false, true}},
            {"explicit pads t4 l0 b1 r3, C32 K8, no bias",
             {{1, 6, 7, 32}, 8, Padding::Explicit, {4, 0, 1, 3}, false, false}},
            {"valid 9x8, C17 K33, bias, relu", {{3, 9, 8, 17}, 33, Padding::Valid, {}, true, true}},
            {"valid 5x5 to 1x1, C8 K40, bias", {{2, 5, 5, 8}, 40, Padding::Valid, {}, true, false}},
            {"same 30x30, 225 tiles in two chunks, C16 K16, relu",
             {{1, 30, 30, 16}, 16, Padding::Same, {}, true, true}},
            {"3x3: mnist conv2 at batch 2, valid 12x12, C64 K256, bias, relu",
             {{2, 12, 12, 64}, 256, Padding::Valid, {}, true, true, 3}},
            {"3x3: mnist conv3 at batch 1, valid 10x10, C256 K512, bias, relu",
             {{1, 10, 10, 256}, 512, Padding::Valid, {}, true, true, 3}},
            {"3x3: batch 1, odd 7x9 (partial tiles), C20 K24, bias",
             {{1, 7, 9, 20}, 24, Padding::Same, {}, true, false, 3}},
            {"3x3: explicit pads t2 l0 b1 r2, C3 K5, relu",
             {{2, 8, 9, 3}, 5, Padding::Explicit, {2, 0, 1, 2}, false, true, 3}},
            {"3x3: explicit pads t0 l2 b2 r1, C32 K8, no bias",
             {{1, 5, 6, 32}, 8, Padding::Explicit, {0, 2, 2, 1}, false, false, 3}},
            {"3x3: valid 9x8, batch 3, C17 K33, bias, relu",
             {{3, 9, 8, 17}, 33, Padding::Valid, {}, true, true, 3}},
            {"3x3: valid 3x3 to 1x1, C8 K40, bias",
             {{2, 3, 3, 8}, 40, Padding::Valid, {}, true, false, 3}},
            {"3x3: 9 images of 6x6, chunks across images, C40 K48, relu",
             {{9, 6, 6, 40}, 48, Padding::Same, {}, true, true, 3}},
            {"3x3: same 27x27, 49 tiles in two chunks split mid-row, C16 K16, relu",
             {{1, 27, 27, 16}, 16, Padding::Same, {}, true, true, 3}},
        };
        for (const auto& t : cpu::simdTargets())
            for (const auto& [name, c] : cases)
                QTest::newRow((t.name + ": " + name).c_str())
                    << qint64(t.id) << QString::fromStdString(t.name) << t.supported
                    << QString::fromLatin1(name) << c;
    }
    void kernels()
    {
        TOWERS_SKIP_UNLESS_SUPPORTED();
        QFETCH(QString, caseName);
        QFETCH(WinoCase, conv);
        const Conv2dDesc d = conv.desc();
        QVERIFY(conv.k == 3 ? cpu::Winograd3x3::supports(d) : cpu::Winograd5x5::supports(d));
        QVERIFY(!cpu::Winograd3x3::supports(
            conv.k == 3 ? makeConv2dDesc(conv.x, conv.outC, 3, 3, 2, 2, Padding::Same) : d));
        const DType f32 = DType::Float32;
        const std::unique_ptr<cpu::WinogradConv> made = makeWinograd(d);
        cpu::WinogradConv& wino = *made;
        QCOMPARE(QString::fromStdString(wino.implementation()),
                 implementationName(conv.k, targetName));
        Tensor y1(d.outputShape(), f32), dx1(d.inputShape(), f32), dw1(d.weightShape(), f32),
            db1({d.outChannels}, f32), dw2(d.weightShape(), f32);
        // Twice: the second round reuses the kernel's buffers with new data and new weights.
        for (const Expected& e : expected(caseName, conv)) {
            wino.forward(e.x.data<float>(), e.w.data<float>(),
                         conv.bias ? e.b.data<float>() : nullptr, conv.relu, y1.data<float>());
            TOWERS_COMPARE(y1, e.y);

            // Unmasked: g = dy.
            wino.backwardData(e.dy.data<float>(), nullptr, e.w.data<float>(), dx1.data<float>());
            TOWERS_COMPARE(dx1, e.dx);
            wino.backwardWeights(e.x.data<float>(), e.dy.data<float>(), nullptr, dw1.data<float>(),
                                 db1.data<float>());
            TOWERS_COMPARE(dw1, e.dw);
            TOWERS_COMPARE(db1, e.db);
            // Without db: the same dw.
            wino.backwardWeights(e.x.data<float>(), e.dy.data<float>(), nullptr, dw2.data<float>(),
                                 nullptr);
            QCOMPARE(towers::test::maxAbsDiff(dw2, dw1), 0.0);

            // Masked by the fused ReLU.
            wino.backwardData(e.dy.data<float>(), e.mask.data<float>(), e.w.data<float>(),
                              dx1.data<float>());
            TOWERS_COMPARE(dx1, e.dxMasked);
            wino.backwardWeights(e.x.data<float>(), e.dy.data<float>(), e.mask.data<float>(),
                                 dw1.data<float>(), db1.data<float>());
            TOWERS_COMPARE(dw1, e.dwMasked);
            TOWERS_COMPARE(db1, e.dbMasked);
        }
    }

    // An output larger than WinogradConv::streamAboveBytes() (the threads' level-2 caches
    // together, or half the last-level cache) is written with non-temporal stores, forward and
    // backward data, on every target; smaller ones are stored as ever.
    void streamedOutputs_data()
    {
        addTargetColumns();
        for (const auto& t : cpu::simdTargets())
            QTest::newRow(t.name.c_str())
                << qint64(t.id) << QString::fromStdString(t.name) << t.supported;
    }
    void streamedOutputs()
    {
        TOWERS_SKIP_UNLESS_SUPPORTED();
        const std::int64_t above = cpu::WinogradConv::streamAboveBytes();
        QVERIFY(above >= cpu::levelTwoCacheBytes() * omp_get_max_threads());
        QVERIFY(above >= cpu::levelThreeCacheBytes() / 2);
        // Outputs of 16 channels, 64 bytes a pixel: one pixel row more than the bound or not.
        const std::int64_t pixels = above / 64;
        cpu::WinogradPass pass{1, pixels, 1, 16, pixels, 1, 16, 1, 0};
        QVERIFY(!cpu::WinogradConv::streamsOutput(pass));
        pass.outH = pass.inH = pixels + 1;
        QVERIFY(cpu::WinogradConv::streamsOutput(pass));

        // Both ways of storing on one shape (channels in whole vectors on every target; partial
        // tiles at the right and bottom edges): the same answers as the reference.
        const WinoCase conv{{3, 13, 11, 16}, 32, Padding::Same, {}, true, true, 3};
        const Conv2dDesc d = conv.desc();
        const DType f32 = DType::Float32;
        for (const bool stream : {false, true}) {
            cpu::Winograd3x3 wino(d);
            QVERIFY(!wino.streamsForward() && !wino.streamsBackwardData()); // 18 KB, 9 KB
            wino.setStreaming(stream, stream);
            Tensor y(d.outputShape(), f32), dx(d.inputShape(), f32);
            for (const Expected& e : expected(QStringLiteral("streamed"), conv)) {
                wino.forward(e.x.data<float>(), e.w.data<float>(), e.b.data<float>(), conv.relu,
                             y.data<float>());
                TOWERS_COMPARE(y, e.y);
                wino.backwardData(e.dy.data<float>(), e.mask.data<float>(), e.w.data<float>(),
                                  dx.data<float>());
                TOWERS_COMPARE(dx, e.dxMasked);
            }
        }
    }

    // --- the oneDNN backend's plans on each target ---

    // The plan's training path (forward with its saved state, the fused backward with the ReLU
    // mask) against the reference.
    void checkTrainingPath(Ops& dnn, const Conv2dDesc& d)
    {
        const DType f32 = DType::Float32;
        Rng rng(43);
        const Tensor x = randomTensor(d.inputShape(), f32, rng);
        const Tensor w = randomTensor(d.weightShape(), f32, rng, -0.2, 0.2);
        const Tensor b = randomTensor({d.outChannels}, f32, rng);
        const Tensor dy = randomTensor(d.outputShape(), f32, rng);
        Tensor y0, dx0, dw0, db0;
        m_ref->conv2dForward(d, x, w, b, y0, Activation::Relu);
        m_ref->conv2dBackward(d, x, w, y0, dy, Activation::Relu, Tensor(), &dx0, dw0, &db0);
        Tensor y1, saved, dx1, dw1, db1;
        dnn.conv2dForwardTraining(d, x, w, b, y1, Activation::Relu, saved);
        TOWERS_COMPARE(y1, y0);
        dnn.conv2dBackward(d, x, w, y0, dy, Activation::Relu, saved, &dx1, dw1, &db1);
        TOWERS_COMPARE(dx1, dx0);
        TOWERS_COMPARE(dw1, dw0);
        TOWERS_COMPARE(db1, db0);
    }

    // The implementations the backend recorded for convolutions of this geometry.
    static QStringList convImplementations(Ops& dnn, const Conv2dDesc& d)
    {
        QStringList out;
        for (const auto& i : cpu::primitiveImplementations(dnn))
            if (QString::fromStdString(i.label).contains(QString::fromStdString(d.win.str())))
                out << QString::fromStdString(i.impl);
        out.removeDuplicates();
        return out;
    }

    void plan_data()
    {
        addTargetColumns();
        for (const auto& t : cpu::simdTargets())
            QTest::newRow(t.name.c_str())
                << qint64(t.id) << QString::fromStdString(t.name) << t.supported;
    }
    // Winograd where it beats oneDNN's direct kernels on that instruction set, never for a first
    // layer's 3 channels nor for too little work; then the plan's training path against the
    // reference.
    void plan()
    {
        TOWERS_SKIP_UNLESS_SUPPORTED();
        const bool wino = winogradExpected(targetName.toStdString(), cpu::cpuInfo().isa);
        // A fresh backend: its plans are chosen under the forced target.
        const std::unique_ptr<Ops> dnn = cpu::makeOneDnnOps();
        const auto conv1 = makeConv2dDesc({2, 24, 24, 3}, 64, 5, 5, 1, 1, Padding::Same);
        QCOMPARE(QString::fromStdString(cpu::convolutionAlgorithm(*dnn, conv1)),
                 QStringLiteral("direct"));
        const auto d = makeConv2dDesc({2, 12, 12, 64}, 64, 5, 5, 1, 1, Padding::Same);
        QCOMPARE(QString::fromStdString(cpu::convolutionAlgorithm(*dnn, d)),
                 wino ? QStringLiteral("winograd 5x5") : QStringLiteral("direct"));
        checkTrainingPath(*dnn, d);
        if (wino)
            QCOMPARE(convImplementations(*dnn, d), QStringList{implementationName(5, targetName)});

        // 3x3: first layers, and two images of 6x6 (72 output pixels: the kernel's transform
        // would cost more than the products save) stay direct, and so neither Towers' Winograd nor
        // oneDNN's (which 2.6 takes for fashion-fast's conv1 at batch 64 where it has one).
        for (const auto& direct : {makeConv2dDesc({2, 24, 24, 3}, 64, 3, 3, 1, 1, Padding::Same),
                                   makeConv2dDesc({64, 28, 28, 1}, 32, 3, 3, 1, 1, Padding::Same),
                                   makeConv2dDesc({16, 32, 32, 3}, 32, 3, 3, 1, 1, Padding::Same),
                                   makeConv2dDesc({2, 6, 6, 20}, 20, 3, 3, 1, 1, Padding::Same)})
            QCOMPARE(QString::fromStdString(cpu::convolutionAlgorithm(*dnn, direct)),
                     QStringLiteral("direct"));
        // Channels in no multiple of 16, for which oneDNN 2.6 has no Winograd of its own, and 576
        // output pixels: Towers' F(4x4, 3x3) wherever it beats oneDNN's direct kernels.
        const auto d3 = makeConv2dDesc({4, 12, 12, 40}, 56, 3, 3, 1, 1, Padding::Same);
        QCOMPARE(QString::fromStdString(cpu::convolutionAlgorithm(*dnn, d3)),
                 wino ? QStringLiteral("winograd 3x3") : QStringLiteral("direct"));
        checkTrainingPath(*dnn, d3);
        // And channels in multiples of 16 (fashion-fast's conv2, 32 -> 64 at 14x14, batch 64), for
        // which oneDNN 2.6 has a Winograd of its own on AVX-512: below 256 input channels Towers'
        // is taken wherever it beats oneDNN's direct kernels, being faster than oneDNN's Winograd
        // too (conv_plan.h).
        const auto d4 = makeConv2dDesc({64, 14, 14, 32}, 64, 3, 3, 1, 1, Padding::Same);
        if (wino)
            QCOMPARE(QString::fromStdString(cpu::convolutionAlgorithm(*dnn, d4)),
                     QStringLiteral("winograd 3x3"));
        checkTrainingPath(*dnn, d4);
        for (const auto& towersWhereFaster : {d3, d4}) {
            const QStringList impl = convImplementations(*dnn, towersWhereFaster);
            if (wino) {
                QCOMPARE(impl, QStringList{implementationName(3, targetName)});
            } else {
                QVERIFY2(!impl.isEmpty() && !impl.join(' ').contains(QStringLiteral("towers")),
                         qPrintable(impl.join(' ')));
            }
        }
    }

    // --- central differences through the oneDNN backend's conv op ---

    void gradients_data()
    {
        addTargetColumns();
        QTest::addColumn<int>("kernel");
        for (const auto& t : cpu::simdTargets())
            for (int k : {5, 3})
                QTest::newRow(
                    QStringLiteral("%1: %2x%2").arg(t.name.c_str()).arg(k).toLatin1().constData())
                    << qint64(t.id) << QString::fromStdString(t.name) << t.supported << k;
    }
    // f = <conv(x, w) + b, r>, with channel counts that are not multiples of any vector (17 -> 20,
    // chosen as Winograd on AVX2 and AVX-512) and asymmetric pads: dx, dw and db from the training
    // pair against central differences of the forward, on sampled elements.
    void gradients()
    {
        TOWERS_SKIP_UNLESS_SUPPORTED();
        QFETCH(int, kernel);
        // One thread: some thousand tiny convolutions, each parallel region of which would cost a
        // scheduler time slice on a busy machine (and the kernels' one-thread path is covered).
        cpu::setCpuThreads(1);
        const auto restore = qScopeGuard([] { cpu::setCpuThreads(2); });
        const std::unique_ptr<Ops> dnn = cpu::makeOneDnnOps();
        // 3x3: two images of 17x16 outputs (544 pixels, enough for the plans to take Winograd).
        const auto d = kernel == 5 ? makeConv2dDesc({1, 6, 7, 17}, 20, 5, 5, 1, 1,
                                                    Padding::Explicit, ExplicitPads{1, 3, 2, 1})
                                   : makeConv2dDesc({2, 16, 16, 17}, 20, 3, 3, 1, 1,
                                                    Padding::Explicit, ExplicitPads{2, 0, 1, 2});
        const bool wino = winogradExpected(targetName.toStdString(), cpu::cpuInfo().isa);
        QCOMPARE(QString::fromStdString(cpu::convolutionAlgorithm(*dnn, d)),
                 wino ? QStringLiteral("winograd %1x%1").arg(kernel) : QStringLiteral("direct"));
        const DType f32 = DType::Float32;
        Rng rng(47);
        Tensor x = gridTensor(d.inputShape(), rng), w = gridTensor(d.weightShape(), rng),
               b = gridTensor({d.outChannels}, rng);
        const Tensor r = randomTensor(d.outputShape(), f32, rng);
        Tensor y, saved, dx, dw, db;
        const auto f = [&] {
            dnn->conv2dForward(d, x.to(f32), w.to(f32), b.to(f32), y, Activation::None);
            return dot(y, r);
        };
        dnn->conv2dForwardTraining(d, x.to(f32), w.to(f32), b.to(f32), y, Activation::None, saved);
        dnn->conv2dBackward(d, x.to(f32), w.to(f32), y, r, Activation::None, saved, &dx, dw, &db);
        if (wino)
            QCOMPARE(convImplementations(*dnn, d),
                     QStringList{implementationName(kernel, targetName)});
        const std::pair<const char*, std::pair<Tensor*, const Tensor*>> checks[] = {
            {"dx", {&x, &dx}}, {"dw", {&w, &dw}}, {"db", {&b, &db}}};
        for (const auto& [name, c] : checks) {
            const auto result = checkGradient(f, *c.first, *c.second, kStep, kElements);
            // Rounding can pass for a kink and skip an element, but most must be compared.
            QVERIFY2(result.checked >= std::min<std::int64_t>(c.first->numel(), kElements) / 2 &&
                         result.maxRelError < kGradTolerance,
                     qPrintable(QStringLiteral("%1 %2: %3")
                                    .arg(targetName, QString::fromLatin1(name),
                                         QString::fromStdString(result.str()))));
        }
    }
};

QTEST_APPLESS_MAIN(TestWinograd)
#include "tst_winograd.moc"
