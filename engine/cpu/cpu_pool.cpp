// SCAFFOLD: replaced by the real implementation
#include "engine/cpu/onednn_backend.h"

namespace towers::engine::cpu {
void OneDnnOps::maxPoolForward(const Pool2dDesc&, const Tensor&, Tensor&, Tensor&) { throw Unsupported("cpu: maxPoolForward not written yet"); }
void OneDnnOps::maxPoolBackward(const Pool2dDesc&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&) { throw Unsupported("cpu: maxPoolBackward not written yet"); }

} // namespace towers::engine::cpu
