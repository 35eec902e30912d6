#pragma once
// Gradient clipping by the global norm, PyTorch's clip_grad_norm_ (and TensorFlow's
// clip_by_global_norm): every gradient is multiplied by min(1, maxNorm / (norm + 1e-6)), norm the
// square root of the sum of all their squares. The factor as plain C++ that compiles for the host
// and for a GPU: the oneDNN backend's clipToNorm and the CUDA kernel's compute it with this, so
// that both scale alike. The reference backend writes the formula out on its own (the oracle the
// op cases hold them to). C++17, no CUDA header.
#include <math.h>

#include "engine/host_device.h"

namespace towers::engine {

// PyTorch's epsilon, added to the norm so that a zero norm does not divide by zero.
constexpr double kClipNormEpsilon = 1e-6;

// The factor for gradients whose squares sum to `sumSquares`, rounded to float: 1 (the gradients
// left as they are) where the norm is at most maxNorm, or where it is NaN (a step whose gradients
// are not finite is skipped anyway).
TOWERS_HD inline float clipFactor(double sumSquares, double maxNorm)
{
    const double f = maxNorm / (sqrt(sumSquares) + kClipNormEpsilon);
    return f < 1.0 ? float(f) : 1.f;
}

} // namespace towers::engine
