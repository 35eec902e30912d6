#include "engine/tensor/buffer.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "engine/tensor/device_memory.h"

namespace towers::engine {

namespace {
constexpr std::size_t kAlign = 64;

std::size_t roundedUp(std::size_t bytes)
{
    return (bytes + kAlign - 1) / kAlign * kAlign;
}
} // namespace

std::shared_ptr<Buffer> Buffer::owned(void* data, std::size_t size, Device device,
                                      DeviceMemory* memory, Source source)
{
    // Once the Buffer exists it owns `data`: a shared_ptr that cannot be made deletes it, and
    // its destructor gives the bytes back. Only a Buffer that cannot be made leaves them here.
    std::unique_ptr<Buffer> buffer;
    try {
        buffer.reset(new Buffer(data, size, device, memory, source));
    } catch (...) {
        Buffer(data, size, device, memory, source).release();
        throw;
    }
    return std::shared_ptr<Buffer>(std::move(buffer));
}

std::shared_ptr<Buffer> Buffer::allocateHost(std::size_t bytes)
{
    const std::size_t rounded = roundedUp(bytes);
    void* p = rounded ? std::aligned_alloc(kAlign, rounded) : nullptr;
    if (rounded && !p) throw std::bad_alloc();
    return owned(p, bytes, Device::host(), nullptr, Source::Heap);
}

std::shared_ptr<Buffer> Buffer::allocateHostZeroed(std::size_t bytes)
{
    if (bytes < kMappedBytes) {
        auto buffer = allocateHost(bytes);
        if (bytes) std::memset(buffer->data(), 0, bytes);
        return buffer;
    }
    // Anonymous pages read as zero, and the system gives each one its memory when first written.
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return owned(p, bytes, Device::host(), nullptr, Source::Mapped);
}

std::shared_ptr<Buffer> Buffer::allocate(const Device& device, std::size_t bytes)
{
    if (device.isHost()) return allocateHost(bytes);
    DeviceMemory& memory = requireDeviceMemory(device);
    void* p = bytes ? memory.allocate(device.index, bytes) : nullptr;
    return owned(p, bytes, device, &memory, Source::Device);
}

std::shared_ptr<Buffer> Buffer::allocatePinnedHost(std::size_t bytes)
{
    DeviceMemory* memory = deviceMemory(DeviceKind::Cuda);
    void* p = memory && bytes ? memory->allocatePinned(bytes) : nullptr;
    if (!p) return allocateHost(bytes);
    return owned(p, bytes, Device::host(), memory, Source::Pinned);
}

Buffer::~Buffer()
{
    release();
}

void Buffer::release() noexcept
{
    if (!m_data) return;
    switch (m_source) {
    case Source::Heap:
        std::free(m_data);
        break;
    case Source::Mapped:
        munmap(m_data, m_size);
        break;
    case Source::Pinned:
        m_memory->releasePinned(m_data);
        break;
    case Source::Device:
        m_memory->release(m_device.index, m_data);
        break;
    }
    m_data = nullptr;
}

} // namespace towers::engine
