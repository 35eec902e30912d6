// Preprocessing: the fast distortion path against a slow step-by-step reference written from
// TensorFlow's definitions (random_crop, random_flip_left_right, adjust_brightness,
// adjust_contrast, per_image_standardization, resize_image_with_crop_or_pad), the properties
// those definitions imply, the distribution of the random draws, and the JSON form.
#include <QtTest>

#include <cmath>
#include <cstring>

#include "engine/data/distortion_math.h"
#include "engine/data/preprocessing.h"

using namespace towers::engine;

namespace {

// ---- the reference: one plain step per TensorFlow op, in double precision ----
struct Img
{
    int h = 0, w = 0, c = 0;
    std::vector<double> v;
    double& at(int y, int x, int k) { return v[static_cast<std::size_t>((y * w + x) * c + k)]; }
    double at(int y, int x, int k) const
    {
        return v[static_cast<std::size_t>((y * w + x) * c + k)];
    }
};

Img blank(int h, int w, int c)
{
    return {h, w, c, std::vector<double>(static_cast<std::size_t>(h * w * c), 0.0)};
}

Img fromSet(const ImageSet& set, std::int64_t i)
{
    Img img = blank(int(set.height), int(set.width), int(set.channels));
    for (std::size_t j = 0; j < img.v.size(); ++j) img.v[j] = set.image(i)[j];
    return img;
}

Img crop(const Img& in, int y0, int x0, int h, int w)
{
    Img out = blank(h, w, in.c);
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
            for (int k = 0; k < in.c; ++k) out.at(y, x, k) = in.at(y0 + y, x0 + x, k);
    return out;
}

// Pad with zeros by t on every side, then crop back h x w at offset (t - sy, t - sx).
Img padAndCrop(const Img& in, int t, int sy, int sx)
{
    Img padded = blank(in.h + 2 * t, in.w + 2 * t, in.c);
    for (int y = 0; y < in.h; ++y)
        for (int x = 0; x < in.w; ++x)
            for (int k = 0; k < in.c; ++k) padded.at(y + t, x + t, k) = in.at(y, x, k);
    return crop(padded, t - sy, t - sx, in.h, in.w);
}

Img flipLeftRight(const Img& in)
{
    Img out = blank(in.h, in.w, in.c);
    for (int y = 0; y < in.h; ++y)
        for (int x = 0; x < in.w; ++x)
            for (int k = 0; k < in.c; ++k) out.at(y, x, k) = in.at(y, in.w - 1 - x, k);
    return out;
}

Img adjustBrightness(Img img, double delta)
{
    for (double& x : img.v) x += delta;
    return img;
}

// tf.image.adjust_contrast: per channel, (x - mean) * factor + mean, mean over height and width.
Img adjustContrast(Img img, double factor)
{
    for (int k = 0; k < img.c; ++k) {
        double mean = 0;
        for (int y = 0; y < img.h; ++y)
            for (int x = 0; x < img.w; ++x) mean += img.at(y, x, k);
        mean /= img.h * img.w;
        for (int y = 0; y < img.h; ++y)
            for (int x = 0; x < img.w; ++x)
                img.at(y, x, k) = (img.at(y, x, k) - mean) * factor + mean;
    }
    return img;
}

// tf.image.per_image_standardization: (x - mean) / max(stddev, 1 / sqrt(numel)), over all values.
Img perImageStandardization(Img img)
{
    const double n = static_cast<double>(img.v.size());
    double mean = 0;
    for (double x : img.v) mean += x;
    mean /= n;
    double var = 0;
    for (double x : img.v) var += (x - mean) * (x - mean);
    const double adjusted = std::max(std::sqrt(var / n), 1.0 / std::sqrt(n));
    for (double& x : img.v) x = (x - mean) / adjusted;
    return img;
}

Img reference(const Preprocessing& p, const ImageSet& set, std::int64_t i, const Distortion& d)
{
    Img img = crop(fromSet(set, i), d.cropY, d.cropX, p.height, p.width);
    if (d.shiftY || d.shiftX)
        img = padAndCrop(img, std::max(std::abs(d.shiftY), std::abs(d.shiftX)), d.shiftY, d.shiftX);
    if (d.flip) img = flipLeftRight(img);
    img = adjustBrightness(img, d.brightness);
    if (d.contrast != 1) img = adjustContrast(img, d.contrast);
    switch (p.normalization) {
    case Preprocessing::Normalization::PerImage:
        return perImageStandardization(img);
    case Preprocessing::Normalization::MeanStd:
        for (int y = 0; y < img.h; ++y)
            for (int x = 0; x < img.w; ++x)
                for (int k = 0; k < img.c; ++k)
                    img.at(y, x, k) =
                        (img.at(y, x, k) / 255.0 - p.mean[static_cast<std::size_t>(k)]) /
                        p.stddev[static_cast<std::size_t>(k)];
        return img;
    case Preprocessing::Normalization::Scale:
        for (double& x : img.v) x /= 255.0;
        return img;
    }
    return img;
}

ImageSet randomSet(std::int64_t count, int h, int w, int c, std::uint64_t seed)
{
    ImageSet set;
    set.count = count;
    set.height = h;
    set.width = w;
    set.channels = c;
    Rng rng(seed);
    set.pixels.resize(static_cast<std::size_t>(count * h * w * c));
    for (auto& p : set.pixels) p = static_cast<std::uint8_t>(rng.below(256));
    set.labels.assign(static_cast<std::size_t>(count), 0);
    return set;
}

std::vector<float> run(const Preprocessing& p, const ImageSet& set, std::int64_t i,
                       const Distortion& d)
{
    std::vector<float> out(static_cast<std::size_t>(p.height * p.width * p.channels), -999.f);
    applyPreprocessing(p, set.image(i), set.imageShape(), d, out.data());
    return out;
}

// The same image as a GPU kernel would make it from distortion_math.h: the channel sums over the
// output pixels that show source bytes, the coefficients, then every element on its own.
std::vector<float> perElement(const Preprocessing& p, const ImageSet& set, std::int64_t i,
                              const Distortion& d)
{
    namespace pp = preprocess;
    const pp::ImageDraw draw{d.cropY, d.cropX,      d.shiftY,  d.shiftX,
                             d.flip,  d.brightness, d.contrast};
    const pp::OutputWindow w = pp::outputWindow(p.height, p.width, d.shiftY, d.shiftX);
    const auto norm = static_cast<pp::Normalization>(p.normalization);
    const int c = p.channels;
    const std::uint8_t* image = set.image(i);
    double sum[pp::kMaxChannels] = {}, sq[pp::kMaxChannels] = {};
    for (int y = 0; y < p.height; ++y)
        for (int x = 0; x < p.width; ++x) {
            const std::int64_t src = pp::sourcePixel(y, x, p.width, w, draw, set.width);
            for (int k = 0; k < c && src >= 0; ++k) {
                const double v = image[src * c + k];
                sum[k] += v;
                sq[k] += v * v;
            }
        }
    const bool sums = pp::needsSums(norm, draw);
    float a[pp::kMaxChannels], b[pp::kMaxChannels];
    pp::affineCoefficients(norm, c, p.height, p.width, draw, sums ? sum : nullptr,
                           sums ? sq : nullptr, p.mean.data(), p.stddev.data(), a, b);
    std::vector<float> out(static_cast<std::size_t>(p.height * p.width * c));
    for (std::size_t e = 0; e < out.size(); ++e) {
        const int k = int(e % std::size_t(c)), px = int(e / std::size_t(c));
        const std::int64_t src =
            pp::sourcePixel(px / p.width, px % p.width, p.width, w, draw, set.width);
        out[e] = pp::affineValue(a[k], b[k], src < 0 ? 0 : image[src * c + k]);
    }
    return out;
}

double maxDiff(const std::vector<float>& got, const Img& want)
{
    double m = 0;
    for (std::size_t j = 0; j < got.size(); ++j)
        m = std::max(m, std::abs(double(got[j]) - want.v[j]));
    return m;
}

Preprocessing everything(int h, int w, int c, Preprocessing::Normalization n)
{
    Preprocessing p;
    p.height = h;
    p.width = w;
    p.channels = c;
    p.translate = 3;
    p.flip = true;
    p.brightnessDelta = 30;
    p.contrastLower = 0.5;
    p.contrastUpper = 1.5;
    p.normalization = n;
    for (int k = 0; k < c; ++k) {
        p.mean.push_back(0.3 + 0.05 * k);
        p.stddev.push_back(0.2 + 0.03 * k);
    }
    return p;
}

double mean(const std::vector<float>& v)
{
    double s = 0;
    for (float x : v) s += x;
    return s / static_cast<double>(v.size());
}

} // namespace

// The recipes of matchesReference's rows.
static void recipeCase(int recipe, ImageSet& set, Preprocessing& p)
{
    switch (recipe) {
    case 0:
        set = randomSet(16, 32, 32, 3, 1);
        p = cifarDistortions(24);
        break;
    case 1:
        set = randomSet(16, 32, 32, 3, 2);
        p = cifarDistortions(32);
        break;
    case 2:
        set = randomSet(16, 32, 32, 3, 3);
        p = cifarPadCrop(set, 4);
        break;
    case 3:
        set = randomSet(16, 28, 28, 1, 4);
        p = translateAndNormalize(set, 3);
        break;
    case 4:
        set = randomSet(16, 20, 17, 2, 5);
        p = everything(15, 13, 2, Preprocessing::Normalization::Scale);
        break;
    case 5:
        set = randomSet(16, 12, 11, 5, 6);
        p = everything(9, 11, 5, Preprocessing::Normalization::PerImage);
        break;
    default:
        set = randomSet(16, 28, 28, 1, 7);
        p = everything(26, 27, 1, Preprocessing::Normalization::MeanStd);
        break;
    }
}

class TestPreprocessing : public QObject
{
    Q_OBJECT

private slots:
    void matchesReference_data()
    {
        QTest::addColumn<int>("recipe");
        QTest::newRow("cifarDistortions(24)") << 0;
        QTest::newRow("cifarDistortions(32)") << 1;
        QTest::newRow("cifarPadCrop(4)") << 2;
        QTest::newRow("translateAndNormalize(3), 28x28") << 3;
        QTest::newRow("all distortions, 2 channels, scale, 20x17 to 15x13") << 4;
        QTest::newRow("all distortions, 5 channels, per-image") << 5;
        QTest::newRow("all distortions, 1 channel, mean_std") << 6;
    }
    void matchesReference()
    {
        QFETCH(int, recipe);
        ImageSet set;
        Preprocessing p;
        recipeCase(recipe, set, p);
        p.validateFor(set.imageShape());
        Rng rng(99);
        double worst = 0;
        for (int n = 0; n < 300; ++n) {
            const std::int64_t i = n % set.count;
            const Distortion d = n == 0 ? centralDistortion(p, set.imageShape())
                                        : drawDistortion(p, set.imageShape(), rng);
            worst = std::max(worst, maxDiff(run(p, set, i, d), reference(p, set, i, d)));
        }
        QVERIFY2(worst < 2e-5, qPrintable(QString("max |fast - reference| = %1").arg(worst)));
    }

    // distortion_math.h run element by element, as a GPU kernel would, is the pipeline bit for
    // bit.
    void perElementArithmeticIsThePipeline_data() { matchesReference_data(); }
    void perElementArithmeticIsThePipeline()
    {
        QFETCH(int, recipe);
        ImageSet set;
        Preprocessing p;
        recipeCase(recipe, set, p);
        Rng rng(7);
        for (int n = 0; n < 200; ++n) {
            const std::int64_t i = n % set.count;
            const Distortion d = n == 0 ? centralDistortion(p, set.imageShape())
                                        : drawDistortion(p, set.imageShape(), rng);
            const std::vector<float> fast = run(p, set, i, d), each = perElement(p, set, i, d);
            for (std::size_t e = 0; e < fast.size(); ++e)
                if (std::memcmp(&fast[e], &each[e], sizeof(float)) != 0)
                    QFAIL(qPrintable(QStringLiteral("draw %1, element %2: %3 by the pipeline, %4 "
                                                    "element by element")
                                         .arg(n)
                                         .arg(e)
                                         .arg(double(fast[e]), 0, 'g', 9)
                                         .arg(double(each[e]), 0, 'g', 9)));
        }
    }

    // Translations at and beyond the edge (a fully padded image) stay in bounds and match.
    void extremeShifts()
    {
        const ImageSet set = randomSet(2, 10, 9, 3, 11);
        Preprocessing p = everything(8, 7, 3, Preprocessing::Normalization::PerImage);
        for (int sy : {-8, -7, -3, 0, 3, 7, 8})
            for (int sx : {-7, -6, -1, 0, 2, 6, 7})
                for (bool flip : {false, true}) {
                    Distortion d;
                    d.cropY = 1;
                    d.cropX = 2;
                    d.shiftY = sy;
                    d.shiftX = sx;
                    d.flip = flip;
                    d.brightness = 5;
                    d.contrast = 1.3;
                    const std::vector<float> got = run(p, set, 1, d);
                    QVERIFY(maxDiff(got, reference(p, set, 1, d)) < 2e-5);
                }
        Distortion outside;
        outside.cropY = 3; // 10 - 8 + 1: past the last valid offset
        std::vector<float> out(8 * 7 * 3);
        QVERIFY_THROWS_EXCEPTION(
            InvalidArgument,
            applyPreprocessing(p, set.image(0), set.imageShape(), outside, out.data()));
        QVERIFY_THROWS_EXCEPTION(
            InvalidArgument,
            applyPreprocessing(p, set.image(0), Shape({10, 9, 1}), Distortion{}, out.data()));
    }

    void flipIsAMirror()
    {
        const ImageSet set = randomSet(4, 32, 32, 3, 21);
        const Preprocessing p = cifarDistortions(24);
        Rng rng(5);
        for (int n = 0; n < 20; ++n) {
            Distortion d = drawDistortion(p, set.imageShape(), rng);
            d.flip = false;
            const std::vector<float> plain = run(p, set, n % 4, d);
            d.flip = true;
            const std::vector<float> flipped = run(p, set, n % 4, d);
            for (int y = 0; y < 24; ++y)
                for (int x = 0; x < 24; ++x)
                    for (int k = 0; k < 3; ++k)
                        QCOMPARE(flipped[static_cast<std::size_t>((y * 24 + x) * 3 + k)],
                                 plain[static_cast<std::size_t>((y * 24 + 23 - x) * 3 + k)]);
        }
    }

    void brightnessShiftsTheMean()
    {
        const ImageSet set = randomSet(1, 32, 32, 3, 31);
        Preprocessing p = cifarDistortions(24);
        p.normalization = Preprocessing::Normalization::Scale;
        Distortion d = centralDistortion(p, set.imageShape());
        const double before = mean(run(p, set, 0, d));
        d.brightness = 40;
        QVERIFY(std::abs(mean(run(p, set, 0, d)) - before - 40.0 / 255) < 1e-6);
        d.brightness = -63;
        QVERIFY(std::abs(mean(run(p, set, 0, d)) - before + 63.0 / 255) < 1e-6);
        // Contrast keeps each channel's mean.
        d.brightness = 0;
        d.contrast = 1.7;
        QVERIFY(std::abs(mean(run(p, set, 0, d)) - before) < 1e-6);
        // Per-image standardisation removes any brightness change (TensorFlow issue 1458).
        p.normalization = Preprocessing::Normalization::PerImage;
        const std::vector<float> a = run(p, set, 0, d);
        d.brightness = 50;
        const std::vector<float> b = run(p, set, 0, d);
        for (std::size_t j = 0; j < a.size(); ++j) QVERIFY(std::abs(a[j] - b[j]) < 1e-5);
    }

    void perImageStandardization()
    {
        const ImageSet set = randomSet(8, 32, 32, 3, 41);
        const Preprocessing p = cifarDistortions(24);
        Rng rng(1);
        for (int i = 0; i < 8; ++i) {
            const std::vector<float> out = run(p, set, i, drawDistortion(p, set.imageShape(), rng));
            double m = 0, sq = 0;
            for (float x : out) m += x;
            m /= static_cast<double>(out.size());
            for (float x : out) sq += (x - m) * (x - m);
            QVERIFY(std::abs(m) < 1e-5);
            QVERIFY(std::abs(std::sqrt(sq / static_cast<double>(out.size())) - 1) < 1e-4);
        }
        // A constant image: stddev is 0, floored at 1/sqrt(numel); the output is all zeros.
        ImageSet flat = randomSet(1, 32, 32, 3, 1);
        std::fill(flat.pixels.begin(), flat.pixels.end(), std::uint8_t(77));
        for (float x : run(p, flat, 0, centralDistortion(p, flat.imageShape()))) QCOMPARE(x, 0.0f);
    }

    void centralCropIsTheCentre_data()
    {
        QTest::addColumn<int>("source");
        QTest::addColumn<int>("size");
        QTest::addColumn<int>("offset");
        QTest::newRow("32 to 24") << 32 << 24 << 4;
        QTest::newRow("28 to 25 (odd margin, rounded down)") << 28 << 25 << 1;
        QTest::newRow("no crop") << 32 << 32 << 0;
    }
    void centralCropIsTheCentre()
    {
        QFETCH(int, source);
        QFETCH(int, size);
        QFETCH(int, offset);
        const ImageSet set = randomSet(1, source, source, 3, 51);
        Preprocessing p = cifarDistortions(std::min(size, 32));
        p.normalization = Preprocessing::Normalization::Scale;
        std::vector<float> out(static_cast<std::size_t>(size * size * 3));
        Rng rng(7);
        const Rng before = rng;
        preprocessImage(p, set, 0, false, rng, out.data());
        QCOMPARE(Rng(rng).next(), Rng(before).next()); // evaluation draws nothing
        for (int y = 0; y < size; ++y)
            for (int x = 0; x < size; ++x)
                for (int k = 0; k < 3; ++k)
                    QCOMPARE(
                        out[static_cast<std::size_t>((y * size + x) * 3 + k)],
                        float(set.image(0)[((y + offset) * source + x + offset) * 3 + k] / 255.0));
    }

    void drawsCoverTheirRanges()
    {
        const Preprocessing p = cifarDistortions(24);
        const Shape source{32, 32, 3};
        Rng rng(123);
        std::vector<int> cropY(9), cropX(9);
        int flips = 0;
        double bMin = 1e9, bMax = -1e9, bSum = 0, cMin = 1e9, cMax = -1e9;
        const int n = 4000;
        for (int i = 0; i < n; ++i) {
            const Distortion d = drawDistortion(p, source, rng);
            QVERIFY(d.cropY >= 0 && d.cropY <= 8 && d.cropX >= 0 && d.cropX <= 8);
            ++cropY[static_cast<std::size_t>(d.cropY)];
            ++cropX[static_cast<std::size_t>(d.cropX)];
            flips += d.flip;
            QCOMPARE(d.shiftY, 0);
            bMin = std::min(bMin, d.brightness);
            bMax = std::max(bMax, d.brightness);
            bSum += d.brightness;
            cMin = std::min(cMin, d.contrast);
            cMax = std::max(cMax, d.contrast);
        }
        for (int v = 0; v < 9; ++v) { // uniform: about 444 each
            QVERIFY(cropY[static_cast<std::size_t>(v)] > 330 &&
                    cropY[static_cast<std::size_t>(v)] < 560);
            QVERIFY(cropX[static_cast<std::size_t>(v)] > 330 &&
                    cropX[static_cast<std::size_t>(v)] < 560);
        }
        QVERIFY(std::abs(flips - n / 2) < 200);
        QVERIFY(bMin >= -63 && bMax < 63 && bMin < -60 && bMax > 60);
        QVERIFY(std::abs(bSum / n) < 3);
        QVERIFY(cMin >= 0.2 && cMax < 1.8 && cMin < 0.25 && cMax > 1.75);

        // Translation draws cover -t..t; the same seed gives the same draws.
        ImageSet gray = randomSet(2, 28, 28, 1, 3);
        const Preprocessing t = translateAndNormalize(gray, 2);
        std::vector<int> shifts(5);
        Rng a(9), b(9);
        for (int i = 0; i < 500; ++i) {
            const Distortion d = drawDistortion(t, gray.imageShape(), a);
            const Distortion e = drawDistortion(t, gray.imageShape(), b);
            QCOMPARE(d.shiftX, e.shiftX);
            QCOMPARE(d.shiftY, e.shiftY);
            QVERIFY(d.shiftY >= -2 && d.shiftY <= 2 && !d.flip && d.brightness == 0 &&
                    d.contrast == 1);
            ++shifts[static_cast<std::size_t>(d.shiftX + 2)];
        }
        for (int s : shifts) QVERIFY(s > 60);
    }

    void recipes()
    {
        const Preprocessing c = cifarDistortions(24);
        QCOMPARE(c.height, 24);
        QVERIFY(c.flip && c.brightnessDelta == 63 && c.contrastLower == 0.2 &&
                c.contrastUpper == 1.8);
        QVERIFY(c.normalization == Preprocessing::Normalization::PerImage && c.augments());
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, cifarDistortions(33));

        // Statistics against a direct computation.
        const ImageSet set = randomSet(50, 32, 32, 3, 61);
        const Preprocessing pc = cifarPadCrop(set, 4);
        QVERIFY(pc.flip && pc.translate == 4 && pc.height == 32 && pc.brightnessDelta == 0);
        for (int k = 0; k < 3; ++k) {
            double s = 0, sq = 0;
            for (std::size_t j = static_cast<std::size_t>(k); j < set.pixels.size(); j += 3) {
                s += set.pixels[j] / 255.0;
                sq += (set.pixels[j] / 255.0) * (set.pixels[j] / 255.0);
            }
            const double n = static_cast<double>(set.pixels.size() / 3), m = s / n;
            QVERIFY(std::abs(pc.mean[static_cast<std::size_t>(k)] - m) < 1e-12);
            QVERIFY(std::abs(pc.stddev[static_cast<std::size_t>(k)] - std::sqrt(sq / n - m * m)) <
                    1e-9);
        }
        const Preprocessing eval = translateAndNormalize(set, 0);
        QVERIFY(!eval.augments());
    }

    void jsonRoundTrip()
    {
        const ImageSet set = randomSet(10, 28, 28, 1, 71);
        for (const Preprocessing& p :
             {cifarDistortions(24), cifarPadCrop(randomSet(10, 32, 32, 3, 1), 4),
              translateAndNormalize(set, 2),
              everything(5, 6, 2, Preprocessing::Normalization::Scale)}) {
            const std::string json = p.toJson();
            const Preprocessing q = Preprocessing::fromJson(json);
            QCOMPARE(q.toJson(), json);
            QCOMPARE(q.height, p.height);
            QCOMPARE(q.width, p.width);
            QCOMPARE(q.channels, p.channels);
            QCOMPARE(q.translate, p.translate);
            QCOMPARE(q.flip, p.flip);
            QCOMPARE(q.brightnessDelta, p.brightnessDelta);
            QCOMPARE(q.contrastLower, p.contrastLower);
            QCOMPARE(q.contrastUpper, p.contrastUpper);
            QVERIFY(q.normalization == p.normalization);
            QCOMPARE(q.mean, p.mean); // exact: doubles are written to round-trip
            QCOMPARE(q.stddev, p.stddev);
        }
        QVERIFY(QString::fromStdString(cifarDistortions(24).toJson())
                    .contains("\"normalization\":\"per_image\""));
    }

    void jsonErrors_data()
    {
        QTest::addColumn<QString>("json");
        QTest::addColumn<QString>("expected");
        const QString base = R"("height":24,"width":24,"channels":3,"normalization":"per_image")";
        QTest::newRow("not json") << "{\"height\":"
                                  << "not valid JSON";
        QTest::newRow("not an object") << "[1,2]"
                                       << "expected a JSON object, got a array";
        QTest::newRow("missing height") << R"({"width":24,"channels":3,"normalization":"scale"})"
                                        << "field \"height\" is missing";
        QTest::newRow("missing normalization") << R"({"height":24,"width":24,"channels":3})"
                                               << "field \"normalization\" is missing";
        QTest::newRow("height is text")
            << R"({"height":"24","width":24,"channels":3,"normalization":"scale"})"
            << "field \"height\" must be an integer, got a string";
        QTest::newRow("height fractional")
            << R"({"height":2.5,"width":24,"channels":3,"normalization":"scale"})"
            << "field \"height\" must be an integer, got a number";
        QTest::newRow("width zero")
            << R"({"height":24,"width":0,"channels":3,"normalization":"scale"})"
            << "field \"width\" is 0, expected 1..4096";
        QTest::newRow("translate negative") << "{" + base + R"(,"translate":-1})"
                                            << "field \"translate\" is -1, expected 0..23";
        QTest::newRow("brightness too large") << "{" + base + R"(,"brightness_delta":300})"
                                              << "field \"brightness_delta\" is 300";
        QTest::newRow("contrast upside down")
            << "{" + base + R"(,"contrast_lower":1.5,"contrast_upper":0.5})"
            << "field \"contrast_upper\" is 0.5";
        QTest::newRow("flip as text") << "{" + base + R"(,"flip":"yes"})"
                                      << "field \"flip\" must be true or false";
        QTest::newRow("unknown normalization")
            << R"({"height":24,"width":24,"channels":3,"normalization":"zca"})"
            << "field \"normalization\" is \"zca\", expected per_image, mean_std or scale";
        QTest::newRow("mean of wrong length")
            << R"({"height":2,"width":2,"channels":3,"normalization":"mean_std","mean":[0.5],"std":[1,1,1]})"
            << "field \"mean\" has 1 values, expected one per channel (3)";
        QTest::newRow("std zero")
            << R"({"height":2,"width":2,"channels":1,"normalization":"mean_std","mean":[0.5],"std":[0]})"
            << "field \"std\" value 0 is 0, expected a positive number";
        QTest::newRow("std not numbers")
            << R"({"height":2,"width":2,"channels":1,"normalization":"mean_std","mean":[0.5],"std":["x"]})"
            << "field \"std\" element 0 must be a number";
        QTest::newRow("unknown field (typo)")
            << "{" + base + R"(,"brightnes_delta":63})"
            << "field \"brightnes_delta\" is not a preprocessing field";
    }
    void jsonErrors()
    {
        QFETCH(QString, json);
        QFETCH(QString, expected);
        try {
            Preprocessing::fromJson(json.toStdString());
            QFAIL("no exception");
        } catch (const InvalidArgument& e) {
            QVERIFY2(QString(e.what()).contains(expected), e.what());
        }
    }

    void validateFor()
    {
        const Preprocessing p = cifarDistortions(24);
        p.validateFor({32, 32, 3});
        p.validateFor({24, 24, 3});
        try {
            p.validateFor({28, 28, 1});
            QFAIL("no exception");
        } catch (const InvalidArgument& e) {
            QVERIFY2(QString(e.what()).contains("3-channel images but the images have 1 channels"),
                     e.what());
        }
        try {
            p.validateFor({20, 32, 3});
            QFAIL("no exception");
        } catch (const InvalidArgument& e) {
            QVERIFY2(QString(e.what()).contains("24x24 output does not fit in 20x32"), e.what());
        }
        ImageSet set = randomSet(1, 32, 32, 3, 1);
        std::vector<float> out(24 * 24 * 3);
        Rng rng(1);
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 preprocessImage(p, set, 1, true, rng, out.data()));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, preprocessImage(p, randomSet(1, 28, 28, 1, 1), 0,
                                                                  true, rng, out.data()));
    }
};

QTEST_APPLESS_MAIN(TestPreprocessing)
#include "tst_preprocessing.moc"
