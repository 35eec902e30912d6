// SCAFFOLD: replaced by the real implementation
#include "engine/reference/reference_ops.h"

namespace towers::engine::reference {
void ReferenceOps::linearForward(const Tensor&, const Tensor&, const Tensor&, Tensor&, Activation) { throw Unsupported("reference: linearForward not written yet"); }
void ReferenceOps::linearBackwardData(const Tensor&, const Tensor&, Tensor&) { throw Unsupported("reference: linearBackwardData not written yet"); }
void ReferenceOps::linearBackwardWeights(const Tensor&, const Tensor&, Tensor&, Tensor*) { throw Unsupported("reference: linearBackwardWeights not written yet"); }

} // namespace towers::engine::reference
