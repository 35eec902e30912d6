// SCAFFOLD: replaced by the real implementation
#include "engine/cpu/onednn_backend.h"

namespace towers::engine::cpu {
void OneDnnOps::conv2dForward(const Conv2dDesc&, const Tensor&, const Tensor&, const Tensor&, Tensor&, Activation) { throw Unsupported("cpu: conv2dForward not written yet"); }
void OneDnnOps::conv2dBackwardData(const Conv2dDesc&, const Tensor&, const Tensor&, Tensor&) { throw Unsupported("cpu: conv2dBackwardData not written yet"); }
void OneDnnOps::conv2dBackwardWeights(const Conv2dDesc&, const Tensor&, const Tensor&, Tensor&, Tensor*) { throw Unsupported("cpu: conv2dBackwardWeights not written yet"); }

} // namespace towers::engine::cpu
