#include "engine/train/recipe.h"

#include <algorithm>

#include "engine/data/dataset_spec.h"
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
    const ModelRecipe& r = findModel(model).recipe; // UnknownName listing the models
    TrainConfig c;
    c.model = model;
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
    return c;
}

Preprocessing preprocessingFor(const std::string& model, const Dataset& dataset)
{
    const ModelInfo& info = findModel(model);
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
