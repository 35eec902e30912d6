#include "app/image/image_convert.h"

#include <QImageReader>

#include <algorithm>
#include <cmath>

#include "engine/errors.h"

namespace towers::app {

namespace {

void requireShape(int height, int width, int channels)
{
    if (height <= 0 || width <= 0)
        throw engine::InvalidArgument("image size " + std::to_string(height) + "x" +
                                      std::to_string(width) + " is empty");
    if (channels != 1 && channels != 3)
        throw engine::InvalidArgument("images of " + std::to_string(channels) +
                                      " channels cannot be shown; expected 1 (grey) or 3 (RGB)");
}

} // namespace

QImage imageFromHwc(const std::uint8_t* pixels, int height, int width, int channels)
{
    requireShape(height, width, channels);
    QImage image(width, height, channels == 1 ? QImage::Format_Grayscale8 : QImage::Format_RGB888);
    const int rowBytes = width * channels;
    for (int y = 0; y < height; ++y)
        std::copy_n(pixels + std::size_t(y) * std::size_t(rowBytes), rowBytes, image.scanLine(y));
    return image;
}

QImage imageFromFloats(const float* values, int height, int width, int channels)
{
    requireShape(height, width, channels);
    const std::size_t n = std::size_t(height) * std::size_t(width) * std::size_t(channels);
    float lo = values[0], hi = values[0];
    for (std::size_t i = 1; i < n; ++i) {
        lo = std::min(lo, values[i]);
        hi = std::max(hi, values[i]);
    }
    std::vector<std::uint8_t> bytes(n, 128);
    if (hi > lo) {
        const double scale = 255.0 / (double(hi) - double(lo));
        for (std::size_t i = 0; i < n; ++i)
            bytes[i] = std::uint8_t(std::lround((double(values[i]) - lo) * scale));
    }
    return imageFromHwc(bytes.data(), height, width, channels);
}

std::vector<std::uint8_t> hwcFromImage(const QImage& image, int height, int width, int channels,
                                       bool invert)
{
    requireShape(height, width, channels);
    if (image.isNull()) throw engine::InvalidArgument("the image is empty");
    // Alpha over black, then the target format.
    QImage opaque = image;
    if (opaque.hasAlphaChannel()) {
        QImage black(opaque.size(), QImage::Format_RGB32);
        black.fill(Qt::black);
        opaque = opaque.convertToFormat(QImage::Format_ARGB32_Premultiplied);
        for (int y = 0; y < opaque.height(); ++y) {
            const auto* src = reinterpret_cast<const QRgb*>(opaque.constScanLine(y));
            auto* dst = reinterpret_cast<QRgb*>(black.scanLine(y));
            for (int x = 0; x < opaque.width(); ++x)
                dst[x] = qRgb(qRed(src[x]), qGreen(src[x]), qBlue(src[x])); // premultiplied = over black
        }
        opaque = black;
    }
    const QImage scaled = opaque.scaled(width, height, Qt::KeepAspectRatioByExpanding,
                                        Qt::SmoothTransformation);
    const QImage cropped = scaled.copy((scaled.width() - width) / 2,
                                       (scaled.height() - height) / 2, width, height);
    const QImage converted = cropped.convertToFormat(channels == 1 ? QImage::Format_Grayscale8
                                                                   : QImage::Format_RGB888);
    std::vector<std::uint8_t> out(std::size_t(height) * std::size_t(width) * std::size_t(channels));
    const int rowBytes = width * channels;
    for (int y = 0; y < height; ++y)
        std::copy_n(converted.constScanLine(y), rowBytes, out.data() + std::size_t(y) * std::size_t(rowBytes));
    if (invert)
        for (auto& v : out) v = std::uint8_t(255 - v);
    return out;
}

QImage readImageFile(const QString& path)
{
    QImageReader reader(path);
    reader.setAutoTransform(true); // honour EXIF orientation of photos
    QImage image = reader.read();
    if (image.isNull())
        throw engine::IoError(path.toStdString() + ": cannot read the image: " +
                              reader.errorString().toStdString());
    return image;
}

} // namespace towers::app
