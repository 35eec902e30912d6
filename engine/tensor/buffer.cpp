#include "engine/tensor/buffer.h"

#include <cstdlib>
#include <new>

namespace towers::engine {

std::shared_ptr<Buffer> Buffer::allocateHost(std::size_t bytes)
{
    constexpr std::size_t align = 64;
    const std::size_t rounded = (bytes + align - 1) / align * align;
    void* p = rounded ? std::aligned_alloc(align, rounded) : nullptr;
    if (rounded && !p) throw std::bad_alloc();
    return std::shared_ptr<Buffer>(new Buffer(p, bytes, Device::host()));
}

Buffer::~Buffer()
{
    if (m_device.isHost()) std::free(m_data);
}

} // namespace towers::engine
