// towers-cli devices: the CPU and the GPUs Towers can train on.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include "app/cli/command.h"
#include "app/devices/device_list.h"
#include "engine/cpu/cpu_info.h"

namespace towers::app {

int runDevices(const QStringList& args, CommandIo& io)
{
    QCommandLineParser p;
    p.setApplicationDescription(
        QStringLiteral("Lists the devices Towers can run towers on: the CPU (cores, the instruction\n"
                       "set oneDNN's kernels use, memory) and the NVIDIA GPUs."));
    p.addOption({QStringLiteral("json"), QStringLiteral("Print the result as JSON.")});
    int code = 0;
    if (!parseOrExplain(p, args, io, code)) return code;
    if (!p.positionalArguments().isEmpty()) {
        io.err << "towers-cli devices: unexpected argument '" << p.positionalArguments().first() << "'\n";
        return ExitUsage;
    }
    const auto cpu = engine::cpu::cpuInfo();
    const QString gpuNote = gpuBackendNote();
    if (p.isSet(QStringLiteral("json"))) {
        const QJsonObject j{
            {QStringLiteral("cpu"),
             QJsonObject{{QStringLiteral("model"), QString::fromStdString(cpu.model)},
                         {QStringLiteral("logical_cores"), cpu.logicalCores},
                         {QStringLiteral("isa"), QString::fromStdString(cpu.isa)},
                         {QStringLiteral("onednn"), QString::fromStdString(cpu.onednnVersion)},
                         {QStringLiteral("memory_bytes"), double(cpu.memoryBytes)}}},
            {QStringLiteral("gpus"), QJsonArray{}},
            {QStringLiteral("gpu_note"), gpuNote},
        };
        io.out << QJsonDocument(j).toJson(QJsonDocument::Indented);
        return ExitOk;
    }
    io.out << "CPU   " << (cpu.model.empty() ? QStringLiteral("(model unknown)") : QString::fromStdString(cpu.model))
           << ", " << cpu.logicalCores << " logical core(s)";
    if (cpu.memoryBytes > 0)
        io.out << ", " << QString::number(double(cpu.memoryBytes) / double(1LL << 30), 'f', 1) << " GiB memory";
    io.out << "\n      oneDNN " << QString::fromStdString(cpu.onednnVersion) << ", kernels for "
           << QString::fromStdString(cpu.isa) << "\n"
           << "GPUs  none. " << gpuNote << "\n";
    return ExitOk;
}

} // namespace towers::app
