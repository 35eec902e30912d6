#pragma once
// The learning-rate range test (Leslie Smith's, as fastai's lr_find and PyTorch Lightning's
// Tuner.lr_find run it): a few steps of the real training (the configuration's model, towers,
// optimizer, batch and distortions) from the seed's weights (or, for a run that starts from a
// checkpoint, TrainConfig::initFrom, from that checkpoint's, as the run would), the learning rate
// rising
// exponentially from minLr to maxLr, stopped when the smoothed loss runs away. Where the smoothed
// loss falls fastest (against log lr) is a good learning rate; the minimum's tenth, a safe one.
// Nothing is written: no run folder, no checkpoint.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/train/train_config.h"

namespace towers::engine {

struct LrRangeOptions
{
    double minLr = 1e-5, maxLr = 10;
    int steps = 100;
    // Stop once the smoothed loss exceeds this many times its minimum so far.
    double divergeFactor = 4;
    // The loss's exponential moving average's weight of the past (bias-corrected).
    double smoothing = 0.9;
    // Throws InvalidArgument naming the field.
    void validate() const;
};

struct LrRangePoint
{
    int step = 0;
    double lr = 0, loss = 0, smoothed = 0;
};

struct LrRangeResult
{
    std::vector<LrRangePoint> points;
    bool diverged = false; // stopped early: the loss ran away (or was not finite)
    bool stopped = false;  // stopped early by the caller
    // Where the smoothed loss fell fastest against log lr (before its minimum), the minimum's
    // learning rate, and the suggestion: the steepest point, or a tenth of the minimum when the
    // curve has no clear descent (it falls less than 5 % first); 0 when too few points were
    // taken.
    double steepestLr = 0, minimumLr = 0, suggestedLr = 0;
    std::string note; // how the suggestion was made, or why there is none
};

// Runs the test for `config` (its dataset already loaded as `dataset`) on its towers, on the images
// its run would train on (without the validation share of TrainConfig::validation).
// `onPoint` after each step; returning false stops the test there. Throws like a Trainer for a
// configuration that cannot train.
LrRangeResult runLrRangeTest(const TrainConfig& config, const Dataset& dataset,
                             const LrRangeOptions& options,
                             const std::function<bool(const LrRangePoint&)>& onPoint = {});

// The suggestion for `points` (what runLrRangeTest fills in), on its own for tests.
void suggestLearningRate(LrRangeResult& result);

} // namespace towers::engine
