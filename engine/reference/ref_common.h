#pragma once
// Private to engine/reference: the dtype rules and dispatch shared by the op families.
#include "engine/reference/reference_ops.h"

namespace towers::engine::reference {

// A float argument that must share the call's dtype (InvalidArgument otherwise).
inline void requireSameFloat(const Tensor& t, DType dtype, const char* what)
{
    requireFloat(t, what);
    requireDType(t, dtype, what);
}

// Calls f with a value of dtype's element type (float or double); dtype was checked before.
template <class F> void byDType(DType dtype, F&& f)
{
    if (dtype == DType::Float32)
        f(float{});
    else
        f(double{});
}

} // namespace towers::engine::reference
