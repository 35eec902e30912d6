// SampleImageModel over a generated CIFAR-10 folder: consistent as an item model; each tile shows
// exactly the file's pixels (dataset_files' pixelValue formula is the oracle); the class filter,
// paging and explicit index lists select the right images; the distortion view shows what the
// recipe does (checked against hand-computed crops and mirrors), and a new seed draws anew.
#include <QAbstractItemModelTester>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <memory>

#include "dataset_files.h"
#include "engine/data/dataset.h"
#include "ui/models/sample_image_model.h"
#include "ui_test_support.h"

using towers::ui::SampleImageModel;
namespace eng = towers::engine;
namespace tt = towers::test;

namespace {
constexpr std::uint64_t kSeed = 5;
constexpr std::int64_t kPerBatch = 20, kTest = 50;

// The bytes of an image rescaled to 0..255 the way the distortion view shows float output of a
// Scale recipe (x / 255 is linear, so rescaling its floats equals rescaling the bytes).
std::vector<int> rescaled(const std::vector<int>& bytes)
{
    const auto [lo, hi] = std::minmax_element(bytes.begin(), bytes.end());
    std::vector<int> out(bytes.size(), 128);
    if (*hi > *lo)
        for (std::size_t i = 0; i < bytes.size(); ++i)
            out[i] = int(std::lround(double(bytes[i] - *lo) * 255.0 / double(*hi - *lo)));
    return out;
}

// The test image `index` (global index kTestIndexBase + index) as a 32x32x3 window.
std::vector<int> window(std::int64_t index, int y0, int x0, int size, bool mirror)
{
    std::vector<int> v;
    for (int y = 0; y < size; ++y)
        for (int x = 0; x < size; ++x)
            for (int c = 0; c < 3; ++c) {
                const int sx = mirror ? x0 + size - 1 - x : x0 + x;
                v.push_back(tt::pixelValue(kSeed, tt::kTestIndexBase + index, y0 + y, sx, c));
            }
    return v;
}

// Equal within 1 per value: the view rescales float32 output, the oracle exact integers, so a
// value of exactly k + 0.5 may round either way.
bool closeTo(const std::vector<int>& a, const std::vector<int>& b)
{
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (std::abs(a[i] - b[i]) > 1) return false;
    return true;
}

std::vector<int> pixelsOf(const QImage& img)
{
    std::vector<int> v;
    for (int y = 0; y < img.height(); ++y)
        for (int x = 0; x < img.width(); ++x) {
            const QRgb p = img.pixel(x, y);
            v.insert(v.end(), {qRed(p), qGreen(p), qBlue(p)});
        }
    return v;
}
} // namespace

class TestSampleImageModel : public QObject
{
    Q_OBJECT
    QTemporaryDir m_dir;
    std::shared_ptr<const eng::Dataset> m_data;

private slots:
    void initTestCase()
    {
        tt::writeCifar10(tt::fsPath(m_dir.path()), kPerBatch, kTest, kSeed);
        m_data =
            std::make_shared<eng::Dataset>(eng::loadDataset("cifar10", tt::fsPath(m_dir.path())));
        QCOMPARE(m_data->test.count, kTest);
    }

    void pixelsAreTheFiles()
    {
        SampleImageModel model;
        QAbstractItemModelTester tester(&model,
                                        QAbstractItemModelTester::FailureReportingMode::QtTest);
        QCOMPARE(model.rowCount(), 0);
        model.setDataset(m_data);
        model.setPageSize(12);
        QCOMPARE(model.rowCount(), 12);
        QCOMPARE(model.pageCount(), 5); // 50 test images
        for (int r = 0; r < model.rowCount(); ++r) {
            const QModelIndex i = model.index(r);
            const auto index = model.data(i, SampleImageModel::DatasetIndexRole).toLongLong();
            QCOMPARE(index, qint64(r));
            const int label = tt::labelValue(kSeed, tt::kTestIndexBase + index, 10);
            QCOMPARE(model.data(i, SampleImageModel::LabelRole).toInt(), label);
            QCOMPARE(model.data(i).toString(),
                     QString::fromStdString(m_data->classNames[std::size_t(label)]));
            const QImage img = model.data(i, SampleImageModel::ImageRole).value<QImage>();
            QCOMPARE(img.size(), QSize(32, 32));
            QCOMPARE(pixelsOf(img), window(index, 0, 0, 32, false));
            const QPixmap tile = model.data(i, Qt::DecorationRole).value<QPixmap>();
            QCOMPARE(tile.size(), QSize(model.tileSize(), model.tileSize()));
        }
    }

    void filterAndPaging()
    {
        SampleImageModel model;
        QAbstractItemModelTester tester(&model,
                                        QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setDataset(m_data);
        model.setSplit(SampleImageModel::Split::Train);
        model.setPageSize(7);
        const int label = m_data->train.labels[3];
        std::vector<std::int64_t> expected;
        for (std::int64_t i = 0; i < m_data->train.count; ++i)
            if (m_data->train.labels[std::size_t(i)] == label) expected.push_back(i);
        QSignalSpy paging(&model, &SampleImageModel::pagingChanged);
        model.setClassFilter(label);
        QVERIFY(paging.count() >= 1);
        QCOMPARE(model.matchCount(), std::int64_t(expected.size()));
        QCOMPARE(model.pageCount(), int((expected.size() + 6) / 7));
        std::vector<std::int64_t> seen;
        for (int p = 0; p < model.pageCount(); ++p) {
            model.setPage(p);
            QCOMPARE(model.page(), p);
            for (int r = 0; r < model.rowCount(); ++r) {
                QCOMPARE(model.data(model.index(r), SampleImageModel::LabelRole).toInt(), label);
                seen.push_back(
                    model.data(model.index(r), SampleImageModel::DatasetIndexRole).toLongLong());
            }
        }
        QCOMPARE(seen, expected);
        model.setPage(1000); // clamped
        QCOMPARE(model.page(), model.pageCount() - 1);
        model.setClassFilter(-1);
        QCOMPARE(model.matchCount(), m_data->train.count);
        QCOMPARE(model.page(), 0);
    }

    void indexList()
    {
        SampleImageModel model;
        QAbstractItemModelTester tester(&model,
                                        QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setDataset(m_data);
        model.setIndexList(std::vector<std::int64_t>{9, 3, 49, 70 /* out of range: dropped */});
        QCOMPARE(model.rowCount(), 3);
        QCOMPARE(model.data(model.index(0), SampleImageModel::DatasetIndexRole).toLongLong(), 9);
        QCOMPARE(model.data(model.index(2), SampleImageModel::DatasetIndexRole).toLongLong(), 49);
        model.setIndexList(std::nullopt);
        QCOMPARE(model.matchCount(), kTest);
    }

    void flipShowsOriginalOrMirror()
    {
        SampleImageModel model;
        QAbstractItemModelTester tester(&model,
                                        QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setDataset(m_data);
        model.setPageSize(50);
        eng::Preprocessing flip;
        flip.height = flip.width = 32;
        flip.channels = 3;
        flip.flip = true;
        flip.normalization = eng::Preprocessing::Normalization::Scale;
        QVERIFY(model.setRecipe(flip).isEmpty());
        model.setDistorted(true);
        QVERIFY(model.isDistorted());
        int mirrored = 0, plain = 0;
        for (int r = 0; r < model.rowCount(); ++r) {
            const QImage img =
                model.data(model.index(r), SampleImageModel::ImageRole).value<QImage>();
            const auto px = pixelsOf(img);
            if (closeTo(px, rescaled(window(r, 0, 0, 32, false))))
                ++plain;
            else if (closeTo(px, rescaled(window(r, 0, 0, 32, true))))
                ++mirrored;
            else
                QFAIL(qPrintable(
                    QStringLiteral("image %1 is neither the original nor its mirror").arg(r)));
        }
        // Flip with probability 1/2 over 50 images: both happen (the chance of not is 2^-49).
        QVERIFY(mirrored > 0);
        QVERIFY(plain > 0);
    }

    void cropIsAWindowAndSeedsDraw()
    {
        SampleImageModel model;
        model.setDataset(m_data);
        model.setPageSize(10);
        eng::Preprocessing crop;
        crop.height = crop.width = 24;
        crop.channels = 3;
        crop.normalization =
            eng::Preprocessing::Normalization::Scale; // random crop only when augmenting
        QVERIFY(model.setRecipe(crop).isEmpty());
        model.setDistorted(true);
        auto offsets = [&] {
            std::vector<std::pair<int, int>> found;
            for (int r = 0; r < model.rowCount(); ++r) {
                const auto px = pixelsOf(
                    model.data(model.index(r), SampleImageModel::ImageRole).value<QImage>());
                std::pair<int, int> at{-1, -1};
                for (int y = 0; y <= 8 && at.first < 0; ++y)
                    for (int x = 0; x <= 8 && at.first < 0; ++x)
                        if (closeTo(px, rescaled(window(r, y, x, 24, false)))) at = {y, x};
                if (at.first < 0) return std::vector<std::pair<int, int>>{};
                found.push_back(at);
            }
            return found;
        };
        const auto first = offsets();
        QCOMPARE(first.size(), std::size_t(10)); // every tile is a 24x24 window of its image
        QCOMPARE(offsets(), first);              // the same seed draws the same crops
        model.setDistortionSeed(model.distortionSeed() + 1);
        const auto second = offsets();
        QCOMPARE(second.size(), std::size_t(10));
        QVERIFY(second != first); // 10 crops out of 81 offsets each: a new seed moves some
        model.setDistorted(false);
        QCOMPARE(model.data(model.index(0), SampleImageModel::ImageRole).value<QImage>().size(),
                 QSize(32, 32));
    }

    void recipeThatDoesNotFitIsRefused()
    {
        SampleImageModel model;
        model.setDataset(m_data);
        eng::Preprocessing grey; // 28x28x1 does not fit 32x32x3 colour images
        grey.height = grey.width = 28;
        grey.channels = 1;
        const QString error = model.setRecipe(grey);
        QVERIFY(!error.isEmpty());
        QVERIFY(!model.hasRecipe());
        model.setDistorted(true);
        QVERIFY(!model.isDistorted());
    }
};

QTEST_MAIN(TestSampleImageModel)
#include "tst_sample_image_model.moc"
