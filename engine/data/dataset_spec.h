#pragma once
// The datasets Towers knows, as one table: for each, its name, the folders it is found under, its
// files per split and how they are read, its classes and image shape, and where it is published
// (URLs and MD5s, the facts of DATASETS.md). Discovery, loading, the recipes' choice of a model,
// `towers-cli train`, `datasets` and `download`, and the desktop application's Data page all read
// this table; none of them names a dataset. Adding a dataset is adding an entry to kDatasetSpecs
// in dataset_spec.cpp (see docs/extending.md).
#include <cstdint>
#include <string>
#include <vector>

#include "engine/tensor/shape.h"

namespace towers::engine {

// How a dataset's files are read.
enum class DatasetReader
{
    // IDX (MNIST, Fashion-MNIST): each split is an images file (magic 0x00000803) and a labels
    // file (0x00000801); DatasetSplitFiles::files is {images, labels}.
    Idx,
    // CIFAR binary records (CIFAR-10, CIFAR-100): `labelBytes` label bytes then 32x32x3 planar
    // pixels; DatasetSplitFiles::files are record files, read in order.
    CifarBinary,
};

// How an image file of another size becomes one of a dataset's images (towers-cli import --fit),
// and so how classify brings a file to the images a checkpoint learnt from: NVIDIA DIGITS' resize
// modes. Crop: the centre cut to the images' aspect ratio, then scaled (torchvision's Resize and
// CenterCrop); Squash: the whole image scaled to the size, its aspect ratio not kept; Fill: the
// whole image scaled to fit inside, its aspect ratio kept, the rest black.
enum class ImageFit
{
    Crop,
    Squash,
    Fill
};
// "crop", "squash" or "fill", and back (InvalidArgument naming the choices).
const char* imageFitName(ImageFit fit);
ImageFit imageFitFromName(const std::string& name);

// One way of labelling a dataset's images.
struct DatasetLabels
{
    int numClasses = 0;
    // The class names: fixed here, or read from `namesFile` (one per line) in the dataset's folder.
    std::vector<std::string> names;
    std::string namesFile;
    // CifarBinary: which of a record's label bytes holds this label (0 first; CIFAR-100's fine
    // label is byte 1).
    int labelByte = 0;
};

// One file as published: fetched from DatasetDownloads::baseUrl + name and checked by its MD5.
struct PublishedFile
{
    std::string name;
    std::string md5;        // 32 lowercase hex digits
    std::int64_t size = -1; // bytes when known (sizes progress bars before the server answers)
};

// Where a dataset is published, and what the published files are.
struct DatasetDownloads
{
    std::string baseUrl; // every file is at baseUrl + its name
    std::vector<PublishedFile> files;
    // Empty: the published files, as they are, make up the dataset's folder (their names must
    // then be the reader's files, or the reader's files + ".gz" where gzip is accepted).
    // Set: files is one .tar.gz, and its folder of this name holds the reader's files.
    std::string archiveRoot;
};

struct DatasetSpec
{
    std::string name;        // "cifar10": the name users type
    std::string description; // one line for listings
    // The sub-folders of a search-path folder that may hold it, in the order they are tried (the
    // first is where downloads put it, usually the name; then e.g. the archive's own
    // "cifar-10-batches-bin"). Two entries that read the same files another way (CIFAR-100's fine
    // and coarse labels) share their folders, so one download serves both.
    std::vector<std::string> folderNames;

    DatasetReader reader = DatasetReader::Idx;
    std::vector<std::string> trainFiles, testFiles; // names within the dataset's folder
    // Idx: each file may also be present gzip-compressed as <name>.gz (the plain one is read when
    // both are there). CifarBinary files are never compressed.
    bool gzipAccepted = false;
    int labelBytes = 1;   // CifarBinary: label bytes per record (2 for CIFAR-100: coarse, fine)
    DatasetLabels labels; // the classes loadDataset gives

    Shape imageShape; // [H, W, C] of the published images
    // Whether a left-right mirror keeps an image's class (clothes, objects: yes; digits: no). The
    // recipes flip training images only where it does.
    bool mirrorSafe = true;
    // How image files were brought to imageShape (an imported dataset's --fit); the table's
    // datasets are published at their size.
    ImageFit imageFit = ImageFit::Crop;
    // The model `towers-cli train --dataset NAME` trains with when none is named. Empty: the first
    // registered model meant for this dataset (ModelInfo::defaultDataset), if any.
    std::string defaultModel;
    // `towers-cli train` with no --dataset trains the first found of the datasets that have a
    // rank, the lowest rank first; 0: never chosen that way.
    int autoTrainRank = 0;

    DatasetDownloads downloads; // no files: Towers cannot download it

    // Every file the reader needs (the split files, then the class-names file), as named in the
    // folder (without ".gz").
    std::vector<std::string> readerFiles() const;
    // The files whose presence marks a folder as holding this dataset's files directly: the first
    // training file (and its .gz form where gzip is accepted).
    std::vector<std::string> markerFiles() const;
};

// The table, in the order listings show it: cifar10, cifar100, cifar100-coarse, mnist,
// fashion-mnist.
const std::vector<DatasetSpec>& datasetSpecs();
// The entry called `name`, or nullptr.
const DatasetSpec* findDatasetSpec(const std::string& name);
// The entry called `name`; throws UnknownName listing the known datasets.
const DatasetSpec& datasetSpec(const std::string& name);
// Checks that an entry is coherent: a plain name, folder names, files for both splits in the
// reader's layout, classes (names or a names file, matching the count), an image shape the reader
// gives, published files with names, MD5s and a URL that yield the reader's files. Throws
// InvalidArgument naming the dataset and what is wrong.
void validateDatasetSpec(const DatasetSpec& spec);

// The dataset names Towers knows, in table order: "cifar10", "cifar100", "cifar100-coarse",
// "mnist", "fashion-mnist".
const std::vector<std::string>& knownDatasets();
// Throws UnknownName listing the known datasets.
void requireKnownDataset(const std::string& name);
// The image shape [H, W, C] of a known dataset: 32x32x3 for CIFAR, 28x28x1 for the IDX sets.
Shape datasetImageShape(const std::string& name);
// The sub-folder names, in the order they are tried, under which a search-path folder may hold
// `name` (e.g. "cifar10", "cifar-10-batches-bin", "cifar10/cifar-10-batches-bin"); for a name of
// no table entry that can name an imported dataset (dataset_manifest.h), the folder of that name.
// UnknownName otherwise.
std::vector<std::string> datasetFolderNames(const std::string& name);
// The datasets `towers-cli train` tries, in order, when no --dataset is given (autoTrainRank).
std::vector<std::string> autoTrainDatasets();

} // namespace towers::engine
