// Evaluation's bfloat16 activations (ExecContext::bf16Activations, op_list.h's [bf16 x]): with
// --precision bf16 on the oneDNN backend, the forward pass of evaluation keeps its images bfloat16
// between the layers, as TorchInductor and inference engines do.
//  * Ops: each op that takes a bfloat16 x equals the float64 reference on operands bfloat16 holds,
//    rounded once to bfloat16 where it writes bfloat16 (the convolutions in every pair of input
//    and output types, pooling, LRN, sums, the layout change, linear layers, the conversions both
//    ways, ties, NaN and infinities included); Towers' own kernels on every SIMD target.
//  * Models: every registered model's evaluation with bfloat16 activations stays within
//    bfloat16's rounding of the same pass in float32 activations, its images really bfloat16
//    between the layers; containers convert where a layer takes float32 only.
//  * Refusals: backends and ops that do not take bfloat16 say so.
#include <QtTest>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include "bf16_operands.h"
#include "engine/cpu/cpu_info.h"
#include "engine/cpu/onednn_ops.h"
#include "engine/cpu/primitive_implementations.h"
#include "engine/cpu/simd_target.h"
#include "engine/errors.h"
#include "engine/models/model.h"
#include "engine/models/registry.h"
#include "engine/nn/batch_norm.h"
#include "engine/nn/conv2d.h"
#include "engine/nn/flatten.h"
#include "engine/nn/linear.h"
#include "engine/nn/pool2d.h"
#include "engine/nn/sequential.h"
#include "engine/ops/ops.h"
#include "engine/selftest/op_cases.h"
#include "gradcheck.h"
#include "simd_targets.h"

using namespace towers::engine;
using namespace towers::test;

namespace {

std::uint32_t bitsOf(float f)
{
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

// Float32 values in [lo, hi) that bfloat16 holds exactly.
Tensor exactOperand(const Shape& shape, Rng& rng, double lo = -1, double hi = 1)
{
    return bf16Operand(shape, rng, true, lo, hi);
}

Tensor asFloat32(const Tensor& t)
{
    return t.dtype() == DType::Float32 ? t : t.to(DType::Float32);
}

// The largest |got - want| over |want|'s largest element: a rounding at bfloat16's 8 bits is at
// most 2^-8 of an element, so of the largest.
double worstError(const Tensor& got, const Tensor& want)
{
    double worst = 0, scale = 0;
    for (std::int64_t i = 0; i < want.numel(); ++i) {
        scale = std::max(scale, std::fabs(want.at(i)));
        worst = std::max(worst, std::fabs(got.at(i) - want.at(i)));
    }
    return scale > 0 ? worst / scale : worst;
}

// Elements that differ bitwise, as "i: got vs want" for the first few.
QString bitwiseDifferences(const Tensor& got, const Tensor& want)
{
    QString out;
    int shown = 0;
    for (std::int64_t i = 0; i < want.numel() && shown < 4; ++i) {
        const float g = static_cast<float>(got.at(i)), w = static_cast<float>(want.at(i));
        if (bitsOf(g) != bitsOf(w)) {
            out += QStringLiteral("%1: %2 (%3) vs %4 (%5); ")
                       .arg(i)
                       .arg(double(g))
                       .arg(bitsOf(g), 8, 16, QLatin1Char('0'))
                       .arg(double(w))
                       .arg(bitsOf(w), 8, 16, QLatin1Char('0'));
            ++shown;
        }
    }
    return out;
}

const ConvShape kConvShapes[] = {
    {"cifar10-resnet prep (3 channels)", {2, 32, 32, 3}, 32, 3, 1, Padding::Same},
    {"fashion-fast conv1 (1 channel)", {3, 28, 28, 1}, 32, 3, 1, Padding::Same},
    {"cifar10-tutorial conv2 (5x5)", {2, 12, 12, 64}, 64, 5, 1, Padding::Same},
    {"cifar10-resnet layer3.res (4x4, 256)", {2, 4, 4, 256}, 256, 3, 1, Padding::Same},
    {"3x3 stride 2, 20 channels (a partial block)", {3, 9, 8, 20}, 20, 3, 2, Padding::Same},
    {"mnist-convnet conv3 (10x10 valid)", {2, 10, 10, 64}, 96, 3, 1, Padding::Valid},
};

// The ExecContext of an evaluation, with or without bfloat16 activations.
ExecContext evaluation(Ops& ops, bool bf16)
{
    ExecContext ctx = ExecContext::forEvaluation(ops);
    ctx.bf16Activations = bf16;
    return ctx;
}

} // namespace

class TestBf16Activations : public QObject
{
    Q_OBJECT

    std::unique_ptr<Ops> m_ref = makeReferenceOps();
    std::unique_ptr<Ops> m_bf16;

    void requireBf16()
    {
        if (const std::string no = cpu::bf16Unavailable(); !no.empty()) QSKIP(no.c_str());
        if (!m_bf16) m_bf16 = cpu::makeOneDnnOps(Precision::BFloat16);
        QVERIFY(m_bf16->bf16Activations());
    }

private slots:
    // y = act(conv(x, w) + b) for every pair of x and y types but float32 -> float32: the float64
    // reference on the same bfloat16-exact operands, rounded once where y is bfloat16.
    void convolutionInEveryPairOfTypes_data()
    {
        QTest::addColumn<int>("shape");
        QTest::addColumn<bool>("xBf16");
        QTest::addColumn<bool>("yBf16");
        QTest::addColumn<bool>("relu");
        for (int i = 0; i < int(std::size(kConvShapes)); ++i)
            for (const auto& [xb, yb] : {std::pair{true, true}, {false, true}, {true, false}})
                for (const bool relu : {false, true})
                    QTest::newRow(
                        qPrintable(QStringLiteral("%1, %2 -> %3%4")
                                       .arg(kConvShapes[i].name, xb ? "bf16" : "fp32",
                                            yb ? "bf16" : "fp32", relu ? ", bias, relu" : "")))
                        << i << xb << yb << relu;
    }
    void convolutionInEveryPairOfTypes()
    {
        requireBf16();
        QFETCH(int, shape);
        QFETCH(bool, xBf16);
        QFETCH(bool, yBf16);
        QFETCH(bool, relu);
        const ConvShape& s = kConvShapes[shape];
        Conv2dDesc d = s.desc();
        Rng rng(11 + std::uint64_t(shape));
        const Tensor x = exactOperand(d.inputShape(), rng);
        const Tensor w = exactOperand(d.weightShape(), rng);
        const Tensor b = relu ? exactOperand({s.out}, rng) : Tensor();
        const Activation act = relu ? Activation::Relu : Activation::None;
        Tensor want;
        m_ref->conv2dForward(d, x.to(DType::Float64), w.to(DType::Float64),
                             b.empty() ? Tensor() : b.to(DType::Float64), want, act);

        d.outputDType = yBf16 ? DType::BFloat16 : DType::Float32;
        Tensor y;
        m_bf16->conv2dForward(d, xBf16 ? x.to(DType::BFloat16) : x, w, b, y, act);
        // A bfloat16 y where the convolution computes in bfloat16: a single input channel's stays
        // float32 (conv_plan.h) and writes float32, as its training forward.
        const bool inBf16 =
            cpu::convolutionAlgorithm(*m_bf16, d, cpu::ConvUse::Evaluation) == "direct bf16";
        QCOMPARE(inBf16, d.win.c > 1);
        QCOMPARE(y.dtype(), yBf16 && inBf16 ? DType::BFloat16 : DType::Float32);
        QCOMPARE(y.shape(), d.outputShape());
        // float32 accumulation of exact products (1e-5), then bfloat16's one rounding.
        const double tol = y.dtype() == DType::BFloat16 ? std::ldexp(1.0, -8) : 1e-5;
        const double e = worstError(asFloat32(y), want);
        QVERIFY2(e < tol, qPrintable(QString::number(e)));
        if (relu)
            for (std::int64_t i = 0; i < y.numel(); ++i) QVERIFY(y.at(i) >= 0);
        // The same convolution with a float32 x and y (training's types) rounds its output
        // nowhere: evaluation's bfloat16 y is that rounded, bit for bit where the accumulations
        // agree (the same kernel family), and within one bfloat16 step everywhere.
        if (yBf16) {
            Conv2dDesc f = d;
            f.outputDType = DType::Float32;
            Tensor y32;
            m_bf16->conv2dForward(f, x, w, b, y32, act);
            for (std::int64_t i = 0; i < y.numel(); ++i) {
                const double step = std::ldexp(std::fabs(y32.at(i)), -7) + 1e-30;
                QVERIFY2(std::fabs(y.at(i) - y32.at(i)) <= step,
                         qPrintable(QStringLiteral("element %1: %2 against %3")
                                        .arg(i)
                                        .arg(y.at(i))
                                        .arg(y32.at(i))));
            }
        }
    }

    // Where the plan runs oneDNN's direct bfloat16 kernels, one primitive reads and writes
    // bfloat16: no conversion of x and no float32 y in between.
    void convolutionWritesBf16InOnePrimitive()
    {
        requireBf16();
        const Conv2dDesc base = makeConv2dDesc({2, 16, 16, 64}, 64, 3, 3, 1, 1, Padding::Same);
        Conv2dDesc d = base;
        d.outputDType = DType::BFloat16;
        Rng rng(5);
        const Tensor x = exactOperand(d.inputShape(), rng).to(DType::BFloat16);
        const Tensor w = exactOperand(d.weightShape(), rng);
        auto ops = cpu::makeOneDnnOps(Precision::BFloat16);
        Tensor y;
        ops->conv2dForward(d, x, w, Tensor(), y, Activation::Relu);
        QStringList convolutions;
        for (const auto& i : cpu::primitiveImplementations(*ops))
            if (i.primitive.rfind("convolution", 0) == 0)
                convolutions << QString::fromStdString(i.primitive + ": " + i.impl);
        QCOMPARE(convolutions.size(), 1);
        // Besides it, only the weights' reorder (OIHW, "abcd", to the kernel's blocks): nothing
        // reads or writes an NHWC ("acdb") activation but the convolution.
        for (const auto& i : cpu::primitiveImplementations(*ops))
            if (i.primitive.rfind("convolution", 0) != 0)
                QVERIFY2(i.primitive.find("acdb") == std::string::npos &&
                             i.primitive.rfind("reorder src:abcd", 0) == 0,
                         i.primitive.c_str());
        QVERIFY2(!cpu::isReferenceImplementation(convolutions[0].toStdString()),
                 qPrintable(convolutions[0]));
    }

    // A maximum rounds nothing: bfloat16 pooling equals the reference exactly, pads included, on
    // every SIMD target of Towers' kernel this CPU runs, the first maximum in scan order winning
    // a tie (signed zeros tell which), and leaves no workspace (no backward follows).
    void maxPoolingIsExact_data()
    {
        QTest::addColumn<int>("n");
        QTest::addColumn<int>("h");
        QTest::addColumn<int>("w");
        QTest::addColumn<int>("c");
        QTest::addColumn<int>("k");
        QTest::addColumn<int>("stride");
        QTest::addColumn<int>("padding");
        QTest::newRow("2x2 stride 2 (cifar10-resnet layer1.pool)")
            << 2 << 32 << 32 << 64 << 2 << 2 << int(Padding::Valid);
        QTest::newRow("3x3 stride 2 SAME, odd sizes (cifar10-tutorial pool1)")
            << 3 << 13 << 11 << 20 << 3 << 2 << int(Padding::Same);
        QTest::newRow("global 4x4 (cifar10-resnet pool)")
            << 4 << 4 << 4 << 256 << 4 << 4 << int(Padding::Valid);
        QTest::newRow("ties and signed zeros, 3x3 stride 1 SAME, 19 channels (a partial vector)")
            << 2 << 6 << 7 << 19 << 3 << 1 << int(Padding::Same);
    }
    void maxPoolingIsExact()
    {
        requireBf16();
        QFETCH(int, n);
        QFETCH(int, h);
        QFETCH(int, w);
        QFETCH(int, c);
        const Shape input{n, h, w, c};
        QFETCH(int, k);
        QFETCH(int, stride);
        QFETCH(int, padding);
        const Pool2dDesc d = makePool2dDesc(input, k, k, stride, stride, Padding(padding));
        Rng rng(3);
        Tensor x = exactOperand(input, rng, -4, 4);
        if (c == 19) // a few values only, zeros of both signs among them: ties everywhere
            for (std::int64_t i = 0; i < x.numel(); ++i)
                x.data<float>()[i] = std::array{-1.0f, -0.0f, 0.0f, 0.5f}[rng.below(4)];
        Tensor want, wantWs;
        m_ref->maxPoolForward(d, x.to(DType::Float64), want, wantWs);
        onEverySimdTarget([&](const std::string& target) {
            Tensor y, ws = Tensor(Shape{3}, DType::UInt8);
            m_bf16->maxPoolForward(d, x.to(DType::BFloat16), y, ws);
            QCOMPARE(y.dtype(), DType::BFloat16);
            QCOMPARE(y.shape(), d.outputShape());
            QVERIFY(ws.empty());
            const QString diff = bitwiseDifferences(y, want);
            QVERIFY2(diff.isEmpty(), qPrintable(QString::fromStdString(target) + ": " + diff));
        });
    }

    // The sum of two bfloat16 activations (a residual block's) is rounded once, to nearest even.
    void sumsRoundOnce()
    {
        requireBf16();
        Rng rng(9);
        const Shape s{2, 8, 8, 37};
        const Tensor a = exactOperand(s, rng, -3, 3), b = exactOperand(s, rng, -3, 3);
        Tensor y;
        m_bf16->add(a.to(DType::BFloat16), b.to(DType::BFloat16), y);
        QCOMPARE(y.dtype(), DType::BFloat16);
        Tensor want(s, DType::Float32);
        for (std::int64_t i = 0; i < s.numel(); ++i)
            want.data<float>()[i] = roundToBf16(a.at(i) + b.at(i)); // exact in double
        const QString diff = bitwiseDifferences(y, want);
        QVERIFY2(diff.isEmpty(), qPrintable(diff));
        // In place, as a residual block may run it.
        Tensor inPlace = a.to(DType::BFloat16);
        m_bf16->add(inPlace, b.to(DType::BFloat16), inPlace);
        QVERIFY(bitwiseDifferences(inPlace, want).isEmpty());
    }

    // Float32 to bfloat16 to nearest even (ties both ways, the largest finite value to infinity,
    // NaN kept a NaN whatever its payload) and back exactly, on oneDNN as on the reference.
    void conversionsRoundToNearestEven()
    {
        requireBf16();
        const float nan = std::numeric_limits<float>::quiet_NaN();
        const float inf = std::numeric_limits<float>::infinity();
        std::uint32_t lowNanBits = 0x7F800001u; // a NaN whose payload lies in the dropped half
        float lowNan;
        std::memcpy(&lowNan, &lowNanBits, 4);
        const float tieDown = 1.0f + std::ldexp(1.0f, -8);   // halfway, even below: 1
        const float tieUp = 1.0f + 3 * std::ldexp(1.0f, -8); // halfway, even above
        const std::vector<float> values = {0.0f,    -0.0f,  1.0f, tieDown,   tieUp,
                                           -tieUp,  inf,    -inf, nan,       lowNan,
                                           3.4e38f, 1e-40f, 0.1f, -123.456f, 65504.0f};
        const std::vector<float> want = {0.0f,
                                         -0.0f,
                                         1.0f,
                                         1.0f,
                                         1.0f + std::ldexp(1.0f, -6),
                                         -(1.0f + std::ldexp(1.0f, -6)),
                                         inf,
                                         -inf,
                                         nan,
                                         nan,
                                         inf,
                                         roundToBf16(1e-40),
                                         roundToBf16(0.1),
                                         roundToBf16(-123.456),
                                         65536.0f};
        Tensor x(Shape{std::int64_t(values.size())}, DType::Float32);
        std::memcpy(x.raw(), values.data(), x.bytes());
        for (Ops* ops : {m_ref.get(), m_bf16.get()}) {
            Tensor y, back;
            ops->convertFloat(x, DType::BFloat16, y);
            QCOMPARE(y.dtype(), DType::BFloat16);
            ops->convertFloat(y, DType::Float32, back);
            QCOMPARE(back.dtype(), DType::Float32);
            for (std::size_t i = 0; i < values.size(); ++i) {
                const float got = back.data<float>()[i];
                if (std::isnan(want[i])) {
                    QVERIFY2(std::isnan(got),
                             qPrintable(QStringLiteral("%1 on %2: %3")
                                            .arg(double(values[i]))
                                            .arg(QString::fromStdString(ops->name()))
                                            .arg(double(got))));
                    continue;
                }
                QVERIFY2(bitsOf(got) == bitsOf(want[i]),
                         qPrintable(QStringLiteral("%1 on %2: %3, want %4")
                                        .arg(double(values[i]))
                                        .arg(QString::fromStdString(ops->name()))
                                        .arg(double(got))
                                        .arg(double(want[i]))));
            }
        }
        // A large tensor (the parallel, vectorised loop) agrees with the reference bit for bit.
        Rng rng(1);
        const Tensor big = randomTensor({3, 17, 19, 41}, DType::Float32, rng, -100, 100);
        Tensor a, b;
        m_ref->convertFloat(big, DType::BFloat16, a);
        m_bf16->convertFloat(big, DType::BFloat16, b);
        QCOMPARE(std::memcmp(a.raw(), b.raw(), a.bytes()), 0);
        Tensor same;
        m_bf16->convertFloat(big, DType::Float32, same);
        QCOMPARE(std::memcmp(same.raw(), big.raw(), big.bytes()), 0);
    }

    // LRN on a bfloat16 image computes in float32 what Towers' float32 kernel computes from the
    // same values and rounds it once to nearest even: bit for bit that output converted, on every
    // SIMD target this CPU runs, each power of beta's code path included; and within bfloat16's
    // rounding of the float64 reference.
    void lrnRoundsTheFloat32Result_data()
    {
        QTest::addColumn<int>("channels");
        QTest::addColumn<int>("radius");
        QTest::addColumn<double>("beta");
        QTest::newRow("cifar10-tutorial norm1 (64 channels, radius 4, beta 0.75)")
            << 64 << 4 << 0.75;
        QTest::newRow("19 channels (a partial vector), radius 2, beta 0.5") << 19 << 2 << 0.5;
        QTest::newRow("any beta (0.6), radius 5") << 40 << 5 << 0.6;
    }
    void lrnRoundsTheFloat32Result()
    {
        requireBf16();
        QFETCH(int, channels);
        QFETCH(int, radius);
        QFETCH(double, beta);
        const Shape shape{3, 5, 7, channels};
        const LrnDesc d = makeLrnDesc(shape, radius, 1.0, 0.001 / 9.0, beta);
        Rng rng(12);
        const Tensor x = exactOperand(shape, rng, -3, 3);
        Tensor want;
        Tensor refWs;
        m_ref->lrnForward(d, x.to(DType::Float64), want, refWs);
        onEverySimdTarget([&](const std::string& target) {
            Tensor y32, ws32, rounded, y16, ws16 = Tensor(Shape{3}, DType::UInt8);
            m_bf16->lrnForward(d, x, y32, ws32);
            m_bf16->convertFloat(y32, DType::BFloat16, rounded);
            m_bf16->lrnForward(d, x.to(DType::BFloat16), y16, ws16);
            QCOMPARE(y16.dtype(), DType::BFloat16);
            QVERIFY(ws16.empty());
            QVERIFY2(std::memcmp(y16.raw(), rounded.raw(), rounded.bytes()) == 0,
                     qPrintable(QString::fromStdString(target) + ": " +
                                bitwiseDifferences(y16, rounded)));
            const double e = worstError(asFloat32(y16), want);
            QVERIFY2(e < std::ldexp(1.0, -8), qPrintable(QString::number(e)));
        });
    }

    // Flattening moves bfloat16 as it is; a linear layer reads it as the bfloat16 copy of the same
    // values that its float32 x would have given, so the two agree bit for bit.
    void flattenAndLinearReadBf16()
    {
        requireBf16();
        Rng rng(4);
        const Tensor x = exactOperand({5, 3, 4, 7}, rng);
        Tensor flat32, flat16;
        m_bf16->nhwcToNchw(x, flat32);
        m_bf16->nhwcToNchw(x.to(DType::BFloat16), flat16);
        QCOMPARE(flat16.dtype(), DType::BFloat16);
        QVERIFY(bitwiseDifferences(flat16, flat32).isEmpty());

        const Tensor in = flat32.reshaped({5, 84});
        const Tensor w = randomTensor({10, 84}, DType::Float32, rng);
        const Tensor b = randomTensor({10}, DType::Float32, rng);
        for (const Activation act : {Activation::None, Activation::Relu}) {
            Tensor y32, y16;
            m_bf16->linearForward(in, w, b, y32, act);
            m_bf16->linearForward(flat16.reshaped({5, 84}), w, b, y16, act);
            QCOMPARE(y16.dtype(), DType::Float32);
            QCOMPARE(std::memcmp(y16.raw(), y32.raw(), y32.bytes()), 0);
        }
    }

    // Every registered model: evaluation with bfloat16 activations is the same pass as with
    // float32 ones but for bfloat16's roundings, and its images are bfloat16 between the layers
    // that take them. Where every activation goes on into a maximum (which commutes with rounding)
    // or a convolution or linear layer (which rounds its input to bfloat16 anyway), nothing is
    // rounded that was not before: the pass is the float32 activations' bit for bit. A residual
    // sum (cifar10-resnet) or an LRN reading a rounded input (cifar10-tutorial's) rounds once
    // more.
    void modelsEvaluateWithBf16Activations_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<bool>("bitwise");
        for (const ModelInfo& m : modelRegistry())
            QTest::newRow(m.name.c_str())
                << QString::fromStdString(m.name)
                << (m.name != "cifar10-resnet" && m.name != "cifar10-tutorial");
    }
    void modelsEvaluateWithBf16Activations()
    {
        requireBf16();
        QFETCH(QString, model);
        QFETCH(bool, bitwise);
        auto net = buildModel(model.toStdString());
        net->initialize(17);
        const Shape& in = net->inputShape();
        Rng rng(2);
        const Tensor images = randomTensor({8, in[0], in[1], in[2]}, DType::Float32, rng, -2, 2);
        ExecContext f32 = evaluation(*m_bf16, false), b16 = evaluation(*m_bf16, true);
        const Tensor want = net->forward(f32, images).clone();
        std::size_t bf16Layers = 0;
        const std::size_t layers = net->net().layers().size();
        for (std::size_t i = 0; i + 1 < layers; ++i)
            QVERIFY(net->layerOutput(i).dtype() != DType::BFloat16);
        const Tensor got = net->forward(b16, images).clone();
        QCOMPARE(got.dtype(), DType::Float32);
        QCOMPARE(got.shape(), want.shape());
        for (std::size_t i = 0; i + 1 < layers; ++i)
            if (!net->layerOutput(i).empty() && net->layerOutput(i).dtype() == DType::BFloat16)
                ++bf16Layers;
        QVERIFY2(bf16Layers > 0, "no layer kept its output in bfloat16");
        // The same bits only where every convolution given a bfloat16 image computes in bfloat16
        // (rounding its input anyway). One that stays in float32 by its plan (conv_plan.cpp: a
        // wide 3x3 one in float32 Winograd without AMX kernels, a shape oneDNN runs only by a
        // reference loop in bfloat16) writes float32 and reads its input rounded where the
        // float32 images were not (mnist-convnet's conv3 on avx512_core_bf16). On every CPU each
        // convolution writes bfloat16 exactly where its plan computes in bfloat16; with AMX every
        // one does.
        QString float32Conv;
        for (std::size_t i = 1; i + 1 < layers; ++i) {
            const auto* conv = dynamic_cast<const Conv2d*>(net->net().layers()[i].get());
            const Tensor& x = net->layerOutput(i - 1);
            if (!conv || x.dtype() != DType::BFloat16) continue;
            const Conv2dOptions& o = conv->options();
            const std::string algorithm = cpu::convolutionAlgorithm(
                *m_bf16,
                makeConv2dDesc(x.shape(), o.outChannels, o.kernelH, o.kernelW, o.stride, o.stride,
                               o.padding, o.pads),
                cpu::ConvUse::Evaluation);
            const bool inBf16 = algorithm == "direct bf16";
            // A batch norm after it folds in (as evaluation does): the pair's output is the
            // batch norm's.
            const auto* bn = dynamic_cast<const BatchNorm*>(net->net().layers()[i + 1].get());
            const Tensor& y = net->layerOutput(bn && conv->canFold(*bn) ? i + 1 : i);
            QVERIFY2(y.dtype() == (inBf16 ? DType::BFloat16 : DType::Float32),
                     qPrintable(QString::fromStdString(conv->name() + " (" + algorithm +
                                                       ") writes the other type")));
            if (!inBf16)
                float32Conv += QString::fromStdString((float32Conv.isEmpty() ? "" : ", ") +
                                                      conv->name() + " (" + algorithm + ")");
        }
        // Each layer rounds its output to 8 bits: a few 2^-9 through a handful of layers.
        const double e = normalisedError(got, want);
        QVERIFY2(e < 3e-2, qPrintable(QString::number(e)));
        if (cpu::cpuInfo().isa.find("amx") != std::string::npos)
            QVERIFY2(float32Conv.isEmpty(), qPrintable(float32Conv + " computes in float32"));
        if (!float32Conv.isEmpty())
            qInfo("in float32 on this CPU (%s): %s", cpu::cpuInfo().isa.c_str(),
                  qPrintable(float32Conv));
        if (bitwise && !float32Conv.isEmpty())
            qInfo("its input rounded, the same bits or not (%g)", e);
        else if (bitwise)
            QCOMPARE(std::memcmp(got.raw(), want.raw(), want.bytes()), 0);
        else
            QVERIFY2(e > 0, "bfloat16 activations changed nothing");
        // Evaluation in float32 again after it: nothing of the bfloat16 pass stays behind.
        const Tensor again = net->forward(f32, images);
        QCOMPARE(std::memcmp(again.raw(), want.raw(), want.bytes()), 0);
    }

    // A layer that takes float32 only gets its bfloat16 input converted by the container that runs
    // it: a residual sum of a bfloat16 x and a float32 body output, and a concatenation of
    // bfloat16 branches, run in float32 there.
    void containersConvertForFloat32Layers()
    {
        requireBf16();
        Conv2dOptions c;
        c.inChannels = 3;
        c.outChannels = 8;
        c.activation = Activation::Relu;
        auto net = std::make_unique<Sequential>("net");
        net->add(std::make_unique<Conv2d>("conv", c));
        auto body = std::make_unique<Sequential>("res");
        c.inChannels = 8;
        body->add(std::make_unique<Conv2d>("res.conv", c));
        body->add(std::make_unique<AvgPool2d>("res.avg", 3, 1, Padding::Same)); // float32 only
        net->add(std::make_unique<Residual>("res", std::move(body)));
        std::vector<std::unique_ptr<Sequential>> branches;
        branches.push_back(std::make_unique<Sequential>("cat.a"));
        c.outChannels = 4;
        branches.back()->add(std::make_unique<Conv2d>("cat.a.conv", c));
        branches.push_back(std::make_unique<Sequential>("cat.b")); // x itself
        net->add(std::make_unique<Concat>("cat", std::move(branches)));
        net->add(std::make_unique<MaxPool2d>("pool", 2, 2, Padding::Valid));
        net->add(std::make_unique<Flatten>("flatten"));
        LinearOptions fc;
        fc.inFeatures = 4 * 4 * 12;
        fc.outFeatures = 5;
        net->add(std::make_unique<Linear>("fc", fc));
        Model model("containers", Shape{8, 8, 3}, 5, std::move(net));
        model.initialize(3);
        Rng rng(8);
        const Tensor images = randomTensor({4, 8, 8, 3}, DType::Float32, rng, -2, 2);
        ExecContext f32 = evaluation(*m_bf16, false), b16 = evaluation(*m_bf16, true);
        const Tensor want = model.forward(f32, images).clone();
        const Tensor& got = model.forward(b16, images);
        QCOMPARE(got.dtype(), DType::Float32);
        const double e = normalisedError(got, want);
        QVERIFY2(e > 0 && e < 3e-2, qPrintable(QString::number(e)));
    }

    void refusals()
    {
        requireBf16();
        const Conv2dDesc base = makeConv2dDesc({1, 4, 4, 2}, 3, 3, 3, 1, 1, Padding::Same);
        Rng rng(1);
        const Tensor x = exactOperand(base.inputShape(), rng);
        const Tensor x16 = x.to(DType::BFloat16);
        const Tensor w = exactOperand(base.weightShape(), rng);
        Conv2dDesc wantsBf16 = base;
        wantsBf16.outputDType = DType::BFloat16;
        const auto refuses = [](const char* what, auto&& call, const char* words) {
            try {
                call();
                QFAIL(qPrintable(QStringLiteral("%1 was accepted").arg(what)));
            } catch (const Unsupported& e) {
                QVERIFY2(std::string(e.what()).find(words) != std::string::npos, e.what());
            }
        };
        Tensor y, ws, saved;
        // Backends that take no bfloat16 activations: the reference, oneDNN in float32.
        auto f32 = cpu::makeOneDnnOps();
        QVERIFY(!f32->bf16Activations() && !m_ref->bf16Activations());
        for (Ops* ops : {m_ref.get(), f32.get()}) {
            refuses(
                "a bfloat16 x", [&] { ops->conv2dForward(base, x16, w, Tensor(), y, {}); },
                "conv2d x is bfloat16");
            refuses(
                "a bfloat16 y", [&] { ops->conv2dForward(wantsBf16, x, w, Tensor(), y, {}); },
                "conv2d y is bfloat16");
            refuses(
                "bfloat16 pooling",
                [&] {
                    ops->maxPoolForward(makePool2dDesc(x.shape(), 2, 2, 2, 2, Padding::Valid), x16,
                                        y, ws);
                },
                "max pool x is bfloat16");
        }
        // Training takes float32 only, as do the ops without [bf16 x].
        refuses(
            "a training forward with a bfloat16 x",
            [&] { m_bf16->conv2dForwardTraining(base, x16, w, Tensor(), y, {}, saved); },
            "must be float32");
        refuses(
            "a training forward writing bfloat16",
            [&] { m_bf16->conv2dForwardTraining(wantsBf16, x, w, Tensor(), y, {}, saved); },
            "a training forward writes float32");
        refuses(
            "bfloat16 average pooling",
            [&] {
                m_bf16->avgPoolForward(makePool2dDesc(x.shape(), 2, 2, 2, 2, Padding::Valid), x16,
                                       y);
            },
            "must be float32");
        // Conversions go between bfloat16 and the float types a backend runs, nowhere else.
        refuses(
            "a conversion to int32", [&] { m_bf16->convertFloat(x, DType::Int32, y); },
            "convertFloat to int32: the onednn backend converts between bfloat16 and the "
            "float types it runs");
        refuses(
            "a conversion of float64 on oneDNN",
            [&] { m_bf16->convertFloat(x.to(DType::Float64), DType::BFloat16, y); },
            "convertFloat x is float64");
        // A sum of two types, and a descriptor asking for what no convolution writes.
        try {
            m_bf16->add(x16, x, y);
            QFAIL("a sum of bfloat16 and float32 was accepted");
        } catch (const InvalidArgument& e) {
            QVERIFY2(std::string(e.what()).find("add b") != std::string::npos, e.what());
        }
        Conv2dDesc wantsInt = base;
        wantsInt.outputDType = DType::Int32;
        try {
            m_bf16->conv2dForward(wantsInt, x, w, Tensor(), y, {});
            QFAIL("an int32 y was accepted");
        } catch (const InvalidArgument& e) {
            QVERIFY2(std::string(e.what()).find("int32") != std::string::npos, e.what());
        }
    }
};

QTEST_APPLESS_MAIN(TestBf16Activations)
#include "tst_bf16_activations.moc"
