#pragma once
// Streaming gzip inflation of an in-memory buffer (zlib), for the IDX readers: the caller inflates
// the header first, validates it, and then asks for exactly the bytes the header announces, so a
// lying header never makes us allocate or inflate more than the file really holds.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace towers::engine {

class GzipReader
{
public:
    // True when `data` starts with the gzip magic bytes 1f 8b.
    static bool isGzip(const std::uint8_t* data, std::size_t size);

    // `what` names the source in error messages. The buffer must outlive the reader.
    GzipReader(const std::uint8_t* data, std::size_t size, std::string what);
    ~GzipReader();
    GzipReader(const GzipReader&) = delete;
    GzipReader& operator=(const GzipReader&) = delete;

    // Inflates up to `n` bytes into `out`; returns fewer only when the gzip stream ended (its CRC
    // and length trailer then verified). Throws IoError naming the source and the compressed byte
    // offset when the stream is corrupt or truncated (the compressed data ends before the stream).
    std::size_t read(std::uint8_t* out, std::size_t n);
    // Throws IoError unless the stream ends exactly here (verifying its trailer) with no bytes
    // after it; `expected` describes what the content should have been, for the message.
    void requireEnd(const std::string& expected);
    // Bytes inflated so far.
    std::uint64_t produced() const { return m_produced; }

private:
    struct State;
    std::unique_ptr<State> m_state;
    std::string m_what;
    std::size_t m_size;
    std::uint64_t m_produced = 0;
    bool m_ended = false;
};

} // namespace towers::engine
