#include "app/inference/image_files.h"

#include <QImageReader>
#include <QPainter>

#include <cstring>

#include "engine/errors.h"

namespace towers::app {

QImage readImageFile(const QString& file)
{
    QImageReader reader(file);
    reader.setAutoTransform(true);
    QImage image = reader.read();
    if (image.isNull())
        throw engine::IoError(file.toStdString() + ": cannot read the image: " + reader.errorString().toStdString());
    return image;
}

void appendImage(const QImage& image, const engine::Shape& shape, engine::ImageSet& set)
{
    const int h = static_cast<int>(shape[0]), w = static_cast<int>(shape[1]), c = static_cast<int>(shape[2]);
    if (c != 1 && c != 3) throw engine::InvalidArgument("images must have 1 or 3 channels, not " + std::to_string(c));
    if (image.isNull() || image.width() < 1 || image.height() < 1) throw engine::InvalidArgument("the image is empty");
    if (set.count == 0) {
        set.height = h;
        set.width = w;
        set.channels = c;
    } else if (set.height != h || set.width != w || set.channels != c) {
        throw engine::ShapeError("appendImage: the set holds " + set.imageShape().str() + " images, not " + shape.str());
    }
    // Flatten transparency onto black first (the 28x28 datasets are light objects on black).
    QImage opaque(image.size(), QImage::Format_RGB888);
    opaque.fill(Qt::black);
    {
        QPainter painter(&opaque);
        painter.drawImage(0, 0, image);
    }
    const QImage scaled = opaque.scaled(w, h, Qt::KeepAspectRatioByExpanding, Qt::SmoothTransformation);
    const QImage cropped = scaled.copy((scaled.width() - w) / 2, (scaled.height() - h) / 2, w, h)
                               .convertToFormat(c == 1 ? QImage::Format_Grayscale8 : QImage::Format_RGB888);
    const std::size_t row = static_cast<std::size_t>(w) * c;
    for (int y = 0; y < h; ++y) {
        const auto* line = cropped.constScanLine(y);
        set.pixels.insert(set.pixels.end(), line, line + row);
    }
    set.labels.push_back(0);
    ++set.count;
}

QImage toQImage(const engine::ImageSet& set, std::int64_t i)
{
    const int h = static_cast<int>(set.height), w = static_cast<int>(set.width);
    const bool gray = set.channels == 1;
    QImage image(w, h, gray ? QImage::Format_Grayscale8 : QImage::Format_RGB888);
    const std::size_t row = static_cast<std::size_t>(w) * static_cast<std::size_t>(set.channels);
    for (int y = 0; y < h; ++y) std::memcpy(image.scanLine(y), set.image(i) + y * row, row);
    return image;
}

} // namespace towers::app
