#pragma once
// The devices towers can run on, as data: the CPU and every GPU the build can use. The Devices
// page shows one row per entry, so a GPU backend adds rows here, not widgets.
#include <QString>

#include <functional>
#include <string>
#include <vector>

namespace towers::engine::monitor {
class Nvml;
}

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
    QString simdTarget;        // the CPU: what Towers' own (Highway) kernels run on, e.g. "AVX2"
    int logicalCores = 0;      // CPU: cores this process may use
    // Whether towers can run on it in this build (a GPU NVML sees is listed, and monitored, even
    // when there is no GPU backend to train on it, or CUDA does not see it), and why not.
    bool trainable = true;
    QString notTrainable;
    // GPUs: CUDA's number for it, what --gpus and --gpu take (CUDA_VISIBLE_DEVICES narrows and
    // reorders CUDA's GPUs, not NVML's, whose index `id` has); -1 where CUDA does not see it.
    int cudaNumber = -1;
    // How cudaNumber was found: by PCI bus id, or (where NVML cannot look bus ids up) by order.
    bool cudaByOrder = false;
};

// The CPU first, then the NVIDIA GPUs NVML sees (ids "gpu0", "gpu1", ... by NVML index), marked
// trainable when this build has a GPU backend.
std::vector<DeviceDescription> listDevices();
// Gives each GPU of `devices` (NVML's, by index) its CUDA number: CUDA's GPU c of `cudaCount` is
// the one NVML finds at the PCI bus id busIdOf(c) (nvmlIndexOf: its NVML index, or -1), when
// `byBusId` (NVML can look bus ids up); else CUDA's order is taken as NVML's, the PCI bus order
// the backend loader sets, and cudaByOrder says so. GPUs CUDA does not see are not trainable,
// saying why.
void assignCudaNumbers(std::vector<DeviceDescription>& devices, int cudaCount, bool byBusId,
                       const std::function<std::string(int)>& busIdOf,
                       const std::function<int(const std::string&)>& nvmlIndexOf);
// A GPU's name in the lists: "GPU 2" (NVML's number), with CUDA's beside it where they differ,
// "GPU 2 (CUDA 0)".
QString gpuLabel(const DeviceDescription& gpu);
// True when this build has a GPU backend that can enumerate and drive GPUs.
bool gpuBackendAvailable();
// What can and cannot be done with GPUs here, in words for the Devices page, `towers-cli devices`
// and `--version`: the backend's state, and what NVML found or why it is not available.
QString gpuBackendNote();
// The process's NVML (loaded on first use; see engine/monitor/nvml.h). Never throws.
const engine::monitor::Nvml& nvml();

} // namespace towers::app
