// SCAFFOLD: replaced by the real implementation
#include "engine/cpu/onednn_backend.h"

namespace towers::engine::cpu {
void OneDnnOps::linearForward(const Tensor&, const Tensor&, const Tensor&, Tensor&, Activation) { throw Unsupported("cpu: linearForward not written yet"); }
void OneDnnOps::linearBackwardData(const Tensor&, const Tensor&, Tensor&) { throw Unsupported("cpu: linearBackwardData not written yet"); }
void OneDnnOps::linearBackwardWeights(const Tensor&, const Tensor&, Tensor&, Tensor*) { throw Unsupported("cpu: linearBackwardWeights not written yet"); }

} // namespace towers::engine::cpu
