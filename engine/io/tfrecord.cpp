#include "engine/io/tfrecord.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

#include "engine/errors.h"
#include "engine/io/crc32c.h"

namespace towers::engine {

namespace {

void putLe(std::string& out, std::uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; ++i) out.push_back(char((v >> (8 * i)) & 0xFF));
}

std::uint64_t getLe(const char* p, int bytes)
{
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= std::uint64_t(static_cast<unsigned char>(p[i])) << (8 * i);
    return v;
}

} // namespace

std::string tfRecordFrame(std::string_view data)
{
    std::string out;
    out.reserve(data.size() + 16);
    putLe(out, data.size(), 8);
    putLe(out, maskCrc32c(crc32c(out.data(), 8)), 4);
    out.append(data);
    putLe(out, maskCrc32c(crc32c(data)), 4);
    return out;
}

std::vector<std::string> readTfRecords(std::string_view bytes, bool* complete,
                                       const std::string& what)
{
    std::vector<std::string> records;
    std::size_t at = 0;
    while (bytes.size() - at >= 12) {
        const char* header = bytes.data() + at;
        if (std::uint32_t(getLe(header + 8, 4)) != maskCrc32c(crc32c(header, 8)))
            throw IoError(what + ": the length of the record at offset " + std::to_string(at) +
                          " fails its CRC-32C check");
        const std::uint64_t length = getLe(header, 8);
        if (length > bytes.size() - at - 12 || bytes.size() - at - 12 - length < 4)
            break; // not whole
        const std::string_view data = bytes.substr(at + 12, std::size_t(length));
        if (std::uint32_t(getLe(data.data() + length, 4)) != maskCrc32c(crc32c(data)))
            throw IoError(what + ": the record at offset " + std::to_string(at) +
                          " fails its CRC-32C check");
        records.emplace_back(data);
        at += 12 + std::size_t(length) + 4;
    }
    if (complete) *complete = at == bytes.size();
    return records;
}

TfRecordFile::TfRecordFile(std::filesystem::path path, Open how) : m_path(std::move(path))
{
    int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC;
    if (how == Open::CreateNew) flags |= O_EXCL;
    m_fd = ::open(m_path.c_str(), flags, 0666);
    if (m_fd < 0)
        throw IoError("cannot " + std::string(how == Open::CreateNew ? "create " : "open ") +
                      quotedPath(m_path) + ": " + std::strerror(errno));
}

TfRecordFile::~TfRecordFile()
{
    if (m_fd >= 0) ::close(m_fd);
}

void TfRecordFile::writeBytes(const std::string& bytes)
{
    if (m_failed) throw IoError("cannot write " + quotedPath(m_path) + ": an earlier write failed");
    const char* p = bytes.data();
    std::size_t left = bytes.size();
    while (left > 0) {
        const ssize_t n = ::write(m_fd, p, left);
        if (n < 0) {
            if (errno == EINTR) continue;
            m_failed = true;
            throw IoError("cannot write " + quotedPath(m_path) + ": " + std::strerror(errno));
        }
        p += n;
        left -= std::size_t(n);
    }
}

void TfRecordFile::write(std::string_view data)
{
    writeBytes(tfRecordFrame(data));
}

void TfRecordFile::write(const std::vector<std::string>& records)
{
    std::string all;
    for (const auto& r : records) all += tfRecordFrame(r);
    writeBytes(all);
}

void TfRecordFile::sync()
{
    if (::fsync(m_fd) != 0)
        throw IoError("cannot sync " + quotedPath(m_path) + ": " + std::strerror(errno));
}

} // namespace towers::engine
