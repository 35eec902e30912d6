#include "fake_device.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "engine/cpu/onednn_ops.h"
#include "engine/ops/staged_ops.h"
#include "engine/train/host_communicator.h"

namespace towers::test {

using namespace towers::engine;

void* FakeDeviceMemory::allocate(int index, std::size_t bytes)
{
    if (m_limit && bytes > m_limit)
        throw DeviceOutOfMemory("out of memory on cuda:" + std::to_string(index) + ": asked for " +
                                std::to_string(bytes) + " bytes");
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) throw DeviceOutOfMemory("fake device: out of memory");
    ++m_live;
    return p;
}

void FakeDeviceMemory::release(int, void* p) noexcept
{
    std::free(p);
    --m_live;
}

void* FakeDeviceMemory::allocatePinned(std::size_t bytes)
{
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (p) ++m_pinned;
    return p;
}

void FakeDeviceMemory::releasePinned(void* p) noexcept
{
    std::free(p);
    --m_pinned;
}

void FakeDeviceMemory::setZero(int, void* p, std::size_t bytes)
{
    std::memset(p, 0, bytes);
}

void FakeDeviceMemory::copy(void* dst, const Device&, const void* src, const Device&,
                            std::size_t bytes)
{
    ++m_copies;
    std::memmove(dst, src, bytes);
}

FakeDeviceScope::FakeDeviceScope()
{
    registerDeviceMemory(DeviceKind::Cuda, &m_memory);
}

FakeDeviceScope::~FakeDeviceScope()
{
    registerDeviceMemory(DeviceKind::Cuda, nullptr);
}

namespace {

class StagingCommunicator final : public Communicator
{
public:
    explicit StagingCommunicator(int ranks) : m_host(ranks), m_staging(std::size_t(ranks)) {}
    int size() const override { return m_host.size(); }
    void allReduceMean(int rank, std::span<Tensor> tensors) override
    {
        staged(rank, tensors, [&](std::span<Tensor> h) { m_host.allReduceMean(rank, h); });
    }
    void broadcast(int rank, int root, std::span<Tensor> tensors) override
    {
        staged(rank, tensors, [&](std::span<Tensor> h) { m_host.broadcast(rank, root, h); });
    }
    void barrier(int rank) override { m_host.barrier(rank); }
    void abort(const std::string& reason) override { m_host.abort(reason); }
    bool aborted() const override { return m_host.aborted(); }

private:
    template <class F> void staged(int rank, std::span<Tensor> tensors, F run)
    {
        auto& host = m_staging.at(std::size_t(rank));
        host.clear();
        for (const auto& t : tensors) {
            if (t.device().isHost())
                throw InvalidArgument("staging communicator: expected device tensors, got " +
                                      t.describe());
            host.push_back(t.copyTo(Device::host()));
        }
        run(host);
        for (std::size_t i = 0; i < host.size(); ++i) tensors[i].copyFrom(host[i]);
    }
    HostCommunicator m_host;
    std::vector<std::vector<Tensor>> m_staging;
};

} // namespace

std::unique_ptr<Communicator> makeStagingCommunicator(int ranks)
{
    return std::make_unique<StagingCommunicator>(ranks);
}

std::unique_ptr<Ops> makeFakeDeviceOps(const std::string& backend, int index, bool capture,
                                       int refusedLaunches)
{
    auto inner = backend == "onednn" ? cpu::makeOneDnnOps() : makeReferenceOps();
    return makeStagedOps(std::move(inner), Device{DeviceKind::Cuda, index}, capture,
                         refusedLaunches);
}

} // namespace towers::test
