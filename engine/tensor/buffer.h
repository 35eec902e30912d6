#pragma once
#include <cstddef>
#include <memory>

#include "engine/tensor/device.h"

namespace towers::engine {

// A block of bytes on one device. Host buffers are 64-byte aligned (a cache line, and what
// oneDNN's AVX-512 kernels like). Copies between devices are explicit calls, never hidden.
class Buffer
{
public:
    // Allocates `bytes` uninitialised bytes on the host. Throws IoError-free std::bad_alloc on
    // exhaustion (the caller reports which tensor it was).
    static std::shared_ptr<Buffer> allocateHost(std::size_t bytes);

    ~Buffer();
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;

    void* data() { return m_data; }
    const void* data() const { return m_data; }
    std::size_t size() const { return m_size; }
    const Device& device() const { return m_device; }

private:
    Buffer(void* data, std::size_t size, Device device) : m_data(data), m_size(size), m_device(device) {}
    void* m_data;
    std::size_t m_size;
    Device m_device;
};

} // namespace towers::engine
