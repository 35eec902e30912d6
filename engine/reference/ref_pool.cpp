// SCAFFOLD: replaced by the real implementation
#include "engine/reference/reference_ops.h"

namespace towers::engine::reference {
void ReferenceOps::maxPoolForward(const Pool2dDesc&, const Tensor&, Tensor&, Tensor&) { throw Unsupported("reference: maxPoolForward not written yet"); }
void ReferenceOps::maxPoolBackward(const Pool2dDesc&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&) { throw Unsupported("reference: maxPoolBackward not written yet"); }

} // namespace towers::engine::reference
