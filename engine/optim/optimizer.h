#pragma once
// The optimizer interface: updates the trainable parameters of one replica from their gradients,
// and exposes its state as named tensors for checkpoints. Every tower owns an optimizer; fed the
// same averaged gradients they make bitwise the same updates, so the replicas stay identical.
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/io/safetensors.h"
#include "engine/nn/layer.h"

namespace towers::engine {

// What makeOptimizer builds. `kind` is one of "sgd" (the tutorial's plain gradient descent),
// "momentum", "nesterov" (PyTorch's SGD with momentum / nesterov=True), "adam" (PyTorch's Adam;
// the MNIST seed's optimizer) or "adamw" (PyTorch's AdamW: Adam with each parameter's weight
// decay decoupled from its gradient). Fields that do not apply to the kind are ignored.
struct OptimizerOptions
{
    std::string kind = "sgd";
    double momentum = 0.9;                             // momentum, nesterov
    double dampening = 0;                              // momentum (nesterov requires 0)
    double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8; // adam (PyTorch's defaults)
};

class Optimizer
{
public:
    virtual ~Optimizer() = default;
    Optimizer(const Optimizer&) = delete;
    Optimizer& operator=(const Optimizer&) = delete;

    // "sgd", "momentum", "nesterov", "adam", "adamw".
    virtual std::string name() const = 0;
    // Whether the updates apply each parameter's weight decay themselves (AdamW), so that the
    // model must leave it out of the loss and the gradients (Model::setWeightDecayInOptimizer);
    // otherwise it is the model's L2 term, in the gradient the optimizer is given.
    virtual bool decaysWeights() const { return false; }
    // The state kept per trainable parameter ("momentum_buffer"; "exp_avg", "exp_avg_sq"); empty
    // for plain SGD.
    virtual std::vector<std::string> slotNames() const = 0;

    // One update of every trainable parameter in `params` from its gradient with learning rate
    // `lr` (finite, >= 0), then counts the step. Buffers (non-trainable) are left alone. Throws
    // InvalidArgument for a bad lr or a trainable parameter without a gradient. With a `skip`
    // flag (op_list.h's updates: [1] where the parameters live), the updates leave everything as
    // it is where the flag is set, decided there without the host waiting; the caller, once it
    // has read the flag, calls skipped() for a step that was. With `scalars` (a step's
    // StepScalars where the parameters live, as fillScalars() made them for this step and `lr`),
    // the updates read their learning rate, first step and bias corrections there when they run
    // (a replayed capture's are the step's own).
    void step(Ops& ops, const std::vector<Parameter*>& params, double lr, const Tensor& skip = {},
              const Tensor& scalars = {});
    // Gradient clipping by the global norm, PyTorch's clip_grad_norm_ (TensorFlow's
    // clip_by_global_norm): with maxNorm > 0, every step() first multiplies the trainable
    // parameters' gradients, in place, by min(1, maxNorm / (norm + 1e-6)), norm the square root of
    // the sum of all their squares (ops/clip_norm.h), computed where they live without the host
    // waiting. The gradients are those step() is given: with an L2 weight decay, the loss's
    // gradient holds its term (Model), with AdamW's decoupled decay it does not. 0 (the default)
    // clips nothing. Throws InvalidArgument for a negative or non-finite maxNorm.
    void setMaxGradNorm(double maxNorm);
    double maxGradNorm() const { return m_maxGradNorm; }
    // With `on`, every step() sums the squares of the gradients it is given (as clipping does,
    // where they live, without the host waiting), whether it clips or not: the norm to log.
    void setMeasureGradNorm(bool on) { m_measureGradNorm = on; }
    // Whether step() sums the gradients' squares: it measures them, or it clips.
    bool measuresGradNorm() const { return m_measureGradNorm || m_maxGradNorm > 0; }
    // The sum of the squares of the gradients of the latest step() that measured them (Float64
    // [1] where they live; the gradient norm before any clipping is its square root), else empty.
    const Tensor& gradSumSquares() const { return m_gradSumSquares; }
    // The values of the next step() with learning rate `lr` in a step's scalars: the learning
    // rate and momentum's first step here, Adam's bias corrections in Adam's.
    virtual void fillScalars(StepScalars& scalars, double lr) const;
    // The latest step() was skipped by its flag: it does not count (Adam's bias correction and
    // the momentum buffer's first step are as if it had not been taken).
    void skipped();
    // Steps taken (restored by loadState).
    std::int64_t stepCount() const { return m_steps; }

    // The state as named tensors: "optim.step" (Int64 scalar) and, for every trainable parameter
    // and slot, "optim.<parameter>.<slot>" (e.g. "optim.conv1.weight.momentum_buffer"), zeros
    // before the first step. Slot tensors are views of the live state (clone to keep them).
    NamedTensors state(const std::vector<Parameter*>& params);
    // Restores what state() gave. `tensors` must hold exactly the names state() produces (other
    // "optim." names are refused, other prefixes ignored), each with its parameter's shape and
    // dtype; throws InvalidArgument naming the tensor otherwise, and changes nothing then.
    void loadState(const NamedTensors& tensors, const std::vector<Parameter*>& params);
    // loadState's checks of the names, dtypes and shapes alone (a file's header: `given` holds
    // every tensor of the state to come, "optim." names or not), before any value is read;
    // InvalidArgument as loadState's. 'optim.step' not negative is checked where it is read.
    void checkState(const std::vector<SafeTensorEntry>& given,
                    const std::vector<Parameter*>& params) const;
    // The steps a restored state had taken ('optim.step'), where its slots were copied into the
    // views state() gave (a state read one tensor at a time). InvalidArgument when negative.
    void setStepCount(std::int64_t steps);

    static constexpr const char* kStepName = "optim.step";

protected:
    Optimizer() = default;
    // Updates one trainable parameter; `first` is true on the optimizer's first step; `skip` and
    // `scalars` as step()'s, for the op.
    virtual void update(Ops& ops, Parameter& p, double lr, bool first, const Tensor& skip,
                        const Tensor& scalars) = 0;
    // Slot i of parameter p (zeros of p's shape and dtype the first time).
    Tensor& slot(const Parameter& p, std::size_t i);

private:
    // Sums the squares of the gradients of `params` into m_gradSumSquares, and scales them as
    // setMaxGradNorm says.
    void measureAndClip(Ops& ops, const std::vector<Parameter*>& params);

    std::int64_t m_steps = 0;
    double m_maxGradNorm = 0;
    bool m_measureGradNorm = false;
    Tensor m_gradSumSquares; // where the parameters live
    Tensor m_zero;           // page-locked 0.0, the sum's start (a GPU's copy of it does not wait)
    std::unordered_map<std::string, std::vector<Tensor>> m_slots; // parameter name -> slots
};

// Validates the options (InvalidArgument naming the field) and builds the optimizer.
std::unique_ptr<Optimizer> makeOptimizer(const OptimizerOptions& options);
// The kinds makeOptimizer knows: sgd, momentum, nesterov, adam, adamw.
const std::vector<std::string>& optimizerKinds();
// The fields of OptimizerOptions that `kind` uses, by their names in a training configuration's
// "optimizer" object: momentum's "momentum" and "dampening", adam's and adamw's "beta1", "beta2",
// "epsilon".
std::vector<std::string> optimizerFields(const std::string& kind);

} // namespace towers::engine
