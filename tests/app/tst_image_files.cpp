// Image files into model input (app/inference/image_files.h): decoding, the cover-and-centre crop
// that keeps the aspect ratio, grey by luminance, alpha over black, appending to a set of the
// right shape only, toQImage as the exact inverse for same-size images, and readable errors.
#include <QFile>
#include <QGuiApplication>
#include <QTemporaryDir>
#include <QTest>

#include "app/inference/image_files.h"
#include "engine/errors.h"

using namespace towers::app;
namespace eng = towers::engine;

namespace {
std::vector<std::uint8_t> pixels(const QImage& image, const eng::Shape& shape)
{
    eng::ImageSet set;
    appendImage(image, shape, set);
    return set.pixels;
}
} // namespace

class TestImageFiles : public QObject
{
    Q_OBJECT
private slots:
    void coverAndCentreCrop()
    {
        // A 40x20 image whose left and right quarters are black and middle white: covering 10x10
        // scales it to 20x10 and keeps the middle 10 columns, which are all white.
        QImage wide(40, 20, QImage::Format_RGB32);
        wide.fill(Qt::black);
        for (int y = 0; y < 20; ++y)
            for (int x = 10; x < 30; ++x) wide.setPixel(x, y, qRgb(255, 255, 255));
        const auto out = pixels(wide, {10, 10, 3});
        QCOMPARE(out.size(), std::size_t(300));
        for (auto v : out) QVERIFY2(v >= 250, "the crop must keep the centre");
    }

    void greyIsLuminance()
    {
        // Luminance orders the primaries green > red > blue, whatever the exact weights.
        auto grey = [](QRgb colour) {
            QImage img(8, 8, QImage::Format_RGB32);
            img.fill(colour);
            const auto out = pixels(img, {8, 8, 1});
            for (auto v : out) [&] { QCOMPARE(v, out[0]); }();
            return int(out[0]);
        };
        const int red = grey(qRgb(255, 0, 0)), green = grey(qRgb(0, 255, 0)),
                  blue = grey(qRgb(0, 0, 255));
        QVERIFY2(green > red && red > blue,
                 qPrintable(QStringLiteral("%1 %2 %3").arg(red).arg(green).arg(blue)));
        QCOMPARE(grey(qRgb(255, 255, 255)), 255);
        QCOMPARE(grey(qRgb(0, 0, 0)), 0);
        QCOMPARE(grey(qRgb(77, 77, 77)), 77); // grey stays grey
    }

    void alphaOverBlack()
    {
        QImage img(4, 4, QImage::Format_ARGB32);
        img.fill(qRgba(200, 100, 50, 0)); // fully transparent: black
        for (auto v : pixels(img, {4, 4, 3})) QCOMPARE(int(v), 0);
        img.fill(qRgba(200, 100, 40, 255)); // opaque: the colour
        const auto out = pixels(img, {4, 4, 3});
        QCOMPARE(int(out[0]), 200);
        QCOMPARE(int(out[1]), 100);
        QCOMPARE(int(out[2]), 40);
    }

    void readFileRoundTripAndErrors()
    {
        QTemporaryDir dir;
        QImage img(6, 3, QImage::Format_RGB888);
        img.fill(qRgb(10, 20, 30));
        const QString png = dir.filePath(QStringLiteral("a.png"));
        QVERIFY(img.save(png));
        const QImage back = readImageFile(png);
        QCOMPARE(back.size(), QSize(6, 3));
        QCOMPARE(back.pixel(5, 2), qRgb(10, 20, 30));

        const QString notImage = dir.filePath(QStringLiteral("notes.png"));
        QFile f(notImage);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("this is not a picture");
        f.close();
        try {
            readImageFile(notImage);
            QFAIL("a text file must not decode");
        } catch (const towers::engine::IoError& e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(notImage), e.what());
        }
        QVERIFY_THROWS_EXCEPTION(towers::engine::IoError,
                                 readImageFile(dir.filePath(QStringLiteral("missing.jpg"))));
    }

    void setsGrowAndKeepTheirShape()
    {
        QImage a(5, 3, QImage::Format_RGB888);
        a.fill(qRgb(1, 2, 3));
        eng::ImageSet set;
        appendImage(a, {3, 5, 3}, set);
        appendImage(a, {3, 5, 3}, set);
        QCOMPARE(set.count, 2);
        QCOMPARE(set.labels, (std::vector<std::int32_t>{0, 0}));
        QCOMPARE(set.pixels.size(), std::size_t(2 * 3 * 5 * 3));
        // Same size in and out: toQImage gives back the very pixels.
        QCOMPARE(toQImage(set, 1), a);
        QVERIFY_THROWS_EXCEPTION(eng::ShapeError, appendImage(a, {3, 5, 1}, set));
        QVERIFY_THROWS_EXCEPTION(eng::InvalidArgument, appendImage(a, {3, 5, 2}, set));
        QVERIFY_THROWS_EXCEPTION(eng::InvalidArgument, appendImage(QImage(), {3, 5, 3}, set));
        QCOMPARE(set.count, 2);
    }
};

QTEST_MAIN(TestImageFiles)
#include "tst_image_files.moc"
