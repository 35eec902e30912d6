#include "engine/ops/precision.h"

#include "engine/errors.h"

namespace towers::engine {

std::string_view precisionName(Precision p)
{
    return p == Precision::BFloat16 ? "bf16" : "fp32";
}

Precision parsePrecision(const std::string& name)
{
    if (name == "fp32") return Precision::Float32;
    if (name == "bf16") return Precision::BFloat16;
    throw InvalidArgument("unknown precision '" + name + "' (known: fp32, bf16)");
}

} // namespace towers::engine
