#pragma once
// IDX files (MNIST, Fashion-MNIST), plain or gzip: the file-level entry points used by discovery
// and loading. The byte-level parsers are declared in dataset.h (they are also fuzzed).
#include <cstdint>
#include <filesystem>
#include <vector>

#include "engine/data/dataset.h"

namespace towers::engine {

// What an IDX file's header says, once the header and the file size have been checked.
struct IdxHeader
{
    std::int64_t count = 0;
    std::int64_t rows = 0, cols = 0; // 0 for a labels file
    std::int64_t channels = 0;       // 1, or 3 for a 4-dimensional images file; 0 for labels
    bool gzip = false;
};

// Validate the header and the size without reading the data (for gzip: the header is inflated
// and the stream's length trailer is compared with what the header announces). Throw IoError.
IdxHeader inspectIdxImages(const std::filesystem::path& path);
IdxHeader inspectIdxLabels(const std::filesystem::path& path);

// Read and validate a whole file.
ImageSet readIdxImages(const std::filesystem::path& path);
std::vector<std::int32_t> readIdxLabels(const std::filesystem::path& path, int numClasses);

} // namespace towers::engine
