#include "engine/reference/reference_ops.h"

namespace towers::engine {

std::unique_ptr<Ops> makeReferenceOps()
{
    return std::make_unique<reference::ReferenceOps>();
}

namespace reference {

void requireFloat(const Tensor& t, const char* what)
{
    if (t.empty()) throw InvalidArgument(std::string(what) + ": tensor is empty");
    if (t.dtype() != DType::Float32 && t.dtype() != DType::Float64)
        throw Unsupported(std::string("reference backend: ") + what +
                          " must be float32 or float64, got " + std::string(dtypeName(t.dtype())));
}

} // namespace reference
} // namespace towers::engine
