#include "engine/train/evaluation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>

#include "engine/ops/op_checks.h"

namespace towers::engine {

EvalResult::EvalResult(int classes)
    : numClasses(classes), classCounts(std::size_t(classes), 0), classTop5(std::size_t(classes), 0),
      perClassAccuracy(std::size_t(classes), 0.0), perClassTop5(std::size_t(classes), 0.0),
      confusion(std::size_t(classes) * std::size_t(classes), 0)
{
}

std::int64_t EvalResult::confusionAt(int truth, int predicted) const
{
    if (truth < 0 || truth >= numClasses || predicted < 0 || predicted >= numClasses)
        throw InvalidArgument("confusion matrix index out of range");
    return confusion[std::size_t(truth) * std::size_t(numClasses) + std::size_t(predicted)];
}

void EvalResult::add(const Tensor& logits, const Tensor& labels, double batchCrossEntropy)
{
    const std::int64_t n = labels.numel();
    requireShape(logits, Shape{n, numClasses}, "evaluation logits");
    requireDType(labels, DType::Int32, "evaluation labels");
    const std::int32_t* l = labels.data<std::int32_t>();
    std::vector<double> row(static_cast<std::size_t>(numClasses)); // example i's logits
    for (std::int64_t i = 0; i < n; ++i) {
        const int truth = l[i];
        if (truth < 0 || truth >= numClasses)
            throw InvalidArgument("evaluation label " + std::to_string(truth) + " of example " +
                                  std::to_string(i) + " of the batch is out of range [0, " +
                                  std::to_string(numClasses) + ")");
        for (int c = 0; c < numClasses; ++c) row[std::size_t(c)] = logits.at(i * numClasses + c);
        // The arg max, the first on ties.
        const int best = int(std::max_element(row.begin(), row.end()) - row.begin());
        if (amongTopFive(row, truth)) {
            ++correctTop5;
            ++classTop5[std::size_t(truth)];
        }
        ++classCounts[std::size_t(truth)];
        ++confusion[std::size_t(truth) * std::size_t(numClasses) + std::size_t(best)];
        if (best == truth) ++correct;
    }
    examples += n;
    crossEntropySum += batchCrossEntropy;
}

bool amongTopFive(std::span<const double> scores, int truth)
{
    const double own = scores[std::size_t(truth)];
    int above = 0;
    for (std::size_t c = 0; c < scores.size() && above < 5; ++c) above += scores[c] > own;
    return above < 5;
}

void EvalResult::merge(const EvalResult& o)
{
    if (o.numClasses != numClasses)
        throw InvalidArgument("merging evaluation results of different class counts");
    examples += o.examples;
    correct += o.correct;
    correctTop5 += o.correctTop5;
    crossEntropySum += o.crossEntropySum;
    complete = complete && o.complete;
    for (std::size_t i = 0; i < classCounts.size(); ++i) {
        classCounts[i] += o.classCounts[i];
        classTop5[i] += o.classTop5[i];
    }
    for (std::size_t i = 0; i < confusion.size(); ++i) confusion[i] += o.confusion[i];
}

void EvalResult::finish()
{
    precisionAt1 = examples ? double(correct) / double(examples) : 0.0;
    precisionAt5 = examples ? double(correctTop5) / double(examples) : 0.0;
    // From the sums, so that finishing again (a merged part that finished itself) changes nothing.
    meanCrossEntropy = examples ? crossEntropySum / double(examples) : 0.0;
    for (int c = 0; c < numClasses; ++c) {
        const std::int64_t n = classCounts[std::size_t(c)];
        perClassAccuracy[std::size_t(c)] = n ? double(confusionAt(c, c)) / double(n) : 0.0;
        perClassTop5[std::size_t(c)] = n ? double(classTop5[std::size_t(c)]) / double(n) : 0.0;
    }
}

std::vector<ClassScores> classScores(const std::vector<std::int64_t>& confusion, int classes)
{
    if (classes < 0 || confusion.size() != std::size_t(classes) * std::size_t(classes))
        throw InvalidArgument("a confusion matrix of " + std::to_string(confusion.size()) +
                              " cells is not " + std::to_string(classes) + " x " +
                              std::to_string(classes));
    std::vector<ClassScores> out(static_cast<std::size_t>(classes));
    for (int t = 0; t < classes; ++t)
        for (int p = 0; p < classes; ++p) {
            const std::int64_t n =
                confusion[std::size_t(t) * std::size_t(classes) + std::size_t(p)];
            out[std::size_t(t)].images += n;
            out[std::size_t(p)].predicted += n;
            if (t == p) out[std::size_t(t)].correct += n;
        }
    for (ClassScores& c : out) {
        c.recall = c.images ? double(c.correct) / double(c.images) : 0.0;
        c.precision = c.predicted ? double(c.correct) / double(c.predicted) : 0.0;
        c.f1 = c.precision + c.recall > 0 ? 2 * c.precision * c.recall / (c.precision + c.recall)
                                          : 0.0;
    }
    return out;
}

double macroF1(const std::vector<ClassScores>& scores)
{
    double sum = 0;
    int n = 0;
    for (const ClassScores& c : scores)
        if (c.images > 0) {
            sum += c.f1;
            ++n;
        }
    return n ? sum / n : 0.0;
}

const char* testTimeAugmentationName(TestTimeAugmentation t)
{
    return t == TestTimeAugmentation::Mirror ? "mirror" : "none";
}

TestTimeAugmentation testTimeAugmentationFromName(const std::string& name)
{
    if (name == "none") return TestTimeAugmentation::None;
    if (name == "mirror") return TestTimeAugmentation::Mirror;
    throw InvalidArgument("test-time augmentation: expected \"none\" or \"mirror\", got \"" + name +
                          "\"");
}

void mirrorImages(const Tensor& images, Tensor& mirrored)
{
    if (images.rank() != 4)
        throw ShapeError("mirrorImages: expected images [N, H, W, C], got " + images.describe());
    if (!images.device().isHost())
        throw InvalidArgument("mirrorImages: the images must be on the host");
    Tensor::ensure(mirrored, images.shape(), images.dtype());
    const std::int64_t rows = images.dim(0) * images.dim(1), width = images.dim(2);
    const std::size_t pixel = std::size_t(images.dim(3)) * dtypeSize(images.dtype());
    const auto* from = static_cast<const unsigned char*>(images.raw());
    auto* to = static_cast<unsigned char*>(mirrored.raw());
    for (std::int64_t r = 0; r < rows; ++r) {
        const unsigned char* row = from + std::size_t(r * width) * pixel;
        unsigned char* out = to + std::size_t(r * width) * pixel;
        for (std::int64_t j = 0; j < width; ++j)
            std::memcpy(out + std::size_t(j) * pixel, row + std::size_t(width - 1 - j) * pixel,
                        pixel);
    }
}

void meanOfLogits(const Tensor& a, const Tensor& b, Tensor& mean)
{
    requireShape(b, a.shape(), "meanOfLogits: the second logits");
    requireDType(b, a.dtype(), "meanOfLogits: the second logits");
    Tensor::ensure(mean, a.shape(), a.dtype());
    for (std::int64_t i = 0; i < a.numel(); ++i) mean.setAt(i, 0.5 * (a.at(i) + b.at(i)));
}

double summedCrossEntropy(const Tensor& logits, const Tensor& labels)
{
    if (logits.rank() != 2)
        throw ShapeError("summedCrossEntropy: expected logits [N, classes], got " +
                         logits.describe());
    const std::int64_t n = logits.dim(0), k = logits.dim(1);
    requireShape(labels, Shape{n}, "summedCrossEntropy: labels");
    requireDType(labels, DType::Int32, "summedCrossEntropy: labels");
    const std::int32_t* label = labels.data<std::int32_t>();
    double sum = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        if (label[i] < 0 || label[i] >= k)
            throw InvalidArgument("summedCrossEntropy: label " + std::to_string(label[i]) +
                                  " of example " + std::to_string(i) + " is not a class of " +
                                  std::to_string(k));
        double top = -INFINITY;
        for (std::int64_t c = 0; c < k; ++c) top = std::max(top, logits.at(i * k + c));
        double exps = 0;
        for (std::int64_t c = 0; c < k; ++c) exps += std::exp(logits.at(i * k + c) - top);
        sum += top + std::log(exps) - logits.at(i * k + label[i]);
    }
    return sum;
}

EvalResult evaluate(Model& model, Ops& ops, std::int64_t count, int batchSize,
                    const EvalBatchFn& batches, int part, int parts, const CancelFn& cancelled,
                    TestTimeAugmentation tta)
{
    if (count < 1) throw InvalidArgument("evaluation needs at least one example");
    if (batchSize < 1) throw InvalidArgument("evaluation batch size must be at least 1");
    if (parts < 1 || part < 0 || part >= parts)
        throw InvalidArgument("evaluation part out of range");
    if (!batches) throw InvalidArgument("evaluation needs a batch callback");
    const auto t0 = std::chrono::steady_clock::now();
    const Shape& in = model.inputShape();
    EvalResult r(model.numClasses());
    ExecContext ctx = ExecContext::forEvaluation(ops, std::uint64_t(part));
    Tensor images, labels, probs, loss, deviceImages, deviceLabels, hostLogits, hostLoss;
    Tensor mirrored, mirroredLogits, meanLogits; // test-time augmentation's
    const Device& device = model.device();
    // Logits where the host reads them, in `out` (their own bytes: the model's output is
    // overwritten by its next forward pass).
    const auto logitsOnHost = [&](const Tensor& logits, Tensor& out) {
        Tensor::ensure(out, logits.shape(), logits.dtype());
        if (device.isHost()) {
            out.copyFrom(logits);
            return;
        }
        ops.download(logits, out);
        ops.synchronize();
    };
    const std::int64_t numBatches = (count + batchSize - 1) / batchSize;
    for (std::int64_t b = part; b < numBatches; b += parts) {
        if (cancelled && cancelled()) {
            r.complete = false;
            break;
        }
        const std::int64_t begin = b * batchSize, end = std::min(count, begin + batchSize);
        batches(begin, end, images, labels);
        const std::string where =
            "evaluation batch [" + std::to_string(begin) + ", " + std::to_string(end) + ")";
        requireShape(images, Shape{end - begin, in[0], in[1], in[2]}, (where + " images").c_str());
        requireShape(labels, Shape{end - begin}, (where + " labels").c_str());
        const Tensor input = images.dtype() == model.dtype() ? images : images.to(model.dtype());
        const Tensor* x = &input;
        const Tensor* lab = &labels;
        if (!device.isHost()) { // a GPU tower: the batch goes there, the logits come back
            checks::labelsInRange(labels, model.numClasses()); // the GPU's loss does not look
            ops.upload(input, deviceImages);
            ops.upload(labels, deviceLabels);
            x = &deviceImages;
            lab = &deviceLabels;
        }
        const Tensor& logits = model.forward(ctx, *x);
        if (tta == TestTimeAugmentation::Mirror) {
            // The mean of the image's and its mirror image's logits; the loss of that mean, on
            // the host (a batch's logits are small).
            logitsOnHost(logits, hostLogits);
            mirrorImages(input, mirrored);
            const Tensor* mx = &mirrored;
            if (!device.isHost()) {
                ops.upload(mirrored, deviceImages);
                mx = &deviceImages;
            }
            logitsOnHost(model.forward(ctx, *mx), mirroredLogits);
            meanOfLogits(hostLogits, mirroredLogits, meanLogits);
            r.add(meanLogits, labels, 0);
            r.crossEntropySum += summedCrossEntropy(meanLogits, labels);
            continue;
        }
        // The loss issued before the host waits for the logits: on a GPU, one wait for both.
        ops.softmaxCrossEntropyForward(logits, *lab, 0.0, probs, loss); // plain, unsmoothed
        if (device.isHost()) {
            r.add(logits, labels, 0);
            r.crossEntropySum += loss.at(0) * double(end - begin);
            continue;
        }
        // Copied back on this context's stream and waited for there (Ops::download: the bytes
        // are in place once synchronize() has returned), not through the host's copy, which
        // waits for the whole device: two towers sharing a GPU evaluate side by side.
        Tensor::ensure(hostLogits, logits.shape(), logits.dtype());
        Tensor::ensure(hostLoss, loss.shape(), loss.dtype());
        ops.download(logits, hostLogits);
        ops.download(loss, hostLoss);
        ops.synchronize();
        r.add(hostLogits, labels, 0);
        r.crossEntropySum += hostLoss.at(0) * double(end - begin);
    }
    if (parts == 1) r.finish();
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

} // namespace towers::engine
