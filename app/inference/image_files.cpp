#include "app/inference/image_files.h"

#include <QCoreApplication>
#include <QFile>
#include <QGuiApplication>
#include <QImageReader>
#include <QPainter>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/errors.h"

namespace towers::app {

namespace {

[[noreturn]] void fail(const QString& file, const std::string& why)
{
    throw engine::IoError(file.toStdString() + ": " + why);
}

std::string notRegular(mode_t mode)
{
    if (S_ISDIR(mode)) return "is a directory, not an image file";
    if (S_ISFIFO(mode)) return "is a FIFO (named pipe), not an image file";
    if (S_ISSOCK(mode)) return "is a socket, not an image file";
    if (S_ISCHR(mode)) return "is a character device, not an image file";
    if (S_ISBLK(mode)) return "is a block device, not an image file";
    return "is not a regular file";
}

// A descriptor open for reading on `file`, which is a regular file. stat() first, so that nothing
// else is ever opened; then open() non-blocking (a FIFO swapped in after the stat cannot block
// it) and fstat() the descriptor itself, which is what the decoder will read.
int openRegularFile(const QString& file)
{
    const QByteArray path = QFile::encodeName(file);
    if (path.isEmpty()) fail(file, "cannot read the image: no file name");
    using Stat = struct stat;
    Stat st{};
    if (::stat(path.constData(), &st) != 0)
        fail(file, std::string("cannot read the image: ") + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) fail(file, notRegular(st.st_mode));
    if (st.st_size == 0) fail(file, "the file is empty (0 bytes), not an image");
    const int fd = ::open(path.constData(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) fail(file, std::string("cannot read the image: ") + std::strerror(errno));
    Stat opened{};
    if (::fstat(fd, &opened) != 0) {
        const int error = errno;
        ::close(fd);
        fail(file, std::string("cannot read the image: ") + std::strerror(error));
    }
    if (!S_ISREG(opened.st_mode)) {
        ::close(fd);
        fail(file, notRegular(opened.st_mode));
    }
    // O_NONBLOCK means nothing to a regular file's reads; cleared all the same.
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    return fd;
}

// A file read forward a buffer at a time (what the checks below walk: never the whole file in
// memory at once).
class ByteStream
{
public:
    explicit ByteStream(QIODevice& device) : m_device(device) {}
    // The next byte, or -1 at the end of the file (or a read error).
    int get()
    {
        if (m_at == m_buffer.size()) {
            m_buffer = m_device.read(kChunk);
            m_at = 0;
            if (m_buffer.isEmpty()) return -1;
        }
        return std::uint8_t(m_buffer[m_at++]);
    }
    // Skips `n` bytes; false where the file ends first.
    bool skip(qint64 n)
    {
        const qint64 buffered = std::min<qint64>(n, m_buffer.size() - m_at);
        m_at += buffered;
        n -= buffered;
        if (n == 0) return true;
        const qint64 to = m_device.pos() + n;
        return to <= m_device.size() && m_device.seek(to);
    }

private:
    static constexpr qint64 kChunk = 64 * 1024;
    QIODevice& m_device;
    QByteArray m_buffer;
    qsizetype m_at = 0;
};

// Why a JPEG, BMP, GIF or PNG file (`format` as Qt's reader named it; `device` open at its start)
// that its decoder read ends before its image does (cut short, as by an interrupted copy or
// download), where those decoders fill in what is missing instead of failing (PNG's refuses, saying
// only that it could not read the image: asked then too); empty where it is whole, or not one of
// those. Reads only what each check needs, a buffer at a time. JPEG: an end-of-image marker after
// its first scan (a 0xFF in coded data is followed by 0 or a restart marker, never 0xD9); BMP:
// uncompressed pixels as long as its header says; GIF: its first image's data blocks to their end
// (what follows, a trailer or not, is not looked at); PNG: its chunks by their lengths to IEND.
std::string cutShort(QIODevice& device, const QByteArray& format)
{
    const std::string shortFile = "the file ends before its image does (cut short, as by an "
                                  "interrupted copy or download): ";
    ByteStream in(device);
    if (format == "jpeg" || format == "jpg") {
        if (in.get() != 0xFF || in.get() != 0xD8) return {};
        bool scan = false;
        while (!scan) { // the segments before the first scan, by their lengths
            int marker = in.get();
            if (marker < 0) return shortFile + "it has no complete scan";
            if (marker != 0xFF) return {}; // not the layout this reads: the decoder's word stands
            while ((marker = in.get()) == 0xFF) {
            }
            if (marker < 0) return shortFile + "it has no complete scan";
            if (marker == 0xD9) return {};
            if ((marker >= 0xD0 && marker <= 0xD7) || marker == 0x01) continue;
            const int high = in.get(), low = in.get();
            if (high < 0 || low < 0) return shortFile + "it has no complete scan";
            const int length = high << 8 | low;
            if (length < 2 || !in.skip(length - 2)) return shortFile + "it has no complete scan";
            scan = marker == 0xDA;
        }
        for (int b = in.get(), previous = -1; b >= 0; previous = b, b = in.get())
            if (previous == 0xFF && b == 0xD9) return {};
        return shortFile + "no end-of-image marker";
    }
    if (format == "bmp") { // core (12-byte) or info (40 or more) header
        const QByteArray h = device.read(34);
        if (h.size() < 26 || !h.startsWith("BM")) return {};
        const auto at = [&](qsizetype i) { return std::uint32_t(std::uint8_t(h[i])); };
        const auto le16 = [&](qsizetype i) { return at(i) | at(i + 1) << 8; };
        const auto le32 = [&](qsizetype i) { return le16(i) | le16(i + 2) << 16; };
        const std::uint32_t dib = le32(14);
        std::int64_t width = 0, height = 0;
        std::uint32_t bits = 0, compression = 0;
        if (dib == 12) {
            width = le16(18);
            height = le16(20);
            bits = le16(24);
        } else if (dib >= 40 && h.size() >= 34) {
            width = std::int32_t(le32(18));
            height = std::int32_t(le32(22));
            bits = le16(28);
            compression = le32(30);
        } else {
            return {};
        }
        if (compression != 0 && compression != 3 && compression != 6) return {}; // run-length
        if (width <= 0 || bits == 0 || bits > 32) return {};
        const std::int64_t row = (width * bits + 31) / 32 * 4;
        const std::int64_t end = std::int64_t(le32(10)) + row * std::abs(height);
        if (device.size() < end)
            return shortFile + "it is " + std::to_string(device.size()) +
                   " bytes, its header puts the end of its pixels at " + std::to_string(end);
        return {};
    }
    if (format == "png") { // chunks: length, type, data, CRC, to IEND
        const QByteArray signature = device.read(8);
        if (signature != QByteArray("\x89PNG\r\n\x1a\n", 8)) return {};
        for (;;) {
            std::uint64_t header = 0; // length, type: 4 bytes each, big-endian
            for (int i = 0; i < 8; ++i) {
                const int b = in.get();
                if (b < 0) return shortFile + "no IEND chunk";
                header = header << 8 | std::uint64_t(b);
            }
            const std::uint64_t length = header >> 32, type = header & 0xFFFFFFFFu;
            if (length > 0x7FFFFFFFu) return {}; // not a chunk: the decoder's word stands
            if (!in.skip(qint64(length) + 4)) return shortFile + "a chunk ends early";
            if (type == 0x49454E44u) return {}; // IEND
        }
    }
    if (format == "gif") {
        const QByteArray h = device.read(13); // signature, logical screen descriptor
        if (h.size() < 13 || !(h.startsWith("GIF87a") || h.startsWith("GIF89a"))) return {};
        const auto colourTable = [](int packed) {
            return (packed & 0x80) ? 3 * (2 << (packed & 7)) : 0;
        };
        // Sub-blocks (a size byte, then that many) to the empty one that ends them.
        const auto blocks = [&] {
            for (int size = in.get(); size != 0; size = in.get())
                if (size < 0 || !in.skip(size)) return false;
            return true;
        };
        if (!in.skip(colourTable(std::uint8_t(h[10])))) return shortFile + "no image data";
        for (;;) {
            const int kind = in.get();
            if (kind == 0x21) { // an extension: its label, then its blocks
                if (in.get() < 0 || !blocks()) return shortFile + "an extension block ends early";
            } else if (kind == 0x2C) { // the first image: descriptor, table, code size, blocks
                int packed = -1;
                for (int i = 0; i < 9; ++i) packed = in.get();
                if (packed < 0 || !in.skip(colourTable(packed)) || in.get() < 0 || !blocks())
                    return shortFile + "its image data ends early";
                return {};
            } else {
                return {}; // a trailer before any image, or a layout this does not read
            }
        }
    }
    return {};
}

// "64,008,000": every digit, so that an image just over the limit never reads as the limit.
std::string pixelCount(std::int64_t pixels)
{
    const std::string digits = std::to_string(pixels);
    std::string out;
    for (std::size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
        out += digits[i];
    }
    return out;
}

// `image` with its shorter side at most `shortSide`, aspect ratio kept (the image itself when it
// is small enough).
QSize reducedSize(QSize size, int shortSide)
{
    const int shorter = std::min(size.width(), size.height());
    if (shortSide <= 0 || shorter <= shortSide) return size;
    const double f = double(shortSide) / double(shorter);
    return {std::max(1, qRound(size.width() * f)), std::max(1, qRound(size.height() * f))};
}

// Qt refuses by itself to allocate an image over QImageReader::allocationLimit() (128 MB in Qt
// 6.4, reckoned at 4 bytes a pixel: 33.5 megapixels), with a vague message. Raised once, never
// lowered, to what kMaxImagePixels needs, so that the budget is the limit users meet
// ($QT_IMAGEIO_MAXALLOC, where set, still decides).
void allowTheBudget()
{
    static std::once_flag once;
    std::call_once(once, [] {
        constexpr int neededMb = int((kMaxImagePixels * 4 + (1 << 20) - 1) >> 20);
        const int limit = QImageReader::allocationLimit();
        if (limit > 0 && limit < neededMb) QImageReader::setAllocationLimit(neededMb);
    });
}

// Qt refuses to decode an image whose pixels would take more than its allocation limit, saying
// only "Unable to read image data": a 16-bit colour image takes 8 bytes a pixel, twice what the
// budget allows for, so one of 33 to 64 megapixels is refused. Said here, with the reason.
void checkDecodedBytes(const QString& file, QSize size, QImage::Format format)
{
    const int limitMb = QImageReader::allocationLimit();
    if (format == QImage::Format_Invalid || limitMb <= 0) return;
    const int bits = QImage::toPixelFormat(format).bitsPerPixel();
    const std::int64_t bytes = std::int64_t(size.width()) * size.height() * bits / 8;
    if (bytes <= std::int64_t(limitMb) << 20) return;
    const std::int64_t mb = (bytes + (1 << 20) - 1) >> 20;
    fail(file,
         "the image is " + std::to_string(size.width()) + " x " + std::to_string(size.height()) +
             " pixels at " + std::to_string(bits) + " bits a pixel: " + std::to_string(mb) +
             " MB decoded, more than the " + std::to_string(limitMb) +
             " MB that images may take (" +
             pixelCount(std::int64_t(limitMb) * (1 << 20) * 8 / bits) +
             " pixels at this depth; QT_IMAGEIO_MAXALLOC sets it)" +
             (bits > 32 ? ": save it with 8 bits a channel, or smaller" : ": save it smaller"));
}

QImage readImage(const QString& file, int shortSide)
{
    allowTheBudget();
    const int fd = openRegularFile(file);
    QFile device(file); // named, so that the reader takes the suffix as a hint
    if (!device.open(fd, QIODevice::ReadOnly, QFileDevice::AutoCloseHandle)) {
        ::close(fd);
        fail(file, "cannot read the image: " + device.errorString().toStdString());
    }
    QImageReader reader(&device);
    reader.setAutoTransform(true);
    // Qt's SVG reader draws text with the font database, which only a GUI application has: in
    // towers-cli (a QCoreApplication) an SVG with text would abort the process.
    if (const QByteArray format = reader.format().toLower();
        (format == "svg" || format == "svgz") &&
        !qobject_cast<QGuiApplication*>(QCoreApplication::instance()))
        fail(file, "an SVG drawing, which towers-cli does not render (Qt draws SVG text only in a "
                   "desktop application): convert it to PNG, or use the desktop application");
    // The header's size (before the EXIF orientation, which only swaps the sides): refused before
    // a single pixel is decoded. A format that cannot tell its size is checked once decoded, and
    // until then Qt's allocation limit (QImageReader::allocationLimit) bounds it.
    const QSize header = reader.size();
    if (header.isValid()) {
        checkImageSize(file, header.width(), header.height());
        checkDecodedBytes(file, header, reader.imageFormat());
        const QSize reduced = reducedSize(header, shortSide);
        if (reduced != header) reader.setScaledSize(reduced);
    }
    const QByteArray format = reader.format().toLower(); // which read() forgets
    QImage image = reader.read();
    const std::string why = image.isNull() ? reader.errorString().toStdString() : std::string();
    // Decoded, perhaps from part of a file: whole only where it ends as its format ends (PNG's
    // decoder refuses a file cut short by itself); not decoded, a file cut short is said as that,
    // where the decoder can only say it could not read it.
    if ((image.isNull() || format != "png") && device.seek(0))
        if (const std::string cut = cutShort(device, format); !cut.empty()) fail(file, cut);
    if (image.isNull()) fail(file, "cannot read the image: " + why);
    checkImageSize(file, image.width(), image.height());
    const QSize reduced = reducedSize(image.size(), shortSide);
    if (reduced != image.size()) {
        image = image.scaled(reduced, Qt::IgnoreAspectRatio, Qt::SmoothTransformation);
        if (image.isNull()) fail(file, "not enough memory to reduce the image");
    }
    return image;
}

} // namespace

int decodedShortSide(const engine::Shape& shape)
{
    if (shape.rank() < 2) return kDecodedShortSide;
    return int(std::max<std::int64_t>(kDecodedShortSide, 4 * std::max(shape[0], shape[1])));
}

void checkImageSize(const QString& file, std::int64_t width, std::int64_t height)
{
    const std::string size =
        "the image is " + std::to_string(width) + " x " + std::to_string(height) + " pixels";
    if (width < 1 || height < 1) fail(file, size + ", an empty image");
    const std::int64_t pixels = width * height; // each side < 2^31: no overflow
    if (pixels > kMaxImagePixels)
        fail(file, size + " (" + pixelCount(pixels) + " pixels); Towers decodes images of up to " +
                       pixelCount(kMaxImagePixels) + " pixels (" +
                       std::to_string(kMaxImagePixels / 1'000'000) + " megapixels)");
    if (std::max(width, height) > kMaxImageAspect * std::min(width, height))
        fail(file, size + ", an aspect ratio over " + std::to_string(kMaxImageAspect) +
                       ":1; Towers classifies images of up to " + std::to_string(kMaxImageAspect) +
                       ":1");
}

QImage readImageFile(const QString& file)
{
    return readImage(file, 0);
}

QImage readImageFile(const QString& file, const engine::Shape& shape)
{
    return readImage(file, decodedShortSide(shape));
}

void appendImage(const QImage& image, const engine::Shape& shape, engine::ImageSet& set,
                 engine::ImageFit fit)
{
    const int h = static_cast<int>(shape[0]), w = static_cast<int>(shape[1]),
              c = static_cast<int>(shape[2]);
    if (c != 1 && c != 3)
        throw engine::InvalidArgument("images must have 1 or 3 channels, not " + std::to_string(c));
    if (h < 1 || w < 1) throw engine::InvalidArgument("images must be at least 1 x 1");
    if (image.isNull() || image.width() < 1 || image.height() < 1)
        throw engine::InvalidArgument("the image is empty");
    if (set.count == 0) {
        set.height = h;
        set.width = w;
        set.channels = c;
    } else if (set.height != h || set.width != w || set.channels != c) {
        throw engine::ShapeError("appendImage: the set holds " + set.imageShape().str() +
                                 " images, not " + shape.str());
    }
    auto made = [](const QImage& i, const char* what) {
        if (i.isNull())
            throw engine::IoError(std::string("not enough memory to ") + what + " the image");
    };
    // Crop: the centre, cropped to the model's aspect ratio first: scaling the whole image so that
    // its shorter side fits would make a very elongated one enormous (3,300,000 x 1 to cover 28 x
    // 28 is 92,400,000 x 28). Squash and fill take the whole image.
    const std::int64_t iw = image.width(), ih = image.height();
    const bool wider = iw * h > ih * w; // than the model's images
    QImage region = image;
    if (fit == engine::ImageFit::Crop) {
        std::int64_t cw = iw, ch = ih;
        if (wider)
            cw = std::clamp<std::int64_t>((ih * w + h / 2) / h, 1, iw);
        else
            ch = std::clamp<std::int64_t>((iw * h + w / 2) / w, 1, ih); // taller, or the same
        region = image.copy(int((iw - cw) / 2), int((ih - ch) / 2), int(cw), int(ch));
        made(region, "crop");
    }
    // Transparency flattened onto black (the 28x28 datasets are light objects on black).
    QImage opaque(region.size(), QImage::Format_RGB888);
    made(opaque, "convert");
    opaque.fill(Qt::black);
    {
        QPainter painter(&opaque);
        painter.drawImage(0, 0, region);
    }
    // Fill: scaled to fit inside, its aspect ratio kept (a side at least one pixel), and centred
    // on black; crop and squash: scaled to the size.
    std::int64_t sw = w, sh = h;
    if (fit == engine::ImageFit::Fill) {
        if (wider)
            sh = std::clamp<std::int64_t>((ih * w + iw / 2) / iw, 1, h);
        else
            sw = std::clamp<std::int64_t>((iw * h + ih / 2) / ih, 1, w);
    }
    QImage scaled =
        opaque.scaled(int(sw), int(sh), Qt::IgnoreAspectRatio, Qt::SmoothTransformation);
    made(scaled, "scale");
    if (sw != w || sh != h) {
        QImage filled(w, h, QImage::Format_RGB888);
        made(filled, "fill");
        filled.fill(Qt::black);
        {
            QPainter painter(&filled);
            painter.drawImage(int((w - sw) / 2), int((h - sh) / 2), scaled);
        }
        scaled = filled;
    }
    const QImage converted =
        scaled.convertToFormat(c == 1 ? QImage::Format_Grayscale8 : QImage::Format_RGB888);
    made(converted, "convert");
    if (converted.width() != w || converted.height() != h)
        throw engine::IoError("the image could not be brought to " + shape.str());
    const std::size_t row = static_cast<std::size_t>(w) * c;
    for (int y = 0; y < h; ++y) {
        const auto* line = converted.constScanLine(y);
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
    if (image.isNull())
        throw engine::IoError("not enough memory for a " + set.imageShape().str() + " image");
    const std::size_t row = static_cast<std::size_t>(w) * static_cast<std::size_t>(set.channels);
    for (int y = 0; y < h; ++y) std::memcpy(image.scanLine(y), set.image(i) + y * row, row);
    return image;
}

} // namespace towers::app
