// SCAFFOLD: replaced by the real implementation
#include "engine/cpu/onednn_backend.h"

namespace towers::engine::cpu {
void OneDnnOps::lrnForward(const LrnDesc&, const Tensor&, Tensor&, Tensor&) { throw Unsupported("cpu: lrnForward not written yet"); }
void OneDnnOps::lrnBackward(const LrnDesc&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&) { throw Unsupported("cpu: lrnBackward not written yet"); }

} // namespace towers::engine::cpu
