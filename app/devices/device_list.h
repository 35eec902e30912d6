#pragma once
// The devices towers can run on, as data: the CPU and every GPU the build can use. The Devices
// page shows one row per entry, so a GPU backend adds rows here, not widgets.
#include <QString>

#include <vector>

namespace towers::app {

struct DeviceDescription
{
    enum class Kind
    {
        Cpu,
        Gpu
    };
    Kind kind = Kind::Cpu;
    QString id;                // stable key: "cpu", "gpu0", "gpu1", ...
    QString name;              // "AMD EPYC 9654 96-Core Processor", "NVIDIA H100 80GB HBM3"
    qint64 memoryBytes = 0;    // physical memory (CPU) or device memory (GPU); 0 when unknown
    QString computeCapability; // GPUs: "9.0"; empty for the CPU
    QString isa;               // CPU: the instruction set oneDNN's kernels use
    int logicalCores = 0;      // CPU: cores this process may use
};

// The CPU first, then the GPUs this build can train on (none without a GPU backend).
std::vector<DeviceDescription> listDevices();
// True when this build has a GPU backend that can enumerate and drive GPUs.
bool gpuBackendAvailable();
// Why there are no GPU rows, in words for the Devices page and `towers-cli devices`.
QString gpuBackendNote();

} // namespace towers::app
