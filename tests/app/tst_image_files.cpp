// Image files into model input (app/inference/image_files.h): decoding, the cover-and-centre crop
// that keeps the aspect ratio, grey by luminance, alpha over black, appending to a set of the
// right shape only, toQImage as the exact inverse for same-size images, and readable errors.
// Hostile files (generated here): a 3,300,000 x 1 BMP, a 1,000,000 x 1 PNG, a 128-megapixel PNG,
// a FIFO and a directory named like images are refused, by name and size, at once (the FIFO never
// opened) and within bounded memory; the limits' edges; a very elongated image in memory crops
// without growing; large images decode reduced, keeping their EXIF orientation; 40 megapixels,
// within the budget, decode.
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QGuiApplication>
#include <QImageReader>
#include <QImageWriter>
#include <QTemporaryDir>
#include <QTest>
#include <QTransform>

#include <sys/resource.h>

#include <tuple>

#include "app/inference/image_files.h"
#include "engine/errors.h"
#include "hostile_images.h"

using namespace towers::app;
namespace test = towers::test;
namespace eng = towers::engine;

namespace {
std::vector<std::uint8_t> pixels(const QImage& image, const eng::Shape& shape,
                                 eng::ImageFit fit = eng::ImageFit::Crop)
{
    eng::ImageSet set;
    appendImage(image, shape, set, fit);
    return set.pixels;
}

// This process's peak resident memory so far, in MB.
double peakRssMb()
{
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return double(u.ru_maxrss) / 1024.0;
}

// The message of the engine::IoError that `read` throws; empty (and a test failure) if none.
template <class F> QString ioErrorOf(F read)
{
    try {
        read();
    } catch (const eng::IoError& e) {
        return QString::fromUtf8(e.what());
    } catch (const std::exception& e) {
        qWarning("not an IoError: %s", e.what());
        return {};
    }
    return {};
}

bool isRed(QRgb c)
{
    return qRed(c) > 200 && qBlue(c) < 60;
}
bool isBlue(QRgb c)
{
    return qBlue(c) > 200 && qRed(c) < 60;
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

    // The same 40x20 image (green quarters at the sides, white between) brought to 10x10 each
    // way: cropped, only white; squashed, the green sides in every row; fitted inside, the whole
    // image in rows 2 to 6 (10x5, centred), black above and below.
    void squashAndFill()
    {
        QImage wide(40, 20, QImage::Format_RGB32);
        wide.fill(qRgb(0, 255, 0));
        for (int y = 0; y < 20; ++y)
            for (int x = 10; x < 30; ++x) wide.setPixel(x, y, qRgb(255, 255, 255));
        const auto at = [](const std::vector<std::uint8_t>& p, int y, int x) {
            const std::size_t i = std::size_t(y * 10 + x) * 3;
            return qRgb(p[i], p[i + 1], p[i + 2]);
        };
        const auto green = [](QRgb c) { return qGreen(c) > 200 && qRed(c) < 60 && qBlue(c) < 60; };
        const auto white = [](QRgb c) {
            return qRed(c) > 240 && qGreen(c) > 240 && qBlue(c) > 240;
        };
        const auto black = [](QRgb c) { return qRed(c) == 0 && qGreen(c) == 0 && qBlue(c) == 0; };

        const auto cropped = pixels(wide, {10, 10, 3}, eng::ImageFit::Crop);
        QCOMPARE(cropped, pixels(wide, {10, 10, 3})); // the default
        for (int y = 0; y < 10; ++y)
            for (int x = 0; x < 10; ++x) QVERIFY(white(at(cropped, y, x)));

        const auto squashed = pixels(wide, {10, 10, 3}, eng::ImageFit::Squash);
        QCOMPARE(squashed.size(), std::size_t(300));
        for (int y = 0; y < 10; ++y) {
            QVERIFY2(green(at(squashed, y, 0)) && green(at(squashed, y, 9)),
                     qPrintable(QString::number(y)));
            QVERIFY(white(at(squashed, y, 4)) && white(at(squashed, y, 5)));
        }

        const auto filled = pixels(wide, {10, 10, 3}, eng::ImageFit::Fill);
        QCOMPARE(filled.size(), std::size_t(300));
        for (int x = 0; x < 10; ++x)
            for (int y : {0, 1, 7, 8, 9})
                QVERIFY2(black(at(filled, y, x)),
                         qPrintable(QStringLiteral("%1,%2").arg(y).arg(x)));
        for (int y = 2; y <= 6; ++y) {
            QVERIFY2(green(at(filled, y, 0)) && green(at(filled, y, 9)),
                     qPrintable(QString::number(y)));
            QVERIFY(white(at(filled, y, 4)) && white(at(filled, y, 5)));
        }
        // A tall one is fitted between black columns; a square one is the same every way.
        QImage tall = wide.transformed(QTransform().rotate(90));
        const auto standing = pixels(tall, {10, 10, 3}, eng::ImageFit::Fill);
        for (int y = 0; y < 10; ++y) {
            QVERIFY(black(at(standing, y, 0)) && black(at(standing, y, 9)));
            QVERIFY(!black(at(standing, y, 4)));
        }
        QImage square = wide.copy(10, 0, 20, 20);
        QCOMPARE(pixels(square, {10, 10, 3}, eng::ImageFit::Squash), pixels(square, {10, 10, 3}));
        QCOMPARE(pixels(square, {10, 10, 3}, eng::ImageFit::Fill), pixels(square, {10, 10, 3}));
        // The names, and a wrong one refused with the choices.
        for (const auto fit : {eng::ImageFit::Crop, eng::ImageFit::Squash, eng::ImageFit::Fill})
            QCOMPARE(eng::imageFitFromName(eng::imageFitName(fit)), fit);
        QVERIFY_THROWS_EXCEPTION(eng::InvalidArgument, eng::imageFitFromName("stretch"));
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

    // A grey GIF of `image`'s pixels (Qt writes no GIF): 9-bit LZW codes, each a pixel, the
    // table cleared before it needs wider codes.
    static QByteArray greyGif(const QImage& image)
    {
        QByteArray g("GIF89a");
        const auto u16 = [&](int v) { g.append(char(v & 255)).append(char(v >> 8)); };
        u16(image.width());
        u16(image.height());
        g.append(char(0xF7)).append(char(0)).append(char(0)); // 256 colours, all grey
        for (int i = 0; i < 256; ++i) g.append(char(i)).append(char(i)).append(char(i));
        g.append(char(0x2C));
        u16(0);
        u16(0);
        u16(image.width());
        u16(image.height());
        g.append(char(0)).append(char(8)); // no local table; 8-bit symbols
        QByteArray codes;
        quint32 bits = 0;
        int count = 0;
        const auto put = [&](int code) {
            bits |= quint32(code) << count;
            for (count += 9; count >= 8; count -= 8, bits >>= 8) codes.append(char(bits & 255));
        };
        put(256);
        int run = 0;
        for (int y = 0; y < image.height(); ++y)
            for (int x = 0; x < image.width(); ++x) {
                if (run == 254) {
                    put(256);
                    run = 0;
                }
                put(qGray(image.pixel(x, y)));
                ++run;
            }
        put(257);
        if (count > 0) codes.append(char(bits & 255));
        for (qsizetype i = 0; i < codes.size(); i += 255) {
            const QByteArray block = codes.mid(i, 255);
            g.append(char(block.size())).append(block);
        }
        g.append(char(0)).append(char(0x3B));
        return g;
    }

    // A file cut short (an interrupted copy or download) whose decoder fills in the missing part
    // instead of failing (JPEG's, BMP's, GIF's), or a PNG (whose decoder refuses, saying only that
    // it could not read it), is refused, naming the file and why; the whole files decode
    // (baseline and progressive JPEG, 8- and 24-bit BMP, GIF, PNG), and so do a JPEG and a GIF
    // with bytes after their end, and a GIF without its trailer. An empty file is said to be
    // empty.
    void cutShortFilesAreRefused()
    {
        QTemporaryDir dir;
        QImage noise(200, 150, QImage::Format_RGB888);
        quint32 seed = 7;
        for (int y = 0; y < noise.height(); ++y)
            for (int x = 0; x < noise.width(); ++x) {
                seed = seed * 1664525u + 1013904223u;
                noise.setPixel(x, y, qRgb(int(seed >> 24), int(seed >> 16) & 255, x & 255));
            }
        struct Case
        {
            const char* name;
            const char* format;
            QImage image;
            const char* says;
        };
        const Case cases[] = {
            {"a.jpg", "JPEG", noise, "no end-of-image marker"},
            {"a.bmp", "BMP", noise, "its header puts the end of its pixels at"},
            {"a8.bmp", "BMP", noise.convertToFormat(QImage::Format_Indexed8),
             "its header puts the end of its pixels at"},
            {"a.gif", "GIF", noise.convertToFormat(QImage::Format_Indexed8),
             "its image data ends early"},
            {"a.png", "PNG", noise, "a chunk ends early"},
        };
        for (const Case& c : cases) {
            const QString whole = dir.filePath(QLatin1String(c.name));
            if (QByteArray(c.format) == "GIF") {
                QFile gif(whole);
                QVERIFY(gif.open(QIODevice::WriteOnly) && gif.write(greyGif(c.image)) > 0);
            } else {
                QImageWriter writer(whole, c.format);
                QVERIFY2(writer.write(c.image), qPrintable(writer.errorString()));
            }
            QCOMPARE(readImageFile(whole).size(), QSize(200, 150));
            QFile f(whole);
            QVERIFY(f.open(QIODevice::ReadOnly));
            const QByteArray bytes = f.readAll();
            f.close();
            const QString cut = dir.filePath(QStringLiteral("cut-") + QLatin1String(c.name));
            QFile out(cut);
            QVERIFY(out.open(QIODevice::WriteOnly) && out.write(bytes.left(bytes.size() * 2 / 3)));
            out.close();
            const QString message = ioErrorOf([&] { readImageFile(cut); });
            QVERIFY2(message.startsWith(cut + QStringLiteral(": the file ends before its image "
                                                             "does (cut short")) &&
                         message.contains(QLatin1String(c.says)),
                     qPrintable(c.name + QStringLiteral(": ") + message));
        }
        // A progressive JPEG, and one with bytes after its end (as some cameras append).
        QImageWriter progressive(dir.filePath(QStringLiteral("p.jpg")), "JPEG");
        progressive.setProgressiveScanWrite(true);
        QVERIFY(progressive.write(noise));
        QCOMPARE(readImageFile(dir.filePath(QStringLiteral("p.jpg"))).size(), QSize(200, 150));
        QFile trailing(dir.filePath(QStringLiteral("a.jpg")));
        QVERIFY(trailing.open(QIODevice::Append) && trailing.write(QByteArray(5000, 'x')));
        trailing.close();
        QCOMPARE(readImageFile(dir.filePath(QStringLiteral("a.jpg"))).size(), QSize(200, 150));
        // A whole GIF with a newline after it, or without its trailer: its image is all there.
        const QByteArray gif = greyGif(noise);
        for (const auto& [name, bytes] :
             {std::pair{"nl.gif", gif + "\n"}, std::pair{"untrailed.gif", gif.chopped(1)}}) {
            QFile f(dir.filePath(QLatin1String(name)));
            QVERIFY(f.open(QIODevice::WriteOnly) && f.write(bytes) == bytes.size());
            f.close();
            QCOMPARE(readImageFile(f.fileName()).size(), QSize(200, 150));
        }
        // A PNG cut right after its last image chunk (IEND missing), and one whole but with a
        // byte of its compressed pixels changed (its checksum then fails): PNG's decoder refuses
        // both; the first is said to be cut short, the second keeps the decoder's word.
        QImageWriter png(dir.filePath(QStringLiteral("b.png")), "PNG");
        QVERIFY(png.write(noise));
        QFile pngFile(png.fileName());
        QVERIFY(pngFile.open(QIODevice::ReadOnly));
        const QByteArray pngBytes = pngFile.readAll();
        pngFile.close();
        QByteArray damaged = pngBytes;
        const qsizetype flipped = pngBytes.indexOf("IDAT") + 40;
        damaged[flipped] = char(damaged[flipped] ^ 0x55);
        for (const auto& [name, bytes, says] :
             {std::tuple{"noend.png", pngBytes.chopped(12), "no IEND chunk"},
              std::tuple{"damaged.png", damaged, "cannot read the image: "}}) {
            QFile f(dir.filePath(QLatin1String(name)));
            QVERIFY(f.open(QIODevice::WriteOnly) && f.write(bytes) == bytes.size());
            f.close();
            const QString message = ioErrorOf([&] { readImageFile(f.fileName()); });
            QVERIFY2(message.startsWith(f.fileName() + QStringLiteral(": ")) &&
                         message.contains(QLatin1String(says)),
                     qPrintable(message));
        }
        QFile empty(dir.filePath(QStringLiteral("empty.png")));
        QVERIFY(empty.open(QIODevice::WriteOnly));
        empty.close();
        QVERIFY2(ioErrorOf([&] {
                     readImageFile(dir.filePath(QStringLiteral("empty.png")));
                 }).contains(QStringLiteral("the file is empty (0 bytes)")),
                 "an empty file");
    }

    // The limits at their edges (app/inference/image_files.h).
    void sizeLimits()
    {
        QCOMPARE(kMaxImagePixels, std::int64_t(64'000'000));
        QCOMPARE(kMaxImageAspect, 100);
        checkImageSize(QStringLiteral("a.png"), 8000, 8000); // 64 megapixels: accepted
        checkImageSize(QStringLiteral("a.png"), 100, 1);     // 100:1, either way: accepted
        checkImageSize(QStringLiteral("a.png"), 1, 100);
        checkImageSize(QStringLiteral("a.png"), 1, 1);
        const QString big =
            ioErrorOf([] { checkImageSize(QStringLiteral("big.png"), 8000, 8001); });
        QVERIFY2(big.startsWith(QStringLiteral("big.png: ")) &&
                     big.contains(QStringLiteral("8000 x 8001 pixels")) &&
                     big.contains(QStringLiteral("(64,008,000 pixels)")) &&
                     big.contains(QStringLiteral("up to 64,000,000 pixels (64 megapixels)")),
                 qPrintable(big));
        const QString wide = ioErrorOf([] { checkImageSize(QStringLiteral("w.gif"), 101, 1); });
        QVERIFY2(wide.contains(QStringLiteral("101 x 1 pixels")) &&
                     wide.contains(QStringLiteral("100:1")),
                 qPrintable(wide));
        QVERIFY(!ioErrorOf([] { checkImageSize(QStringLiteral("t.gif"), 1, 101); }).isEmpty());
        QVERIFY(!ioErrorOf([] { checkImageSize(QStringLiteral("e.gif"), 0, 5); }).isEmpty());
        QCOMPARE(decodedShortSide({28, 28, 1}), 256);
        QCOMPARE(decodedShortSide({32, 32, 3}), 256);
        QCOMPARE(decodedShortSide({100, 80, 3}), 400);
    }

    // The reported files: refused by name and size (or kind), before decoding, at once, in bounded
    // memory, by both readers; the FIFO is never opened.
    void hostileFilesAreRefused()
    {
        QTemporaryDir dir;
        const auto at = [&](const char* name) { return dir.filePath(QLatin1String(name)); };
        test::writeBlackBmp(at("wide.bmp"), 3'300'000, 1);
        QVERIFY(QFileInfo(at("wide.bmp")).size() < 500'000);
        test::writeBlackBmp(at("wide2m.bmp"), 2'000'000, 1);
        test::writeBlackPng(at("wide.png"), 1'000'000, 1);
        QVERIFY(QFileInfo(at("wide.png")).size() < 5'000);
        test::writeBlackBmp(at("tall.bmp"), 1, 150);
        test::writeBlackPng(at("huge.png"), 16'000, 8'000); // 128 MP, 2:1, valid
        QVERIFY(test::makeFifo(at("x.png")));
        QVERIFY(QDir(dir.path()).mkdir(QStringLiteral("y.png")));
        struct Case
        {
            const char* name;
            QStringList says;
        };
        const Case cases[] = {
            {"wide.bmp", {"3300000 x 1 pixels", "100:1"}},
            {"wide2m.bmp", {"2000000 x 1 pixels", "100:1"}},
            {"wide.png", {"1000000 x 1 pixels", "100:1"}},
            {"tall.bmp", {"1 x 150 pixels", "100:1"}},
            {"huge.png", {"16000 x 8000 pixels", "128,000,000 pixels"}},
            {"x.png", {"FIFO"}},
            {"y.png", {"directory"}},
        };
        const double before = peakRssMb();
        for (const Case& c : cases) {
            const QString file = at(c.name);
            for (const bool forModel : {false, true}) {
                test::FifoWatch watch(at("x.png"));
                QElapsedTimer clock;
                clock.start();
                const QString message = ioErrorOf([&] {
                    if (forModel)
                        readImageFile(file, {28, 28, 1});
                    else
                        readImageFile(file);
                });
                const qint64 ms = clock.elapsed();
                QVERIFY2(!watch.readerSeen(), "the FIFO was opened for reading");
                QVERIFY2(message.startsWith(file + QStringLiteral(": ")),
                         qPrintable(c.name + QStringLiteral(": ") + message));
                for (const QString& s : c.says) QVERIFY2(message.contains(s), qPrintable(message));
                QVERIFY2(ms < 2000, qPrintable(QStringLiteral("%1: %2 ms").arg(c.name).arg(ms)));
            }
        }
        // Nothing was decoded: not even the 128 MP image's 128 MB of grey pixels.
        const double grown = peakRssMb() - before;
        QVERIFY2(grown < 64, qPrintable(QStringLiteral("peak memory grew by %1 MB").arg(grown)));

        // The generators make valid files: at the limit (100:1), and small, they decode.
        test::writeBlackBmp(at("edge.bmp"), 100, 1);
        QCOMPARE(readImageFile(at("edge.bmp")).size(), QSize(100, 1));
        test::writeBlackPng(at("edge.png"), 1, 100);
        QCOMPARE(readImageFile(at("edge.png")).size(), QSize(1, 100));
        test::writeBlackPng(at("small.png"), 3000, 2000);
        const QImage small = readImageFile(at("small.png"));
        QCOMPARE(small.size(), QSize(3000, 2000));
        QCOMPARE(small.pixel(1500, 1000), qRgb(0, 0, 0));
    }

    // An image in memory (the page's classifyImage takes any) as elongated as the limit allows, or
    // far more: the centre crop comes first, so nothing larger than the image is ever made (the
    // shorter side scaled to fit first would make 1,000,000 x 1 into 28,000,000 x 28, 2.3 GB).
    void elongatedImagesStayBounded()
    {
        const double before = peakRssMb();
        QImage wide(1'000'000, 1, QImage::Format_Grayscale8);
        wide.fill(0);
        wide.setPixel(499'999, 0, qRgb(255, 255, 255)); // the centre 1 x 1 square
        const auto fromWide = pixels(wide, {28, 28, 1});
        QImage tall(1, 1'000'000, QImage::Format_RGB32);
        tall.fill(Qt::black);
        tall.setPixel(0, 499'999, qRgb(255, 255, 255));
        const auto fromTall = pixels(tall, {32, 32, 3});
        // The whole of them, squashed or fitted inside (a line of 28 x 1 on black), as bounded.
        for (const auto fit : {eng::ImageFit::Squash, eng::ImageFit::Fill}) {
            QCOMPARE(pixels(wide, {28, 28, 1}, fit).size(), std::size_t(28 * 28));
            QCOMPARE(pixels(tall, {32, 32, 3}, fit).size(), std::size_t(32 * 32 * 3));
        }
        const double grown = peakRssMb() - before;
        QVERIFY2(grown < 64, qPrintable(QStringLiteral("peak memory grew by %1 MB").arg(grown)));
        QCOMPARE(fromWide.size(), std::size_t(28 * 28));
        for (auto v : fromWide) QCOMPARE(int(v), 255);
        QCOMPARE(fromTall.size(), std::size_t(32 * 32 * 3));
        for (auto v : fromTall) QCOMPARE(int(v), 255);
    }

    // Large images are decoded reduced to what the model needs (shorter side 256 for 28x28), aspect
    // kept; small ones untouched. The model sees nearly the same pixels either way.
    void decodesNoLargerThanNeeded()
    {
        QTemporaryDir dir;
        QImage big(2000, 1000, QImage::Format_RGB32);
        for (int y = 0; y < big.height(); ++y)
            for (int x = 0; x < big.width(); ++x)
                big.setPixel(x, y, qRgb((x / 10) % 256, (y / 7) % 256, (x + y) / 20 % 256));
        const QString png = dir.filePath(QStringLiteral("big.png"));
        QVERIFY(big.save(png));
        QCOMPARE(readImageFile(png).size(), QSize(2000, 1000));
        const QImage reduced = readImageFile(png, {28, 28, 1});
        QCOMPARE(reduced.size(), QSize(512, 256));
        QCOMPARE(readImageFile(png, {100, 80, 3}).size(), QSize(800, 400));
        const auto full = pixels(readImageFile(png), {28, 28, 3});
        const auto fromReduced = pixels(reduced, {28, 28, 3});
        QCOMPARE(full.size(), fromReduced.size());
        int worst = 0;
        for (std::size_t i = 0; i < full.size(); ++i)
            worst = std::max(worst, std::abs(int(full[i]) - int(fromReduced[i])));
        QVERIFY2(worst <= 24, qPrintable(QString::number(worst)));

        QImage small(40, 30, QImage::Format_RGB32);
        small.fill(qRgb(9, 8, 7));
        const QString smallPng = dir.filePath(QStringLiteral("small.png"));
        QVERIFY(small.save(smallPng));
        QCOMPARE(readImageFile(smallPng, {28, 28, 1}).size(), QSize(40, 30));
    }

    // Up to the budget, an image decodes: 40 megapixels, over Qt 6.4's own default limit (128 MB
    // at 4 bytes a pixel, 33.5 megapixels), which the budget raises. (After the tests that bound
    // this process's peak memory, as it raises it to some 200 MB.)
    void withinTheBudgetDecodes()
    {
        QTemporaryDir dir;
        const QString png = dir.filePath(QStringLiteral("forty.png"));
        test::writeBlackPng(png, 8000, 5000);
        QCOMPARE(readImageFile(png).size(), QSize(8000, 5000));
        QCOMPARE(readImageFile(png, {28, 28, 1}).size(), QSize(410, 256));
    }

    // An image whose pixels at its depth take more than Qt decodes (a 16-bit colour image takes 8
    // bytes a pixel) is refused naming its size, its depth and the limit, where Qt says only
    // "Unable to read image data". The limit lowered for the test: 1 MB, and the budget's raise
    // done first by reading another image.
    void tooManyBytesAtItsDepthSaysWhy()
    {
        QTemporaryDir dir;
        const QString small = dir.filePath(QStringLiteral("small.png"));
        test::writeBlackPng(small, 8, 8);
        readImageFile(small);
        const int limit = QImageReader::allocationLimit();
        QImageReader::setAllocationLimit(1);
        const QString deep = dir.filePath(QStringLiteral("deep.png"));
        QImage rgb64(400, 400, QImage::Format_RGBX64); // 1.22 MB decoded
        rgb64.fill(Qt::gray);
        QVERIFY(rgb64.save(deep));
        const QString error = ioErrorOf([&] { readImageFile(deep); });
        const QString error28 = ioErrorOf([&] { readImageFile(deep, {28, 28, 1}); });
        QImage rgb8(400, 400, QImage::Format_RGB32); // 0.61 MB: decodes
        rgb8.fill(Qt::gray);
        const QString shallow = dir.filePath(QStringLiteral("shallow.png"));
        QVERIFY(rgb8.save(shallow));
        const QSize shallowSize = readImageFile(shallow).size();
        QImageReader::setAllocationLimit(limit);
        QVERIFY2(error.startsWith(deep + QStringLiteral(": the image is 400 x 400 pixels at 64 "
                                                        "bits a pixel: 2 MB decoded, more than "
                                                        "the 1 MB")) &&
                     error.contains(QStringLiteral("8 bits a channel")),
                 qPrintable(error));
        QCOMPARE(error28, error);
        QCOMPARE(shallowSize, QSize(400, 400));
        QCOMPARE(readImageFile(deep).size(), QSize(400, 400)); // within the limit again
    }

    // EXIF orientation 6 (stored left half red, displayed rotated 90 degrees clockwise: red on
    // top), at full size and decoded reduced.
    void exifOrientationSurvivesReduction()
    {
        QTemporaryDir dir;
        const QString small = dir.filePath(QStringLiteral("small.jpg"));
        test::writeOrientedJpeg(small, 40, 20, 6);
        const QImage s = readImageFile(small);
        QCOMPARE(s.size(), QSize(20, 40));
        QVERIFY(isRed(s.pixel(10, 5)) && isBlue(s.pixel(10, 34)));

        const QString big = dir.filePath(QStringLiteral("big.jpg"));
        test::writeOrientedJpeg(big, 1600, 800, 6);
        const QImage full = readImageFile(big);
        QCOMPARE(full.size(), QSize(800, 1600));
        QVERIFY(isRed(full.pixel(400, 100)) && isBlue(full.pixel(400, 1500)));
        const QImage reduced = readImageFile(big, {28, 28, 3});
        QCOMPARE(reduced.size(), QSize(256, 512));
        QVERIFY(isRed(reduced.pixel(128, 30)) && isBlue(reduced.pixel(128, 480)));
        // A portrait 28 x 28 crop of its centre: red above, blue below.
        const auto px = pixels(reduced, {28, 28, 3});
        QVERIFY(px[std::size_t((2 * 28 + 14) * 3)] > 200);
        QVERIFY(px[std::size_t((25 * 28 + 14) * 3 + 2)] > 200);
    }

    // An SVG drawing with text decodes in a GUI application (the Classify page's), where Qt has
    // its fonts; towers-cli refuses one by name instead (tst_classify_command).
    void svgWithTextDecodesInTheDesktopApplication()
    {
        if (!QImageReader::supportedImageFormats().contains("svg"))
            QSKIP("Qt has no SVG image plugin here (libqt6svg6)");
        QVERIFY(qobject_cast<QGuiApplication*>(QCoreApplication::instance()));
        QTemporaryDir dir;
        const QString file = dir.filePath(QStringLiteral("label.svg"));
        QFile f(file);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(test::kSvgWithText);
        f.close();
        const QImage image = readImageFile(file, {32, 32, 3});
        QCOMPARE(image.size(), QSize(64, 64));
        QVERIFY(isRed(image.pixel(60, 60)));
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
