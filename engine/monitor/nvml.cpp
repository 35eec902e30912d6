#include "engine/monitor/nvml.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <unistd.h>

namespace towers::engine::monitor {

namespace {

// The parts of NVML's C ABI we use (NVML's documented types; no NVIDIA header is needed).
using Return = int;
constexpr Return kSuccess = 0;
constexpr Return kInsufficientSize = 7;
using Device = struct NvmlDevice*;
struct Memory
{
    unsigned long long total, free, used;
};
struct Utilization
{
    unsigned int gpu, memory;
};
struct ProcessInfoV1
{
    unsigned int pid;
    unsigned long long usedGpuMemory;
};
struct ProcessInfoV2 // also the layout of _v3
{
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
};
constexpr int kTemperatureGpu = 0;
constexpr int kClockSm = 1;
constexpr int kPcieTxBytes = 0, kPcieRxBytes = 1;
constexpr unsigned long long kValueNotAvailable = ULLONG_MAX;

template <class F> F lookup(void* handle, std::initializer_list<const char*> names)
{
    for (const char* n : names)
        if (void* p = dlsym(handle, n)) return reinterpret_cast<F>(p);
    return nullptr;
}

} // namespace

struct Nvml::Api
{
    void* handle = nullptr;
    bool initialised = false;
    Return (*init)() = nullptr;
    Return (*shutdown)() = nullptr;
    const char* (*errorString)(Return) = nullptr;
    Return (*getCount)(unsigned*) = nullptr;
    Return (*getHandle)(unsigned, Device*) = nullptr;
    Return (*getName)(Device, char*, unsigned) = nullptr;
    Return (*getMemory)(Device, Memory*) = nullptr;
    Return (*getCapability)(Device, int*, int*) = nullptr;
    Return (*getUtilization)(Device, Utilization*) = nullptr;
    Return (*getTemperature)(Device, int, unsigned*) = nullptr;
    Return (*getPower)(Device, unsigned*) = nullptr;
    Return (*getPowerLimit)(Device, unsigned*) = nullptr;
    Return (*getClock)(Device, int, unsigned*) = nullptr;
    Return (*getPcie)(Device, int, unsigned*) = nullptr;
    Return (*getProcesses)(Device, unsigned*, void*) = nullptr;
    int processesVersion = 0; // 1: ProcessInfoV1 entries, 2: ProcessInfoV2 (also _v3)
    Return (*driverVersion)(char*, unsigned) = nullptr;
    Return (*getHandleByBusId)(const char*, Device*) = nullptr;
    Return (*getIndex)(Device, unsigned*) = nullptr;
    std::vector<Device> devices; // parallel to Nvml::m_gpus

    std::string error(Return r) const
    {
        const char* s = errorString ? errorString(r) : nullptr;
        return s ? std::string(s) : "NVML error " + std::to_string(r);
    }
};

Nvml::Nvml(const std::string& library) : m_api(std::make_unique<Api>())
{
    std::string path = library;
    if (path.empty()) {
        const char* env = std::getenv("TOWERS_NVML_LIBRARY");
        path = env && *env ? env : "libnvidia-ml.so.1";
    }
    Api& a = *m_api;
    a.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!a.handle) {
        const char* errorText = dlerror(); // reading it clears it: once only
        const std::string why = errorText ? errorText : "";
        m_reason = why.find("No such file") != std::string::npos || why.empty()
                       ? "no NVIDIA driver: " + path + " not found"
                       : path + " cannot be loaded: " + why;
        return;
    }
    a.init = lookup<decltype(a.init)>(a.handle, {"nvmlInit_v2", "nvmlInit"});
    a.shutdown = lookup<decltype(a.shutdown)>(a.handle, {"nvmlShutdown"});
    a.errorString = lookup<decltype(a.errorString)>(a.handle, {"nvmlErrorString"});
    a.getCount =
        lookup<decltype(a.getCount)>(a.handle, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"});
    a.getHandle = lookup<decltype(a.getHandle)>(
        a.handle, {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"});
    a.getName = lookup<decltype(a.getName)>(a.handle, {"nvmlDeviceGetName"});
    a.getMemory = lookup<decltype(a.getMemory)>(a.handle, {"nvmlDeviceGetMemoryInfo"});
    a.getCapability =
        lookup<decltype(a.getCapability)>(a.handle, {"nvmlDeviceGetCudaComputeCapability"});
    a.getUtilization =
        lookup<decltype(a.getUtilization)>(a.handle, {"nvmlDeviceGetUtilizationRates"});
    a.getTemperature = lookup<decltype(a.getTemperature)>(a.handle, {"nvmlDeviceGetTemperature"});
    a.getPower = lookup<decltype(a.getPower)>(a.handle, {"nvmlDeviceGetPowerUsage"});
    a.getPowerLimit = lookup<decltype(a.getPowerLimit)>(
        a.handle, {"nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetPowerManagementLimit"});
    a.getClock = lookup<decltype(a.getClock)>(a.handle, {"nvmlDeviceGetClockInfo"});
    a.getPcie = lookup<decltype(a.getPcie)>(a.handle, {"nvmlDeviceGetPcieThroughput"});
    if ((a.getProcesses = lookup<decltype(a.getProcesses)>(
             a.handle, {"nvmlDeviceGetComputeRunningProcesses_v3",
                        "nvmlDeviceGetComputeRunningProcesses_v2"})))
        a.processesVersion = 2;
    else if ((a.getProcesses = lookup<decltype(a.getProcesses)>(
                  a.handle, {"nvmlDeviceGetComputeRunningProcesses"})))
        a.processesVersion = 1;
    a.driverVersion = lookup<decltype(a.driverVersion)>(a.handle, {"nvmlSystemGetDriverVersion"});
    a.getHandleByBusId = lookup<decltype(a.getHandleByBusId)>(
        a.handle, {"nvmlDeviceGetHandleByPciBusId_v2", "nvmlDeviceGetHandleByPciBusId"});
    a.getIndex = lookup<decltype(a.getIndex)>(a.handle, {"nvmlDeviceGetIndex"});
    if (!a.init || !a.getCount || !a.getHandle) {
        m_reason = path + " lacks nvmlInit, nvmlDeviceGetCount or nvmlDeviceGetHandleByIndex";
        return;
    }
    if (const Return r = a.init(); r != kSuccess) {
        m_reason = "nvmlInit failed: " + a.error(r);
        return;
    }
    a.initialised = true;
    unsigned count = 0;
    if (const Return r = a.getCount(&count); r != kSuccess) {
        m_reason = "nvmlDeviceGetCount failed: " + a.error(r);
        return;
    }
    for (unsigned i = 0; i < count && i < 1024; ++i) {
        Device d = nullptr;
        if (a.getHandle(i, &d) != kSuccess) continue; // e.g. a GPU this user may not see
        GpuInfo g;
        g.index = int(i);
        char name[96] = {};
        if (a.getName && a.getName(d, name, sizeof name) == kSuccess)
            g.name = std::string(name, strnlen(name, sizeof name));
        if (g.name.empty()) g.name = "NVIDIA GPU " + std::to_string(i);
        Memory m{};
        if (a.getMemory && a.getMemory(d, &m) == kSuccess) g.memoryTotal = std::int64_t(m.total);
        int major = -1, minor = -1;
        if (a.getCapability && a.getCapability(d, &major, &minor) == kSuccess && major >= 0) {
            g.ccMajor = major;
            g.ccMinor = minor;
        }
        m_gpus.push_back(g);
        a.devices.push_back(d);
    }
}

Nvml::~Nvml()
{
    if (m_api->initialised && m_api->shutdown) m_api->shutdown();
    // The library stays loaded: a driver library may keep threads of its own, and unloading code
    // they run at process exit is a crash NVIDIA's own tools avoid the same way.
}

bool Nvml::available() const
{
    return m_reason.empty();
}

bool Nvml::findsByPciBusId() const
{
    return available() && m_api->getHandleByBusId && m_api->getIndex;
}

int Nvml::indexOfPciBusId(const std::string& busId) const
{
    if (!findsByPciBusId() || busId.empty()) return -1;
    Device d = nullptr;
    unsigned index = 0;
    // The GPU's own index, not its handle compared with ours: NVML promises no handle identity.
    if (m_api->getHandleByBusId(busId.c_str(), &d) != kSuccess ||
        m_api->getIndex(d, &index) != kSuccess)
        return -1;
    return position(int(index)) >= 0 ? int(index) : -1;
}

int Nvml::position(int index) const
{
    for (std::size_t i = 0; i < m_gpus.size(); ++i)
        if (m_gpus[i].index == index) return int(i);
    return -1;
}

std::string Nvml::driverVersion() const
{
    char text[96] = {};
    if (!available() || !m_api->driverVersion ||
        m_api->driverVersion(text, sizeof text) != kSuccess)
        return {};
    return std::string(text, strnlen(text, sizeof text));
}

GpuReading Nvml::read(int index) const
{
    GpuReading r;
    const Api& a = *m_api;
    const int at = position(index); // NVML's index: GPUs without a handle leave gaps
    if (!available() || at < 0) return r;
    const Device d = a.devices[std::size_t(at)];
    Utilization u{};
    if (a.getUtilization && a.getUtilization(d, &u) == kSuccess) r.utilisation = u.gpu;
    Memory m{};
    if (a.getMemory && a.getMemory(d, &m) == kSuccess) {
        r.memoryUsed = double(m.used);
        r.memoryTotal = double(m.total);
    }
    unsigned v = 0;
    if (a.getTemperature && a.getTemperature(d, kTemperatureGpu, &v) == kSuccess)
        r.temperatureC = v;
    if (a.getPower && a.getPower(d, &v) == kSuccess) r.powerW = v / 1000.0; // milliwatts
    if (a.getPowerLimit && a.getPowerLimit(d, &v) == kSuccess) r.powerLimitW = v / 1000.0;
    if (a.getClock && a.getClock(d, kClockSm, &v) == kSuccess) r.smClockMHz = v;
    if (a.getPcie && a.getPcie(d, kPcieTxBytes, &v) == kSuccess)
        r.pcieTxBytesPerS = v * 1024.0; // KB/s
    if (a.getPcie && a.getPcie(d, kPcieRxBytes, &v) == kSuccess) r.pcieRxBytesPerS = v * 1024.0;
    return r;
}

double Nvml::processMemory(int index, int pid) const
{
    const Api& a = *m_api;
    const int at = position(index);
    if (!available() || !a.getProcesses || at < 0) return GpuReading::kNone;
    const Device d = a.devices[std::size_t(at)];
    const unsigned self = unsigned(pid > 0 ? pid : getpid());
    const std::size_t entry =
        a.processesVersion == 1 ? sizeof(ProcessInfoV1) : sizeof(ProcessInfoV2);
    std::vector<unsigned char> buffer;
    unsigned count = 32;
    Return ret = kInsufficientSize;
    for (int attempt = 0; attempt < 4 && ret == kInsufficientSize; ++attempt) {
        count = std::max(count, 1u) + 8; // room for processes that start meanwhile
        buffer.assign(count * entry, 0);
        ret = a.getProcesses(d, &count, buffer.data());
    }
    if (ret != kSuccess) return GpuReading::kNone;
    double mine = 0;
    for (unsigned i = 0; i < count && (i + 1) * entry <= buffer.size(); ++i) {
        unsigned p = 0;
        unsigned long long used = 0;
        if (a.processesVersion == 1) {
            const auto* e = reinterpret_cast<const ProcessInfoV1*>(buffer.data() + i * entry);
            p = e->pid;
            used = e->usedGpuMemory;
        } else {
            const auto* e = reinterpret_cast<const ProcessInfoV2*>(buffer.data() + i * entry);
            p = e->pid;
            used = e->usedGpuMemory;
        }
        if (p == self && used != kValueNotAvailable) mine += double(used);
    }
    return mine;
}

} // namespace towers::engine::monitor
