// SCAFFOLD: replaced by the real implementation
#include "engine/reference/reference_ops.h"

namespace towers::engine::reference {
void ReferenceOps::reluForward(const Tensor&, Tensor&) { throw Unsupported("reference: reluForward not written yet"); }
void ReferenceOps::reluBackward(const Tensor&, const Tensor&, Tensor&) { throw Unsupported("reference: reluBackward not written yet"); }
void ReferenceOps::add(const Tensor&, const Tensor&, Tensor&) { throw Unsupported("reference: add not written yet"); }
void ReferenceOps::dropoutForward(const Tensor&, double, std::uint64_t, Tensor&, Tensor&) { throw Unsupported("reference: dropoutForward not written yet"); }
void ReferenceOps::dropoutBackward(const Tensor&, const Tensor&, double, Tensor&) { throw Unsupported("reference: dropoutBackward not written yet"); }
void ReferenceOps::nhwcToNchw(const Tensor&, Tensor&) { throw Unsupported("reference: nhwcToNchw not written yet"); }
void ReferenceOps::nchwToNhwc(const Tensor&, Tensor&) { throw Unsupported("reference: nchwToNhwc not written yet"); }
double ReferenceOps::softmaxCrossEntropyForward(const Tensor&, const Tensor&, Tensor&) { throw Unsupported("reference: softmaxCrossEntropyForward not written yet"); }
void ReferenceOps::softmaxCrossEntropyBackward(const Tensor&, const Tensor&, double, Tensor&) { throw Unsupported("reference: softmaxCrossEntropyBackward not written yet"); }
double ReferenceOps::sumSquares(const Tensor&) { throw Unsupported("reference: sumSquares not written yet"); }
void ReferenceOps::axpy(double, const Tensor&, Tensor&) { throw Unsupported("reference: axpy not written yet"); }

} // namespace towers::engine::reference
