#pragma once
// Datasets made from the user's own images (`towers-cli import`, the Data page's Import): a folder
// named after the dataset that holds the four IDX files under MNIST's names (images of 1 channel,
// or of 3 as 4-dimensional IDX, channels last) and a manifest, kDatasetManifest:
//
//   {"format": "towers-dataset", "version": 1, "imageShape": [32, 32, 3],
//    "classes": ["cat", "dog"], "mirrorSafe": true, "fit": "crop", "description": "...",
//    "source": "...",
//    "counts": {"train": 900, "test": 100}, "created": "2026-11-28T03:00:00Z"}
//
// readDatasetManifest turns it into a DatasetSpec, so discovery, loading, the recipes and every
// listing treat such a dataset as one of the table's (engine/data/dataset_spec.h).
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "engine/data/dataset_spec.h"
#include "engine/errors.h"

namespace towers::engine {

inline constexpr const char* kDatasetManifest = "towers-dataset.json";
// Up to 256 classes the IDX labels are bytes, beyond that 32-bit integers. 10,000 classes: more
// than any classification set of small images (ImageNet's 1,000, downsampled to 32x32).
inline constexpr int kMaxImportedClasses = 10000;
// A manifest larger than this is no manifest (10,000 class names of 100 bytes are 1 MB).
inline constexpr std::uintmax_t kMaxManifestBytes = 4 << 20;

// What a manifest records besides the spec.
struct ManifestExtras
{
    std::string source;  // the folder the images came from
    std::string created; // ISO 8601 UTC
    std::int64_t trainCount = 0, testCount = 0;
};

// Whether `name` can name an imported dataset: 1 to 64 of a-z, 0-9, '-', '_' and '.', starting
// with a letter or digit, and not the name of a dataset of the table.
bool isImportedDatasetName(const std::string& name, std::string* why = nullptr);

// The spec of an imported dataset: IDX files of MNIST's names, the classes listed, no downloads.
// Throws InvalidArgument (validateDatasetSpec's, or a bad name, shape or class list).
// `fit`: how the image files were brought to imageShape (a manifest without "fit": Crop).
DatasetSpec importedDatasetSpec(const std::string& name, const Shape& imageShape,
                                std::vector<std::string> classes, bool mirrorSafe,
                                const std::string& description, ImageFit fit = ImageFit::Crop);

// The manifest's text for `spec` (an importedDatasetSpec) and `extras`.
std::string datasetManifestJson(const DatasetSpec& spec, const ManifestExtras& extras);

// The imported dataset whose manifest is in `folder` (named after the folder): nullopt when the
// folder holds no manifest; IoError naming the manifest when it cannot be read or says something
// invalid. `extras`, when given, receives the rest of the manifest.
std::optional<DatasetSpec> readDatasetManifest(const std::filesystem::path& folder,
                                               ManifestExtras* extras = nullptr);

// The imported datasets along `searchPath`: each sub-folder of a search-path folder that holds a
// manifest, the first of each name (a name of the table's is never an imported dataset). Folders
// whose manifest is bad are left out (loading one by name says why).
std::vector<DatasetSpec> importedDatasetSpecs(const std::vector<std::filesystem::path>& searchPath);
// Their names.
std::vector<std::string> importedDatasetNames(const std::vector<std::filesystem::path>& searchPath);

// The UnknownName for a dataset `name` that is none of the table's nor of `imported`: it lists
// them, then `hint` (where Towers looked, how to make one).
UnknownName unknownDataset(const std::string& name, const std::vector<std::string>& imported,
                           const std::string& hint);

// The spec of `name`: the table's, else the manifest of the first folder of that name along
// `searchPath` that has one. Throws UnknownName listing the table's datasets and the imported ones
// found, IoError when the folder's manifest is bad.
DatasetSpec datasetSpecAlong(const std::string& name,
                             const std::vector<std::filesystem::path>& searchPath);

} // namespace towers::engine
