#include "engine/reference/reference_ops.h"

namespace towers::engine {

std::unique_ptr<Ops> makeReferenceOps()
{
    return std::make_unique<reference::ReferenceOps>();
}

} // namespace towers::engine
