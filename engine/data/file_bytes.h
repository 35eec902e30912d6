#pragma once
// Whole-file and partial reads for the dataset readers, with errors that name the file.
#include <cstdint>
#include <filesystem>
#include <vector>

namespace towers::engine {

// The largest dataset file Towers reads (compressed or not); anything larger is surely not one of
// the formats, and reading it would only exhaust memory.
inline constexpr std::uint64_t kMaxDatasetFileBytes = std::uint64_t(4) << 30;

// Size of a regular file; throws IoError when it is missing or not a regular file.
std::uint64_t regularFileSize(const std::filesystem::path& path);
// The whole file; throws IoError when it cannot be read or is larger than kMaxDatasetFileBytes.
std::vector<std::uint8_t> readFileBytes(const std::filesystem::path& path);
// Up to `count` bytes from `offset` (fewer at the end of the file).
std::vector<std::uint8_t> readFileRange(const std::filesystem::path& path, std::uint64_t offset,
                                        std::size_t count);

} // namespace towers::engine
