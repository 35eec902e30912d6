#include "engine/tensor/shape.h"

#include "engine/errors.h"

namespace towers::engine {

Shape::Shape(std::initializer_list<std::int64_t> dims) : Shape(std::vector<std::int64_t>(dims)) {}

Shape::Shape(std::vector<std::int64_t> dims) : m_dims(std::move(dims))
{
    for (auto d : m_dims)
        if (d < 0) throw ShapeError("negative dimension in shape " + str());
}

std::int64_t Shape::numel() const
{
    std::int64_t n = 1;
    for (auto d : m_dims) n *= d;
    return n;
}

Shape Shape::withBatch(std::int64_t n) const
{
    if (m_dims.empty()) throw ShapeError("a scalar shape has no batch dimension");
    Shape s = *this;
    s.m_dims[0] = n;
    return s;
}

std::string Shape::str() const
{
    std::string s = "[";
    for (std::size_t i = 0; i < m_dims.size(); ++i) {
        if (i) s += ", ";
        s += std::to_string(m_dims[i]);
    }
    return s + "]";
}

} // namespace towers::engine
