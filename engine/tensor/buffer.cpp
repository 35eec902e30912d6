#include "engine/tensor/buffer.h"

#include <cstdlib>
#include <new>

#include "engine/tensor/device_memory.h"

namespace towers::engine {

std::shared_ptr<Buffer> Buffer::allocateHost(std::size_t bytes)
{
    constexpr std::size_t align = 64;
    const std::size_t rounded = (bytes + align - 1) / align * align;
    void* p = rounded ? std::aligned_alloc(align, rounded) : nullptr;
    if (rounded && !p) throw std::bad_alloc();
    return std::shared_ptr<Buffer>(new Buffer(p, bytes, Device::host(), nullptr));
}

std::shared_ptr<Buffer> Buffer::allocate(const Device& device, std::size_t bytes)
{
    if (device.isHost()) return allocateHost(bytes);
    DeviceMemory& memory = requireDeviceMemory(device);
    void* p = bytes ? memory.allocate(device.index, bytes) : nullptr;
    try {
        return std::shared_ptr<Buffer>(new Buffer(p, bytes, device, &memory));
    } catch (...) {
        if (p) memory.release(device.index, p);
        throw;
    }
}

std::shared_ptr<Buffer> Buffer::allocatePinnedHost(std::size_t bytes)
{
    DeviceMemory* memory = deviceMemory(DeviceKind::Cuda);
    void* p = memory && bytes ? memory->allocatePinned(bytes) : nullptr;
    if (!p) return allocateHost(bytes);
    try {
        return std::shared_ptr<Buffer>(new Buffer(p, bytes, Device::host(), memory, true));
    } catch (...) {
        memory->releasePinned(p);
        throw;
    }
}

Buffer::~Buffer()
{
    if (m_pinned)
        m_memory->releasePinned(m_data);
    else if (!m_memory)
        std::free(m_data);
    else if (m_data)
        m_memory->release(m_device.index, m_data);
}

} // namespace towers::engine
