#pragma once
// Argument checks of the dense, element-wise, batch-norm and loss ops, shared by the reference and
// the oneDNN backends so that both reject the same calls with the same typed errors and words.
// Dtype rules stay with each backend (the reference takes float32/float64, oneDNN float32).
#include <cstdint>
#include <string>

#include "engine/ops/descriptors.h"
#include "engine/tensor/tensor.h"

namespace towers::engine::checks {

inline void requireRank(const Tensor& t, int rank, const char* what)
{
    if (t.empty()) throw ShapeError(std::string(what) + ": tensor is empty");
    if (t.rank() != rank)
        throw ShapeError(std::string(what) + ": expected rank " + std::to_string(rank) +
                         ", got shape " + t.shape().str());
}

inline void requireSameShape(const Tensor& t, const Tensor& like, const char* what,
                             const char* likeWhat)
{
    if (t.empty()) throw ShapeError(std::string(what) + ": tensor is empty");
    if (t.shape() != like.shape())
        throw ShapeError(std::string(what) + ": expected the shape of " + likeWhat + " " +
                         like.shape().str() + ", got " + t.shape().str());
}

struct LinearDims
{
    std::int64_t n = 0, in = 0, out = 0;
};

// x [N,In], w [Out,In], b [Out] or empty.
inline LinearDims linearForward(const Tensor& x, const Tensor& w, const Tensor& b)
{
    requireRank(x, 2, "linear x");
    requireRank(w, 2, "linear w");
    const LinearDims d{x.dim(0), x.dim(1), w.dim(0)};
    requireShape(w, {d.out, d.in}, "linear w");
    if (!b.empty()) requireShape(b, {d.out}, "linear b");
    return d;
}

// dy [N,Out], w [Out,In].
inline LinearDims linearBackwardData(const Tensor& dy, const Tensor& w)
{
    requireRank(dy, 2, "linear dy");
    requireRank(w, 2, "linear w");
    const LinearDims d{dy.dim(0), w.dim(1), w.dim(0)};
    requireShape(dy, {d.n, d.out}, "linear dy");
    return d;
}

// x [N,In], dy [N,Out].
inline LinearDims linearBackwardWeights(const Tensor& x, const Tensor& dy)
{
    requireRank(x, 2, "linear x");
    requireRank(dy, 2, "linear dy");
    const LinearDims d{x.dim(0), x.dim(1), dy.dim(1)};
    requireShape(dy, {d.n, d.out}, "linear dy");
    return d;
}

inline void dropoutRate(double rate)
{
    if (!(rate >= 0 && rate < 1))
        throw InvalidArgument("dropout rate must be in [0, 1), got " + std::to_string(rate));
}

inline void dropoutMask(const Tensor& mask, const Tensor& dy)
{
    requireSameShape(mask, dy, "dropout mask", "dy");
    requireDType(mask, DType::UInt8, "dropout mask");
}

// The descriptor's shape is the input's; per-channel tensors are [C].
inline void batchNormInput(const BatchNormDesc& d, const Tensor& x, const char* what)
{
    if (d.shape.rank() != 2 && d.shape.rank() != 4)
        throw ShapeError("batch norm descriptor: expected an [N, C] or [N, H, W, C] shape, got " +
                         d.shape.str());
    requireShape(x, d.shape, what);
}

inline void batchNormChannel(const BatchNormDesc& d, const Tensor& t, const char* what)
{
    requireShape(t, {d.channels()}, what);
}

inline void batchNormTrainingRows(const BatchNormDesc& d)
{
    // The unbiased variance of the running statistics needs two values per channel (as PyTorch).
    if (d.rows() < 2)
        throw InvalidArgument("batch norm training needs more than one value per channel, got " +
                              d.shape.str());
}

// The shapes of a batch-norm forward: x as the descriptor says, gamma, beta and the running
// statistics [C]; in training, enough rows for the unbiased variance.
inline void batchNormForward(const BatchNormDesc& d, const Tensor& x, const Tensor& gamma,
                             const Tensor& beta, const Tensor& runningMean,
                             const Tensor& runningVar, bool training)
{
    batchNormInput(d, x, "batch norm x");
    batchNormChannel(d, gamma, "batch norm gamma");
    batchNormChannel(d, beta, "batch norm beta");
    batchNormChannel(d, runningMean, "batch norm running mean");
    batchNormChannel(d, runningVar, "batch norm running variance");
    if (training) batchNormTrainingRows(d);
}

// The shapes of a batch-norm backward.
inline void batchNormBackward(const BatchNormDesc& d, const Tensor& x, const Tensor& dy,
                              const Tensor& gamma, const Tensor& saveMean, const Tensor& saveVar)
{
    batchNormInput(d, x, "batch norm x");
    batchNormInput(d, dy, "batch norm dy");
    batchNormChannel(d, gamma, "batch norm gamma");
    batchNormChannel(d, saveMean, "batch norm saved mean");
    batchNormChannel(d, saveVar, "batch norm saved variance");
}

inline double unbiasFactor(const BatchNormDesc& d)
{
    const double n = static_cast<double>(d.rows());
    return n / (n - 1);
}

inline void nhwc(const Tensor& x, const char* what)
{
    requireRank(x, 4, what);
}

// logits [N,K], labels Int32 [N] with every label in [0, K). Returns K.
inline std::int64_t softmaxLabels(const Tensor& logits, const Tensor& labels,
                                  const char* logitsWhat)
{
    requireRank(logits, 2, logitsWhat);
    if (labels.empty() || labels.rank() != 1 || labels.dim(0) != logits.dim(0)) // no Shape built
        throw ShapeError("softmax cross-entropy labels: expected shape [" +
                         std::to_string(logits.dim(0)) + "], got " +
                         (labels.empty() ? std::string("an empty tensor") : labels.shape().str()));
    requireDType(labels, DType::Int32, "softmax cross-entropy labels");
    const std::int64_t k = logits.dim(1);
    const std::int32_t* l = labels.data<std::int32_t>();
    for (std::int64_t i = 0; i < logits.dim(0); ++i)
        if (l[i] < 0 || l[i] >= k)
            throw InvalidArgument("softmax cross-entropy: label " + std::to_string(l[i]) +
                                  " of row " + std::to_string(i) + " is outside [0, " +
                                  std::to_string(k) + ")");
    return k;
}

} // namespace towers::engine::checks
