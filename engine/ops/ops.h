#pragma once
// The op interface every backend implements. Layers call these; they never see oneDNN, cuDNN or
// loops. Conventions for every call:
//  * image activations are NHWC; convolution weights OIHW; linear weights [out, in];
//  * outputs are resized with Tensor::ensure when their shape or dtype does not fit, so callers may
//    pass empty tensors and reuse them across steps;
//  * parameter gradients are overwritten, not accumulated;
//  * shapes and dtypes are checked and a mismatch throws ShapeError / InvalidArgument naming the
//    argument; a dtype the backend cannot run throws Unsupported.
#include <cstdint>
#include <memory>
#include <string>

#include "engine/ops/descriptors.h"
#include "engine/tensor/tensor.h"

namespace towers::engine {

class Ops
{
public:
    virtual ~Ops() = default;

    // "reference", "onednn", ...
    virtual std::string name() const = 0;
    virtual Device device() const = 0;
    // Waits until every op issued through this context has finished: a no-op for the CPU
    // backends, which finish each op before returning; a GPU's asynchronous work (and its faults,
    // as BackendError) surfaces here. For timing, and before a host reads what ops wrote.
    virtual void synchronize() {}
    // Copies a host tensor into `dst` on this context's device (resized as Tensor::ensure does),
    // ordered before every op issued after it. A GPU backend copies asynchronously on its stream
    // when `src` is page-locked (Tensor::pinned), so `src` must stay unchanged until the next
    // synchronize(). The default copies at once.
    virtual void upload(const Tensor& src, Tensor& dst);

    // --- convolution: x [N,H,W,C], w [O,C,KH,KW], b [O] or empty, y [N,OH,OW,O] ---
    virtual void conv2dForward(const Conv2dDesc& d, const Tensor& x, const Tensor& w,
                               const Tensor& b, Tensor& y, Activation act) = 0;
    virtual void conv2dBackwardData(const Conv2dDesc& d, const Tensor& dy, const Tensor& w,
                                    Tensor& dx) = 0;
    // db (bias gradient) is computed when db is not null.
    virtual void conv2dBackwardWeights(const Conv2dDesc& d, const Tensor& x, const Tensor& dy,
                                       Tensor& dw, Tensor* db) = 0;

    // --- convolution as a training layer runs it: one forward, one fused backward ---
    // conv2dForward that may also leave backend-private state in `saved` (opaque UInt8 bytes the
    // caller keeps until conv2dBackward, like a pooling workspace): a backend may keep the input
    // or the weights there in the layouts its backward wants, so that they are not rearranged
    // twice. The default calls conv2dForward and leaves `saved` empty.
    virtual void conv2dForwardTraining(const Conv2dDesc& d, const Tensor& x, const Tensor& w,
                                       const Tensor& b, Tensor& y, Activation act, Tensor& saved);
    // The whole backward of a convolution and its fused activation. With g = dy where y > 0 for
    // ReLU (dy itself for None): dw and, when not null, db from x and g; dx, when not null, from
    // g and w. x, w, y and act are those of the forward, unchanged since, and db is given when
    // the forward had a bias; `saved` is what that conv2dForwardTraining left (InvalidArgument if
    // it is not), or an empty tensor (after a plain conv2dForward, say). The default composes
    // reluBackward, conv2dBackwardWeights and conv2dBackwardData.
    virtual void conv2dBackward(const Conv2dDesc& d, const Tensor& x, const Tensor& w,
                                const Tensor& y, const Tensor& dy, Activation act,
                                const Tensor& saved, Tensor* dx, Tensor& dw, Tensor* db);

    // --- max pooling; `workspace` is backend-private state from forward for backward ---
    virtual void maxPoolForward(const Pool2dDesc& d, const Tensor& x, Tensor& y,
                                Tensor& workspace) = 0;
    virtual void maxPoolBackward(const Pool2dDesc& d, const Tensor& x, const Tensor& y,
                                 const Tensor& dy, const Tensor& workspace, Tensor& dx) = 0;

    // --- local response normalisation (TensorFlow semantics, see LrnDesc) ---
    virtual void lrnForward(const LrnDesc& d, const Tensor& x, Tensor& y, Tensor& workspace) = 0;
    virtual void lrnBackward(const LrnDesc& d, const Tensor& x, const Tensor& y, const Tensor& dy,
                             const Tensor& workspace, Tensor& dx) = 0;

    // --- fully connected: x [N,In], w [Out,In], b [Out] or empty, y [N,Out] ---
    virtual void linearForward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y,
                               Activation act) = 0;
    virtual void linearBackwardData(const Tensor& dy, const Tensor& w, Tensor& dx) = 0;
    virtual void linearBackwardWeights(const Tensor& x, const Tensor& dy, Tensor& dw,
                                       Tensor* db) = 0;

    // The whole backward of linearForward(x, w, b, y, act), as conv2dBackward: g = dy through the
    // activation, dw and db (when not null) from x and g, dx (when not null) from g and w. The
    // default composes reluBackward, linearBackwardWeights and linearBackwardData.
    virtual void linearBackward(const Tensor& x, const Tensor& w, const Tensor& y, const Tensor& dy,
                                Activation act, Tensor* dx, Tensor& dw, Tensor* db);

    // --- element-wise ---
    virtual void reluForward(const Tensor& x, Tensor& y) = 0;
    // dx = dy where y > 0, else 0. dx may be the same tensor as dy.
    virtual void reluBackward(const Tensor& y, const Tensor& dy, Tensor& dx) = 0;
    // y = a + b (same shapes); y may be a or b.
    virtual void add(const Tensor& a, const Tensor& b, Tensor& y) = 0;

    // Inverted dropout: element i is kept when dropoutKeeps(seed, i, rate) (ops/dropout_mask.h),
    // kept values are scaled by 1 / (1 - rate). mask: UInt8 0/1 of x's shape.
    virtual void dropoutForward(const Tensor& x, double rate, std::uint64_t seed, Tensor& y,
                                Tensor& mask) = 0;
    virtual void dropoutBackward(const Tensor& dy, const Tensor& mask, double rate, Tensor& dx) = 0;

    // --- batch normalisation over the channel (last) dimension ---
    // Training: normalises with the batch statistics, saves the batch mean and biased variance
    // for backward, and updates the running statistics with the unbiased variance (as PyTorch).
    virtual void batchNormForwardTraining(const BatchNormDesc& d, const Tensor& x,
                                          const Tensor& gamma, const Tensor& beta, Tensor& y,
                                          Tensor& runningMean, Tensor& runningVar, Tensor& saveMean,
                                          Tensor& saveVar) = 0;
    virtual void batchNormForwardInference(const BatchNormDesc& d, const Tensor& x,
                                           const Tensor& gamma, const Tensor& beta,
                                           const Tensor& runningMean, const Tensor& runningVar,
                                           Tensor& y) = 0;
    virtual void batchNormBackward(const BatchNormDesc& d, const Tensor& x, const Tensor& dy,
                                   const Tensor& gamma, const Tensor& saveMean,
                                   const Tensor& saveVar, Tensor& dx, Tensor& dgamma,
                                   Tensor& dbeta) = 0;

    // --- layout: [N,H,W,C] <-> [N,C,H,W] (flatten in PyTorch's C,H,W order) ---
    virtual void nhwcToNchw(const Tensor& x, Tensor& y) = 0;
    virtual void nchwToNhwc(const Tensor& x, Tensor& y) = 0;

    // --- loss: logits [N,K], labels Int32 [N] in [0, K) (else InvalidArgument naming the row) ---
    // Returns the mean cross-entropy over the batch; probs gets the softmax.
    virtual double softmaxCrossEntropyForward(const Tensor& logits, const Tensor& labels,
                                              Tensor& probs) = 0;
    // dlogits = (probs - onehot(labels)) * scale.
    virtual void softmaxCrossEntropyBackward(const Tensor& probs, const Tensor& labels,
                                             double scale, Tensor& dlogits) = 0;

    // --- reductions and updates on whole tensors (weight decay, SGD) ---
    virtual double sumSquares(const Tensor& x) = 0;
    // y += alpha * x
    virtual void axpy(double alpha, const Tensor& x, Tensor& y) = 0;

    // --- optimizer updates of one parameter w from its gradient g (see MomentumStep, AdamStep);
    // the state tensors (buf; m, v) have w's shape and dtype and are updated in place ---
    virtual void momentumUpdate(const MomentumStep& s, const Tensor& g, Tensor& buf, Tensor& w) = 0;
    virtual void adamUpdate(const AdamStep& s, const Tensor& g, Tensor& m, Tensor& v,
                            Tensor& w) = 0;
};

// The execution context a layer runs in: the backend's ops, whether this is a training pass, and
// the step (mixed into dropout seeds so that each step draws a fresh, reproducible mask).
class LayerProfiler; // engine/nn/layer.h

struct ExecContext
{
    Ops& ops;
    bool training = true;
    std::uint64_t step = 0;
    // The tower (replica) this pass runs on, mixed into dropout seeds so that towers draw
    // different masks; replica 0 draws the masks of a single-tower run.
    std::uint64_t replica = 0;
    // When set, sees every layer's forward and backward begin and end (towers-cli bench
    // --per-layer); null in training.
    LayerProfiler* profiler = nullptr;
};

// The plain reference backend: naive loops accumulating in double, float32 and float64. The test
// oracle for every other backend.
std::unique_ptr<Ops> makeReferenceOps();

} // namespace towers::engine
