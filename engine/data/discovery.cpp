// Which datasets exist where: the search path, the folder layout, header-only inspection, and
// loading a whole dataset with every file validated.
#include <cstdlib>
#include <system_error>

#include "engine/data/cifar_reader.h"
#include "engine/data/dataset.h"
#include "engine/data/idx_reader.h"

namespace towers::engine {

namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kFashionNames = {"T-shirt/top", "Trouser",   "Pullover", "Dress",
                                                "Coat",        "Sandal",    "Shirt",    "Sneaker",
                                                "Bag",         "Ankle boot"};

std::vector<std::string> digitNames()
{
    std::vector<std::string> names;
    for (int d = 0; d < 10; ++d) names.push_back(std::to_string(d));
    return names;
}

// One of the four IDX files, plain (preferred: no inflation) or gzip.
fs::path idxFile(const fs::path& folder, const std::string& base)
{
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

struct IdxFiles
{
    fs::path trainImages, trainLabels, testImages, testLabels;
};

IdxFiles idxFiles(const fs::path& folder)
{
    return {idxFile(folder, "train-images-idx3-ubyte"), idxFile(folder, "train-labels-idx1-ubyte"),
            idxFile(folder, "t10k-images-idx3-ubyte"), idxFile(folder, "t10k-labels-idx1-ubyte")};
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

std::vector<fs::path> cifar10TrainFiles(const fs::path& folder)
{
    std::vector<fs::path> files;
    for (int i = 1; i <= 5; ++i)
        files.push_back(folder / ("data_batch_" + std::to_string(i) + ".bin"));
    return files;
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
    requireKnownDataset(name);
    const std::vector<std::string> subfolders = datasetFolderNames(name);
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

const std::vector<std::string>& knownDatasets()
{
    static const std::vector<std::string> names = {"cifar10", "cifar100", "mnist", "fashion-mnist"};
    return names;
}

void requireKnownDataset(const std::string& name)
{
    for (const std::string& n : knownDatasets())
        if (n == name) return;
    std::string list;
    for (const std::string& n : knownDatasets()) list += (list.empty() ? "" : ", ") + n;
    throw UnknownName("unknown dataset \"" + name + "\"; the known datasets are " + list);
}

std::vector<std::string> datasetFolderNames(const std::string& name)
{
    requireKnownDataset(name);
    if (name == "cifar10")
        return {"cifar10", "cifar-10-batches-bin", "cifar10/cifar-10-batches-bin"};
    if (name == "cifar100") return {"cifar100", "cifar-100-binary", "cifar100/cifar-100-binary"};
    return {name};
}

Shape datasetImageShape(const std::string& name)
{
    requireKnownDataset(name);
    if (name == "cifar10" || name == "cifar100") return {kCifarSide, kCifarSide, 3};
    return {28, 28, 1};
}

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
    requireKnownDataset(name);
    DatasetInfo info;
    info.name = name;
    info.location = folder;
    if (name == "cifar10") {
        info.classNames = readClassNames(folder / "batches.meta.txt", 10);
        for (const fs::path& f : cifar10TrainFiles(folder))
            info.trainCount += inspectCifarFile(f, 1);
        info.testCount = inspectCifarFile(folder / "test_batch.bin", 1);
        info.imageShape = {kCifarSide, kCifarSide, 3};
    } else if (name == "cifar100") {
        info.classNames = readClassNames(folder / "fine_label_names.txt", kCifar100Fine);
        info.trainCount = inspectCifarFile(folder / "train.bin", 2);
        info.testCount = inspectCifarFile(folder / "test.bin", 2);
        info.imageShape = {kCifarSide, kCifarSide, 3};
    } else {
        const IdxFiles f = idxFiles(folder);
        const IdxHeader trainImages = inspectIdxImages(f.trainImages);
        const IdxHeader trainLabels = inspectIdxLabels(f.trainLabels);
        const IdxHeader testImages = inspectIdxImages(f.testImages);
        const IdxHeader testLabels = inspectIdxLabels(f.testLabels);
        requireSameCount(trainImages.count, f.trainImages, trainLabels.count, f.trainLabels);
        requireSameCount(testImages.count, f.testImages, testLabels.count, f.testLabels);
        info.imageShape = {trainImages.rows, trainImages.cols, 1};
        requireSameShape(info.imageShape, Shape{testImages.rows, testImages.cols, 1}, f.testImages);
        info.trainCount = trainImages.count;
        info.testCount = testImages.count;
        info.classNames = name == "mnist" ? digitNames() : kFashionNames;
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
    return found;
}

Dataset loadCifar100(const fs::path& folder, bool fineLabels)
{
    Dataset d;
    d.name = "cifar100";
    d.location = folder;
    const int classes = fineLabels ? kCifar100Fine : kCifar100Coarse;
    d.classNames = readClassNames(
        folder / (fineLabels ? "fine_label_names.txt" : "coarse_label_names.txt"), classes);
    d.train = readCifarFiles({folder / "train.bin"}, 2, fineLabels, classes);
    d.test = readCifarFiles({folder / "test.bin"}, 2, fineLabels, classes);
    return d;
}

Dataset loadDataset(const std::string& name, const fs::path& folder)
{
    requireKnownDataset(name);
    if (name == "cifar100") return loadCifar100(folder, true);
    Dataset d;
    d.name = name;
    d.location = folder;
    if (name == "cifar10") {
        d.classNames = readClassNames(folder / "batches.meta.txt", 10);
        d.train = readCifarFiles(cifar10TrainFiles(folder), 1, false, 10);
        d.test = readCifarFiles({folder / "test_batch.bin"}, 1, false, 10);
        return d;
    }
    const IdxFiles f = idxFiles(folder);
    d.classNames = name == "mnist" ? digitNames() : kFashionNames;
    const int classes = static_cast<int>(d.classNames.size());
    d.train = readIdxImages(f.trainImages);
    d.train.labels = readIdxLabels(f.trainLabels, classes);
    requireSameCount(d.train.count, f.trainImages, static_cast<std::int64_t>(d.train.labels.size()),
                     f.trainLabels);
    d.test = readIdxImages(f.testImages);
    d.test.labels = readIdxLabels(f.testLabels, classes);
    requireSameCount(d.test.count, f.testImages, static_cast<std::int64_t>(d.test.labels.size()),
                     f.testLabels);
    requireSameShape(d.train.imageShape(), d.test.imageShape(), f.testImages);
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
        throw IoError("dataset \"" + name + "\" not found; looked in:" + where);
    }
    return loadDataset(name, info->location);
}

namespace {

// A file that marks `folder` itself as holding `name`'s files (not in a sub-folder).
std::vector<std::string> markerFiles(const std::string& name)
{
    if (name == "cifar10") return {"data_batch_1.bin"};
    if (name == "cifar100") return {"train.bin"};
    return {"train-images-idx3-ubyte", "train-images-idx3-ubyte.gz"};
}

} // namespace

std::optional<fs::path> datasetFolderIn(const std::string& name, const fs::path& folder,
                                        std::string* why)
{
    requireKnownDataset(name);
    std::error_code ec;
    if (!fs::is_directory(folder, ec)) {
        if (why)
            *why =
                folder.string() + (fs::exists(folder, ec) ? " is not a folder" : " does not exist");
        return std::nullopt;
    }
    for (const std::string& sub : datasetFolderNames(name))
        if (fs::is_directory(folder / sub, ec)) return folder / sub;
    for (const std::string& marker : markerFiles(name))
        if (fs::exists(folder / marker, ec)) return folder; // the files themselves, directly in it
    if (why) {
        std::string names, files;
        for (const std::string& sub : datasetFolderNames(name))
            names += (names.empty() ? "" : ", ") + sub + "/";
        for (const std::string& marker : markerFiles(name))
            files += (files.empty() ? "" : " or ") + marker;
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

} // namespace towers::engine
