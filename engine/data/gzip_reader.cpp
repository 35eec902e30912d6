#include "engine/data/gzip_reader.h"

#include <zlib.h>

#include <algorithm>

#include "engine/errors.h"

namespace towers::engine {

struct GzipReader::State
{
    z_stream z{};
    bool initialised = false;
};

bool GzipReader::isGzip(const std::uint8_t* data, std::size_t size)
{
    return size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
}

GzipReader::GzipReader(const std::uint8_t* data, std::size_t size, std::string what)
    : m_state(std::make_unique<State>()), m_what(std::move(what)), m_size(size)
{
    z_stream& z = m_state->z;
    z.next_in = const_cast<Bytef*>(data); // zlib's API is not const-correct; it never writes input
    z.avail_in = 0;
    // 15 + 16: a gzip wrapper (not zlib or raw deflate), with the CRC-32 and length checked.
    if (inflateInit2(&z, 15 + 16) != Z_OK)
        throw IoError(m_what + ": cannot start gzip decompression (zlib: " +
                      (z.msg ? z.msg : "out of memory") + ")");
    m_state->initialised = true;
}

GzipReader::~GzipReader()
{
    if (m_state->initialised) inflateEnd(&m_state->z);
}

std::size_t GzipReader::read(std::uint8_t* out, std::size_t n)
{
    z_stream& z = m_state->z;
    // avail_in and avail_out are 32-bit: feed and drain in chunks.
    constexpr std::size_t chunk = std::size_t(1) << 30;
    std::size_t done = 0;
    while (done < n && !m_ended) {
        // next_in has advanced past what inflate consumed (total_in bytes): feed the rest.
        const std::size_t inputLeft = m_size - static_cast<std::size_t>(z.total_in);
        if (z.avail_in == 0 && inputLeft > 0)
            z.avail_in = static_cast<uInt>(std::min(inputLeft, chunk));
        const uInt want = static_cast<uInt>(std::min(n - done, chunk));
        z.next_out = out + done;
        z.avail_out = want;
        const int rc = inflate(&z, Z_NO_FLUSH);
        const std::size_t got = want - z.avail_out;
        done += got;
        m_produced += got;
        if (rc == Z_STREAM_END) {
            m_ended = true;
        } else if (rc == Z_BUF_ERROR) {
            // No progress is possible with output space available: the input is used up.
            throw IoError(m_what + ": truncated gzip stream: the compressed data ends at byte " +
                          std::to_string(m_size) + " before the end of the stream (" +
                          std::to_string(m_produced) + " bytes inflated so far)");
        } else if (rc != Z_OK) {
            const std::string why =
                z.msg ? z.msg : (rc == Z_MEM_ERROR ? "out of memory" : "corrupt data");
            throw IoError(m_what + ": not a valid gzip stream: " + why +
                          " (at compressed byte offset " + std::to_string(z.total_in) + ")");
        }
    }
    return done;
}

void GzipReader::requireEnd(const std::string& expected)
{
    std::uint8_t extra[4096];
    const std::uint64_t before = m_produced;
    std::uint64_t more = 0;
    // Inflate to the end of the stream (this also verifies the CRC and length trailer), counting
    // what the header did not announce; stop counting early once it is clearly too much.
    while (!m_ended && more < (std::uint64_t(1) << 24)) more += read(extra, sizeof extra);
    if (more > 0)
        throw IoError(m_what + ": " +
                      (m_ended ? std::to_string(more) : "more than " + std::to_string(more)) +
                      " unexpected bytes after the content (expected " + expected +
                      ", the file inflates to " +
                      (m_ended ? std::to_string(before + more)
                               : "more than " + std::to_string(before + more)) +
                      " bytes)");
    const z_stream& z = m_state->z;
    const std::size_t trailing = m_size - static_cast<std::size_t>(z.total_in);
    if (trailing > 0)
        throw IoError(m_what + ": " + std::to_string(trailing) +
                      " bytes after the end of the gzip stream (at compressed byte offset " +
                      std::to_string(z.total_in) + ")");
}

} // namespace towers::engine
