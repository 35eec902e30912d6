#pragma once
// What a device backend provides so that tensors can live on its devices: allocation, zeroing and
// copies. The engine itself knows no CUDA: the GPU backend plugin registers its DeviceMemory for
// DeviceKind::Cuda when it is loaded (see engine/gpu/gpu_backend.h).
//
// There is no stream here: the GPU backend orders this memory work itself, on the stream of the
// op its execution context is running on the calling thread (an op's outputs and temporaries),
// else on the one stream that orders with all of them (engine/cuda/stream_policy.h).
#include <cstddef>

#include "engine/tensor/device.h"

namespace towers::engine {

class DeviceMemory
{
public:
    virtual ~DeviceMemory() = default;

    // `bytes` uninitialised bytes on device `index`. Throws DeviceOutOfMemory naming the device,
    // the size asked and what was free, or BackendError for other failures.
    virtual void* allocate(int index, std::size_t bytes) = 0;
    virtual void release(int index, void* p) noexcept = 0;
    // Sets `bytes` bytes at p on device `index` to zero.
    virtual void setZero(int index, void* p, std::size_t bytes) = 0;
    // Page-locked host memory, which the devices copy from and to at full speed (and
    // asynchronously); nullptr when the backend has none to give. Released with releasePinned.
    virtual void* allocatePinned(std::size_t bytes)
    {
        (void)bytes;
        return nullptr;
    }
    virtual void releasePinned(void* p) noexcept { (void)p; }
    // The device whose context makes and frees page-locked memory on a thread that has none
    // current (a loader's worker, the main thread before the towers start): one the process
    // computes on. Unset, the first device an execution context is made for; before that the
    // backend's default, which for CUDA would start a context on GPU 0 in a process that
    // computes on another GPU (hundreds of MB of GPU 0's memory for each such process).
    virtual void setPinnedDevice(int index) noexcept { (void)index; }
    // Copies between any two places of which at least one is on this backend's devices. Returns
    // when the bytes are in place, after every op already issued on either device (a copy is an
    // explicit synchronisation point, never a hidden one); from inside an op, after every op
    // already issued through the calling execution context.
    virtual void copy(void* dst, const Device& dstDevice, const void* src, const Device& srcDevice,
                      std::size_t bytes) = 0;
};

// Registers (or, with nullptr, unregisters) the memory of a device kind. Not for DeviceKind::Host.
void registerDeviceMemory(DeviceKind kind, DeviceMemory* memory);
// The registered memory of a kind, or nullptr (always nullptr for the host).
DeviceMemory* deviceMemory(DeviceKind kind);
// The memory of `device`, or Unsupported ("no backend for cuda:1 is loaded") when none is.
DeviceMemory& requireDeviceMemory(const Device& device);

// Copies `bytes` bytes between any two devices (memmove on the host).
void copyBytes(void* dst, const Device& dstDevice, const void* src, const Device& srcDevice,
               std::size_t bytes);

} // namespace towers::engine
