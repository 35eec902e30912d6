#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "engine/errors.h"
#include "engine/tensor/buffer.h"
#include "engine/tensor/dtype.h"
#include "engine/tensor/shape.h"

namespace towers::engine {

// A dense, contiguous, row-major view of elements in a Buffer. Copying a Tensor copies the view,
// not the bytes (the buffer is shared); use clone() for a deep copy. An empty (default) tensor has
// no buffer. A tensor lives on one device: element access from the host (data, at, fill, ...)
// throws InvalidArgument for a tensor on a GPU; copyTo moves bytes between devices.
class Tensor
{
public:
    Tensor() = default;
    // Allocates an uninitialised tensor on the host.
    Tensor(Shape shape, DType dtype);
    // Allocates an uninitialised tensor on `device` (Unsupported when its backend is not loaded).
    Tensor(Shape shape, DType dtype, const Device& device);
    // A host tensor of zeros. A large one's memory is only taken when written
    // (Buffer::allocateHostZeroed): a layer's parameters are made so.
    static Tensor zeros(Shape shape, DType dtype);
    // An uninitialised host tensor in page-locked memory when a GPU backend is loaded (batches
    // on their way to GPU towers), else in plain host memory.
    static Tensor pinned(Shape shape, DType dtype);
    static Tensor filled(Shape shape, DType dtype, double value);

    bool empty() const { return !m_buffer; }
    const Shape& shape() const { return m_shape; }
    DType dtype() const { return m_dtype; }
    const Device& device() const;
    std::int64_t numel() const { return m_shape.numel(); }
    std::size_t bytes() const { return static_cast<std::size_t>(numel()) * dtypeSize(m_dtype); }
    int rank() const { return m_shape.rank(); }
    std::int64_t dim(int i) const { return m_shape[i]; }

    void* raw() { return static_cast<char*>(m_buffer->data()) + m_offset; }
    const void* raw() const { return static_cast<const char*>(m_buffer->data()) + m_offset; }
    // The storage the bytes live in (shared by views), for telling whether two tensors are the
    // same storage rather than merely at the same address (a freed buffer's may be reused).
    std::weak_ptr<const Buffer> storage() const { return m_buffer; }

    // Typed access; throws InvalidArgument if T does not match the dtype.
    template <class T> T* data()
    {
        checkType(dtypeOf<T>());
        return static_cast<T*>(raw());
    }
    template <class T> const T* data() const
    {
        checkType(dtypeOf<T>());
        return static_cast<const T*>(raw());
    }
    template <class T> std::span<T> span()
    {
        return {data<T>(), static_cast<std::size_t>(numel())};
    }
    template <class T> std::span<const T> span() const
    {
        return {data<T>(), static_cast<std::size_t>(numel())};
    }

    // A view of the same bytes with another shape of equal element count.
    Tensor reshaped(Shape shape) const;
    // A view of rows [begin, end) of the first dimension.
    Tensor slice(std::int64_t begin, std::int64_t end) const;
    // A deep copy on the same device.
    Tensor clone() const;
    // A deep copy on `device` (the bytes are copied even when it is this tensor's device).
    Tensor copyTo(const Device& device) const;
    // This tensor when it is on the host (no copy), else a copy on the host: for reading a GPU
    // tensor's values (checkpoints, checks, logits).
    Tensor onHost() const { return device().isHost() ? *this : copyTo(Device::host()); }
    // Sets every byte to zero, on whatever device the tensor lives.
    void setZero();
    // Converts element-wise between Float32 and Float64 (a new tensor).
    Tensor to(DType dtype) const;
    void fill(double value);
    // Copies bytes from a tensor of the same shape and dtype, on any device.
    void copyFrom(const Tensor& other);

    // Makes `t` a tensor of this shape and dtype on `device`, reusing its buffer when it is
    // already there and big enough.
    static void ensure(Tensor& t, const Shape& shape, DType dtype,
                       const Device& device = Device::host());

    // Element i as double, whatever the floating dtype (for tests and reporting, not hot paths).
    double at(std::int64_t i) const;
    void setAt(std::int64_t i, double v);

    std::string describe() const; // "float32 [128, 10]"

private:
    void checkType(DType t) const;
    void requireHost(const char* what) const;
    Shape m_shape;
    DType m_dtype = DType::Float32;
    std::shared_ptr<Buffer> m_buffer;
    std::size_t m_offset = 0;
};

// Throws ShapeError "<what>: expected <a>, got <b>" unless equal.
void requireShape(const Tensor& t, const Shape& expected, const char* what);
void requireDType(const Tensor& t, DType expected, const char* what);
// Whether every value of host tensor `t` is finite (no NaN, no infinity); true for a dtype that
// holds no floating point values (integers).
bool allFinite(const Tensor& t);

} // namespace towers::engine
