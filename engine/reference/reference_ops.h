#pragma once
// The reference backend: naive loops, float32 and float64, sums accumulated in double. Slow and
// obviously right; every other backend is compared against it. Each op family lives in its own
// file (ref_conv.cpp, ref_pool.cpp, ...).
#include "engine/ops/ops.h"

namespace towers::engine::reference {

// The ops the reference implements: every single op; the composite ops are the base class's
// compositions of them, the very definitions the fused backends are tested against.
#define TOWERS_REFERENCE_OPS(X) TOWERS_SINGLE_OPS(X)

class ReferenceOps : public Ops
{
public:
    ReferenceOps() : Ops(opSet({TOWERS_REFERENCE_OPS(TOWERS_OP_ID)})) {}

    std::string name() const override { return "reference"; }
    Device device() const override { return Device::host(); }
    bool runsFloat(DType dtype) const override
    {
        return dtype == DType::Float32 || dtype == DType::Float64;
    }

protected:
    TOWERS_REFERENCE_OPS(TOWERS_OP_OVERRIDE)
};

} // namespace towers::engine::reference
