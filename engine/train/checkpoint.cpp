#include "engine/train/checkpoint.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <exception>
#include <map>
#include <set>

#include <nlohmann/json.hpp>
#include <zlib.h>

#include "engine/data/dataset_spec.h"
#include "engine/errors.h"
#include "engine/io/json_depth.h"

namespace towers::engine {

namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kFormat = "towers-checkpoint";
constexpr const char* kChecksumKey = "crc32";

// CRC-32 (zlib) of everything the file says except the checksum itself: the metadata in key
// order, then each tensor's name, dtype, shape and bytes in file order.
class Crc
{
public:
    void add(const void* data, std::size_t n)
    {
        const auto* p = static_cast<const Bytef*>(data);
        while (n > 0) {
            const uInt chunk = uInt(std::min<std::size_t>(n, 1u << 30));
            m_crc = ::crc32(m_crc, p, chunk);
            p += chunk;
            n -= chunk;
        }
    }
    void add(const std::string& s)
    {
        add(s.data(), s.size());
        add("", 1); // a separator no string contains
    }
    std::string hex() const
    {
        char buf[16];
        std::snprintf(buf, sizeof buf, "%08lx", m_crc & 0xffffffffUL);
        return buf;
    }

private:
    uLong m_crc = ::crc32(0L, Z_NULL, 0);
};

void addMetadata(Crc& crc, const std::map<std::string, std::string>& metadata)
{
    for (const auto& [k, v] : metadata) {
        if (k == kChecksumKey) continue;
        crc.add(k);
        crc.add(v);
    }
}

void addTensor(Crc& crc, const std::string& name, const Tensor& t)
{
    crc.add(name);
    crc.add(std::string(dtypeName(t.dtype())));
    crc.add(t.shape().str());
    if (t.bytes()) crc.add(t.raw(), t.bytes());
}

std::string checksum(const std::map<std::string, std::string>& metadata,
                     const NamedTensors& tensors)
{
    Crc crc;
    addMetadata(crc, metadata);
    for (const auto& [name, t] : tensors) addTensor(crc, name, t);
    return crc.hex();
}

// The checksum a file's metadata records: IoError naming it where there is none.
const std::string& recordedChecksum(const std::map<std::string, std::string>& metadata,
                                    const fs::path& path)
{
    const auto sum = metadata.find(kChecksumKey);
    if (sum == metadata.end())
        throw IoError("checkpoint " + quotedPath(path) +
                      ": metadata 'crc32' is missing (not a Towers checkpoint?)");
    return sum->second;
}

[[noreturn]] void throwDamaged(const fs::path& path)
{
    throw IoError("checkpoint " + quotedPath(path) +
                  " is damaged: its content does not match its checksum (a corrupted or partly "
                  "copied file)");
}

std::int64_t parseInt(const std::string& s, const fs::path& path, const char* key)
{
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size())
        throw IoError("checkpoint " + quotedPath(path) + ": metadata '" + key +
                      "' is not an integer: '" + s + "'");
    return v;
}

CheckpointInfo parseInfo(const std::map<std::string, std::string>& meta, const fs::path& path)
{
    auto get = [&](const char* key) -> const std::string& {
        const auto it = meta.find(key);
        if (it == meta.end())
            throw IoError("checkpoint " + quotedPath(path) + ": metadata '" + key +
                          "' is missing (not a Towers checkpoint, or a damaged one)");
        return it->second;
    };
    auto bad = [&](const char* key, const std::string& why) {
        return IoError("checkpoint " + quotedPath(path) + ": metadata '" + key + "' " + why);
    };
    if (get("format") != kFormat)
        throw IoError("checkpoint " + quotedPath(path) + ": not a Towers checkpoint (format '" +
                      get("format") + "')");
    CheckpointInfo info;
    const std::int64_t version = parseInt(get("format_version"), path, "format_version");
    if (version < 1)
        throw bad("format_version", "is " + std::to_string(version) + "; versions start at 1");
    if (version > kCheckpointFormatVersion) // no damage: Unsupported, for those who tell apart
        throw Unsupported("checkpoint " + quotedPath(path) + ": metadata 'format_version' is " +
                          std::to_string(version) + "; this build reads versions 1 to " +
                          std::to_string(kCheckpointFormatVersion) +
                          " (written by a newer Towers?)");
    info.formatVersion = int(version);
    info.model = get("model");
    if (info.model.empty()) throw bad("model", "is empty");
    info.dataset = get("dataset");
    info.preprocessing = get("preprocessing");
    info.optimizer = get("optimizer");
    info.config = get("config");
    if (jsonTooDeepAt(info.config))
        throw bad("config", "nests more than " + std::to_string(kMaxJsonDepth) + " levels deep");
    // A model file's network travels in the run's configuration (TrainConfig::modelDefinition).
    if (const Json config = Json::parse(info.config, nullptr, false); config.is_object())
        if (const auto d = config.find("modelDefinition"); d != config.end() && d->is_object())
            info.modelDefinition = d->dump();
    info.step = parseInt(get("step"), path, "step");
    if (info.step < 0) throw bad("step", "is negative");
    try {
        const Json names = Json::parse(get("class_names"));
        if (!names.is_array()) throw bad("class_names", "is not a JSON list");
        for (const auto& n : names) {
            if (!n.is_string()) throw bad("class_names", "holds something other than strings");
            info.classNames.push_back(n.get<std::string>());
        }
        // [H, W, C] of positive sizes.
        auto shapeOf = [&](const char* key, const std::string& text) {
            const Json shape = Json::parse(text);
            if (!shape.is_array() || shape.size() != 3) throw bad(key, "is not a list [H, W, C]");
            std::vector<std::int64_t> dims;
            for (const auto& d : shape) {
                if (!d.is_number_integer() || d.get<std::int64_t>() < 1)
                    throw bad(key, "holds a non-positive size");
                dims.push_back(d.get<std::int64_t>());
            }
            return Shape(dims);
        };
        info.inputShape = shapeOf("input_shape", get("input_shape"));
        if (const auto it = meta.find("image_shape"); it != meta.end())
            info.imageShape = shapeOf("image_shape", it->second); // absent before it was recorded
        if (const auto it = meta.find("image_fit"); it != meta.end()) {
            try {
                info.imageFit = imageFitFromName(it->second); // absent: Crop
            } catch (const InvalidArgument& e) {
                throw bad("image_fit", std::string("is wrong: ") + e.what());
            }
        }
        const Json epoch = Json::parse(get("epoch"));
        if (!epoch.is_number() || epoch.get<double>() < 0)
            throw bad("epoch", "is not a number >= 0");
        info.epoch = epoch.get<double>();
    } catch (const Json::exception& e) {
        throw IoError("checkpoint " + quotedPath(path) + ": malformed metadata: " + e.what());
    }
    return info;
}

} // namespace

const Tensor* Checkpoint::weight(const std::string& name, bool useEma) const
{
    if (useEma)
        for (const auto& [n, t] : ema)
            if (n == "ema." + name) return &t;
    for (const auto& [n, t] : weights)
        if (n == name) return &t;
    return nullptr;
}

Checkpoint makeCheckpoint(const Model& model, CheckpointInfo info, NamedTensors ema,
                          NamedTensors optimizer)
{
    Checkpoint c;
    info.model = model.name();
    info.inputShape = model.inputShape();
    c.info = std::move(info);
    // A checkpoint lives on the host: GPU towers' tensors are copied here.
    for (auto* p : model.parameters()) c.weights.emplace_back(p->name, p->value.onHost());
    for (auto& [n, t] : ema) t = t.onHost();
    for (auto& [n, t] : optimizer) t = t.onHost();
    c.ema = std::move(ema);
    c.optimizer = std::move(optimizer);
    return c;
}

void writeCheckpoint(const fs::path& path, const Checkpoint& c)
{
    NamedTensors all = c.weights;
    for (const auto& [n, t] : c.ema) {
        if (n.rfind("ema.", 0) != 0)
            throw InvalidArgument("checkpoint: EMA tensor '" + n +
                                  "' must be named ema.<parameter>");
        all.emplace_back(n, t);
    }
    for (const auto& [n, t] : c.optimizer) {
        if (n.rfind("optim.", 0) != 0)
            throw InvalidArgument("checkpoint: optimizer tensor '" + n + "' must be named optim.*");
        all.emplace_back(n, t);
    }
    for (const auto& [n, t] : c.weights)
        if (n.rfind("ema.", 0) == 0 || n.rfind("optim.", 0) == 0)
            throw InvalidArgument("checkpoint: weight name '" + n + "' uses a reserved prefix");
    Json shape = Json::array();
    for (auto d : c.info.inputShape.dims()) shape.push_back(d);
    std::map<std::string, std::string> meta{
        {"format", kFormat},
        {"format_version", std::to_string(c.info.formatVersion)},
        {"model", c.info.model},
        {"dataset", c.info.dataset},
        {"class_names", Json(c.info.classNames).dump()},
        {"input_shape", shape.dump()},
        {"preprocessing", c.info.preprocessing},
        {"step", std::to_string(c.info.step)},
        {"epoch", Json(c.info.epoch).dump()},
        {"optimizer", c.info.optimizer},
        {"config", c.info.config},
    };
    if (c.info.imageShape.rank() == 3) {
        Json image = Json::array();
        for (auto d : c.info.imageShape.dims()) image.push_back(d);
        meta["image_shape"] = image.dump();
    }
    if (c.info.imageFit != ImageFit::Crop) meta["image_fit"] = imageFitName(c.info.imageFit);
    meta[kChecksumKey] = checksum(meta, all);
    writeSafeTensors(path, all, meta);
}

CheckpointInfo readCheckpointInfo(const fs::path& path)
{
    return parseInfo(readSafeTensorsMetadata(path), path);
}

Checkpoint readCheckpoint(const fs::path& path)
{
    SafeTensors file = readSafeTensors(path); // IoError for anything wrong with the file itself
    if (recordedChecksum(file.metadata, path) != checksum(file.metadata, file.tensors))
        throwDamaged(path);
    Checkpoint c;
    c.info = parseInfo(file.metadata, path);
    for (auto& [n, t] : file.tensors) {
        if (n.rfind("ema.", 0) == 0)
            c.ema.emplace_back(n, std::move(t));
        else if (n.rfind("optim.", 0) == 0)
            c.optimizer.emplace_back(n, std::move(t));
        else
            c.weights.emplace_back(n, std::move(t));
    }
    return c;
}

namespace {

// Weights a checkpoint holds are finite (a run never writes others: Trainer's check before each
// write); a NaN there is a damaged or forged file, whose answers would look plausible.
void requireFinite(const std::string& where, const std::string& name, const Tensor& t)
{
    if (!allFinite(t))
        throw InvalidArgument(where + ": tensor '" + name +
                              "' holds a value that is not finite "
                              "(NaN or infinite)");
}

// The checkpoint's tensors against `model` (info: the checkpoint's), by name, dtype and shape:
// validateCheckpoint's checks but the values'.
void checkTensors(const CheckpointInfo& info, const std::vector<SafeTensorEntry>& tensors,
                  const Model& model, const std::string& where)
{
    if (info.model != model.name())
        throw InvalidArgument(where + " is of model '" + info.model + "', not '" + model.name() +
                              "'");
    if (info.inputShape != model.inputShape())
        throw InvalidArgument(where + " was trained on inputs " + info.inputShape.str() +
                              ", the model takes " + model.inputShape().str());
    std::map<std::string, const SafeTensorEntry*> weights;
    std::vector<const SafeTensorEntry*> ema, optimizer;
    for (const SafeTensorEntry& t : tensors) {
        if (t.name.rfind("ema.", 0) == 0)
            ema.push_back(&t);
        else if (t.name.rfind("optim.", 0) == 0)
            optimizer.push_back(&t);
        else
            weights[t.name] = &t;
    }
    std::map<std::string, const Parameter*> trainable;
    for (const auto* p : model.parameters()) {
        const auto it = weights.find(p->name);
        if (it == weights.end())
            throw InvalidArgument(where + ": tensor '" + p->name + "' of the model is missing");
        const SafeTensorEntry& t = *it->second;
        if (t.dtype != p->value.dtype())
            throw InvalidArgument(where + ": tensor '" + p->name + "' is " +
                                  std::string(dtypeName(t.dtype)) + ", the model's is " +
                                  std::string(dtypeName(p->value.dtype())));
        if (t.shape != p->value.shape())
            throw InvalidArgument(where + ": tensor '" + p->name + "' has shape " + t.shape.str() +
                                  ", the model's is " + p->value.shape().str());
        weights.erase(it);
        if (p->trainable) trainable[p->name] = p;
    }
    if (!weights.empty())
        throw InvalidArgument(where + ": tensor '" + weights.begin()->first +
                              "' is not part of model '" + model.name() + "'");

    auto checkLike = [&](const SafeTensorEntry& t, const Parameter& p) {
        if (t.dtype != p.value.dtype() || t.shape != p.value.shape())
            throw InvalidArgument(where + ": tensor '" + t.name + "' is " + t.describe() +
                                  ", its parameter '" + p.name + "' is " + p.value.describe());
    };
    if (!ema.empty()) {
        std::set<std::string> seen;
        for (const SafeTensorEntry* t : ema) {
            const auto it = trainable.find(t->name.substr(4));
            if (it == trainable.end())
                throw InvalidArgument(where + ": tensor '" + t->name +
                                      "' averages no trainable parameter of the model");
            checkLike(*t, *it->second);
            seen.insert(it->first);
        }
        for (const auto& [name, p] : trainable)
            if (!seen.count(name))
                throw InvalidArgument(where + ": tensor 'ema." + name + "' is missing");
    }
    for (const SafeTensorEntry* t : optimizer) {
        if (t->name == "optim.step") continue;
        const std::string rest = t->name.substr(6);
        const auto dot = rest.rfind('.');
        const auto it =
            dot == std::string::npos ? trainable.end() : trainable.find(rest.substr(0, dot));
        if (it == trainable.end())
            throw InvalidArgument(where + ": optimizer tensor '" + t->name +
                                  "' belongs to no trainable parameter of the model");
        checkLike(*t, *it->second);
    }
}

// The values of a checkpoint's tensor (of a model's, checked by checkTensors): weights and
// averages finite, running variances not negative, the optimizer's step count not negative (its
// other state as it is).
void checkValues(const std::string& where, const std::string& name, const Tensor& t)
{
    if (name == "optim.step" && t.dtype() == DType::Int64 && t.numel() == 1 &&
        t.data<std::int64_t>()[0] < 0)
        throw InvalidArgument(where + ": its optimizer's step count 'optim.step' is negative");
    if (name.rfind("optim.", 0) == 0) return;
    requireFinite(where, name, t);
    if (name.ends_with("running_var") && t.dtype() == DType::Float32)
        for (const float v : t.span<float>())
            if (v < 0)
                throw InvalidArgument(where + ": tensor '" + name + "' holds a negative variance");
}

} // namespace

void validateCheckpoint(const Checkpoint& c, const Model& model, const fs::path& path)
{
    const std::string where = "checkpoint " + quotedPath(path);
    std::vector<SafeTensorEntry> tensors;
    for (const NamedTensors* part : {&c.weights, &c.ema, &c.optimizer})
        for (SafeTensorEntry& e : describeTensors(*part)) tensors.push_back(std::move(e));
    checkTensors(c.info, tensors, model, where);
    for (const NamedTensors* part : {&c.weights, &c.ema, &c.optimizer})
        for (const auto& [n, t] : *part) checkValues(where, n, t);
}

CheckpointInfo verifyCheckpoint(const fs::path& path, const Model* model,
                                VerifiedCheckpoint* verified)
{
    const std::string where = "checkpoint " + quotedPath(path);
    std::map<std::string, std::string> metadata;
    std::vector<SafeTensorEntry> tensors;
    Crc crc;
    // What the metadata, the tensors and their values say waits for the checksum: a damaged file
    // is said to be damaged, as readCheckpoint says it.
    std::exception_ptr unfit;
    visitSafeTensors(
        path,
        [&](const std::map<std::string, std::string>& header,
            const std::vector<SafeTensorEntry>& entries) {
            (void)recordedChecksum(header, path);
            addMetadata(crc, header);
            metadata = header;
            tensors = entries;
        },
        [&](const std::string& name, Tensor& t) {
            addTensor(crc, name, t);
            if (!model || unfit) return;
            try {
                checkValues(where, name, t);
            } catch (const InvalidArgument&) {
                unfit = std::current_exception();
            }
        });
    if (crc.hex() != recordedChecksum(metadata, path)) throwDamaged(path);
    CheckpointInfo info = parseInfo(metadata, path);
    if (model) checkTensors(info, tensors, *model, where);
    if (unfit) std::rethrow_exception(unfit);
    if (verified) *verified = {info, std::move(tensors), crc.hex()};
    return info;
}

void rereadCheckpoint(const fs::path& path, const VerifiedCheckpoint& verified,
                      const SafeTensorFn& take)
{
    const auto changed = [&](const std::string& how) {
        return IoError("checkpoint " + quotedPath(path) + " changed since it was checked: " + how);
    };
    Crc crc;
    (void)visitSafeTensors(
        path,
        [&](const std::map<std::string, std::string>& header,
            const std::vector<SafeTensorEntry>& entries) {
            bool same = entries.size() == verified.tensors.size() &&
                        recordedChecksum(header, path) == verified.checksum;
            for (std::size_t i = 0; same && i < entries.size(); ++i) {
                const SafeTensorEntry &a = entries[i], &b = verified.tensors[i];
                same = a.name == b.name && a.dtype == b.dtype && a.shape == b.shape;
            }
            if (!same) throw changed("another file is in its place");
            addMetadata(crc, header);
        },
        [&](const std::string& name, Tensor& t) {
            addTensor(crc, name, t);
            take(name, t);
        });
    if (crc.hex() != verified.checksum)
        throw changed("its content no longer matches its checksum (rewritten in place?)");
}

bool loadCheckpointWeights(const fs::path& path, const VerifiedCheckpoint& verified, Model& model,
                           bool useEma)
{
    const std::string where = "checkpoint " + quotedPath(path);
    checkTensors(verified.info, verified.tensors, model, where);
    const bool averages =
        std::any_of(verified.tensors.begin(), verified.tensors.end(),
                    [](const SafeTensorEntry& e) { return e.name.rfind("ema.", 0) == 0; });
    const bool averaged = useEma && averages;
    std::map<std::string, Parameter*> into; // the file's name -> the parameter it sets
    for (Parameter* p : model.parameters())
        into[(averaged && p->trainable ? "ema." : "") + p->name] = p;
    // A value no run writes is said once the file was read whole, a changed file before it.
    std::exception_ptr unfit;
    rereadCheckpoint(path, verified, [&](const std::string& name, Tensor& t) {
        if (unfit) return;
        try {
            checkValues(where, name, t);
        } catch (const InvalidArgument&) {
            unfit = std::current_exception();
            return;
        }
        if (const auto it = into.find(name); it != into.end()) it->second->value.copyFrom(t);
    });
    if (unfit) std::rethrow_exception(unfit);
    return averaged;
}

Checkpoint loadCheckpoint(const fs::path& path, Model& model, bool useEma)
{
    Checkpoint c = readCheckpoint(path);
    validateCheckpoint(c, model, path);
    for (auto* p : model.parameters())
        p->value.copyFrom(*c.weight(p->name, useEma && p->trainable));
    return c;
}

int checkpointClasses(const CheckpointInfo& info)
{
    return int(info.classNames.size());
}

std::string checkpointConfigField(const CheckpointInfo& info, const char* key,
                                  const std::string& otherwise)
{
    const Json j = jsonTooDeepAt(info.config) ? Json() : Json::parse(info.config, nullptr, false);
    if (j.is_object())
        if (const auto it = j.find(key); it != j.end() && it->is_string())
            return it->get<std::string>();
    return otherwise;
}

std::string trainedPrecision(const CheckpointInfo& info)
{
    return checkpointConfigField(info, "precision", "fp32");
}

Shape sourceImageShape(const CheckpointInfo& info)
{
    if (info.imageShape.rank() == 3) return info.imageShape;
    if (const DatasetSpec* spec = findDatasetSpec(info.dataset)) return spec->imageShape;
    return info.inputShape;
}

} // namespace towers::engine
