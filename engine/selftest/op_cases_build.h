#pragma once
// Private to engine/selftest: what the op-case table's families (op_cases_window.cpp,
// op_cases_dense.cpp, op_cases_norm.cpp, op_cases_update.cpp) build their cases with. Inputs are
// host tensors of Float64 that hold float32 values, so the backend under test (given them in
// float32) and the reference (in float64) start from the same numbers; inputs that are not float
// operands (labels, masks, images, and Float64 data in a case's keepDType) go to both as they are.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/ops/step_scalars.h"
#include "engine/selftest/op_cases.h"

namespace towers::engine::op_cases {

// Uniform values in [lo, hi).
Tensor uniform(const Shape& shape, Rng& rng, double lo = -1, double hi = 1);
// Distinct values spread over [lo, hi] in a random order (a shuffled ramp), at least
// (hi - lo) / numel apart: no ties, so every max-pooling window has one clear winner.
Tensor distinct(const Shape& shape, Rng& rng, double lo = -1, double hi = 1);
// Whole numbers 0 .. count - 1: ties everywhere.
Tensor levels(const Shape& shape, Rng& rng, int count);
// Int32 labels in [0, classes).
Tensor labels(std::int64_t n, int classes, Rng& rng);
// UInt8 values uniform in 0 .. 255 (images).
Tensor bytes(const Shape& shape, Rng& rng);
// A UInt8 0/1 mask, 1 with probability keep.
Tensor mask(const Shape& shape, Rng& rng, double keep);
// A Float64 tensor [1] holding v (a scalar result: a loss, a sum of squares).
Tensor scalar(double v);
// The same values rounded to float32 (kept as Float64): an output of a float64 computation used
// as an input of another case.
Tensor roundedToFloat32(const Tensor& t);
// Sets dy to zero where |z| < 1 % of z's RMS: a ReLU mask computed from a backend's own forward
// may round the other way there, which must not count as an error.
void zeroNearKinks(Tensor& dy, const Tensor& z);

// "[4,24,24,3]"
std::string shapeText(const Shape& s);

// The reference backend, for inputs that are results of an op (a pre-activation, softmax).
Ops& referenceOps();

// What the dense families (op_cases_dense.cpp, op_cases_norm.cpp, op_cases_update.cpp) share.

inline std::string number(double v)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

struct Named
{
    std::string what;
    Shape shape;
    std::string text() const { return shapeText(shape) + (what.empty() ? "" : " (" + what + ")"); }
};

// A step's scalars (StepScalars) as an input every backend is given as Float64, where it computes.
inline Tensor stepScalarsInput(const StepScalars& v)
{
    Tensor t = Tensor::zeros(Shape{StepScalars::kCount}, DType::Float64);
    for (int i = 0; i < StepScalars::kCount; ++i) t.data<double>()[i] = v.values[i];
    return t;
}

// The element-wise cases' shapes (axpy's, which plain SGD's cases take too).
inline std::vector<Named> elementwiseShapes()
{
    return {
        {"one element", {1, 1, 1, 1}}, {"odd sizes", {3, 5, 7, 2}},
        {"", {16, 24, 24, 8}},         {"", {128, 10}},
        {"odd sizes", {37, 1001}},
    };
}

// The registered models' layers the table checks (op_cases_models.cpp), each named
// "<model> <layer>".
struct ModelConvolution
{
    std::string layer;
    Shape x; // NHWC input
    std::int64_t outChannels;
    int kernel; // square, stride 1
    Padding padding;
    bool bias, relu;
};
struct ModelPool
{
    std::string layer;
    Shape x;
    int kernel, stride;
    Padding padding;
};
struct ModelLrn
{
    std::string layer;
    Shape x;
    int radius;
    double bias, alpha, beta;
};
struct ModelLinear
{
    std::string layer;
    std::int64_t n, in, out;
    bool bias, relu;
};
// The input of a layer that takes a whole tensor (batch norm, flatten).
struct ModelTensor
{
    std::string layer;
    Shape x;
};
struct ModelLayers
{
    std::vector<ModelConvolution> convolutions;
    std::vector<ModelPool> pools;
    std::vector<ModelLrn> lrns;
    std::vector<ModelLinear> linears;
    std::vector<ModelTensor> batchNorms;
    std::vector<ModelTensor> flattens; // NHWC to NCHW before the first linear layer
};
const ModelLayers& modelLayers();

// The families, each appending its cases grouped by op.
void addConvolutionCases(std::vector<OpCase>& cases);
void addPoolingCases(std::vector<OpCase>& cases);
void addLrnCases(std::vector<OpCase>& cases);
void addLinearCases(std::vector<OpCase>& cases);
void addElementwiseCases(std::vector<OpCase>& cases);
void addBatchNormCases(std::vector<OpCase>& cases);
void addLayoutCases(std::vector<OpCase>& cases);
void addLossCases(std::vector<OpCase>& cases);
void addUpdateCases(std::vector<OpCase>& cases);
void addPreprocessCases(std::vector<OpCase>& cases);

} // namespace towers::engine::op_cases
