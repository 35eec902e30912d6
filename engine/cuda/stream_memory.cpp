#include "engine/cuda/stream_memory.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/cuda/cuda_check.h"
#include "engine/tensor/device.h"

namespace towers::engine::cuda {

namespace {

// Both live as long as the process (never destroyed: a tensor may be freed during static
// destruction, after a function-local static would be gone), as the plugin does.
AllocationTable& liveBlocks()
{
    static auto* table = new AllocationTable;
    return *table;
}

PoolSupport& pools()
{
    static auto* support = new PoolSupport;
    return *support;
}

// Each device's pool is tried once, at its first pooled allocation (not when the plugin loads:
// that would start a CUDA context on every GPU for a run on the CPU); why a device that says it
// has pools allocates without them after all. Set up by configureDeviceMemory, before any use.
struct PoolTrials
{
    std::unique_ptr<std::once_flag[]> once;
    std::vector<std::string> failure;
};
PoolTrials& poolTrials()
{
    static auto* trials = new PoolTrials;
    return *trials;
}

// The trial: a block from the pool, zeroed, freed and waited for, on the legacy stream. A driver
// may say it has pools and refuse them all the same, and not always with the cudaErrorNotSupported
// that allocateDevice expects (a virtualised GPU's, such as gVisor's, answers calls it does not
// pass on with errors of its own). "" when it worked, else what failed.
std::string tryPool(int device)
{
    constexpr std::size_t bytes = std::size_t(1) << 20;
    void* p = nullptr;
    cudaError_t status = cudaMallocAsync(&p, bytes, cudaStreamLegacy);
    if (status == cudaSuccess) {
        status = cudaMemsetAsync(p, 0, bytes, cudaStreamLegacy);
        const cudaError_t freed = cudaFreeAsync(p, cudaStreamLegacy);
        const cudaError_t synced = cudaStreamSynchronize(cudaStreamLegacy);
        if (status == cudaSuccess) status = freed;
        if (status == cudaSuccess) status = synced;
    }
    if (status == cudaSuccess) return {};
    cudaGetLastError();
    return "cuda:" + std::to_string(device) +
           "'s trial of its memory pool failed: " + cudaGetErrorName(status) + " (" +
           cudaGetErrorString(status) + ")";
}

std::string mib(std::size_t bytes)
{
    char text[64];
    std::snprintf(text, sizeof text, "%.1f MiB", double(bytes) / (1024.0 * 1024.0));
    return text;
}

// With `device` current.
[[noreturn]] void throwOutOfMemory(int device, std::size_t bytes)
{
    cudaGetLastError();
    std::size_t freeBytes = 0, total = 0;
    cudaMemGetInfo(&freeBytes, &total);
    throw DeviceOutOfMemory("out of memory on cuda:" + std::to_string(device) + ": asked for " +
                            mib(bytes) + ", " + mib(freeBytes) + " of " + mib(total) + " free" +
                            addressLimitNote());
}

void* asRecorded(cudaStream_t s)
{
    return s == cudaStreamLegacy ? nullptr : static_cast<void*>(s);
}

cudaStream_t asStream(void* recorded)
{
    return recorded ? static_cast<cudaStream_t>(recorded) : cudaStreamLegacy;
}

// Whether work on `s` is recorded into a capture rather than run: this thread's capture, or any
// other on that stream (an op of the capturing context called from another thread). The legacy
// stream never captures (and asking about it while a blocking stream captures is an error).
bool capturing(cudaStream_t s)
{
    if (s == cudaStreamLegacy) return false;
    if (capturedOn(static_cast<void*>(s))) return true;
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s, &status) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return status != cudaStreamCaptureStatusNone;
}

} // namespace

void configureDeviceMemory(int count)
{
    std::vector<bool> supported(std::size_t(std::max(count, 0)), false);
    for (int i = 0; i < count; ++i) {
        int value = 0;
        if (cudaDeviceGetAttribute(&value, cudaDevAttrMemoryPoolsSupported, i) != cudaSuccess) {
            cudaGetLastError();
            continue;
        }
        supported[std::size_t(i)] = value != 0;
        // Nothing more per device here: the plugin loads for `towers-cli devices` and CPU runs
        // too, which must start no context on a GPU (the pool's settings wait for its first use).
    }
    pools().configure(supported);
    poolTrials().once = std::make_unique<std::once_flag[]>(supported.size());
    poolTrials().failure.assign(supported.size(), {});
}

bool memoryPoolsSupported(int device)
{
    return pools().use(device);
}

std::string memoryPoolFailure(int device)
{
    const PoolTrials& t = poolTrials();
    return device >= 0 && std::size_t(device) < t.failure.size() ? t.failure[std::size_t(device)]
                                                                 : std::string();
}

cudaStream_t streamFor(int device)
{
    return asStream(boundStream(device));
}

void trimIdleMemory(int device)
{
    cudaMemPool_t pool;
    if (pools().use(device) && cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess)
        cudaMemPoolTrimTo(pool, 0);
    // What dropped graphs' allocations reserved, kept for graphs to come.
    cudaDeviceGraphMemTrim(device);
    cudaGetLastError();
}

void* allocateDevice(int device, std::size_t bytes)
{
    DeviceGuard guard(device);
    const cudaStream_t s = streamFor(device);
    void* p = nullptr;
    // The first pooled allocation of a device tries its pool (never inside a capture: a tensor is
    // made outside one first).
    if (pools().use(device) && !capturing(s)) {
        PoolTrials& t = poolTrials();
        std::call_once(t.once[std::size_t(device)], [&] {
            cudaMemPool_t pool;
            if (cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess) {
                // Freed blocks stay in the pool for the next step instead of going back to the
                // driver.
                std::uint64_t keep = UINT64_MAX;
                cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
            }
            cudaGetLastError();
            t.failure[std::size_t(device)] = tryPool(device);
            if (!t.failure[std::size_t(device)].empty()) pools().disable(device);
        });
    }
    while (pools().use(device)) {
        cudaError_t status = cudaMallocAsync(&p, bytes, s);
        if (status == cudaErrorMemoryAllocation) {
            // Blocks freed on other streams may wait idle in the pool, and graphs' memory in
            // theirs: give them back, try again.
            cudaGetLastError();
            if (capturing(s)) {
                cudaMemPool_t pool;
                if (cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess)
                    cudaMemPoolTrimTo(pool, 0);
            } else {
                trimIdleMemory(device);
            }
            status = cudaMallocAsync(&p, bytes, s);
        }
        if (status == cudaSuccess) {
            // During a capture, an allocation node of the graph (stream_policy.h).
            const bool captured = capturing(s);
            if (liveBlocks().add(p, {asRecorded(s), true, captured})) return p;
            // A void block's address: outside a capture the block waits quarantined and another
            // is allocated; in one, the capture fails (its free recorded, as it must be).
            if (captured) {
                cudaFreeAsync(p, s);
                cudaGetLastError();
                throw Unsupported("making a tensor on cuda:" + std::to_string(device) +
                                  " during a capture: CUDA gave the address of a tensor still held "
                                  "from a capture that made no graph (let such tensors go)");
            }
            continue;
        }
        if (status == cudaErrorMemoryAllocation) throwOutOfMemory(device, bytes);
        if (status != cudaErrorNotSupported)
            throwCuda(status, "cudaMallocAsync", __FILE__, __LINE__);
        // No pools here after all (error 801 in some virtualised GPUs): cudaMalloc from now on.
        cudaGetLastError();
        pools().disable(device);
    }
    // cudaMalloc is not stream-ordered: a capture cannot hold it (and CUDA would invalidate the
    // capture for it, saying less).
    if (capturing(s))
        throw Unsupported("making a tensor on cuda:" + std::to_string(device) +
                          " during a capture: without a stream-ordered memory pool there, "
                          "nothing allocates inside a CUDA graph");
    for (;;) { // past void blocks' addresses, as above
        const cudaError_t status = cudaMalloc(&p, bytes);
        if (status == cudaErrorMemoryAllocation) throwOutOfMemory(device, bytes);
        TOWERS_CUDA(status);
        if (liveBlocks().add(p, {nullptr, false})) return p;
    }
}

void releaseDevice(int device, void* p) noexcept
{
    if (!p) return;
    const QuietDeviceGuard guard(device);
    cudaError_t status = cudaSuccess;
    bool freeNow = false;
    const bool known = liveBlocks().release(p, [&](void* q, const Allocation& a) {
        // Under the table's lock, so that the stream it names is not retired meanwhile.
        if (a.pooled)
            status = cudaFreeAsync(q, asStream(a.stream));
        else
            freeNow = true; // cudaFree waits for the whole device: not while holding the lock,
                            // which another tower's thread may need to go on
    });
    if (freeNow || !known) status = cudaFree(p);   // !known: frees a block of either kind
    if (status != cudaSuccess) cudaGetLastError(); // a sticky error shows at the next sync
}

void retireStream(cudaStream_t s)
{
    liveBlocks().retire(asRecorded(s));
}

std::size_t capturedBlocks(cudaStream_t s)
{
    return liveBlocks().captured(asRecorded(s));
}

std::size_t voidCapturedBlocks(cudaStream_t s)
{
    return liveBlocks().voidCaptured(asRecorded(s));
}

void setZeroDevice(int device, void* p, std::size_t bytes)
{
    DeviceGuard guard(device);
    TOWERS_CUDA(cudaMemsetAsync(p, 0, bytes, streamFor(device)));
}

void copyDevice(void* dst, const Device& dstDevice, const void* src, const Device& srcDevice,
                std::size_t bytes)
{
    int gpu = dstDevice.isHost() ? srcDevice.index : dstDevice.index;
    void* bound = boundStream(gpu);
    if (!bound && !dstDevice.isHost() && !srcDevice.isHost()) {
        bound = boundStream(srcDevice.index);
        if (bound) gpu = srcDevice.index;
    }
    DeviceGuard guard(gpu);
    const bool peer =
        !dstDevice.isHost() && !srcDevice.isHost() && dstDevice.index != srcDevice.index;
    if (bound && capturedOn(bound)) {
        // During a capture: a copy between GPUs is recorded with the ops around it and needs no
        // wait (what follows on the stream is ordered after it at every replay); a copy to or from
        // the host would have to wait for the device, which a capture cannot.
        if (dstDevice.isHost() || srcDevice.isHost())
            throw Unsupported(std::string("a copy ") + (dstDevice.isHost() ? "from" : "to") +
                              " cuda:" + std::to_string(gpu) +
                              (dstDevice.isHost() ? " to" : " from") +
                              " the host (Tensor::copyFrom, copyTo or onHost) during a capture: "
                              "it would wait for the device, whose captured work does not run "
                              "until replayed (Ops::upload and download copy without waiting)");
        const cudaStream_t s = static_cast<cudaStream_t>(bound);
        if (peer)
            TOWERS_CUDA(cudaMemcpyPeerAsync(dst, dstDevice.index, src, srcDevice.index, bytes, s));
        else
            TOWERS_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
        return;
    }
    if (bound) { // inside an op: on its stream, then wait for that stream only
        const cudaStream_t s = static_cast<cudaStream_t>(bound);
        if (peer)
            TOWERS_CUDA(cudaMemcpyPeerAsync(dst, dstDevice.index, src, srcDevice.index, bytes, s));
        else
            TOWERS_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
        TOWERS_CUDA(cudaStreamSynchronize(s));
        return;
    }
    // cudaMemcpy on the legacy stream waits for the ops issued before it and returns when the
    // bytes are in place (for a device-to-device copy, cudaMemcpy may return earlier, but any
    // later op or copy is ordered after it).
    if (peer)
        TOWERS_CUDA(cudaMemcpyPeer(dst, dstDevice.index, src, srcDevice.index, bytes));
    else
        TOWERS_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
}

ScratchBuffer::ScratchBuffer(std::size_t bytes, cudaStream_t s)
{
    TOWERS_CUDA(cudaGetDevice(&m_device));
    const BindStream bind(m_device, s == cudaStreamLegacy ? nullptr : static_cast<void*>(s));
    m_p = allocateDevice(m_device, bytes);
}

ScratchBuffer::~ScratchBuffer()
{
    releaseDevice(m_device, m_p);
}

} // namespace towers::engine::cuda
