#pragma once
// Classifying a whole labelled set with a checkpoint, keeping every example's prediction so the
// Classify page can show the images behind any cell of the confusion matrix. Runs in chunks so a
// background job can report progress and stop early.
#include <atomic>
#include <cstdint>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/train/classifier.h"
#include "engine/train/evaluation.h"

namespace towers::app {

struct TestSetPredictions
{
    int numClasses = 0;
    std::vector<int> truth, predicted;   // per example of the set
    std::vector<float> confidence;       // per example: the predicted class's probability
    std::vector<std::int64_t> confusion; // numClasses x numClasses, row = truth, column = predicted
    std::vector<std::int64_t> classCounts, classCorrect;
    std::int64_t correct = 0;
    // The examples whose true class is among the five most probable (engine::amongTopFive), as
    // engine::EvalResult::correctTop5 counts them from the logits; and of them, each true class's.
    std::int64_t correctTop5 = 0;
    std::vector<std::int64_t> classTop5;

    std::int64_t examples() const { return std::int64_t(truth.size()); }
    double accuracy() const { return truth.empty() ? 0 : double(correct) / double(truth.size()); }
    double accuracyTop5() const
    {
        return truth.empty() ? 0 : double(correctTop5) / double(truth.size());
    }
    // Whether the top 5 are worth saying (engine::reportsTopFive: more than 10 classes).
    bool hasTop5() const { return engine::reportsTopFive(numClasses); }
    double classAccuracy(int c) const;
    // Indices of the examples of true class `truth` predicted as `predicted`, the most
    // confident prediction first (set order among equals).
    std::vector<std::int64_t> cell(int truth, int predicted) const;
    // The `count` wrong predictions the network was most sure of, most confident first: where
    // mislabelled examples and look-alike classes show first.
    std::vector<std::int64_t> confidentMistakes(std::size_t count) const;
};

// Classifies every example of `set` (images of classifier.sourceShape()) in chunks of `chunk`.
// `done` (optional) counts the examples classified so far; when `cancel` (optional) becomes true
// the work stops after the current chunk and throws engine::Error("cancelled"). Throws
// engine::InvalidArgument when the set's images or labels do not fit the checkpoint.
TestSetPredictions classifyTestSet(engine::Classifier& classifier, const engine::ImageSet& set,
                                   const std::atomic<bool>* cancel = nullptr,
                                   std::atomic<std::int64_t>* done = nullptr,
                                   std::int64_t chunk = 500);

} // namespace towers::app
