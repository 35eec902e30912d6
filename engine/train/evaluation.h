#pragma once
// Evaluation over a whole labelled set: precision @ 1 (the tutorial's cifar10_eval), per-class
// accuracy and the confusion matrix. Every example is counted exactly once, the last partial
// batch included.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engine/models/model.h"

namespace towers::engine {

// Fills `images` (Float32 [end - begin, H, W, C]) and `labels` (Int32 [end - begin]) with examples
// [begin, end) of the evaluation set, resizing them with Tensor::ensure (the data pipeline's
// evaluationBatch). May be called from several threads at once, each with its own tensors.
using EvalBatchFn =
    std::function<void(std::int64_t begin, std::int64_t end, Tensor& images, Tensor& labels)>;

// Precision @ 5's rule (TensorFlow's in_top_k with k = 5): whether class `truth` is among the five
// highest of `scores` (a row of logits, or of probabilities), ties at the fifth counted in (fewer
// than five scores above it).
bool amongTopFive(std::span<const double> scores, int truth);
// Whether precision @ 5 is worth reporting for `classes` classes: more than 10, where five are a
// fraction of them (CIFAR-100's 100).
constexpr bool reportsTopFive(int classes)
{
    return classes > 10;
}

struct EvalResult
{
    int numClasses = 0;
    std::int64_t examples = 0, correct = 0;
    double precisionAt1 = 0; // correct / examples
    // Precision @ 5 (TensorFlow's in_top_k with k = 5): the examples whose true class is among
    // the five highest logits, ties at the fifth counted in (fewer than five logits above it).
    // Reported (hasTop5) for more than 10 classes, where five are a fraction of them (CIFAR-100);
    // counted always.
    std::int64_t correctTop5 = 0;
    double precisionAt5 = 0; // correctTop5 / examples
    bool hasTop5() const { return reportsTopFive(numClasses); }
    double meanCrossEntropy = 0; // over the examples (finish(): crossEntropySum / examples)
    double crossEntropySum = 0;  // the examples' summed cross-entropy (add, merge)
    std::vector<std::int64_t> classCounts; // examples per true class
    // Per true class, its examples counted in correctTop5: the class's recall at 5.
    std::vector<std::int64_t> classTop5;
    std::vector<double> perClassAccuracy; // correct / count per class (0 without examples)
    std::vector<double> perClassTop5;     // classTop5 / count per class (0 without examples)
    std::vector<std::int64_t> confusion;  // numClasses x numClasses, row = true, column = predicted
    std::int64_t step = 0; // the global step the weights are from (set by the trainer)
    bool ema = false;      // evaluated with the moving averages of the weights
    // The set evaluated, as the trainer names it: "test", or "validation" for a run that holds
    // one out of its training images (TrainConfig::validation).
    std::string set = "test";
    double seconds = 0;
    bool complete = true; // false: cancelled part-way (the counts cover only what ran)

    explicit EvalResult(int classes = 0);
    std::int64_t confusionAt(int truth, int predicted) const;
    // Counts a batch: logits [N, classes] (float), labels Int32 [N] in [0, classes), and the
    // batch's summed cross-entropy. The prediction is the arg max (the first on ties); the top 5
    // as for correctTop5.
    void add(const Tensor& logits, const Tensor& labels, double batchCrossEntropy);
    // Adds another partial result of the same class count.
    void merge(const EvalResult& other);
    // Computes the ratios from the counts.
    void finish();
};

// One class's scores from a confusion matrix (row = true, column = predicted), as scikit-learn's
// classification_report gives them: recall is the class's accuracy (its images found), precision
// the share of the answers "this class" that are right, F1 their harmonic mean; 0 where a
// denominator is 0 (a class never predicted has precision 0).
struct ClassScores
{
    std::int64_t images = 0, predicted = 0, correct = 0;
    double precision = 0, recall = 0, f1 = 0;
};
// Per class of the `classes` x `classes` `confusion`; InvalidArgument when its size does not fit.
std::vector<ClassScores> classScores(const std::vector<std::int64_t>& confusion, int classes);
// The unweighted mean of the classes' F1 over the classes with images (scikit-learn's macro
// average leaves none out; here a class without test images does not drag the mean down).
double macroF1(const std::vector<ClassScores>& scores);

// Test-time augmentation: what an evaluation averages each image's logits over. Mirror: the image
// and its left-right mirror image (the fast CIFAR-10 trainers' flip), for a network that trained
// on mirrored images (Preprocessing::flip); twice the forward passes.
enum class TestTimeAugmentation
{
    None,
    Mirror
};
// "none" or "mirror", and back (InvalidArgument naming the choices).
const char* testTimeAugmentationName(TestTimeAugmentation t);
TestTimeAugmentation testTimeAugmentationFromName(const std::string& name);

// The left-right mirror images of a host batch of images ([N, H, W, C], any dtype): `mirrored`
// is made [N, H, W, C] of the same dtype with column j of each row the source's column W - 1 - j.
void mirrorImages(const Tensor& images, Tensor& mirrored);
// The element-wise mean of two host tensors of logits of the same shape (float32 or float64),
// into `mean` (made of their shape and dtype): (a + b) / 2 in double, rounded once.
void meanOfLogits(const Tensor& a, const Tensor& b, Tensor& mean);
// The summed cross-entropy of host logits [N, classes] (float32 or float64) against labels Int32
// [N] in [0, classes), in double: the loss of evaluation where the logits are averaged on the host.
double summedCrossEntropy(const Tensor& logits, const Tensor& labels);

// Evaluates `model` in inference mode on examples [0, count) in batches of `batchSize` drawn from
// `batches`. With parts > 1, only the batches b with b % parts == part are evaluated (the share of
// one tower; merge the parts and finish()). `cancelled`, when given, is asked before each batch:
// true ends the evaluation there with complete = false. `tta`: Mirror averages each image's logits
// with its mirror image's (two forward passes a batch; the loss and the prediction are the mean
// logits'). Throws InvalidArgument for count < 1, batchSize < 1, or a callback that produces the
// wrong shapes or labels out of range.
using CancelFn = std::function<bool()>;
EvalResult evaluate(Model& model, Ops& ops, std::int64_t count, int batchSize,
                    const EvalBatchFn& batches, int part = 0, int parts = 1,
                    const CancelFn& cancelled = {},
                    TestTimeAugmentation tta = TestTimeAugmentation::None);

} // namespace towers::engine
