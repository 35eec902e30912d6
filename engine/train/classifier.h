#pragma once
// Inference with a checkpoint: it names its model, classes and preprocessing, so a Classifier
// needs nothing else. Used by `towers-cli classify` and `eval` and by the GUI's Classify page.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

#include "engine/data/preprocessing.h"
#include "engine/train/checkpoint.h"
#include "engine/train/evaluation.h"

namespace towers::engine {

struct ClassScore
{
    int label = 0;
    double probability = 0;
};

class Classifier
{
public:
    // Reads and validates the checkpoint (IoError / InvalidArgument naming the file and what is
    // wrong: not a Towers checkpoint, an unknown model, a tensor that does not fit) and loads its
    // weights, the moving averages when `useEma` and the checkpoint has them. `threads`: CPU
    // threads for the ops (0 = every core).
    explicit Classifier(const std::filesystem::path& checkpoint, bool useEma = true,
                        int threads = 0);
    ~Classifier();

    const CheckpointInfo& info() const { return m_info; }
    const std::vector<std::string>& classNames() const { return m_info.classNames; }
    const Preprocessing& preprocessing() const { return m_recipe; }
    // The size [H, W, C] images are brought to before preprocessing: the dataset's own image size
    // (the evaluation crop is taken from it), or the model's input when the dataset is unknown.
    const Shape& sourceShape() const { return m_source; }
    bool usesEma() const { return m_usesEma; }
    int numClasses() const;

    // Class probabilities (softmax of the logits) of every image of `images` (8-bit HWC of
    // sourceShape(); labels are ignored), in the evaluation form of the checkpoint's recipe.
    std::vector<std::vector<double>> probabilities(const ImageSet& images);
    // The logits (the model's outputs, before the softmax) of every image of `images`, as above.
    std::vector<std::vector<double>> logits(const ImageSet& images);
    // The softmax of one image's logits (what probabilities() gives for it).
    static std::vector<double> softmax(const std::vector<double>& logits);
    // The k most probable classes, most probable first.
    static std::vector<ClassScore> topK(const std::vector<double>& probabilities, int k);

    // Precision @ 1, per-class accuracy and confusion matrix over every example of `set`.
    EvalResult evaluate(const ImageSet& set, int batchSize = 250);

private:
    CheckpointInfo m_info;
    Preprocessing m_recipe;
    Shape m_source;
    bool m_usesEma = false;
    std::unique_ptr<Model> m_model;
    std::unique_ptr<Ops> m_ops;
};

} // namespace towers::engine
