#pragma once
// A stand-in GPU for machines without one: "cuda:N" tensors whose bytes are host memory behind
// the DeviceMemory interface, so that element access from the host is refused exactly as for a
// real GPU, and every copy goes through copyBytes. With makeStagedOps(cpu ops, fake device), the
// GPU towers' whole path runs: replicas moved to the device, batches copied there, collectives
// through host copies, checkpoints copied back.
#include <atomic>
#include <cstddef>
#include <memory>

#include "engine/dist/communicator.h"
#include "engine/ops/ops.h"
#include "engine/tensor/device_memory.h"

namespace towers::test {

class FakeDeviceMemory final : public engine::DeviceMemory
{
public:
    void* allocate(int index, std::size_t bytes) override;
    void release(int index, void* p) noexcept override;
    void setZero(int index, void* p, std::size_t bytes) override;
    void copy(void* dst, const engine::Device& dstDevice, const void* src,
              const engine::Device& srcDevice, std::size_t bytes) override;

    void* allocatePinned(std::size_t bytes) override;
    void releasePinned(void* p) noexcept override;
    std::int64_t livePinned() const { return m_pinned.load(); }

    std::int64_t liveAllocations() const { return m_live.load(); }
    std::int64_t copies() const { return m_copies.load(); }
    // Allocations larger than this fail with DeviceOutOfMemory, as a real GPU's would (0: none).
    void setAllocationLimit(std::size_t bytes) { m_limit = bytes; }

private:
    std::atomic<std::int64_t> m_live{0}, m_copies{0}, m_pinned{0};
    std::atomic<std::size_t> m_limit{0};
};

// Registers a FakeDeviceMemory for DeviceKind::Cuda for the scope's lifetime (and unregisters
// it). Only in a process that never loads the real CUDA backend.
class FakeDeviceScope
{
public:
    FakeDeviceScope();
    ~FakeDeviceScope();
    FakeDeviceMemory& memory() { return m_memory; }

private:
    FakeDeviceMemory m_memory;
};

// Reference or oneDNN ops (by name) computing for tensors on the fake device `cuda:index`;
// with `capture`, they capture as a GPU's do (CUDA graphs: makeStagedOps' emulation), the first
// `refusedLaunches` launches of their graphs refused.
std::unique_ptr<engine::Ops> makeFakeDeviceOps(const std::string& backend, int index = 0,
                                               bool capture = false, int refusedLaunches = 0);

// A communicator that takes the ranks' tensors where they live (as NCCL does on GPUs) and
// averages them through host copies with the host communicator: the stand-in for the GPU
// backend's communicators, so that the towers' device-collective path runs in tests.
std::unique_ptr<engine::Communicator> makeStagingCommunicator(int ranks);

} // namespace towers::test
