#pragma once
// The CUDA backend's device memory: allocated, freed, zeroed and copied on the stream that
// stream_policy.h says (the running op's, else the capture's under way on this thread, else the
// legacy default stream), from CUDA's stream-ordered pool where the device has one, else with
// cudaMalloc and cudaFree (which wait for the whole device: correct, slower). Internal to the
// plugin.
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/stream_policy.h"

namespace towers::engine {
struct Device; // engine/tensor/device.h, which is C++20 (the kernels include this header in C++17)
}

namespace towers::engine::cuda {

// Once, before any allocation: which of the `count` devices have memory pools (their pools then
// keep freed blocks for the next step instead of returning them to the driver).
void configureDeviceMemory(int count);
// Whether device `device`'s allocations come from its pool (false once it refused one, or failed
// the trial its first allocation makes of it).
bool memoryPoolsSupported(int device);
// What that trial said when it failed (naming the device and CUDA's error), else "".
std::string memoryPoolFailure(int device);

// The stream that memory work on `device` goes on now: the one bound on this thread, else the
// legacy default stream.
cudaStream_t streamFor(int device);

// Gives the memory that `device`'s pool and its CUDA graphs hold idle back to the driver (when an
// allocation or a graph's upload runs short). Not during a capture on this thread.
void trimIdleMemory(int device);

// `bytes` uninitialised bytes on `device`, on streamFor(device). Throws DeviceOutOfMemory naming
// the device, the size asked and what was free; BackendError for other failures.
void* allocateDevice(int device, std::size_t bytes);
// Frees a block of allocateDevice on the stream it was allocated on (stream_policy.h).
void releaseDevice(int device, void* p) noexcept;
// Blocks allocated on `s` are freed on the legacy stream from now on: called when s, its work
// finished, is about to be destroyed.
void retireStream(cudaStream_t s);
// The live blocks allocated during the capture under way on `s` (graph allocations); and, for a
// capture that made no graph, making them void: freeing one then calls nothing, since no memory
// stood behind it (stream_policy.h). Both return how many.
std::size_t capturedBlocks(cudaStream_t s);
std::size_t voidCapturedBlocks(cudaStream_t s);
// Zeroes, and copies between any two places of which one at least is a GPU, on the stream bound
// for that GPU when there is one (ordered after that op context's work), else on the legacy stream
// (ordered after every blocking stream's); a zeroing is queued there, a copy that involves the
// host returns when the bytes are in place. During a capture
// on this thread they are recorded into it instead: a copy between GPUs without waiting, a copy
// to or from the host refused (Unsupported), since it would wait for the device.
void setZeroDevice(int device, void* p, std::size_t bytes);
void copyDevice(void* dst, const Device& dstDevice, const void* src, const Device& srcDevice,
                std::size_t bytes);

// What every CudaOps entry opens: its device current and its stream bound on this thread, so that
// the tensors its op allocates (outputs, temporaries) are stream-ordered on that stream.
class OpScope
{
public:
    OpScope(int device, cudaStream_t stream) : m_guard(device), m_bind(device, stream) {}

private:
    DeviceGuard m_guard;
    BindStream m_bind;
};

// A kernel launcher's temporary on the current device: allocated on `s`, freed on `s` when it
// goes.
class ScratchBuffer
{
public:
    ScratchBuffer(std::size_t bytes, cudaStream_t s);
    ~ScratchBuffer();
    ScratchBuffer(const ScratchBuffer&) = delete;
    ScratchBuffer& operator=(const ScratchBuffer&) = delete;
    void* get() const { return m_p; }

private:
    int m_device = 0;
    void* m_p = nullptr;
};

} // namespace towers::engine::cuda
