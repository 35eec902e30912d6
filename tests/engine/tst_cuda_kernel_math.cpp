// The CUDA backend's own kernels, element by element, on the CPU: engine/cuda/kernel_math.h holds
// what each kernel computes for one index, and the kernels run exactly those functions in their
// grid-stride loops. Here every index is run in turn and the results are compared with the
// reference backend: index arithmetic, TensorFlow's asymmetric padding, tie-breaking, the
// formulas. What only a GPU can show (launches, cuDNN, cuBLAS, NCCL) is tst_gpu_backend's.
#include <QtTest>

#include <cstring>
#include <limits>
#include <vector>

#include "engine/cuda/kernel_math.h"
#include "engine/ops/dropout_mask.h"
#include "engine/ops/ops.h"
#include "gradcheck.h"
#include "replication.h"

using namespace towers::engine;
using towers::engine::cuda::WindowGeometry;
using towers::test::distinctTensor;
using towers::test::normalisedError;
using towers::test::randomTensor;
using towers::test::sameBytes;

namespace {

float* f(Tensor& t)
{
    return t.data<float>();
}
const float* f(const Tensor& t)
{
    return t.data<float>();
}

WindowGeometry geometry(const Window2d& w)
{
    return {w.n, w.h, w.w, w.c, w.oh, w.ow, w.kh, w.kw, w.sh, w.sw, w.padTop, w.padLeft};
}

struct PoolCase
{
    Shape x;
    int k, s;
    Padding padding;
    ExplicitPads pads;
};

} // namespace

class TestCudaKernelMath : public QObject
{
    Q_OBJECT
    std::unique_ptr<Ops> m_ref = makeReferenceOps();

    // The pooling rows' geometries (maxPool_data's rows, in order).
    static Pool2dDesc poolCase(int which)
    {
        const PoolCase cases[] = {
            {{2, 7, 8, 3}, 3, 2, Padding::Same, {}},
            {{1, 8, 8, 4}, 3, 2, Padding::Same, {}},
            {{1, 7, 7, 2}, 2, 2, Padding::Valid, {}},
            {{2, 5, 6, 3}, 3, 1, Padding::Same, {}},
            {{1, 6, 5, 2}, 3, 2, Padding::Explicit, {2, 0, 0, 1}},
        };
        const PoolCase& pc = cases[which];
        return makePool2dDesc(pc.x, pc.k, pc.k, pc.s, pc.s, pc.padding, pc.pads);
    }

private slots:
    void maxPool_data()
    {
        QTest::addColumn<int>("which");
        QTest::newRow("3x3/2 same, pads 1/1 0/1") << 0;
        QTest::newRow("3x3/2 same 8x8, pads 0/1") << 1;
        QTest::newRow("2x2/2 valid 7x7, unused last row") << 2;
        QTest::newRow("3x3/1 same, overlapping") << 3;
        QTest::newRow("3x3/2 explicit t2 l0 b0 r1") << 4;
    }
    void maxPool()
    {
        QFETCH(int, which);
        const Pool2dDesc d = poolCase(which);
        Rng rng(7 + std::uint64_t(which));
        // Distinct values, and a few exact ties (the first maximum in scan order must win).
        Tensor x = distinctTensor(d.inputShape(), DType::Float32, rng);
        for (std::int64_t i = 0; i + 1 < x.numel(); i += 9) x.setAt(i + 1, x.at(i));
        const Tensor dy = randomTensor(d.outputShape(), DType::Float32, rng);
        Tensor want, wantWs, wantDx;
        m_ref->maxPoolForward(d, x, want, wantWs);
        m_ref->maxPoolBackward(d, x, want, dy, wantWs, wantDx);

        const WindowGeometry g = geometry(d.win);
        Tensor y(d.outputShape(), DType::Float32), argmax(d.outputShape(), DType::Int32);
        for (std::int64_t i = 0; i < y.numel(); ++i)
            cuda::maxPoolForwardAt(i, g, f(x), f(y), argmax.data<std::int32_t>());
        QVERIFY(sameBytes(y, want));
        QVERIFY(sameBytes(argmax, wantWs));
        Tensor dx(d.inputShape(), DType::Float32);
        for (std::int64_t i = 0; i < dx.numel(); ++i)
            cuda::maxPoolBackwardAt(i, g, f(dy), argmax.data<std::int32_t>(), f(dx));
        QVERIFY2(normalisedError(dx, wantDx) < 1e-6,
                 qPrintable(QString::number(normalisedError(dx, wantDx))));
    }

    // Average pooling: every window's real elements (pads do not count), and each input's shares.
    void avgPool_data() { maxPool_data(); }
    void avgPool()
    {
        QFETCH(int, which);
        const Pool2dDesc d = poolCase(which);
        Rng rng(17 + std::uint64_t(which));
        const Tensor x = randomTensor(d.inputShape(), DType::Float32, rng);
        const Tensor dy = randomTensor(d.outputShape(), DType::Float32, rng);
        Tensor want, wantDx;
        m_ref->avgPoolForward(d, x, want);
        m_ref->avgPoolBackward(d, dy, wantDx);

        const WindowGeometry g = geometry(d.win);
        Tensor y(d.outputShape(), DType::Float32), dx(d.inputShape(), DType::Float32);
        for (std::int64_t i = 0; i < y.numel(); ++i) cuda::avgPoolForwardAt(i, g, f(x), f(y));
        QVERIFY2(normalisedError(y, want) < 1e-6,
                 qPrintable(QString::number(normalisedError(y, want))));
        for (std::int64_t i = 0; i < dx.numel(); ++i) cuda::avgPoolBackwardAt(i, g, f(dy), f(dx));
        QVERIFY2(normalisedError(dx, wantDx) < 1e-6,
                 qPrintable(QString::number(normalisedError(dx, wantDx))));
    }

    void lrn_data()
    {
        QTest::addColumn<int>("radius");
        QTest::addColumn<int>("channels");
        QTest::newRow("the tutorial's r4, C64") << 4 << 64;
        QTest::newRow("r2 C5") << 2 << 5;
        QTest::newRow("r5 wider than C3") << 5 << 3;
    }
    void lrn()
    {
        QFETCH(int, radius);
        QFETCH(int, channels);
        const auto d = makeLrnDesc({2, 3, 4, channels}, radius, 1.0, 0.001 / 9.0 * 50, 0.75);
        Rng rng(3);
        const Tensor x = randomTensor(d.shape, DType::Float32, rng, -3, 3);
        const Tensor dy = randomTensor(d.shape, DType::Float32, rng);
        Tensor want, ws, wantDx;
        m_ref->lrnForward(d, x, want, ws);
        m_ref->lrnBackward(d, x, want, dy, ws, wantDx);
        Tensor y(d.shape, DType::Float32), scale(d.shape, DType::Float32),
            dx(d.shape, DType::Float32);
        for (std::int64_t i = 0; i < x.numel(); ++i)
            cuda::lrnForwardAt(i, f(x), f(y), f(scale), channels, radius, 1.0f, float(d.alpha),
                               0.75f);
        for (std::int64_t i = 0; i < x.numel(); ++i)
            cuda::lrnBackwardAt(i, f(x), f(dy), f(scale), f(dx), channels, radius, float(d.alpha),
                                0.75f);
        QVERIFY(normalisedError(y, want) < 1e-6);
        QVERIFY(normalisedError(scale, ws) < 1e-6);
        QVERIFY2(normalisedError(dx, wantDx) < 1e-5,
                 qPrintable(QString::number(normalisedError(dx, wantDx))));
    }

    // TensorFlow's SAME padding of a 5x5/2 convolution on 8x9: 1 above, 2 below, 1 left, 2 right.
    void padAndCrop()
    {
        const auto d = makeConv2dDesc({2, 8, 9, 3}, 4, 5, 5, 2, 2, Padding::Same);
        const Window2d& w = d.win;
        QCOMPARE(w.padBottom - w.padTop, 1);
        const std::int64_t h2 = w.h + w.padTop + w.padBottom, w2 = w.w + w.padLeft + w.padRight;
        Rng rng(5);
        const Tensor x = randomTensor(d.inputShape(), DType::Float32, rng);
        Tensor padded({w.n, h2, w2, w.c}, DType::Float32);
        for (std::int64_t i = 0; i < padded.numel(); ++i)
            cuda::padAt(i, f(x), f(padded), w.h, w.w, w.c, h2, w2, w.padTop, w.padLeft);
        // Inside: x; on the border: zeros.
        for (std::int64_t n = 0; n < w.n; ++n)
            for (std::int64_t r = 0; r < h2; ++r)
                for (std::int64_t q = 0; q < w2; ++q)
                    for (std::int64_t c = 0; c < w.c; ++c) {
                        const std::int64_t ir = r - w.padTop, iq = q - w.padLeft;
                        const double want = ir >= 0 && ir < w.h && iq >= 0 && iq < w.w
                                                ? x.at(((n * w.h + ir) * w.w + iq) * w.c + c)
                                                : 0.0;
                        QCOMPARE(padded.at(((n * h2 + r) * w2 + q) * w.c + c), want);
                    }
        Tensor back(d.inputShape(), DType::Float32);
        for (std::int64_t i = 0; i < back.numel(); ++i)
            cuda::cropAt(i, f(padded), f(back), w.h, w.w, w.c, h2, w2, w.padTop, w.padLeft);
        QVERIFY(sameBytes(back, x));
    }

    void copyChannels()
    {
        // Channels 1..3 of x [2,3,4,5] into channels 2..4 of y [2,3,4,6], against the reference.
        Rng rng(12);
        const Tensor x = randomTensor({2, 3, 4, 5}, DType::Float32, rng);
        const Tensor y0 = randomTensor({2, 3, 4, 6}, DType::Float32, rng);
        Tensor want = y0.clone(), y = y0.clone();
        m_ref->copyChannels(x, 1, 3, want, 2);
        for (std::int64_t i = 0; i < 2 * 3 * 4 * 3; ++i)
            cuda::copyChannelsAt(i, f(x) + 1, f(y) + 2, 3, 5, 6);
        QVERIFY(sameBytes(y, want));
        QCOMPARE(y.at(((1 * 3 + 2) * 4 + 3) * 6 + 4), x.at(((1 * 3 + 2) * 4 + 3) * 5 + 3));
        QCOMPARE(y.at(((1 * 3 + 2) * 4 + 3) * 6 + 5), y0.at(((1 * 3 + 2) * 4 + 3) * 6 + 5));
    }

    void foldBatchNorm()
    {
        // A batch norm folded into conv weights [O,I,kH,kW] and dense weights [O,I] (one weight
        // per channel too, and one channel), with a bias and without, against the reference:
        // every weight, and every channel's bias written once by its first weight's thread.
        Rng rng(13);
        for (const Shape& shape :
             {Shape({6, 3, 2, 2}), Shape({6, 5}), Shape({6, 1}), Shape({1, 4, 3, 3})}) {
            const std::int64_t channels = shape[0], per = shape.numel() / channels;
            const Shape c{channels};
            const Tensor w = randomTensor(shape, DType::Float32, rng);
            const Tensor b = randomTensor(c, DType::Float32, rng);
            const Tensor gamma = randomTensor(c, DType::Float32, rng);
            const Tensor beta = randomTensor(c, DType::Float32, rng);
            const Tensor mean = randomTensor(c, DType::Float32, rng);
            Tensor var = randomTensor(c, DType::Float32, rng);
            for (std::int64_t i = 0; i < channels; ++i)
                var.data<float>()[i] = 0.5f + std::abs(var.at(i));
            for (const bool bias : {true, false}) {
                Tensor wantW, wantB;
                m_ref->foldBatchNorm(w, bias ? b : Tensor(), gamma, beta, mean, var, 1e-3, wantW,
                                     wantB);
                Tensor wOut = Tensor::zeros(w.shape(), DType::Float32);
                Tensor bOut = Tensor::filled(c, DType::Float32, 1e30);
                for (std::int64_t i = 0; i < w.numel(); ++i)
                    cuda::foldBatchNormAt(i, per, f(w), bias ? f(b) : nullptr, f(gamma), f(beta),
                                          f(mean), f(var), 1e-3, f(wOut), f(bOut));
                QVERIFY2(sameBytes(wOut, wantW), qPrintable(QString::fromStdString(shape.str())));
                QVERIFY2(sameBytes(bOut, wantB), qPrintable(QString::fromStdString(shape.str())));
            }
        }
    }

    void layouts()
    {
        Rng rng(9);
        const Tensor x = randomTensor({2, 3, 5, 4}, DType::Float32, rng); // NHWC
        Tensor want, y({2, 4, 3, 5}, DType::Float32);
        m_ref->nhwcToNchw(x, want);
        for (std::int64_t i = 0; i < x.numel(); ++i)
            cuda::transposeInnerAt(i, f(x), f(y), 3 * 5, 4);
        QVERIFY(sameBytes(y, want));
        Tensor back({2, 3, 5, 4}, DType::Float32);
        for (std::int64_t i = 0; i < y.numel(); ++i)
            cuda::transposeInnerAt(i, f(y), f(back), 4, 3 * 5);
        QVERIFY(sameBytes(back, x));
        // OIHW -> OHWI and back, as the filters of cuDNN's NHWC convolutions.
        const Tensor w = randomTensor({6, 3, 5, 5}, DType::Float32, rng);
        Tensor ohwi({6, 5, 5, 3}, DType::Float32), oihw({6, 3, 5, 5}, DType::Float32);
        for (std::int64_t i = 0; i < w.numel(); ++i)
            cuda::transposeInnerAt(i, f(w), f(ohwi), 3, 25);
        QCOMPARE(ohwi.at(((1 * 5 + 2) * 5 + 4) * 3 + 2), w.at(((1 * 3 + 2) * 5 + 2) * 5 + 4));
        for (std::int64_t i = 0; i < w.numel(); ++i)
            cuda::transposeInnerAt(i, f(ohwi), f(oihw), 25, 3);
        QVERIFY(sameBytes(oihw, w));
    }

    void batchNorm()
    {
        const auto d = makeBatchNormDesc({4, 3, 5, 6}, 1e-5, 0.1);
        const std::int64_t rows = d.rows(), c = d.channels();
        Rng rng(11);
        const Tensor x = randomTensor(d.shape, DType::Float32, rng, -2, 3);
        const Tensor dy = randomTensor(d.shape, DType::Float32, rng);
        const Tensor gamma = randomTensor({c}, DType::Float32, rng, 0.5, 1.5);
        const Tensor beta = randomTensor({c}, DType::Float32, rng);
        Tensor rm = randomTensor({c}, DType::Float32, rng),
               rv = randomTensor({c}, DType::Float32, rng, 0.5, 2);
        Tensor wantY, wantRm = rm.clone(), wantRv = rv.clone(), wantMean, wantVar, wantDx, wantDg,
                      wantDb;
        m_ref->batchNormForwardTraining(d, x, gamma, beta, wantY, wantRm, wantRv, wantMean,
                                        wantVar);
        m_ref->batchNormBackward(d, x, dy, gamma, wantMean, wantVar, wantDx, wantDg, wantDb);

        // The statistics as batch_norm.cu sums them (its functors, here in one pass per column).
        Tensor mean = Tensor::zeros({c}, DType::Float32), var = Tensor::zeros({c}, DType::Float32);
        for (std::int64_t ch = 0; ch < c; ++ch) {
            double s = 0;
            for (std::int64_t r = 0; r < rows; ++r) s += x.at(r * c + ch);
            f(mean)[ch] = float(s / double(rows));
        }
        for (std::int64_t ch = 0; ch < c; ++ch) {
            double s = 0;
            for (std::int64_t r = 0; r < rows; ++r)
                s += cuda::centredSquareAt(r * c + ch, f(x), f(mean), c);
            f(var)[ch] = float(s / double(rows));
        }
        QVERIFY(normalisedError(mean, wantMean) < 1e-6);
        QVERIFY(normalisedError(var, wantVar) < 1e-6);
        Tensor y(d.shape, DType::Float32);
        for (std::int64_t i = 0; i < y.numel(); ++i)
            cuda::batchNormApplyAt(i, f(x), f(mean), f(var), f(gamma), f(beta), f(y), c, 1e-5f);
        QVERIFY(normalisedError(y, wantY) < 1e-6);
        for (std::int64_t ch = 0; ch < c; ++ch)
            cuda::batchNormRunningAt(ch, f(rm), f(rv), f(mean), f(var),
                                     double(rows) / double(rows - 1), 0.1f);
        QVERIFY(normalisedError(rm, wantRm) < 1e-6);
        QVERIFY(normalisedError(rv, wantRv) < 1e-6);

        Tensor dg = Tensor::zeros({c}, DType::Float32), db = Tensor::zeros({c}, DType::Float32);
        for (std::int64_t ch = 0; ch < c; ++ch) {
            double sg = 0, sb = 0;
            for (std::int64_t r = 0; r < rows; ++r) {
                sb += dy.at(r * c + ch);
                sg += cuda::dyXhatAt(r * c + ch, f(x), f(dy), f(mean), f(var), c, 1e-5f);
            }
            f(dg)[ch] = float(sg);
            f(db)[ch] = float(sb);
        }
        QVERIFY(normalisedError(dg, wantDg) < 1e-5);
        QVERIFY(normalisedError(db, wantDb) < 1e-6);
        Tensor dx(d.shape, DType::Float32);
        for (std::int64_t i = 0; i < dx.numel(); ++i)
            cuda::batchNormBackwardAt(i, f(x), f(dy), f(mean), f(var), f(gamma), f(dg), f(db),
                                      f(dx), rows, c, 1e-5f);
        QVERIFY2(normalisedError(dx, wantDx) < 1e-5,
                 qPrintable(QString::number(normalisedError(dx, wantDx))));
    }

    // The column sums' grid (batch_norm.cu): its y dimension stays within CUDA's 65,535 blocks
    // however many 256-row chunks N·H·W makes, and the grid-stride loop over the chunks visits
    // each exactly once.
    void columnChunksFitTheGrid()
    {
        QCOMPARE(cuda::columnChunkBlocks(0), std::int64_t(1));
        QCOMPARE(cuda::columnChunkBlocks(1), std::int64_t(1));
        QCOMPARE(cuda::columnChunkBlocks(65535), std::int64_t(65535));
        QCOMPARE(cuda::columnChunkBlocks(65536), std::int64_t(65535));
        // 256 images of 256x256 (16,777,216 rows of channels: 65,536 chunks), and more.
        for (std::int64_t chunks : {std::int64_t(1), std::int64_t(7), std::int64_t(65535),
                                    std::int64_t(65536), std::int64_t(200003)}) {
            const std::int64_t blocks = cuda::columnChunkBlocks(chunks);
            QVERIFY(blocks >= 1 && blocks <= 65535);
            std::vector<int> visits(std::size_t(chunks), 0);
            for (std::int64_t block = 0; block < blocks; ++block)
                for (std::int64_t chunk = block; chunk < chunks; chunk += blocks)
                    ++visits[std::size_t(chunk)];
            for (int v : visits) QCOMPARE(v, 1);
        }
    }

    void softmaxCrossEntropy()
    {
        const std::int64_t n = 9, k = 10;
        Rng rng(13);
        const Tensor logits = randomTensor({n, k}, DType::Float32, rng, -8, 8);
        Tensor labels({n}, DType::Int32);
        for (std::int64_t i = 0; i < n; ++i)
            labels.data<std::int32_t>()[i] = std::int32_t(rng.below(k));
        Tensor probs({n, k}, DType::Float32), d({n, k}, DType::Float32);
        // Without label smoothing and with (the loss and the gradient both change with it).
        for (const double smoothing : {0.0, 0.1}) {
            Tensor wantProbs, wantD, wantLoss;
            m_ref->softmaxCrossEntropyForward(logits, labels, smoothing, wantProbs, wantLoss);
            m_ref->softmaxCrossEntropyBackward(wantProbs, labels, smoothing, 1.0 / double(n),
                                               wantD);
            double loss = 0;
            for (std::int64_t r = 0; r < n; ++r) {
                bool bad = true;
                loss += cuda::softmaxCrossEntropyRow(r, f(logits), labels.data<std::int32_t>(),
                                                     f(probs), k, smoothing, &bad);
                QVERIFY(!bad);
            }
            const double want = wantLoss.at(0);
            QVERIFY(std::fabs(loss / double(n) - want) < 1e-6 * std::fabs(want));
            QVERIFY(normalisedError(probs, wantProbs) < 1e-6);
            for (std::int64_t i = 0; i < n * k; ++i)
                cuda::softmaxCrossEntropyBackwardAt(i, f(probs), labels.data<std::int32_t>(), f(d),
                                                    k, float(1.0 - smoothing),
                                                    float(smoothing / double(k)), 1.0f / float(n));
            QVERIFY(normalisedError(d, wantD) < 1e-6);
        }
        // A label outside the classes is reported, not read.
        labels.data<std::int32_t>()[4] = std::int32_t(k);
        bool bad = false;
        QCOMPARE(cuda::softmaxCrossEntropyRow(4, f(logits), labels.data<std::int32_t>(), f(probs),
                                              k, 0.1, &bad),
                 0.0);
        QVERIFY(bad);
    }

    void dropoutDrawsTheSameMask()
    {
        Rng rng(17);
        const Tensor x = randomTensor({16, 300}, DType::Float32, rng);
        Tensor want, wantMask, wantDx;
        m_ref->dropoutForward(x, 0.3, 1234, want, wantMask, Tensor());
        m_ref->dropoutBackward(x, wantMask, 0.3, wantDx);
        Tensor y(x.shape(), DType::Float32), mask(x.shape(), DType::UInt8),
            dx(x.shape(), DType::Float32);
        const float scale = float(1.0 / (1.0 - 0.3));
        for (std::int64_t i = 0; i < x.numel(); ++i)
            cuda::dropoutForwardAt(i, f(x), f(y), mask.data<std::uint8_t>(), 1234,
                                   dropoutThreshold(0.3), scale);
        for (std::int64_t i = 0; i < x.numel(); ++i)
            cuda::dropoutBackwardAt(i, f(x), mask.data<std::uint8_t>(), f(dx), scale);
        QVERIFY(sameBytes(mask, wantMask));
        QVERIFY(normalisedError(y, want) < 1e-7);
        QVERIFY(normalisedError(dx, wantDx) < 1e-7);
    }

    // A step's scalars as the kernels read them (step_scalar_values.h): the scalar when the op has
    // them, else its host argument; dropout's seed mixed with the scalars' step, the mask the
    // reference draws from the same scalars.
    void kernelsReadTheStepScalars()
    {
        // lr, momentum's first step, Adam's corrections, the EMA's keep, dropout's step
        const StepScalars values{{0.1, 1, 0.5, 0.25, 0.75, 7}};
        QCOMPARE(stepScalar(nullptr, StepScalars::LearningRate, 0.25), 0.25);
        for (int i = 0; i < StepScalars::kCount; ++i)
            QCOMPARE(stepScalar(values.values, i, 0.25), values.values[i]);
        QCOMPARE(dropoutSeedOf(nullptr, 1234), std::uint64_t(1234));
        QCOMPARE(dropoutSeedOf(values.values, 1234), dropoutSeed(1234, 7));
        QVERIFY(dropoutSeedOf(values.values, 1234) != dropoutSeed(1234, 8));

        Rng rng(18);
        const Tensor x = randomTensor({8, 200}, DType::Float32, rng);
        Tensor scalars({StepScalars::kCount}, DType::Float64);
        std::memcpy(scalars.raw(), values.values, sizeof values.values);
        Tensor want, wantMask;
        m_ref->dropoutForward(x, 0.4, 1234, want, wantMask, scalars);
        Tensor y(x.shape(), DType::Float32), mask(x.shape(), DType::UInt8);
        const std::uint64_t seed = dropoutSeedOf(scalars.data<double>(), 1234);
        for (std::int64_t i = 0; i < x.numel(); ++i)
            cuda::dropoutForwardAt(i, f(x), f(y), mask.data<std::uint8_t>(), seed,
                                   dropoutThreshold(0.4), float(1.0 / (1.0 - 0.4)));
        QVERIFY(sameBytes(mask, wantMask));
        QVERIFY(normalisedError(y, want) < 1e-7);
        // Another step, another mask.
        Tensor other, otherMask;
        scalars.data<double>()[StepScalars::DropoutStep] = 8;
        m_ref->dropoutForward(x, 0.4, 1234, other, otherMask, scalars);
        QVERIFY(!sameBytes(otherMask, wantMask));
    }

    void reluAndBias()
    {
        Rng rng(19);
        const Tensor x = randomTensor({6, 7}, DType::Float32, rng);
        const Tensor b = randomTensor({7}, DType::Float32, rng);
        const Tensor dy = randomTensor({6, 7}, DType::Float32, rng);
        Tensor y = x.clone();
        for (std::int64_t i = 0; i < y.numel(); ++i) cuda::biasActivationAt(i, f(y), f(b), 7, true);
        for (std::int64_t i = 0; i < y.numel(); ++i)
            QCOMPARE(y.at(i), std::max(0.0, double(float(x.at(i) + b.at(i % 7)))));
        Tensor want, r(x.shape(), DType::Float32), dx(x.shape(), DType::Float32), wantDx;
        m_ref->reluForward(x, want);
        m_ref->reluBackward(want, dy, wantDx);
        for (std::int64_t i = 0; i < x.numel(); ++i) cuda::reluForwardAt(i, f(x), f(r));
        for (std::int64_t i = 0; i < x.numel(); ++i) cuda::reluBackwardAt(i, f(r), f(dy), f(dx));
        QVERIFY(sameBytes(r, want));
        QVERIFY(sameBytes(dx, wantDx));
    }

    void optimizerUpdates()
    {
        Rng rng(23);
        const Tensor g = randomTensor({50}, DType::Float32, rng);
        for (const bool nesterov : {false, true})
            for (const bool first : {true, false}) {
                Tensor w = randomTensor({50}, DType::Float32, rng),
                       buf = randomTensor({50}, DType::Float32, rng);
                Tensor wantW = w.clone(), wantBuf = buf.clone();
                MomentumStep s;
                s.lr = 0.05;
                s.momentum = 0.9;
                s.dampening = 0.1;
                s.nesterov = nesterov;
                s.first = first;
                m_ref->momentumUpdate(s, g, wantBuf, wantW, Tensor(), Tensor());
                for (std::int64_t i = 0; i < 50; ++i)
                    cuda::momentumAt(i, f(g), f(buf), f(w), 0.05f, 0.9f, 0.1f, nesterov, first);
                QVERIFY(normalisedError(w, wantW) < 1e-6);
                QVERIFY(normalisedError(buf, wantBuf) < 1e-6);
            }
        Tensor w = randomTensor({50}, DType::Float32, rng),
               m = randomTensor({50}, DType::Float32, rng);
        // v as small as a real second moment is (the op cases draw it up to 0.01): next to g^2,
        // a beta2 rounded to float before 1 - beta2 is taken shows (1.3e-5 of the g^2 term).
        Tensor v = randomTensor({50}, DType::Float32, rng, 0, 1e-3);
        // Adam, and AdamW's decoupled decay (w *= 1 - lr * decay: 2e-3 of w here, twice the
        // size of Adam's own step, so that a decay left out or doubled shows).
        for (const double decay : {0.0, 2.0}) {
            Tensor wd = w.clone(), md = m.clone(), vd = v.clone();
            Tensor wantW = w.clone(), wantM = m.clone(), wantV = v.clone();
            AdamStep a;
            a.step = 3;
            a.weightDecay = decay;
            m_ref->adamUpdate(a, g, wantM, wantV, wantW, Tensor(), Tensor());
            for (std::int64_t i = 0; i < 50; ++i)
                cuda::adamAt(i, f(g), f(md), f(vd), f(wd), float(a.lr), a.beta1, a.beta2, a.epsilon,
                             1.0 - std::pow(a.beta1, 3.0), std::sqrt(1.0 - std::pow(a.beta2, 3.0)),
                             decay);
            QVERIFY(normalisedError(wd, wantW) < 1e-6);
            QVERIFY(normalisedError(md, wantM) < 1e-6);
            QVERIFY(normalisedError(vd, wantV) < 1e-6);
        }
        // The finiteness flag: set by a NaN or an infinity anywhere, never cleared.
        for (const float special : {0.f, std::numeric_limits<float>::quiet_NaN(),
                                    std::numeric_limits<float>::infinity()}) {
            Tensor x = randomTensor({50}, DType::Float32, rng);
            if (special != 0.f) x.data<float>()[37] = special;
            Tensor flag({1}, DType::Float32), want({1}, DType::Float32);
            flag.data<float>()[0] = want.data<float>()[0] = 0.f;
            m_ref->flagNonFinite(x, want);
            for (std::int64_t i = 0; i < 50; ++i) cuda::flagNonFiniteAt(i, f(x), f(flag));
            QCOMPARE(flag.data<float>()[0], want.data<float>()[0]);
            QCOMPARE(flag.data<float>()[0], special != 0.f ? 1.f : 0.f);
        }
        // The moving average's step: the same float formula as the reference's, bitwise (FMA
        // contraction on the GPU may change the last bit there).
        for (const double keep : {0.9, 1e-4, 0.0, 1.0}) {
            Tensor shadow = randomTensor({50}, DType::Float32, rng);
            Tensor want = shadow.clone();
            m_ref->emaUpdate(keep, g, want, Tensor(), Tensor());
            for (std::int64_t i = 0; i < 50; ++i) cuda::emaAt(i, f(g), f(shadow), float(keep));
            QVERIFY(sameBytes(shadow, want));
        }
    }

    // The update kernels' skip flag (each thread returns before its loop when it is set): none
    // (nullptr) or 0 updates, anything else (1, a NaN, -0.5) leaves every element as it is, as the
    // reference does.
    void updatesSkippedByTheirFlag()
    {
        const float nan = std::numeric_limits<float>::quiet_NaN();
        float zero = 0.f, minusZero = -0.f, one = 1.f, notANumber = nan, negative = -0.5f;
        QVERIFY(!cuda::updateSkipped(nullptr));
        QVERIFY(!cuda::updateSkipped(&zero));
        QVERIFY(!cuda::updateSkipped(&minusZero));
        QVERIFY(cuda::updateSkipped(&one));
        QVERIFY(cuda::updateSkipped(&notANumber));
        QVERIFY(cuda::updateSkipped(&negative));

        Rng rng(29);
        const Tensor g = randomTensor({40}, DType::Float32, rng);
        for (const float flag : {0.f, 1.f, nan}) {
            Tensor skip({1}, DType::Float32);
            skip.data<float>()[0] = flag;
            const bool skipped = cuda::updateSkipped(f(skip));
            QCOMPARE(skipped, flag != 0.f);
            // A kernel's body: its grid-stride loop when the flag lets it run.
            const auto kernel = [&](auto&& at) {
                if (cuda::updateSkipped(f(skip))) return;
                for (std::int64_t i = 0; i < 40; ++i) at(i);
            };
            Tensor w = randomTensor({40}, DType::Float32, rng),
                   buf = randomTensor({40}, DType::Float32, rng),
                   m = randomTensor({40}, DType::Float32, rng),
                   v = randomTensor({40}, DType::Float32, rng, 0, 1);
            const Tensor w0 = w.clone(), buf0 = buf.clone(), m0 = m.clone(), v0 = v.clone();
            Tensor wantW = w.clone(), wantBuf = buf.clone(), wantM = m.clone(), wantV = v.clone();

            MomentumStep s;
            s.first = true;
            m_ref->momentumUpdate(s, g, wantBuf, wantW, skip, Tensor());
            kernel([&](std::int64_t i) {
                cuda::momentumAt(i, f(g), f(buf), f(w), float(s.lr), float(s.momentum),
                                 float(s.dampening), false, true);
            });
            QCOMPARE(sameBytes(w, w0), skipped);
            QCOMPARE(sameBytes(buf, buf0), skipped);
            QVERIFY(normalisedError(w, wantW) < 1e-6);
            QVERIFY(normalisedError(buf, wantBuf) < 1e-6);

            AdamStep a;
            a.weightDecay = 0.5; // AdamW's decay is skipped with the rest
            wantW = w.clone();
            m_ref->adamUpdate(a, g, wantM, wantV, wantW, skip, Tensor());
            const Tensor w1 = w.clone();
            kernel([&](std::int64_t i) {
                cuda::adamAt(i, f(g), f(m), f(v), f(w), float(a.lr), a.beta1, a.beta2, a.epsilon,
                             1.0 - a.beta1, std::sqrt(1.0 - a.beta2), a.weightDecay);
            });
            QCOMPARE(sameBytes(w, w1), skipped);
            QCOMPARE(sameBytes(m, m0), skipped);
            QCOMPARE(sameBytes(v, v0), skipped);
            QVERIFY(normalisedError(w, wantW) < 1e-6);
            QVERIFY(normalisedError(m, wantM) < 1e-6);
            QVERIFY(normalisedError(v, wantV) < 1e-6);

            Tensor shadow = randomTensor({40}, DType::Float32, rng);
            const Tensor shadow0 = shadow.clone();
            Tensor wantShadow = shadow.clone();
            m_ref->emaUpdate(0.5, g, wantShadow, skip, Tensor());
            kernel([&](std::int64_t i) { cuda::emaAt(i, f(g), f(shadow), 0.5f); });
            QCOMPARE(sameBytes(shadow, shadow0), skipped);
            QVERIFY(sameBytes(shadow, wantShadow));

            // sgdUpdate is axpy's kernel with alpha = -lr; the reference's sgdUpdate is its
            // axpy(-lr) to the bit.
            Tensor wantY = w.clone(), axpyY = w.clone();
            m_ref->sgdUpdate(0.25, g, wantY, skip, Tensor());
            m_ref->axpy(-0.25, g, axpyY);
            QVERIFY(sameBytes(wantY, skipped ? w : axpyY));
        }
    }

    void meanAcrossRanksIsRankOrdered()
    {
        std::vector<float> a{1.f, 2.f, 1e8f}, b{3.f, -2.f, 1.f}, c{5.f, 0.5f, -1e8f};
        float* ranks[] = {a.data(), b.data(), c.data()};
        for (std::int64_t i = 0; i < 3; ++i) cuda::meanAcrossRanksAt(i, ranks, 3);
        for (const auto* r : {&a, &b, &c}) {
            QCOMPARE((*r)[0], 3.f);
            QCOMPARE((*r)[1], float(0.5 / 3.0)); // (2 - 2 + 0.5) / 3
            QCOMPARE((*r)[2], float(1.0 / 3.0)); // summed in double: 1e8 and -1e8 cancel exactly
        }
    }

    // --precision bf16's copies: each float32 becomes the nearer of the two bfloat16 values around
    // it (ties to the one with an even last bit), as the host's Tensor::setAt rounds; a NaN stays
    // a NaN, an overflow becomes infinity, bfloat16 values and infinities come back unchanged.
    void bfloat16RoundsToNearestEven()
    {
        const auto bits = [](float f) {
            std::uint32_t b;
            std::memcpy(&b, &f, 4);
            return b;
        };
        const auto ofBits = [](std::uint32_t b) {
            float f;
            std::memcpy(&f, &b, 4);
            return f;
        };
        QCOMPARE(cuda::bfloat16Bits(ofBits(0x3f808000u)), std::uint16_t(0x3f80)); // tie: even
        QCOMPARE(cuda::bfloat16Bits(ofBits(0x3f818000u)), std::uint16_t(0x3f82)); // tie: even
        QCOMPARE(cuda::bfloat16Bits(ofBits(0x3f808001u)), std::uint16_t(0x3f81)); // above: up
        QCOMPARE(cuda::bfloat16Bits(ofBits(0xbf80ffffu)), std::uint16_t(0xbf81)); // negative
        QCOMPARE(cuda::bfloat16Bits(ofBits(0x7f7fffffu)), std::uint16_t(0x7f80)); // FLT_MAX: inf
        const float inf = std::numeric_limits<float>::infinity();
        QCOMPARE(cuda::fromBfloat16Bits(cuda::bfloat16Bits(-inf)), -inf);
        for (std::uint32_t nan : {0x7fc00000u, 0x7f800001u, 0xffffffffu, 0x7fffffffu}) {
            const float back = cuda::fromBfloat16Bits(cuda::bfloat16Bits(ofBits(nan)));
            QVERIFY2(std::isnan(back), qPrintable(QString::number(nan, 16)));
            QCOMPARE(bits(back) >> 31, nan >> 31); // its sign kept
        }
        Rng rng(41);
        Tensor host({1}, DType::BFloat16);
        for (int i = 0; i < 200000; ++i) {
            // Finite floats of every exponent, and exact bfloat16 values.
            std::uint32_t b = std::uint32_t(rng.next());
            if ((b & 0x7f800000u) >= 0x7f000000u) b &= 0xbfffffffu; // no overflow to inf
            if (i % 7 == 0) b &= 0xffff0000u;
            const float f = ofBits(b);
            const std::uint16_t h = cuda::bfloat16Bits(f);
            const float r = cuda::fromBfloat16Bits(h);
            if ((b & 0xffffu) == 0) QCOMPARE(r, f);
            // The two bfloat16 values around f: truncated and one step away from zero.
            const float lo = ofBits(b & 0xffff0000u), hi = ofBits((b & 0xffff0000u) + 0x10000u);
            QVERIFY(bits(r) == bits(lo) || bits(r) == bits(hi));
            const double d = std::abs(double(f) - double(r));
            const double other = std::abs(double(f) - double(bits(r) == bits(lo) ? hi : lo));
            QVERIFY2(d < other || (d == other && (h & 1u) == 0),
                     qPrintable(QString::number(b, 16)));
            host.setAt(0, f);
            QCOMPARE(static_cast<const std::uint16_t*>(host.raw())[0], h); // as the host rounds
            std::uint16_t back = 0;
            cuda::toBfloat16At(0, &r, &back);
            QCOMPARE(back, h);
            float again = 0;
            cuda::fromBfloat16At(0, &h, &again);
            QCOMPARE(bits(again), bits(r));
        }
    }
};

QTEST_APPLESS_MAIN(TestCudaKernelMath)
#include "tst_cuda_kernel_math.moc"
