// SCAFFOLD: replaced by the real implementation
#include "engine/reference/reference_ops.h"

namespace towers::engine::reference {
void ReferenceOps::lrnForward(const LrnDesc&, const Tensor&, Tensor&, Tensor&) { throw Unsupported("reference: lrnForward not written yet"); }
void ReferenceOps::lrnBackward(const LrnDesc&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&) { throw Unsupported("reference: lrnBackward not written yet"); }

} // namespace towers::engine::reference
