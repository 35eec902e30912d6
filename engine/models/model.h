#pragma once
// A classification network: a layer sequence, its input shape and class count, plus the loss of
// the seeds (mean softmax cross-entropy + weight-decay terms).
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/nn/sequential.h"

namespace towers::engine {

struct LossValue
{
    double crossEntropy = 0; // mean over the batch
    double weightDecay = 0;  // sum of weightDecay * 0.5 * ||w||^2 (TensorFlow's l2_loss)
    double total() const { return crossEntropy + weightDecay; }
};

// A loss on its way to the host (Model::copyLoss): page-locked Float64 [1] each.
struct LossCopy
{
    Tensor crossEntropy, weightDecay;
    // What was copied (once the copy has run).
    LossValue value() const;
};

// One row of a model's layer table, for `towers-cli models` and the GUI.
struct LayerRow
{
    std::string name, kind, description;
    Shape outputShape;           // for a batch of 1
    std::int64_t parameters = 0; // trainable elements, its children's included
    double forwardFlops = 0;     // per example, its children's included
    // What a block holds: a residual block's layers; a concat's branches, each a row of kind
    // "branch" ("branch 1", ...) whose children are its layers (none: it passes the input).
    std::vector<LayerRow> children;
};

// A layer table's rows in the order they are shown: each row, then its children's, with how deep
// it is in its blocks (0: a layer of the network itself).
struct ShownLayerRow
{
    const LayerRow* row;
    int depth;
};
std::vector<ShownLayerRow> shownLayerRows(const std::vector<LayerRow>& rows);

class Model
{
public:
    // inputShape: one example, [H, W, C].
    Model(std::string name, Shape inputShape, int numClasses, std::unique_ptr<Sequential> net);

    const std::string& name() const { return m_name; }
    const Shape& inputShape() const { return m_inputShape; }
    int numClasses() const { return m_numClasses; }
    Sequential& net() { return *m_net; }
    DType dtype() const { return m_dtype; }

    // Every parameter and buffer, in state_dict order. Pointers stay valid for the model's life.
    const std::vector<Parameter*>& parameters() const { return m_params; }
    Parameter& parameter(const std::string& name) const; // UnknownName if absent
    // The classifier's parameters: those of the last layer that has any (the final linear layer,
    // whose outputs are the classes).
    std::vector<Parameter*> classifierParameters() const;
    // Number of trainable elements.
    std::int64_t parameterCount() const;
    std::vector<LayerRow> layerTable() const;
    // Floating-point operations of one training step per example: forward, backward data (except
    // for the first layer, whose input needs no gradient) and backward weights.
    double trainingFlopsPerExample() const;
    // Floating-point operations of one forward pass per example (inference: eval and classify).
    double inferenceFlopsPerExample() const;

    // Draws every parameter from its initialiser with a generator seeded by `seed`.
    void initialize(std::uint64_t seed);
    // Converts parameters and buffers to another float dtype (Float64 for the gradient checker).
    void convertTo(DType dtype);
    // Moves the float parameters and buffers to `device` (a GPU tower's replica); integer
    // bookkeeping (num_batches_tracked) stays on the host, where the layers count. Gradients are
    // dropped and come back on the device with the next backward.
    void moveTo(const Device& device);
    const Device& device() const { return m_device; }

    // Replaces the weight-decay coefficient of every convolution and linear weight (not biases,
    // not batch norm) when coefficient >= 0; a negative value keeps the model's own coefficients.
    void overrideWeightDecay(double coefficient);
    // Leaves the weight decay to the optimizer (AdamW's decoupled decay: Optimizer::decaysWeights)
    // when `on`: the loss has no weight-decay term and the gradients no L2 part. Off by default.
    void setWeightDecayInOptimizer(bool on) { m_decayInOptimizer = on; }
    // Label smoothing of the training loss (softmaxCrossEntropyForward's `smoothing`, in [0, 1);
    // 0, the default: none): loss() and backward() train towards the smoothed targets.
    // InvalidArgument outside [0, 1).
    void setLabelSmoothing(double smoothing);
    double labelSmoothing() const { return m_labelSmoothing; }
    // Enables or disables every dropout layer (disabled: the identity, also in training).
    void setDropoutEnabled(bool enabled);

    // Runs the network on images [N, H, W, C]; returns the logits [N, classes]. `images` must stay
    // unchanged until backward().
    const Tensor& forward(ExecContext& ctx, const Tensor& images);
    // What layer i of layerTable() gave in the latest forward() (the last layer's: the logits).
    const Tensor& layerOutput(std::size_t i) const;
    // The loss of the latest forward against Int32 labels [N]: computeLoss() and readLoss().
    LossValue loss(ExecContext& ctx, const Tensor& labels);
    // Computes the loss where the model lives, without waiting for it: the cross-entropy and the
    // weight-decay term stay in device tensors until readLoss().
    void computeLoss(ExecContext& ctx, const Tensor& labels);
    // The loss computeLoss() computed, read back (on a GPU this waits for it: read it where the
    // host waits anyway).
    LossValue readLoss() const;
    // Copies the loss computeLoss() computed into `to` (made on first use) after the work issued
    // through `ops` so far, without waiting for it: read `to` once that work has finished
    // (Ops::waitFor a later mark, or synchronize()).
    void copyLoss(Ops& ops, LossCopy& to) const;
    // Overwrites the gradient of every trainable parameter with d(loss total)/d(parameter).
    // When `ready` is set, it is called once for every parameter and buffer as soon as backward
    // is done with it (its gradient final, weight decay included; a buffer is final after
    // forward), layer by layer from the last: the towers average those while backward goes on.
    void backward(ExecContext& ctx, const std::function<void(Parameter&)>& ready = {});
    // Gradient accumulation: backward() of part `part` (0 .. parts - 1) of a batch run as `parts`
    // equal parts one after the other (forward, computeLoss and backward each), so that after the
    // last part the gradients are those of the whole batch's mean loss: each part's cross-entropy
    // gradient scaled by 1 / (its examples x parts), the parts before the last summed where the
    // model lives (no `ready` for them, nor weight decay), the last's each added to that sum as
    // its layer finishes, then its weight decay and `ready`, as backward() reports them. parts 1
    // is backward(). InvalidArgument for a part out of range.
    void backwardPart(ExecContext& ctx, int part, int parts,
                      const std::function<void(Parameter&)>& ready = {});

    const Tensor& logits() const { return m_logits; }
    const Tensor& probabilities() const { return m_probs; }

private:
    std::string m_name;
    Shape m_inputShape;
    int m_numClasses;
    std::unique_ptr<Sequential> m_net;
    std::vector<Parameter*> m_params;
    // Each layer's parameters (a container's include its layers'), as indices into m_params.
    std::unordered_map<const Layer*, std::vector<std::size_t>> m_paramsOfLayer;
    DType m_dtype = DType::Float32;
    Device m_device;
    Tensor m_images, m_labels, m_logits, m_probs, m_dlogits;
    std::vector<Tensor> m_gradSums; // backwardPart: the earlier parts' gradients, summed
    Tensor m_netOutput; // the network's y: the logits, or their bfloat16 before conversion
    Tensor m_crossEntropy, m_weightDecay, m_zero; // Float64 [1]: the loss's terms, and a 0
    bool m_decayInOptimizer = false;
    double m_labelSmoothing = 0;
};

} // namespace towers::engine
