// towers-cli devices: the CPU and the GPUs Towers can train on or sees, with NVML's figures.
#include <QCoreApplication>
#include <QDateTime>
#include <QElapsedTimer>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QThread>

#include <cmath>
#include <map>

#include "app/cli/command.h"
#include "app/devices/device_list.h"
#include "app/process/interrupt_notifier.h"
#include "engine/cpu/cpu_info.h"
#include "engine/cpu/onednn_ops.h"
#include "engine/errors.h"
#include "engine/monitor/nvml.h"

namespace towers::app {

namespace {

QJsonValue number(double v)
{
    return std::isnan(v) ? QJsonValue() : QJsonValue(v);
}

QString figure(double v, const QString& format)
{
    return std::isnan(v) ? QStringLiteral("n/a") : format.arg(v, 0, 'f', 0);
}

QString gib(double bytes)
{
    return std::isnan(bytes) ? QStringLiteral("n/a")
                             : QString::number(bytes / double(1LL << 30), 'f', 1);
}

// listDevices' GPU rows by NVML index (their ids "gpuN"): CUDA's number for each, or why it has
// none (CUDA_VISIBLE_DEVICES narrows and reorders CUDA's GPUs, not NVML's).
using GpuRows = std::map<int, DeviceDescription>;

GpuRows gpuRows()
{
    GpuRows rows;
    for (const DeviceDescription& d : listDevices())
        if (d.kind == DeviceDescription::Kind::Gpu) rows.emplace(d.id.mid(3).toInt(), d);
    return rows;
}

// NVML's GPU `index`'s row; a GPU with none (not listed) has no CUDA number.
const DeviceDescription& rowOf(const GpuRows& rows, int index)
{
    static const DeviceDescription none = [] {
        DeviceDescription d;
        d.kind = DeviceDescription::Kind::Gpu;
        return d;
    }();
    const auto at = rows.find(index);
    return at == rows.end() ? none : at->second;
}

QJsonObject gpuJson(const engine::monitor::Nvml& nvml, const engine::monitor::GpuInfo& g,
                    const GpuRows& rows)
{
    const auto r = nvml.read(g.index);
    const DeviceDescription& row = rowOf(rows, g.index);
    const int cudaNumber = row.cudaNumber;
    return QJsonObject{
        {QStringLiteral("index"), g.index},
        {QStringLiteral("name"), QString::fromStdString(g.name)},
        {QStringLiteral("compute_capability"), QString::fromStdString(g.computeCapability())},
        {QStringLiteral("trainable"), cudaNumber >= 0},
        {QStringLiteral("cuda_number"), cudaNumber >= 0 ? QJsonValue(cudaNumber) : QJsonValue()},
        // How CUDA's number was found: "pci bus id", or "order" where NVML cannot look it up.
        {QStringLiteral("cuda_matched_by"), cudaNumber < 0 ? QJsonValue()
                                            : row.cudaByOrder
                                                ? QJsonValue(QStringLiteral("order"))
                                                : QJsonValue(QStringLiteral("pci bus id"))},
        {QStringLiteral("utilisation_percent"), number(r.utilisation)},
        {QStringLiteral("memory_used_bytes"), number(r.memoryUsed)},
        {QStringLiteral("memory_total_bytes"), number(r.memoryTotal)},
        {QStringLiteral("temperature_c"), number(r.temperatureC)},
        {QStringLiteral("power_w"), number(r.powerW)},
        {QStringLiteral("power_limit_w"), number(r.powerLimitW)},
        {QStringLiteral("sm_clock_mhz"), number(r.smClockMHz)},
        {QStringLiteral("pcie_tx_bytes_per_s"), number(r.pcieTxBytesPerS)},
        {QStringLiteral("pcie_rx_bytes_per_s"), number(r.pcieRxBytesPerS)},
        {QStringLiteral("process_memory_bytes"), number(nvml.processMemory(g.index))}};
}

void printGpus(QTextStream& out, const engine::monitor::Nvml& nvml, const GpuRows& rows)
{
    if (nvml.gpus().empty()) {
        out << "GPUs  none. " << gpuBackendNote() << "\n";
        return;
    }
    const bool backend = gpuBackendAvailable();
    for (const auto& g : nvml.gpus()) {
        const auto r = nvml.read(g.index);
        const DeviceDescription& row = rowOf(rows, g.index);
        // CUDA's number (what --gpus takes) where it differs from NVML's, or why CUDA has none.
        const QString cudaText =
            !backend             ? QString()
            : row.cudaNumber < 0 ? QStringLiteral("; ") + row.notTrainable
            : row.cudaNumber != g.index
                ? QStringLiteral("; CUDA GPU %1 (--gpus %1)").arg(row.cudaNumber)
                : QString();
        out << "GPU " << g.index << " " << QString::fromStdString(g.name) << ", compute capability "
            << (g.ccMajor < 0 ? QStringLiteral("n/a")
                              : QString::fromStdString(g.computeCapability()))
            << cudaText << "\n"
            << "      " << figure(r.utilisation, QStringLiteral("%1%")) << " busy, memory "
            << gib(r.memoryUsed) << " / " << gib(r.memoryTotal) << " GiB (this process "
            << gib(nvml.processMemory(g.index)) << "), "
            << figure(r.temperatureC, QStringLiteral("%1 C")) << ", "
            << figure(r.powerW, QStringLiteral("%1 W")) << " of "
            << figure(r.powerLimitW, QStringLiteral("%1 W")) << ", SM "
            << figure(r.smClockMHz, QStringLiteral("%1 MHz")) << ", PCIe tx "
            << figure(r.pcieTxBytesPerS / 1e6, QStringLiteral("%1 MB/s")) << " rx "
            << figure(r.pcieRxBytesPerS / 1e6, QStringLiteral("%1 MB/s")) << "\n";
    }
    out << "      " << gpuBackendNote() << "\n";
}

} // namespace

int runDevices(const QStringList& args, CommandIo& io)
{
    QCommandLineParser p;
    p.setApplicationDescription(QStringLiteral(
        "Lists the devices Towers can run towers on: the CPU (cores, the instruction set oneDNN's\n"
        "kernels use, whether --precision bf16 runs, memory) and the NVIDIA GPUs NVML sees\n"
        "(name, compute capability, utilisation, memory, temperature, power and its limit, SM\n"
        "clock, PCIe throughput, this process's memory).\n"
        "NVML is loaded at run time ($TOWERS_NVML_LIBRARY, else libnvidia-ml.so.1); without it "
        "the\n"
        "GPU figures are simply not available."));
    p.addOptions({
        {QStringLiteral("json"),
         QStringLiteral("Print the result as JSON (one object per refresh with --watch).")},
        {QStringLiteral("watch"), QStringLiteral("Refresh once a second until Ctrl-C.")},
        {QStringLiteral("count"), QStringLiteral("With --watch, stop after n refreshes."),
         QStringLiteral("n")},
    });
    int code = 0;
    if (!parseOrExplain(p, args, io, code, Arguments::None)) return code;
    int count = p.isSet(QStringLiteral("watch")) ? 0 : 1;
    if (p.isSet(QStringLiteral("count"))) {
        if (!p.isSet(QStringLiteral("watch"))) {
            io.err << "towers-cli devices: --count needs --watch\n";
            return ExitUsage;
        }
        if (!intOption(p, QStringLiteral("count"), 1, 1000000000, count, io)) return ExitUsage;
    }
    const bool json = p.isSet(QStringLiteral("json"));
    const auto cpu = engine::cpu::cpuInfo();
    // Why --precision bf16 cannot run here ("" where it can).
    const QString bf16Why =
        cpu.bf16 ? QString() : QString::fromStdString(engine::cpu::bf16Unavailable());
    const auto& gpus = nvml();
    const GpuRows rows = gpuRows(); // CUDA's numbers: fixed while the process runs
    InterruptNotifier interrupts;   // Ctrl-C ends --watch normally
    for (int refresh = 0; count == 0 || refresh < count; ++refresh) {
        if (refresh > 0) {
            QElapsedTimer waited;
            waited.start();
            while (waited.elapsed() < 1000 && !interrupts.received()) {
                QCoreApplication::processEvents(QEventLoop::AllEvents, 50);
                QThread::msleep(20);
            }
            if (interrupts.received()) break;
        }
        if (json) {
            QJsonArray gpuList;
            for (const auto& g : gpus.gpus()) gpuList.append(gpuJson(gpus, g, rows));
            QJsonObject cpuJson{
                {QStringLiteral("model"), QString::fromStdString(cpu.model)},
                {QStringLiteral("logical_cores"), cpu.logicalCores},
                {QStringLiteral("isa"), QString::fromStdString(cpu.isa)},
                {QStringLiteral("simd_target"), QString::fromStdString(cpu.simdTarget)},
                {QStringLiteral("onednn"), QString::fromStdString(cpu.onednnVersion)},
                {QStringLiteral("bf16"), cpu.bf16},
                {QStringLiteral("memory_bytes"), double(cpu.memoryBytes)}};
            if (!cpu.bf16) cpuJson.insert(QStringLiteral("bf16_unavailable"), bf16Why);
            const QJsonObject j{
                {QStringLiteral("cpu"), cpuJson},
                {QStringLiteral("gpus"), gpuList},
                {QStringLiteral("nvml"),
                 gpus.available() ? QString::fromStdString(gpus.driverVersion().empty()
                                                               ? std::string("available")
                                                               : "driver " + gpus.driverVersion())
                                  : QString::fromStdString(gpus.unavailableReason())},
                {QStringLiteral("gpu_note"), gpuBackendNote()},
            };
            io.out << QJsonDocument(j).toJson(count == 1 ? QJsonDocument::Indented
                                                         : QJsonDocument::Compact);
            if (count != 1) io.out << "\n";
        } else {
            if (count != 1)
                io.out << "--- " << QDateTime::currentDateTime().toString(Qt::ISODate) << "\n";
            io.out << "CPU   "
                   << (cpu.model.empty() ? QStringLiteral("(model unknown)")
                                         : QString::fromStdString(cpu.model))
                   << ", "
                   << QString::fromStdString(
                          engine::counted(cpu.logicalCores, "logical core", "logical cores"));
            if (cpu.memoryBytes > 0)
                io.out << ", "
                       << QString::number(double(cpu.memoryBytes) / double(1LL << 30), 'f', 1)
                       << " GiB memory";
            io.out << "\n      oneDNN " << QString::fromStdString(cpu.onednnVersion)
                   << ", kernels for " << QString::fromStdString(cpu.isa)
                   << "; Towers' own kernels for " << QString::fromStdString(cpu.simdTarget)
                   << "\n";
            io.out << "      "
                   << (cpu.bf16 ? QStringLiteral("bf16 available: --precision bf16 runs "
                                                 "convolutions and matrix products in bfloat16")
                                : QStringLiteral("bf16 not available: ") + bf16Why)
                   << "\n";
            printGpus(io.out, gpus, rows);
        }
        io.out.flush();
    }
    return ExitOk;
}

} // namespace towers::app
