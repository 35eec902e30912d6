#pragma once
// Between Qt images and the engine's 8-bit HWC images: showing dataset images and preprocessed
// model input, and decoding the user's own pictures (PNG, JPEG, BMP, GIF, ... whatever Qt's image
// plugins read) into the size and channel count a model was trained on. QtGui only (no widgets),
// so it works in tests and tools without a display.
#include <QImage>
#include <QString>

#include <cstdint>
#include <vector>

namespace towers::app {

// A deep copy of one HWC 8-bit image: channels 1 gives Grayscale8, 3 gives RGB888. Throws
// engine::InvalidArgument for other channel counts or non-positive sizes.
QImage imageFromHwc(const std::uint8_t* pixels, int height, int width, int channels);

// Preprocessed model input (HWC floats, any scale) for display: the values are rescaled linearly
// so that the image's minimum becomes 0 and its maximum 255 (all channels together, so colours
// keep their balance); a constant image becomes mid-grey. Channels 1 or 3.
QImage imageFromFloats(const float* values, int height, int width, int channels);

// Converts `image` to height x width x channels bytes, HWC: scaled (smoothly) so that it covers
// the target, then cropped to it around the centre, so the aspect ratio is kept. channels 1 uses
// the luminance (Qt's Grayscale8 conversion), 3 the RGB channels; alpha is composed over black.
// `invert` flips every byte (255 - v): MNIST-style sets are light strokes on black, photos of
// handwriting the opposite.
std::vector<std::uint8_t> hwcFromImage(const QImage& image, int height, int width, int channels,
                                       bool invert = false);

// Reads an image file. Throws engine::IoError naming the file and Qt's reason when it cannot be
// read or decoded.
QImage readImageFile(const QString& path);

} // namespace towers::app
