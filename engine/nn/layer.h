#pragma once
// Layers hold their parameters and call the backend's ops; they never see a backend's types.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/ops/ops.h"
#include "engine/tensor/rng.h"

namespace towers::engine {

// A named tensor of a model. Names and layouts are those of the equivalent PyTorch module's
// state_dict (see docs/pytorch-mapping.md), so checkpoints load in Python unchanged.
struct Parameter
{
    std::string name; // e.g. "conv1.weight"
    Tensor value;
    Tensor grad;           // same shape as value; empty for buffers
    bool trainable = true; // false: a buffer (batch-norm running statistics)
    // L2 coefficient: the loss gains weightDecay * 0.5 * ||value||^2; with AdamW, its decoupled
    // decay instead (the update's w *= 1 - lr * weightDecay: Optimizer::decaysWeights).
    double weightDecay = 0;
};

// Where the gradient of an optional parameter (a bias) goes: null when the layer has none, which
// tells a backward op to skip it.
inline Tensor* biasGradient(Parameter& bias)
{
    return bias.value.empty() ? nullptr : &bias.grad;
}

// How a parameter is initialised.
struct Init
{
    enum class Kind
    {
        Constant,        // every element = value
        TruncatedNormal, // TensorFlow's truncated normal with stddev = value
        GlorotUniform,   // U(-a, a), a = sqrt(6 / (fan_in + fan_out)) (tf.layers' default)
        TorchDefault,    // U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (PyTorch's Conv2d/Linear default)
    };
    Kind kind = Kind::Constant;
    double value = 0;

    static Init constant(double v) { return {Kind::Constant, v}; }
    static Init truncatedNormal(double stddev) { return {Kind::TruncatedNormal, stddev}; }
    static Init glorotUniform() { return {Kind::GlorotUniform, 0}; }
    static Init torchDefault() { return {Kind::TorchDefault, 0}; }

    void apply(Tensor& t, std::int64_t fanIn, std::int64_t fanOut, Rng& rng) const;
};

class Layer;

// Sees each layer's forward and backward pass begin and end, through ExecContext::profiler:
// Sequential reports every layer it runs, nested containers included (a profiler that wants the
// top level only counts its own depth).
class LayerProfiler
{
public:
    virtual ~LayerProfiler() = default;
    virtual void begin(ExecContext& ctx, const Layer& layer, bool backward) = 0;
    virtual void end(ExecContext& ctx, const Layer& layer, bool backward) = 0;
    // `layer`'s forward ran inside `into`'s (a batch norm folded into the convolution before it).
    virtual void folded(ExecContext& ctx, const Layer& layer, const Layer& into) = 0;
};

class Layer
{
public:
    explicit Layer(std::string name) : m_name(std::move(name)) {}
    virtual ~Layer() = default;
    Layer(const Layer&) = delete;
    Layer& operator=(const Layer&) = delete;

    // The module name in the PyTorch equivalent ("conv1", "layer1.res1.bn").
    const std::string& name() const { return m_name; }
    // "conv2d", "maxpool", ...
    virtual std::string kind() const = 0;
    // One line for humans: "5x5 conv, 64 filters, stride 1, SAME, ReLU".
    virtual std::string describe() const = 0;
    // Validates the input shape and returns the output shape (ShapeError on a mismatch).
    virtual Shape outputShape(const Shape& input) const = 0;

    // Computes y from x. ctx.training selects training behaviour (dropout, batch statistics).
    virtual void forward(ExecContext& ctx, const Tensor& x, Tensor& y) = 0;
    // Whether forward() takes a bfloat16 x (ExecContext::bf16Activations; its y is then bfloat16
    // or float32 as the layer's op writes it). A container that runs a layer that does not gives
    // it x converted to float32.
    virtual bool takesBf16() const { return false; }
    // Given the x and y of the latest forward and dL/dy, overwrites the gradients of this layer's
    // parameters and, when dx is not null, computes dL/dx.
    virtual void backward(ExecContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                          Tensor* dx) = 0;

    // Multiply-adds x 2 of one forward pass for this input shape (convolutions and linear layers;
    // the cheap element-wise layers count 0). Backward costs about twice as much.
    virtual double forwardFlops(const Shape& input) const
    {
        (void)input;
        return 0;
    }

    // Appends this layer's parameters and buffers, in state_dict order.
    virtual void collectParameters(std::vector<Parameter*>& out) { (void)out; }
    virtual void initialize(Rng& rng) { (void)rng; }
    // Calls f on this layer and, for containers, on every layer inside, depth first.
    virtual void visit(const std::function<void(Layer&)>& f) { f(*this); }

private:
    std::string m_name;
};

} // namespace towers::engine
