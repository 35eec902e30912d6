#pragma once
// The CPU backend on oneDNN. This header is free of oneDNN types.
#include <memory>
#include <string>

#include "engine/ops/ops.h"

namespace towers::engine::cpu {

// A backend whose ops run on the calling thread's OpenMP team (set its size with
// setCpuThreads). Float32 tensors only; other dtypes throw Unsupported. With Precision::BFloat16
// its convolutions and matrix products compute in bfloat16 (precision.h); Unsupported with
// bf16Unavailable()'s reason where the CPU cannot.
std::unique_ptr<Ops> makeOneDnnOps(Precision precision = Precision::Float32);

// Empty where oneDNN runs bfloat16 convolutions and matrix products natively here (AVX512_BF16
// or AMX, within ONEDNN_MAX_CPU_ISA); else why not, in words a user can act on: "--precision bf16
// needs " + bf16Needs() + ": use --precision fp32".
std::string bf16Unavailable();
// What bfloat16 needs that this CPU lacks ("" where it runs): "a CPU with AVX512_BF16 or AMX
// (...), where oneDNN runs bfloat16 natively; oneDNN's kernels here are for avx2".
std::string bf16Needs();

// Sets the number of OpenMP threads used by ops called from this thread (0 = all cores).
void setCpuThreads(int threads);
int cpuThreads();

// What a convolution serves: training (the forward that keeps state for backward, the backward)
// or evaluation's forward alone. In bf16 without AMX the two may run different algorithms
// (conv_plan.cpp: chooseConvAlgorithm); in fp32, and with AMX, they never do.
enum class ConvUse
{
    Training,
    Evaluation
};

// How `ops` (a backend from makeOneDnnOps) runs convolutions of this geometry: "direct" (oneDNN),
// "winograd 3x3" (oneDNN's Winograd where its heuristic picks it, on AVX-512; elsewhere Towers'
// F(4x4, 3x3)), "winograd 5x5" (Towers' F(2x2, 5x5)) or "direct bf16"; primitiveImplementations()
// tells whose. For tests and benchmark reports; InvalidArgument for another backend.
std::string convolutionAlgorithm(Ops& ops, const Conv2dDesc& d, ConvUse use = ConvUse::Training);

} // namespace towers::engine::cpu
