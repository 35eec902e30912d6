#pragma once
#include <cstddef>
#include <memory>

#include "engine/tensor/device.h"

namespace towers::engine {

class DeviceMemory;

// A block of bytes on one device. Host buffers are 64-byte aligned (a cache line, and what
// oneDNN's AVX-512 kernels like); device buffers come from the device's registered DeviceMemory
// (tensor/device_memory.h) and go back to it. Copies between devices are explicit calls, never
// hidden.
class Buffer
{
public:
    // Allocates `bytes` uninitialised bytes on the host. Throws std::bad_alloc on exhaustion (the
    // caller reports which tensor it was).
    static std::shared_ptr<Buffer> allocateHost(std::size_t bytes);
    // Allocates `bytes` zeroed bytes on the host. A large block (kMappedBytes or more) is pages
    // straight from the system, page-aligned and zero until written, which cost neither time nor
    // memory before then: a network's parameters are made this way, so that building a huge one
    // to check it, draw its layers or count its parameters takes no gigabytes. Throws
    // std::bad_alloc on exhaustion.
    static std::shared_ptr<Buffer> allocateHostZeroed(std::size_t bytes);
    static constexpr std::size_t kMappedBytes = std::size_t(1) << 20;
    // Allocates on any device: the host, or a device whose backend is loaded (else Unsupported).
    // Device exhaustion throws DeviceOutOfMemory.
    static std::shared_ptr<Buffer> allocate(const Device& device, std::size_t bytes);
    // Host memory, page-locked by the GPU backend when one is loaded (faster copies to GPUs),
    // plain host memory otherwise.
    static std::shared_ptr<Buffer> allocatePinnedHost(std::size_t bytes);
    bool pinned() const { return m_source == Source::Pinned; }

    ~Buffer();
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;

    void* data() { return m_data; }
    const void* data() const { return m_data; }
    std::size_t size() const { return m_size; }
    const Device& device() const { return m_device; }

private:
    enum class Source
    {
        Heap,   // aligned_alloc: std::free
        Mapped, // mmap: munmap
        Pinned, // m_memory's page-locked host memory
        Device, // m_memory's device memory
    };
    Buffer(void* data, std::size_t size, Device device, DeviceMemory* memory, Source source)
        : m_data(data), m_size(size), m_device(device), m_memory(memory), m_source(source)
    {
    }
    // A shared Buffer owning `data`, given back by the Buffer's destructor; `data` given back
    // here when even that cannot be made.
    static std::shared_ptr<Buffer> owned(void* data, std::size_t size, Device device,
                                         DeviceMemory* memory, Source source);
    // Gives the bytes back to where they came from (once).
    void release() noexcept;
    void* m_data;
    std::size_t m_size;
    Device m_device;
    // Where a device buffer goes back to; kept here so that freeing never consults a registry.
    DeviceMemory* m_memory;
    Source m_source;
};

} // namespace towers::engine
