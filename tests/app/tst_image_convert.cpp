// Image display conversion: HWC bytes to QImage pixel by pixel (odd widths: padded scan lines),
// and the rescaling of preprocessed floats to 0..255.
#include <QGuiApplication>
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
        for (int y = 0; y < h; ++y)
            for (int x = 0; x < w; ++x)
                QCOMPARE(qGray(img.pixel(x, y)), int(px[std::size_t(y * w + x)]));
    }

    void badShapesThrow()
    {
        std::uint8_t px[4] = {};
        QVERIFY_THROWS_EXCEPTION(towers::engine::InvalidArgument, imageFromHwc(px, 2, 2, 2));
        QVERIFY_THROWS_EXCEPTION(towers::engine::InvalidArgument, imageFromHwc(px, 0, 2, 1));
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
};

QTEST_MAIN(TestImageConvert)
#include "tst_image_convert.moc"
