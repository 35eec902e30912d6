// A stand-in for libnvidia-ml.so.1 with the same C entry points, so the NVML loader's real code
// (dlopen, symbol fallbacks, every query, every failure) runs on machines without a GPU. Built
// twice: with today's names (nvmlInit_v2, ..._v3) and, with FAKE_NVML_OLD_NAMES, with only the
// old ones (nvmlInit, ...GetComputeRunningProcesses v1, ...PowerManagementLimit).
// Environment: FAKE_NVML_GPUS (default 2), FAKE_NVML_HIDDEN=<i> (GPU i's handle refused),
// FAKE_NVML_INIT=fail (nvmlInit fails: driver not loaded), FAKE_NVML_UNSUPPORTED=<query> (that
// query answers "not supported" for every GPU: temperature, power, utilization, processes, clock,
// pcie, memory).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>

namespace {

constexpr int kSuccess = 0, kUninitialized = 1, kInvalidArgument = 2, kNotSupported = 3,
              kDriverNotLoaded = 9, kInsufficientSize = 7;
bool g_initialised = false;

int gpuCount()
{
    const char* n = std::getenv("FAKE_NVML_GPUS");
    return n ? std::atoi(n) : 2;
}

bool unsupported(const char* query)
{
    const char* u = std::getenv("FAKE_NVML_UNSUPPORTED");
    return u && std::strcmp(u, query) == 0;
}

struct FakeDevice
{
    int index;
};
FakeDevice g_devices[16] = {{0}, {1}, {2},  {3},  {4},  {5},  {6},  {7},
                            {8}, {9}, {10}, {11}, {12}, {13}, {14}, {15}};

// The handles nvmlDeviceGetHandleByPciBusId gives: others than by index, as NVML promises no
// identity between them.
FakeDevice g_byBus[16] = {{0}, {1}, {2},  {3},  {4},  {5},  {6},  {7},
                          {8}, {9}, {10}, {11}, {12}, {13}, {14}, {15}};

int indexOf(void* device)
{
    for (auto* list : {g_devices, g_byBus})
        for (int i = 0; i < 16; ++i)
            if (&list[i] == device) return list[i].index;
    return -1;
}

struct Memory
{
    unsigned long long total, free, used;
};
struct Utilization
{
    unsigned int gpu, memory;
};
struct ProcessV1
{
    unsigned int pid;
    unsigned long long usedGpuMemory;
};
struct ProcessV2
{
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
};

int init()
{
    const char* mode = std::getenv("FAKE_NVML_INIT");
    if (mode && std::strcmp(mode, "fail") == 0) return kDriverNotLoaded;
    g_initialised = true;
    return kSuccess;
}

int count(unsigned* n)
{
    if (!g_initialised) return kUninitialized;
    *n = unsigned(gpuCount());
    return kSuccess;
}

// FAKE_NVML_HIDDEN=<i>: GPU i's handle is refused (NO_PERMISSION), as for a GPU this user may
// not use: NVML counts it, and its index leaves a gap.
bool hidden(unsigned i)
{
    const char* h = std::getenv("FAKE_NVML_HIDDEN");
    return h && *h && unsigned(std::atoi(h)) == i;
}

int handle(unsigned i, void** device)
{
    if (!g_initialised) return kUninitialized;
    if (int(i) >= gpuCount() || i >= 16) return kInvalidArgument;
    if (hidden(i)) return 4; // NVML_ERROR_NO_PERMISSION
    *device = &g_devices[i];
    return kSuccess;
}

// Two processes on each GPU: this one, (index + 1) x 256 MiB, and pid 1, 1 GiB.
template <class Entry> int processes(void* device, unsigned* n, Entry* out)
{
    const int i = indexOf(device);
    if (i < 0) return kInvalidArgument;
    if (unsupported("processes")) return kNotSupported;
    if (*n < 2) {
        *n = 2;
        return kInsufficientSize;
    }
    *n = 2;
    out[0] = Entry{};
    out[0].pid = unsigned(getpid());
    out[0].usedGpuMemory = (unsigned long long)(i + 1) * (256ull << 20);
    out[1] = Entry{};
    out[1].pid = 1;
    out[1].usedGpuMemory = 1ull << 30;
    return kSuccess;
}

// GPU i sits at PCI bus 0x41 + i of domain 0: "00000000:41:00.0" as NVML writes it; the lookup
// takes any of NVML's forms (domain:bus:device.function, domain:bus:device, bus:device.function).
int byBusId(const char* busId, void** device)
{
    if (!g_initialised) return kUninitialized;
    unsigned a = 0, b = 0, c = 0, f = 0;
    unsigned bus = 0;
    if (std::sscanf(busId, "%x:%x:%x.%x", &a, &b, &c, &f) == 4 ||
        std::sscanf(busId, "%x:%x:%x", &a, &b, &c) == 3)
        bus = b;
    else if (std::sscanf(busId, "%x:%x.%x", &a, &b, &f) == 3)
        bus = a;
    else
        return kInvalidArgument;
    const int i = int(bus) - 0x41;
    if (i < 0 || i >= gpuCount() || i >= 16) return 6; // NVML_ERROR_NOT_FOUND
    if (hidden(unsigned(i))) return 4;
    *device = &g_byBus[i];
    return kSuccess;
}

} // namespace

extern "C" {

#ifdef FAKE_NVML_OLD_NAMES
int nvmlInit()
{
    return init();
}
int nvmlDeviceGetCount(unsigned* n)
{
    return count(n);
}
int nvmlDeviceGetHandleByIndex(unsigned i, void** d)
{
    return handle(i, d);
}
int nvmlDeviceGetHandleByPciBusId(const char* busId, void** d)
{
    return byBusId(busId, d);
}
int nvmlDeviceGetComputeRunningProcesses(void* d, unsigned* n, ProcessV1* p)
{
    return processes(d, n, p);
}
int nvmlDeviceGetPowerManagementLimit(void* d, unsigned* mw)
{
    if (indexOf(d) < 0 || unsupported("power")) return kNotSupported;
    *mw = 300000;
    return kSuccess;
}
#else
int nvmlInit_v2()
{
    return init();
}
int nvmlDeviceGetCount_v2(unsigned* n)
{
    return count(n);
}
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void** d)
{
    return handle(i, d);
}
int nvmlDeviceGetHandleByPciBusId_v2(const char* busId, void** d)
{
    return byBusId(busId, d);
}
int nvmlDeviceGetComputeRunningProcesses_v3(void* d, unsigned* n, ProcessV2* p)
{
    return processes(d, n, p);
}
int nvmlDeviceGetEnforcedPowerLimit(void* d, unsigned* mw)
{
    if (indexOf(d) < 0 || unsupported("power")) return kNotSupported;
    *mw = 700000;
    return kSuccess;
}
int nvmlSystemGetDriverVersion(char* text, unsigned length)
{
    std::strncpy(text, "580.65.06", length);
    return kSuccess;
}
#endif

int nvmlShutdown()
{
    g_initialised = false;
    return kSuccess;
}

int nvmlDeviceGetIndex(void* d, unsigned* index)
{
    if (!g_initialised) return kUninitialized;
    const int i = indexOf(d);
    if (i < 0) return kInvalidArgument;
    *index = unsigned(i);
    return kSuccess;
}

const char* nvmlErrorString(int r)
{
    switch (r) {
    case kDriverNotLoaded:
        return "Driver Not Loaded";
    case kNotSupported:
        return "Not Supported";
    default:
        return "Unknown Error";
    }
}

int nvmlDeviceGetName(void* d, char* name, unsigned length)
{
    const int i = indexOf(d);
    if (i < 0) return kInvalidArgument;
    std::strncpy(name, ("Fake GPU " + std::to_string(i)).c_str(), length);
    return kSuccess;
}

int nvmlDeviceGetMemoryInfo(void* d, Memory* m)
{
    const int i = indexOf(d);
    if (i < 0 || unsupported("memory")) return kNotSupported;
    m->total = 80ull << 30;
    m->used = (unsigned long long)(i + 1) << 30;
    m->free = m->total - m->used;
    return kSuccess;
}

int nvmlDeviceGetCudaComputeCapability(void* d, int* major, int* minor)
{
    if (indexOf(d) < 0) return kInvalidArgument;
    *major = 9;
    *minor = 0;
    return kSuccess;
}

int nvmlDeviceGetUtilizationRates(void* d, Utilization* u)
{
    const int i = indexOf(d);
    if (i < 0 || unsupported("utilization")) return kNotSupported;
    u->gpu = unsigned(37 + i);
    u->memory = 12;
    return kSuccess;
}

int nvmlDeviceGetTemperature(void* d, int sensor, unsigned* t)
{
    const int i = indexOf(d);
    if (i < 0 || sensor != 0 || unsupported("temperature")) return kNotSupported;
    *t = unsigned(50 + i);
    return kSuccess;
}

int nvmlDeviceGetPowerUsage(void* d, unsigned* mw)
{
    if (indexOf(d) < 0 || unsupported("power")) return kNotSupported;
    *mw = 123456;
    return kSuccess;
}

int nvmlDeviceGetClockInfo(void* d, int type, unsigned* mhz)
{
    if (indexOf(d) < 0 || type != 1 || unsupported("clock")) return kNotSupported;
    *mhz = 1980;
    return kSuccess;
}

int nvmlDeviceGetPcieThroughput(void* d, int counter, unsigned* kbs)
{
    if (indexOf(d) < 0 || unsupported("pcie")) return kNotSupported;
    *kbs = counter == 0 ? 1000 : 2000;
    return kSuccess;
}

} // extern "C"
