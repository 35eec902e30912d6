#pragma once
// Inference with a checkpoint: it names its model, classes and preprocessing, so a Classifier
// needs nothing else. Used by `towers-cli classify` and `eval` and by the GUI's Classify page.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/data/preprocessing.h"
#include "engine/ops/precision.h"
#include "engine/train/checkpoint.h"
#include "engine/train/evaluation.h"

namespace towers::engine {

struct ClassScore
{
    int label = 0;
    double probability = 0;
};

// One image as a layer of the network sees it or makes it (Classifier::layerOutputs), or one
// convolution's filters (Classifier::convolutionFilters), with the figures a look inside asks
// for first: is a layer dead (all zeros after its ReLU), saturated, or exploding?
struct LayerView
{
    std::string name;        // "input", a layer's name ("conv1", "layer1.res"), a parameter's
    std::string description; // the layer table's description ("3x3 conv, 32 filters, ...")
    // One example's: [H, W, C] for feature maps (channels last, as `values`), [F] for features;
    // filters: [O, I, kH, kW] (PyTorch's layout, as the checkpoint keeps them).
    Shape shape;
    std::vector<float> values;
    double mean = 0, stddev = 0, min = 0, max = 0;
    double zeroFraction = 0; // of the values that are exactly 0 (a ReLU's inactive units)
};

// Fills `view`'s statistics from its values.
void computeStatistics(LayerView& view);

// How often each channel of one layer is active over many images (Classifier::layerActivity):
// a channel that is zero everywhere on every image (a ReLU that has switched it off for good) is
// dead, and passes nothing on whatever the input.
struct LayerActivity
{
    std::string name;
    std::int64_t images = 0; // how many were looked at
    // Per channel (the last axis of the layer's output: the feature maps' channels, a dense
    // layer's features), the images on which it is non-zero somewhere.
    std::vector<std::int64_t> activeIn;
    std::int64_t channels() const { return std::int64_t(activeIn.size()); }
    // The channels active on no image.
    std::vector<std::int64_t> deadChannels() const;
};

// Where a Classifier computes: the CPU (oneDNN), or one GPU (the CUDA backend, as a GPU tower
// evaluates during training).
struct InferenceDevice
{
    std::string backend = "onednn"; // "onednn" or "cuda"
    int gpu = 0;                    // for "cuda"
    // Tests: the ops of a stand-in device for the precision decided and `gpu`, instead of
    // makeBackendOps.
    std::function<std::unique_ptr<Ops>(Precision, int gpu)> makeOps;
};

class Classifier
{
public:
    // Reads and validates the checkpoint (IoError / InvalidArgument naming the file and what is
    // wrong: not a Towers checkpoint, an unknown model, a tensor that does not fit) and loads its
    // weights, the moving averages when `useEma` and the checkpoint has them. `threads`: CPU
    // threads for the ops (0 = every core). `precision`: the convolutions and matrix products in
    // float32, or in bfloat16 as a --precision bf16 run's evaluations ran them (Unsupported with
    // the reason where this CPU cannot: cpu::bf16Unavailable). None: the precision the checkpoint
    // was trained in (trainedPrecision), so that its figures are its run's own, where this CPU
    // runs it; else float32, and precisionNote() says why. `device`: where it computes (the
    // weights go there once; each batch is copied there and its logits back); Unsupported with
    // the reason where there is no such GPU, or it cannot run the precision asked for.
    // `verified`: what verifyCheckpoint found of `checkpoint` already (towers-cli's choice of a
    // run's checkpoint that reads), so that it is read once more, not twice; none: checked here.
    explicit Classifier(const std::filesystem::path& checkpoint, bool useEma = true,
                        int threads = 0, std::optional<Precision> precision = std::nullopt,
                        const InferenceDevice& device = {},
                        const VerifiedCheckpoint* verified = nullptr);
    ~Classifier();

    const CheckpointInfo& info() const { return m_info; }
    const std::vector<std::string>& classNames() const { return m_info.classNames; }
    const Preprocessing& preprocessing() const { return m_recipe; }
    // The size [H, W, C] images are brought to before preprocessing: the dataset's own image size
    // (the evaluation crop is taken from it), or the model's input when the dataset is unknown.
    const Shape& sourceShape() const { return m_source; }
    bool usesEma() const { return m_usesEma; }
    Precision precision() const { return m_precision; }
    // Where it computes: "cpu" or "cuda:N".
    Device device() const;
    // Why precision() is not the one the checkpoint was trained in, when it was left to the
    // checkpoint and this CPU cannot run that ("" otherwise): "trained in bf16, evaluated in
    // float32 here: bf16 needs a CPU with AVX512_BF16 or AMX (...); oneDNN's kernels here are
    // for avx2".
    const std::string& precisionNote() const { return m_precisionNote; }
    int numClasses() const;

    // Test-time augmentation for logits(), probabilities() and evaluate() (not for the looks
    // inside the network, which show the image itself): None by default; Mirror averages each
    // image's logits with its mirror image's. mirrorUnseen() says why a checkpoint cannot
    // (its run never saw a mirror image), and setTestTimeAugmentation(Mirror) then throws
    // InvalidArgument with that reason.
    void setTestTimeAugmentation(TestTimeAugmentation tta);
    TestTimeAugmentation testTimeAugmentation() const { return m_tta; }
    // "" when the checkpoint's run trained on mirror images (its recipe flips and it did not turn
    // the distortions off), else why not: "its recipe does not mirror its training images (...)".
    std::string mirrorUnseen() const;

    // Class probabilities (softmax of the logits) of every image of `images` (8-bit HWC of
    // sourceShape(); labels are ignored), in the evaluation form of the checkpoint's recipe.
    std::vector<std::vector<double>> probabilities(const ImageSet& images);
    // The logits (the model's outputs, before the softmax) of every image of `images`, as above.
    std::vector<std::vector<double>> logits(const ImageSet& images);
    // The softmax of one image's logits (what probabilities() gives for it).
    static std::vector<double> softmax(const std::vector<double>& logits);
    // The k most probable classes, most probable first.
    static std::vector<ClassScore> topK(const std::vector<double>& probabilities, int k);

    // Image `index` of `images` (as probabilities() takes them) through the network: the input
    // as the model gets it (preprocessed), then every layer of the layer table's output, the
    // last being the logits.
    std::vector<LayerView> layerOutputs(const ImageSet& images, std::int64_t index = 0);
    // The first `count` images of `images` (every one when count <= 0) through the network in
    // batches of `batchSize`: per layer of the layer table, on how many images each channel is
    // active. `stop`, asked between batches, ends it early with what was counted.
    std::vector<LayerActivity> layerActivity(const ImageSet& images, std::int64_t count = 0,
                                             int batchSize = 100,
                                             const std::function<bool()>& stop = {});
    // The weights of every convolution (the moving averages when usesEma()), first layer first.
    std::vector<LayerView> convolutionFilters() const;

    // Precision @ 1, per-class accuracy and confusion matrix over every example of `set`.
    EvalResult evaluate(const ImageSet& set, int batchSize = 250);

private:
    // ShapeError unless `images` are of sourceShape().
    void requireSourceShape(const ImageSet& images) const;
    // The network's forward pass in evaluation mode on `x` (host images), on the device.
    const Tensor& forward(ExecContext& ctx, const Tensor& x);

    CheckpointInfo m_info;
    Preprocessing m_recipe;
    Shape m_source;
    bool m_usesEma = false;
    Precision m_precision = Precision::Float32;
    std::string m_precisionNote;
    TestTimeAugmentation m_tta = TestTimeAugmentation::None;
    // Declared first, destroyed last: on a GPU, the tensors go before their stream.
    std::unique_ptr<Ops> m_ops;
    std::unique_ptr<Model> m_model;
    Tensor m_deviceInput; // the batch on the device, reused
    Tensor m_mirrored;    // a batch's mirror images (test-time augmentation), reused
};

} // namespace towers::engine
