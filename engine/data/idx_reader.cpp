// IDX: big-endian magic (two zero bytes, the element type 0x08 = unsigned byte, the number of
// dimensions), one 32-bit big-endian size per dimension, then the elements. Only what MNIST and
// Fashion-MNIST use is accepted, and colour: images of unsigned bytes with 3 dimensions (count,
// rows, columns: MNIST's) or 4 (count, rows, columns, channels of 1 or 3, channels last: what
// `towers-cli import` writes), and 1-dimensional labels of unsigned bytes (0x08) or of big-endian
// 32-bit integers (0x0C: what `towers-cli import` writes for more than 256 classes).
#include "engine/data/idx_reader.h"

#include <algorithm>
#include <cstdio>

#include "engine/data/file_bytes.h"
#include "engine/data/gzip_reader.h"

namespace towers::engine {

namespace {

// Larger images than this are not something a 28x28 reader should trust a header for.
constexpr std::int64_t kMaxSide = 4096;
// A deflate stream inflates at most about 1032:1; the header of a gzip file is in its first bytes.
constexpr std::size_t kGzipHeadBytes = 64 * 1024;

std::uint32_t be32(const std::uint8_t* p)
{
    return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) |
           std::uint32_t(p[3]);
}

std::string hex32(std::uint32_t v)
{
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%08X", v);
    return buf;
}

// What one kind of IDX file looks like, and what a header of that kind announces.
struct Layout
{
    bool images = true;
    std::int64_t count = 0, rows = 0, cols = 0;
    std::int64_t channels = 1; // a 4-dimensional images file's last size
    bool fourDims = false;
    std::uint64_t labelBytes = 1; // 4 for 32-bit integer labels

    std::uint64_t headerBytes() const { return images ? (fourDims ? 20 : 16) : 8; }
    std::uint64_t itemBytes() const
    {
        return images ? std::uint64_t(rows * cols * channels) : labelBytes;
    }
    std::uint64_t totalBytes() const { return headerBytes() + std::uint64_t(count) * itemBytes(); }
    std::string kindName() const { return images ? "IDX images" : "IDX labels"; }
    std::string announce() const
    {
        std::string text = std::to_string(count);
        if (images) {
            text += " images of " + std::to_string(rows) + 'x' + std::to_string(cols);
            if (fourDims) text += 'x' + std::to_string(channels);
        } else {
            text += " labels";
        }
        return text + " (" + std::to_string(totalBytes()) + " bytes)";
    }
};

// Validates a header of `have` bytes (possibly fewer than a header needs).
Layout checkHeader(const std::uint8_t* head, std::size_t have, bool images, const std::string& what)
{
    Layout l;
    l.images = images;
    const std::uint32_t expectedMagic = images ? 0x00000803u : 0x00000801u;
    const std::string expected =
        images ? hex32(expectedMagic) + " (" + l.kindName() + " of unsigned bytes)"
               : hex32(expectedMagic) + " or 0x00000C01 (" + l.kindName() +
                     " of unsigned bytes or 32-bit integers)";
    if (have == 0) throw IoError(what + ": the file is empty (expected " + l.kindName() + ")");
    if (have < 4)
        throw IoError(what + ": " + std::to_string(have) +
                      " bytes is too short for an IDX header (expected magic number " + expected +
                      ")");
    const std::uint32_t magic = be32(head);
    l.fourDims = images && magic == 0x00000804u;
    if (!images && magic == 0x00000C01u) l.labelBytes = 4;
    if (magic != expectedMagic && !l.fourDims && l.labelBytes == 1) {
        std::string why;
        if (head[0] != 0 || head[1] != 0)
            why = "this is not an IDX file";
        else if (head[2] != 0x08 && (images || head[2] != 0x0C))
            why = "the elements are of IDX type 0x" + hex32(head[2]).substr(8) +
                  (images ? ", not unsigned bytes (0x08)"
                          : ", not unsigned bytes (0x08) or 32-bit integers (0x0C)");
        else if (magic == (images ? 0x00000801u : 0x00000803u))
            why =
                images ? "this is a labels file, not images" : "this is an images file, not labels";
        else
            why = "the file has " + std::to_string(head[3]) + " dimensions, expected " +
                  (images ? "3 or 4" : "1");
        throw IoError(what + ": wrong magic number " + hex32(magic) +
                      " at byte offset 0: expected " + expected + "; " + why);
    }
    if (have < l.headerBytes())
        throw IoError(what + ": truncated: " + std::to_string(have) +
                      " bytes is too short for the " + std::to_string(l.headerBytes()) + "-byte " +
                      l.kindName() + " header");
    l.count = be32(head + 4);
    if (l.count == 0)
        throw IoError(what + ": the header (byte offset 4) says the file holds no " +
                      (images ? "images" : "labels"));
    if (images) {
        l.rows = be32(head + 8);
        l.cols = be32(head + 12);
        if (l.rows < 1 || l.rows > kMaxSide || l.cols < 1 || l.cols > kMaxSide)
            throw IoError(what + ": the header (byte offset 8) says images are " +
                          std::to_string(l.rows) + "x" + std::to_string(l.cols) +
                          ": expected rows and columns between 1 and " + std::to_string(kMaxSide));
        if (l.fourDims) {
            l.channels = be32(head + 16);
            if (l.channels != 1 && l.channels != 3)
                throw IoError(what + ": the header (byte offset 16) says images have " +
                              std::to_string(l.channels) + " channels: expected 1 or 3");
        }
    }
    if (l.totalBytes() > kMaxDatasetFileBytes)
        throw IoError(what + ": the header says " + l.announce() + ", more than the " +
                      std::to_string(kMaxDatasetFileBytes >> 30) + " GiB an IDX file may hold");
    return l;
}

[[noreturn]] void throwTruncated(const Layout& l, std::uint64_t has, const std::string& what)
{
    throw IoError(what + ": truncated: header says " + l.announce() + ", file has " +
                  std::to_string(has) + (has == 1 ? " byte" : " bytes"));
}

// The data after the header, from a plain or gzip file, exactly as long as the header says.
std::vector<std::uint8_t> payload(const std::vector<std::uint8_t>& bytes, bool images,
                                  const std::string& what, Layout& layout)
{
    if (!GzipReader::isGzip(bytes.data(), bytes.size())) {
        layout = checkHeader(bytes.data(), bytes.size(), images, what);
        const std::uint64_t total = layout.totalBytes();
        if (bytes.size() < total) throwTruncated(layout, bytes.size(), what);
        if (bytes.size() > total)
            throw IoError(what + ": " + std::to_string(bytes.size() - total) +
                          " unexpected bytes at byte offset " + std::to_string(total) +
                          " after the data (header says " + layout.announce() + ", file has " +
                          std::to_string(bytes.size()) + " bytes)");
        return {bytes.begin() + static_cast<std::ptrdiff_t>(layout.headerBytes()), bytes.end()};
    }

    GzipReader gz(bytes.data(), bytes.size(), what);
    std::uint8_t head[20];
    std::size_t headGot = gz.read(head, images ? 16 : 8);
    // A 4-dimensional images header has a fifth size (the channels); read no pixel as header.
    if (images && headGot == 16 && be32(head) == 0x00000804u) headGot += gz.read(head + 16, 4);
    if (headGot == 0)
        throw IoError(what + ": the gzip stream inflates to nothing (expected " +
                      (images ? "IDX images" : "IDX labels") + ")");
    layout = checkHeader(head, headGot, images, what);
    // Grow the buffer as the data really inflates, never trusting the header for an allocation.
    const std::uint64_t need = layout.totalBytes() - layout.headerBytes();
    std::vector<std::uint8_t> out;
    std::size_t have = 0;
    while (have < need) {
        const std::size_t step = static_cast<std::size_t>(
            std::min<std::uint64_t>(need - have, std::max<std::size_t>(have, 1 << 20)));
        out.resize(have + step);
        const std::size_t got = gz.read(out.data() + have, step);
        have += got;
        if (got < step) throwTruncated(layout, layout.headerBytes() + have, what);
    }
    gz.requireEnd(layout.announce());
    return out;
}

IdxHeader inspect(const std::filesystem::path& path, bool images)
{
    const std::string what = path.string();
    const std::uint64_t size = regularFileSize(path);
    std::vector<std::uint8_t> head = readFileRange(path, 0, kGzipHeadBytes);
    IdxHeader h;
    h.gzip = GzipReader::isGzip(head.data(), head.size());
    Layout l;
    if (!h.gzip) {
        l = checkHeader(head.data(), head.size(), images, what);
        if (size < l.totalBytes()) throwTruncated(l, size, what);
        if (size > l.totalBytes())
            throw IoError(what + ": " + std::to_string(size - l.totalBytes()) +
                          " unexpected bytes after the data (header says " + l.announce() +
                          ", file has " + std::to_string(size) + " bytes)");
    } else {
        // A gzip member ends with CRC-32 and ISIZE (the inflated length mod 2^32, little-endian).
        if (size < 18)
            throw IoError(what + ": truncated gzip stream: " + std::to_string(size) +
                          " bytes is shorter than any gzip file (18 bytes)");
        GzipReader gz(head.data(), head.size(), what);
        std::uint8_t buf[20];
        const std::size_t got = gz.read(buf, images ? 20 : 8);
        if (got == 0)
            throw IoError(what + ": the gzip stream inflates to nothing (expected " +
                          (images ? "IDX images" : "IDX labels") + ")");
        l = checkHeader(buf, got, images, what);
        const std::vector<std::uint8_t> tail = readFileRange(path, size - 4, 4);
        if (tail.size() != 4) throw IoError(what + ": cannot read the gzip trailer");
        const std::uint32_t isize = std::uint32_t(tail[0]) | (std::uint32_t(tail[1]) << 8) |
                                    (std::uint32_t(tail[2]) << 16) | (std::uint32_t(tail[3]) << 24);
        if (isize != static_cast<std::uint32_t>(l.totalBytes()))
            throw IoError(what + ": the gzip trailer says the content is " + std::to_string(isize) +
                          " bytes (mod 2^32) but the header says " + l.announce() +
                          ": the file is truncated or corrupt");
    }
    h.count = l.count;
    h.rows = l.rows;
    h.cols = l.cols;
    h.channels = images ? l.channels : 0;
    return h;
}

} // namespace

ImageSet parseIdxImages(const std::vector<std::uint8_t>& bytes, const std::string& what)
{
    Layout l;
    std::vector<std::uint8_t> pixels = payload(bytes, true, what, l);
    ImageSet set;
    set.count = l.count;
    set.height = l.rows;
    set.width = l.cols;
    set.channels = l.channels;
    set.pixels = std::move(pixels);
    return set;
}

std::vector<std::int32_t> parseIdxLabels(const std::vector<std::uint8_t>& bytes, int numClasses,
                                         const std::string& what)
{
    if (numClasses < 1)
        throw InvalidArgument(what + ": " + std::to_string(numClasses) +
                              " classes: a dataset has at least 1");
    Layout l;
    const std::vector<std::uint8_t> data = payload(bytes, false, what, l);
    const bool gzip = GzipReader::isGzip(bytes.data(), bytes.size());
    const std::size_t n = data.size() / l.labelBytes;
    std::vector<std::int32_t> labels(n);
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint32_t label =
            l.labelBytes == 4 ? be32(data.data() + 4 * i) : std::uint32_t(data[i]);
        if (label >= std::uint32_t(numClasses))
            throw IoError(what + ": item " + std::to_string(i) + " (" +
                          (gzip ? "inflated byte offset " : "byte offset ") +
                          std::to_string(l.headerBytes() + i * l.labelBytes) + "): label " +
                          std::to_string(label) + " is out of range 0.." +
                          std::to_string(numClasses - 1));
        labels[i] = std::int32_t(label);
    }
    return labels;
}

IdxHeader inspectIdxImages(const std::filesystem::path& path)
{
    return inspect(path, true);
}
IdxHeader inspectIdxLabels(const std::filesystem::path& path)
{
    return inspect(path, false);
}

ImageSet readIdxImages(const std::filesystem::path& path)
{
    return parseIdxImages(readFileBytes(path), path.string());
}

std::vector<std::int32_t> readIdxLabels(const std::filesystem::path& path, int numClasses)
{
    return parseIdxLabels(readFileBytes(path), numClasses, path.string());
}

} // namespace towers::engine
