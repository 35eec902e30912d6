// The dataset table. URLs, sizes and MD5s as published (DATASETS.md); the formats as DATASETS.md
// describes them.
#include "engine/data/dataset_spec.h"

#include <algorithm>

#include "engine/data/dataset_manifest.h"
#include "engine/errors.h"

namespace towers::engine {

namespace {

std::vector<std::string> digitNames()
{
    std::vector<std::string> names;
    for (int d = 0; d < 10; ++d) names.push_back(std::to_string(d));
    return names;
}

const std::vector<std::string> kIdxTrain = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"};
const std::vector<std::string> kIdxTest = {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};

std::vector<DatasetSpec> makeTable()
{
    const std::string toronto = "https://www.cs.toronto.edu/~kriz/";
    std::vector<DatasetSpec> table;

    DatasetSpec cifar10;
    cifar10.name = "cifar10";
    cifar10.description =
        "CIFAR-10, binary version: 50,000 + 10,000 colour images 32x32, 10 classes";
    cifar10.folderNames = {"cifar10", "cifar-10-batches-bin", "cifar10/cifar-10-batches-bin"};
    cifar10.reader = DatasetReader::CifarBinary;
    cifar10.trainFiles = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                          "data_batch_4.bin", "data_batch_5.bin"};
    cifar10.testFiles = {"test_batch.bin"};
    cifar10.labelBytes = 1;
    cifar10.labels = {10, {}, "batches.meta.txt", 0};
    cifar10.imageShape = {32, 32, 3};
    cifar10.autoTrainRank = 2;
    cifar10.downloads = {
        toronto,
        {{"cifar-10-binary.tar.gz", "c32a1d4ab5d03f1284b67883e8d87530", 170052171}},
        "cifar-10-batches-bin"};
    table.push_back(cifar10);

    DatasetSpec cifar100;
    cifar100.name = "cifar100";
    cifar100.description =
        "CIFAR-100, binary version: 50,000 + 10,000 colour images 32x32, 100 classes";
    cifar100.folderNames = {"cifar100", "cifar-100-binary", "cifar100/cifar-100-binary"};
    cifar100.reader = DatasetReader::CifarBinary;
    cifar100.trainFiles = {"train.bin"};
    cifar100.testFiles = {"test.bin"};
    cifar100.labelBytes = 2; // coarse, fine
    cifar100.labels = {100, {}, "fine_label_names.txt", 1};
    cifar100.imageShape = {32, 32, 3};
    cifar100.downloads = {
        toronto,
        {{"cifar-100-binary.tar.gz", "03b5dce01913d631647c71ecec9e9cb8", 168513733}},
        "cifar-100-binary"};
    table.push_back(cifar100);

    // The same files, each record's first label byte: the 20 superclasses (Keras's
    // label_mode="coarse"). Its folders are CIFAR-100's: one download serves both.
    DatasetSpec coarse = cifar100;
    coarse.name = "cifar100-coarse";
    coarse.description = "CIFAR-100 by its 20 superclasses: the same 50,000 + 10,000 images";
    coarse.labels = {20, {}, "coarse_label_names.txt", 0};
    table.push_back(coarse);

    // The sizes of the .gz files only size the progress bar before the server answers.
    DatasetSpec mnist;
    mnist.name = "mnist";
    mnist.description = "MNIST: 60,000 + 10,000 handwritten digits 28x28, 10 classes";
    mnist.folderNames = {"mnist"};
    mnist.reader = DatasetReader::Idx;
    mnist.trainFiles = kIdxTrain;
    mnist.testFiles = kIdxTest;
    mnist.gzipAccepted = true;
    mnist.labels = {10, digitNames(), {}, 0};
    mnist.imageShape = {28, 28, 1};
    mnist.mirrorSafe = false; // a mirrored 2 is no digit
    // The seeds' mnist-convnet (meant for MNIST) has 20 million parameters; the small
    // fashion-fast reaches over 99% in a fraction of its time.
    mnist.defaultModel = "fashion-fast";
    mnist.autoTrainRank = 3;
    // The ossci mirror: yann.lecun.com, where MNIST was first published, is often unreachable.
    mnist.downloads = {"https://ossci-datasets.s3.amazonaws.com/mnist/",
                       {{"train-images-idx3-ubyte.gz", "f68b3c2dcbeaaa9fbdd348bbdeb94873", 9912422},
                        {"train-labels-idx1-ubyte.gz", "d53e105ee54ea40749a09fcbcd1e9432", 28881},
                        {"t10k-images-idx3-ubyte.gz", "9fb629c4189551a2d022fa330f9573f3", 1648877},
                        {"t10k-labels-idx1-ubyte.gz", "ec29112dd5afa0611ce80d1b7f02629c", 4542}},
                       {}};
    table.push_back(mnist);

    DatasetSpec fashion;
    fashion.name = "fashion-mnist";
    fashion.description = "Fashion-MNIST: 60,000 + 10,000 clothing images 28x28, 10 classes";
    fashion.folderNames = {"fashion-mnist"};
    fashion.reader = DatasetReader::Idx;
    fashion.trainFiles = kIdxTrain;
    fashion.testFiles = kIdxTest;
    fashion.gzipAccepted = true;
    fashion.labels = {10,
                      {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                       "Sneaker", "Bag", "Ankle boot"},
                      {},
                      0};
    fashion.imageShape = {28, 28, 1};
    fashion.autoTrainRank = 1; // Debian's dataset-fashion-mnist: the one most likely installed
    // The bucket is an S3 website endpoint, which serves plain HTTP only; the MD5 check is what
    // vouches for these bytes.
    fashion.downloads = {
        "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
        {{"train-images-idx3-ubyte.gz", "8d4fb7e6c68d591d4c3dfef9ec88bf0d", 26421880},
         {"train-labels-idx1-ubyte.gz", "25c81989df183df01b3e8a0aad5dffbe", 29515},
         {"t10k-images-idx3-ubyte.gz", "bef4ecab320f06d8554ea6380940ec79", 4422102},
         {"t10k-labels-idx1-ubyte.gz", "bb300cfdad3c16e7a12a480ee83cd310", 5148}},
        {}};
    table.push_back(fashion);

    for (const DatasetSpec& spec : table) validateDatasetSpec(spec);
    return table;
}

std::string joined(const std::vector<std::string>& items)
{
    std::string s;
    for (const std::string& i : items) s += (s.empty() ? "" : ", ") + i;
    return s;
}

// A single path component that cannot climb out of, or hide in, the folder it is put in.
bool isPlainName(const std::string& name)
{
    return !name.empty() && name.front() != '.' && name.find('/') == std::string::npos &&
           name.find('\0') == std::string::npos;
}

// Plain names separated by '/' ("cifar10/cifar-10-batches-bin").
bool isPlainRelativePath(const std::string& path)
{
    std::size_t pos = 0;
    while (true) {
        const std::size_t end = path.find('/', pos);
        if (!isPlainName(path.substr(pos, end == std::string::npos ? end : end - pos)))
            return false;
        if (end == std::string::npos) return true;
        pos = end + 1;
    }
}

bool isHexMd5(const std::string& md5)
{
    return md5.size() == 32 && std::all_of(md5.begin(), md5.end(), [](char c) {
               return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
           });
}

bool endsWith(const std::string& s, const std::string& tail)
{
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

[[noreturn]] void invalid(const DatasetSpec& spec, const std::string& what)
{
    throw InvalidArgument("dataset table, entry '" + spec.name + "': " + what);
}

void checkLabels(const DatasetSpec& spec, const DatasetLabels& l, const char* which)
{
    const std::string w = which;
    // CIFAR's labels are bytes; IDX labels may be 32-bit integers (an import's, past 256).
    const int most = spec.reader == DatasetReader::CifarBinary ? 256 : kMaxImportedClasses;
    if (l.numClasses < 1 || l.numClasses > most)
        invalid(spec, w + " has " + std::to_string(l.numClasses) + " classes, expected 1.." +
                          std::to_string(most) +
                          (spec.reader == DatasetReader::CifarBinary ? " (labels are bytes)" : ""));
    if (l.names.empty() == l.namesFile.empty())
        invalid(spec, w + ": give either the class names or the file that lists them, not " +
                          (l.names.empty() ? "neither" : "both"));
    if (!l.names.empty() && static_cast<int>(l.names.size()) != l.numClasses)
        invalid(spec, w + " lists " + std::to_string(l.names.size()) + " class names for " +
                          std::to_string(l.numClasses) + " classes");
    if (!l.namesFile.empty() && !isPlainName(l.namesFile))
        invalid(spec, w + "'s names file '" + l.namesFile + "' is not a plain file name");
    if (spec.reader == DatasetReader::CifarBinary &&
        (l.labelByte < 0 || l.labelByte >= spec.labelBytes))
        invalid(spec, w + " is in label byte " + std::to_string(l.labelByte) + " of records with " +
                          std::to_string(spec.labelBytes));
}

} // namespace

std::vector<std::string> DatasetSpec::readerFiles() const
{
    std::vector<std::string> files = trainFiles;
    files.insert(files.end(), testFiles.begin(), testFiles.end());
    if (!labels.namesFile.empty()) files.push_back(labels.namesFile);
    return files;
}

std::vector<std::string> DatasetSpec::markerFiles() const
{
    if (trainFiles.empty()) return {};
    if (gzipAccepted) return {trainFiles.front(), trainFiles.front() + ".gz"};
    return {trainFiles.front()};
}

void validateDatasetSpec(const DatasetSpec& spec)
{
    if (!isPlainName(spec.name))
        invalid(spec, "the name must be a plain folder name (no '/', not starting with '.')");
    if (spec.folderNames.empty()) invalid(spec, "no folder names");
    for (const std::string& f : spec.folderNames)
        if (!isPlainRelativePath(f))
            invalid(spec, "folder name '" + f + "' is not a plain relative path");
    if (spec.imageShape.rank() != 3 || spec.imageShape[0] < 1 || spec.imageShape[1] < 1 ||
        spec.imageShape[2] < 1)
        invalid(spec, "the image shape must be [H, W, C], got " + spec.imageShape.str());
    for (const auto* split : {&spec.trainFiles, &spec.testFiles}) {
        const char* which = split == &spec.trainFiles ? "training" : "test";
        if (split->empty()) invalid(spec, std::string("no ") + which + " files");
        for (const std::string& f : *split)
            if (!isPlainName(f))
                invalid(spec, std::string(which) + " file '" + f + "' is not a plain file name");
    }
    switch (spec.reader) {
    case DatasetReader::Idx:
        if (spec.trainFiles.size() != 2 || spec.testFiles.size() != 2)
            invalid(spec, "an IDX split is two files, {images, labels}");
        if (spec.labelBytes != 1)
            invalid(spec, "IDX files hold one label per image, the table says " +
                              std::to_string(spec.labelBytes));
        if (spec.imageShape[2] != 1 && spec.imageShape[2] != 3)
            invalid(spec,
                    "IDX images have 1 or 3 channels, the table says " + spec.imageShape.str());
        break;
    case DatasetReader::CifarBinary:
        if (spec.imageShape != Shape{32, 32, 3})
            invalid(spec, "CIFAR binary records hold 32x32x3 images, the table says " +
                              spec.imageShape.str());
        if (spec.gzipAccepted) invalid(spec, "CIFAR binary files are never gzip-compressed");
        if (spec.labelBytes < 1 || spec.labelBytes > 2)
            invalid(spec, "CIFAR records have 1 or 2 label bytes, the table says " +
                              std::to_string(spec.labelBytes));
        break;
    }
    checkLabels(spec, spec.labels, "the labelling");
    if (spec.autoTrainRank < 0)
        invalid(spec, "autoTrainRank is " + std::to_string(spec.autoTrainRank) +
                          ", expected 0 (never) or more");

    const DatasetDownloads& d = spec.downloads;
    if (d.files.empty()) {
        if (!d.baseUrl.empty() || !d.archiveRoot.empty())
            invalid(spec, "a download URL or archive folder, but no files to download");
        return;
    }
    if (!(d.baseUrl.starts_with("https://") || d.baseUrl.starts_with("http://")) ||
        !d.baseUrl.ends_with("/"))
        invalid(spec, "the download URL '" + d.baseUrl +
                          "' must start with http:// or https:// and end with '/'");
    for (const PublishedFile& f : d.files) {
        if (!isPlainName(f.name))
            invalid(spec, "published file '" + f.name + "' is not a plain file name");
        if (!isHexMd5(f.md5))
            invalid(spec, "published file '" + f.name +
                              "' has no valid MD5 (32 lowercase hex digits), got '" + f.md5 + "'");
        if (std::count_if(d.files.begin(), d.files.end(),
                          [&](const PublishedFile& g) { return g.name == f.name; }) > 1)
            invalid(spec, "published file '" + f.name + "' is listed twice");
    }
    if (!d.archiveRoot.empty()) {
        if (!isPlainName(d.archiveRoot))
            invalid(spec, "archive folder '" + d.archiveRoot + "' is not a plain folder name");
        if (d.files.size() != 1 || !endsWith(d.files.front().name, ".tar.gz"))
            invalid(spec, "an archive download is exactly one .tar.gz file");
        return;
    }
    // The published files are the folder: each file the reader needs must be one of them.
    for (const std::string& needed : spec.readerFiles()) {
        const bool published =
            std::any_of(d.files.begin(), d.files.end(), [&](const PublishedFile& f) {
                return f.name == needed || (spec.gzipAccepted && f.name == needed + ".gz");
            });
        if (!published)
            invalid(spec, "the reader needs '" + needed + "'" +
                              (spec.gzipAccepted ? " (or '" + needed + ".gz')" : std::string()) +
                              ", which is not among the published files");
    }
}

const char* imageFitName(ImageFit fit)
{
    switch (fit) {
    case ImageFit::Squash:
        return "squash";
    case ImageFit::Fill:
        return "fill";
    case ImageFit::Crop:
        break;
    }
    return "crop";
}

ImageFit imageFitFromName(const std::string& name)
{
    for (const ImageFit fit : {ImageFit::Crop, ImageFit::Squash, ImageFit::Fill})
        if (name == imageFitName(fit)) return fit;
    throw InvalidArgument("unknown image fit '" + name + "' (known: crop, squash, fill)");
}

const std::vector<DatasetSpec>& datasetSpecs()
{
    static const std::vector<DatasetSpec> table = makeTable();
    return table;
}

const DatasetSpec* findDatasetSpec(const std::string& name)
{
    for (const DatasetSpec& spec : datasetSpecs())
        if (spec.name == name) return &spec;
    return nullptr;
}

const DatasetSpec& datasetSpec(const std::string& name)
{
    if (const DatasetSpec* spec = findDatasetSpec(name)) return *spec;
    throw UnknownName("unknown dataset \"" + name + "\"; the known datasets are " +
                      joined(knownDatasets()));
}

const std::vector<std::string>& knownDatasets()
{
    static const std::vector<std::string> names = [] {
        std::vector<std::string> n;
        for (const DatasetSpec& spec : datasetSpecs()) n.push_back(spec.name);
        return n;
    }();
    return names;
}

void requireKnownDataset(const std::string& name)
{
    datasetSpec(name);
}

Shape datasetImageShape(const std::string& name)
{
    return datasetSpec(name).imageShape;
}

std::vector<std::string> datasetFolderNames(const std::string& name)
{
    if (const DatasetSpec* spec = findDatasetSpec(name)) return spec->folderNames;
    if (isImportedDatasetName(name)) return {name}; // a dataset imported from a folder of images
    return datasetSpec(name).folderNames;           // UnknownName listing the datasets
}

std::vector<std::string> autoTrainDatasets()
{
    std::vector<const DatasetSpec*> ranked;
    for (const DatasetSpec& spec : datasetSpecs())
        if (spec.autoTrainRank > 0) ranked.push_back(&spec);
    std::stable_sort(ranked.begin(), ranked.end(), [](const DatasetSpec* a, const DatasetSpec* b) {
        return a->autoTrainRank < b->autoTrainRank;
    });
    std::vector<std::string> names;
    for (const DatasetSpec* spec : ranked) names.push_back(spec->name);
    return names;
}

} // namespace towers::engine
