#include "engine/train/recipe.h"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/data/dataset_spec.h"
#include "engine/errors.h"
#include "engine/io/output_file.h"
#include "engine/models/model_file.h"
#include "engine/models/registry.h"

namespace towers::engine {

std::string defaultModelFor(const std::string& dataset)
{
    return defaultModelFor(datasetSpec(dataset)); // UnknownName listing the datasets
}

std::string defaultModelFor(const DatasetSpec& spec)
{
    const std::string& dataset = spec.name;
    if (!spec.defaultModel.empty()) return findModel(spec.defaultModel).name;
    const auto& models = modelRegistry();
    const auto meant = std::find_if(models.begin(), models.end(), [&](const ModelInfo& m) {
        return m.defaultDataset == dataset;
    });
    if (meant != models.end()) return meant->name;
    const ModelInfo* best = nullptr;
    for (const ModelInfo& m : models)
        if (m.anyDatasetRank > 0 && modelFits(m, spec.imageShape) &&
            (!best || m.anyDatasetRank < best->anyDatasetRank))
            best = &m;
    if (best) return best->name;
    throw UnknownName("no built-in network takes " + spec.name + "'s " + spec.imageShape.str() +
                      " images; name one with --model ('towers-cli models' lists them)");
}

TrainConfig defaultConfigFor(const std::string& model)
{
    return defaultConfigFor(findModel(model)); // UnknownName listing the models
}

TrainConfig defaultConfigFor(const ModelInfo& info)
{
    const ModelRecipe& r = info.recipe;
    TrainConfig c;
    c.model = info.name;
    c.modelDefinition = info.definition;
    c.optimizer = r.optimizer;
    c.schedule = r.schedule;
    c.batchPerTower = r.batchPerTower;
    c.steps = r.steps;
    c.epochs = r.epochs;
    c.weightDecay = r.weightDecay;
    c.emaDecay = r.emaDecay;
    c.checkpointEvery = r.checkpointEvery;
    c.evalEvery = r.evalEvery;
    c.logEvery = r.logEvery;
    if (info.recipeJson.empty()) return c;
    // A model file's "recipe": config.json's fields over the recipe above, the optimizer's and
    // the schedule's field by field; a length given replaces the other.
    using Json = nlohmann::json;
    const Json recipe = Json::parse(info.recipeJson);
    const std::set<std::string> known = {
        "optimizer",   "lr",       "schedule",        "batchPerTower", "steps",    "epochs",
        "weightDecay", "emaDecay", "checkpointEvery", "evalEvery",     "logEvery", "labelSmoothing",
        "clipGradNorm"};
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    Json merged = Json::parse(c.toJson());
    for (const auto& [key, value] : recipe.items()) {
        if (!known.count(key))
            throw InvalidArgument("model '" + info.name + "': recipe: " + key +
                                  ": unknown field (a recipe sets " + list + ")");
        if ((key == "optimizer" || key == "schedule") && value.is_object())
            merged[key].update(value);
        else
            merged[key] = value;
    }
    if (recipe.contains("steps") && !recipe.contains("epochs")) merged["epochs"] = 0;
    if (recipe.contains("epochs") && !recipe.contains("steps")) merged["steps"] = 0;
    try {
        return TrainConfig::fromJson(merged.dump());
    } catch (const InvalidArgument& e) {
        std::string what = e.what();
        const std::string prefix = "training configuration: ";
        if (what.starts_with(prefix)) what.erase(0, prefix.size());
        throw InvalidArgument("model '" + info.name + "': recipe: " + what);
    }
}

const ModelInfo& loadModelFile(const std::filesystem::path& path)
{
    const ModelInfo& info = readModelFile(path);
    try {
        (void)defaultConfigFor(info);
    } catch (const InvalidArgument& e) {
        throw IoError(path.string() + ": " + e.what()); // the file is wrong, not the caller
    }
    return info;
}

std::string modelFileRecipeFields(const ModelInfo& info)
{
    using Json = nlohmann::ordered_json;
    const TrainConfig c = defaultConfigFor(info);
    const Json mine = Json::parse(c.toJson());
    Json r;
    // The optimizer's and the schedule's kind and the fields it uses (the others are ignored).
    auto kindAndFields = [&](const char* key, const std::vector<std::string>& fields) {
        Json o;
        o["kind"] = mine[key]["kind"];
        for (const auto& field : fields) o[field] = mine[key][field];
        r[key] = o;
    };
    kindAndFields("optimizer", optimizerFields(c.optimizer.kind));
    r["lr"] = mine["lr"];
    kindAndFields("schedule", LrSchedule::fieldsOf(c.schedule.kind));
    for (const char* key : {"weightDecay", "emaDecay", "batchPerTower"}) r[key] = mine[key];
    if (c.labelSmoothing > 0) r["labelSmoothing"] = mine["labelSmoothing"];
    if (c.clipGradNorm > 0) r["clipGradNorm"] = mine["clipGradNorm"];
    if (mine["steps"] != 0)
        r["steps"] = mine["steps"];
    else
        r["epochs"] = mine["epochs"];
    for (const char* key : {"evalEvery", "checkpointEvery", "logEvery"}) r[key] = mine[key];
    return r.dump();
}

void saveModelFile(const ModelInfo& info, const std::string& name,
                   const std::filesystem::path& path, bool overwrite)
{
    if (isCheckpointName(path))
        throw IoError(quotedPath(path) +
                      " is a checkpoint's name (.safetensors): a model file is JSON, name a .json "
                      "file");
    checkOutputFile(path, overwrite);
    const std::string text = modelFileText(info, name, modelFileRecipeFields(info));
    // What is written reads back: a network and a recipe (a failure here is Towers' bug).
    try {
        (void)defaultConfigFor(modelFromDefinition(text, path.string()));
    } catch (const InvalidArgument& e) {
        throw Error(std::string("the model file written for ") + info.name +
                    " does not read back: " + e.what());
    }
    writeOutputFile(path, text, overwrite);
}

Preprocessing preprocessingFor(const ModelInfo& info, const Dataset& dataset)
{
    const std::string& model = info.name;
    const Shape& in = info.inputShape; // [H, W, C]
    const Shape source = dataset.train.imageShape();
    auto shapeText = [](const Shape& s) {
        return std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" + std::to_string(s[2]);
    };
    if (in[2] != source[2] || in[0] > source[0] || in[1] > source[1])
        throw InvalidArgument(model + " takes " + shapeText(in) + " images; " + dataset.name +
                              " has " + shapeText(source) +
                              " (choose another --model; 'towers-cli models' lists them)");
    const auto classes = dataset.classNames.size();
    if (classes < 2 || classes > std::size_t(kMaxClasses))
        throw InvalidArgument(dataset.name + " has " + std::to_string(classes) +
                              " classes; a model classifies 2 to " + std::to_string(kMaxClasses) +
                              " classes");
    const ModelAugmentation& a = info.augmentation;
    Preprocessing p;
    switch (a.kind) {
    case ModelAugmentation::Kind::DistortedInputs:
        p = distortedInputs(in);
        break;
    case ModelAugmentation::Kind::TranslateNormalize:
        p = translateAndNormalize(dataset.train, a.translate);
        // A model smaller than the images takes crops of them (random when training).
        p.height = static_cast<int>(in[0]);
        p.width = static_cast<int>(in[1]);
        break;
    }
    const DatasetSpec* spec = findDatasetSpec(dataset.name);
    // Clothes and objects mirror; digits do not; an imported dataset says so in its manifest.
    p.flip = a.flip && (spec ? spec->mirrorSafe : dataset.mirrorSafe);
    p.validateFor(source);
    return p;
}

} // namespace towers::engine
