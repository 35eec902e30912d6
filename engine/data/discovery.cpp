// Which datasets exist where: the search path, the folder layout, header-only inspection, and
// loading a whole dataset with every file validated; what each dataset's files are is its entry
// in the dataset table (dataset_spec.cpp).
#include <algorithm>
#include <cstdlib>
#include <system_error>

#include "engine/data/cifar_reader.h"
#include "engine/data/dataset.h"
#include "engine/data/dataset_manifest.h"
#include "engine/data/idx_reader.h"

namespace towers::engine {

namespace fs = std::filesystem;

namespace {

// A file of `spec` in `folder`. For a reader that accepts gzip, the plain file (preferred: no
// inflation) or <name>.gz.
fs::path datasetFile(const DatasetSpec& spec, const fs::path& folder, const std::string& base)
{
    if (!spec.gzipAccepted) return folder / base;
    std::error_code ec;
    const fs::path plain = folder / base;
    if (fs::is_regular_file(plain, ec)) return plain;
    const fs::path gz = folder / (base + ".gz");
    if (fs::is_regular_file(gz, ec)) return gz;
    for (const fs::path& p : {plain, gz})
        if (fs::exists(p, ec) && !fs::is_regular_file(p, ec))
            throw IoError(p.string() + ": " +
                          (fs::is_directory(p, ec) ? "a folder" : "not a regular file") +
                          ", where the IDX file " + base + " (or " + base + ".gz) belongs");
    throw IoError(plain.string() + ": file not found (nor " + base + ".gz)");
}

std::vector<fs::path> datasetFiles(const DatasetSpec& spec, const fs::path& folder,
                                   const std::vector<std::string>& names)
{
    std::vector<fs::path> files;
    for (const std::string& n : names) files.push_back(datasetFile(spec, folder, n));
    return files;
}

// An IDX split: {images, labels}.
struct IdxSplit
{
    fs::path images, labels;
};

struct IdxFiles
{
    IdxSplit train, test;
};

// Every IDX file is located before any is read, so a missing one is reported first.
IdxFiles idxFiles(const DatasetSpec& spec, const fs::path& folder)
{
    const std::vector<fs::path> train = datasetFiles(spec, folder, spec.trainFiles);
    const std::vector<fs::path> test = datasetFiles(spec, folder, spec.testFiles);
    return {{train[0], train[1]}, {test[0], test[1]}};
}

void requireSameCount(std::int64_t images, const fs::path& imagesPath, std::int64_t labels,
                      const fs::path& labelsPath)
{
    if (images != labels)
        throw IoError(labelsPath.string() + ": " + std::to_string(labels) + " labels, but " +
                      imagesPath.string() + " holds " + std::to_string(images) + " images");
}

void requireSameShape(const Shape& train, const Shape& test, const fs::path& testPath)
{
    if (train != test)
        throw IoError(testPath.string() + ": test images are " + test.str() +
                      " but the training images are " + train.str());
}

ImageSet readCifarFiles(const std::vector<fs::path>& files, int labelBytes, bool fine,
                        int numClasses)
{
    // Sizes first (cheap, and a wrong size is reported before anything is read), then reserve.
    std::int64_t total = 0;
    for (const fs::path& f : files) total += inspectCifarFile(f, labelBytes);
    ImageSet set;
    set.pixels.reserve(static_cast<std::size_t>(total) * kCifarImageBytes);
    set.labels.reserve(static_cast<std::size_t>(total));
    for (const fs::path& f : files) readCifarFile(f, labelBytes, fine, numClasses, set);
    return set;
}

std::vector<std::string> classNames(const DatasetLabels& labels, const fs::path& folder)
{
    if (!labels.namesFile.empty())
        return readClassNames(folder / labels.namesFile, labels.numClasses);
    return labels.names;
}

// CIFAR records hold at most two label bytes; the reader keeps the first (fine = false) or the
// second (fine = true).
bool cifarFine(const DatasetLabels& labels)
{
    return labels.labelByte == 1;
}

// Reads `spec`'s files in `folder` with its labelling.
Dataset load(const DatasetSpec& spec, const fs::path& folder)
{
    const DatasetLabels& labels = spec.labels;
    Dataset d;
    d.name = spec.name;
    d.location = folder;
    d.mirrorSafe = spec.mirrorSafe;
    d.imageFit = spec.imageFit;
    const int classes = labels.numClasses;
    switch (spec.reader) {
    case DatasetReader::CifarBinary: {
        d.classNames = classNames(labels, folder);
        const bool fine = cifarFine(labels);
        d.train = readCifarFiles(datasetFiles(spec, folder, spec.trainFiles), spec.labelBytes, fine,
                                 classes);
        d.test = readCifarFiles(datasetFiles(spec, folder, spec.testFiles), spec.labelBytes, fine,
                                classes);
        return d;
    }
    case DatasetReader::Idx: {
        const IdxFiles f = idxFiles(spec, folder);
        d.classNames = classNames(labels, folder);
        d.train = readIdxImages(f.train.images);
        d.train.labels = readIdxLabels(f.train.labels, classes);
        requireSameCount(d.train.count, f.train.images,
                         static_cast<std::int64_t>(d.train.labels.size()), f.train.labels);
        d.test = readIdxImages(f.test.images);
        d.test.labels = readIdxLabels(f.test.labels, classes);
        requireSameCount(d.test.count, f.test.images,
                         static_cast<std::int64_t>(d.test.labels.size()), f.test.labels);
        requireSameShape(d.train.imageShape(), d.test.imageShape(), f.test.images);
        return d;
    }
    }
    throw InvalidArgument("dataset " + spec.name + ": unknown reader");
}

// The spec of `name` for the files in `folder`: the table's, else the manifest there (a dataset
// imported from a folder of images, named after its folder). IoError when neither says.
DatasetSpec specIn(const std::string& name, const fs::path& folder)
{
    if (const DatasetSpec* spec = findDatasetSpec(name)) return *spec;
    if (auto spec = readDatasetManifest(folder)) {
        if (spec->name == name) return *spec;
        throw IoError(folder.string() + " holds the imported dataset " + spec->name + ", not " +
                      name);
    }
    throw unknownDataset(name, {},
                         "nor is " + (folder / kDatasetManifest).string() +
                             " there, the manifest of a dataset made by towers-cli import");
}

std::string envString(const char* name)
{
    const char* v = std::getenv(name);
    return v ? std::string(v) : std::string();
}

// inspectDataset, or why the folder does not hold a valid `name`.
std::optional<DatasetInfo> tryInspect(const std::string& name, const fs::path& folder,
                                      std::string& why)
{
    try {
        return inspectDataset(name, folder);
    } catch (const IoError& e) {
        why = e.what();
        return std::nullopt;
    }
}

// findDataset's walk, collecting why each folder was passed over.
std::optional<DatasetInfo> find(const std::string& name, const std::vector<fs::path>& searchPath,
                                std::vector<std::string>& reasons)
{
    const std::vector<std::string> subfolders = datasetFolderNames(name); // UnknownName
    for (const fs::path& dir : searchPath) {
        bool any = false;
        for (const std::string& sub : subfolders) {
            std::error_code ec;
            const fs::path folder = dir / sub;
            if (!fs::is_directory(folder, ec)) continue;
            any = true;
            std::string why;
            if (auto info = tryInspect(name, folder, why)) return info;
            reasons.push_back(why);
        }
        if (!any) {
            std::string names;
            for (const std::string& sub : subfolders) names += (names.empty() ? "" : ", ") + sub;
            reasons.push_back(dir.string() + ": no " + names + " folder");
        }
    }
    return std::nullopt;
}

} // namespace

fs::path userDatasetDirectory()
{
    const std::string xdg = envString("XDG_DATA_HOME");
    if (!xdg.empty() && fs::path(xdg).is_absolute()) return fs::path(xdg) / "towers" / "datasets";
    const std::string home = envString("HOME");
    if (!home.empty()) return fs::path(home) / ".local" / "share" / "towers" / "datasets";
    return {};
}

std::vector<fs::path> defaultSearchPath()
{
    std::vector<fs::path> path;
    const std::string towersData = envString("TOWERS_DATA");
    std::size_t pos = 0;
    while (pos <= towersData.size() && !towersData.empty()) {
        std::size_t end = towersData.find(':', pos);
        if (end == std::string::npos) end = towersData.size();
        if (end > pos) path.emplace_back(towersData.substr(pos, end - pos));
        pos = end + 1;
    }
    if (fs::path user = userDatasetDirectory(); !user.empty()) path.push_back(user);
    path.emplace_back("/usr/share/datasets");
    return path;
}

DatasetInfo inspectDataset(const std::string& name, const fs::path& folder)
{
    const DatasetSpec spec = specIn(name, folder);
    DatasetInfo info;
    info.name = name;
    info.location = folder;
    info.imageFit = spec.imageFit;
    switch (spec.reader) {
    case DatasetReader::CifarBinary:
        info.classNames = classNames(spec.labels, folder);
        for (const fs::path& f : datasetFiles(spec, folder, spec.trainFiles))
            info.trainCount += inspectCifarFile(f, spec.labelBytes);
        for (const fs::path& f : datasetFiles(spec, folder, spec.testFiles))
            info.testCount += inspectCifarFile(f, spec.labelBytes);
        info.imageShape = {kCifarSide, kCifarSide, 3};
        break;
    case DatasetReader::Idx: {
        const IdxFiles f = idxFiles(spec, folder);
        const IdxHeader trainImages = inspectIdxImages(f.train.images);
        const IdxHeader trainLabels = inspectIdxLabels(f.train.labels);
        const IdxHeader testImages = inspectIdxImages(f.test.images);
        const IdxHeader testLabels = inspectIdxLabels(f.test.labels);
        requireSameCount(trainImages.count, f.train.images, trainLabels.count, f.train.labels);
        requireSameCount(testImages.count, f.test.images, testLabels.count, f.test.labels);
        info.imageShape = {trainImages.rows, trainImages.cols, trainImages.channels};
        requireSameShape(info.imageShape,
                         Shape{testImages.rows, testImages.cols, testImages.channels},
                         f.test.images);
        info.trainCount = trainImages.count;
        info.testCount = testImages.count;
        info.classNames = classNames(spec.labels, folder);
        break;
    }
    }
    return info;
}

std::optional<DatasetInfo> findDataset(const std::string& name,
                                       const std::vector<fs::path>& searchPath)
{
    std::vector<std::string> reasons;
    return find(name, searchPath, reasons);
}

std::vector<DatasetInfo> discoverDatasets(const std::vector<fs::path>& searchPath)
{
    std::vector<DatasetInfo> found;
    for (const std::string& name : knownDatasets())
        if (auto info = findDataset(name, searchPath)) found.push_back(std::move(*info));
    for (const std::string& name : importedDatasetNames(searchPath))
        if (auto info = findDataset(name, searchPath)) found.push_back(std::move(*info));
    return found;
}

Dataset loadDataset(const std::string& name, const fs::path& folder)
{
    const DatasetSpec spec = specIn(name, folder);
    Dataset d = load(spec, folder);
    // An imported dataset's files must be what its manifest says (the table's sets are read as
    // their files are).
    if (!findDatasetSpec(name) && d.train.imageShape() != spec.imageShape)
        throw IoError((folder / spec.trainFiles[0]).string() + ": images of " +
                      d.train.imageShape().str() + ", but " + kDatasetManifest + " says " +
                      spec.imageShape.str());
    return d;
}

Dataset loadDataset(const std::string& name, const std::vector<fs::path>& searchPath)
{
    std::vector<std::string> reasons;
    const std::optional<DatasetInfo> info = find(name, searchPath, reasons);
    if (!info) {
        std::string where;
        for (const std::string& r : reasons) where += "\n  " + r;
        if (searchPath.empty()) where = " (the search path is empty)";
        throw DatasetNotFound(name, "dataset \"" + name + "\" not found; looked in:" + where);
    }
    return loadDataset(name, info->location);
}

std::optional<fs::path> datasetFolderIn(const std::string& name, const fs::path& folder,
                                        std::string* why)
{
    const std::vector<std::string> subfolders = datasetFolderNames(name); // UnknownName
    std::error_code ec;
    if (!fs::is_directory(folder, ec)) {
        if (why)
            *why =
                folder.string() + (fs::exists(folder, ec) ? " is not a folder" : " does not exist");
        return std::nullopt;
    }
    const DatasetSpec* table = findDatasetSpec(name);
    const std::vector<std::string> markers =
        table ? table->markerFiles() : std::vector<std::string>{kDatasetManifest};
    for (const std::string& sub : subfolders)
        if (fs::is_directory(folder / sub, ec)) return folder / sub;
    const bool named = table || fs::absolute(folder, ec).lexically_normal().filename() == name;
    for (const std::string& marker : markers)
        if (named && fs::exists(folder / marker, ec))
            return folder; // the files themselves, directly in it
    if (why) {
        std::string names, files;
        for (const std::string& sub : subfolders) names += (names.empty() ? "" : ", ") + sub + "/";
        for (const std::string& marker : markers) files += (files.empty() ? "" : " or ") + marker;
        *why = folder.string() + " holds no " + name + ": neither a " + names +
               " folder nor its files (" + files + ") directly in it";
    }
    return std::nullopt;
}

Dataset loadDatasetPreferring(const std::string& name, const fs::path& preferred,
                              const std::vector<fs::path>& searchPath)
{
    if (!preferred.empty())
        if (const auto folder = datasetFolderIn(name, preferred)) return loadDataset(name, *folder);
    return loadDataset(name, searchPath);
}

std::vector<std::int64_t> classCounts(const ImageSet& set, std::size_t classes)
{
    std::vector<std::int64_t> counts(classes, 0);
    for (const std::int32_t label : set.labels)
        if (label >= 0 && std::size_t(label) < classes) ++counts[std::size_t(label)];
    return counts;
}

std::optional<ClassBalance> classBalance(const std::vector<std::int64_t>& counts)
{
    if (counts.empty()) return std::nullopt;
    const auto [few, many] = std::minmax_element(counts.begin(), counts.end());
    ClassBalance b;
    b.smallest = std::size_t(few - counts.begin());
    b.largest = std::size_t(many - counts.begin());
    b.fewestImages = *few;
    b.mostImages = *many;
    b.smallClasses = std::count_if(counts.begin(), counts.end(),
                                   [&](std::int64_t n) { return n > 0 && b.small(n); });
    return b;
}

} // namespace towers::engine
