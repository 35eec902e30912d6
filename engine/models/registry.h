#pragma once
// The models Towers knows, registered by name (an explicit list, no static initialisers). A
// model's entry says everything Towers needs to know about it: how to build it, the dataset it is
// meant for, the recipe it trains with by default and how its training images are distorted.
// Adding a model is adding its builder (models/<name>.cpp) and its entry in registry.cpp (see
// docs/extending.md).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/models/model.h"
#include "engine/optim/lr_schedule.h"
#include "engine/optim/optimizer.h"

namespace towers::engine {

// The training configuration a model starts from (engine/train/recipe.h's defaultConfigFor copies
// it into a TrainConfig). Every field's default is TrainConfig's own.
struct ModelRecipe
{
    OptimizerOptions optimizer;
    LrSchedule schedule;
    int batchPerTower = 128;
    std::int64_t steps = 0; // 0: from `epochs`
    double epochs = 0;
    double weightDecay = -1; // >= 0 replaces the conv/linear weights' coefficient
    double emaDecay = 0;     // 0: no moving averages
    std::int64_t checkpointEvery = 1000;
    std::int64_t evalEvery = 0;
    std::int64_t logEvery = 10;
};

// The fast trainers' recipe: Nesterov 0.9, a linear one-cycle to `peak` (warm-up over `warmup` of
// the run), weight decay 5e-4 on the conv/linear weights, checkpoints every 500 steps: the
// batch-norm models', and a model file's unless its recipe says otherwise.
ModelRecipe nesterovOneCycle(double peak, double warmup, int batch, double epochs,
                             std::int64_t evalEvery, std::int64_t logEvery);

// How a model's training images are distorted and normalised; preprocessingFor (recipe.h) turns
// it into a Preprocessing for a dataset.
struct ModelAugmentation
{
    enum class Kind
    {
        // The seeds' distorted_inputs: a random crop to the model's input (the central crop when
        // evaluating), flip, brightness +-63, contrast 0.2..1.8, per-image standardisation.
        DistortedInputs,
        // A random shift by up to `translate` pixels (zero padding), flip, and normalisation by
        // the training set's per-channel mean and standard deviation.
        TranslateNormalize,
    };
    Kind kind = Kind::TranslateNormalize;
    int translate = 0;
    // Left-right flips, on datasets whose classes survive a mirror (DatasetSpec::mirrorSafe).
    bool flip = true;
};

struct ModelInfo
{
    std::string name;
    std::string description;
    Shape inputShape; // [H, W, C]
    // The classifier's outputs when nothing says otherwise (a checkpoint or run from before the
    // class count was recorded, `towers-cli models`); a run builds it with its dataset's classes.
    int numClasses = 10;
    // The dataset it is meant for; a dataset's default model is the first model meant for it,
    // unless its DatasetSpec names another (DatasetSpec::defaultModel).
    std::string defaultDataset;
    // For a dataset no model is meant for (CIFAR-100, a folder of the user's images): the model
    // whose input fits its images (modelFits) with the lowest rank; 0: never chosen that way.
    int anyDatasetRank = 0;
    // Builds the network (uninitialised) with `classes` outputs (at least 2, as Model requires).
    std::function<std::unique_ptr<Model>(int classes)> build;
    ModelRecipe recipe;
    ModelAugmentation augmentation;
    // A network from a model file (model_file.h): its canonical definition, and its "recipe"
    // object (the fields of config.json it sets over `recipe`, as compact JSON; "" for none).
    // Both "" for a built-in model.
    std::string definition = {};
    std::string recipeJson = {};
};

const std::vector<ModelInfo>& modelRegistry();
// Throws UnknownName listing the known models.
const ModelInfo& findModel(const std::string& name);
// The model a run or a checkpoint names: the built-in model `name` when `definition` is empty,
// else the network that `definition` (a model file's canonical text, TrainConfig::modelDefinition)
// describes, which must be called `name`. Read once per definition and kept for the process, so
// the reference stays valid. UnknownName or InvalidArgument saying why not.
const ModelInfo& resolveModel(const std::string& name, const std::string& definition);
// Keeps a model file's network (modelFromDefinition's) for the process, where resolveModel finds
// it by its definition, and returns the one kept: the first read of that definition.
const ModelInfo& keepModel(ModelInfo info);
// Whether `model` takes images of `imageShape` [H, W, C]: the same channels, and at least its
// input's height and width (larger images are cropped to it).
bool modelFits(const ModelInfo& model, const Shape& imageShape);

// The largest class count a model is built with (the classifier's outputs).
constexpr int kMaxClasses = 100000;
// Builds a model with `classes` outputs (0: ModelInfo::numClasses); throws InvalidArgument for a
// count below 2 or above kMaxClasses.
std::unique_ptr<Model> buildModel(const ModelInfo& info, int classes = 0);
// The same for a built-in model.
std::unique_ptr<Model> buildModel(const std::string& name, int classes = 0);
// buildModel, then initialises it from `seed`.
std::unique_ptr<Model> createModel(const std::string& name, std::uint64_t seed = 1,
                                   int classes = 0);

// The builders (models/<name>.cpp): `classes` outputs of the classifier (at least 2).
std::unique_ptr<Model> buildCifar10Tutorial(int classes);
std::unique_ptr<Model> buildMnistConvnet(int classes);
std::unique_ptr<Model> buildFashionFast(int classes);
std::unique_ptr<Model> buildFashionWide(int classes);
std::unique_ptr<Model> buildCifar10Resnet(int classes);

} // namespace towers::engine
