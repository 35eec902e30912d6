#pragma once
// The ops, written once. Every op of the Ops interface (ops.h) is one entry here: its name, its
// result, its parameters and the way it passes them on. From this list come, without anything
// written twice:
//  * the public, non-virtual entries of Ops (which check the arguments, op_checks.cpp) and the
//    protected virtual `<op>Impl` a backend overrides;
//  * the `Op` enum and opName(), with which a backend says which ops it implements (supports());
//  * each backend's override declarations (TOWERS_OP_OVERRIDE over the backend's own list);
//  * the staging adapter (staged_ops.cpp), which runs any op through another device.
//
// Adding an op: an entry below (and its name in TOWERS_SINGLE_OPS or TOWERS_COMPOSITE_OPS), its
// argument checks in op_checks.cpp, its implementation in the backends that run it, and its cases
// in engine/selftest/op_cases_<family>.cpp; docs/extending.md walks through it.
//
// Conventions for every op:
//  * image activations are NHWC; convolution weights OIHW; linear weights [out, in];
//  * outputs are resized with Tensor::ensure when their shape or dtype does not fit, so callers may
//    pass empty tensors and reuse them across steps;
//  * parameter gradients are overwritten, not accumulated;
//  * the public entry checks shapes, dtypes and devices before the backend sees the call: a shape
//    that does not fit throws ShapeError naming the argument, a wrong dtype or device
//    InvalidArgument, a dtype the backend cannot run Unsupported;
//  * bfloat16 activations (Ops::bf16Activations(): the forward pass of evaluation with --precision
//    bf16 on the oneDNN backend): the ops marked [bf16 x] below also take a bfloat16 image x there,
//    their other float arguments float32; conv2dForward writes y as d.outputDType asks (below),
//    linearForward float32, the others y in x's dtype. Everywhere else a bfloat16 float argument is
//    Unsupported.
#include <bitset>
#include <initializer_list>

// --- convolution: x [N,H,W,C], w [O,C,KH,KW], b [O] or empty, y [N,OH,OW,O] ---
// conv2dForward: [bf16 x]; y is float32 unless d.outputDType asks for bfloat16 (where the backend
// takes bfloat16 activations; the training ops take float32 only), which it writes where it
// computes the convolution in bfloat16 (elsewhere float32, as the training forward: a layer of a
// single input channel on oneDNN, conv_plan.h).
#define TOWERS_OP_conv2dForward(M)                                                                 \
    M(conv2dForward, void,                                                                         \
      (const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y,          \
       Activation act),                                                                            \
      (d, x, w, b, y, act))
#define TOWERS_OP_conv2dBackwardData(M)                                                            \
    M(conv2dBackwardData, void,                                                                    \
      (const Conv2dDesc& d, const Tensor& dy, const Tensor& w, Tensor& dx), (d, dy, w, dx))
// db (bias gradient) is computed when db is not null.
#define TOWERS_OP_conv2dBackwardWeights(M)                                                         \
    M(conv2dBackwardWeights, void,                                                                 \
      (const Conv2dDesc& d, const Tensor& x, const Tensor& dy, Tensor& dw, Tensor* db),            \
      (d, x, dy, dw, db))

// --- convolution as a training layer runs it: one forward, one fused backward ---
// conv2dForward that may also leave backend-private state in `saved` (opaque UInt8 bytes the
// caller keeps until conv2dBackward, like a pooling workspace): a backend may keep the input or
// the weights there in the layouts its backward wants, so that they are not rearranged twice. The
// default calls conv2dForward and leaves `saved` empty.
#define TOWERS_OP_conv2dForwardTraining(M)                                                         \
    M(conv2dForwardTraining, void,                                                                 \
      (const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y,          \
       Activation act, Tensor& saved),                                                             \
      (d, x, w, b, y, act, saved))
// The whole backward of a convolution and its fused activation. With g = dy where y > 0 for ReLU
// (dy itself for None): dw and, when not null, db from x and g; dx, when not null, from g and w.
// x, w, y and act are those of the forward, unchanged since, and db is given when the forward had
// a bias; `saved` is what that conv2dForwardTraining left (InvalidArgument if it is not), or an
// empty tensor (after a plain conv2dForward, say). The default composes reluBackward,
// conv2dBackwardWeights and conv2dBackwardData.
#define TOWERS_OP_conv2dBackward(M)                                                                \
    M(conv2dBackward, void,                                                                        \
      (const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& y, const Tensor& dy,   \
       Activation act, const Tensor& saved, Tensor* dx, Tensor& dw, Tensor* db),                   \
      (d, x, w, y, dy, act, saved, dx, dw, db))

// --- max pooling; `workspace` is backend-private state from forward for backward ---
// A window's maximum over its real elements (pads never win); where it appears more than once,
// the first in scan order (row by row, left to right) wins, and backward routes dy to it alone.
// maxPoolForward: [bf16 x], which leaves the workspace empty (there is no backward in bfloat16).
#define TOWERS_OP_maxPoolForward(M)                                                                \
    M(maxPoolForward, void, (const Pool2dDesc& d, const Tensor& x, Tensor& y, Tensor& workspace),  \
      (d, x, y, workspace))
#define TOWERS_OP_maxPoolBackward(M)                                                               \
    M(maxPoolBackward, void,                                                                       \
      (const Pool2dDesc& d, const Tensor& x, const Tensor& y, const Tensor& dy,                    \
       const Tensor& workspace, Tensor& dx),                                                       \
      (d, x, y, dy, workspace, dx))

// --- average pooling: a window's mean over its real elements (pads do not count, as TensorFlow's
// SAME, ONNX's AveragePool and PyTorch's count_include_pad=False); backward spreads each dy evenly
// over its window's real elements ---
#define TOWERS_OP_avgPoolForward(M)                                                                \
    M(avgPoolForward, void, (const Pool2dDesc& d, const Tensor& x, Tensor& y), (d, x, y))
#define TOWERS_OP_avgPoolBackward(M)                                                               \
    M(avgPoolBackward, void, (const Pool2dDesc& d, const Tensor& dy, Tensor& dx), (d, dy, dx))

// --- local response normalisation (TensorFlow semantics, see LrnDesc) ---
// lrnForward: [bf16 x], y computed in float32 and rounded once; the workspace left empty.
#define TOWERS_OP_lrnForward(M)                                                                    \
    M(lrnForward, void, (const LrnDesc& d, const Tensor& x, Tensor& y, Tensor& workspace),         \
      (d, x, y, workspace))
#define TOWERS_OP_lrnBackward(M)                                                                   \
    M(lrnBackward, void,                                                                           \
      (const LrnDesc& d, const Tensor& x, const Tensor& y, const Tensor& dy,                       \
       const Tensor& workspace, Tensor& dx),                                                       \
      (d, x, y, dy, workspace, dx))

// --- fully connected: x [N,In], w [Out,In], b [Out] or empty, y [N,Out] ---
// linearForward: [bf16 x], y float32.
#define TOWERS_OP_linearForward(M)                                                                 \
    M(linearForward, void,                                                                         \
      (const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y, Activation act),              \
      (x, w, b, y, act))
#define TOWERS_OP_linearBackwardData(M)                                                            \
    M(linearBackwardData, void, (const Tensor& dy, const Tensor& w, Tensor& dx), (dy, w, dx))
#define TOWERS_OP_linearBackwardWeights(M)                                                         \
    M(linearBackwardWeights, void, (const Tensor& x, const Tensor& dy, Tensor& dw, Tensor* db),    \
      (x, dy, dw, db))
// The whole backward of linearForward(x, w, b, y, act), as conv2dBackward: g = dy through the
// activation, dw and db (when not null) from x and g, dx (when not null) from g and w. The default
// composes reluBackward, linearBackwardWeights and linearBackwardData.
#define TOWERS_OP_linearBackward(M)                                                                \
    M(linearBackward, void,                                                                        \
      (const Tensor& x, const Tensor& w, const Tensor& y, const Tensor& dy, Activation act,        \
       Tensor* dx, Tensor& dw, Tensor* db),                                                        \
      (x, w, y, dy, act, dx, dw, db))

// --- element-wise ---
// y = max(x, 0); y may be the same tensor as x.
#define TOWERS_OP_reluForward(M) M(reluForward, void, (const Tensor& x, Tensor& y), (x, y))
// dx = dy where y > 0, else 0. dx may be the same tensor as dy.
#define TOWERS_OP_reluBackward(M)                                                                  \
    M(reluBackward, void, (const Tensor& y, const Tensor& dy, Tensor& dx), (y, dy, dx))
// y = a + b (same shapes); y may be a or b. [bf16 x]: a and b of one dtype.
#define TOWERS_OP_add(M) M(add, void, (const Tensor& a, const Tensor& b, Tensor& y), (a, b, y))
// Inverted dropout: element i is kept when dropoutKeeps(seed, i, rate) (ops/dropout_mask.h), kept
// values are scaled by 1 / (1 - rate). mask: UInt8 0/1 of x's shape. With `scalars` (a step's
// StepScalars, see the updates below), the seed is dropoutSeed(seed, its DropoutStep) instead.
#define TOWERS_OP_dropoutForward(M)                                                                \
    M(dropoutForward, void,                                                                        \
      (const Tensor& x, double rate, std::uint64_t seed, Tensor& y, Tensor& mask,                  \
       const Tensor& scalars),                                                                     \
      (x, rate, seed, y, mask, scalars))
#define TOWERS_OP_dropoutBackward(M)                                                               \
    M(dropoutBackward, void, (const Tensor& dy, const Tensor& mask, double rate, Tensor& dx),      \
      (dy, mask, rate, dx))

// --- batch normalisation over the channel (last) dimension ---
// Training: normalises with the batch statistics, saves the batch mean and biased variance for
// backward, and updates the running statistics with the unbiased variance (as PyTorch).
#define TOWERS_OP_batchNormForwardTraining(M)                                                      \
    M(batchNormForwardTraining, void,                                                              \
      (const BatchNormDesc& d, const Tensor& x, const Tensor& gamma, const Tensor& beta,           \
       Tensor& y, Tensor& runningMean, Tensor& runningVar, Tensor& saveMean, Tensor& saveVar),     \
      (d, x, gamma, beta, y, runningMean, runningVar, saveMean, saveVar))
#define TOWERS_OP_batchNormForwardInference(M)                                                     \
    M(batchNormForwardInference, void,                                                             \
      (const BatchNormDesc& d, const Tensor& x, const Tensor& gamma, const Tensor& beta,           \
       const Tensor& runningMean, const Tensor& runningVar, Tensor& y),                            \
      (d, x, gamma, beta, runningMean, runningVar, y))
#define TOWERS_OP_batchNormBackward(M)                                                             \
    M(batchNormBackward, void,                                                                     \
      (const BatchNormDesc& d, const Tensor& x, const Tensor& dy, const Tensor& gamma,             \
       const Tensor& saveMean, const Tensor& saveVar, Tensor& dx, Tensor& dgamma, Tensor& dbeta),  \
      (d, x, dy, gamma, saveMean, saveVar, dx, dgamma, dbeta))

// Inference: a batch norm folded into the convolution or linear layer before it. With the scale
// s = gamma / sqrt(runningVar + epsilon) of each output channel o: wOut = w * s[o] along w's first
// dimension (the output channels: [O, I, KH, KW] or [O, I]), bOut = (b - runningMean) * s + beta
// ([O]; b may be empty, a layer without bias: 0). The layer with wOut and bOut computes what it and
// the batch norm in evaluation mode did, up to rounding. w has no dimension of 0; wOut must not be
// w, nor bOut any of the per-channel inputs.
#define TOWERS_OP_foldBatchNorm(M)                                                                 \
    M(foldBatchNorm, void,                                                                         \
      (const Tensor& w, const Tensor& b, const Tensor& gamma, const Tensor& beta,                  \
       const Tensor& runningMean, const Tensor& runningVar, double epsilon, Tensor& wOut,          \
       Tensor& bOut),                                                                              \
      (w, b, gamma, beta, runningMean, runningVar, epsilon, wOut, bOut))

// --- batch normalisation as a training layer runs it, with the activation after it ---
// batchNormForwardTraining, then y = act(y) (ReLU: max(y, 0)), which may leave backend-private
// state in `saved` (opaque UInt8 bytes the caller keeps until batchNormActBackward, like a pooling
// workspace: a backend may keep the ReLU's mask there). The default composes
// batchNormForwardTraining and reluForward and leaves `saved` empty.
#define TOWERS_OP_batchNormActForwardTraining(M)                                                   \
    M(batchNormActForwardTraining, void,                                                           \
      (const BatchNormDesc& d, const Tensor& x, const Tensor& gamma, const Tensor& beta,           \
       Activation act, Tensor& y, Tensor& runningMean, Tensor& runningVar, Tensor& saveMean,       \
       Tensor& saveVar, Tensor& saved),                                                            \
      (d, x, gamma, beta, act, y, runningMean, runningVar, saveMean, saveVar, saved))
// Its backward: with g = dy where y > 0 for ReLU (dy itself for None), batchNormBackward of g. x,
// y, gamma, the saved statistics and act are those of the forward, unchanged since; `saved` is
// what that batchNormActForwardTraining left (InvalidArgument if it is not), or an empty tensor
// (after a plain batchNormForwardTraining, say). The default composes reluBackward and
// batchNormBackward.
#define TOWERS_OP_batchNormActBackward(M)                                                          \
    M(batchNormActBackward, void,                                                                  \
      (const BatchNormDesc& d, const Tensor& x, const Tensor& y, const Tensor& dy, Activation act, \
       const Tensor& gamma, const Tensor& saveMean, const Tensor& saveVar, const Tensor& saved,    \
       Tensor& dx, Tensor& dgamma, Tensor& dbeta),                                                 \
      (d, x, y, dy, act, gamma, saveMean, saveVar, saved, dx, dgamma, dbeta))

// batchNormForwardInference, then y = act(y): a batch-norm layer in evaluation mode. The default
// composes batchNormForwardInference and reluForward.
#define TOWERS_OP_batchNormActForwardInference(M)                                                  \
    M(batchNormActForwardInference, void,                                                          \
      (const BatchNormDesc& d, const Tensor& x, const Tensor& gamma, const Tensor& beta,           \
       const Tensor& runningMean, const Tensor& runningVar, Activation act, Tensor& y),            \
      (d, x, gamma, beta, runningMean, runningVar, act, y))

// --- conversion: y [x's shape] of `dtype` holds x's values (float32, float64 or bfloat16 each way,
// those the backend runs and bfloat16; to bfloat16 rounded to nearest even, from float64 by way of
// float32; a NaN stays a NaN); y must not be x. The bfloat16 activations of evaluation
// (Ops::bf16Activations) go back to float32 by it where a layer takes float32 only ---
#define TOWERS_OP_convertFloat(M)                                                                  \
    M(convertFloat, void, (const Tensor& x, DType dtype, Tensor& y), (x, dtype, y))

// --- layout: [N,H,W,C] <-> [N,C,H,W] (flatten in PyTorch's C,H,W order); y must not be x ---
// nhwcToNchw: [bf16 x].
#define TOWERS_OP_nhwcToNchw(M) M(nhwcToNchw, void, (const Tensor& x, Tensor& y), (x, y))
#define TOWERS_OP_nchwToNhwc(M) M(nchwToNhwc, void, (const Tensor& x, Tensor& y), (x, y))
// Channels of one image tensor copied into another's: y[n,h,w,yOffset + c] = x[n,h,w,xOffset + c]
// for c in [0, count), x and y of the same N, H and W. y is an in-place argument: it has its shape
// already, and keeps its other channels. A concatenation along the channels copies each part in;
// its backward copies each part's gradient out. y must not be x.
#define TOWERS_OP_copyChannels(M)                                                                  \
    M(copyChannels, void,                                                                          \
      (const Tensor& x, std::int64_t xOffset, std::int64_t count, Tensor& y,                       \
       std::int64_t yOffset),                                                                      \
      (x, xOffset, count, y, yOffset))

// --- loss: logits [N,K], labels Int32 [N] in [0, K) ---
// loss (Float64 [1], where the logits live) gets the mean cross-entropy over the batch, probs the
// softmax. `smoothing` (label smoothing, in [0, 1); 0: none) makes each row's target
// q = (1 - smoothing) * onehot(label) + smoothing / K, PyTorch's CrossEntropyLoss(label_smoothing),
// and its loss -sum_j q_j log p_j. Results stay on the device: nothing waits for a GPU. A label
// outside [0, K) throws InvalidArgument naming the row where the labels are in host memory; on a
// device, which does not wait to look, it makes the loss NaN (a training step is then skipped as
// a non-finite one; TowerSet checks its labels on the host before they go to a GPU).
#define TOWERS_OP_softmaxCrossEntropyForward(M)                                                    \
    M(softmaxCrossEntropyForward, void,                                                            \
      (const Tensor& logits, const Tensor& labels, double smoothing, Tensor& probs, Tensor& loss), \
      (logits, labels, smoothing, probs, loss))
// dlogits = (probs - q) * scale, q the forward's smoothed target (onehot(labels) for 0).
#define TOWERS_OP_softmaxCrossEntropyBackward(M)                                                   \
    M(softmaxCrossEntropyBackward, void,                                                           \
      (const Tensor& probs, const Tensor& labels, double smoothing, double scale,                  \
       Tensor& dlogits),                                                                           \
      (probs, labels, smoothing, scale, dlogits))

// --- reductions and updates on whole tensors (weight decay, SGD) ---
// sum (Float64 [1], where x lives) += scale * the sum of x's squares, in double: the weight-decay
// term of the loss, accumulated over the parameters where they live, read once
#define TOWERS_OP_sumSquares(M)                                                                    \
    M(sumSquares, void, (const Tensor& x, double scale, Tensor& sum), (x, scale, sum))
// flag ([1], of x's float type) becomes 1 when an element of x is NaN or infinite, else stays as
// it is: a step's finiteness checked where the tensors live, one read for all of them
#define TOWERS_OP_flagNonFinite(M)                                                                 \
    M(flagNonFinite, void, (const Tensor& x, Tensor& flag), (x, flag))
// y += alpha * x
#define TOWERS_OP_axpy(M) M(axpy, void, (double alpha, const Tensor& x, Tensor& y), (alpha, x, y))
// Gradient clipping by the global norm (ops/clip_norm.h): x *= clipFactor(sumSquares, maxNorm), the
// factor min(1, maxNorm / (sqrt(sumSquares) + 1e-6)) in x's type, computed where x lives from
// sumSquares (Float64 [1], the sum of the squares of all the gradients, as sumSquares accumulates
// it with scale 1), so that nothing waits for a GPU. maxNorm is finite and > 0. A factor of 1 (the
// norm at most maxNorm, or NaN) leaves x as it is, to the bit
#define TOWERS_OP_clipToNorm(M)                                                                    \
    M(clipToNorm, void, (const Tensor& sumSquares, double maxNorm, Tensor& x),                     \
      (sumSquares, maxNorm, x))

// --- optimizer updates of one parameter w from its gradient g (see MomentumStep, AdamStep); the
// state tensors (buf; m, v) have w's shape and dtype and are updated in place. `skip` is empty, or
// a [1] tensor of w's float type where w lives (the step's flagNonFinite flag): when it is not 0
// the update leaves w and the state as they are, decided where they live, so that a diverged
// step is skipped without the host waiting to read the flag first. `scalars` is empty, or a step's
// StepScalars (step_scalar_values.h: Float64 [StepScalars::kCount] where w lives): the update then
// reads its learning rate, momentum's first step, Adam's bias corrections or the moving average's
// keep from there when it runs, in place of the host arguments' (the other fields stay the host's),
// so that a replayed capture reads each step's values ---
// w -= lr * g: plain gradient descent (the tutorial's), as axpy(-lr, g, w) computes it
#define TOWERS_OP_sgdUpdate(M)                                                                     \
    M(sgdUpdate, void,                                                                             \
      (double lr, const Tensor& g, Tensor& w, const Tensor& skip, const Tensor& scalars),          \
      (lr, g, w, skip, scalars))
#define TOWERS_OP_momentumUpdate(M)                                                                \
    M(momentumUpdate, void,                                                                        \
      (const MomentumStep& s, const Tensor& g, Tensor& buf, Tensor& w, const Tensor& skip,         \
       const Tensor& scalars),                                                                     \
      (s, g, buf, w, skip, scalars))
#define TOWERS_OP_adamUpdate(M)                                                                    \
    M(adamUpdate, void,                                                                            \
      (const AdamStep& s, const Tensor& g, Tensor& m, Tensor& v, Tensor& w, const Tensor& skip,    \
       const Tensor& scalars),                                                                     \
      (s, g, m, v, w, skip, scalars))
// The moving average of a parameter: shadow -= (shadow - value) * keep, keep = 1 - decay in
// [0, 1], in the tensors' precision (TensorFlow's assign_moving_average), where the weights
// live; `skip` as for the updates
#define TOWERS_OP_emaUpdate(M)                                                                     \
    M(emaUpdate, void,                                                                             \
      (double keep, const Tensor& value, Tensor& shadow, const Tensor& skip,                       \
       const Tensor& scalars),                                                                     \
      (keep, value, shadow, skip, scalars))

// --- input: dataset images to model input where the model lives ---
// y [B, d.height, d.width, d.channels] (Float32) from source (UInt8 [N, H, W, d.channels], the
// dataset's images, H >= d.height, W >= d.width) and draws (Float64 [B, kDrawColumns]: row b is
// image b's source index, crop, translation, flip, brightness and contrast, as
// engine/data/distortion_math.h packs them): the crop, translation and flip, brightness, contrast
// and normalisation of Preprocessing, the same values as applyPreprocessing (distortion.cpp) to
// the last bit. Draws in host memory are checked (InvalidArgument naming the row); on a device,
// which does not stop to look, a row outside the source makes that image NaN.
#define TOWERS_OP_preprocessImages(M)                                                              \
    M(preprocessImages, void,                                                                      \
      (const PreprocessDesc& d, const Tensor& source, const Tensor& draws, Tensor& y),             \
      (d, source, draws, y))

// The ops every backend implements or leaves out, X(name) each, in the order of the Op enum.
#define TOWERS_SINGLE_OPS(X)                                                                       \
    X(conv2dForward)                                                                               \
    X(conv2dBackwardData)                                                                          \
    X(conv2dBackwardWeights)                                                                       \
    X(maxPoolForward)                                                                              \
    X(maxPoolBackward)                                                                             \
    X(avgPoolForward)                                                                              \
    X(avgPoolBackward)                                                                             \
    X(lrnForward)                                                                                  \
    X(lrnBackward)                                                                                 \
    X(linearForward)                                                                               \
    X(linearBackwardData)                                                                          \
    X(linearBackwardWeights)                                                                       \
    X(reluForward)                                                                                 \
    X(reluBackward)                                                                                \
    X(add)                                                                                         \
    X(dropoutForward)                                                                              \
    X(dropoutBackward)                                                                             \
    X(batchNormForwardTraining)                                                                    \
    X(batchNormForwardInference)                                                                   \
    X(batchNormBackward)                                                                           \
    X(foldBatchNorm)                                                                               \
    X(convertFloat)                                                                                \
    X(nhwcToNchw)                                                                                  \
    X(nchwToNhwc)                                                                                  \
    X(copyChannels)                                                                                \
    X(softmaxCrossEntropyForward)                                                                  \
    X(softmaxCrossEntropyBackward)                                                                 \
    X(sumSquares)                                                                                  \
    X(flagNonFinite)                                                                               \
    X(axpy)                                                                                        \
    X(clipToNorm)                                                                                  \
    X(sgdUpdate)                                                                                   \
    X(momentumUpdate)                                                                              \
    X(adamUpdate)                                                                                  \
    X(emaUpdate)                                                                                   \
    X(preprocessImages)
// The ops whose default composes single ops (ops.cpp): a backend overrides them only to fuse.
#define TOWERS_COMPOSITE_OPS(X)                                                                    \
    X(conv2dForwardTraining)                                                                       \
    X(conv2dBackward)                                                                              \
    X(linearBackward)                                                                              \
    X(batchNormActForwardTraining)                                                                 \
    X(batchNormActBackward)                                                                        \
    X(batchNormActForwardInference)
#define TOWERS_OPS(X) TOWERS_SINGLE_OPS(X) TOWERS_COMPOSITE_OPS(X)

// --- the generators ---
#define TOWERS_OP_UNPAREN(...) __VA_ARGS__
// A backend's declaration of its implementation of op `n`, in its class body:
//   TOWERS_MY_BACKEND_OPS(TOWERS_OP_OVERRIDE)
#define TOWERS_OP_OVERRIDE(n) TOWERS_OP_##n(TOWERS_OP_OVERRIDE_DECL)
#define TOWERS_OP_OVERRIDE_DECL(n, R, P, A) R n##Impl P override;
// The Op values of a list: Ops(opSet({TOWERS_MY_BACKEND_OPS(TOWERS_OP_ID)})).
#define TOWERS_OP_ID(n) ::towers::engine::Op::n,

namespace towers::engine {

enum class Op
{
#define TOWERS_OP_ENUM(n) n,
    TOWERS_OPS(TOWERS_OP_ENUM)
#undef TOWERS_OP_ENUM
};

#define TOWERS_OP_COUNT(n) +1
inline constexpr int kOpCount = 0 TOWERS_OPS(TOWERS_OP_COUNT);
#undef TOWERS_OP_COUNT

// "conv2dForward", ...
const char* opName(Op op);
// True for the ops whose default composes others (TOWERS_COMPOSITE_OPS).
bool isComposite(Op op);

using OpSet = std::bitset<kOpCount>;
OpSet opSet(std::initializer_list<Op> ops);
// Every op.
OpSet allOps();

} // namespace towers::engine
