// SCAFFOLD: replaced by the real implementation
#include "engine/cpu/onednn_backend.h"

namespace towers::engine::cpu {
void OneDnnOps::batchNormForwardTraining(const BatchNormDesc&, const Tensor&, const Tensor&, const Tensor&, Tensor&, Tensor&, Tensor&, Tensor&, Tensor&) { throw Unsupported("cpu: batchNormForwardTraining not written yet"); }
void OneDnnOps::batchNormForwardInference(const BatchNormDesc&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&) { throw Unsupported("cpu: batchNormForwardInference not written yet"); }
void OneDnnOps::batchNormBackward(const BatchNormDesc&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&, Tensor&, Tensor&) { throw Unsupported("cpu: batchNormBackward not written yet"); }

} // namespace towers::engine::cpu
