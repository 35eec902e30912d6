#pragma once
// The self-test a user runs first on a new machine (`towers-cli selftest`): every op of a backend
// against the plain reference backend on random inputs (forward and backward, the shapes of the
// seeds' networks among them), then a few real training steps on that backend: the loss falls,
// the replicas stay bitwise identical, and two towers equal one tower of the same global batch on
// the reference backend in float64.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/ops/ops.h"

namespace towers::engine {

struct SelfTestResult
{
    std::string name; // "conv2d forward 5x5 s1 same [8,12,12,64]->64", ...
    bool passed = false;
    double error = 0; // normalised L2 error against the reference, or the check's measure
    double tolerance = 0;
    std::string detail; // why it failed, or what was measured, in words
};

struct SelfTestOptions
{
    std::string backend =
        "onednn"; // what to test: "onednn" or "cuda" (the reference is the oracle)
    std::uint64_t seed = 1;
    bool training = true; // also the training steps (a few seconds)
    // Normalised L2 error allowed for float32 against the float64 reference; 0 takes the
    // backend's: 1e-5 for oneDNN, 1e-4 for CUDA (cuDNN's fastest algorithms, FFT and Winograd
    // among them, round more), 1e-2 for CUDA with TF32.
    double tolerance = 0;
    bool allowTf32 = false; // "cuda": let the ops use TF32 tensor cores
    // When set, the op checks run on what this makes instead of `backend` (tests give a backend
    // with a known fault); the training checks still use `backend`.
    std::function<std::unique_ptr<Ops>()> makeOps;
};

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
