#pragma once
// The backends by name: the one place that knows which exist, how each is made and what to say
// about a name that is none of them. Registered explicitly, in backends.cpp (no static
// initialisers).
#include <memory>
#include <string>
#include <vector>

#include "engine/ops/ops.h"
#include "engine/ops/precision.h"

namespace towers::engine {

struct BackendOptions
{
    // For "cuda": the GPU, and whether cuDNN and cuBLAS may use TF32 tensor cores.
    int gpu = 0;
    bool allowTf32 = false;
    // Convolutions and matrix products in bfloat16 (precision.h): "onednn" where the CPU has
    // AVX512_BF16 or AMX; elsewhere, and on the other backends, Unsupported saying why.
    Precision precision = Precision::Float32;
    // For "cuda": each convolution's algorithm the fastest of cuDNN's measurement
    // (--cudnn-benchmark, GpuOpsOptions::measureAlgorithms) instead of the first of its heuristics.
    bool measureAlgorithms = false;
};

// "onednn", "reference", "cuda" (the last whether or not this build or machine can run it).
const std::vector<std::string>& backendNames();
// "onednn, reference, cuda"; with lastJoin " or ": "onednn, reference or cuda".
std::string backendNamesText(const std::string& lastJoin = ", ");
bool isBackendName(const std::string& name);
// UnknownName "unknown backend 'x' (known: onednn, reference, cuda)" unless `name` is one.
void requireBackendName(const std::string& name);
// Whether the backend's tensors live in host memory (onednn, reference).
bool isHostBackend(const std::string& name);

// A new execution context of the named backend, on the calling thread (a oneDNN context runs its
// ops with the calling thread's OpenMP team: cpu::setCpuThreads). The GPU backend's ops run
// what they leave out staged through oneDNN. UnknownName for an unknown name; Unsupported, with
// the reason, for "cuda" where this build or machine has no usable GPU, and for a precision the
// backend or the machine cannot run.
std::unique_ptr<Ops> makeBackendOps(const std::string& name, const BackendOptions& options = {});

// The backend as a benchmark names it: "onednn 2.6.3", "reference",
// "cuda (NVIDIA H100; CUDA runtime 13.0, ...; TF32)".
std::string describeBackend(const std::string& name, const BackendOptions& options = {});

} // namespace towers::engine
