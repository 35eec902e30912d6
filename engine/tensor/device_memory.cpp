#include "engine/tensor/device_memory.h"

#include <atomic>
#include <cstring>

#include "engine/errors.h"

namespace towers::engine {

namespace {
std::atomic<DeviceMemory*> g_cudaMemory{nullptr};
}

void registerDeviceMemory(DeviceKind kind, DeviceMemory* memory)
{
    if (kind == DeviceKind::Host) throw InvalidArgument("the host's memory cannot be replaced");
    g_cudaMemory.store(memory);
}

DeviceMemory* deviceMemory(DeviceKind kind)
{
    return kind == DeviceKind::Cuda ? g_cudaMemory.load() : nullptr;
}

DeviceMemory& requireDeviceMemory(const Device& device)
{
    if (DeviceMemory* m = deviceMemory(device.kind)) return *m;
    throw Unsupported("tensors on " + device.str() + " need the GPU backend, which is not loaded");
}

void copyBytes(void* dst, const Device& dstDevice, const void* src, const Device& srcDevice,
               std::size_t bytes)
{
    if (bytes == 0) return;
    if (dstDevice.isHost() && srcDevice.isHost()) {
        std::memmove(dst, src, bytes);
        return;
    }
    requireDeviceMemory(dstDevice.isHost() ? srcDevice : dstDevice)
        .copy(dst, dstDevice, src, srcDevice, bytes);
}

} // namespace towers::engine
