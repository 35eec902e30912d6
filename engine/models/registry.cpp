#include "engine/models/registry.h"

#include <map>
#include <mutex>

#include "engine/models/model_file.h"

namespace towers::engine {

namespace {

// The tutorial's: plain SGD, lr 0.1 decayed x0.1 every 350 epochs (staircase), batch 128, EMA
// 0.9999, 10,000 steps (the tutorial runs 1,000,000).
ModelRecipe tutorialRecipe()
{
    ModelRecipe r;
    r.optimizer.kind = "sgd";
    r.schedule.kind = LrSchedule::Kind::Exponential;
    r.schedule.lr = 0.1;
    r.schedule.decayRate = 0.1;
    r.schedule.decayEpochs = 350;
    r.batchPerTower = 128;
    r.emaDecay = 0.9999;
    r.steps = 10000;
    r.checkpointEvery = 1000;
    r.evalEvery = 2000;
    r.logEvery = 10;
    return r;
}

// The MNIST seed's: Adam, lr 1e-3, batch 128, 2 epochs.
ModelRecipe mnistSeedRecipe()
{
    ModelRecipe r;
    r.optimizer.kind = "adam";
    r.schedule.kind = LrSchedule::Kind::Constant;
    r.schedule.lr = 1e-3;
    r.batchPerTower = 128;
    r.epochs = 2;
    r.checkpointEvery = 200;
    r.logEvery = 10;
    return r;
}

using Aug = ModelAugmentation;

std::vector<ModelInfo> makeRegistry()
{
    return {
        {.name = "cifar10-tutorial",
         .description = "TensorFlow's CIFAR-10 tutorial network (the seeds): 2 conv + LRN + "
                        "max-pool, fc 384, fc 192, on 24x24 crops",
         .inputShape = {24, 24, 3},
         .numClasses = 10,
         .defaultDataset = "cifar10",
         .anyDatasetRank = 3,
         .build = buildCifar10Tutorial,
         .recipe = tutorialRecipe(),
         .augmentation = {.kind = Aug::Kind::DistortedInputs, .translate = 0, .flip = true}},
        {.name = "mnist-convnet",
         .description = "the seeds' multi-GPU MNIST network: conv 64@5, conv 256@3, conv 512@3, "
                        "dense 2048, dense 1024, dropout 0.25",
         .inputShape = {28, 28, 1},
         .numClasses = 10,
         .defaultDataset = "mnist",
         .build = buildMnistConvnet,
         .recipe = mnistSeedRecipe(),
         .augmentation = {.kind = Aug::Kind::TranslateNormalize, .translate = 1, .flip = true}},
        {.name = "fashion-fast",
         .description = "small fast network for 28x28 grayscale (default for Fashion-MNIST): 2 "
                        "conv + batch norm, fc 128",
         .inputShape = {28, 28, 1},
         .numClasses = 10,
         .defaultDataset = "fashion-mnist",
         .anyDatasetRank = 1,
         .build = buildFashionFast,
         .recipe = nesterovOneCycle(0.1, 0.15, 64, 8, 500, 50),
         .augmentation = {.kind = Aug::Kind::TranslateNormalize, .translate = 1, .flip = true}},
        // The longer Fashion-MNIST recipe: 20 epochs, and the wider network can use stronger
        // augmentation.
        {.name = "fashion-wide",
         .description = "wider network for 28x28 grayscale (the longer Fashion-MNIST recipe): 4 "
                        "conv + batch norm, fc 256",
         .inputShape = {28, 28, 1},
         .numClasses = 10,
         .defaultDataset = "fashion-mnist",
         .build = buildFashionWide,
         .recipe = nesterovOneCycle(0.1, 0.15, 64, 20, 1000, 50),
         .augmentation = {.kind = Aug::Kind::TranslateNormalize, .translate = 2, .flip = true}},
        // The fast CIFAR-10 trainers' recipe: one-cycle, pad-and-crop by 4, flips.
        {.name = "cifar10-resnet",
         .description = "small residual network with batch norm for 32x32 colour (half-width "
                        "ResNet-9, the fast CIFAR-10 choice)",
         .inputShape = {32, 32, 3},
         .numClasses = 10,
         .defaultDataset = "cifar10",
         .anyDatasetRank = 2,
         .build = buildCifar10Resnet,
         .recipe = nesterovOneCycle(0.2, 0.2, 128, 12, 390, 10),
         .augmentation = {.kind = Aug::Kind::TranslateNormalize, .translate = 4, .flip = true}},
    };
}

} // namespace

ModelRecipe nesterovOneCycle(double peak, double warmup, int batch, double epochs,
                             std::int64_t evalEvery, std::int64_t logEvery)
{
    ModelRecipe r;
    r.optimizer.kind = "nesterov";
    r.optimizer.momentum = 0.9;
    r.schedule.kind = LrSchedule::Kind::OneCycle;
    r.schedule.lr = peak;
    r.schedule.warmupFraction = warmup;
    r.schedule.cosineAnneal = false;
    r.weightDecay = 5e-4;
    r.batchPerTower = batch;
    r.epochs = epochs;
    r.checkpointEvery = 500;
    r.evalEvery = evalEvery;
    r.logEvery = logEvery;
    return r;
}

const std::vector<ModelInfo>& modelRegistry()
{
    static const std::vector<ModelInfo> models = makeRegistry();
    return models;
}

const ModelInfo& findModel(const std::string& name)
{
    std::string known;
    for (const auto& m : modelRegistry()) {
        if (m.name == name) return m;
        known += (known.empty() ? "" : ", ") + m.name;
    }
    throw UnknownName("unknown model '" + name + "' (known models: " + known + ")");
}

bool modelFits(const ModelInfo& model, const Shape& imageShape)
{
    const Shape& in = model.inputShape;
    return imageShape.rank() == 3 && imageShape[2] == in[2] && imageShape[0] >= in[0] &&
           imageShape[1] >= in[1];
}

namespace {

// The model files' networks read in this process, by definition: two versions of one file are two
// networks of one name.
std::mutex modelsReadMutex;
std::map<std::string, std::unique_ptr<const ModelInfo>> modelsRead;

} // namespace

const ModelInfo& keepModel(ModelInfo info)
{
    const std::lock_guard lock(modelsReadMutex);
    auto& kept = modelsRead[info.definition];
    if (!kept) kept = std::make_unique<const ModelInfo>(std::move(info));
    return *kept;
}

const ModelInfo& resolveModel(const std::string& name, const std::string& definition)
{
    if (definition.empty()) return findModel(name);
    const ModelInfo* found = nullptr;
    {
        const std::lock_guard lock(modelsReadMutex);
        if (const auto it = modelsRead.find(definition); it != modelsRead.end())
            found = it->second.get();
    }
    if (!found)
        found =
            &keepModel(modelFromDefinition(definition, "the model definition of '" + name + "'"));
    if (found->name != name)
        throw InvalidArgument("the model definition of '" + name + "' describes a model called '" +
                              found->name + "'");
    return *found;
}

std::unique_ptr<Model> buildModel(const std::string& name, int classes)
{
    return buildModel(findModel(name), classes);
}

std::unique_ptr<Model> buildModel(const ModelInfo& info, int classes)
{
    const std::string& name = info.name;
    if (classes == 0) classes = info.numClasses;
    if (classes < 2 || classes > kMaxClasses)
        throw InvalidArgument("model '" + name + "': " + std::to_string(classes) +
                              " classes; a classifier has 2 to " + std::to_string(kMaxClasses));
    return info.build(classes);
}

std::unique_ptr<Model> createModel(const std::string& name, std::uint64_t seed, int classes)
{
    auto model = buildModel(name, classes);
    model->initialize(seed);
    return model;
}

} // namespace towers::engine
