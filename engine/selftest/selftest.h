#pragma once
// The self-test a user runs first on a new machine (`towers-cli selftest`): the op-case table
// (engine/selftest/op_cases.h: every op of a backend against the plain reference backend in
// float64, forward and backward, on odd geometries and the registered models' layers), then a few
// real training steps on that backend: the loss falls, the replicas stay bitwise identical, and
// two towers equal one tower of the same global batch.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/ops/ops.h"
#include "engine/selftest/op_cases.h"

namespace towers::engine {

struct SelfTestResult
{
    // An op case's label ("conv2d forward 5x5 s1 same [4,24,24,3]->64, bias, relu
    // (cifar10-tutorial conv1)"), or a training check's name ("training: ...").
    std::string name;
    std::string op;       // an op case's op ("conv2d forward"); empty for the training checks
    std::string caseName; // an op case's name within its op
    bool passed = false;
    // Normalised L2 error against the reference (an op case's worst output: the one that failed,
    // else the one nearest its tolerance), or the check's measure.
    double error = 0;
    double tolerance = 0;
    std::string detail; // why it failed, or what was measured, in words ("y 1.2e-07, dx 3e-07")
    std::vector<OpOutputCheck> outputs; // an op case's outputs, each with its error
};

// The cases of one op, for a line per op.
struct SelfTestOpSummary
{
    std::string op;
    int cases = 0, failed = 0;
    // The worst case: a failed one, else the one nearest its tolerance.
    std::string worstCase;
    double worstError = 0, worstTolerance = 0;
    double worstRatio = 0;
    bool worstPassed = true;
};

struct SelfTestOptions
{
    std::string backend =
        "onednn"; // what to test: "onednn" or "cuda" (the reference is the oracle)
    std::uint64_t seed = 1;
    bool training = true; // also the training steps (a few seconds)
    // Normalised L2 error allowed for float32 against the float64 reference; 0 takes each case's
    // tolerance for the backend's math mode (selfTestMathMode: float32 for oneDNN, bfloat16 with
    // Precision::BFloat16; for CUDA,
    // whose cuDNN picks its fastest algorithms, FFT and Winograd among them, float32 (fast
    // algorithms), or TF32). Exact outputs (masks, copies) stay exact.
    double tolerance = 0;
    bool allowTf32 = false; // "cuda": let the ops use TF32 tensor cores
    // "cuda": the GPU the op cases and both training towers run on; -1: the op cases on GPU 0,
    // the towers on the GPUs in turn (GPUs 0 and 1 where there are two).
    int gpu = -1;
    // bf16: the backend's convolutions and matrix products in bfloat16 (judged in the bfloat16
    // math mode), the training checks too.
    Precision precision = Precision::Float32;
    // When not empty, only the op cases whose label contains it (the training checks still run
    // unless `training` is false).
    std::string filter;
    // When set, the op checks run on what this makes instead of `backend` (tests give a backend
    // with a known fault); the training checks still use `backend`.
    std::function<std::unique_ptr<Ops>()> makeOps;
};

// The math mode the op cases are judged in for these options.
MathMode selfTestMathMode(const SelfTestOptions& options);

// The op-case results grouped by op, in table order (the training checks are left out).
std::vector<SelfTestOpSummary> summarizeByOp(const std::vector<SelfTestResult>& results);

// The backends that can be self-tested here: "onednn", and "cuda" when the CUDA backend is loaded
// and sees a GPU.
std::vector<std::string> selfTestBackends();

// Runs every check in order, calling onResult after each (for progress), and returns them all.
// Throws UnknownName for an unknown backend; a check that throws is a failed result with the
// message, not an exception.
std::vector<SelfTestResult>
runSelfTest(const SelfTestOptions& options,
            const std::function<void(const SelfTestResult&)>& onResult = {});

} // namespace towers::engine
