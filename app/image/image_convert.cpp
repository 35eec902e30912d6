#include "app/image/image_convert.h"

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

} // namespace towers::app
