#include "app/devices/device_list.h"

#include "engine/cpu/cpu_info.h"
#include "engine/errors.h"
#include "engine/gpu/gpu_backend.h"
#include "engine/monitor/nvml.h"

namespace towers::app {

namespace {

// `sentence` with the CUDA_VISIBLE_DEVICES that decides what CUDA sees, where it is set.
QString visibleDevicesNote(const QString& sentence)
{
    const QByteArray visible = qgetenv("CUDA_VISIBLE_DEVICES");
    return visible.isNull() ? sentence + QLatin1Char('.')
                            : QStringLiteral("%1 (CUDA_VISIBLE_DEVICES=%2).")
                                  .arg(sentence, QString::fromLocal8Bit(visible));
}

} // namespace

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
    d.simdTarget = QString::fromStdString(cpu.simdTarget);
    d.logicalCores = cpu.logicalCores;
    std::vector<DeviceDescription> devices{d};
    // NVML and CUDA number the GPUs alike: the backend loader puts CUDA in PCI bus order.
    const auto& gpus = nvml().gpus();
    for (const auto& g : gpus) {
        DeviceDescription gpu;
        gpu.kind = DeviceDescription::Kind::Gpu;
        gpu.id = QStringLiteral("gpu%1").arg(g.index);
        gpu.name = QString::fromStdString(g.name);
        gpu.memoryBytes = g.memoryTotal;
        gpu.computeCapability = QString::fromStdString(g.computeCapability());
        gpu.trainable = false;
        gpu.notTrainable =
            QStringLiteral("Monitored only: Towers has no GPU backend to train on it "
                           "here.");
        devices.push_back(gpu);
    }
    if (const auto* backend = engine::cudaBackend(); backend && backend->deviceCount() == 0)
        for (DeviceDescription& row : devices) // the backend is there, CUDA sees no GPU: why
            if (row.kind == DeviceDescription::Kind::Gpu)
                row.notTrainable = visibleDevicesNote(
                    QStringLiteral("CUDA sees no GPU here: %1")
                        .arg(QString::fromStdString(backend->unavailableReason())));
    if (!gpus.empty() && gpuBackendAvailable()) {
        auto* backend = engine::cudaBackend();
        assignCudaNumbers(
            devices, backend->deviceCount(), nvml().findsByPciBusId(),
            [backend](int c) {
                try {
                    return backend->pciBusId(c);
                } catch (const std::exception&) {
                    return std::string();
                }
            },
            [](const std::string& bus) { return nvml().indexOfPciBusId(bus); });
    }
    // GPUs CUDA can drive but NVML cannot see (NVML missing or failing): listed, not monitored.
    if (gpus.empty() && gpuBackendAvailable()) {
        auto* backend = engine::cudaBackend();
        for (int i = 0; i < backend->deviceCount(); ++i) {
            try {
                const auto info = backend->deviceInfo(i);
                DeviceDescription gpu;
                gpu.kind = DeviceDescription::Kind::Gpu;
                gpu.id = QStringLiteral("gpu%1").arg(i);
                gpu.name = QString::fromStdString(info.name);
                gpu.memoryBytes = qint64(info.totalMemory);
                gpu.computeCapability =
                    QStringLiteral("%1.%2").arg(info.computeMajor).arg(info.computeMinor);
                gpu.cudaNumber = i;
                devices.push_back(gpu);
            } catch (const std::exception&) {
                // A GPU whose query fails is left out, never a crash.
            }
        }
    }
    return devices;
}

void assignCudaNumbers(std::vector<DeviceDescription>& devices, int cudaCount, bool byBusId,
                       const std::function<std::string(int)>& busIdOf,
                       const std::function<int(const std::string&)>& nvmlIndexOf)
{
    std::vector<DeviceDescription*> byNvml; // NVML index -> its row
    for (DeviceDescription& d : devices) {
        if (d.kind != DeviceDescription::Kind::Gpu) continue;
        const int n = d.id.mid(3).toInt(); // "gpu3"
        if (n >= int(byNvml.size())) byNvml.resize(std::size_t(n) + 1, nullptr);
        byNvml[std::size_t(n)] = &d;
    }
    for (int c = 0; byBusId && c < cudaCount; ++c) {
        const int n = nvmlIndexOf(busIdOf(c));
        if (n < 0 || n >= int(byNvml.size()) || !byNvml[std::size_t(n)] ||
            byNvml[std::size_t(n)]->cudaNumber >= 0)
            continue; // a GPU NVML does not list, or a second CUDA device on it (MIG)
        byNvml[std::size_t(n)]->cudaNumber = c;
    }
    for (int c = 0; !byBusId && c < cudaCount && c < int(byNvml.size()); ++c)
        if (byNvml[std::size_t(c)]) {
            byNvml[std::size_t(c)]->cudaNumber = c;
            byNvml[std::size_t(c)]->cudaByOrder = true;
        }
    for (DeviceDescription* d : byNvml) {
        if (!d) continue;
        d->trainable = d->cudaNumber >= 0;
        d->notTrainable =
            d->trainable ? QString()
                         : visibleDevicesNote(QStringLiteral("CUDA does not see this GPU here"));
    }
}

QString gpuLabel(const DeviceDescription& gpu)
{
    const QString nvmlNumber = gpu.id.mid(3); // "gpu2"
    return gpu.cudaNumber < 0 || QString::number(gpu.cudaNumber) == nvmlNumber
               ? QStringLiteral("GPU %1").arg(nvmlNumber)
               : QStringLiteral("GPU %1 (CUDA %2)").arg(nvmlNumber).arg(gpu.cudaNumber);
}

bool gpuBackendAvailable()
{
    const auto* backend = engine::cudaBackend();
    return backend && backend->deviceCount() > 0;
}

QString gpuBackendNote()
{
    std::string why;
    const auto* gpu = engine::cudaBackend(&why);
    QString backend;
    if (!gpu)
        backend = QStringLiteral("No GPU backend: %1. Only the CPU can run towers here.")
                      .arg(QString::fromStdString(why));
    else if (gpu->deviceCount() == 0)
        backend = QStringLiteral(
                      "The CUDA backend is loaded (%1), but %2. Only the CPU can run towers here.")
                      .arg(QString::fromStdString(gpu->versions()),
                           QString::fromStdString(gpu->unavailableReason()));
    else
        backend =
            QStringLiteral("The CUDA backend (%1) can train on %2.")
                .arg(QString::fromStdString(gpu->versions()),
                     QString::fromStdString(engine::counted(gpu->deviceCount(), "GPU", "GPUs")));
    const auto& n = nvml();
    if (!n.available())
        return QStringLiteral("No NVIDIA GPU found (%1). %2")
            .arg(QString::fromStdString(n.unavailableReason()), backend);
    const QString driver =
        n.driverVersion().empty()
            ? QString()
            : QStringLiteral(", driver %1").arg(QString::fromStdString(n.driverVersion()));
    if (n.gpus().empty())
        return QStringLiteral("The NVIDIA driver sees no GPU%1. %2").arg(driver, backend);
    return QStringLiteral("%1 found%2; their usage is monitored. %3")
        .arg(QString::fromStdString(
                 engine::counted(qint64(n.gpus().size()), "NVIDIA GPU", "NVIDIA GPUs")),
             driver, backend);
}

} // namespace towers::app
