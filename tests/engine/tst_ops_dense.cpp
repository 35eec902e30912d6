// The dense, element-wise, dropout, batch-norm, layout, loss and update ops: finite-difference
// gradients of the reference backend in float64, small hand-computed cases that pin the
// reference, the oneDNN backend against the reference in float32, and typed errors on bad calls.
#include <QtTest>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>

#include "engine/cpu/onednn_ops.h"
#include "engine/ops/dropout_mask.h"
#include "engine/ops/ops.h"
#include "error_message.h"
#include "gradcheck.h"

using namespace towers::engine;
using namespace towers::test;

namespace {

constexpr double kGradTol = 1e-5;    // central differences in double
constexpr double kBackendTol = 1e-5; // oneDNN float32 against the reference's double sums

Shape toShape(const QList<qint64>& dims)
{
    return Shape(std::vector<std::int64_t>(dims.begin(), dims.end()));
}

QString describe(const GradCheckResult& r)
{
    return QString::fromStdString(r.str());
}

// Whether every pre-activation of x * w^T + b is at least `gap` from zero: ReLU's kink spoils a
// finite difference there.
bool awayFromKink(Ops& ops, const Tensor& x, const Tensor& w, const Tensor& b, double gap)
{
    Tensor z;
    ops.linearForward(x, w, b, z, Activation::None);
    for (std::int64_t i = 0; i < z.numel(); ++i)
        if (std::fabs(z.at(i)) < gap) return false;
    return true;
}

} // namespace

#define CHECK_GRADIENT(what, f, x, analytic)                                                       \
    do {                                                                                           \
        const auto r_ = checkGradient(f, x, analytic);                                             \
        QVERIFY2(r_.maxRelError < kGradTol, qPrintable(QStringLiteral(what ": ") + describe(r_))); \
    } while (0)

#define CHECK_CLOSE(what, got, want)                                                               \
    do {                                                                                           \
        QCOMPARE((got).shape(), (want).shape());                                                   \
        const double e_ = normalisedError(got, want);                                              \
        QVERIFY2(e_ < kBackendTol,                                                                 \
                 qPrintable(QStringLiteral("%1: normalised error %2").arg(what).arg(e_)));         \
    } while (0)

class TestOpsDense : public QObject
{
    Q_OBJECT

    std::unique_ptr<Ops> m_ref = makeReferenceOps();
    std::unique_ptr<Ops> m_dnn = cpu::makeOneDnnOps();

    Ops& backend(const QString& name) { return name == "onednn" ? *m_dnn : *m_ref; }

private slots:
    void initTestCase() { cpu::setCpuThreads(2); }

    // ---------------------------------------------------------------- a) gradients (float64)

    void linearGradients_data()
    {
        QTest::addColumn<int>("n");
        QTest::addColumn<int>("in");
        QTest::addColumn<int>("out");
        QTest::addColumn<bool>("bias");
        QTest::addColumn<bool>("relu");
        QTest::newRow("3x7->5 bias") << 3 << 7 << 5 << true << false;
        QTest::newRow("2x4->3 no bias") << 2 << 4 << 3 << false << false;
        QTest::newRow("1x1->1 bias") << 1 << 1 << 1 << true << false;
        QTest::newRow("4x6->5 bias relu") << 4 << 6 << 5 << true << true;
        QTest::newRow("3x5->4 relu") << 3 << 5 << 4 << false << true;
    }
    void linearGradients()
    {
        QFETCH(int, n);
        QFETCH(int, in);
        QFETCH(int, out);
        QFETCH(bool, bias);
        QFETCH(bool, relu);
        Ops& ops = *m_ref;
        Tensor x, w, b;
        for (std::uint64_t seed = 1;; ++seed) {
            Rng rng(seed);
            x = randomTensor({n, in}, DType::Float64, rng);
            w = randomTensor({out, in}, DType::Float64, rng);
            b = bias ? randomTensor({out}, DType::Float64, rng) : Tensor();
            if (!relu || awayFromKink(ops, x, w, b, 0.02)) break;
        }
        Rng rng(99);
        const Tensor r = randomTensor({n, out}, DType::Float64, rng);
        const Activation act = relu ? Activation::Relu : Activation::None;
        Tensor y;
        auto f = [&] {
            ops.linearForward(x, w, b, y, act);
            return dot(y, r);
        };
        f();
        Tensor dz = r.clone();
        if (relu) ops.reluBackward(y, r, dz);
        Tensor dx, dw, db;
        ops.linearBackwardData(dz, w, dx);
        ops.linearBackwardWeights(x, dz, dw, bias ? &db : nullptr);
        CHECK_GRADIENT("dx", f, x, dx);
        CHECK_GRADIENT("dw", f, w, dw);
        if (bias) CHECK_GRADIENT("db", f, b, db);
    }

    void reluGradient()
    {
        Rng rng(3);
        Tensor x = distinctTensor({2, 3, 4, 5}, DType::Float64, rng);
        const Tensor r = randomTensor(x.shape(), DType::Float64, rng);
        Tensor y, dx;
        auto f = [&] {
            m_ref->reluForward(x, y);
            return dot(y, r);
        };
        f();
        m_ref->reluBackward(y, r, dx);
        CHECK_GRADIENT("relu dx", f, x, dx);
    }

    void addGradient()
    {
        Rng rng(4);
        Tensor a = randomTensor({3, 7}, DType::Float64, rng);
        Tensor b = randomTensor({3, 7}, DType::Float64, rng);
        const Tensor r = randomTensor({3, 7}, DType::Float64, rng);
        Tensor y;
        auto f = [&] {
            m_ref->add(a, b, y);
            return dot(y, r);
        };
        CHECK_GRADIENT("add da", f, a, r);
        CHECK_GRADIENT("add db", f, b, r);
    }

    void dropoutGradient()
    {
        Rng rng(5);
        Tensor x = randomTensor({4, 50}, DType::Float64, rng);
        const Tensor r = randomTensor(x.shape(), DType::Float64, rng);
        Tensor y, mask, dx;
        auto f = [&] {
            m_ref->dropoutForward(x, 0.3, 1234, y, mask,
                                  Tensor()); // a fixed seed: the same mask each call
            return dot(y, r);
        };
        f();
        m_ref->dropoutBackward(r, mask, 0.3, dx);
        CHECK_GRADIENT("dropout dx", f, x, dx);
    }

    // The plain training pair, and the composite pair with ReLU as the reference composes it, in
    // float64.
    void batchNormGradients_data()
    {
        QTest::addColumn<QList<qint64>>("shape");
        QTest::addColumn<bool>("relu");
        for (const bool relu : {false, true}) {
            const char* act = relu ? ", ReLU" : "";
            QTest::addRow("[N,C] 5x3%s", act) << QList<qint64>{5, 3} << relu;
            QTest::addRow("[N,C] 2x1%s", act) << QList<qint64>{2, 1} << relu;
            QTest::addRow("[N,H,W,C] 2x3x3x4%s", act) << QList<qint64>{2, 3, 3, 4} << relu;
            QTest::addRow("[N,H,W,C] 3x1x2x5%s", act) << QList<qint64>{3, 1, 2, 5} << relu;
        }
    }
    void batchNormGradients()
    {
        QFETCH(QList<qint64>, shape);
        QFETCH(bool, relu);
        const auto d = makeBatchNormDesc(toShape(shape), 1e-5, 0.1);
        const std::int64_t c = d.channels();
        Rng rng(relu ? 7 : 6);
        Tensor x = randomTensor(d.shape, DType::Float64, rng);
        Tensor gamma = randomTensor({c}, DType::Float64, rng, 0.5, 1.5);
        Tensor beta = randomTensor({c}, DType::Float64, rng);
        const Tensor r = randomTensor(d.shape, DType::Float64, rng);
        Tensor runMean = Tensor::zeros({c}, DType::Float64);
        Tensor runVar = Tensor::filled({c}, DType::Float64, 1.0);
        Tensor y, saveMean, saveVar, saved;
        auto f = [&] {
            if (relu)
                m_ref->batchNormActForwardTraining(d, x, gamma, beta, Activation::Relu, y, runMean,
                                                   runVar, saveMean, saveVar, saved);
            else
                m_ref->batchNormForwardTraining(d, x, gamma, beta, y, runMean, runVar, saveMean,
                                                saveVar);
            return dot(y, r);
        };
        f();
        Tensor dx, dgamma, dbeta;
        if (relu) {
            std::int64_t zeros = 0;
            for (std::int64_t i = 0; i < y.numel(); ++i) zeros += y.at(i) == 0;
            QVERIFY2(zeros > 0 && zeros < y.numel(),
                     "the ReLU must cut some values and keep others");
            m_ref->batchNormActBackward(d, x, y, r, Activation::Relu, gamma, saveMean, saveVar,
                                        saved, dx, dgamma, dbeta);
        } else {
            m_ref->batchNormBackward(d, x, r, gamma, saveMean, saveVar, dx, dgamma, dbeta);
        }
        CHECK_GRADIENT("batch norm dx", f, x, dx);
        CHECK_GRADIENT("batch norm dgamma", f, gamma, dgamma);
        CHECK_GRADIENT("batch norm dbeta", f, beta, dbeta);
    }

    void layoutGradients()
    {
        // Each transpose's gradient is the other transpose of dy.
        Rng rng(7);
        Tensor x = randomTensor({2, 3, 4, 5}, DType::Float64, rng);
        const Tensor r1 = randomTensor({2, 5, 3, 4}, DType::Float64, rng);
        Tensor y, g;
        auto f1 = [&] {
            m_ref->nhwcToNchw(x, y);
            return dot(y, r1);
        };
        m_ref->nchwToNhwc(r1, g);
        CHECK_GRADIENT("nhwcToNchw", f1, x, g);
        const Tensor r2 = randomTensor({2, 4, 5, 3}, DType::Float64, rng);
        auto f2 = [&] {
            m_ref->nchwToNhwc(x, y);
            return dot(y, r2);
        };
        m_ref->nhwcToNchw(r2, g);
        CHECK_GRADIENT("nchwToNhwc", f2, x, g);
    }

    void softmaxCrossEntropyGradient_data()
    {
        QTest::addColumn<int>("n");
        QTest::addColumn<int>("k");
        QTest::addColumn<double>("smoothing");
        QTest::newRow("4x5") << 4 << 5 << 0.0;
        QTest::newRow("1x2") << 1 << 2 << 0.0;
        QTest::newRow("7x10") << 7 << 10 << 0.0;
        QTest::newRow("4x5, label smoothing 0.1") << 4 << 5 << 0.1;
        QTest::newRow("7x10, label smoothing 0.5") << 7 << 10 << 0.5;
    }
    void softmaxCrossEntropyGradient()
    {
        QFETCH(int, n);
        QFETCH(int, k);
        QFETCH(double, smoothing);
        Rng rng(8);
        Tensor logits = randomTensor({n, k}, DType::Float64, rng, -3, 3);
        const Tensor labels = randomLabels(n, k, rng);
        Tensor probs, dlogits;
        auto f = [&] {
            Tensor loss;
            m_ref->softmaxCrossEntropyForward(logits, labels, smoothing, probs, loss);
            return loss.at(0);
        };
        f();
        m_ref->softmaxCrossEntropyBackward(probs, labels, smoothing, 1.0 / n, dlogits);
        CHECK_GRADIENT("d loss / d logits", f, logits, dlogits);
    }

    // ---------------------------------------------------------------- b) hand-computed cases

    void linearByHand_data()
    {
        QTest::addColumn<int>("dtype");
        QTest::newRow("float32") << int(DType::Float32);
        QTest::newRow("float64") << int(DType::Float64);
    }
    void linearByHand()
    {
        QFETCH(int, dtype);
        const auto dt = DType(dtype);
        auto make = [dt](Shape s, std::initializer_list<double> v) {
            Tensor t(std::move(s), dt);
            std::int64_t i = 0;
            for (double e : v) t.setAt(i++, e);
            return t;
        };
        const Tensor x = make({2, 3}, {1, 2, 3, 4, 5, 6});
        const Tensor w = make({2, 3}, {1, 0, -1, 0.5, 0.5, 0.5});
        const Tensor b = make({2}, {0.5, -1});
        const Tensor dy = make({2, 2}, {1, 2, 3, 4});
        for (Ops* ops : {m_ref.get(), m_dnn.get()}) {
            if (dt == DType::Float64 && ops == m_dnn.get()) continue;
            Tensor y, dx, dw, db;
            ops->linearForward(x, w, b, y, Activation::None);
            QCOMPARE(y.shape(), Shape({2, 2}));
            const double want[] = {-1.5, 2, -1.5, 6.5};
            for (int i = 0; i < 4; ++i) QCOMPARE(y.at(i), want[i]);
            ops->linearForward(x, w, b, y, Activation::Relu);
            const double wantRelu[] = {0, 2, 0, 6.5};
            for (int i = 0; i < 4; ++i) QCOMPARE(y.at(i), wantRelu[i]);
            ops->linearBackwardData(dy, w, dx);
            const double wantDx[] = {2, 1, 0, 5, 2, -1};
            for (int i = 0; i < 6; ++i) QCOMPARE(dx.at(i), wantDx[i]);
            ops->linearBackwardWeights(x, dy, dw, &db);
            const double wantDw[] = {13, 17, 21, 18, 24, 30};
            for (int i = 0; i < 6; ++i) QCOMPARE(dw.at(i), wantDw[i]);
            QCOMPARE(db.at(0), 4.0);
            QCOMPARE(db.at(1), 6.0);
        }
    }

    void softmaxCrossEntropyByHand()
    {
        Tensor logits(Shape{3, 3}, DType::Float64);
        const double v[] = {0, 0, 0, 1, 2, 3, 1000, 0, -1000};
        for (int i = 0; i < 9; ++i) logits.setAt(i, v[i]);
        Tensor labels(Shape{3}, DType::Int32);
        labels.data<std::int32_t>()[0] = 0;
        labels.data<std::int32_t>()[1] = 2;
        labels.data<std::int32_t>()[2] = 1;
        Tensor probs, dlogits;
        const double loss = meanCrossEntropy(*m_ref, logits, labels, probs);
        // Row 0: uniform, ln 3. Row 1: ln(e + e^2 + e^3) - 3. Row 2: 1000 - 0 (stable, no inf).
        const double want =
            (std::log(3.0) + std::log(1 + std::exp(-1.0) + std::exp(-2.0)) + 1000) / 3;
        QVERIFY(std::fabs(loss - want) < 1e-12);
        QVERIFY(std::fabs(probs.at(0) - 1.0 / 3) < 1e-15);
        const double s = 1 + std::exp(-1.0) + std::exp(-2.0);
        QVERIFY(std::fabs(probs.at(5) - 1 / s) < 1e-15);
        QCOMPARE(probs.at(6), 1.0);
        QCOMPARE(probs.at(8), 0.0);
        m_ref->softmaxCrossEntropyBackward(probs, labels, 0.0, 0.5, dlogits);
        QVERIFY(std::fabs(dlogits.at(0) - (1.0 / 3 - 1) * 0.5) < 1e-15);
        QVERIFY(std::fabs(dlogits.at(1) - (1.0 / 3) * 0.5) < 1e-15);
        QCOMPARE(dlogits.at(6), 0.5);
        QCOMPARE(dlogits.at(7), -0.5);

        // The oneDNN backend agrees, in place too (dlogits = probs).
        Tensor l32 = logits.to(DType::Float32), p32;
        const double loss32 = meanCrossEntropy(*m_dnn, l32, labels, p32);
        QVERIFY(std::fabs(loss32 - want) < 1e-5);
        m_dnn->softmaxCrossEntropyBackward(p32, labels, 0.0, 0.5, p32);
        QVERIFY(normalisedError(p32, dlogits) < 1e-6);
        m_ref->softmaxCrossEntropyBackward(probs, labels, 0.0, 0.5, probs);
        QVERIFY(normalisedError(probs, dlogits) < 1e-15);

        // Label smoothing 0.3 over 3 classes: the targets are 0.8 at the label, 0.1 elsewhere,
        // and the loss is logsumexp(z) - sum_j q_j z_j. Row 0: still ln 3. Row 1 (label 2):
        // 3 + ln(1 + e^-1 + e^-2) - (0.1 + 0.2 + 2.4). Row 2 (label 1): 1000 - (100 + 0.8 * 0
        // - 100), no overflow from the sum over the row.
        const double smoothed = (std::log(3.0) + 3 + std::log(s) - 2.7 + 1000) / 3;
        Tensor sloss, sprobs, sd;
        m_ref->softmaxCrossEntropyForward(logits, labels, 0.3, sprobs, sloss);
        QVERIFY2(std::fabs(sloss.at(0) - smoothed) < 1e-12,
                 qPrintable(QString::number(sloss.at(0))));
        m_ref->softmaxCrossEntropyBackward(sprobs, labels, 0.3, 0.5, sd);
        QVERIFY(std::fabs(sd.at(0) - (1.0 / 3 - 0.8) * 0.5) < 1e-15);
        QVERIFY(std::fabs(sd.at(1) - (1.0 / 3 - 0.1) * 0.5) < 1e-15);
        QVERIFY(std::fabs(sd.at(6) - (1.0 - 0.1) * 0.5) < 1e-15);
        QVERIFY(std::fabs(sd.at(7) - (0.0 - 0.8) * 0.5) < 1e-15);
        Tensor sloss32, p32s;
        m_dnn->softmaxCrossEntropyForward(l32, labels, 0.3, p32s, sloss32);
        QVERIFY(std::fabs(sloss32.at(0) - smoothed) < 1e-5);
        m_dnn->softmaxCrossEntropyBackward(p32s, labels, 0.3, 0.5, p32s); // in place
        QVERIFY(normalisedError(p32s, sd) < 1e-6);
        QVERIFY_THROWS_EXCEPTION(
            InvalidArgument, m_ref->softmaxCrossEntropyForward(logits, labels, 1.0, sprobs, sloss));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 m_dnn->softmaxCrossEntropyBackward(p32s, labels, -0.1, 0.5, p32s));
    }

    void batchNormByHand_data()
    {
        QTest::addColumn<QString>("backendName");
        QTest::addColumn<int>("dtype");
        QTest::newRow("reference float64") << "reference" << int(DType::Float64);
        QTest::newRow("reference float32") << "reference" << int(DType::Float32);
        QTest::newRow("onednn float32") << "onednn" << int(DType::Float32);
    }
    void batchNormByHand()
    {
        QFETCH(QString, backendName);
        QFETCH(int, dtype);
        Ops& ops = backend(backendName);
        const auto dt = DType(dtype);
        const double tol = dt == DType::Float64 ? 1e-12 : 1e-6;
        // [2,1,2,2]: channel 0 holds 1,2,3,4 and channel 1 holds 10,10,10,30.
        const auto d = makeBatchNormDesc({2, 1, 2, 2}, 1e-5, 0.1);
        Tensor x(d.shape, dt);
        const double v[] = {1, 10, 2, 10, 3, 10, 4, 30};
        for (int i = 0; i < 8; ++i) x.setAt(i, v[i]);
        Tensor gamma(Shape{2}, dt), beta(Shape{2}, dt);
        gamma.setAt(0, 2);
        gamma.setAt(1, 1);
        beta.setAt(0, 1);
        beta.setAt(1, 0);
        Tensor runMean = Tensor::zeros({2}, dt), runVar = Tensor::filled({2}, dt, 1.0);
        Tensor y, saveMean, saveVar;
        ops.batchNormForwardTraining(d, x, gamma, beta, y, runMean, runVar, saveMean, saveVar);
        // Channel 0: mean 2.5, biased variance 1.25; channel 1: mean 15, variance 75.
        QVERIFY(std::fabs(saveMean.at(0) - 2.5) < tol);
        QVERIFY(std::fabs(saveVar.at(0) - 1.25) < tol);
        QVERIFY(std::fabs(saveMean.at(1) - 15) < tol * 15);
        QVERIFY(std::fabs(saveVar.at(1) - 75) < tol * 75);
        const double is0 = 1 / std::sqrt(1.25 + 1e-5), is1 = 1 / std::sqrt(75 + 1e-5);
        for (int i = 0; i < 4; ++i) {
            QVERIFY(std::fabs(y.at(2 * i) - (2 * (v[2 * i] - 2.5) * is0 + 1)) < tol * 4);
            QVERIFY(std::fabs(y.at(2 * i + 1) - (v[2 * i + 1] - 15) * is1) < tol * 4);
        }
        // Running statistics as PyTorch: the unbiased variance (n = 4 rows) with momentum 0.1.
        QVERIFY(std::fabs(runMean.at(0) - 0.25) < tol);
        QVERIFY(std::fabs(runVar.at(0) - (0.9 + 0.1 * 1.25 * 4 / 3)) < tol);
        QVERIFY(std::fabs(runMean.at(1) - 1.5) < tol * 10);
        QVERIFY(std::fabs(runVar.at(1) - (0.9 + 0.1 * 75 * 4 / 3)) < tol * 10);
        // Inference normalises with the running statistics.
        ops.batchNormForwardInference(d, x, gamma, beta, runMean, runVar, y);
        QVERIFY(std::fabs(y.at(0) - (2 * (1 - runMean.at(0)) / std::sqrt(runVar.at(0) + 1e-5) +
                                     1)) < tol * 4);
        // Backward with dy = 1 everywhere: dbeta = 4, dgamma = sum of xhat = 0, dx = 0.
        Tensor dy = Tensor::filled(d.shape, dt, 1.0), dx, dgamma, dbeta;
        ops.batchNormBackward(d, x, dy, gamma, saveMean, saveVar, dx, dgamma, dbeta);
        QVERIFY(std::fabs(dbeta.at(0) - 4) < tol);
        QVERIFY(std::fabs(dgamma.at(0)) < tol * 4);
        for (int i = 0; i < 8; ++i) QVERIFY(std::fabs(dx.at(i)) < tol * 4);
    }

    void elementwiseByHand()
    {
        for (Ops* ops : {m_ref.get(), m_dnn.get()}) {
            Tensor x(Shape{4}, DType::Float32);
            const double v[] = {-1, 0, 2, -0.5};
            for (int i = 0; i < 4; ++i) x.setAt(i, v[i]);
            Tensor y;
            ops->reluForward(x, y);
            QCOMPARE(y.at(0), 0.0);
            QCOMPARE(y.at(1), 0.0);
            QCOMPARE(y.at(2), 2.0);
            Tensor dy = Tensor::filled({4}, DType::Float32, 5.0);
            ops->reluBackward(y, dy, dy); // in place
            QCOMPARE(dy.at(0), 0.0);
            QCOMPARE(dy.at(1), 0.0);
            QCOMPARE(dy.at(2), 5.0);
            ops->add(x, y, x); // y = a, in place: -1, 0, 4, -0.5
            QCOMPARE(x.at(2), 4.0);
            QCOMPARE(x.at(0), -1.0);
            QCOMPARE(sumOfSquares(*ops, x), 1 + 16 + 0.25);
            ops->axpy(-0.5, y, x);
            QCOMPARE(x.at(2), 3.0);
            QCOMPARE(x.at(3), -0.5);
            // [1,2,2,3] NHWC holding 0..11 to NCHW: y[c][h][w] = x[h][w][c].
            Tensor t(Shape{1, 2, 2, 3}, DType::Float32), u, back;
            for (int i = 0; i < 12; ++i) t.setAt(i, i);
            ops->nhwcToNchw(t, u);
            QCOMPARE(u.shape(), Shape({1, 3, 2, 2}));
            const double want[] = {0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11};
            for (int i = 0; i < 12; ++i) QCOMPARE(u.at(i), want[i]);
            ops->nchwToNhwc(u, back);
            QCOMPARE(back.shape(), t.shape());
            QCOMPARE(maxAbsDiff(back, t), 0.0);
        }
    }

    void dropoutByHand_data()
    {
        QTest::addColumn<QString>("backendName");
        QTest::addColumn<double>("rate");
        for (const char* name : {"reference", "onednn"})
            for (double rate : {0.0, 0.25, 0.5, 0.9})
                QTest::newRow(qPrintable(QStringLiteral("%1 rate %2").arg(name).arg(rate)))
                    << QString(name) << rate;
    }
    void dropoutByHand()
    {
        QFETCH(QString, backendName);
        QFETCH(double, rate);
        Ops& ops = backend(backendName);
        const std::int64_t n = 100000;
        const Tensor x = Tensor::filled({n}, DType::Float32, 1.0);
        Tensor y, mask, dx;
        ops.dropoutForward(x, rate, 42, y, mask, Tensor());
        QCOMPARE(mask.dtype(), DType::UInt8);
        const float scale = static_cast<float>(1 / (1 - rate));
        const auto th = dropoutThreshold(rate);
        std::int64_t kept = 0;
        for (std::int64_t i = 0; i < n; ++i) {
            const bool keep = dropoutKeeps(42, static_cast<std::uint64_t>(i), th);
            QCOMPARE(mask.data<std::uint8_t>()[i], std::uint8_t(keep));
            QCOMPARE(y.data<float>()[i], keep ? scale : 0.0f);
            kept += keep;
        }
        // Binomial: the kept share is within 5 standard deviations of 1 - rate.
        const double sd = std::sqrt(n * rate * (1 - rate));
        QVERIFY2(std::fabs(kept - n * (1 - rate)) <= 5 * sd + 1e-9,
                 qPrintable(QStringLiteral("kept %1 of %2").arg(kept).arg(n)));
        const Tensor dy = Tensor::filled({n}, DType::Float32, 3.0);
        ops.dropoutBackward(dy, mask, rate, dx);
        for (std::int64_t i = 0; i < n; i += 997)
            QCOMPARE(dx.data<float>()[i], mask.data<std::uint8_t>()[i] ? 3.0f * scale : 0.0f);
    }

    // ---------------------------------------------------------------- c) oneDNN vs reference

    void linearBackends_data()
    {
        QTest::addColumn<int>("n");
        QTest::addColumn<int>("in");
        QTest::addColumn<int>("out");
        QTest::newRow("odd 3x7->5") << 3 << 7 << 5;
        QTest::newRow("1x1->1") << 1 << 1 << 1;
        QTest::newRow("odd 5x33->17") << 5 << 33 << 17;
        QTest::newRow("parallel bias sums 128x64->300") << 128 << 64 << 300;
        QTest::newRow("mnist fc1 2x8192->2048") << 2 << 8192 << 2048;
        QTest::newRow("mnist fc2 4x2048->1024") << 4 << 2048 << 1024;
        QTest::newRow("tutorial fc1 8x2304->384") << 8 << 2304 << 384;
        QTest::newRow("tutorial fc2 8x384->192") << 8 << 384 << 192;
        QTest::newRow("tutorial fc3 8x192->10") << 8 << 192 << 10;
    }
    void linearBackends()
    {
        QFETCH(int, n);
        QFETCH(int, in);
        QFETCH(int, out);
        Rng rng(static_cast<std::uint64_t>(n * 131 + in * 7 + out));
        const double ws = 1 / std::sqrt(double(in));
        const Tensor x = randomTensor({n, in}, DType::Float32, rng);
        const Tensor w = randomTensor({out, in}, DType::Float32, rng, -ws, ws);
        const Tensor b = randomTensor({out}, DType::Float32, rng);
        const Tensor dy = randomTensor({n, out}, DType::Float32, rng);
        for (bool bias : {true, false})
            for (Activation act : {Activation::None, Activation::Relu}) {
                Tensor yr, yd;
                const Tensor& bb = bias ? b : Tensor();
                m_ref->linearForward(x, w, bb, yr, act);
                m_dnn->linearForward(x, w, bb, yd, act);
                CHECK_CLOSE(QStringLiteral("forward bias %1 relu %2")
                                .arg(bias)
                                .arg(act == Activation::Relu),
                            yd, yr);
            }
        Tensor dxr, dxd, dwr, dwd, dbr, dbd;
        m_ref->linearBackwardData(dy, w, dxr);
        m_dnn->linearBackwardData(dy, w, dxd);
        CHECK_CLOSE("backward data", dxd, dxr);
        m_ref->linearBackwardWeights(x, dy, dwr, &dbr);
        m_dnn->linearBackwardWeights(x, dy, dwd, &dbd);
        CHECK_CLOSE("backward weights", dwd, dwr);
        CHECK_CLOSE("bias gradient", dbd, dbr);
        m_dnn->linearBackwardWeights(x, dy, dwd, nullptr); // no bias gradient
        CHECK_CLOSE("backward weights without db", dwd, dwr);
    }

    void elementwiseBackends_data()
    {
        QTest::addColumn<QList<qint64>>("shape");
        QTest::newRow("[1,1,1,1]") << QList<qint64>{1, 1, 1, 1};
        QTest::newRow("odd [3,5,7,2]") << QList<qint64>{3, 5, 7, 2};
        QTest::newRow("parallel [16,24,24,8]") << QList<qint64>{16, 24, 24, 8};
        QTest::newRow("[128,10]") << QList<qint64>{128, 10};
        QTest::newRow("odd [37,1001]") << QList<qint64>{37, 1001};
    }
    void elementwiseBackends()
    {
        QFETCH(QList<qint64>, shape);
        const Shape s = toShape(shape);
        Rng rng(static_cast<std::uint64_t>(s.numel()));
        const Tensor x = randomTensor(s, DType::Float32, rng);
        const Tensor x2 = randomTensor(s, DType::Float32, rng);
        const Tensor dy = randomTensor(s, DType::Float32, rng);
        Tensor r, d, r2, d2;
        m_ref->reluForward(x, r);
        m_dnn->reluForward(x, d);
        QCOMPARE(maxAbsDiff(d, r), 0.0);
        m_ref->reluBackward(r, dy, r2);
        m_dnn->reluBackward(d, dy, d2);
        QCOMPARE(maxAbsDiff(d2, r2), 0.0);
        m_ref->add(x, x2, r);
        m_dnn->add(x, x2, d);
        QCOMPARE(maxAbsDiff(d, r), 0.0);

        Tensor mr, md;
        m_ref->dropoutForward(x, 0.4, 77, r, mr, Tensor());
        m_dnn->dropoutForward(x, 0.4, 77, d, md, Tensor());
        QCOMPARE(maxAbsDiff(md, mr), 0.0);
        CHECK_CLOSE("dropout forward", d, r);
        m_ref->dropoutBackward(dy, mr, 0.4, r2);
        m_dnn->dropoutBackward(dy, md, 0.4, d2);
        CHECK_CLOSE("dropout backward", d2, r2);

        QCOMPARE(sumOfSquares(*m_dnn, x), sumOfSquares(*m_dnn, x)); // deterministic
        const double ssr = sumOfSquares(*m_ref, x), ssd = sumOfSquares(*m_dnn, x);
        QVERIFY2(std::fabs(ssd - ssr) <= 1e-6 * ssr,
                 qPrintable(QStringLiteral("%1 vs %2").arg(ssd).arg(ssr)));
        Tensor yr = x2.clone(), yd = x2.clone();
        m_ref->axpy(-0.37, x, yr);
        m_dnn->axpy(-0.37, x, yd);
        CHECK_CLOSE("axpy", yd, yr);
        // Plain SGD's update is each backend's axpy(-lr) to the bit.
        Tensor sr = x2.clone(), sd = x2.clone();
        m_ref->sgdUpdate(0.37, x, sr, Tensor(), Tensor());
        m_dnn->sgdUpdate(0.37, x, sd, Tensor(), Tensor());
        QCOMPARE(std::memcmp(sr.raw(), yr.raw(), yr.bytes()), 0);
        QCOMPARE(std::memcmp(sd.raw(), yd.raw(), yd.bytes()), 0);

        if (s.rank() == 4) {
            m_ref->nhwcToNchw(x, r);
            m_dnn->nhwcToNchw(x, d);
            QCOMPARE(d.shape(), r.shape());
            QCOMPARE(maxAbsDiff(d, r), 0.0);
            m_ref->nchwToNhwc(x, r);
            m_dnn->nchwToNhwc(x, d);
            QCOMPARE(d.shape(), r.shape());
            QCOMPARE(maxAbsDiff(d, r), 0.0);
        }
        if (s.rank() == 2) {
            Rng lr(5);
            const Tensor logits = randomTensor(s, DType::Float32, lr, -8, 8);
            const Tensor labels = randomLabels(s[0], static_cast<int>(s[1]), lr);
            const double lossR = meanCrossEntropy(*m_ref, logits, labels, r);
            const double lossD = meanCrossEntropy(*m_dnn, logits, labels, d);
            QVERIFY2(std::fabs(lossD - lossR) < 1e-5 * std::max(1.0, lossR),
                     qPrintable(QStringLiteral("loss %1 vs %2").arg(lossD).arg(lossR)));
            CHECK_CLOSE("softmax probs", d, r);
            m_ref->softmaxCrossEntropyBackward(r, labels, 0.0, 1.0 / s[0], r2);
            m_dnn->softmaxCrossEntropyBackward(d, labels, 0.0, 1.0 / s[0], d2);
            CHECK_CLOSE("softmax dlogits", d2, r2);
        }
    }

    void batchNormBackends_data()
    {
        QTest::addColumn<QList<qint64>>("shape");
        QTest::newRow("[N,C] 2x3") << QList<qint64>{2, 3};
        QTest::newRow("[N,C] 37x19") << QList<qint64>{37, 19};
        QTest::newRow("[N,H,W,C] odd 3x5x7x3") << QList<qint64>{3, 5, 7, 3};
        QTest::newRow("[N,H,W,C] 8x16x16x64") << QList<qint64>{8, 16, 16, 64};
        QTest::newRow("[N,H,W,C] 4x6x6x128") << QList<qint64>{4, 6, 6, 128};
    }
    void batchNormBackends()
    {
        QFETCH(QList<qint64>, shape);
        const auto d = makeBatchNormDesc(toShape(shape), 1e-3, 0.2);
        const std::int64_t c = d.channels();
        Rng rng(static_cast<std::uint64_t>(d.shape.numel()));
        const Tensor x = randomTensor(d.shape, DType::Float32, rng, -2, 3);
        const Tensor dy = randomTensor(d.shape, DType::Float32, rng);
        const Tensor gamma = randomTensor({c}, DType::Float32, rng, 0.5, 1.5);
        const Tensor beta = randomTensor({c}, DType::Float32, rng);
        const Tensor mean0 = randomTensor({c}, DType::Float32, rng);
        const Tensor var0 = randomTensor({c}, DType::Float32, rng, 0.5, 2);
        Tensor rmR = mean0.clone(), rvR = var0.clone(), rmD = mean0.clone(), rvD = var0.clone();
        Tensor yR, yD, smR, smD, svR, svD;
        for (int step = 0; step < 2; ++step) { // twice: the cached primitive is reused
            m_ref->batchNormForwardTraining(d, x, gamma, beta, yR, rmR, rvR, smR, svR);
            m_dnn->batchNormForwardTraining(d, x, gamma, beta, yD, rmD, rvD, smD, svD);
        }
        CHECK_CLOSE("training y", yD, yR);
        CHECK_CLOSE("saved mean", smD, smR);
        CHECK_CLOSE("saved variance", svD, svR);
        CHECK_CLOSE("running mean", rmD, rmR);
        CHECK_CLOSE("running variance", rvD, rvR);
        m_ref->batchNormForwardInference(d, x, gamma, beta, rmR, rvR, yR);
        m_dnn->batchNormForwardInference(d, x, gamma, beta, rmD, rvD, yD);
        CHECK_CLOSE("inference y", yD, yR);
        Tensor dxR, dxD, dgR, dgD, dbR, dbD;
        m_ref->batchNormBackward(d, x, dy, gamma, smR, svR, dxR, dgR, dbR);
        m_dnn->batchNormBackward(d, x, dy, gamma, smD, svD, dxD, dgD, dbD);
        CHECK_CLOSE("dx", dxD, dxR);
        CHECK_CLOSE("dgamma", dgD, dgR);
        CHECK_CLOSE("dbeta", dbD, dbR);
    }

    // oneDNN's fused batch norm + ReLU (its mask in `saved`) against the reference's composition,
    // with dy zero where the pre-activation is near the kink, twice (the cached primitives are
    // reused); then the same backward without the saved mask (from y), and a mask of another
    // shape refused.
    void batchNormReluBackends_data() { batchNormBackends_data(); }
    void batchNormReluBackends()
    {
        QFETCH(QList<qint64>, shape);
        const auto d = makeBatchNormDesc(toShape(shape), 1e-3, 0.2);
        const std::int64_t c = d.channels();
        Rng rng(static_cast<std::uint64_t>(d.shape.numel()) + 1);
        const Tensor x = randomTensor(d.shape, DType::Float32, rng, -2, 3);
        Tensor dy = randomTensor(d.shape, DType::Float32, rng);
        const Tensor gamma = randomTensor({c}, DType::Float32, rng, 0.5, 1.5);
        const Tensor beta = randomTensor({c}, DType::Float32, rng);
        Tensor rmR = Tensor::zeros({c}, DType::Float32),
               rvR = Tensor::filled({c}, DType::Float32, 1);
        Tensor rmD = rmR.clone(), rvD = rvR.clone();
        Tensor z, smR, svR;
        {
            Tensor rm = rmR.clone(), rv = rvR.clone();
            m_ref->batchNormForwardTraining(d, x, gamma, beta, z, rm, rv, smR, svR);
            for (std::int64_t i = 0; i < z.numel(); ++i)
                if (std::fabs(z.at(i)) < 1e-3) dy.setAt(i, 0);
        }
        Tensor yR, yD, smD, svD, savedR, savedD;
        Tensor dxR, dxD, dgR, dgD, dbR, dbD;
        for (int step = 0; step < 2; ++step) {
            m_ref->batchNormActForwardTraining(d, x, gamma, beta, Activation::Relu, yR, rmR, rvR,
                                               smR, svR, savedR);
            m_dnn->batchNormActForwardTraining(d, x, gamma, beta, Activation::Relu, yD, rmD, rvD,
                                               smD, svD, savedD);
            m_ref->batchNormActBackward(d, x, yR, dy, Activation::Relu, gamma, smR, svR, savedR,
                                        dxR, dgR, dbR);
            m_dnn->batchNormActBackward(d, x, yD, dy, Activation::Relu, gamma, smD, svD, savedD,
                                        dxD, dgD, dbD);
        }
        QVERIFY2(savedR.empty(), "the reference composes: no saved state");
        QVERIFY2(!savedD.empty(), "oneDNN fuses: the ReLU's mask is its saved state");
        CHECK_CLOSE("training y", yD, yR);
        CHECK_CLOSE("running mean", rmD, rmR);
        CHECK_CLOSE("running variance", rvD, rvR);
        CHECK_CLOSE("dx", dxD, dxR);
        CHECK_CLOSE("dgamma", dgD, dgR);
        CHECK_CLOSE("dbeta", dbD, dbR);
        Tensor dx2, dg2, db2;
        m_dnn->batchNormActBackward(d, x, yD, dy, Activation::Relu, gamma, smD, svD, Tensor(), dx2,
                                    dg2, db2);
        CHECK_CLOSE("dx from y", dx2, dxR);
        CHECK_CLOSE("dgamma from y", dg2, dgR);
        const Tensor wrong = Tensor::zeros({savedD.numel() + 1}, DType::UInt8);
        QVERIFY_THROWS_EXCEPTION(ShapeError,
                                 m_dnn->batchNormActBackward(d, x, yD, dy, Activation::Relu, gamma,
                                                             smD, svD, wrong, dx2, dg2, db2));
    }

    // ---------------------------------------------------------------- d) bad arguments

    void badArguments_data()
    {
        QTest::addColumn<QString>("backendName");
        QTest::newRow("reference") << "reference";
        QTest::newRow("onednn") << "onednn";
    }
    void badArguments()
    {
        QFETCH(QString, backendName);
        Ops& ops = backend(backendName);
        const auto f32 = DType::Float32;
        Tensor x = Tensor::zeros({2, 3}, f32), w = Tensor::zeros({4, 3}, f32), y, dx, dw, m;
        QVERIFY_THROWS_EXCEPTION(ShapeError, ops.linearForward(x, Tensor::zeros({4, 5}, f32),
                                                               Tensor(), y, Activation::None));
        QVERIFY_THROWS_EXCEPTION(
            ShapeError, ops.linearForward(x, w, Tensor::zeros({3}, f32), y, Activation::None));
        QVERIFY_THROWS_EXCEPTION(ShapeError, ops.linearForward(Tensor::zeros({2, 3, 1}, f32), w,
                                                               Tensor(), y, Activation::None));
        QVERIFY_THROWS_EXCEPTION(ShapeError,
                                 ops.linearBackwardData(Tensor::zeros({2, 5}, f32), w, dx));
        QVERIFY_THROWS_EXCEPTION(
            ShapeError, ops.linearBackwardWeights(x, Tensor::zeros({3, 4}, f32), dw, nullptr));
        const std::string linMsg = messageOf([&] {
            ops.linearForward(x, Tensor::zeros({4, 5}, f32), Tensor(), y, Activation::None);
        });
        QVERIFY2(linMsg.find("linear w") != std::string::npos &&
                     linMsg.find("[4, 3]") != std::string::npos &&
                     linMsg.find("[4, 5]") != std::string::npos,
                 linMsg.c_str());

        QVERIFY_THROWS_EXCEPTION(ShapeError, ops.reluBackward(x, w, dx));
        QVERIFY_THROWS_EXCEPTION(ShapeError, ops.add(x, w, y));
        QVERIFY_THROWS_EXCEPTION(ShapeError, ops.axpy(1.0, x, w));
        QVERIFY_THROWS_EXCEPTION(ShapeError, ops.sgdUpdate(0.1, x, w, Tensor(), Tensor()));
        {
            // An update's skip flag: empty, or [1] of w's dtype.
            Tensor wx = x.clone();
            QVERIFY_THROWS_EXCEPTION(ShapeError,
                                     ops.sgdUpdate(0.1, x, wx, Tensor::zeros({2}, f32), Tensor()));
            QVERIFY_THROWS_EXCEPTION(
                InvalidArgument,
                ops.sgdUpdate(0.1, x, wx, Tensor::zeros({1}, DType::Float64), Tensor()));
            ops.sgdUpdate(0.1, x, wx, Tensor::zeros({1}, f32), Tensor());
        }
        QVERIFY_THROWS_EXCEPTION(ShapeError, ops.nhwcToNchw(x, y));
        Tensor sq = Tensor::zeros({1, 2, 2, 1}, f32);
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, ops.nhwcToNchw(sq, sq)); // no in-place transpose

        for (double rate : {1.0, -0.1, 1.5, std::nan("")})
            QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                     ops.dropoutForward(x, rate, 1, y, m, Tensor()));
        QVERIFY_THROWS_EXCEPTION(
            InvalidArgument, ops.dropoutBackward(x, Tensor::zeros({2, 3}, DType::Int32), 0.5, dx));
        QVERIFY_THROWS_EXCEPTION(
            ShapeError, ops.dropoutBackward(x, Tensor::zeros({3, 2}, DType::UInt8), 0.5, dx));

        Tensor labels(Shape{2}, DType::Int32), loss;
        labels.data<std::int32_t>()[0] = 1;
        labels.data<std::int32_t>()[1] = 7;
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 ops.softmaxCrossEntropyForward(x, labels, 0.0, y, loss));
        const std::string msg =
            messageOf([&] { ops.softmaxCrossEntropyForward(x, labels, 0.0, y, loss); });
        QVERIFY2(msg.find("row 1") != std::string::npos && msg.find("label 7") != std::string::npos,
                 msg.c_str());
        labels.data<std::int32_t>()[1] = -1;
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 ops.softmaxCrossEntropyBackward(x, labels, 0.0, 1.0, dx));
        // The sum of squares accumulates into a Float64 [1] that must exist.
        Tensor noSum, sum32 = Tensor::zeros({1}, f32), sum2 = Tensor::zeros({2}, DType::Float64);
        QVERIFY_THROWS_EXCEPTION(ShapeError, ops.sumSquares(x, 1.0, noSum));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, ops.sumSquares(x, 1.0, sum32));
        QVERIFY_THROWS_EXCEPTION(ShapeError, ops.sumSquares(x, 1.0, sum2));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, ops.softmaxCrossEntropyForward(
                                                      x, Tensor::zeros({2}, f32), 0.0, y, loss));
        QVERIFY_THROWS_EXCEPTION(
            ShapeError,
            ops.softmaxCrossEntropyForward(x, Tensor::zeros({3}, DType::Int32), 0.0, y, loss));

        const auto d = makeBatchNormDesc({4, 3}, 1e-5, 0.1);
        Tensor g = Tensor::filled({3}, f32, 1.0), bt = Tensor::zeros({3}, f32);
        Tensor rm = Tensor::zeros({3}, f32), rv = Tensor::filled({3}, f32, 1.0), sm, sv;
        Tensor xb = Tensor::zeros({4, 3}, f32);
        QVERIFY_THROWS_EXCEPTION(
            ShapeError,
            ops.batchNormForwardTraining(d, xb, Tensor::zeros({4}, f32), bt, y, rm, rv, sm, sv));
        QVERIFY_THROWS_EXCEPTION(
            ShapeError,
            ops.batchNormForwardTraining(d, Tensor::zeros({4, 4}, f32), g, bt, y, rm, rv, sm, sv));
        QVERIFY_THROWS_EXCEPTION(ShapeError, ops.batchNormForwardInference(
                                                 d, xb, g, bt, Tensor::zeros({2}, f32), rv, y));
        const auto d1 = makeBatchNormDesc({1, 3}, 1e-5, 0.1);
        QVERIFY_THROWS_EXCEPTION(
            InvalidArgument,
            ops.batchNormForwardTraining(d1, Tensor::zeros({1, 3}, f32), g, bt, y, rm, rv, sm, sv));
        QVERIFY_THROWS_EXCEPTION(
            ShapeError,
            ops.batchNormBackward(d, xb, Tensor::zeros({4, 2}, f32), g, rm, rv, dx, dw, m));

        if (backendName == "onednn") {
            // Float64 is the reference's alone.
            const auto f64 = DType::Float64;
            Tensor x64 = Tensor::zeros({2, 3}, f64), w64 = Tensor::zeros({4, 3}, f64);
            QVERIFY_THROWS_EXCEPTION(Unsupported,
                                     ops.linearForward(x64, w64, Tensor(), y, Activation::None));
            QVERIFY_THROWS_EXCEPTION(Unsupported,
                                     ops.linearBackwardData(Tensor::zeros({2, 4}, f64), w64, dx));
            QVERIFY_THROWS_EXCEPTION(
                Unsupported,
                ops.linearBackwardWeights(x64, Tensor::zeros({2, 4}, f64), dw, nullptr));
            QVERIFY_THROWS_EXCEPTION(Unsupported, ops.reluForward(x64, y));
            QVERIFY_THROWS_EXCEPTION(Unsupported, ops.add(x64, x64, y));
            QVERIFY_THROWS_EXCEPTION(Unsupported, ops.dropoutForward(x64, 0.5, 1, y, m, Tensor()));
            QVERIFY_THROWS_EXCEPTION(Unsupported, ops.sumSquares(x64, 1.0, loss));
            QVERIFY_THROWS_EXCEPTION(Unsupported, ops.axpy(1.0, x64, x64));
            QVERIFY_THROWS_EXCEPTION(Unsupported, ops.sgdUpdate(0.1, x64, x64, Tensor(), Tensor()));
            QVERIFY_THROWS_EXCEPTION(Unsupported,
                                     ops.nhwcToNchw(Tensor::zeros({1, 1, 1, 1}, f64), y));
            labels.data<std::int32_t>()[1] = 0;
            QVERIFY_THROWS_EXCEPTION(Unsupported,
                                     ops.softmaxCrossEntropyForward(x64, labels, 0.0, y, loss));
            Tensor xb64 = Tensor::zeros({4, 3}, f64), g64 = Tensor::filled({3}, f64, 1.0);
            QVERIFY_THROWS_EXCEPTION(
                Unsupported, ops.batchNormForwardTraining(d, xb64, g64, g64, y, g64, g64, sm, sv));
        } else {
            // Mixed float dtypes in one call, and non-float tensors.
            QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                     ops.linearForward(x, Tensor::zeros({4, 3}, DType::Float64),
                                                       Tensor(), y, Activation::None));
            QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                     ops.add(x, Tensor::zeros({2, 3}, DType::Float64), y));
            QVERIFY_THROWS_EXCEPTION(
                InvalidArgument,
                ops.batchNormForwardTraining(d, xb, Tensor::filled({3}, DType::Float64, 1.0), bt, y,
                                             rm, rv, sm, sv));
            QVERIFY_THROWS_EXCEPTION(Unsupported,
                                     ops.reluForward(Tensor::zeros({2}, DType::Int32), y));
        }
    }
};

QTEST_APPLESS_MAIN(TestOpsDense)
#include "tst_ops_dense.moc"
