#pragma once
// The arithmetic precision of a backend's convolutions and matrix products (--precision).
// Float32: everything in float32. BFloat16: mixed precision as PyTorch's autocast runs it, with
// convolutions and matrix products reading bfloat16 copies of their inputs (activations, weights,
// gradients, rounded to nearest even) and accumulating and writing float32; everything else
// (normalisation, pooling, the loss, the master weights, the optimizer state, the checkpoints)
// stays float32, and no loss scaling is needed. Tensors between the ops of training stay float32;
// the forward pass of evaluation keeps its images bfloat16 where the backend takes them
// (Ops::bf16Activations, ExecContext::bf16Activations).
#include <cstdint>
#include <string>
#include <string_view>

namespace towers::engine {

enum class Precision : std::uint8_t
{
    Float32,
    BFloat16
};

// "fp32", "bf16": the names of --precision, the run configuration and the checkpoints.
std::string_view precisionName(Precision p);
// InvalidArgument "unknown precision 'x' (known: fp32, bf16)" unless `name` is one.
Precision parsePrecision(const std::string& name);

} // namespace towers::engine
