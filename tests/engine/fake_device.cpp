#include "fake_device.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "engine/cpu/onednn_ops.h"
#include "engine/ops/staged_ops.h"

namespace towers::test {

using namespace towers::engine;

void* FakeDeviceMemory::allocate(int, std::size_t bytes)
{
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

void FakeDeviceMemory::setZero(int, void* p, std::size_t bytes)
{
    std::memset(p, 0, bytes);
}

void FakeDeviceMemory::copy(void* dst, const Device&, const void* src, const Device&, std::size_t bytes)
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

std::unique_ptr<Ops> makeFakeDeviceOps(const std::string& backend, int index)
{
    auto inner = backend == "onednn" ? cpu::makeOneDnnOps() : makeReferenceOps();
    return makeStagedOps(std::move(inner), Device{DeviceKind::Cuda, index});
}

} // namespace towers::test
