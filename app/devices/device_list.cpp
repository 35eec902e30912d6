#include "app/devices/device_list.h"

#include "engine/cpu/cpu_info.h"
#include "engine/monitor/nvml.h"

namespace towers::app {

const engine::monitor::Nvml& nvml()
{
    static const engine::monitor::Nvml instance; // thread-safe, on first use
    return instance;
}

std::vector<DeviceDescription> listDevices()
{
    const auto cpu = engine::cpu::cpuInfo();
    DeviceDescription d;
    d.kind = DeviceDescription::Kind::Cpu;
    d.id = QStringLiteral("cpu");
    d.name = cpu.model.empty() ? QStringLiteral("CPU (model unknown)")
                               : QString::fromStdString(cpu.model);
    d.memoryBytes = cpu.memoryBytes;
    d.isa = QString::fromStdString(cpu.isa);
    d.logicalCores = cpu.logicalCores;
    std::vector<DeviceDescription> devices{d};
    for (const auto& g : nvml().gpus()) {
        DeviceDescription gpu;
        gpu.kind = DeviceDescription::Kind::Gpu;
        gpu.id = QStringLiteral("gpu%1").arg(g.index);
        gpu.name = QString::fromStdString(g.name);
        gpu.memoryBytes = g.memoryTotal;
        gpu.computeCapability = QString::fromStdString(g.computeCapability());
        gpu.trainable = gpuBackendAvailable();
        devices.push_back(gpu);
    }
    return devices;
}

bool gpuBackendAvailable()
{
    return false;
}

QString gpuBackendNote()
{
    const QString backend =
        TOWERS_HAS_CUDA ? QStringLiteral("The CUDA toolkit was found at build time, but this version of Towers "
                                         "has no GPU backend yet: towers run on the CPU.")
                        : QStringLiteral("This build of Towers has no GPU backend (the CUDA toolkit was not "
                                         "found or was switched off at build time): towers run on the CPU.");
    const auto& n = nvml();
    if (!n.available())
        return QStringLiteral("No NVIDIA GPU found (%1). %2")
            .arg(QString::fromStdString(n.unavailableReason()), backend);
    const QString driver = n.driverVersion().empty()
                               ? QString()
                               : QStringLiteral(", driver %1").arg(QString::fromStdString(n.driverVersion()));
    if (n.gpus().empty()) return QStringLiteral("The NVIDIA driver sees no GPU%1. %2").arg(driver, backend);
    return QStringLiteral("%1 NVIDIA GPU(s) found%2; their usage is monitored. %3")
        .arg(n.gpus().size())
        .arg(driver, backend);
}

} // namespace towers::app
