#include "app/devices/device_list.h"

#include "engine/cpu/cpu_info.h"

namespace towers::app {

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
    return {d};
}

bool gpuBackendAvailable()
{
    return false;
}

QString gpuBackendNote()
{
    return TOWERS_HAS_CUDA
               ? QStringLiteral("The CUDA toolkit was found at build time, but this version of Towers "
                                "has no GPU backend yet: towers run on the CPU.")
               : QStringLiteral("This build of Towers has no GPU backend (the CUDA toolkit was not "
                                "found or was switched off at build time): towers run on the CPU.");
}

} // namespace towers::app
