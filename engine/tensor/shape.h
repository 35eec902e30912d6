#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace towers::engine {

// A tensor's dimensions, outermost first. Activations of image layers are NHWC (channels last, as
// TensorFlow); convolution weights are OIHW and linear weights [out, in] (as PyTorch's state_dict).
class Shape
{
public:
    Shape() = default;
    Shape(std::initializer_list<std::int64_t> dims);
    explicit Shape(std::vector<std::int64_t> dims);

    int rank() const { return static_cast<int>(m_dims.size()); }
    std::int64_t operator[](int i) const { return m_dims.at(static_cast<std::size_t>(i)); }
    std::int64_t& operator[](int i) { return m_dims.at(static_cast<std::size_t>(i)); }
    const std::vector<std::int64_t>& dims() const { return m_dims; }
    // Product of all dimensions (1 for a scalar of rank 0).
    std::int64_t numel() const;
    // Same dims with the first (batch) dimension replaced.
    Shape withBatch(std::int64_t n) const;
    // "[128, 24, 24, 3]"
    std::string str() const;

    bool operator==(const Shape&) const = default;

private:
    std::vector<std::int64_t> m_dims;
};

} // namespace towers::engine
