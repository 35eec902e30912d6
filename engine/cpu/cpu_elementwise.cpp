// SCAFFOLD: replaced by the real implementation
#include "engine/cpu/onednn_backend.h"

namespace towers::engine::cpu {
void OneDnnOps::reluForward(const Tensor&, Tensor&) { throw Unsupported("cpu: reluForward not written yet"); }
void OneDnnOps::reluBackward(const Tensor&, const Tensor&, Tensor&) { throw Unsupported("cpu: reluBackward not written yet"); }
void OneDnnOps::add(const Tensor&, const Tensor&, Tensor&) { throw Unsupported("cpu: add not written yet"); }
void OneDnnOps::dropoutForward(const Tensor&, double, std::uint64_t, Tensor&, Tensor&) { throw Unsupported("cpu: dropoutForward not written yet"); }
void OneDnnOps::dropoutBackward(const Tensor&, const Tensor&, double, Tensor&) { throw Unsupported("cpu: dropoutBackward not written yet"); }
void OneDnnOps::nhwcToNchw(const Tensor&, Tensor&) { throw Unsupported("cpu: nhwcToNchw not written yet"); }
void OneDnnOps::nchwToNhwc(const Tensor&, Tensor&) { throw Unsupported("cpu: nchwToNhwc not written yet"); }
double OneDnnOps::softmaxCrossEntropyForward(const Tensor&, const Tensor&, Tensor&) { throw Unsupported("cpu: softmaxCrossEntropyForward not written yet"); }
void OneDnnOps::softmaxCrossEntropyBackward(const Tensor&, const Tensor&, double, Tensor&) { throw Unsupported("cpu: softmaxCrossEntropyBackward not written yet"); }
double OneDnnOps::sumSquares(const Tensor&) { throw Unsupported("cpu: sumSquares not written yet"); }
void OneDnnOps::axpy(double, const Tensor&, Tensor&) { throw Unsupported("cpu: axpy not written yet"); }

} // namespace towers::engine::cpu
