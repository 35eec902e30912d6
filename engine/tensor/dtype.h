#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace towers::engine {

// Element types. Float32 is what training runs in; Float64 exists for the reference backend (the
// gradient checker's oracle); BFloat16 is reserved for mixed precision on GPUs. Int32 holds labels
// and pooling indices, Int64 counters (PyTorch's num_batches_tracked), UInt8 opaque workspaces,
// masks and raw images.
enum class DType : std::uint8_t
{
    Float32,
    Float64,
    BFloat16,
    Int32,
    Int64,
    UInt8
};

constexpr std::size_t dtypeSize(DType t)
{
    switch (t) {
    case DType::Float32:
        return 4;
    case DType::Float64:
        return 8;
    case DType::BFloat16:
        return 2;
    case DType::Int32:
        return 4;
    case DType::Int64:
        return 8;
    case DType::UInt8:
        return 1;
    }
    return 0;
}

constexpr std::string_view dtypeName(DType t)
{
    switch (t) {
    case DType::Float32:
        return "float32";
    case DType::Float64:
        return "float64";
    case DType::BFloat16:
        return "bfloat16";
    case DType::Int32:
        return "int32";
    case DType::Int64:
        return "int64";
    case DType::UInt8:
        return "uint8";
    }
    return "?";
}

template <class T> constexpr DType dtypeOf();
template <> constexpr DType dtypeOf<float>()
{
    return DType::Float32;
}
template <> constexpr DType dtypeOf<double>()
{
    return DType::Float64;
}
template <> constexpr DType dtypeOf<std::int32_t>()
{
    return DType::Int32;
}
template <> constexpr DType dtypeOf<std::int64_t>()
{
    return DType::Int64;
}
template <> constexpr DType dtypeOf<std::uint8_t>()
{
    return DType::UInt8;
}

} // namespace towers::engine
