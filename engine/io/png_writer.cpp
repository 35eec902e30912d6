#include "engine/io/png_writer.h"

#include <zlib.h>

#include "engine/errors.h"

namespace towers::engine {

namespace {

void putBe32(std::string& out, std::uint32_t v)
{
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(char((v >> shift) & 0xFF));
}

// length, type, data, CRC-32 (zlib's, over type and data).
void chunk(std::string& out, const char type[4], const std::string& data)
{
    putBe32(out, std::uint32_t(data.size()));
    const std::size_t start = out.size();
    out.append(type, 4);
    out += data;
    const auto* p = reinterpret_cast<const Bytef*>(out.data() + start);
    putBe32(out, std::uint32_t(::crc32(::crc32(0L, Z_NULL, 0), p, uInt(out.size() - start))));
}

} // namespace

std::string encodePng(std::span<const std::uint8_t> pixels, int height, int width, int channels)
{
    if (height < 1 || width < 1 || channels < 1 || channels > 4)
        throw InvalidArgument(
            "PNG: an image needs a size of at least 1x1 and 1 to 4 channels, got " +
            std::to_string(height) + "x" + std::to_string(width) + "x" + std::to_string(channels));
    const std::size_t row = std::size_t(width) * std::size_t(channels);
    if (pixels.size() != row * std::size_t(height) || row > 0x7FFFFFFF / std::size_t(height))
        throw InvalidArgument("PNG: " + std::to_string(pixels.size()) + " bytes for a " +
                              std::to_string(height) + "x" + std::to_string(width) + "x" +
                              std::to_string(channels) + " image");
    // Every row with filter type 0 (none) in front.
    std::string raw;
    raw.reserve((row + 1) * std::size_t(height));
    for (int y = 0; y < height; ++y) {
        raw.push_back('\0');
        raw.append(reinterpret_cast<const char*>(pixels.data()) + std::size_t(y) * row, row);
    }
    uLongf packedSize = ::compressBound(uLong(raw.size()));
    std::string packed(packedSize, '\0');
    if (::compress2(reinterpret_cast<Bytef*>(packed.data()), &packedSize,
                    reinterpret_cast<const Bytef*>(raw.data()), uLong(raw.size()),
                    Z_BEST_COMPRESSION) != Z_OK)
        throw Error("PNG: zlib could not compress the image");
    packed.resize(packedSize);

    // By channels: gray, gray + alpha, RGB, RGBA.
    static constexpr int kColorType[] = {0, 0, 4, 2, 6};
    std::string header;
    putBe32(header, std::uint32_t(width));
    putBe32(header, std::uint32_t(height));
    header.push_back(char(8));                    // bit depth
    header.push_back(char(kColorType[channels])); // colour type
    header.push_back('\0');                       // compression: deflate
    header.push_back('\0');                       // filter method 0
    header.push_back('\0');                       // no interlace

    std::string png("\x89PNG\r\n\x1a\n", 8);
    chunk(png, "IHDR", header);
    chunk(png, "IDAT", packed);
    chunk(png, "IEND", {});
    return png;
}

} // namespace towers::engine
