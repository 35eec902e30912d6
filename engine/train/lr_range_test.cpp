#include "engine/train/lr_range_test.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "engine/backends.h"
#include "engine/data/batch_loader.h"
#include "engine/data/validation_split.h"
#include "engine/errors.h"
#include "engine/train/memory_need.h"
#include "engine/train/recipe.h"
#include "engine/train/tower_set.h"
#include "engine/train/trainer.h"
#include "engine/train/training_session.h"

namespace towers::engine {

void LrRangeOptions::validate() const
{
    if (!(minLr > 0) || !std::isfinite(minLr))
        throw InvalidArgument("the range test's lowest learning rate must be > 0");
    if (!(maxLr > minLr) || !std::isfinite(maxLr))
        throw InvalidArgument("the range test's highest learning rate must be above its lowest");
    if (steps < 5 || steps > 100000)
        throw InvalidArgument("the range test takes 5 to 100000 steps, not " +
                              std::to_string(steps));
    if (!(divergeFactor > 1)) throw InvalidArgument("the divergence factor must be > 1");
    if (!(smoothing >= 0 && smoothing < 1))
        throw InvalidArgument("the loss smoothing must be in [0, 1)");
}

void suggestLearningRate(LrRangeResult& r)
{
    r.steepestLr = r.minimumLr = r.suggestedLr = 0;
    const auto& p = r.points;
    if (p.size() < 5) {
        r.note = "too few steps for a suggestion";
        return;
    }
    std::size_t best = 0;
    for (std::size_t i = 1; i < p.size(); ++i)
        if (p[i].smoothed < p[best].smoothed) best = i;
    r.minimumLr = p[best].lr;
    // The steepest descent before the minimum, leaving out the first tenth (the average's
    // start), by central differences against log lr.
    const std::size_t from = std::max<std::size_t>(1, p.size() / 10);
    double steepest = 0;
    std::size_t at = 0;
    for (std::size_t i = from; i + 1 < p.size() && i < best; ++i) {
        const double slope = (p[i + 1].smoothed - p[i - 1].smoothed) /
                             (std::log(p[i + 1].lr) - std::log(p[i - 1].lr));
        if (slope < steepest) {
            steepest = slope;
            at = i;
        }
    }
    // A fall of less than 5 % before the loss runs away is noise, not a descent.
    const double fall = p.front().smoothed - p[best].smoothed;
    if (fall < 0.05 * std::abs(p.front().smoothed)) at = 0;
    if (at > 0) {
        r.steepestLr = p[at].lr;
        r.suggestedLr = r.steepestLr;
        r.note = "where the smoothed loss falls fastest";
    } else {
        r.suggestedLr = r.minimumLr / 10;
        r.note = "a tenth of the learning rate of the lowest loss: the loss has no clear descent";
    }
}

LrRangeResult runLrRangeTest(const TrainConfig& config, const Dataset& dataset,
                             const LrRangeOptions& options,
                             const std::function<bool(const LrRangePoint&)>& onPoint)
{
    options.validate();
    TrainConfig c = config;
    c.validate();
    c.checkPrecision();
    const Preprocessing recipe =
        preprocessingFor(resolveModel(c.model, c.modelDefinition), dataset);
    c.classes = int(dataset.classNames.size());

    const LoaderOptions lo = loaderOptionsFor(c);
    choosePinnedDevice(c.backend, c.gpus, c.towers, 0);
    // The images the run would train on: without its validation share (TrainConfig::validation).
    std::optional<ValidationSplit> split;
    if (c.validation > 0) split = splitValidation(dataset.train, c.classes, c.validation);
    BatchLoader loader(split ? split->train : dataset.train, recipe, lo);
    if (loader.stepsPerEpoch() < 1)
        throw InvalidArgument("the training set has fewer examples than one global batch of " +
                              std::to_string(c.towers * c.examplesPerTowerStep()));
    // Refused before the towers take memory they cannot have (it writes no checkpoint: the note
    // of one that may not fit says nothing here).
    (void)checkMemory(c, nullptr, 0, c.initFrom.empty() ? StartRead::Nothing : StartRead::InitFrom);
    TowerSet towers(towerSetOptionsFor(c));
    // A fine-tuning run's test starts where its run would: from the checkpoint's weights.
    if (!c.initFrom.empty()) {
        Model& model = towers.model();
        towers.loadState(
            startingWeights(c.initFrom, model, dataset.classNames, dataset.train.imageShape())
                .weights,
            towers.optimizer().state(model.parameters()), {});
    }

    LrRangeResult r;
    double average = 0, lowest = INFINITY;
    const double ratio = options.maxLr / options.minLr;
    for (int i = 0; i < options.steps; ++i) {
        LrRangePoint p;
        p.step = i;
        p.lr = options.minLr * std::pow(ratio, double(i) / double(options.steps - 1));
        const TowerStepResult s = towers.step(loader.next(), i, p.lr);
        p.loss = s.loss;
        if (!s.finite || !std::isfinite(s.loss)) {
            r.diverged = true;
            break;
        }
        average = options.smoothing * average + (1 - options.smoothing) * s.loss;
        p.smoothed = average / (1 - std::pow(options.smoothing, i + 1));
        r.points.push_back(p);
        lowest = std::min(lowest, p.smoothed);
        const bool keepOn = !onPoint || onPoint(p);
        if (i > 0 && p.smoothed > options.divergeFactor * lowest) {
            r.diverged = true;
            break;
        }
        if (!keepOn) {
            r.stopped = true;
            break;
        }
    }
    suggestLearningRate(r);
    return r;
}

} // namespace towers::engine
