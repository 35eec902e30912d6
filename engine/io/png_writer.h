#pragma once
// A minimal PNG encoder (8-bit grayscale, gray + alpha, RGB or RGBA; no filtering, one IDAT
// chunk, zlib), for images the engine writes without Qt: TensorBoard's image summaries.
#include <cstdint>
#include <span>
#include <string>

namespace towers::engine {

// The PNG file of a `height` x `width` image of `channels` (1, 2, 3 or 4) interleaved 8-bit
// samples per pixel, row by row from the top. InvalidArgument when the sizes do not match.
std::string encodePng(std::span<const std::uint8_t> pixels, int height, int width, int channels);

} // namespace towers::engine
