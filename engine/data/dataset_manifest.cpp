#include "engine/data/dataset_manifest.h"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/data/file_bytes.h"
#include "engine/errors.h"
#include "engine/io/json_depth.h"

namespace towers::engine {

namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

constexpr const char* kFormat = "towers-dataset";
constexpr int kVersion = 1;

} // namespace

bool isImportedDatasetName(const std::string& name, std::string* why)
{
    auto no = [&](const std::string& reason) {
        if (why) *why = reason;
        return false;
    };
    if (name.empty() || name.size() > 64)
        return no("a dataset name has 1 to 64 characters, '" + name + "' has " +
                  std::to_string(name.size()));
    for (const char c : name)
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.'))
            return no("'" + name +
                      "': a dataset name is made of lowercase letters, digits, '-', '_' and '.'");
    if (!((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= '0' && name[0] <= '9')))
        return no("'" + name + "': a dataset name starts with a letter or a digit");
    if (findDatasetSpec(name))
        return no("'" + name + "' is the name of a dataset Towers knows; choose another");
    return true;
}

DatasetSpec importedDatasetSpec(const std::string& name, const Shape& imageShape,
                                std::vector<std::string> classes, bool mirrorSafe,
                                const std::string& description, ImageFit fit)
{
    std::string why;
    if (!isImportedDatasetName(name, &why)) throw InvalidArgument(why);
    if (classes.size() < 2 || classes.size() > std::size_t(kMaxImportedClasses))
        throw InvalidArgument("dataset " + name + ": " + std::to_string(classes.size()) +
                              " classes; an imported dataset has 2 to " +
                              std::to_string(kMaxImportedClasses));
    std::set<std::string> seen;
    for (const std::string& c : classes) {
        if (c.empty() || c.find('\n') != std::string::npos)
            throw InvalidArgument("dataset " + name + ": a class name is empty or spans lines");
        if (!seen.insert(c).second)
            throw InvalidArgument("dataset " + name + ": class '" + c + "' is named twice");
    }
    DatasetSpec s;
    s.name = name;
    s.description = description.empty() ? "imported images" : description;
    s.folderNames = {name};
    s.reader = DatasetReader::Idx;
    s.trainFiles = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"};
    s.testFiles = {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    s.gzipAccepted = false;
    s.labels.numClasses = int(classes.size());
    s.labels.names = std::move(classes);
    s.imageShape = imageShape;
    s.mirrorSafe = mirrorSafe;
    s.imageFit = fit;
    validateDatasetSpec(s);
    return s;
}

std::string datasetManifestJson(const DatasetSpec& spec, const ManifestExtras& extras)
{
    Json o;
    o["format"] = kFormat;
    o["version"] = kVersion;
    o["imageShape"] = spec.imageShape.dims();
    o["classes"] = spec.labels.names;
    o["mirrorSafe"] = spec.mirrorSafe;
    o["fit"] = imageFitName(spec.imageFit);
    o["description"] = spec.description;
    o["source"] = extras.source;
    o["counts"] = {{"train", extras.trainCount}, {"test", extras.testCount}};
    o["created"] = extras.created;
    return o.dump(2) + "\n";
}

std::optional<DatasetSpec> readDatasetManifest(const fs::path& folder, ManifestExtras* extras)
{
    const fs::path path = folder / kDatasetManifest;
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(path, ec))) return std::nullopt;
    auto bad = [&](const std::string& why) {
        return IoError(quotedPath(path) + ": " + why +
                       " (a dataset manifest of towers-cli import)");
    };
    const std::uint64_t size = regularFileSize(path); // IoError: not a regular file, unreadable
    if (size > kMaxManifestBytes)
        throw bad(std::to_string(size) + " bytes is too large for a dataset manifest");
    const std::vector<std::uint8_t> bytes = readFileBytes(path);
    Json o;
    try {
        requireJsonDepth(
            std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
        o = Json::parse(bytes.begin(), bytes.end());
    } catch (const Json::exception& e) {
        throw bad(std::string("not valid JSON: ") + e.what());
    }
    try {
        if (!o.is_object() || o.value("format", std::string()) != kFormat)
            throw bad("not a Towers dataset manifest (its \"format\" is not \"towers-dataset\")");
        const int version = o.at("version").get<int>();
        if (version < 1 || version > kVersion)
            throw bad("version " + std::to_string(version) + "; this build reads version 1" +
                      (version > kVersion ? " (written by a newer Towers?)" : ""));
        const auto dims = o.at("imageShape").get<std::vector<std::int64_t>>();
        if (dims.size() != 3 || dims[0] < 1 || dims[1] < 1 || dims[0] > 4096 || dims[1] > 4096 ||
            (dims[2] != 1 && dims[2] != 3))
            throw bad("\"imageShape\" must be [H, W, 1 or 3] with sides of 1 to 4096");
        const auto classes = o.at("classes").get<std::vector<std::string>>();
        const bool mirrorSafe = o.value("mirrorSafe", false);
        ImageFit fit = ImageFit::Crop; // before --fit, every import cropped
        if (const auto f = o.find("fit"); f != o.end()) {
            if (!f->is_string()) throw bad("\"fit\" must be \"crop\", \"squash\" or \"fill\"");
            try {
                fit = imageFitFromName(f->get<std::string>());
            } catch (const InvalidArgument& e) {
                throw bad(std::string("\"fit\": ") + e.what());
            }
        }
        const std::string description = o.value("description", std::string());
        if (extras) {
            extras->source = o.value("source", std::string());
            extras->created = o.value("created", std::string());
            if (const auto c = o.find("counts"); c != o.end() && c->is_object()) {
                extras->trainCount = c->value("train", std::int64_t(0));
                extras->testCount = c->value("test", std::int64_t(0));
            }
        }
        const std::string name = fs::absolute(folder, ec).lexically_normal().filename().string();
        try {
            return importedDatasetSpec(name.empty() ? folder.filename().string() : name,
                                       Shape(dims), classes, mirrorSafe, description, fit);
        } catch (const InvalidArgument& e) {
            throw bad(e.what());
        }
    } catch (const Json::exception& e) {
        throw bad(std::string("malformed: ") + e.what());
    }
}

std::vector<DatasetSpec> importedDatasetSpecs(const std::vector<fs::path>& searchPath)
{
    std::vector<DatasetSpec> specs;
    for (const fs::path& dir : searchPath) {
        std::error_code ec;
        std::vector<fs::path> subs;
        for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
            if (it->is_directory(ec)) subs.push_back(it->path());
        std::sort(subs.begin(), subs.end());
        for (const fs::path& sub : subs) {
            const std::string name = sub.filename().string();
            if (std::any_of(specs.begin(), specs.end(),
                            [&](const DatasetSpec& s) { return s.name == name; }))
                continue;
            if (!isImportedDatasetName(name)) continue;
            try {
                if (auto spec = readDatasetManifest(sub)) specs.push_back(std::move(*spec));
            } catch (const Error&) {
            }
        }
    }
    return specs;
}

std::vector<std::string> importedDatasetNames(const std::vector<fs::path>& searchPath)
{
    std::vector<std::string> names;
    for (const DatasetSpec& spec : importedDatasetSpecs(searchPath)) names.push_back(spec.name);
    return names;
}

UnknownName unknownDataset(const std::string& name, const std::vector<std::string>& imported,
                           const std::string& hint)
{
    std::string known;
    for (const std::string& n : knownDatasets()) known += (known.empty() ? "" : ", ") + n;
    for (const std::string& n : imported) known += ", " + n;
    return UnknownName("unknown dataset '" + name + "' (known datasets: " + known + "; " + hint +
                       ")");
}

DatasetSpec datasetSpecAlong(const std::string& name, const std::vector<fs::path>& searchPath)
{
    if (const DatasetSpec* s = findDatasetSpec(name)) return *s;
    if (isImportedDatasetName(name))
        for (const fs::path& dir : searchPath) {
            std::error_code ec;
            if (!fs::is_directory(dir / name, ec)) continue;
            if (auto spec = readDatasetManifest(dir / name)) return *spec;
        }
    std::string searched;
    for (const fs::path& dir : searchPath)
        searched += (searched.empty() ? "" : ", ") + dir.string();
    throw unknownDataset(name, importedDatasetNames(searchPath),
                         "no folder " + name + "/ with a " + kDatasetManifest + " in " +
                             (searched.empty() ? std::string("no folder") : searched) +
                             "; 'towers-cli import' makes one from a folder of images, and "
                             "--data-dir names where one is");
}

} // namespace towers::engine
