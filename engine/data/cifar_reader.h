#pragma once
// CIFAR-10 and CIFAR-100 binary files: the file-level entry points used by discovery and loading.
// The byte-level parser, parseCifarRecords, is declared in dataset.h (it is also fuzzed).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/data/dataset.h"

namespace towers::engine {

inline constexpr int kCifarSide = 32;
inline constexpr int kCifarImageBytes = kCifarSide * kCifarSide * 3;
inline constexpr int kCifar100Coarse = 20, kCifar100Fine = 100;

// Parses records and appends them to `into` (which must be empty or hold 32x32x3 images).
void appendCifarRecords(const std::uint8_t* data, std::size_t size, int labelBytes, bool fine,
                        int numClasses, const std::string& what, ImageSet& into);
// Reads a whole file of records and appends them to `into`.
void readCifarFile(const std::filesystem::path& path, int labelBytes, bool fine, int numClasses,
                   ImageSet& into);
// Checks that the file is a non-empty whole number of records; returns how many it holds.
std::int64_t inspectCifarFile(const std::filesystem::path& path, int labelBytes);

// Class names, one per line (blank lines and surrounding white space ignored); exactly `expected`.
std::vector<std::string> parseClassNames(const std::string& text, int expected,
                                         const std::string& what);
std::vector<std::string> readClassNames(const std::filesystem::path& path, int expected);

} // namespace towers::engine
