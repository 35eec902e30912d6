#pragma once
// The op-case table: every op of Ops (engine/ops/ops.h) on the shapes and parameters worth
// checking (odd sizes, SAME with asymmetric pads, strides, batch 1, large channel counts, the
// layers of the registered models, ties in max-pooling), run on any backend and compared output by
// output with the reference backend in float64 by normalised error, as ggml's test-backend-ops
// does. One table for every backend: `towers-cli selftest --device X` runs it on X, and
// tests/engine/tst_op_cases runs it on every backend the machine has, so a GPU is checked on
// exactly the cases CI checks oneDNN on.
//
// Inputs are drawn from a seed (the same on every platform) as float32 values, given to the
// backend in float32 and to the reference in float64. They keep away from the kinks where a
// rounding could flip a discrete choice: max-pooling inputs are distinct (except in the cases
// that test ties, whose winner the reference and the kernels define: the first maximum in scan
// order), and where a backend's own ReLU output masks a gradient, dy is zero where the
// pre-activation is within 1 % of its RMS of zero.
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engine/ops/ops.h"
#include "engine/tensor/rng.h"

namespace towers::engine {

// ||a - b||_2 / ||b||_2 over every element (||a - b||_2 when b is all zeros): how far a backend's
// output a is from the reference's b. Host tensors of any element types; ShapeError when their
// element counts differ; NaN when either holds a NaN.
double normalisedError(const Tensor& a, const Tensor& b);

// How a backend computes float32, which sets how close to the float64 reference it must come.
enum class MathMode
{
    // float32 arithmetic by algorithms that round about as direct summation does (oneDNN and
    // Towers' kernels, their Winograd convolutions included).
    Float32,
    // float32 arithmetic, but convolutions by whatever algorithm measures fastest, FFT and
    // Winograd transforms included, which round more (cuDNN: the CUDA backend without TF32).
    Float32Fast,
    // products of convolutions and matrix products in TF32 (10-bit mantissa) on tensor cores.
    Tf32,
    // convolutions and matrix products reading bfloat16 copies of their operands (8-bit mantissa,
    // rounded to nearest even), accumulating in float32 (--precision bf16); the rest float32.
    BFloat16,
};

// "float32", "float32 (fast algorithms)", "TF32", "bfloat16"
std::string mathModeName(MathMode mode);

// The normalised error a case allows in each math mode.
struct Tolerance
{
    double float32 = 1e-5;
    double float32Fast = 1e-4;
    double tf32 = 1e-2;
    double bfloat16 = 1e-2;

    double in(MathMode mode) const;
    // Convolutions and matrix products: sums of many products, TF32 and bfloat16 apply. In
    // bfloat16 (two operands each rounded by up to 2^-8) the table's cases measure 1.3e-3 to
    // 5.4e-3 on oneDNN.
    static Tolerance products() { return {1e-5, 1e-4, 1e-2, 1e-2}; }
    // Reductions and transcendental functions: TF32 and bfloat16 do not apply (in bfloat16 the
    // float32 kernels run, a GPU's as in Float32Fast).
    static Tolerance reductions() { return {1e-5, 1e-4, 1e-4, 1e-4}; }
    // A few roundings per element (add, dropout's scale, axpy, the optimizer updates, max-pool
    // backward's sums over overlapping windows).
    static Tolerance elementwise() { return {1e-6, 1e-6, 1e-6, 1e-6}; }
    // Copies and selections (ReLU, layouts, max-pool forward): bit for bit.
    static Tolerance exact() { return {0, 0, 0, 0}; }
};

// One output of a case. An exact output (a dropout mask) must equal the reference's bit for bit,
// whatever the case's tolerance.
struct OpOutput
{
    OpOutput(std::string name_, Tensor value_, bool exact_ = false)
        : name(std::move(name_)), value(std::move(value_)), exact(exact_)
    {
    }
    std::string name; // "y", "dx", "dw", ...
    Tensor value;
    bool exact = false;
};

struct OpCase
{
    std::string op; // "conv2d forward", "max-pool forward + backward", ...: the group it reports in
    std::string name; // "5x5 s1 same [4,24,24,3]->64, bias, relu (cifar10-tutorial conv1)"
    Tolerance tolerance;
    // Draws the inputs: host tensors, float ones as Float64 holding float32 values (labels Int32,
    // masks and images UInt8).
    std::function<std::vector<Tensor>(Rng& rng)> makeInputs;
    // Runs the op on `ops` from the inputs (on ops' device, float ones in the dtype it computes
    // in, except those of `keepDType`) and returns its outputs. Never changes the inputs.
    std::function<std::vector<OpOutput>(Ops& ops, const std::vector<Tensor>& inputs)> run;
    // The inputs (by index) every backend is given in the dtype they were drawn in: Float64 that
    // is data of its own rather than a float operand (preprocessImages' draws, any double).
    std::vector<std::size_t> keepDType = {};

    std::string label() const { return op + " " + name; } // unique in the table
};

// Every case, grouped by op in a fixed order (built once; thread-safe).
const std::vector<OpCase>& opCases();
// The ops of the table in its order, each once.
std::vector<std::string> opCaseOps();

// The inputs of a case for a seed: the same values on every platform and every call.
std::vector<Tensor> opCaseInputs(const OpCase& c, std::uint64_t seed = 1);
// The case run on the reference backend in float64: what backends are compared with.
std::vector<OpOutput> opCaseReference(const OpCase& c, const std::vector<Tensor>& inputs);

struct OpOutputCheck
{
    std::string name;
    double error = 0;
    double tolerance = 0;
    bool passed = false;
};

struct OpCaseResult
{
    bool passed = false;
    std::vector<OpOutputCheck> outputs;
    // The output that failed, else the one closest to its tolerance.
    double error = 0;
    double tolerance = 0;
    std::string failure; // why the case could not run (an exception's message), else empty

    // "y 1.2e-07, dx 3.4e-07" (and the failure, when there is one).
    std::string detail() const;
};

// Runs case `c` on `ops` in float32 and compares every output with the reference's, allowing the
// case's tolerance for `mode` (or `tolerance` when it is above 0; exact outputs stay exact). Inputs
// are uploaded to ops' device and outputs read back to the host. An exception (an op the backend
// refuses, an output of the wrong shape) is a failed result with the message, not a throw.
OpCaseResult runOpCase(const OpCase& c, Ops& ops, MathMode mode, const std::vector<Tensor>& inputs,
                       const std::vector<OpOutput>& reference, double tolerance = 0);
// The same, drawing the inputs from `seed` and running the reference first.
OpCaseResult runOpCase(const OpCase& c, Ops& ops, MathMode mode, std::uint64_t seed = 1,
                       double tolerance = 0);

} // namespace towers::engine
