// Image conversion: HWC bytes <-> QImage pixel by pixel, the display rescaling of preprocessed
// floats, the cover-and-centre-crop of user images, grey by luminance, inversion, alpha over
// black, and readable errors for files that are not images.
#include <QGuiApplication>
#include <QTemporaryDir>
#include <QTest>

#include "app/image/image_convert.h"
#include "engine/errors.h"

using namespace towers::app;

class TestImageConvert : public QObject
{
    Q_OBJECT
private slots:
    void hwcToImageRgb()
    {
        const int h = 3, w = 5;
        std::vector<std::uint8_t> px(h * w * 3);
        for (std::size_t i = 0; i < px.size(); ++i) px[i] = std::uint8_t(i * 7 % 256);
        const QImage img = imageFromHwc(px.data(), h, w, 3);
        QCOMPARE(img.size(), QSize(w, h));
        for (int y = 0; y < h; ++y)
            for (int x = 0; x < w; ++x) {
                const QRgb c = img.pixel(x, y);
                const std::size_t o = std::size_t((y * w + x) * 3);
                QCOMPARE(qRed(c), int(px[o]));
                QCOMPARE(qGreen(c), int(px[o + 1]));
                QCOMPARE(qBlue(c), int(px[o + 2]));
            }
    }

    void hwcToImageGreyAndBack()
    {
        const int h = 4, w = 7; // odd width: scan lines are padded, rows must not be
        std::vector<std::uint8_t> px(h * w);
        for (std::size_t i = 0; i < px.size(); ++i) px[i] = std::uint8_t(255 - i * 9);
        const QImage img = imageFromHwc(px.data(), h, w, 1);
        QCOMPARE(img.format(), QImage::Format_Grayscale8);
        QCOMPARE(qGray(img.pixel(6, 3)), int(px[3 * 7 + 6]));
        // Same size back: no scaling, exactly the bytes.
        QCOMPARE(hwcFromImage(img, h, w, 1), px);
        std::vector<std::uint8_t> inverted(px.size());
        for (std::size_t i = 0; i < px.size(); ++i) inverted[i] = std::uint8_t(255 - px[i]);
        QCOMPARE(hwcFromImage(img, h, w, 1, true), inverted);
    }

    void badShapesThrow()
    {
        std::uint8_t px[4] = {};
        QVERIFY_THROWS_EXCEPTION(towers::engine::InvalidArgument, imageFromHwc(px, 2, 2, 2));
        QVERIFY_THROWS_EXCEPTION(towers::engine::InvalidArgument, imageFromHwc(px, 0, 2, 1));
        QVERIFY_THROWS_EXCEPTION(towers::engine::InvalidArgument, hwcFromImage(QImage(), 2, 2, 1));
    }

    void floatsRescaledToFullRange()
    {
        // Values -2 .. 2 over a 2x2 RGB image: -2 -> 0, 2 -> 255, 0 -> 128 (127.5 rounded).
        const float v[12] = {-2, 0, 2, 1, 1, 1, 0, 0, 0, -1, -1, -1};
        const QImage img = imageFromFloats(v, 2, 2, 3);
        QCOMPARE(img.pixel(0, 0), qRgb(0, 128, 255));
        QCOMPARE(img.pixel(1, 0), qRgb(191, 191, 191)); // (1 + 2) / 4 * 255 = 191.25
        QCOMPARE(img.pixel(0, 1), qRgb(128, 128, 128));
        QCOMPARE(img.pixel(1, 1), qRgb(64, 64, 64));
        const float flat[4] = {3, 3, 3, 3};
        QCOMPARE(qGray(imageFromFloats(flat, 2, 2, 1).pixel(1, 1)), 128);
    }

    void coverAndCentreCrop()
    {
        // A 40x20 image whose left and right quarters are black and middle white: covering 10x10
        // scales it to 20x10 and keeps the middle 10 columns, which are all white.
        QImage wide(40, 20, QImage::Format_RGB32);
        wide.fill(Qt::black);
        for (int y = 0; y < 20; ++y)
            for (int x = 10; x < 30; ++x) wide.setPixel(x, y, qRgb(255, 255, 255));
        const auto out = hwcFromImage(wide, 10, 10, 3);
        QCOMPARE(out.size(), std::size_t(300));
        for (auto v : out) QVERIFY2(v >= 250, "the crop must keep the centre");
    }

    void greyIsLuminance()
    {
        // Luminance orders the primaries green > red > blue, whatever the exact weights.
        auto grey = [](QRgb colour) {
            QImage img(8, 8, QImage::Format_RGB32);
            img.fill(colour);
            const auto out = hwcFromImage(img, 8, 8, 1);
            for (auto v : out) [&] { QCOMPARE(v, out[0]); }();
            return int(out[0]);
        };
        const int red = grey(qRgb(255, 0, 0)), green = grey(qRgb(0, 255, 0)), blue = grey(qRgb(0, 0, 255));
        QVERIFY2(green > red && red > blue, qPrintable(QStringLiteral("%1 %2 %3").arg(red).arg(green).arg(blue)));
        QCOMPARE(grey(qRgb(255, 255, 255)), 255);
        QCOMPARE(grey(qRgb(0, 0, 0)), 0);
        QCOMPARE(grey(qRgb(77, 77, 77)), 77); // grey stays grey
    }

    void alphaOverBlack()
    {
        QImage img(4, 4, QImage::Format_ARGB32);
        img.fill(qRgba(200, 100, 50, 0)); // fully transparent: black
        for (auto v : hwcFromImage(img, 4, 4, 3)) QCOMPARE(int(v), 0);
        img.fill(qRgba(200, 100, 40, 255)); // opaque: the colour
        const auto out = hwcFromImage(img, 4, 4, 3);
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
        QVERIFY_THROWS_EXCEPTION(towers::engine::IoError, readImageFile(dir.filePath(QStringLiteral("missing.jpg"))));
    }
};

QTEST_MAIN(TestImageConvert)
#include "tst_image_convert.moc"
