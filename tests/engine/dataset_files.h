#pragma once
// Test support for the data pipeline: small files in the real formats (IDX, gzip'ed IDX, CIFAR-10
// and CIFAR-100 binary records, class-name lists) and whole dataset folders, so no test needs the
// network or an installed dataset. Pixel values follow pixelValue(), an independent formula the
// tests check the readers' layout conversion against.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/data/dataset_spec.h"

namespace towers::test {

using Bytes = std::vector<std::uint8_t>;

// The value of channel c of pixel (y, x) of image `index` in every generated file.
std::uint8_t pixelValue(std::uint64_t seed, std::int64_t index, int y, int x, int c);
// The label of image `index` in every generated file.
int labelValue(std::uint64_t seed, std::int64_t index, int classes);

// An IDX images file: magic 0x00000803, count, rows, cols (big-endian), then the pixels.
Bytes idxImages(std::int64_t count, int rows, int cols, std::uint64_t seed);
// An IDX labels file: magic 0x00000801, count, then one byte per label; with wide, magic
// 0x00000C01 and a big-endian 32-bit integer per label.
Bytes idxLabels(const std::vector<int>& labels, bool wide = false);
std::vector<int> labelsFor(std::int64_t count, int classes, std::uint64_t seed);
// gzip (RFC 1952) of `data`, by zlib.
Bytes gzip(const Bytes& data);

// CIFAR records: 1 label byte (CIFAR-10) or coarse and fine label bytes (CIFAR-100), then the
// 32x32 image planar, R then G then B, each row-major. Coarse labels are fine / 5.
Bytes cifarRecords(std::int64_t first, std::int64_t count, int labelBytes, std::uint64_t seed);
int cifar100Fine(std::uint64_t seed, std::int64_t index);

// Big-endian 32-bit write at `offset` (to corrupt headers).
void putBe32(Bytes& bytes, std::size_t offset, std::uint32_t v);
// The file with its folders (made where missing); std::runtime_error where it cannot be written.
void writeFile(const std::filesystem::path& path, const Bytes& bytes);
void writeText(const std::filesystem::path& path, const std::string& text);
Bytes readFile(const std::filesystem::path& path);

// Whole dataset folders. CIFAR-10: 5 training files of `perBatch` records, a test file of
// `test`; image i of the training set is global index i, test image j is index 1,000,000 + j.
void writeCifar10(const std::filesystem::path& folder, std::int64_t perBatch, std::int64_t test,
                  std::uint64_t seed);
void writeCifar100(const std::filesystem::path& folder, std::int64_t train, std::int64_t test,
                   std::uint64_t seed);
// MNIST-style IDX folder; `gz` writes the .gz forms. Test images are indexed from 1,000,000.
void writeIdxDataset(const std::filesystem::path& folder, std::int64_t train, std::int64_t test,
                     int rows, int cols, bool gz, std::uint64_t seed);
inline constexpr std::int64_t kTestIndexBase = 1000000;

// A folder in the layout of any entry of the dataset table (its reader, file names and classes):
// `perFile` images in every file of each split, class-name files where the entry reads them, IDX
// files gzip-compressed when `gz` (and the entry accepts it). Labels are labelValue's, each within
// its labelling's classes.
void writeDatasetFolder(const engine::DatasetSpec& spec, const std::filesystem::path& folder,
                        std::int64_t perFile, bool gz, std::uint64_t seed);

} // namespace towers::test
