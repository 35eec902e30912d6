#pragma once
// Showing the engine's images: 8-bit HWC dataset images and preprocessed float model input as
// QImages. QtGui only (no widgets). Decoding the user's files into model input is
// app/inference/image_files.h.
#include <QImage>

#include <cstdint>

namespace towers::app {

// A deep copy of one HWC 8-bit image: channels 1 gives Grayscale8, 3 gives RGB888. Throws
// engine::InvalidArgument for other channel counts or non-positive sizes.
QImage imageFromHwc(const std::uint8_t* pixels, int height, int width, int channels);

// Preprocessed model input (HWC floats, any scale) for display: the values are rescaled linearly
// so that the image's minimum becomes 0 and its maximum 255 (all channels together, so colours
// keep their balance); a constant image becomes mid-grey. Channels 1 or 3.
QImage imageFromFloats(const float* values, int height, int width, int channels);

} // namespace towers::app
