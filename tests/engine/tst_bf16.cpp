// --precision bf16 on the oneDNN backend (engine/ops/precision.h): convolutions and matrix
// products read bfloat16 copies of their operands and accumulate in float32.
//  * Exactness: on operands that bfloat16 holds exactly, the bf16 ops equal the float64
//    reference within float32 accumulation error, in every direction, fused ReLU and bias
//    included: the conversions round nothing there, so what is left is the arithmetic itself,
//    and a wrong layout, a missed operand or a bad transpose cannot hide in bfloat16's noise.
//  * Rounding: on arbitrary float32 operands the same ops differ from float32 by what rounding
//    two operands to 8-bit mantissas gives (1e-4 to 1e-2): bfloat16 is really used.
//  * Training: towers in bf16 learn, stay identical, and two towers match one on the same global
//    batch; the same run twice is bitwise the same.
//  * Refusals: where the CPU cannot, and on the backends that do not run bf16, Unsupported says
//    why.
// The op-case table runs in bf16 as well (tst_op_cases, "onednn bf16" rows).
#include <QtTest>

#include <cmath>
#include <cstring>
#include <memory>

#include "bf16_operands.h"
#include "engine/backends.h"
#include "engine/cpu/cpu_info.h"
#include "engine/cpu/masked_gradient.h"
#include "engine/cpu/onednn_ops.h"
#include "engine/cpu/primitive_implementations.h"
#include "engine/errors.h"
#include "engine/ops/ops.h"
#include "engine/selftest/op_cases.h"
#include "engine/tensor/bfloat16.h"
#include "engine/train/tower_set.h"
#include "engine/train/train_config.h"
#include "gradcheck.h"

using namespace towers::engine;
using namespace towers::test;

namespace {

// Float32 values drawn in [-1, 1], rounded to bfloat16 when `exact`.
Tensor operand(const Shape& shape, Rng& rng, bool exact)
{
    return bf16Operand(shape, rng, exact);
}

Tensor f64(const Tensor& t)
{
    return t.to(DType::Float64);
}

// dy with zeros where |y| is within 1 % of its RMS of zero: a ReLU mask that rounding in either
// backend could flip is then irrelevant.
Tensor gradientAwayFromKink(const Tensor& dy, const Tensor& y)
{
    double rms = 0;
    for (std::int64_t i = 0; i < y.numel(); ++i) rms += y.at(i) * y.at(i);
    rms = std::sqrt(rms / double(y.numel()));
    Tensor g = dy.to(DType::Float32);
    for (std::int64_t i = 0; i < g.numel(); ++i)
        if (std::fabs(y.at(i)) < 0.01 * rms) g.data<float>()[i] = 0;
    return g;
}

struct ConvResult
{
    Tensor y, dx, dw, db;
};

// The primitives of one kind ("matmul", "convolution") that `ops` ran, as "description: impl".
QStringList primitivesRun(Ops& ops, const std::string& kind)
{
    QStringList out;
    for (const auto& i : cpu::primitiveImplementations(ops))
        if (i.primitive.rfind(kind, 0) == 0)
            out << QString::fromStdString(i.primitive + ": " + i.impl);
    return out;
}

// Forward (training) and the fused backward of one convolution on `ops`, in its float type.
ConvResult convolve(Ops& ops, DType dtype, const Conv2dDesc& d, const Tensor& x, const Tensor& w,
                    const Tensor& b, Activation act, const Tensor& dy, const Tensor& reluY)
{
    ConvResult r;
    Tensor saved;
    const Tensor xd = x.to(dtype), wd = w.to(dtype), bd = b.empty() ? Tensor() : b.to(dtype);
    ops.conv2dForwardTraining(d, xd, wd, bd, r.y, act, saved);
    // The ReLU mask of the backward is the forward's own y; the test gives dy zero near the kink.
    ops.conv2dBackward(d, xd, wd, reluY.empty() ? r.y : reluY.to(dtype), dy.to(dtype), act, saved,
                       &r.dx, r.dw, bd.empty() ? nullptr : &r.db);
    return r;
}

// Sizes that exercise the layers the registered models have (3x3 ones with fewer than 64 input
// channels: from 64, training in bf16 without AMX may keep a float32 Winograd, conv_plan.cpp).
const ConvShape kConvShapes[] = {
    {"cifar10-tutorial conv1 (3 channels, 5x5)", {4, 24, 24, 3}, 64, 5, 1, Padding::Same},
    {"cifar10-tutorial conv2 (5x5)", {4, 12, 12, 64}, 64, 5, 1, Padding::Same},
    {"mnist-convnet conv2 (3x3 valid)", {2, 12, 12, 48}, 256, 3, 1, Padding::Valid},
    {"fashion-fast conv1 (1 channel)", {4, 28, 28, 1}, 32, 3, 1, Padding::Same},
    {"3x3 stride 2, 20 channels (a partial block)", {3, 9, 8, 20}, 20, 3, 2, Padding::Same},
    // Images of at most 16 output pixels, or smaller than their input: backward weights by a
    // matrix product on AMX.
    {"cifar10-resnet layer3.res (4x4)", {4, 4, 4, 256}, 256, 3, 1, Padding::Same},
    {"4x4, 5x5 window, 24 -> 40 channels", {2, 4, 4, 24}, 40, 5, 1, Padding::Same},
    {"3x3 stride 2 to 4x4, 20 -> 24 channels", {2, 7, 8, 20}, 24, 3, 2, Padding::Same},
    {"mnist-convnet conv3 (10x10 valid to 8x8)", {2, 10, 10, 48}, 96, 3, 1, Padding::Valid},
};

} // namespace

class TestBf16 : public QObject
{
    Q_OBJECT

    std::unique_ptr<Ops> m_ref = makeReferenceOps();
    std::unique_ptr<Ops> m_f32 = cpu::makeOneDnnOps();
    std::unique_ptr<Ops> m_bf16;

    void requireBf16()
    {
        if (const std::string no = cpu::bf16Unavailable(); !no.empty()) QSKIP(no.c_str());
        if (!m_bf16) m_bf16 = cpu::makeOneDnnOps(Precision::BFloat16);
    }

private slots:
    void convolutionIsExactOnBf16Operands_data()
    {
        QTest::addColumn<int>("shape");
        QTest::addColumn<bool>("relu");
        for (int i = 0; i < int(std::size(kConvShapes)); ++i)
            for (const bool relu : {false, true})
                QTest::newRow(qPrintable(QStringLiteral("%1%2").arg(
                    kConvShapes[i].name, relu ? QStringLiteral(", bias, relu") : QString())))
                    << i << relu;
    }
    void convolutionIsExactOnBf16Operands()
    {
        requireBf16();
        QFETCH(int, shape);
        QFETCH(bool, relu);
        const ConvShape& s = kConvShapes[shape];
        const Conv2dDesc d = s.desc();
        Rng rng(7 + std::uint64_t(shape));
        const Tensor x = operand(d.inputShape(), rng, true);
        const Tensor w = operand(d.weightShape(), rng, true);
        const Tensor b = relu ? operand({s.out}, rng, true) : Tensor();
        const Activation act = relu ? Activation::Relu : Activation::None;
        // The reference's forward gives the mask; dy is exact in bfloat16 as well.
        Tensor yRef;
        m_ref->conv2dForward(d, f64(x), f64(w), b.empty() ? Tensor() : f64(b), yRef, act);
        Tensor dy = operand(d.outputShape(), rng, true);
        if (relu) dy = gradientAwayFromKink(dy, yRef);

        const ConvResult want =
            convolve(*m_ref, DType::Float64, d, x, w, b, act, dy, relu ? yRef : Tensor());
        const ConvResult got = convolve(*m_bf16, DType::Float32, d, x, w, b, act, dy, Tensor());
        // float32 accumulation of exact products, in whatever order the kernels sum.
        constexpr double kTol = 1e-5;
        QVERIFY2(normalisedError(got.y, want.y) < kTol,
                 qPrintable(QString::number(normalisedError(got.y, want.y))));
        QVERIFY2(normalisedError(got.dx, want.dx) < kTol,
                 qPrintable(QString::number(normalisedError(got.dx, want.dx))));
        QVERIFY2(normalisedError(got.dw, want.dw) < kTol,
                 qPrintable(QString::number(normalisedError(got.dw, want.dw))));
        if (relu)
            QVERIFY2(normalisedError(got.db, want.db) < kTol,
                     qPrintable(QString::number(normalisedError(got.db, want.db))));
        // The plan really runs in bfloat16 (falls back to float32 only where oneDNN has no kernel),
        // but for a single input channel, where bfloat16's dot products would run on padding.
        const std::string algorithm =
            d.win.c == 1 ? cpu::convolutionAlgorithm(*m_f32, d) : std::string("direct bf16");
        QCOMPARE(QString::fromStdString(cpu::convolutionAlgorithm(*m_bf16, d)),
                 QString::fromStdString(algorithm));
        if (d.win.c == 1) QCOMPARE(algorithm, std::string("direct"));
    }

    // Without AMX, a 3x3 convolution for which float32 runs a Winograd (oneDNN's or Towers') runs
    // that in bf16 too where it has enough input channels (fewer multiplications than bfloat16's
    // dot products gain: conv_plan.cpp): 64 or more in training, 128 or more in evaluation's
    // forward; with fewer channels, or with AMX, bfloat16. The ops run what they say.
    void wideThreeByThreeKeepsFloat32Winograd()
    {
        requireBf16();
        const bool amx = cpu::cpuInfo().isa.find("amx") != std::string::npos;
        for (const std::int64_t channels : {32, 64, 256}) {
            const Conv2dDesc d =
                makeConv2dDesc({4, 16, 16, channels}, 128, 3, 3, 1, 1, Padding::Same);
            // 4x fewer multiplications over 1024 pixels: a Winograd in float32 (on AVX-512, which
            // bfloat16 needs; where it were not, bfloat16 everywhere).
            const std::string f32 = cpu::convolutionAlgorithm(*m_f32, d);
            const bool winograd = f32 == "winograd 3x3";
            for (const auto use : {cpu::ConvUse::Training, cpu::ConvUse::Evaluation}) {
                const bool float32 =
                    !amx && winograd && channels >= (use == cpu::ConvUse::Training ? 64 : 128);
                QCOMPARE(QString::fromStdString(cpu::convolutionAlgorithm(*m_bf16, d, use)),
                         QString::fromStdString(float32 ? f32 : "direct bf16"));
            }
            // Evaluation's bfloat16 y where it computes in bfloat16, float32 where it does not.
            Rng rng(5);
            const Tensor x = operand(d.inputShape(), rng, false);
            const Tensor w = operand(d.weightShape(), rng, false);
            Conv2dDesc e = d;
            e.outputDType = DType::BFloat16;
            Tensor y;
            m_bf16->conv2dForward(e, x, w, Tensor(), y, Activation::None);
            QCOMPARE(y.dtype(),
                     !amx && winograd && channels >= 128 ? DType::Float32 : DType::BFloat16);
            // Training's forward computes as its plan says: float32 Winograd equals the float32
            // backend's bits, bfloat16 does not.
            Tensor y32, yb, saved32, savedb;
            m_f32->conv2dForwardTraining(d, x, w, Tensor(), y32, Activation::None, saved32);
            m_bf16->conv2dForwardTraining(d, x, w, Tensor(), yb, Activation::None, savedb);
            const bool same = std::memcmp(y32.raw(), yb.raw(), y32.bytes()) == 0;
            QCOMPARE(same, !amx && winograd && channels >= 64);
        }
    }

    // On AMX, the backward weights of a convolution on an image of at most 16 output pixels, or of
    // a stride-1 one whose output (at most 100 pixels) is smaller than its input, is oneDNN's
    // matrix product over the input's patches (conv_plan.cpp: 2.4-4x oneDNN's convolution kernel
    // there); elsewhere, and on larger or same-size 8x8 images, the convolution kernel. Either way
    // the fused backward (from the forward's bfloat16 input) and backward weights alone (converting
    // x itself) give the same bits.
    void smallImagesBackwardWeightsByMatrixProductOnAmx()
    {
        requireBf16();
        const bool amx = cpu::cpuInfo().isa.find("amx") != std::string::npos;
        for (const auto& [input, padding, small] :
             {std::tuple{Shape{4, 4, 4, 256}, Padding::Same, true},
              std::tuple{Shape{4, 8, 8, 64}, Padding::Same, false},
              std::tuple{Shape{4, 10, 10, 64}, Padding::Valid, true},
              std::tuple{Shape{2, 13, 13, 32}, Padding::Valid, false}}) {
            const Conv2dDesc d = makeConv2dDesc(input, 64, 3, 3, 1, 1, padding);
            Rng rng(31);
            const Tensor x = operand(d.inputShape(), rng, false);
            const Tensor w = operand(d.weightShape(), rng, false);
            const Tensor b = operand({64}, rng, false);
            const Tensor dy = operand(d.outputShape(), rng, false);
            const auto ops = cpu::makeOneDnnOps(Precision::BFloat16);
            const ConvResult fused =
                convolve(*ops, DType::Float32, d, x, w, b, Activation::None, dy, Tensor());
            const auto fresh = cpu::makeOneDnnOps(Precision::BFloat16);
            Tensor dw, db;
            fresh->conv2dBackwardWeights(d, x, dy, dw, &db);
            QVERIFY(std::memcmp(dw.raw(), fused.dw.raw(), dw.bytes()) == 0);
            QVERIFY(std::memcmp(db.raw(), fused.db.raw(), db.bytes()) == 0);
            for (Ops* o : {ops.get(), fresh.get()}) {
                const QStringList matmuls = primitivesRun(*o, "matmul");
                QVERIFY2(matmuls.size() == (amx && small ? 1 : 0),
                         qPrintable(QStringLiteral("%1 (AMX: %2): %3")
                                        .arg(QString::fromStdString(d.win.str()))
                                        .arg(amx)
                                        .arg(matmuls.join(u"; "))));
                if (!matmuls.isEmpty()) QVERIFY(matmuls.front().contains(u"amx"));
            }
        }
    }

    // On AMX, the backward data of a stride-1 convolution is oneDNN's forward convolution of g with
    // the weights transposed and turned (conv_plan.cpp: its forward kernel is the faster); with a
    // stride, or without AMX, its backward-data kernel. Backward data alone and the fused backward
    // give the same bits either way.
    void strideOneBackwardDataByForwardOnAmx()
    {
        requireBf16();
        const bool amx = cpu::cpuInfo().isa.find("amx") != std::string::npos;
        for (const int stride : {1, 2}) {
            const Conv2dDesc d =
                makeConv2dDesc({4, 9, 8, 24}, 40, 3, 3, stride, stride, Padding::Same);
            Rng rng(41);
            const Tensor x = operand(d.inputShape(), rng, false);
            const Tensor w = operand(d.weightShape(), rng, false);
            const Tensor dy = operand(d.outputShape(), rng, false);
            const auto ops = cpu::makeOneDnnOps(Precision::BFloat16);
            const ConvResult fused =
                convolve(*ops, DType::Float32, d, x, w, Tensor(), Activation::None, dy, Tensor());
            const auto fresh = cpu::makeOneDnnOps(Precision::BFloat16);
            Tensor dx;
            fresh->conv2dBackwardData(d, dy, w, dx);
            QVERIFY(std::memcmp(dx.raw(), fused.dx.raw(), dx.bytes()) == 0);
            // What backward data alone ran.
            const QStringList convolutions = primitivesRun(*fresh, "convolution");
            const bool viaForward = amx && stride == 1;
            QVERIFY2(convolutions.size() == 1 &&
                         convolutions.front().contains(viaForward ? u"forward" : u"backward_data"),
                     qPrintable(QStringLiteral("stride %1 (AMX: %2): %3")
                                    .arg(stride)
                                    .arg(amx)
                                    .arg(convolutions.join(u"; "))));
        }
    }

    void linearIsExactOnBf16Operands_data()
    {
        QTest::addColumn<int>("n");
        QTest::addColumn<int>("in");
        QTest::addColumn<int>("out");
        QTest::addColumn<bool>("relu");
        QTest::newRow("cifar10-tutorial local3 (batch 16), relu") << 16 << 2304 << 384 << true;
        QTest::newRow("softmax_linear, no activation") << 16 << 192 << 10 << false;
        QTest::newRow("odd sizes, batch 1, relu") << 1 << 37 << 13 << true;
        QTest::newRow("odd sizes, batch 5") << 5 << 70 << 33 << false;
    }
    void linearIsExactOnBf16Operands()
    {
        requireBf16();
        QFETCH(int, n);
        QFETCH(int, in);
        QFETCH(int, out);
        QFETCH(bool, relu);
        Rng rng(11 + std::uint64_t(in));
        const Tensor x = operand({n, in}, rng, true), w = operand({out, in}, rng, true);
        const Tensor b = operand({out}, rng, true);
        const Activation act = relu ? Activation::Relu : Activation::None;
        Tensor yRef, y;
        m_ref->linearForward(f64(x), f64(w), f64(b), yRef, act);
        m_bf16->linearForward(x, w, b, y, act);
        Tensor dy = operand({n, out}, rng, true);
        if (relu) dy = gradientAwayFromKink(dy, yRef);
        Tensor dxRef, dwRef, dbRef, dx, dw, db;
        m_ref->linearBackward(f64(x), f64(w), yRef, f64(dy), act, &dxRef, dwRef, &dbRef);
        m_bf16->linearBackward(x, w, y, dy, act, &dx, dw, &db);
        constexpr double kTol = 1e-5;
        QVERIFY2(normalisedError(y, yRef) < kTol,
                 qPrintable(QString::number(normalisedError(y, yRef))));
        QVERIFY2(normalisedError(dx, dxRef) < kTol,
                 qPrintable(QString::number(normalisedError(dx, dxRef))));
        QVERIFY2(normalisedError(dw, dwRef) < kTol,
                 qPrintable(QString::number(normalisedError(dw, dwRef))));
        QVERIFY2(normalisedError(db, dbRef) < kTol,
                 qPrintable(QString::number(normalisedError(db, dbRef))));
    }

    void linearBackwardReusesOnlyTheForwardsCopies()
    {
        // The fused backward takes the forward's bfloat16 copies of x and w (converted once a
        // step); given other tensors, it converts those: a fresh backend, which has no copies,
        // gives the same bits either way.
        requireBf16();
        Rng rng(21);
        const Tensor x = operand({8, 300}, rng, false), w = operand({20, 300}, rng, false);
        const Tensor w2 = operand({20, 300}, rng, false), dy = operand({8, 20}, rng, false);
        const Tensor b = operand({20}, rng, false);
        Tensor y, dx, dw, db, dxFresh, dwFresh, dbFresh;
        m_bf16->linearForward(x, w, b, y, Activation::Relu);
        for (const Tensor* weights : {&w, &w2}) {
            const auto fresh = cpu::makeOneDnnOps(Precision::BFloat16);
            m_bf16->linearBackward(x, *weights, y, dy, Activation::Relu, &dx, dw, &db);
            fresh->linearBackward(x, *weights, y, dy, Activation::Relu, &dxFresh, dwFresh,
                                  &dbFresh);
            QVERIFY(std::memcmp(dx.raw(), dxFresh.raw(), dx.bytes()) == 0);
            QVERIFY(std::memcmp(dw.raw(), dwFresh.raw(), dw.bytes()) == 0);
            QVERIFY(std::memcmp(db.raw(), dbFresh.raw(), db.bytes()) == 0);
        }
        // A forward's weights freed, and new ones (likely at the same address, as the op cases
        // draw theirs): the copy of the dead ones must not be taken for them.
        {
            const Tensor dead = operand({20, 300}, rng, false);
            m_bf16->linearForward(x, dead, b, y, Activation::Relu);
        }
        const Tensor w3 = operand({20, 300}, rng, false);
        const auto fresh = cpu::makeOneDnnOps(Precision::BFloat16);
        m_bf16->linearBackward(x, w3, y, dy, Activation::Relu, &dx, dw, &db);
        fresh->linearBackward(x, w3, y, dy, Activation::Relu, &dxFresh, dwFresh, &dbFresh);
        QVERIFY(std::memcmp(dx.raw(), dxFresh.raw(), dx.bytes()) == 0);
    }

    void roundsArbitraryOperands()
    {
        // The same ops on operands bfloat16 cannot hold: about 2^-9 relative per operand.
        requireBf16();
        const ConvShape& s = kConvShapes[1];
        const Conv2dDesc d = makeConv2dDesc(s.input, s.out, s.k, s.k, 1, 1, s.padding);
        Rng rng(3);
        const Tensor x = operand(d.inputShape(), rng, false);
        const Tensor w = operand(d.weightShape(), rng, false);
        const Tensor dy = operand(d.outputShape(), rng, false);
        const ConvResult f =
            convolve(*m_f32, DType::Float32, d, x, w, Tensor(), Activation::None, dy, Tensor());
        const ConvResult h =
            convolve(*m_bf16, DType::Float32, d, x, w, Tensor(), Activation::None, dy, Tensor());
        for (const auto& [name, a, b] : {std::tuple{"y", h.y, f.y}, std::tuple{"dx", h.dx, f.dx},
                                         std::tuple{"dw", h.dw, f.dw}}) {
            const double e = normalisedError(a, b);
            QVERIFY2(e > 1e-4 && e < 1e-2, qPrintable(QStringLiteral("%1: %2").arg(name).arg(e)));
        }
        Tensor yf, yh;
        const Tensor xl = operand({8, 300}, rng, false), wl = operand({20, 300}, rng, false);
        m_f32->linearForward(xl, wl, Tensor(), yf, Activation::None);
        m_bf16->linearForward(xl, wl, Tensor(), yh, Activation::None);
        const double e = normalisedError(yh, yf);
        QVERIFY2(e > 1e-4 && e < 1e-2, qPrintable(QStringLiteral("linear y: %1").arg(e)));
        QCOMPARE(m_bf16->precision(), Precision::BFloat16);
        QCOMPARE(m_f32->precision(), Precision::Float32);
    }

    void maskedGradientRoundsAsEveryBfloat16()
    {
        // The gradient a bf16 convolution's backward reads (dy masked by its fused ReLU), rounded
        // as every bfloat16 in Towers: nearest even, ties both ways, an overflow to infinity, and
        // a NaN kept a NaN even where its payload is only in the low half (a plain rounding add
        // carries it into infinity). The bias sums are the masked float32 values'. No bf16 CPU
        // needed: the loop is plain C++.
        const std::uint32_t special[] = {
            0x3f808000u, // a tie, to the even below
            0x3f818000u, // a tie, to the even above
            0x3f808001u, // just above a tie
            0x7f7fffffu, // the largest float: rounds to infinity
            0x7f800001u, // a NaN with its payload in the low half
            0xff800001u, // the same, negative
            0x7fc00000u, // a quiet NaN
            0x7f800000u, // infinity
            0x80000000u, // -0
            0x00000001u, // the smallest subnormal
        };
        const std::int64_t c = 7, rows = 600; // rows over two chunks and a partial one
        Rng rng(11);
        std::vector<float> dy(static_cast<std::size_t>(rows * c)), y(dy.size());
        for (std::size_t i = 0; i < dy.size(); ++i) {
            dy[i] = static_cast<float>(rng.uniform(-4, 4));
            y[i] = static_cast<float>(rng.uniform(-1, 1));
        }
        for (std::size_t i = 0; i < std::size(special); ++i) {
            std::memcpy(&dy[i * 3], &special[i], 4);
            y[i * 3] = 1.0f; // through the mask
        }
        for (const bool masked : {false, true}) {
            std::vector<std::uint16_t> out(dy.size());
            std::vector<float> sums(static_cast<std::size_t>(c));
            cpu::maskedGradientBf16(dy.data(), masked ? y.data() : nullptr, rows, c, out.data(),
                                    sums.data());
            std::vector<double> expectedSums(static_cast<std::size_t>(c));
            for (std::size_t i = 0; i < dy.size(); ++i) {
                const float v = !masked || y[i] > 0.0f ? dy[i] : 0.0f;
                expectedSums[i % std::size_t(c)] += v;
                QVERIFY2(out[i] == bfloat16Bits(v),
                         qPrintable(QStringLiteral("element %1 (%2, masked %3): %4, expected %5")
                                        .arg(i)
                                        .arg(double(v))
                                        .arg(masked)
                                        .arg(out[i], 4, 16, QChar('0'))
                                        .arg(bfloat16Bits(v), 4, 16, QChar('0'))));
            }
            QVERIFY(std::isnan(fromBfloat16Bits(out[4 * 3])));
            QVERIFY(std::isnan(fromBfloat16Bits(out[5 * 3])));
            QVERIFY(std::isinf(fromBfloat16Bits(out[3 * 3])));
            // The NaNs and infinities make every channel they are in non-finite; the others are
            // sums of finite floats, equal within the chunks' float32 accumulation.
            for (std::int64_t k = 0; k < c; ++k) {
                const double e = expectedSums[std::size_t(k)], s = sums[std::size_t(k)];
                if (!std::isfinite(e)) {
                    QVERIFY2(!std::isfinite(s), qPrintable(QStringLiteral("channel %1").arg(k)));
                    continue;
                }
                QVERIFY2(
                    std::fabs(s - e) <= 1e-4 * (1 + std::fabs(e)),
                    qPrintable(QStringLiteral("channel %1: %2, expected %3").arg(k).arg(s).arg(e)));
            }
        }
    }

    void towersTrainInBf16()
    {
        // Two towers x 8 against one tower x 16 on the same batches, bf16 both, and one tower in
        // float32: the losses follow float32's (within 3 %: the trajectories drift apart slowly),
        // the replicas stay identical, two towers' updates agree with one's up to the order of the
        // gradient sums while the runs have not parted, and a run is reproducible bit for bit.
        requireBf16();
        TowerSetOptions o;
        o.model = "cifar10-tutorial";
        o.towers = 2;
        o.precision = Precision::BFloat16;
        o.optimizer.kind = "momentum";
        o.dropout = false;
        TowerSetOptions single = o, float32 = o;
        single.towers = float32.towers = 1;
        float32.precision = Precision::Float32;
        TowerSet two(o), one(single), again(single), reference(float32);
        const Shape in = one.model().inputShape();
        Rng rng(5);
        Batch batch;
        batch.images = randomTensor({16, in[0], in[1], in[2]}, DType::Float32, rng, -1.5, 1.5);
        batch.labels = Tensor({16}, DType::Int32);
        for (int i = 0; i < 16; ++i) batch.labels.data<std::int32_t>()[i] = i % 10;
        batch.towers = 2;
        Batch whole = batch;
        whole.towers = 1;
        double first = 0, last = 0;
        for (int s = 0; s < 12; ++s) {
            const auto r = two.step(batch, s, 0.05);
            const auto f = reference.step(whole, s, 0.05);
            QVERIFY(r.finite);
            QVERIFY2(std::fabs(r.crossEntropy - f.crossEntropy) < 3e-2 * f.crossEntropy,
                     qPrintable(QStringLiteral("step %1: cross-entropy %2 in bf16, %3 in float32")
                                    .arg(s)
                                    .arg(r.crossEntropy)
                                    .arg(f.crossEntropy)));
            (s == 0 ? first : last) = r.crossEntropy;
            one.step(whole, s, 0.05);
            again.step(whole, s, 0.05);
            if (s == 2) {
                // Two towers against one, before the trajectories part: rounding to bfloat16 turns
                // the order of the gradient sums' last-bit differences into whole bfloat16 steps
                // now and then, and a max-pooling choice can follow (on this machine step 9 jumps
                // from 2e-7 to 4e-3; float32 stays at 4e-6 for all 12 steps).
                const auto& pa = two.model().parameters();
                const auto& pb = one.model().parameters();
                for (std::size_t i = 0; i < pa.size(); ++i) {
                    const double e = normalisedError(pa[i]->value, pb[i]->value);
                    QVERIFY2(e < 1e-5, qPrintable(QStringLiteral("after 3 steps, %1: %2")
                                                      .arg(QString::fromStdString(pa[i]->name))
                                                      .arg(e)));
                }
            }
        }
        QVERIFY2(last < 0.6 * first, qPrintable(QStringLiteral("%1 -> %2").arg(first).arg(last)));
        QVERIFY2(two.compareReplicas().empty(), two.compareReplicas().c_str());
        const auto& pb = one.model().parameters();
        const auto& pc = again.model().parameters();
        for (std::size_t i = 0; i < pb.size(); ++i)
            QVERIFY2(std::memcmp(pb[i]->value.raw(), pc[i]->value.raw(), pb[i]->value.bytes()) == 0,
                     qPrintable(QStringLiteral("%1 differs between two identical runs")
                                    .arg(QString::fromStdString(pb[i]->name))));
    }

    void refusesWhereItCannotRun()
    {
        // The reference backend is the float32 / float64 oracle; GPU towers run bf16 on a GPU of
        // compute capability 8.0 or later, and refuse it without one.
        try {
            makeBackendOps("reference", {0, false, Precision::BFloat16});
            QFAIL("the reference backend accepted bf16");
        } catch (const Unsupported& e) {
            QVERIFY2(std::string(e.what()).find("onednn") != std::string::npos, e.what());
        }
        const std::string gpuWhy = TrainConfig::precisionUnavailable("cuda", Precision::BFloat16);
        try {
            const auto gpu = makeBackendOps("cuda", {0, false, Precision::BFloat16});
            QVERIFY2(gpuWhy.empty(), gpuWhy.c_str());
            QVERIFY(gpu->precision() == Precision::BFloat16);
        } catch (const Unsupported& e) {
            QVERIFY2(!gpuWhy.empty(), e.what()); // no GPU, or none that runs bfloat16
        }
        const std::string no = cpu::bf16Unavailable();
        if (no.empty()) {
            QVERIFY(cpu::makeOneDnnOps(Precision::BFloat16) != nullptr);
            return; // the refusal on such a CPU: tst_train_command holds oneDNN to AVX-512 without
                    // bf16 (ONEDNN_MAX_CPU_ISA) in a process of its own
        }
        QVERIFY(no.find("--precision fp32") != std::string::npos);
        try {
            cpu::makeOneDnnOps(Precision::BFloat16);
            QFAIL("bf16 accepted where bf16Unavailable() says no");
        } catch (const Unsupported& e) {
            QCOMPARE(std::string(e.what()), no);
        }
    }

    void precisionNames()
    {
        QCOMPARE(parsePrecision("fp32"), Precision::Float32);
        QCOMPARE(parsePrecision("bf16"), Precision::BFloat16);
        QCOMPARE(std::string(precisionName(Precision::BFloat16)), std::string("bf16"));
        try {
            parsePrecision("fp16");
            QFAIL("fp16 accepted");
        } catch (const InvalidArgument& e) {
            QCOMPARE(std::string(e.what()),
                     std::string("unknown precision 'fp16' (known: fp32, bf16)"));
        }
    }
};

QTEST_APPLESS_MAIN(TestBf16)
#include "tst_bf16.moc"
