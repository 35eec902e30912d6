#include "app/inference/test_set_predictions.h"

#include <algorithm>
#include <string>

#include "engine/errors.h"

namespace towers::app {

double TestSetPredictions::classAccuracy(int c) const
{
    const auto n = classCounts.at(std::size_t(c));
    return n > 0 ? double(classCorrect[std::size_t(c)]) / double(n) : 0;
}

namespace {

// Most confident first, set order among equals.
void byConfidence(std::vector<std::int64_t>& indices, const std::vector<float>& confidence)
{
    if (confidence.empty()) return;
    std::stable_sort(indices.begin(), indices.end(), [&](std::int64_t a, std::int64_t b) {
        return confidence[std::size_t(a)] > confidence[std::size_t(b)];
    });
}

} // namespace

std::vector<std::int64_t> TestSetPredictions::cell(int t, int p) const
{
    std::vector<std::int64_t> out;
    for (std::size_t i = 0; i < truth.size(); ++i)
        if (truth[i] == t && predicted[i] == p) out.push_back(std::int64_t(i));
    byConfidence(out, confidence);
    return out;
}

std::vector<std::int64_t> TestSetPredictions::confidentMistakes(std::size_t count) const
{
    std::vector<std::int64_t> out;
    for (std::size_t i = 0; i < truth.size(); ++i)
        if (truth[i] != predicted[i]) out.push_back(std::int64_t(i));
    byConfidence(out, confidence);
    if (out.size() > count) out.resize(count);
    return out;
}

TestSetPredictions classifyTestSet(engine::Classifier& classifier, const engine::ImageSet& set,
                                   const std::atomic<bool>* cancel, std::atomic<std::int64_t>* done,
                                   std::int64_t chunk)
{
    const engine::Shape source = classifier.sourceShape();
    if (set.imageShape() != source)
        throw engine::InvalidArgument("the checkpoint takes images of " + source.str() +
                                      ", the set has " + set.imageShape().str());
    const int classes = classifier.numClasses();
    TestSetPredictions r;
    r.numClasses = classes;
    r.truth.reserve(std::size_t(set.count));
    r.predicted.reserve(std::size_t(set.count));
    r.confidence.reserve(std::size_t(set.count));
    r.confusion.assign(std::size_t(classes) * std::size_t(classes), 0);
    r.classCounts.assign(std::size_t(classes), 0);
    r.classCorrect.assign(std::size_t(classes), 0);
    r.classTop5.assign(std::size_t(classes), 0);
    chunk = std::max<std::int64_t>(1, chunk);
    engine::ImageSet part;
    part.height = set.height;
    part.width = set.width;
    part.channels = set.channels;
    for (std::int64_t begin = 0; begin < set.count; begin += chunk) {
        if (cancel && cancel->load()) throw engine::Error("cancelled");
        const std::int64_t end = std::min(set.count, begin + chunk);
        part.count = end - begin;
        part.pixels.assign(set.image(begin), set.image(begin) + part.count * set.imageBytes());
        part.labels.assign(set.labels.begin() + begin, set.labels.begin() + end);
        const auto probs = classifier.probabilities(part);
        for (std::int64_t i = 0; i < part.count; ++i) {
            const auto& p = probs[std::size_t(i)];
            const int truth = part.labels[std::size_t(i)];
            if (truth < 0 || truth >= classes)
                throw engine::InvalidArgument(
                    "example " + std::to_string(begin + i) + " has label " + std::to_string(truth) +
                    ", outside the checkpoint's " + std::to_string(classes) + " classes");
            // The arg max, the first on ties (as engine::EvalResult counts).
            const int predicted = int(std::max_element(p.begin(), p.end()) - p.begin());
            r.truth.push_back(truth);
            r.predicted.push_back(predicted);
            r.confidence.push_back(float(p[std::size_t(predicted)]));
            if (engine::amongTopFive(p, truth)) {
                ++r.correctTop5;
                ++r.classTop5[std::size_t(truth)];
            }
            ++r.confusion[std::size_t(truth) * std::size_t(classes) + std::size_t(predicted)];
            ++r.classCounts[std::size_t(truth)];
            if (truth == predicted) {
                ++r.correct;
                ++r.classCorrect[std::size_t(truth)];
            }
        }
        if (done) done->store(end);
    }
    return r;
}

} // namespace towers::app
