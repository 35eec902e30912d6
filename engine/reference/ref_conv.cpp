// SCAFFOLD: replaced by the real implementation
#include "engine/reference/reference_ops.h"

namespace towers::engine::reference {
void ReferenceOps::conv2dForward(const Conv2dDesc&, const Tensor&, const Tensor&, const Tensor&, Tensor&, Activation) { throw Unsupported("reference: conv2dForward not written yet"); }
void ReferenceOps::conv2dBackwardData(const Conv2dDesc&, const Tensor&, const Tensor&, Tensor&) { throw Unsupported("reference: conv2dBackwardData not written yet"); }
void ReferenceOps::conv2dBackwardWeights(const Conv2dDesc&, const Tensor&, const Tensor&, Tensor&, Tensor*) { throw Unsupported("reference: conv2dBackwardWeights not written yet"); }

} // namespace towers::engine::reference
