// The sliding-window ops: convolution, max pooling and LRN. The reference backend is pinned by
// small cases computed by hand and by finite differences in double; oneDNN is then compared with
// the reference on random inputs, including the cifar10-tutorial shapes. The oneDNN backend's LRN
// is Towers' Highway kernel: it is compared and checked by finite differences on every SIMD
// target it was compiled for that this CPU can run.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/cpu/lrn_hwy.h"
#include "engine/cpu/onednn_ops.h"
#include "engine/cpu/pool_hwy.h"
#include "engine/cpu/simd_target.h"
#include "engine/ops/ops.h"
#include "gradcheck.h"
#include "simd_targets.h" // TOWERS_RUN_ON_TARGET, for addTargetRows' rows

using namespace towers::engine;
using towers::test::checkGradient;
using towers::test::distinctTensor;
using towers::test::dot;
using towers::test::normalisedError;
using towers::test::randomTensor;

namespace {

struct ConvCase
{
    Shape x;
    std::int64_t outC = 1;
    int kh = 1, kw = 1, sh = 1, sw = 1;
    Padding padding = Padding::Same;
    ExplicitPads pads;
    Conv2dDesc desc() const { return makeConv2dDesc(x, outC, kh, kw, sh, sw, padding, pads); }
};

struct PoolCase
{
    Shape x;
    int kh = 1, kw = 1, sh = 1, sw = 1;
    Padding padding = Padding::Same;
    ExplicitPads pads;
    Pool2dDesc desc() const { return makePool2dDesc(x, kh, kw, sh, sw, padding, pads); }
};

struct LrnCase
{
    Shape x;
    int radius = 2;
    double bias = 1, alpha = 1, beta = 0.5;
    LrnDesc desc() const { return makeLrnDesc(x, radius, bias, alpha, beta); }
};

} // namespace

Q_DECLARE_METATYPE(ConvCase)
Q_DECLARE_METATYPE(PoolCase)
Q_DECLARE_METATYPE(LrnCase)

namespace {

struct NamedConv
{
    const char* name;
    ConvCase c;
};

// Small shapes that exercise the geometry: odd sizes, strides, SAME with asymmetric pads, VALID
// with unused trailing pixels, explicit pads, non-square kernels and strides, 1x1 and 5x5.
std::vector<NamedConv> smallConvCases()
{
    return {
        {"3x3 s1 same C3", {{2, 7, 6, 3}, 4, 3, 3, 1, 1, Padding::Same, {}}},
        {"5x5 s2 same C5 odd, pads 2/2 1/2", {{2, 9, 8, 5}, 3, 5, 5, 2, 2, Padding::Same, {}}},
        {"4x4 s1 same asymmetric 1/2", {{1, 8, 7, 3}, 2, 4, 4, 1, 1, Padding::Same, {}}},
        {"3x3 s2 valid, unused last column", {{2, 7, 8, 3}, 4, 3, 3, 2, 2, Padding::Valid, {}}},
        {"1x1 s1 C5", {{2, 5, 6, 5}, 6, 1, 1, 1, 1, Padding::Same, {}}},
        {"1x1 s2 valid", {{1, 5, 5, 3}, 2, 1, 1, 2, 2, Padding::Valid, {}}},
        {"5x5 valid C5", {{1, 6, 7, 5}, 3, 5, 5, 1, 1, Padding::Valid, {}}},
        {"3x2 s2x1 explicit t1 l0 b2 r1",
         {{2, 7, 6, 3}, 4, 3, 2, 2, 1, Padding::Explicit, {1, 0, 2, 1}}},
        {"2x2 s2 same even", {{1, 6, 6, 5}, 3, 2, 2, 2, 2, Padding::Same, {}}},
    };
}

struct NamedPool
{
    const char* name;
    PoolCase p;
};

std::vector<NamedPool> smallPoolCases()
{
    return {
        {"3x3/2 same 7x8, pads 1/1 0/1", {{2, 7, 8, 3}, 3, 3, 2, 2, Padding::Same, {}}},
        {"3x3/2 same 8x8, pads 0/1", {{1, 8, 8, 4}, 3, 3, 2, 2, Padding::Same, {}}},
        {"2x2/2 valid 7x7", {{1, 7, 7, 2}, 2, 2, 2, 2, Padding::Valid, {}}},
        {"3x3/1 same, overlapping", {{1, 5, 6, 3}, 3, 3, 1, 1, Padding::Same, {}}},
        {"3x2 s2x1 explicit t1 l1 b2 r0",
         {{2, 6, 5, 2}, 3, 2, 2, 1, Padding::Explicit, {1, 1, 2, 0}}},
    };
}

struct NamedLrn
{
    const char* name;
    LrnCase l;
};

std::vector<NamedLrn> smallLrnCases()
{
    return {
        {"r2 C5", {{2, 3, 4, 5}, 2, 1.0, 0.3, 0.75}},
        {"r0 C4", {{1, 2, 3, 4}, 0, 2.0, 0.5, 0.5}},
        {"r4 C12", {{1, 3, 3, 12}, 4, 1.0, 0.1, 0.75}},
        {"r5 wider than C3", {{1, 2, 2, 3}, 5, 1.0, 0.2, 1.0}},
        {"r1 C16 bias 0.5", {{2, 2, 2, 16}, 1, 0.5, 1.0, 0.6}},
        {"r3 C1", {{2, 2, 2, 1}, 3, 1.0, 0.5, 0.75}},
        // Whole vectors and a tail of 3 channels on every SIMD width.
        {"r7 C67 batch 1", {{1, 2, 3, 67}, 7, 1.0, 0.05, 0.75}},
        {"r9 C300 beta 0.9", {{1, 1, 2, 300}, 9, 2.0, 0.02, 0.9}},
    };
}

// The LRN cases for the SIMD kernels: the small ones and the cifar10-tutorial layers at batch 2.
std::vector<NamedLrn> lrnKernelCases()
{
    auto cases = smallLrnCases();
    cases.push_back({"tutorial lrn, 12x12", {{2, 12, 12, 64}, 4, 1.0, 0.001 / 9, 0.75}});
    cases.push_back({"tutorial shape, strong alpha", {{2, 12, 12, 64}, 4, 1.0, 0.05, 0.75}});
    return cases;
}

// One row per SIMD target Towers' kernels were compiled for and case: "AVX2: r2 C5".
template <class Named, class Case>
void addTargetRows(const std::vector<Named>& cases, Case Named::*member, const char* column)
{
    QTest::addColumn<qint64>("target");
    QTest::addColumn<QString>("targetName");
    QTest::addColumn<bool>("supported");
    QTest::addColumn<Case>(column);
    for (const auto& t : cpu::simdTargets())
        for (const auto& c : cases)
            QTest::newRow((t.name + ": " + c.name).c_str())
                << qint64(t.id) << QString::fromStdString(t.name) << t.supported << c.*member;
}

// The pooling cases for the SIMD kernels: the small ones, channels in whole vectors and a tail on
// every SIMD width, and the cifar10-tutorial and mnist-convnet layers at batch 2.
std::vector<NamedPool> poolKernelCases()
{
    auto cases = smallPoolCases();
    cases.push_back({"3x3/2 same C67", {{1, 6, 7, 67}, 3, 3, 2, 2, Padding::Same, {}}});
    cases.push_back({"tutorial pool1", {{2, 24, 24, 64}, 3, 3, 2, 2, Padding::Same, {}}});
    cases.push_back({"mnist pool2", {{2, 8, 8, 512}, 2, 2, 2, 2, Padding::Valid, {}}});
    return cases;
}

constexpr double kGradTolerance = 1e-6;
// Convolution is linear in each of x, w and b, so a central difference is exact for any step; a
// large one keeps the rounding of f (~1e-14) from swamping gradient elements of 1e-4.
constexpr double kLinearStep = 1e-3;
// Max pooling is linear between switches of its argmax; distinctTensor keeps values 1e-3 apart, so
// a step well below that never crosses one.
constexpr double kPoolStep = 1e-4;
constexpr double kBackendTolerance = 1e-5;
// Central differences of a float32 kernel: a step of 4e-3 keeps the rounding of its outputs
// (~1e-7 relative, over the 2r + 1 outputs that change) near 1e-4 of the slope, and the truncation
// error (the third derivative times h^2 / 6) as small. A wrong term is orders of magnitude larger.
constexpr double kFloatStep = 4e-3;
constexpr double kFloatGradTolerance = 2e-3;

// The normalised error between `analytic` (the gradient of the scalar f with respect to the
// float32 x) and central differences of f: every element up to `maxChecks`, else that many drawn
// at random. Each step is taken as float32 has it, so that rounding x +- h costs no accuracy.
double float32GradientError(const std::function<double()>& f, Tensor& x, const Tensor& analytic,
                            double step, std::int64_t maxChecks, Rng& rng)
{
    const std::int64_t n = x.numel();
    const std::int64_t checks = std::min<std::int64_t>(n, maxChecks);
    float* px = x.data<float>();
    double num = 0, den = 0;
    for (std::int64_t k = 0; k < checks; ++k) {
        const std::int64_t i =
            n == checks ? k : static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(n)));
        const float orig = px[i];
        const float up = static_cast<float>(orig + step);
        const float down = static_cast<float>(orig - step);
        px[i] = up;
        const double fp = f();
        px[i] = down;
        const double fm = f();
        px[i] = orig;
        const double numeric = (fp - fm) / (static_cast<double>(up) - down);
        const double e = analytic.at(i) - numeric;
        num += e * e;
        den += numeric * numeric;
    }
    return std::sqrt(num / std::max(den, 1e-30));
}

// oneDNN's result `got` against the reference's `want`, by normalised error.
#define TOWERS_COMPARE_BACKENDS(got, want)                                                         \
    do {                                                                                           \
        const double err_ = normalisedError(got, want);                                            \
        QVERIFY2(err_ < kBackendTolerance,                                                         \
                 qPrintable(QStringLiteral(#got ": normalised error %1").arg(err_)));              \
    } while (false)

Tensor fromValues(const Shape& shape, DType dtype, const std::vector<double>& values)
{
    Tensor t(shape, dtype);
    for (std::int64_t i = 0; i < t.numel(); ++i) t.setAt(i, values.at(static_cast<std::size_t>(i)));
    return t;
}

void compareValues(const Tensor& t, const std::vector<double>& expected, double tolerance)
{
    QCOMPARE(t.numel(), static_cast<std::int64_t>(expected.size()));
    for (std::int64_t i = 0; i < t.numel(); ++i) {
        const double e = expected[static_cast<std::size_t>(i)];
        if (std::fabs(t.at(i) - e) > tolerance * std::max(1.0, std::fabs(e)))
            QFAIL(qPrintable(QStringLiteral("element %1: got %2, expected %3")
                                 .arg(i)
                                 .arg(t.at(i), 0, 'g', 17)
                                 .arg(e, 0, 'g', 17)));
    }
}

} // namespace

class TestOpsWindow : public QObject
{
    Q_OBJECT

    std::unique_ptr<Ops> m_ref = makeReferenceOps();
    std::unique_ptr<Ops> m_dnn = cpu::makeOneDnnOps();

private slots:
    // --- the oracle pinned by hand ---

    void referenceConvByHand_data()
    {
        QTest::addColumn<int>("dtype");
        QTest::newRow("float64") << int(DType::Float64);
        QTest::newRow("float32") << int(DType::Float32);
    }
    void referenceConvByHand()
    {
        QFETCH(int, dtype);
        const auto dt = static_cast<DType>(dtype);
        // 1 channel, 3x3 image 1..9, 2x2 kernel [[1, 2], [3, 4]], SAME: the one pad row and column
        // go to the bottom/right, so y[i][j] = x[i][j] + 2 x[i][j+1] + 3 x[i+1][j] + 4 x[i+1][j+1].
        const auto d = makeConv2dDesc({1, 3, 3, 1}, 1, 2, 2, 1, 1, Padding::Same);
        QCOMPARE(d.win.padTop, 0);
        QCOMPARE(d.win.padBottom, 1);
        const Tensor x = fromValues({1, 3, 3, 1}, dt, {1, 2, 3, 4, 5, 6, 7, 8, 9});
        const Tensor w = fromValues({1, 1, 2, 2}, dt, {1, 2, 3, 4});
        Tensor y;
        m_ref->conv2dForward(d, x, w, Tensor(), y, Activation::None);
        QCOMPARE(y.shape(), Shape({1, 3, 3, 1}));
        compareValues(y, {37, 47, 21, 67, 77, 33, 23, 26, 9}, 1e-12);
        // A bias of -30 and the fused ReLU.
        m_ref->conv2dForward(d, x, w, fromValues({1}, dt, {-30}), y, Activation::Relu);
        compareValues(y, {7, 17, 0, 37, 47, 3, 0, 0, 0}, 1e-12);

        // Channels: 1x1 kernel, x one row of two pixels with channels (1, 2) and (3, 4), OIHW
        // weights w[o][c] = [[1, 10], [100, 1000]], so y[pixel][o] = sum_c w[o][c] x[pixel][c].
        const auto d2 = makeConv2dDesc({1, 1, 2, 2}, 2, 1, 1, 1, 1, Padding::Valid);
        const Tensor x2 = fromValues({1, 1, 2, 2}, dt, {1, 2, 3, 4});
        const Tensor w2 = fromValues({2, 2, 1, 1}, dt, {1, 10, 100, 1000});
        m_ref->conv2dForward(d2, x2, w2, fromValues({2}, dt, {0.5, -0.5}), y, Activation::None);
        compareValues(y, {21.5, 2099.5, 43.5, 4299.5}, 1e-12);
        // The transposes, by hand as well: dx[pixel][c] = sum_o dy[pixel][o] w[o][c],
        // dw[o][c] = sum_pixel dy[pixel][o] x[pixel][c], db[o] = sum_pixel dy[pixel][o].
        const Tensor dy = fromValues({1, 1, 2, 2}, dt, {1, 2, 3, 4});
        Tensor dx, dw, db;
        m_ref->conv2dBackwardData(d2, dy, w2, dx);
        compareValues(dx, {201, 2010, 403, 4030}, 1e-12);
        m_ref->conv2dBackwardWeights(d2, x2, dy, dw, &db);
        compareValues(dw, {10, 14, 14, 20}, 1e-12);
        compareValues(db, {4, 6}, 1e-12);
    }

    void referencePoolByHand()
    {
        // SAME 3x3/2 on 4x4 pads 0 at the top/left and 1 at the bottom/right. All values are
        // negative, so a pad counted as 0 would win; a symmetric pad (PyTorch's padding=1) would
        // give -2 at [0][1] instead of -3.
        const auto d = makePool2dDesc({1, 4, 4, 1}, 3, 3, 2, 2, Padding::Same);
        QCOMPARE(d.win.oh, 2);
        std::vector<double> v;
        for (int i = 1; i <= 16; ++i) v.push_back(-i);
        for (DType dt : {DType::Float64, DType::Float32}) {
            const Tensor x = fromValues({1, 4, 4, 1}, dt, v);
            Tensor y, ws, dx;
            m_ref->maxPoolForward(d, x, y, ws);
            compareValues(y, {-1, -3, -9, -11}, 0);
            const Tensor dy = fromValues({1, 2, 2, 1}, dt, {1, 2, 3, 4});
            m_ref->maxPoolBackward(d, x, y, dy, ws, dx);
            compareValues(dx, {1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4, 0, 0, 0, 0, 0}, 0);
        }
        // Overlapping windows that pick the same element add their gradients: 3x3/1 SAME on a
        // 1x3 row whose middle is the maximum of every window.
        const auto d2 = makePool2dDesc({1, 1, 3, 1}, 3, 3, 1, 1, Padding::Same);
        const Tensor x2 = fromValues({1, 1, 3, 1}, DType::Float64, {1, 5, 2});
        Tensor y, ws, dx;
        m_ref->maxPoolForward(d2, x2, y, ws);
        compareValues(y, {5, 5, 5}, 0);
        m_ref->maxPoolBackward(d2, x2, y, fromValues({1, 1, 3, 1}, DType::Float64, {1, 2, 4}), ws,
                               dx);
        compareValues(dx, {0, 7, 0}, 0);
    }

    // Average pooling leaves pads out of a window's count: SAME 3x3/2 on 4x4 (pads 0 top/left, 1
    // bottom/right) averages 9, 6, 6 and 4 elements; backward gives each its window's share.
    void referenceAvgPoolByHand()
    {
        const auto d = makePool2dDesc({1, 4, 4, 1}, 3, 3, 2, 2, Padding::Same);
        std::vector<double> v;
        for (int i = 1; i <= 16; ++i) v.push_back(i);
        for (DType dt : {DType::Float64, DType::Float32}) {
            const Tensor x = fromValues({1, 4, 4, 1}, dt, v);
            Tensor y, dx;
            m_ref->avgPoolForward(d, x, y);
            // (1+2+3+5+6+7+9+10+11)/9, (3+4+7+8+11+12)/6, (9+10+11+13+14+15)/6, (11+12+15+16)/4
            compareValues(y, {6, 7.5, 12, 13.5}, 1e-6);
            const Tensor dy = fromValues({1, 2, 2, 1}, dt, {9, 6, 6, 4});
            m_ref->avgPoolBackward(d, dy, dx);
            // Shares of 1 from each covering window: the middle row and column overlap.
            compareValues(dx, {1, 1, 2, 1, 1, 1, 2, 1, 2, 2, 4, 2, 1, 1, 2, 1}, 1e-6);
        }
        // Global: each channel's mean.
        const auto g = makePool2dDesc({1, 2, 2, 2}, 2, 2, 2, 2, Padding::Valid);
        Tensor y;
        m_ref->avgPoolForward(
            g, fromValues({1, 2, 2, 2}, DType::Float64, {1, 10, 2, 20, 3, 30, 4, 40}), y);
        compareValues(y, {2.5, 25}, 0);
    }

    void referenceLrnByHand()
    {
        // One pixel, channels (1, 2, 3), r = 1, bias 1, alpha 0.1, beta 0.5:
        // sqr_sum = (1+4, 1+4+9, 4+9) = (5, 14, 13), so y = x / sqrt(1.5, 2.4, 2.3).
        for (DType dt : {DType::Float64, DType::Float32}) {
            const double tol = dt == DType::Float64 ? 1e-15 : 1e-7;
            const Tensor x = fromValues({1, 1, 1, 3}, dt, {1, 2, 3});
            Tensor y, ws;
            m_ref->lrnForward(makeLrnDesc({1, 1, 1, 3}, 1, 1.0, 0.1, 0.5), x, y, ws);
            compareValues(y, {0.8164965809277261, 1.2909944487358056, 1.978141420187361}, tol);
            // A radius beyond the channels clips: every channel sums all three squares (14).
            m_ref->lrnForward(makeLrnDesc({1, 1, 1, 3}, 5, 1.0, 0.1, 0.5), x, y, ws);
            compareValues(y, {0.6454972243679028, 1.2909944487358056, 1.9364916731037083}, tol);
            // r = 0, beta 1: y = x / (2 + x^2).
            m_ref->lrnForward(makeLrnDesc({1, 1, 1, 3}, 0, 2.0, 1.0, 1.0), x, y, ws);
            compareValues(y, {1.0 / 3, 2.0 / 6, 3.0 / 11}, tol);
        }
    }

    // --- the oracle's gradients by finite differences (float64) ---

    void referenceConvGradients_data()
    {
        QTest::addColumn<ConvCase>("conv");
        QTest::addColumn<bool>("bias");
        for (const auto& c : smallConvCases()) {
            QTest::newRow((std::string(c.name) + ", bias").c_str()) << c.c << true;
            QTest::newRow((std::string(c.name) + ", no bias").c_str()) << c.c << false;
        }
    }
    void referenceConvGradients()
    {
        QFETCH(ConvCase, conv);
        QFETCH(bool, bias);
        const Conv2dDesc d = conv.desc();
        Rng rng(11);
        Tensor x = randomTensor(d.inputShape(), DType::Float64, rng);
        Tensor w = randomTensor(d.weightShape(), DType::Float64, rng);
        Tensor b = bias ? randomTensor({d.outChannels}, DType::Float64, rng) : Tensor();
        const Tensor r = randomTensor(d.outputShape(), DType::Float64, rng);
        Tensor y, dx, dw, db;
        // f = <y, r>, so dy = r.
        const auto f = [&] {
            m_ref->conv2dForward(d, x, w, b, y, Activation::None);
            return dot(y, r);
        };
        m_ref->conv2dBackwardData(d, r, w, dx);
        m_ref->conv2dBackwardWeights(d, x, r, dw, bias ? &db : nullptr);
        QCOMPARE(dx.shape(), d.inputShape());
        QCOMPARE(dw.shape(), d.weightShape());
        const auto gx = checkGradient(f, x, dx, kLinearStep, 256, 1);
        QVERIFY2(gx.maxRelError < kGradTolerance, ("dx: " + gx.str()).c_str());
        const auto gw = checkGradient(f, w, dw, kLinearStep, 256, 2);
        QVERIFY2(gw.maxRelError < kGradTolerance, ("dw: " + gw.str()).c_str());
        if (bias) {
            const auto gb = checkGradient(f, b, db, kLinearStep, 256, 3);
            QVERIFY2(gb.maxRelError < kGradTolerance, ("db: " + gb.str()).c_str());
        }
    }

    void referencePoolGradients_data()
    {
        QTest::addColumn<PoolCase>("pool");
        for (const auto& p : smallPoolCases()) QTest::newRow(p.name) << p.p;
    }
    void referencePoolGradients()
    {
        QFETCH(PoolCase, pool);
        const Pool2dDesc d = pool.desc();
        Rng rng(12);
        // Distinct values: no ties, and finite differences never cross a switch of the maximum.
        Tensor x = distinctTensor(d.inputShape(), DType::Float64, rng);
        const Tensor r = randomTensor(d.outputShape(), DType::Float64, rng);
        Tensor y, ws, dx;
        const auto f = [&] {
            m_ref->maxPoolForward(d, x, y, ws);
            return dot(y, r);
        };
        f();
        m_ref->maxPoolBackward(d, x, y, r, ws, dx);
        const auto g = checkGradient(f, x, dx, kPoolStep, 256, 1);
        QVERIFY2(g.maxRelError < kGradTolerance, g.str().c_str());
    }

    // f = <avgpool(x), r> is linear in x: the difference quotient is exact but for rounding.
    void referenceAvgPoolGradients_data()
    {
        QTest::addColumn<PoolCase>("pool");
        for (const auto& p : smallPoolCases()) QTest::newRow(p.name) << p.p;
    }
    void referenceAvgPoolGradients()
    {
        QFETCH(PoolCase, pool);
        const Pool2dDesc d = pool.desc();
        Rng rng(13);
        Tensor x = randomTensor(d.inputShape(), DType::Float64, rng);
        const Tensor r = randomTensor(d.outputShape(), DType::Float64, rng);
        Tensor y, dx;
        const auto f = [&] {
            m_ref->avgPoolForward(d, x, y);
            return dot(y, r);
        };
        f();
        m_ref->avgPoolBackward(d, r, dx);
        const auto g = checkGradient(f, x, dx, kPoolStep, 256, 1);
        QVERIFY2(g.maxRelError < kGradTolerance, g.str().c_str());
    }

    void referenceLrnGradients_data()
    {
        QTest::addColumn<LrnCase>("lrn");
        for (const auto& l : smallLrnCases()) QTest::newRow(l.name) << l.l;
    }
    void referenceLrnGradients()
    {
        QFETCH(LrnCase, lrn);
        const LrnDesc d = lrn.desc();
        Rng rng(13);
        Tensor x = randomTensor(d.shape, DType::Float64, rng, -2.0, 2.0);
        const Tensor r = randomTensor(d.shape, DType::Float64, rng);
        Tensor y, ws, dx;
        const auto f = [&] {
            m_ref->lrnForward(d, x, y, ws);
            return dot(y, r);
        };
        f();
        m_ref->lrnBackward(d, x, y, r, ws, dx);
        const auto g = checkGradient(f, x, dx);
        QVERIFY2(g.maxRelError < kGradTolerance, g.str().c_str());
    }

    // --- oneDNN against the reference (float32 both) ---

    void onednnConv_data()
    {
        QTest::addColumn<ConvCase>("conv");
        QTest::addColumn<bool>("bias");
        QTest::addColumn<bool>("relu");
        for (const auto& c : smallConvCases()) {
            QTest::newRow(c.name) << c.c << true << false;
            QTest::newRow((std::string(c.name) + ", no bias").c_str()) << c.c << false << false;
        }
        QTest::newRow("3x3 s1 same C3, relu") << smallConvCases()[0].c << true << true;
        QTest::newRow("4x4 asymmetric, relu, no bias") << smallConvCases()[2].c << false << true;
        // The cifar10-tutorial layers at batch 2.
        const ConvCase conv1{{2, 24, 24, 3}, 64, 5, 5, 1, 1, Padding::Same, {}};
        const ConvCase conv2{{2, 12, 12, 64}, 64, 5, 5, 1, 1, Padding::Same, {}};
        QTest::newRow("tutorial conv1") << conv1 << true << false;
        QTest::newRow("tutorial conv1, relu") << conv1 << true << true;
        QTest::newRow("tutorial conv2, relu") << conv2 << true << true;
    }
    void onednnConv()
    {
        QFETCH(ConvCase, conv);
        QFETCH(bool, bias);
        QFETCH(bool, relu);
        const Conv2dDesc d = conv.desc();
        const Activation act = relu ? Activation::Relu : Activation::None;
        Rng rng(21);
        // Twice: the second call reuses the cached primitives with new data and new weights,
        // which catches a weights reorder that ran only once.
        for (int round = 0; round < 2; ++round) {
            const DType f32 = DType::Float32;
            const Tensor x = randomTensor(d.inputShape(), f32, rng);
            const Tensor w = randomTensor(d.weightShape(), f32, rng);
            const Tensor b = bias ? randomTensor({d.outChannels}, f32, rng) : Tensor();
            const Tensor dy = randomTensor(d.outputShape(), f32, rng);
            Tensor y0, y1, dx0, dx1, dw0, dw1, db0, db1;
            m_ref->conv2dForward(d, x, w, b, y0, act);
            m_dnn->conv2dForward(d, x, w, b, y1, act);
            QCOMPARE(y1.shape(), d.outputShape());
            TOWERS_COMPARE_BACKENDS(y1, y0);
            m_ref->conv2dBackwardData(d, dy, w, dx0);
            m_dnn->conv2dBackwardData(d, dy, w, dx1);
            QCOMPARE(dx1.shape(), d.inputShape());
            TOWERS_COMPARE_BACKENDS(dx1, dx0);
            m_ref->conv2dBackwardWeights(d, x, dy, dw0, bias ? &db0 : nullptr);
            m_dnn->conv2dBackwardWeights(d, x, dy, dw1, bias ? &db1 : nullptr);
            QCOMPARE(dw1.shape(), d.weightShape());
            TOWERS_COMPARE_BACKENDS(dw1, dw0);
            if (bias) TOWERS_COMPARE_BACKENDS(db1, db0);
        }
    }

    // --- the oneDNN backend's max pooling (Towers' Highway kernel) on every SIMD target ---

    void onednnPool_data()
    {
        auto cases = poolKernelCases();
        cases.push_back({"tutorial pool2", {{2, 12, 12, 64}, 3, 3, 2, 2, Padding::Same, {}}});
        // More window positions than a byte indexes: oneDNN's own kernel and workspace.
        cases.push_back(
            {"17x17 window, 289 positions", {{2, 18, 17, 5}, 17, 17, 1, 1, Padding::Valid, {}}});
        addTargetRows(cases, &NamedPool::p, "pool");
    }
    void onednnPool()
    {
        TOWERS_RUN_ON_TARGET();
        QFETCH(PoolCase, pool);
        QCOMPARE(QString::fromStdString(cpu::poolTargetName()), targetName);
        const Pool2dDesc d = pool.desc();
        Rng rng(22);
        // Twice: the second round reuses the outputs and the workspace.
        Tensor y1, ws1, dx1;
        for (int round = 0; round < 2; ++round) {
            // Distinct values, so both backends agree on every argmax.
            const Tensor x = distinctTensor(d.inputShape(), DType::Float32, rng);
            const Tensor dy = randomTensor(d.outputShape(), DType::Float32, rng);
            Tensor y0, ws0, dx0;
            m_ref->maxPoolForward(d, x, y0, ws0);
            m_dnn->maxPoolForward(d, x, y1, ws1);
            QCOMPARE(ws1.dtype(), DType::UInt8);
            // A selection: bit for bit.
            QCOMPARE(normalisedError(y1, y0), 0.0);
            m_ref->maxPoolBackward(d, x, y0, dy, ws0, dx0);
            m_dnn->maxPoolBackward(d, x, y1, dy, ws1, dx1);
            TOWERS_COMPARE_BACKENDS(dx1, dx0);
        }
    }

    // The kernels over any split of their pixels, as the threads' ranges cut them (mid-row and
    // mid-image: each range counts its pixels' coordinates on from its first): the same outputs,
    // workspace and gradients, bit for bit, as one range over all.
    void poolKernelRanges_data() { addTargetRows(poolKernelCases(), &NamedPool::p, "pool"); }
    void poolKernelRanges()
    {
        TOWERS_RUN_ON_TARGET();
        QFETCH(PoolCase, pool);
        const Window2d g = pool.desc().win;
        Rng rng(31);
        const Tensor x = distinctTensor(pool.desc().inputShape(), DType::Float32, rng);
        const Tensor dy = randomTensor(pool.desc().outputShape(), DType::Float32, rng);
        const std::int64_t outPixels = g.n * g.oh * g.ow, inPixels = g.n * g.h * g.w;
        const auto outCount = static_cast<std::size_t>(outPixels * g.c);
        const auto inCount = static_cast<std::size_t>(inPixels * g.c);
        std::vector<float> y0(outCount), y1(outCount, -1.0f), dx0(inCount), dx1(inCount, -1.0f);
        std::vector<std::uint8_t> ws0(outCount), ws1(outCount, 255);
        cpu::maxPoolForwardPixels(g, x.data<float>(), y0.data(), ws0.data(), 0, outPixels);
        cpu::maxPoolBackwardPixels(g, dy.data<float>(), ws0.data(), dx0.data(), 0, inPixels);
        // Ranges of 1, 2, 3, ... 7 pixels, then again.
        const auto split = [](std::int64_t n, const auto& kernel) {
            for (std::int64_t b = 0, len = 1; b < n; b += len, len = len % 7 + 1)
                kernel(b, std::min(n, b + len));
        };
        split(outPixels, [&](std::int64_t b, std::int64_t e) {
            cpu::maxPoolForwardPixels(g, x.data<float>(), y1.data(), ws1.data(), b, e);
        });
        split(inPixels, [&](std::int64_t b, std::int64_t e) {
            cpu::maxPoolBackwardPixels(g, dy.data<float>(), ws1.data(), dx1.data(), b, e);
        });
        QVERIFY(y1 == y0);
        QVERIFY(ws1 == ws0);
        QVERIFY(dx1 == dx0);
    }

    // The kernel's backward against central differences of its own forward, in float32. Between
    // switches of a window's maximum, f = <maxpool(x), r> is linear in x and y copies x exactly, so
    // the difference quotient is exact but for the rounding of f, and a wrong route (a dy sent to
    // the wrong element, added twice or dropped) is off by a whole dy.
    void onednnPoolGradients_data() { addTargetRows(poolKernelCases(), &NamedPool::p, "pool"); }
    void onednnPoolGradients()
    {
        TOWERS_RUN_ON_TARGET();
        QFETCH(PoolCase, pool);
        const Pool2dDesc d = pool.desc();
        Rng rng(25);
        // 1e-3 apart: a step of 2e-4 never crosses a switch of the maximum.
        Tensor x = distinctTensor(d.inputShape(), DType::Float32, rng);
        const Tensor r = randomTensor(d.outputShape(), DType::Float32, rng);
        Tensor y, ws, dx;
        const auto f = [&] {
            m_dnn->maxPoolForward(d, x, y, ws);
            return dot(y, r);
        };
        f();
        m_dnn->maxPoolBackward(d, x, y, r, ws, dx);
        const double err = float32GradientError(f, x, dx, 2e-4, 512, rng);
        QVERIFY2(err < 1e-6,
                 qPrintable(
                     QStringLiteral("%1: normalised gradient error %2").arg(targetName).arg(err)));
    }

    // oneDNN's average pooling (pooling_avg_exclude_padding) against central differences of its
    // own forward in float32, on every SIMD target, and against the reference.
    void onednnAvgPoolGradients_data() { addTargetRows(poolKernelCases(), &NamedPool::p, "pool"); }
    void onednnAvgPoolGradients()
    {
        TOWERS_RUN_ON_TARGET();
        QFETCH(PoolCase, pool);
        const Pool2dDesc d = pool.desc();
        Rng rng(26);
        Tensor x = randomTensor(d.inputShape(), DType::Float32, rng);
        const Tensor r = randomTensor(d.outputShape(), DType::Float32, rng);
        Tensor y, dx, want, wantDx;
        const auto f = [&] {
            m_dnn->avgPoolForward(d, x, y);
            return dot(y, r);
        };
        f();
        m_dnn->avgPoolBackward(d, r, dx);
        // f is linear in x: a large step is exact but for f's rounding, which it keeps small
        // against the slope; a share missed or sent twice is off by a window's 1/count or more.
        const double err = float32GradientError(f, x, dx, 0.25, 512, rng);
        QVERIFY2(err < 1e-4,
                 qPrintable(
                     QStringLiteral("%1: normalised gradient error %2").arg(targetName).arg(err)));
        f(); // y of x itself, not of a step
        m_ref->avgPoolForward(d, x, want);
        m_ref->avgPoolBackward(d, r, wantDx);
        QVERIFY(towers::test::maxAbsDiff(y, want) < 1e-5);
        QVERIFY(towers::test::maxAbsDiff(dx, wantDx) < 1e-5);
    }

    // --- the oneDNN backend's LRN (Towers' Highway kernel) on every SIMD target ---

    void lrnDispatch()
    {
        // Unforced, the kernel runs on the best target the CPU has; the list is best first.
        const auto targets = cpu::simdTargets();
        QVERIFY(!targets.empty());
        QString listed;
        for (const auto& t : targets)
            listed += QString::fromStdString(t.name) + (t.supported ? " " : " (unsupported) ");
        qInfo("LRN kernel targets: %s; running on %s", qPrintable(listed),
              cpu::lrnTargetName().c_str());
        const auto best = std::find_if(targets.begin(), targets.end(),
                                       [](const cpu::SimdTarget& t) { return t.supported; });
        QVERIFY(best != targets.end());
        QCOMPARE(cpu::lrnTargetName(), best->name);
    }

    void onednnLrn_data() { addTargetRows(lrnKernelCases(), &NamedLrn::l, "lrn"); }
    void onednnLrn()
    {
        TOWERS_RUN_ON_TARGET();
        QFETCH(LrnCase, lrn);
        QCOMPARE(QString::fromStdString(cpu::lrnTargetName()), targetName);
        const LrnDesc d = lrn.desc();
        Rng rng(23);
        // Twice: the second round reuses the outputs and the workspace.
        Tensor y1, ws1, dx1;
        for (int round = 0; round < 2; ++round) {
            const Tensor x = randomTensor(d.shape, DType::Float32, rng, -2.0, 2.0);
            const Tensor dy = randomTensor(d.shape, DType::Float32, rng);
            Tensor y0, ws0, dx0;
            m_ref->lrnForward(d, x, y0, ws0);
            m_dnn->lrnForward(d, x, y1, ws1);
            QCOMPARE(ws1.dtype(), DType::UInt8);
            TOWERS_COMPARE_BACKENDS(y1, y0);
            m_ref->lrnBackward(d, x, y0, dy, ws0, dx0);
            m_dnn->lrnBackward(d, x, y1, dy, ws1, dx1);
            TOWERS_COMPARE_BACKENDS(dx1, dx0);
        }
    }

    // The kernel's backward against central differences of its own forward, in float32: the
    // normalised error between the analytic and the numeric gradient of f = <lrn(x), r>.
    void onednnLrnGradients_data() { addTargetRows(smallLrnCases(), &NamedLrn::l, "lrn"); }
    void onednnLrnGradients()
    {
        TOWERS_RUN_ON_TARGET();
        QFETCH(LrnCase, lrn);
        const LrnDesc d = lrn.desc();
        Rng rng(24);
        Tensor x = randomTensor(d.shape, DType::Float32, rng, -2.0, 2.0);
        const Tensor r = randomTensor(d.shape, DType::Float32, rng);
        Tensor y, ws, dx;
        const auto f = [&] {
            m_dnn->lrnForward(d, x, y, ws);
            return dot(y, r);
        };
        f();
        m_dnn->lrnBackward(d, x, y, r, ws, dx);
        const double err = float32GradientError(f, x, dx, kFloatStep, 256, rng);
        QVERIFY2(err < kFloatGradTolerance,
                 qPrintable(
                     QStringLiteral("%1: normalised gradient error %2").arg(targetName).arg(err)));
    }

    // --- bad arguments ---

    void badArguments_data()
    {
        QTest::addColumn<QString>("backend");
        QTest::newRow("reference") << QStringLiteral("reference");
        QTest::newRow("onednn") << QStringLiteral("onednn");
    }
    void badArguments()
    {
        QFETCH(QString, backend);
        Ops& ops = backend == QStringLiteral("reference") ? *m_ref : *m_dnn;
        const DType f32 = DType::Float32;
        const auto d = makeConv2dDesc({2, 5, 5, 3}, 4, 3, 3, 1, 1, Padding::Same);
        const Tensor x = Tensor::zeros(d.inputShape(), f32);
        const Tensor w = Tensor::zeros(d.weightShape(), f32);
        const Tensor dy = Tensor::zeros(d.outputShape(), f32);
        Tensor y, dx, dw, db;
        // Shapes that do not match the descriptor.
        QVERIFY_THROWS_EXCEPTION(ShapeError, ops.conv2dForward(d, Tensor::zeros({2, 5, 5, 4}, f32),
                                                               w, Tensor(), y, Activation::None));
        QVERIFY_THROWS_EXCEPTION(ShapeError,
                                 ops.conv2dForward(d, x, Tensor::zeros({4, 3, 5, 5}, f32), Tensor(),
                                                   y, Activation::None));
        QVERIFY_THROWS_EXCEPTION(ShapeError,
                                 ops.conv2dForward(d, x, Tensor::zeros({3, 3, 3, 3}, f32), Tensor(),
                                                   y, Activation::None));
        QVERIFY_THROWS_EXCEPTION(
            ShapeError, ops.conv2dForward(d, x, w, Tensor::zeros({3}, f32), y, Activation::None));
        QVERIFY_THROWS_EXCEPTION(ShapeError, ops.conv2dBackwardData(d, x, w, dx));
        QVERIFY_THROWS_EXCEPTION(ShapeError, ops.conv2dBackwardWeights(d, x, x, dw, &db));
        const auto p = makePool2dDesc({2, 5, 5, 3}, 3, 3, 2, 2, Padding::Same);
        QVERIFY_THROWS_EXCEPTION(ShapeError, ops.maxPoolForward(p, dy, y, dx));
        const auto l = makeLrnDesc({2, 5, 5, 3}, 2, 1.0, 0.1, 0.75);
        QVERIFY_THROWS_EXCEPTION(ShapeError, ops.lrnForward(l, dy, y, dx));

        // A workspace that did not come from this backend's forward.
        Tensor py, pws, ly, lws;
        ops.maxPoolForward(p, x, py, pws);
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 ops.maxPoolBackward(p, x, py, py, Tensor::zeros({7}, f32), dx));
        QVERIFY_THROWS_EXCEPTION(
            InvalidArgument,
            ops.maxPoolBackward(p, x, py, py, Tensor::zeros({7}, DType::UInt8), dx));
        ops.lrnForward(l, x, ly, lws);
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 ops.lrnBackward(l, x, ly, ly, Tensor::zeros({7}, f32), dx));
        QVERIFY_THROWS_EXCEPTION(
            InvalidArgument, ops.lrnBackward(l, x, ly, ly, Tensor::zeros({7}, DType::UInt8), dx));

        const Tensor x64 = x.to(DType::Float64), w64 = w.to(DType::Float64);
        if (backend == QStringLiteral("reference")) {
            // Mixed dtypes in one call.
            QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                     ops.conv2dForward(d, x64, w, Tensor(), y, Activation::None));
            QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                     ops.conv2dBackwardWeights(d, x64, dy, dw, &db));
            QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                     ops.lrnBackward(l, x64, ly, ly.to(DType::Float64), lws, dx));
            // A non-float input.
            QVERIFY_THROWS_EXCEPTION(
                Unsupported,
                ops.maxPoolForward(p, Tensor::zeros(p.inputShape(), DType::Int32), y, pws));
        } else {
            // oneDNN runs float32 only.
            QVERIFY_THROWS_EXCEPTION(Unsupported,
                                     ops.conv2dForward(d, x64, w64, Tensor(), y, Activation::None));
            QVERIFY_THROWS_EXCEPTION(Unsupported,
                                     ops.conv2dBackwardData(d, dy.to(DType::Float64), w64, dx));
            QVERIFY_THROWS_EXCEPTION(Unsupported, ops.maxPoolForward(p, x64, y, pws));
            QVERIFY_THROWS_EXCEPTION(Unsupported, ops.lrnForward(l, x64, y, lws));
            // The reference's Int32 argmax is not oneDNN's workspace.
            Tensor rws;
            m_ref->maxPoolForward(p, x, py, rws);
            QVERIFY_THROWS_EXCEPTION(InvalidArgument, ops.maxPoolBackward(p, x, py, py, rws, dx));
        }
    }
};

QTEST_APPLESS_MAIN(TestOpsWindow)
#include "tst_ops_window.moc"
