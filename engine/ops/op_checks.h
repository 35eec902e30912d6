#pragma once
// Shape helpers shared by the op entries' checks (op_checks.cpp) and the backends: the checks
// themselves run once, in the public entries of Ops; these are the pieces a backend still needs
// (the dimensions of a checked call, the unbiasing factor) and the words the checks use.
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

inline void dropoutRate(double rate)
{
    if (!(rate >= 0 && rate < 1))
        throw InvalidArgument("dropout rate must be in [0, 1), got " + std::to_string(rate));
}

// Every label of a host Int32 tensor in [0, k), else InvalidArgument naming the row.
inline void labelsInRange(const Tensor& labels, std::int64_t k)
{
    const std::int32_t* l = labels.data<std::int32_t>();
    for (std::int64_t i = 0; i < labels.numel(); ++i)
        if (l[i] < 0 || l[i] >= k)
            throw InvalidArgument("softmax cross-entropy: label " + std::to_string(l[i]) +
                                  " of row " + std::to_string(i) + " is outside [0, " +
                                  std::to_string(k) + ")");
}

// Whether an optimizer update is skipped by its flag (op_list.h): `skip` is empty (never) or a
// checked [1] float tensor in host memory whose element is not 0 (a NaN flag skips too).
inline bool updateSkipped(const Tensor& skip)
{
    return !skip.empty() && skip.at(0) != 0.0;
}

// The dimensions of a checked fully connected call.
struct LinearDims
{
    std::int64_t n = 0, in = 0, out = 0;
};
// x [N,In], w [Out,In].
inline LinearDims linearForward(const Tensor& x, const Tensor& w)
{
    return {x.dim(0), x.dim(1), w.dim(0)};
}
// dy [N,Out], w [Out,In].
inline LinearDims linearBackwardData(const Tensor& dy, const Tensor& w)
{
    return {dy.dim(0), w.dim(1), w.dim(0)};
}
// x [N,In], dy [N,Out].
inline LinearDims linearBackwardWeights(const Tensor& x, const Tensor& dy)
{
    return {x.dim(0), x.dim(1), dy.dim(1)};
}

// n / (n - 1) over the rows of a batch-norm call: the running variance is unbiased.
inline double unbiasFactor(const BatchNormDesc& d)
{
    const double n = static_cast<double>(d.rows());
    return n / (n - 1);
}

} // namespace towers::engine::checks
