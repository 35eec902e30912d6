#pragma once
// Image files into model input: decoding with Qt's image readers (PNG, JPEG, BMP, PPM/PGM, GIF,
// ...), conversion to grayscale or colour, and resizing to the dataset's image size. Shared by
// `towers-cli classify` and the GUI's Classify page.
#include <QImage>
#include <QString>
#include <QStringList>

#include "engine/data/dataset.h"

namespace towers::app {

// Decodes `file` (honouring EXIF orientation). Throws engine::IoError naming the file and the
// reader's reason (no such file, unknown format, damaged data).
QImage readImageFile(const QString& file);

// Brings `image` to `shape` ([H, W, C], C = 1 or 3): the shorter side scaled to fit, the centre
// cropped (the aspect ratio is kept), then converted to 8-bit grayscale or RGB; transparent
// pixels land on black. The result is one HWC image, appended to `set` (label 0).
void appendImage(const QImage& image, const engine::Shape& shape, engine::ImageSet& set);

// An ImageSet of `shape` holding image i of `set` (or a plain image) as a QImage, for display.
QImage toQImage(const engine::ImageSet& set, std::int64_t i);

} // namespace towers::app
