#include "hostile_images.h"

#include <QBuffer>
#include <QFile>
#include <QImage>

#include <chrono>
#include <stdexcept>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

namespace towers::test {

namespace {

void put16le(QByteArray& b, quint16 v)
{
    b.append(char(v & 0xff)).append(char(v >> 8));
}
void put32le(QByteArray& b, quint32 v)
{
    for (int i = 0; i < 4; ++i) b.append(char((v >> (8 * i)) & 0xff));
}
void put32be(QByteArray& b, quint32 v)
{
    for (int i = 3; i >= 0; --i) b.append(char((v >> (8 * i)) & 0xff));
}

void writeAll(const QString& path, const QByteArray& bytes)
{
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly) || f.write(bytes) != bytes.size())
        throw std::runtime_error("cannot write " + path.toStdString());
}

void pngChunk(QByteArray& png, const char* type, const QByteArray& data)
{
    put32be(png, quint32(data.size()));
    const QByteArray body = QByteArray(type, 4) + data;
    png.append(body);
    put32be(png,
            quint32(crc32(0, reinterpret_cast<const Bytef*>(body.constData()), uInt(body.size()))));
}

} // namespace

void writeBlackBmp(const QString& path, int width, int height)
{
    const quint32 row = ((quint32(width) + 7) / 8 + 3) / 4 * 4;
    const quint32 data = row * quint32(height);
    const quint32 offset = 14 + 40 + 8; // file header, info header, 2-colour palette
    QByteArray b;
    b.append("BM");
    put32le(b, offset + data);
    put32le(b, 0);
    put32le(b, offset);
    put32le(b, 40);
    put32le(b, quint32(width));
    put32le(b, quint32(height));
    put16le(b, 1);    // planes
    put16le(b, 1);    // bits per pixel
    put32le(b, 0);    // no compression
    put32le(b, data); // image size
    put32le(b, 2835); // 72 dpi
    put32le(b, 2835);
    put32le(b, 2); // colours used
    put32le(b, 0);
    put32le(b, 0);          // black
    put32le(b, 0x00ffffff); // white
    b.append(QByteArray(qsizetype(data), '\0'));
    writeAll(path, b);
}

void writeBlackPng(const QString& path, int width, int height)
{
    QByteArray png("\x89PNG\r\n\x1a\n", 8);
    QByteArray ihdr;
    put32be(ihdr, quint32(width));
    put32be(ihdr, quint32(height));
    ihdr.append(char(8)).append(char(0)).append(char(0)).append(char(0)).append(char(0));
    pngChunk(png, "IHDR", ihdr);
    // Deflated a row at a time: filter byte 0, then `width` zeros.
    z_stream z{};
    if (deflateInit(&z, 9) != Z_OK) throw std::runtime_error("deflateInit");
    const std::vector<Bytef> rowBytes(std::size_t(width) + 1, 0);
    std::vector<Bytef> out(1 << 16);
    QByteArray idat;
    for (int y = 0; y <= height; ++y) {
        const bool last = y == height;
        z.next_in = last ? nullptr : const_cast<Bytef*>(rowBytes.data());
        z.avail_in = last ? 0 : uInt(rowBytes.size());
        int rc = Z_OK;
        do {
            z.next_out = out.data();
            z.avail_out = uInt(out.size());
            rc = deflate(&z, last ? Z_FINISH : Z_NO_FLUSH);
            idat.append(reinterpret_cast<const char*>(out.data()),
                        qsizetype(out.size() - z.avail_out));
        } while (z.avail_out == 0 || (last && rc != Z_STREAM_END));
    }
    deflateEnd(&z);
    pngChunk(png, "IDAT", idat);
    pngChunk(png, "IEND", {});
    writeAll(path, png);
}

void writeOrientedJpeg(const QString& path, int width, int height, int orientation)
{
    QImage image(width, height, QImage::Format_RGB32);
    for (int y = 0; y < height; ++y)
        for (int x = 0; x < width; ++x)
            image.setPixel(x, y, x < width / 2 ? qRgb(255, 0, 0) : qRgb(0, 0, 255));
    QByteArray jpeg;
    QBuffer buffer(&jpeg);
    buffer.open(QIODevice::WriteOnly);
    if (!image.save(&buffer, "JPEG", 95)) throw std::runtime_error("cannot write a JPEG");
    // APP1 "Exif": a big-endian TIFF header and one IFD entry, Orientation (0x0112, SHORT).
    QByteArray exif;
    exif.append("Exif\0\0", 6);
    exif.append("MM\0\x2a", 4);
    put32be(exif, 8);
    exif.append(char(0)).append(char(1)); // one entry
    exif.append("\x01\x12\x00\x03", 4);
    put32be(exif, 1);
    exif.append(char(0)).append(char(orientation)).append(char(0)).append(char(0));
    put32be(exif, 0); // no next IFD
    QByteArray app1("\xff\xe1", 2);
    app1.append(char((exif.size() + 2) >> 8)).append(char((exif.size() + 2) & 0xff));
    app1.append(exif);
    jpeg.insert(2, app1); // right after SOI
    writeAll(path, jpeg);
}

bool makeFifo(const QString& path)
{
    return ::mkfifo(QFile::encodeName(path).constData(), 0600) == 0;
}

FifoWatch::FifoWatch(const QString& path) : m_path(path)
{
    m_thread = std::thread([this] {
        const QByteArray p = QFile::encodeName(m_path);
        while (!m_stop.load()) {
            const int fd = ::open(p.constData(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
            if (fd >= 0) { // someone is reading: let them see end of file
                m_seen.store(true);
                ::close(fd);
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
    });
}

FifoWatch::~FifoWatch()
{
    m_stop.store(true);
    if (m_thread.joinable()) m_thread.join();
}

bool FifoWatch::readerSeen()
{
    m_stop.store(true);
    if (m_thread.joinable()) m_thread.join();
    return m_seen.load();
}

} // namespace towers::test
