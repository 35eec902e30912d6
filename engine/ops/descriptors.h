#pragma once
// Geometry of the shaped ops, computed once from the input shape and the layer's settings and
// validated there, so that backends receive consistent, checked numbers.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/data/preprocess_desc.h"   // PreprocessDesc
#include "engine/ops/step_scalar_values.h" // StepScalars
#include "engine/tensor/dtype.h"
#include "engine/tensor/shape.h"

namespace towers::engine {

// TensorFlow's padding modes. SAME: output = ceil(in / stride), the total padding split with the
// extra pixel at the bottom/right. VALID: no padding. Explicit: the pads given.
enum class Padding
{
    Same,
    Valid,
    Explicit
};

enum class Activation
{
    None,
    Relu
};

struct ExplicitPads
{
    int top = 0, left = 0, bottom = 0, right = 0;
};

// A 2-D sliding window over NHWC input: convolution or pooling.
struct Window2d
{
    std::int64_t n = 0, h = 0, w = 0, c = 0; // input
    std::int64_t oh = 0, ow = 0;             // output spatial size
    int kh = 1, kw = 1, sh = 1, sw = 1;
    int padTop = 0, padLeft = 0, padBottom = 0, padRight = 0;

    std::string str() const;
};

// Computes a window's output size and pads; throws ShapeError / InvalidArgument on nonsense
// (zero or negative sizes, a kernel larger than a VALID input, ...).
Window2d makeWindow2d(const Shape& inputNhwc, int kh, int kw, int sh, int sw, Padding padding,
                      ExplicitPads pads = {});

struct Conv2dDesc
{
    Window2d win;
    std::int64_t outChannels = 0;
    // conv2dForward's y: Float32, or BFloat16 on a backend that takes bfloat16 activations
    // (op_list.h). The other directions ignore it.
    DType outputDType = DType::Float32;
    Shape inputShape() const { return {win.n, win.h, win.w, win.c}; }
    Shape outputShape() const { return {win.n, win.oh, win.ow, outChannels}; }
    Shape weightShape() const { return {outChannels, win.c, win.kh, win.kw}; } // OIHW
};

Conv2dDesc makeConv2dDesc(const Shape& inputNhwc, std::int64_t outChannels, int kh, int kw, int sh,
                          int sw, Padding padding, ExplicitPads pads = {});

// Max pooling; padded positions never win (they count as -infinity).
struct Pool2dDesc
{
    Window2d win;
    Shape inputShape() const { return {win.n, win.h, win.w, win.c}; }
    Shape outputShape() const { return {win.n, win.oh, win.ow, win.c}; }
};

Pool2dDesc makePool2dDesc(const Shape& inputNhwc, int kh, int kw, int sh, int sw, Padding padding,
                          ExplicitPads pads = {});

// Local response normalisation across channels with TensorFlow's semantics:
//   sqr_sum[c] = sum over c' in [c - depthRadius, c + depthRadius] of x[c']^2
//   y[c] = x[c] / (bias + alpha * sqr_sum[c]) ^ beta
struct LrnDesc
{
    Shape shape; // NHWC
    int depthRadius = 5;
    double bias = 1.0, alpha = 1.0, beta = 0.5;
};

LrnDesc makeLrnDesc(const Shape& inputNhwc, int depthRadius, double bias, double alpha,
                    double beta);

// Batch normalisation over the last dimension (channels) of [N, H, W, C] or [N, C].
struct BatchNormDesc
{
    Shape shape;
    double epsilon = 1e-5;
    double momentum = 0.1; // PyTorch's convention: running = (1 - m) * running + m * batch
    std::int64_t channels() const { return shape[shape.rank() - 1]; }
    std::int64_t rows() const { return shape.numel() / channels(); }
};

BatchNormDesc makeBatchNormDesc(const Shape& input, double epsilon, double momentum);

// One step of SGD with momentum on one parameter tensor, PyTorch's torch.optim.SGD formulation:
//   buf = first ? g : momentum * buf + (1 - dampening) * g
//   w  -= lr * (nesterov ? g + momentum * buf : buf)
struct MomentumStep
{
    double lr = 0.01, momentum = 0.9, dampening = 0;
    bool nesterov = false;
    bool first = false; // the parameter's first step: the buffer is set to the gradient
};

// One step of Adam on one parameter tensor, PyTorch's torch.optim.Adam formulation (bias
// correction on; `step` counts this step, so it is 1 on the first call), with torch.optim.AdamW's
// decoupled weight decay first (0: none, Adam itself; the factor is exactly 1 then):
//   w *= 1 - lr * weightDecay
//   m = beta1 * m + (1 - beta1) * g;   v = beta2 * v + (1 - beta2) * g^2
//   w -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + epsilon)
struct AdamStep
{
    double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
    std::int64_t step = 1;
    double weightDecay = 0; // decoupled (AdamW), finite and >= 0
};

} // namespace towers::engine
