// SCAFFOLD: replaced by the real implementation
#include "engine/reference/reference_ops.h"

namespace towers::engine::reference {
void ReferenceOps::batchNormForwardTraining(const BatchNormDesc&, const Tensor&, const Tensor&, const Tensor&, Tensor&, Tensor&, Tensor&, Tensor&, Tensor&) { throw Unsupported("reference: batchNormForwardTraining not written yet"); }
void ReferenceOps::batchNormForwardInference(const BatchNormDesc&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&) { throw Unsupported("reference: batchNormForwardInference not written yet"); }
void ReferenceOps::batchNormBackward(const BatchNormDesc&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&, Tensor&, Tensor&) { throw Unsupported("reference: batchNormBackward not written yet"); }

} // namespace towers::engine::reference
