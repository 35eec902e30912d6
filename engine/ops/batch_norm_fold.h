#pragma once
// A batch norm in evaluation mode folded into the convolution or linear layer before it, as plain
// C++ that compiles for the host and for a GPU: the oneDNN backend's foldBatchNorm, the CUDA
// kernel's (engine/cuda/kernel_math.h) and the ONNX export's folding compute each value with these,
// so all three fold alike. The reference backend writes the formula out on its own (the oracle the
// op cases hold them to). C++17, no CUDA header.
#include <math.h>

#include "engine/host_device.h"

namespace towers::engine {

// The scale of an output channel: gamma / sqrt(runningVar + epsilon), in double.
TOWERS_HD inline double foldedScale(float gamma, float runningVar, double epsilon)
{
    return double(gamma) / sqrt(double(runningVar) + epsilon);
}

// A weight of that channel, scaled.
TOWERS_HD inline float foldedWeight(float w, double scale)
{
    return float(double(w) * scale);
}

// The channel's bias: (b - runningMean) * scale + beta, b 0 for a layer without bias.
TOWERS_HD inline float foldedBias(float b, float runningMean, float beta, double scale)
{
    return float((double(b) - double(runningMean)) * scale + double(beta));
}

} // namespace towers::engine
