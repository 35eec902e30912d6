#pragma once
// Private to engine/reference: the dtype rules and dispatch shared by the op families.
#include "engine/reference/reference_ops.h"

namespace towers::engine::reference {

// Calls f with a value of dtype's element type (float or double); dtype was checked before.
template <class F> void byDType(DType dtype, F&& f)
{
    if (dtype == DType::Float32)
        f(float{});
    else
        f(double{});
}

} // namespace towers::engine::reference
