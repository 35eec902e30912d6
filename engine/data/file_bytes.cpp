#include "engine/data/file_bytes.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "engine/errors.h"

namespace towers::engine {

namespace {

struct FileCloser
{
    void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

File openForReading(const std::filesystem::path& path)
{
    File f(std::fopen(path.c_str(), "rb"));
    if (!f) throw IoError(path.string() + ": cannot open: " + std::strerror(errno));
    return f;
}

std::string gib(std::uint64_t bytes)
{
    return std::to_string(bytes >> 30) + " GiB";
}

} // namespace

std::uint64_t regularFileSize(const std::filesystem::path& path)
{
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (ec || !std::filesystem::exists(status)) throw IoError(path.string() + ": file not found");
    if (!std::filesystem::is_regular_file(status))
        throw IoError(path.string() + ": not a regular file");
    const std::uintmax_t size = std::filesystem::file_size(path, ec);
    if (ec) throw IoError(path.string() + ": cannot read its size: " + ec.message());
    return size;
}

std::vector<std::uint8_t> readFileBytes(const std::filesystem::path& path)
{
    const std::uint64_t size = regularFileSize(path);
    if (size > kMaxDatasetFileBytes)
        throw IoError(path.string() + ": " + std::to_string(size) +
                      " bytes is larger than any dataset file Towers reads (at most " +
                      gib(kMaxDatasetFileBytes) + ")");
    File f = openForReading(path);
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
    const std::size_t got = bytes.empty() ? 0 : std::fread(bytes.data(), 1, bytes.size(), f.get());
    if (got != bytes.size())
        throw IoError(path.string() + ": read " + std::to_string(got) + " of " +
                      std::to_string(size) + " bytes" +
                      (std::ferror(f.get()) ? std::string(": ") + std::strerror(errno) : ""));
    return bytes;
}

std::vector<std::uint8_t> readFileRange(const std::filesystem::path& path, std::uint64_t offset,
                                        std::size_t count)
{
    File f = openForReading(path);
    if (offset > 0 && std::fseek(f.get(), static_cast<long>(offset), SEEK_SET) != 0)
        throw IoError(path.string() + ": cannot seek to byte " + std::to_string(offset) + ": " +
                      std::strerror(errno));
    std::vector<std::uint8_t> bytes(count);
    const std::size_t got = count ? std::fread(bytes.data(), 1, count, f.get()) : 0;
    if (std::ferror(f.get()))
        throw IoError(path.string() + ": read error at byte " + std::to_string(offset) + ": " +
                      std::strerror(errno));
    bytes.resize(got);
    return bytes;
}

} // namespace towers::engine
