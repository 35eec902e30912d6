#pragma once
// Datasets on disk: the readers for the real file formats (CIFAR-10/100 binary records, IDX for
// MNIST and Fashion-MNIST, plain or gzip), validation, and discovery along a search path.
// Every reader validates sizes, magic numbers, dimensions, counts and label ranges before it
// trusts a byte; a bad file throws IoError naming the file, the record or byte offset and what was
// expected. No reader ever reads out of bounds, whatever the input.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/data/dataset_spec.h"
#include "engine/errors.h"
#include "engine/tensor/shape.h"

namespace towers::engine {

// No folder of the search path holds the dataset `dataset()`; the message says where it looked and
// why each folder did not do. The programs add how to get it (a download, an import).
class TOWERS_VISIBLE DatasetNotFound : public IoError
{
public:
    DatasetNotFound(std::string dataset, const std::string& message)
        : IoError(message), m_dataset(std::move(dataset))
    {
    }
    const std::string& dataset() const { return m_dataset; }

private:
    std::string m_dataset;
};

// Labelled 8-bit images held in memory, HWC per image (channels last), images back to back.
struct ImageSet
{
    std::int64_t count = 0, height = 0, width = 0, channels = 0;
    std::vector<std::uint8_t> pixels; // count * height * width * channels
    std::vector<std::int32_t> labels; // count, each in [0, classes)

    std::int64_t imageBytes() const { return height * width * channels; }
    const std::uint8_t* image(std::int64_t i) const { return pixels.data() + i * imageBytes(); }
    Shape imageShape() const { return {height, width, channels}; } // [H, W, C]
};

// A whole dataset: its canonical name, where it was read from, class names, both splits.
struct Dataset
{
    std::string name;                    // its DatasetSpec's name, e.g. "cifar10"
    std::filesystem::path location;      // the folder the files were read from
    std::vector<std::string> classNames; // index = label
    ImageSet train, test;
    // Whether a left-right mirror keeps an image's class (DatasetSpec::mirrorSafe), as loadDataset
    // found it; the recipes read the table's entry for a dataset of the table.
    bool mirrorSafe = false;
    // How image files were brought to the images' size (DatasetSpec::imageFit): what classify
    // does to a file for a checkpoint trained on it.
    ImageFit imageFit = ImageFit::Crop;
};

// How many images of `set` each of `classes` classes has (labels outside are not counted).
std::vector<std::int64_t> classCounts(const ImageSet& set, std::size_t classes);

// The largest and the smallest of classCounts (the first of equals), for the sentence the Data
// page and `towers-cli datasets NAME` say under the counts.
struct ClassBalance
{
    std::size_t largest = 0, smallest = 0; // classes
    std::int64_t mostImages = 0, fewestImages = 0;
    // The classes that have images but less than half the largest's (small()): those that
    // sampling the classes equally (TrainConfig::sampling "balanced") would show more often; a
    // class without any it cannot help.
    std::int64_t smallClasses = 0;
    bool even() const { return mostImages == fewestImages; }
    // The largest's images over the smallest's; 0 when the smallest has none.
    double ratio() const
    {
        return fewestImages > 0 ? double(mostImages) / double(fewestImages) : 0;
    }
    // A class with less than half the largest's images: the network sees it less often.
    bool small(std::int64_t images) const { return 2 * images < mostImages; }
};
// nullopt for no classes.
std::optional<ClassBalance> classBalance(const std::vector<std::int64_t>& counts);

// What discovery found, without loading the pixels (headers are validated, sizes checked).
struct DatasetInfo
{
    std::string name;
    std::filesystem::path location;
    std::int64_t trainCount = 0, testCount = 0;
    Shape imageShape; // [H, W, C]
    std::vector<std::string> classNames;
    ImageFit imageFit = ImageFit::Crop; // DatasetSpec::imageFit
};

// The dataset names, their folders, files and classes: engine/data/dataset_spec.h (knownDatasets,
// requireKnownDataset, datasetImageShape, datasetFolderNames), included above.

// The default search path, in order: $TOWERS_DATA (if set; may hold several folders separated
// by ':'), the user's data directory ($XDG_DATA_HOME or ~/.local/share, then "towers/datasets"),
// and /usr/share/datasets (where Debian's dataset-fashion-mnist puts fashion-mnist/).
std::vector<std::filesystem::path> defaultSearchPath();

// Looks for `name` under each folder of `searchPath`: a folder holds one sub-folder per dataset,
// under one of its DatasetSpec::folderNames ("cifar10" or the archive's own
// "cifar-10-batches-bin", ..., "mnist", "fashion-mnist"). Returns the first folder whose files are
// present and whose headers validate; nullopt when none is found. Folders that exist but hold bad
// files are skipped here (loadDataset on them reports why).
std::optional<DatasetInfo> findDataset(const std::string& name,
                                       const std::vector<std::filesystem::path>& searchPath);
// Every known dataset found along `searchPath` (the first location of each).
std::vector<DatasetInfo> discoverDatasets(const std::vector<std::filesystem::path>& searchPath);
// Reads the headers of the dataset `name` in `folder` (the folder that holds the files).
DatasetInfo inspectDataset(const std::string& name, const std::filesystem::path& folder);

// The user's own dataset folder, where downloads go: $XDG_DATA_HOME/towers/datasets, or
// ~/.local/share/towers/datasets when XDG_DATA_HOME is unset or not absolute (the XDG rule).
// Empty when neither XDG_DATA_HOME nor HOME is usable.
std::filesystem::path userDatasetDirectory();
// Reads and validates a whole dataset from `folder` (the folder that holds the files), as its
// DatasetSpec says (reader, files, classes).
Dataset loadDataset(const std::string& name, const std::filesystem::path& folder);
// findDataset, then loadDataset; throws DatasetNotFound saying where it looked when nothing is
// found.
Dataset loadDataset(const std::string& name, const std::vector<std::filesystem::path>& searchPath);
// Where `folder`, a folder a user named, holds `name`: a sub-folder of datasetFolderNames(name),
// or the dataset's files directly in it. nullopt when it holds neither, with the reason in `why`
// ("... holds no fashion-mnist: neither a fashion-mnist/ folder nor its files (...) directly in
// it", "... does not exist"). Opens no file: whether the files are intact is loadDataset's to say.
std::optional<std::filesystem::path> datasetFolderIn(const std::string& name,
                                                     const std::filesystem::path& folder,
                                                     std::string* why = nullptr);
// What a user who names a data folder expects: when `preferred` (may be empty) holds `name`
// (datasetFolderIn), that folder is loaded and its errors reported (a damaged file there is never
// silently passed over for another copy); otherwise loadDataset(name, searchPath).
Dataset loadDatasetPreferring(const std::string& name, const std::filesystem::path& preferred,
                              const std::vector<std::filesystem::path>& searchPath);

// --- the format readers (also used by the fuzzers) ---
// CIFAR-10 binary records: 1 label byte then 3,072 bytes (1,024 R, 1,024 G, 1,024 B, each 32x32
// row-major). `labelBytes` is 2 for CIFAR-100 (coarse, fine): `fine` picks which label is kept.
// The bytes are converted to HWC. `what` names the source in error messages.
ImageSet parseCifarRecords(const std::uint8_t* data, std::size_t size, int labelBytes, bool fine,
                           int numClasses, const std::string& what);
// IDX images (magic 0x00000803, or 0x00000804 with channels) and labels (0x00000801 bytes, or
// 0x00000C01 big-endian 32-bit integers), big-endian headers; gzip-compressed input (magic 1f 8b)
// is inflated first (zlib), with the inflated size bounded.
ImageSet parseIdxImages(const std::vector<std::uint8_t>& bytes, const std::string& what);
std::vector<std::int32_t> parseIdxLabels(const std::vector<std::uint8_t>& bytes, int numClasses,
                                         const std::string& what);

} // namespace towers::engine
