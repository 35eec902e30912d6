// Tensor, shape, descriptors (padding arithmetic) and the RNG.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/ops/descriptors.h"
#include "engine/ops/dropout_mask.h"
#include "engine/tensor/rng.h"
#include "engine/tensor/tensor.h"
#include "resident_memory.h"

using namespace towers::engine;

using towers::test::residentBytes;

class TestTensor : public QObject
{
    Q_OBJECT
private slots:
    void shapeBasics()
    {
        Shape s{2, 3, 4};
        QCOMPARE(s.numel(), 24);
        QCOMPARE(s.rank(), 3);
        QCOMPARE(QString::fromStdString(s.str()), QStringLiteral("[2, 3, 4]"));
        QCOMPARE(s.withBatch(7)[0], 7);
        QVERIFY_THROWS_EXCEPTION(ShapeError, Shape({2, -1}));
    }
    void tensorViews()
    {
        Tensor t = Tensor::zeros({4, 3}, DType::Float32);
        for (int i = 0; i < 12; ++i) t.setAt(i, i);
        Tensor s = t.slice(1, 3);
        QCOMPARE(s.shape(), Shape({2, 3}));
        QCOMPARE(s.at(0), 3.0);
        s.setAt(0, 42); // a view shares bytes
        QCOMPARE(t.at(3), 42.0);
        Tensor c = t.clone();
        c.setAt(0, -1);
        QCOMPARE(t.at(0), 0.0);
        QCOMPARE(t.reshaped({12}).at(11), 11.0);
        QVERIFY_THROWS_EXCEPTION(ShapeError, t.reshaped({5}));
        QVERIFY_THROWS_EXCEPTION(ShapeError, t.slice(2, 5));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, t.data<double>());
        QCOMPARE(reinterpret_cast<std::uintptr_t>(t.raw()) % 64, 0u);
    }
    // A large tensor of zeros reads zero everywhere, is aligned and takes its memory only where
    // written (a huge network's parameters before they are initialised).
    void largeZerosTakeMemoryWhenWritten()
    {
        const std::int64_t n = std::int64_t(1) << 26; // 256 MiB of float32
        const std::int64_t before = residentBytes();
        Tensor t = Tensor::zeros({n}, DType::Float32);
        QVERIFY2(residentBytes() - before < (std::int64_t(32) << 20),
                 qPrintable(QStringLiteral("%1 MiB resident after making 256 MiB of zeros")
                                .arg((residentBytes() - before) >> 20)));
        QCOMPARE(reinterpret_cast<std::uintptr_t>(t.raw()) % 64, 0u);
        const auto v = t.span<float>();
        for (const std::int64_t i : {std::int64_t(0), n / 3, n - 1}) QCOMPARE(v[i], 0.0f);
        v[n - 1] = 2.5f;
        QCOMPARE(t.at(n - 1), 2.5);
        Tensor c = t.clone(); // an ordinary copy, written everywhere
        QCOMPARE(c.at(n - 1), 2.5);
        QCOMPARE(c.at(n / 2), 0.0);
        // Just under and at the size where the system's pages are used: zero, aligned.
        for (const std::size_t bytes : {Buffer::kMappedBytes - 4, Buffer::kMappedBytes}) {
            Tensor z = Tensor::zeros({std::int64_t(bytes / 4)}, DType::Float32);
            QCOMPARE(reinterpret_cast<std::uintptr_t>(z.raw()) % 64, 0u);
            const auto s = z.span<float>();
            QVERIFY(std::all_of(s.begin(), s.end(), [](float x) { return x == 0.0f; }));
        }
    }
    void dtypeConversion()
    {
        Tensor t = Tensor::filled({3}, DType::Float32, 1.5);
        Tensor d = t.to(DType::Float64);
        QCOMPARE(d.dtype(), DType::Float64);
        QCOMPARE(d.at(2), 1.5);
        Tensor b = Tensor::filled({1}, DType::BFloat16, 3.0);
        QCOMPARE(b.at(0), 3.0);
    }
    void ensureReusesBuffer()
    {
        Tensor t;
        Tensor::ensure(t, {8, 8}, DType::Float32);
        const void* p = t.raw();
        Tensor::ensure(t, {4, 8}, DType::Float32);
        QCOMPARE(t.raw(), p);
        QCOMPARE(t.shape(), Shape({4, 8}));
        Tensor::ensure(t, {16, 8}, DType::Float32);
        QCOMPARE(t.shape(), Shape({16, 8}));
    }
    void samePadding_data()
    {
        QTest::addColumn<int>("in");
        QTest::addColumn<int>("k");
        QTest::addColumn<int>("s");
        QTest::addColumn<int>("out");
        QTest::addColumn<int>("before");
        QTest::addColumn<int>("after");
        QTest::newRow("pool 24 k3 s2") << 24 << 3 << 2 << 12 << 0 << 1; // the tutorial's pool1
        QTest::newRow("pool 12 k3 s2") << 12 << 3 << 2 << 6 << 0 << 1;
        QTest::newRow("conv 24 k5 s1") << 24 << 5 << 1 << 24 << 2 << 2;
        QTest::newRow("odd 7 k2 s2") << 7 << 2 << 2 << 4 << 0 << 1;
        QTest::newRow("odd 5 k4 s1") << 5 << 4 << 1 << 5 << 1 << 2;
        QTest::newRow("big stride") << 5 << 1 << 3 << 2 << 0 << 0;
    }
    void samePadding()
    {
        QFETCH(int, in);
        QFETCH(int, k);
        QFETCH(int, s);
        QFETCH(int, out);
        QFETCH(int, before);
        QFETCH(int, after);
        auto w = makeWindow2d({1, in, in, 1}, k, k, s, s, Padding::Same);
        QCOMPARE(w.oh, out);
        QCOMPARE(w.padTop, before);
        QCOMPARE(w.padBottom, after);
        QCOMPARE(w.padLeft, before);
        QCOMPARE(w.padRight, after);
    }
    void validPadding()
    {
        auto w = makeWindow2d({1, 28, 28, 1}, 5, 5, 1, 1, Padding::Valid);
        QCOMPARE(w.oh, 24);
        QCOMPARE(w.padTop + w.padBottom, 0);
        QCOMPARE(makeWindow2d({1, 9, 9, 1}, 2, 2, 2, 2, Padding::Valid).oh, 4);
        QVERIFY_THROWS_EXCEPTION(ShapeError,
                                 makeWindow2d({1, 3, 3, 1}, 5, 5, 1, 1, Padding::Valid));
    }
    void badArguments()
    {
        QVERIFY_THROWS_EXCEPTION(ShapeError, makeWindow2d({1, 0, 3, 1}, 1, 1, 1, 1, Padding::Same));
        QVERIFY_THROWS_EXCEPTION(ShapeError, makeWindow2d({3, 3, 1}, 1, 1, 1, 1, Padding::Same));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 makeWindow2d({1, 3, 3, 1}, 0, 1, 1, 1, Padding::Same));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 makeWindow2d({1, 3, 3, 1}, 1, 1, 0, 1, Padding::Same));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 makeConv2dDesc({1, 3, 3, 1}, 0, 1, 1, 1, 1, Padding::Same));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, makeLrnDesc({1, 3, 3, 4}, 2, 0.0, 1, 0.75));
        QVERIFY_THROWS_EXCEPTION(ShapeError, makeBatchNormDesc({4, 3, 2}, 1e-5, 0.1));
    }
    // Finite everywhere: float32 and float64 each fail on one NaN or one infinity anywhere;
    // integers always pass.
    void allFiniteSeesEveryValue()
    {
        for (const DType t : {DType::Float32, DType::Float64}) {
            Tensor x = Tensor::zeros({3, 5}, t);
            QVERIFY(allFinite(x));
            for (const double bad : {std::nan(""), std::numeric_limits<double>::infinity(),
                                     -std::numeric_limits<double>::infinity()}) {
                Tensor y = Tensor::zeros({3, 5}, t);
                if (t == DType::Float32)
                    y.span<float>()[14] = float(bad);
                else
                    y.span<double>()[14] = bad;
                QVERIFY(!allFinite(y));
            }
        }
        QVERIFY(allFinite(Tensor::zeros({4}, DType::Int32)));
    }

    void rngIsReproducible()
    {
        Rng a(7), b(7), c(8);
        QCOMPARE(a.next(), b.next());
        QVERIFY(a.next() != c.next());
        Rng r(1);
        double sum = 0, sq = 0, maxAbs = 0;
        const int n = 100000;
        for (int i = 0; i < n; ++i) {
            double v = r.truncatedNormal(1.0);
            sum += v;
            sq += v * v;
            maxAbs = std::max(maxAbs, std::fabs(v));
        }
        QVERIFY(std::fabs(sum / n) < 0.02);
        // The variance of a standard normal truncated at +-2 is about 0.774.
        QVERIFY(std::fabs(sq / n - 0.774) < 0.02);
        QVERIFY(maxAbs <= 2.0);
    }
    void dropoutMaskRate()
    {
        const auto th = dropoutThreshold(0.25);
        int kept = 0;
        for (int i = 0; i < 100000; ++i)
            kept += dropoutKeeps(99, static_cast<std::uint64_t>(i), th);
        QVERIFY(std::abs(kept - 75000) < 1000);
        QVERIFY(dropoutKeeps(1, 2, 0)); // rate 0 keeps everything
    }
};

QTEST_APPLESS_MAIN(TestTensor)
#include "tst_tensor.moc"
