#include "engine/tensor/tensor.h"

#include <cmath>
#include <cstring>

#include "engine/tensor/bfloat16.h"
#include "engine/tensor/device_memory.h"

namespace towers::engine {

Tensor::Tensor(Shape shape, DType dtype) : m_shape(std::move(shape)), m_dtype(dtype)
{
    m_buffer = Buffer::allocateHost(static_cast<std::size_t>(m_shape.numel()) * dtypeSize(dtype));
}

Tensor::Tensor(Shape shape, DType dtype, const Device& device)
    : m_shape(std::move(shape)), m_dtype(dtype)
{
    m_buffer =
        Buffer::allocate(device, static_cast<std::size_t>(m_shape.numel()) * dtypeSize(dtype));
}

Tensor Tensor::pinned(Shape shape, DType dtype)
{
    Tensor t;
    t.m_shape = std::move(shape);
    t.m_dtype = dtype;
    t.m_buffer =
        Buffer::allocatePinnedHost(static_cast<std::size_t>(t.m_shape.numel()) * dtypeSize(dtype));
    return t;
}

Tensor Tensor::zeros(Shape shape, DType dtype)
{
    Tensor t;
    t.m_shape = std::move(shape);
    t.m_dtype = dtype;
    t.m_buffer =
        Buffer::allocateHostZeroed(static_cast<std::size_t>(t.m_shape.numel()) * dtypeSize(dtype));
    return t;
}

Tensor Tensor::filled(Shape shape, DType dtype, double value)
{
    Tensor t(std::move(shape), dtype);
    t.fill(value);
    return t;
}

const Device& Tensor::device() const
{
    static const Device host = Device::host();
    return m_buffer ? m_buffer->device() : host;
}

Tensor Tensor::reshaped(Shape shape) const
{
    if (shape.numel() != numel())
        throw ShapeError("cannot reshape " + m_shape.str() + " to " + shape.str() +
                         ": element counts differ");
    Tensor t = *this;
    t.m_shape = std::move(shape);
    return t;
}

Tensor Tensor::slice(std::int64_t begin, std::int64_t end) const
{
    if (rank() == 0 || begin < 0 || end < begin || end > m_shape[0])
        throw ShapeError("slice [" + std::to_string(begin) + ", " + std::to_string(end) +
                         ") out of range for " + m_shape.str());
    Tensor t = *this;
    const std::size_t row = m_shape[0] ? bytes() / static_cast<std::size_t>(m_shape[0]) : 0;
    t.m_offset += static_cast<std::size_t>(begin) * row;
    t.m_shape[0] = end - begin;
    return t;
}

Tensor Tensor::clone() const
{
    return copyTo(device());
}

Tensor Tensor::copyTo(const Device& target) const
{
    if (empty()) return {};
    Tensor t(m_shape, m_dtype, target);
    copyBytes(t.raw(), target, raw(), device(), bytes());
    return t;
}

void Tensor::setZero()
{
    if (empty() || bytes() == 0) return;
    if (device().isHost())
        std::memset(raw(), 0, bytes());
    else
        requireDeviceMemory(device()).setZero(device().index, raw(), bytes());
}

Tensor Tensor::to(DType dtype) const
{
    requireHost("conversion to another dtype");
    Tensor t(m_shape, dtype);
    for (std::int64_t i = 0; i < numel(); ++i) t.setAt(i, at(i));
    return t;
}

void Tensor::fill(double value)
{
    requireHost("fill");
    for (std::int64_t i = 0; i < numel(); ++i) setAt(i, value);
}

void Tensor::copyFrom(const Tensor& other)
{
    if (other.m_shape != m_shape || other.m_dtype != m_dtype)
        throw ShapeError("copy from " + other.describe() + " into " + describe());
    if (bytes()) copyBytes(raw(), device(), other.raw(), other.device(), bytes());
}

void Tensor::ensure(Tensor& t, const Shape& shape, DType dtype, const Device& device)
{
    if (!t.empty() && t.m_dtype == dtype && t.m_offset == 0 && t.device() == device &&
        t.m_buffer->size() >= static_cast<std::size_t>(shape.numel()) * dtypeSize(dtype)) {
        t.m_shape = shape;
        return;
    }
    t = Tensor(shape, dtype, device);
}

double Tensor::at(std::int64_t i) const
{
    requireHost("element access");
    switch (m_dtype) {
    case DType::Float32:
        return static_cast<const float*>(raw())[i];
    case DType::Float64:
        return static_cast<const double*>(raw())[i];
    case DType::Int32:
        return static_cast<const std::int32_t*>(raw())[i];
    case DType::Int64:
        return static_cast<double>(static_cast<const std::int64_t*>(raw())[i]);
    case DType::UInt8:
        return static_cast<const std::uint8_t*>(raw())[i];
    case DType::BFloat16:
        return fromBfloat16Bits(static_cast<const std::uint16_t*>(raw())[i]);
    }
    return 0;
}

void Tensor::setAt(std::int64_t i, double v)
{
    requireHost("element access");
    switch (m_dtype) {
    case DType::Float32:
        static_cast<float*>(raw())[i] = static_cast<float>(v);
        break;
    case DType::Float64:
        static_cast<double*>(raw())[i] = v;
        break;
    case DType::Int32:
        static_cast<std::int32_t*>(raw())[i] = static_cast<std::int32_t>(v);
        break;
    case DType::Int64:
        static_cast<std::int64_t*>(raw())[i] = static_cast<std::int64_t>(v);
        break;
    case DType::UInt8:
        static_cast<std::uint8_t*>(raw())[i] = static_cast<std::uint8_t>(v);
        break;
    case DType::BFloat16: // by way of float32, rounded to nearest even
        static_cast<std::uint16_t*>(raw())[i] = bfloat16Bits(static_cast<float>(v));
        break;
    }
}

std::string Tensor::describe() const
{
    std::string text = std::string(dtypeName(m_dtype)) + " " + m_shape.str();
    if (!device().isHost()) text += " on " + device().str();
    return text;
}

void Tensor::checkType(DType t) const
{
    if (empty()) throw InvalidArgument("access to an empty tensor");
    requireHost("element access");
    if (t != m_dtype)
        throw InvalidArgument("tensor is " + std::string(dtypeName(m_dtype)) + ", accessed as " +
                              std::string(dtypeName(t)));
}

void Tensor::requireHost(const char* what) const
{
    if (m_buffer && !m_buffer->device().isHost())
        throw InvalidArgument(std::string(what) + " needs the tensor on the host, but " +
                              describe() + " is not: copy it with copyTo(Device::host()) first");
}

void requireShape(const Tensor& t, const Shape& expected, const char* what)
{
    if (t.empty())
        throw ShapeError(std::string(what) + ": tensor is empty, expected " + expected.str());
    if (t.shape() != expected)
        throw ShapeError(std::string(what) + ": expected shape " + expected.str() + ", got " +
                         t.shape().str());
}

bool allFinite(const Tensor& t)
{
    bool finite = true;
    if (t.dtype() == DType::Float32)
        for (const float v : t.span<float>()) finite = finite && std::isfinite(v);
    else if (t.dtype() == DType::Float64)
        for (const double v : t.span<double>()) finite = finite && std::isfinite(v);
    return finite;
}

void requireDType(const Tensor& t, DType expected, const char* what)
{
    if (t.dtype() != expected)
        throw InvalidArgument(std::string(what) + ": expected " + std::string(dtypeName(expected)) +
                              ", got " + std::string(dtypeName(t.dtype())));
}

} // namespace towers::engine
