#pragma once
// Test support shared by the engine tests: random tensors, the finite-difference gradient checker
// (central differences in double precision) and the error measures used to compare backends.
#include <cstdint>
#include <functional>
#include <string>

#include "engine/selftest/op_cases.h"
#include "engine/tensor/rng.h"
#include "engine/tensor/tensor.h"

namespace towers::test {

using engine::DType;
using engine::Rng;
using engine::Shape;
using engine::Tensor;

// Uniform random values in [lo, hi).
Tensor randomTensor(const Shape& shape, DType dtype, Rng& rng, double lo = -1.0, double hi = 1.0);
// Values whose pairwise gaps are at least `gap` inside every tensor (a shuffled ramp plus small
// noise), so that max-pooling and ReLU stay away from their kinks under finite differences.
Tensor distinctTensor(const Shape& shape, DType dtype, Rng& rng, double gap = 1e-3);
// Random labels in [0, classes).
Tensor randomLabels(std::int64_t n, int classes, Rng& rng);

// Sum of a[i] * b[i], in double.
double dot(const Tensor& a, const Tensor& b);

// The device results of the loss ops, read back: the mean cross-entropy of
// softmaxCrossEntropyForward and the sum of squares of x (sumSquares onto 0 with scale 1).
double meanCrossEntropy(engine::Ops& ops, const Tensor& logits, const Tensor& labels,
                        Tensor& probs);
double sumOfSquares(engine::Ops& ops, const Tensor& x);

struct GradCheckResult
{
    // (|analytic - numeric| less the numeric slope's rounding noise) / max(|analytic|, |numeric|,
    // floor)
    double maxRelError = 0;
    double maxAbsError = 0;
    std::int64_t worstIndex = -1;
    double worstAnalytic = 0, worstNumeric = 0;
    int checked = 0;      // elements compared
    int skippedKinks = 0; // elements whose +-step interval straddled a kink (resampled)
    std::string str() const;
};

// Checks `analytic` (the gradient of the scalar f with respect to x) by central differences on x,
// which must be Float64. Elements are sampled (at most maxElements, chosen by seed) so big tensors
// stay fast. f is called twice per sampled element with x perturbed in place and restored.
// Kinks (ReLU at 0, a max-pool winner changing) make a central difference meaningless. They show
// as a jump between the right and left slopes that does not shrink with the step (a smooth
// function's jump is f'' * step). Such an element is skipped and another drawn, so the checker
// keeps away from kinks without hiding wrong gradients (a wrong gradient is smooth and simply
// differs from the numeric one).
GradCheckResult checkGradient(const std::function<double()>& f, Tensor& x, const Tensor& analytic,
                              double step = 1e-6, std::int64_t maxElements = 256,
                              std::uint64_t seed = 1, double floor = 1e-6);

// Checks the directional derivative of f along a random unit direction v over the whole of x
// against <analytic, v>: every element takes part, at the cost of four evaluations of f. A
// direction that straddles a kink is replaced by another (up to eight tries).
GradCheckResult checkDirectionalGradient(const std::function<double()>& f, Tensor& x,
                                         const Tensor& analytic, double step = 1e-6,
                                         std::uint64_t seed = 1);

// ||a - b||_2 / ||b||_2 (0 when both are zero): the backends' comparison measure (as ggml's
// test-backend-ops), the one the op-case table and the self-test use. a and b may have different
// float dtypes.
using engine::normalisedError;
double maxAbsDiff(const Tensor& a, const Tensor& b);

} // namespace towers::test
