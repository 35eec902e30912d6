#pragma once
// Image files into model input: decoding with Qt's image readers (PNG, JPEG, BMP, PPM/PGM, GIF,
// ...), conversion to grayscale or colour, and resizing to the dataset's image size. Shared by
// `towers-cli classify` and the GUI's Classify page.
//
// Whatever the file, reading it can neither hang, nor crash, nor exhaust memory:
// * only a regular file is opened: a FIFO, a directory, a socket or a device is refused by stat()
//   before it is opened (opening a FIFO waits for a writer; opening a device may act on it), and
//   the file is opened non-blocking and checked again, so one swapped in between cannot block;
// * the image's size is read from its header before anything is decoded, and an image of more
//   than kMaxImagePixels pixels, or whose sides are more than kMaxImageAspect times apart, is
//   refused with a message naming the file and its size;
// * an image decoded for a model is decoded no larger than it needs (readImageFile with a shape);
// * every image made on the way is checked, so a failed allocation is an error, never a crash.
// Every refusal is an engine::IoError whose message begins with the file's name.
#include <QImage>
#include <QString>
#include <QStringList>

#include <cstdint>

#include "engine/data/dataset.h"

namespace towers::app {

// The most pixels an image file may have: 64 megapixels (8000 x 8000; a 48 MP or 61 MP camera's
// photo passes). At 4 bytes a pixel, as Qt decodes 8-bit colour images, that is 256 MB; Qt's own
// limit for one image is raised to that where it is lower (QImageReader::allocationLimit, 128 MB
// in Qt 6.4), so 16-bit images, at 8 bytes a pixel, are refused by Qt above 32 megapixels.
inline constexpr std::int64_t kMaxImagePixels = 64'000'000;
// The most elongated image: its longer side at most 100 times its shorter one. A model sees the
// centre of an image cropped to the model's own aspect (square for every dataset here): beyond
// 100:1, that is less than 1 % of the image, and such files are more often attacks than photos.
inline constexpr int kMaxImageAspect = 100;
// An image decoded for a model keeps its shorter side at most this long, or 4 times the model's
// larger side if that is more: 256 pixels for the 28x28 and 32x32 datasets, enough for a smooth
// reduction to the model's size and for display. A larger image is decoded at the reduced size
// (JPEG decodes it so directly, at a fraction of the memory; other formats are reduced right after
// decoding), its aspect ratio kept, so the centre crop and the EXIF orientation are unchanged.
inline constexpr int kDecodedShortSide = 256;

// The shorter side an image for a model of `shape` ([H, W, C]) is decoded at, at most.
int decodedShortSide(const engine::Shape& shape);

// Throws engine::IoError naming `file` when a `width` x `height` image is over kMaxImagePixels
// or kMaxImageAspect (or not at least 1 x 1).
void checkImageSize(const QString& file, std::int64_t width, std::int64_t height);

// Decodes `file` (honouring EXIF orientation) at its full size, within the limits above. Throws
// engine::IoError naming the file and the reason (not a regular file, no such file, too large,
// unknown format, damaged data).
QImage readImageFile(const QString& file);
// The same, for a model of `shape`: an image whose shorter side is longer than
// decodedShortSide(shape) is decoded reduced to it, aspect ratio kept. The CLI and the Classify
// page both read files so, hence give the model the same pixels.
QImage readImageFile(const QString& file, const engine::Shape& shape);

// Brings `image` to `shape` ([H, W, C], C = 1 or 3) as `fit` says (engine::ImageFit), scaling
// smoothly (area averaging where it reduces, bilinear where it enlarges), then converts it to
// 8-bit grayscale or RGB; transparent pixels land on black. Crop: the centre cropped to the
// shape's aspect ratio, scaled to its size (as scaling the shorter side to fit and cropping would,
// but never making an image larger than `image`); Squash: the whole image scaled to the size;
// Fill: the whole image scaled to fit inside it, its aspect ratio kept (each side at least one
// pixel), centred on black. The result is one HWC image, appended to `set` (label 0). Throws
// engine::InvalidArgument for an empty image or a bad channel count, engine::IoError when an
// intermediate image cannot be made (memory).
void appendImage(const QImage& image, const engine::Shape& shape, engine::ImageSet& set,
                 engine::ImageFit fit = engine::ImageFit::Crop);

// An ImageSet of `shape` holding image i of `set` (or a plain image) as a QImage, for display.
QImage toQImage(const engine::ImageSet& set, std::int64_t i);

} // namespace towers::app
