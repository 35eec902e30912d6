#pragma once
// The CPU backend on oneDNN. This header is free of oneDNN types.
#include <memory>

#include "engine/ops/ops.h"

namespace towers::engine::cpu {

// A backend whose ops run on the calling thread's OpenMP team (set its size with
// setCpuThreads). Float32 only; other dtypes throw Unsupported.
std::unique_ptr<Ops> makeOneDnnOps();

// Sets the number of OpenMP threads used by ops called from this thread (0 = all cores).
void setCpuThreads(int threads);
int cpuThreads();

} // namespace towers::engine::cpu
