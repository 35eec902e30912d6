#include "engine/train/recipe.h"

#include "engine/models/registry.h"

namespace towers::engine {

std::string defaultModelFor(const std::string& dataset)
{
    requireKnownDataset(dataset);
    if (dataset == "fashion-mnist" || dataset == "mnist") return "fashion-fast";
    if (dataset == "cifar10") return "cifar10-tutorial";
    throw UnknownName("no model is registered for dataset '" + dataset + "' (its " +
                      (dataset == "cifar100" ? "100 classes" : "images") +
                      " fit none of the built-in networks); name one with --model");
}

namespace {

// The fast trainers' recipe: Nesterov 0.9, a linear one-cycle to `peak`, weight decay 5e-4 on the
// conv/linear weights, checkpoints every 500 steps.
void nesterovOneCycle(TrainConfig& c, double peak, double warmup, int batch, double epochs)
{
    c.optimizer.kind = "nesterov";
    c.optimizer.momentum = 0.9;
    c.schedule.kind = LrSchedule::Kind::OneCycle;
    c.schedule.lr = peak;
    c.schedule.warmupFraction = warmup;
    c.schedule.cosineAnneal = false;
    c.weightDecay = 5e-4;
    c.batchPerTower = batch;
    c.epochs = epochs;
    c.checkpointEvery = 500;
}

} // namespace

TrainConfig defaultConfigFor(const std::string& model)
{
    findModel(model); // UnknownName listing the models
    TrainConfig c;
    c.model = model;
    if (model == "cifar10-tutorial") {
        c.optimizer.kind = "sgd";
        c.schedule.kind = LrSchedule::Kind::Exponential;
        c.schedule.lr = 0.1;
        c.schedule.decayRate = 0.1;
        c.schedule.decayEpochs = 350;
        c.batchPerTower = 128;
        c.emaDecay = 0.9999;
        c.steps = 10000;
        c.checkpointEvery = 1000;
        c.evalEvery = 2000;
        c.logEvery = 10;
    } else if (model == "cifar10-resnet") {
        nesterovOneCycle(c, 0.2, 0.2, 128, 12);
        c.evalEvery = 390;
    } else if (model == "fashion-fast") {
        nesterovOneCycle(c, 0.1, 0.15, 64, 8);
        c.evalEvery = 500;
        c.logEvery = 50;
    } else if (model == "fashion-wide") {
        nesterovOneCycle(c, 0.1, 0.15, 64, 20);
        c.evalEvery = 1000;
        c.logEvery = 50;
    } else if (model == "mnist-convnet") {
        c.optimizer.kind = "adam";
        c.schedule.kind = LrSchedule::Kind::Constant;
        c.schedule.lr = 1e-3;
        c.batchPerTower = 128;
        c.epochs = 2;
        c.checkpointEvery = 200;
        c.logEvery = 10;
    }
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
    if (info.numClasses != static_cast<int>(dataset.classNames.size()))
        throw InvalidArgument(model + " has " + std::to_string(info.numClasses) + " classes; " +
                              dataset.name + " has " + std::to_string(dataset.classNames.size()));
    Preprocessing p;
    if (source[2] == 3) {
        p = in[0] < source[0] ? cifarDistortions(static_cast<int>(in[0]))
                              : cifarPadCrop(dataset.train, 4);
    } else {
        // The longer recipe's wider network can use stronger augmentation.
        p = translateAndNormalize(dataset.train, model == "fashion-wide" ? 2 : 1);
        p.flip = dataset.name == "fashion-mnist"; // clothes mirror; digits do not
    }
    p.validateFor(source);
    return p;
}

} // namespace towers::engine
