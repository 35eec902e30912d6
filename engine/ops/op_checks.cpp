// The public entries of Ops: each op's argument checks, once for every backend, then the
// backend's implementation (or, for an op it leaves out, the host fallback); and the single ops'
// base implementations. The op list, the backend's context and the composite ops' defaults are in
// ops.cpp.
#include "engine/ops/op_checks.h"

#include <climits>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

#include "engine/data/distortion_math.h"
#include "engine/ops/ops.h"

namespace towers::engine {

// ---- the argument checks ----

namespace {

// The checks of one call: every tensor argument on the backend's device; the float arguments of
// one dtype, which the backend runs.
class Args
{
public:
    explicit Args(const Ops& ops) : m_ops(ops), m_device(ops.device()) {}

    // A float tensor: not empty, here, of the call's float dtype (the first float argument's).
    void floats(const Tensor& t, const char* what)
    {
        present(t, what);
        if (!m_float) {
            if (!m_ops.runsFloat(t.dtype()))
                throw Unsupported(
                    m_ops.name() + " backend: " + what + " must be " +
                    (m_ops.runsFloat(DType::Float64) ? "float32 or float64" : "float32") +
                    ", got " + std::string(dtypeName(t.dtype())));
            m_float = t.dtype();
        } else {
            requireDType(t, *m_float, what);
        }
    }
    void floats(const Tensor& t, const char* what, const Shape& shape)
    {
        floats(t, what);
        requireShape(t, shape, what);
    }
    // An image activation of a forward op of evaluation ([bf16 x] in op_list.h): bfloat16 where
    // the backend takes bfloat16 activations (its other float arguments float32 all the same),
    // else a float tensor as floats() takes it.
    void activation(const Tensor& t, const char* what, const Shape& shape)
    {
        if (t.dtype() != DType::BFloat16) return floats(t, what, shape);
        present(t, what);
        bf16Allowed(what);
        requireShape(t, shape, what);
    }
    void activation(const Tensor& t, const char* what)
    {
        if (t.dtype() != DType::BFloat16) return floats(t, what);
        present(t, what);
        bf16Allowed(what);
    }
    // Unsupported unless the backend takes bfloat16 activations.
    void bf16Allowed(const char* what) const
    {
        if (!m_ops.bf16Activations())
            throw Unsupported(m_ops.name() + " backend: " + what +
                              " is bfloat16, and this backend takes bfloat16 activations " +
                              "nowhere (the oneDNN backend does with --precision bf16, in the "
                              "forward pass of evaluation)");
    }
    // A float tensor that may be left empty (a bias; y when no activation reads it).
    void optionalFloats(const Tensor& t, const char* what, const Shape& shape)
    {
        if (!t.empty()) floats(t, what, shape);
    }
    // A tensor of a fixed dtype (labels, masks).
    void typed(const Tensor& t, DType dtype, const char* what)
    {
        present(t, what);
        requireDType(t, dtype, what);
    }
    // Whether the backend runs float dtype t, and its name.
    bool runs(DType t) const { return m_ops.runsFloat(t); }
    std::string backendName() const { return m_ops.name(); }
    // An output the op (re)allocates: when given, it must live where the backend runs.
    void output(const Tensor& t, const char* what)
    {
        if (!t.empty()) here(t, what);
    }
    // Backend-private state (a workspace, `saved`): the backend checks its contents; here only
    // that it lives where the backend runs.
    void state(const Tensor& t, const char* what)
    {
        if (!t.empty()) here(t, what);
    }

private:
    void present(const Tensor& t, const char* what)
    {
        if (t.empty()) throw ShapeError(std::string(what) + ": tensor is empty");
        here(t, what);
    }
    void here(const Tensor& t, const char* what)
    {
        if (t.device() != m_device)
            throw InvalidArgument(std::string(what) + ": " + t.describe() + " is on " +
                                  t.device().str() + ", not on " + m_device.str() + " where the " +
                                  m_ops.name() + " backend runs");
    }

    const Ops& m_ops;
    Device m_device;
    std::optional<DType> m_float;
};

void notAliased(const Tensor& x, const Tensor& y, const char* what)
{
    if (!x.empty() && !y.empty() && x.raw() == y.raw())
        throw InvalidArgument(std::string(what) + ": the output must not share the input's memory");
}

void labels(Args& a, const Tensor& scores, const Tensor& labels, const char* scoresWhat)
{
    a.floats(scores, scoresWhat);
    checks::requireRank(scores, 2, scoresWhat);
    const char* what = "softmax cross-entropy labels";
    if (labels.empty() || labels.rank() != 1 || labels.dim(0) != scores.dim(0))
        throw ShapeError(std::string(what) + ": expected shape [" + std::to_string(scores.dim(0)) +
                         "], got " +
                         (labels.empty() ? std::string("an empty tensor") : labels.shape().str()));
    a.typed(labels, DType::Int32, what);
    // Host labels are checked here; a GPU backend checks its own where they are.
    if (labels.device().isHost()) checks::labelsInRange(labels, scores.dim(1));
}

// x and w of a linear op; `bf16X`: x may be an evaluation forward's bfloat16 activation.
void linearInputs(Args& a, const Tensor& x, const Tensor& w, bool bf16X = false)
{
    if (bf16X)
        a.activation(x, "linear x");
    else
        a.floats(x, "linear x");
    a.floats(w, "linear w");
    checks::requireRank(x, 2, "linear x");
    checks::requireRank(w, 2, "linear w");
    requireShape(w, {w.dim(0), x.dim(1)}, "linear w");
}

void batchNormChannels(Args& a, const BatchNormDesc& d, const Tensor& t, const char* what)
{
    a.floats(t, what, {d.channels()});
}

void batchNormInput(Args& a, const BatchNormDesc& d, const Tensor& x, const char* what)
{
    if (d.shape.rank() != 2 && d.shape.rank() != 4)
        throw ShapeError("batch norm descriptor: expected an [N, C] or [N, H, W, C] shape, got " +
                         d.shape.str());
    a.floats(x, what, d.shape);
}

void likeParameter(Args& a, const Tensor& t, const Tensor& w, const char* what)
{
    a.floats(t, what);
    checks::requireSameShape(t, w, what, "the parameter");
}

// An update's skip flag: empty (always update), or [1] of the parameter's float dtype where the
// backend runs (the step's flagNonFinite flag).
void skipFlag(Args& a, const Tensor& skip, const char* what)
{
    a.optionalFloats(skip, what, Shape{1});
}

// A step's scalars: empty (the host arguments), or StepScalars' Float64 [kCount] where the backend
// runs; values in host memory are checked here (a GPU's are the host's, checked when it made them).
void stepScalars(Args& a, const Tensor& scalars, const char* what)
{
    if (scalars.empty()) return;
    a.typed(scalars, DType::Float64, what);
    requireShape(scalars, Shape{StepScalars::kCount}, what);
    if (!scalars.device().isHost()) return;
    const double* v = scalars.data<double>();
    const auto bad = [&](const char* value, double x) {
        throw InvalidArgument(std::string(what) + ": " + value + " is " + std::to_string(x));
    };
    const double lr = v[StepScalars::LearningRate], first = v[StepScalars::MomentumFirst];
    const double c1 = v[StepScalars::AdamCorrection1], c2 = v[StepScalars::AdamCorrection2Sqrt];
    const double keep = v[StepScalars::EmaKeep], step = v[StepScalars::DropoutStep];
    if (!(lr >= 0) || !std::isfinite(lr)) bad("the learning rate (a finite number >= 0)", lr);
    if (first != 0 && first != 1) bad("momentum's first step (0 or 1)", first);
    if (!(c1 > 0 && c1 <= 1)) bad("Adam's first bias correction (in (0, 1])", c1);
    if (!(c2 > 0 && c2 <= 1)) bad("Adam's second bias correction (in (0, 1])", c2);
    if (!(keep >= 0 && keep <= 1)) bad("the moving average's keep (in [0, 1])", keep);
    if (!(step >= 0 && step <= 9007199254740992.0) || step != std::floor(step))
        bad("the dropout step (a whole number >= 0)", step);
}

} // namespace

// One function per op, named after it, with its parameters.
namespace check {
namespace {

// x, w and b of a convolution's forward; `bf16X`: x may be an evaluation forward's bfloat16
// activation.
void convInputs(Args& a, const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& b,
                bool bf16X)
{
    if (bf16X)
        a.activation(x, "conv2d x", d.inputShape());
    else
        a.floats(x, "conv2d x", d.inputShape());
    a.floats(w, "conv2d w", d.weightShape());
    a.optionalFloats(b, "conv2d b", {d.outChannels});
}

void conv2dForward(Args& a, const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& b,
                   Tensor&, Activation)
{
    convInputs(a, d, x, w, b, true);
    if (d.outputDType == DType::BFloat16)
        a.bf16Allowed("conv2d y");
    else if (d.outputDType != DType::Float32)
        throw InvalidArgument("conv2d y: the descriptor asks for " +
                              std::string(dtypeName(d.outputDType)) +
                              ", where float32 or bfloat16 is possible");
}

void conv2dBackwardData(Args& a, const Conv2dDesc& d, const Tensor& dy, const Tensor& w, Tensor&)
{
    a.floats(dy, "conv2d dy", d.outputShape());
    a.floats(w, "conv2d w", d.weightShape());
}

void conv2dBackwardWeights(Args& a, const Conv2dDesc& d, const Tensor& x, const Tensor& dy, Tensor&,
                           Tensor*)
{
    a.floats(x, "conv2d x", d.inputShape());
    a.floats(dy, "conv2d dy", d.outputShape());
}

void conv2dForwardTraining(Args& a, const Conv2dDesc& d, const Tensor& x, const Tensor& w,
                           const Tensor& b, Tensor&, Activation, Tensor&)
{
    convInputs(a, d, x, w, b, false); // float32 only: no [bf16 x] in training
    if (d.outputDType != DType::Float32)
        throw Unsupported("conv2d y: a training forward writes float32, and the descriptor asks "
                          "for " +
                          std::string(dtypeName(d.outputDType)));
}

void conv2dBackward(Args& a, const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& y,
                    const Tensor& dy, Activation act, const Tensor& saved, Tensor*, Tensor&,
                    Tensor*)
{
    a.floats(x, "conv2d x", d.inputShape());
    a.floats(w, "conv2d w", d.weightShape());
    a.floats(dy, "conv2d dy", d.outputShape());
    if (act == Activation::Relu)
        a.floats(y, "conv2d y", d.outputShape());
    else
        a.optionalFloats(y, "conv2d y", d.outputShape());
    a.state(saved, "conv2d saved state");
}

void maxPoolForward(Args& a, const Pool2dDesc& d, const Tensor& x, Tensor&, Tensor&)
{
    a.activation(x, "max pool x", d.inputShape());
}

void maxPoolBackward(Args& a, const Pool2dDesc& d, const Tensor& x, const Tensor& y,
                     const Tensor& dy, const Tensor& workspace, Tensor&)
{
    a.floats(x, "max pool x", d.inputShape());
    a.floats(y, "max pool y", d.outputShape());
    a.floats(dy, "max pool dy", d.outputShape());
    a.state(workspace, "max pool workspace");
}

void avgPoolForward(Args& a, const Pool2dDesc& d, const Tensor& x, Tensor&)
{
    a.floats(x, "average pool x", d.inputShape());
}

void avgPoolBackward(Args& a, const Pool2dDesc& d, const Tensor& dy, Tensor&)
{
    a.floats(dy, "average pool dy", d.outputShape());
}

void lrnForward(Args& a, const LrnDesc& d, const Tensor& x, Tensor&, Tensor&)
{
    a.activation(x, "lrn x", d.shape);
}

void lrnBackward(Args& a, const LrnDesc& d, const Tensor& x, const Tensor& y, const Tensor& dy,
                 const Tensor& workspace, Tensor&)
{
    a.floats(x, "lrn x", d.shape);
    a.floats(y, "lrn y", d.shape);
    a.floats(dy, "lrn dy", d.shape);
    a.state(workspace, "lrn workspace");
}

void linearForward(Args& a, const Tensor& x, const Tensor& w, const Tensor& b, Tensor&, Activation)
{
    linearInputs(a, x, w, true);
    a.optionalFloats(b, "linear b", {w.dim(0)});
}

void linearBackwardData(Args& a, const Tensor& dy, const Tensor& w, Tensor&)
{
    a.floats(dy, "linear dy");
    a.floats(w, "linear w");
    checks::requireRank(dy, 2, "linear dy");
    checks::requireRank(w, 2, "linear w");
    requireShape(dy, {dy.dim(0), w.dim(0)}, "linear dy");
}

void linearBackwardWeights(Args& a, const Tensor& x, const Tensor& dy, Tensor&, Tensor*)
{
    a.floats(x, "linear x");
    a.floats(dy, "linear dy");
    checks::requireRank(x, 2, "linear x");
    checks::requireRank(dy, 2, "linear dy");
    requireShape(dy, {x.dim(0), dy.dim(1)}, "linear dy");
}

void linearBackward(Args& a, const Tensor& x, const Tensor& w, const Tensor& y, const Tensor& dy,
                    Activation act, Tensor*, Tensor&, Tensor*)
{
    linearInputs(a, x, w);
    const Shape out{x.dim(0), w.dim(0)};
    a.floats(dy, "linear dy", out);
    if (act == Activation::Relu)
        a.floats(y, "linear y", out);
    else
        a.optionalFloats(y, "linear y", out);
}

void reluForward(Args& a, const Tensor& x, Tensor&)
{
    a.floats(x, "relu x");
}

void reluBackward(Args& a, const Tensor& y, const Tensor& dy, Tensor&)
{
    a.floats(y, "relu y");
    a.floats(dy, "relu dy");
    checks::requireSameShape(dy, y, "relu dy", "y");
}

void add(Args& a, const Tensor& x, const Tensor& b, Tensor&)
{
    a.activation(x, "add a");
    a.activation(b, "add b");
    requireDType(b, x.dtype(), "add b");
    checks::requireSameShape(b, x, "add b", "a");
}

void dropoutForward(Args& a, const Tensor& x, double rate, std::uint64_t, Tensor&, Tensor&,
                    const Tensor& scalars)
{
    a.floats(x, "dropout x");
    checks::dropoutRate(rate);
    stepScalars(a, scalars, "dropout step scalars");
}

void dropoutBackward(Args& a, const Tensor& dy, const Tensor& mask, double rate, Tensor&)
{
    a.floats(dy, "dropout dy");
    checks::dropoutRate(rate);
    a.typed(mask, mask.dtype(), "dropout mask");
    checks::requireSameShape(mask, dy, "dropout mask", "dy");
    requireDType(mask, DType::UInt8, "dropout mask");
}

void batchNormForwardTraining(Args& a, const BatchNormDesc& d, const Tensor& x, const Tensor& gamma,
                              const Tensor& beta, Tensor&, Tensor& runningMean, Tensor& runningVar,
                              Tensor&, Tensor&)
{
    batchNormInput(a, d, x, "batch norm x");
    batchNormChannels(a, d, gamma, "batch norm gamma");
    batchNormChannels(a, d, beta, "batch norm beta");
    batchNormChannels(a, d, runningMean, "batch norm running mean");
    batchNormChannels(a, d, runningVar, "batch norm running variance");
    // The unbiased variance of the running statistics needs two values per channel (as PyTorch).
    if (d.rows() < 2)
        throw InvalidArgument("batch norm training needs more than one value per channel, got " +
                              d.shape.str());
}

void batchNormForwardInference(Args& a, const BatchNormDesc& d, const Tensor& x,
                               const Tensor& gamma, const Tensor& beta, const Tensor& runningMean,
                               const Tensor& runningVar, Tensor&)
{
    batchNormInput(a, d, x, "batch norm x");
    batchNormChannels(a, d, gamma, "batch norm gamma");
    batchNormChannels(a, d, beta, "batch norm beta");
    batchNormChannels(a, d, runningMean, "batch norm running mean");
    batchNormChannels(a, d, runningVar, "batch norm running variance");
}

void batchNormBackward(Args& a, const BatchNormDesc& d, const Tensor& x, const Tensor& dy,
                       const Tensor& gamma, const Tensor& saveMean, const Tensor& saveVar, Tensor&,
                       Tensor&, Tensor&)
{
    batchNormInput(a, d, x, "batch norm x");
    batchNormInput(a, d, dy, "batch norm dy");
    batchNormChannels(a, d, gamma, "batch norm gamma");
    batchNormChannels(a, d, saveMean, "batch norm saved mean");
    batchNormChannels(a, d, saveVar, "batch norm saved variance");
}

void foldBatchNorm(Args& a, const Tensor& w, const Tensor& b, const Tensor& gamma,
                   const Tensor& beta, const Tensor& runningMean, const Tensor& runningVar,
                   double epsilon, Tensor& wOut, Tensor& bOut)
{
    a.floats(w, "foldBatchNorm w");
    if (w.rank() < 1) throw ShapeError("foldBatchNorm w: a scalar has no output channels");
    // Every output channel has weights: the implementations divide by the channels, and the
    // CUDA kernel writes each channel's bias beside its first weight.
    if (w.numel() == 0)
        throw ShapeError("foldBatchNorm w: " + w.shape().str() +
                         " has no weights (a dimension of 0)");
    const Shape channels{w.dim(0)};
    a.optionalFloats(b, "foldBatchNorm b", channels);
    a.floats(gamma, "foldBatchNorm gamma", channels);
    a.floats(beta, "foldBatchNorm beta", channels);
    a.floats(runningMean, "foldBatchNorm running mean", channels);
    a.floats(runningVar, "foldBatchNorm running variance", channels);
    if (!(epsilon >= 0) || !std::isfinite(epsilon))
        throw InvalidArgument("foldBatchNorm: epsilon must be a finite number >= 0, got " +
                              std::to_string(epsilon));
    a.output(wOut, "foldBatchNorm wOut");
    a.output(bOut, "foldBatchNorm bOut");
    notAliased(w, wOut, "foldBatchNorm");
    // The CUDA kernel writes a channel's bias while other threads still read its statistics.
    for (const Tensor* in : {&b, &gamma, &beta, &runningMean, &runningVar})
        notAliased(*in, bOut, "foldBatchNorm");
}

void batchNormActForwardTraining(Args& a, const BatchNormDesc& d, const Tensor& x,
                                 const Tensor& gamma, const Tensor& beta, Activation, Tensor& y,
                                 Tensor& runningMean, Tensor& runningVar, Tensor& saveMean,
                                 Tensor& saveVar, Tensor&)
{
    batchNormForwardTraining(a, d, x, gamma, beta, y, runningMean, runningVar, saveMean, saveVar);
}

void batchNormActForwardInference(Args& a, const BatchNormDesc& d, const Tensor& x,
                                  const Tensor& gamma, const Tensor& beta,
                                  const Tensor& runningMean, const Tensor& runningVar, Activation,
                                  Tensor& y)
{
    batchNormForwardInference(a, d, x, gamma, beta, runningMean, runningVar, y);
}

void batchNormActBackward(Args& a, const BatchNormDesc& d, const Tensor& x, const Tensor& y,
                          const Tensor& dy, Activation act, const Tensor& gamma,
                          const Tensor& saveMean, const Tensor& saveVar, const Tensor& saved,
                          Tensor& dx, Tensor& dgamma, Tensor& dbeta)
{
    batchNormBackward(a, d, x, dy, gamma, saveMean, saveVar, dx, dgamma, dbeta);
    if (act == Activation::Relu)
        batchNormInput(a, d, y, "batch norm y");
    else
        a.optionalFloats(y, "batch norm y", d.shape);
    a.state(saved, "batch norm saved state");
}

void convertFloat(Args& a, const Tensor& x, DType dtype, Tensor& y)
{
    const auto convertible = [&](DType t) { return t == DType::BFloat16 || a.runs(t); };
    if (x.empty()) throw ShapeError("convertFloat x: tensor is empty");
    a.output(x, "convertFloat x");
    const auto refuse = [&](const std::string& what) {
        throw Unsupported(what + ": the " + a.backendName() +
                          " backend converts between bfloat16 and the float types it runs");
    };
    if (!convertible(x.dtype())) refuse("convertFloat x is " + x.describe());
    if (!convertible(dtype)) refuse("convertFloat to " + std::string(dtypeName(dtype)));
    a.output(y, "convertFloat y");
    notAliased(x, y, "convertFloat");
}

void nhwcToNchw(Args& a, const Tensor& x, Tensor& y)
{
    a.activation(x, "nhwcToNchw x");
    checks::requireRank(x, 4, "nhwcToNchw x");
    notAliased(x, y, "nhwcToNchw");
}

void nchwToNhwc(Args& a, const Tensor& x, Tensor& y)
{
    a.floats(x, "nchwToNhwc x");
    checks::requireRank(x, 4, "nchwToNhwc x");
    notAliased(x, y, "nchwToNhwc");
}

void copyChannels(Args& a, const Tensor& x, std::int64_t xOffset, std::int64_t count, Tensor& y,
                  std::int64_t yOffset)
{
    a.floats(x, "copyChannels x");
    a.floats(y, "copyChannels y");
    checks::requireRank(x, 4, "copyChannels x");
    checks::requireRank(y, 4, "copyChannels y");
    if (x.dim(0) != y.dim(0) || x.dim(1) != y.dim(1) || x.dim(2) != y.dim(2))
        throw ShapeError("copyChannels: x " + x.shape().str() + " and y " + y.shape().str() +
                         " differ in N, H or W");
    const auto range = [count](std::int64_t offset, std::int64_t channels, const char* what) {
        if (count < 1 || offset < 0 || offset > channels - count)
            throw ShapeError(std::string("copyChannels: ") + std::to_string(count) +
                             " channels from " + what + "'s channel " + std::to_string(offset) +
                             " do not fit its " + std::to_string(channels));
    };
    range(xOffset, x.dim(3), "x");
    range(yOffset, y.dim(3), "y");
    notAliased(x, y, "copyChannels");
}

void labelSmoothing(double smoothing, const char* op)
{
    if (!(smoothing >= 0 && smoothing < 1))
        throw InvalidArgument(std::string(op) + ": label smoothing must be in [0, 1), got " +
                              std::to_string(smoothing));
}

void softmaxCrossEntropyForward(Args& a, const Tensor& logits, const Tensor& l, double smoothing,
                                Tensor&, Tensor& loss)
{
    labels(a, logits, l, "softmax cross-entropy logits");
    a.output(loss, "softmax cross-entropy loss");
    labelSmoothing(smoothing, "softmax cross-entropy forward");
}

void softmaxCrossEntropyBackward(Args& a, const Tensor& probs, const Tensor& l, double smoothing,
                                 double, Tensor&)
{
    labels(a, probs, l, "softmax cross-entropy probs");
    labelSmoothing(smoothing, "softmax cross-entropy backward");
}

void sumSquares(Args& a, const Tensor& x, double, Tensor& sum)
{
    a.floats(x, "sumSquares x");
    a.typed(sum, DType::Float64, "sumSquares sum");
    requireShape(sum, Shape{1}, "sumSquares sum");
}

void flagNonFinite(Args& a, const Tensor& x, Tensor& flag)
{
    a.floats(x, "flagNonFinite x");
    a.floats(flag, "flagNonFinite flag", Shape{1});
}

void axpy(Args& a, double, const Tensor& x, Tensor& y)
{
    a.floats(x, "axpy x");
    a.floats(y, "axpy y");
    checks::requireSameShape(y, x, "axpy y", "x");
}

void clipToNorm(Args& a, const Tensor& sumSquares, double maxNorm, Tensor& x)
{
    a.typed(sumSquares, DType::Float64, "clipToNorm sumSquares");
    requireShape(sumSquares, Shape{1}, "clipToNorm sumSquares");
    a.floats(x, "clipToNorm x");
    if (!(maxNorm > 0) || !std::isfinite(maxNorm))
        throw InvalidArgument("clipToNorm: the largest norm must be a finite number > 0, got " +
                              std::to_string(maxNorm));
}

void sgdUpdate(Args& a, double, const Tensor& g, Tensor& w, const Tensor& skip,
               const Tensor& scalars)
{
    a.floats(w, "sgdUpdate w");
    likeParameter(a, g, w, "sgdUpdate gradient");
    skipFlag(a, skip, "sgdUpdate skip");
    stepScalars(a, scalars, "sgdUpdate step scalars");
}

void momentumUpdate(Args& a, const MomentumStep&, const Tensor& g, Tensor& buf, Tensor& w,
                    const Tensor& skip, const Tensor& scalars)
{
    a.floats(w, "momentumUpdate w");
    likeParameter(a, g, w, "momentumUpdate gradient");
    likeParameter(a, buf, w, "momentumUpdate momentum buffer");
    skipFlag(a, skip, "momentumUpdate skip");
    stepScalars(a, scalars, "momentumUpdate step scalars");
}

void emaUpdate(Args& a, double keep, const Tensor& value, Tensor& shadow, const Tensor& skip,
               const Tensor& scalars)
{
    a.floats(shadow, "emaUpdate shadow");
    likeParameter(a, value, shadow, "emaUpdate value");
    skipFlag(a, skip, "emaUpdate skip");
    stepScalars(a, scalars, "emaUpdate step scalars");
    if (!(keep >= 0 && keep <= 1))
        throw InvalidArgument("emaUpdate: keep (1 - decay) must be in [0, 1], got " +
                              std::to_string(keep));
}

void adamUpdate(Args& a, const AdamStep& s, const Tensor& g, Tensor& m, Tensor& v, Tensor& w,
                const Tensor& skip, const Tensor& scalars)
{
    a.floats(w, "adamUpdate w");
    likeParameter(a, g, w, "adamUpdate gradient");
    likeParameter(a, m, w, "adamUpdate first moment");
    likeParameter(a, v, w, "adamUpdate second moment");
    skipFlag(a, skip, "adamUpdate skip");
    stepScalars(a, scalars, "adamUpdate step scalars");
    if (s.step < 1) throw InvalidArgument("adamUpdate: step must be at least 1");
    if (!(s.weightDecay >= 0 && std::isfinite(s.weightDecay)))
        throw InvalidArgument("adamUpdate: weight decay must be a finite number >= 0, got " +
                              std::to_string(s.weightDecay));
}

void preprocessImages(Args& a, const PreprocessDesc& d, const Tensor& source, const Tensor& draws,
                      Tensor& y)
{
    namespace pp = preprocess;
    const std::string size =
        std::to_string(d.height) + "x" + std::to_string(d.width) + "x" + std::to_string(d.channels);
    if (d.height < 1 || d.width < 1 || d.channels < 1 || d.channels > pp::kMaxChannels)
        throw InvalidArgument("preprocessImages: the output must be at least 1x1 with 1 to " +
                              std::to_string(pp::kMaxChannels) + " channels, got " + size);
    if (d.normalization < int(pp::Normalization::PerImage) ||
        d.normalization > int(pp::Normalization::Scale))
        throw InvalidArgument("preprocessImages: normalization must be 0 (per image), 1 (the "
                              "set's mean and std) or 2 (x / 255), got " +
                              std::to_string(d.normalization));
    if (d.normalization == int(pp::Normalization::MeanStd)) {
        if (d.mean.size() != std::size_t(d.channels) || d.stddev.size() != std::size_t(d.channels))
            throw InvalidArgument("preprocessImages: the mean and std normalisation needs " +
                                  std::to_string(d.channels) + " means and stds, got " +
                                  std::to_string(d.mean.size()) + " and " +
                                  std::to_string(d.stddev.size()));
        for (int k = 0; k < d.channels; ++k)
            if (!std::isfinite(d.mean[std::size_t(k)]) || !(d.stddev[std::size_t(k)] > 0) ||
                !std::isfinite(d.stddev[std::size_t(k)]))
                throw InvalidArgument("preprocessImages: channel " + std::to_string(k) +
                                      " needs a finite mean and a finite std above 0, got " +
                                      std::to_string(d.mean[std::size_t(k)]) + " and " +
                                      std::to_string(d.stddev[std::size_t(k)]));
    }
    a.typed(source, DType::UInt8, "preprocessImages source");
    checks::requireRank(source, 4, "preprocessImages source");
    if (source.dim(0) < 1 || source.dim(1) < d.height || source.dim(2) < d.width ||
        source.dim(1) > INT_MAX || source.dim(2) > INT_MAX || source.dim(3) != d.channels)
        throw ShapeError(
            "preprocessImages source: expected [N >= 1, H >= " + std::to_string(d.height) +
            ", W >= " + std::to_string(d.width) + ", " + std::to_string(d.channels) +
            "] images for a " + size + " output, got " + source.shape().str());
    a.typed(draws, DType::Float64, "preprocessImages draws");
    checks::requireRank(draws, 2, "preprocessImages draws");
    requireShape(draws, {draws.dim(0), pp::kDrawColumns}, "preprocessImages draws");
    a.output(y, "preprocessImages y");
    // Host draws are checked here; a GPU backend makes an image whose row does not fit NaN.
    if (!draws.device().isHost()) return;
    const double* rows = draws.data<double>();
    for (std::int64_t r = 0; r < draws.dim(0); ++r) {
        const double* row = rows + r * pp::kDrawColumns;
        if (pp::drawFits(row, source.dim(0), int(source.dim(1)), int(source.dim(2)), d.height,
                         d.width))
            continue;
        char text[256];
        std::snprintf(text, sizeof text,
                      "index %.17g, crop (%.17g, %.17g), shift (%.17g, %.17g), flip %.17g, "
                      "brightness %g, contrast %g",
                      row[pp::kDrawIndex], row[pp::kDrawCropY], row[pp::kDrawCropX],
                      row[pp::kDrawShiftY], row[pp::kDrawShiftX], row[pp::kDrawFlip],
                      row[pp::kDrawBrightness], row[pp::kDrawContrast]);
        throw InvalidArgument("preprocessImages: draw row " + std::to_string(r) + " (" + text +
                              ") does not fit " + std::to_string(source.dim(0)) +
                              " source images of " + std::to_string(source.dim(1)) + "x" +
                              std::to_string(source.dim(2)) + " for a " + std::to_string(d.height) +
                              "x" + std::to_string(d.width) +
                              " crop (a whole index below the count, a whole crop corner inside "
                              "the image, whole shifts, flip 0 or 1, finite brightness and "
                              "contrast)");
    }
}

} // namespace
} // namespace check

// ---- the entries ----

// Checks the arguments, then runs the op on this backend, or on its fallback when it leaves the op
// out.
#define TOWERS_OP_ENTRY(n) TOWERS_OP_##n(TOWERS_OP_ENTRY_DEF)
#define TOWERS_OP_ENTRY_DEF(n, R, P, A)                                                            \
    R Ops::n P                                                                                     \
    {                                                                                              \
        Args args(*this);                                                                          \
        check::n(args, TOWERS_OP_UNPAREN A);                                                       \
        if (!supports(Op::n)) {                                                                    \
            if (m_capturing) refuseDuringCapture(#n, "the backend runs it on the host");           \
            return fallback(Op::n).n A;                                                            \
        }                                                                                          \
        return n##Impl A;                                                                          \
    }
TOWERS_OPS(TOWERS_OP_ENTRY)
#undef TOWERS_OP_ENTRY_DEF
#undef TOWERS_OP_ENTRY

// The single ops' base implementations: never called for an op the backend implements (supports()
// routes the others to the fallback).
#define TOWERS_OP_BASE(n) TOWERS_OP_##n(TOWERS_OP_BASE_DEF)
#define TOWERS_OP_BASE_DEF(n, R, P, A)                                                             \
    R Ops::n##Impl P                                                                               \
    {                                                                                              \
        return fallback(Op::n).n A;                                                                \
    }
TOWERS_SINGLE_OPS(TOWERS_OP_BASE)
#undef TOWERS_OP_BASE_DEF
#undef TOWERS_OP_BASE

} // namespace towers::engine
