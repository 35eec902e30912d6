#include "app/version/build_info.h"

#include <QtGlobal>

#include "app/devices/device_list.h"
#include "engine/cpu/cpu_info.h"
#include "engine/cpu/onednn_ops.h"
#include "engine/dist/process_group.h"
#include "engine/gpu/gpu_backend.h"
#include "towers_git_revision.h"

namespace towers::app {

QString versionNumber()
{
    return QStringLiteral(TOWERS_VERSION);
}

QString gitRevision()
{
    return QStringLiteral(TOWERS_GIT_REVISION);
}

QString versionLine(const QString& program)
{
    QString line = program + QLatin1Char(' ') + versionNumber();
    if (!gitRevision().isEmpty()) line += QStringLiteral(" (git %1)").arg(gitRevision());
    return line;
}

QStringList compiledBackends()
{
    // The CPU and reference backends are built in; the CUDA backend is a plugin, listed with its
    // libraries when it loads.
    QStringList list{QStringLiteral("cpu (oneDNN %1)")
                         .arg(QString::fromStdString(engine::cpu::cpuInfo().onednnVersion)),
                     QStringLiteral("reference")};
    if (const auto* gpu = engine::cudaBackend())
        list << QStringLiteral("cuda (%1)").arg(QString::fromStdString(gpu->versions()));
    return list;
}

QString versionText(const QString& program)
{
    QString text = versionLine(program) + QLatin1Char('\n');
    text += QStringLiteral("Backends: %1\n").arg(compiledBackends().join(QStringLiteral(", ")));
    if (!gpuBackendAvailable()) text += QStringLiteral("GPUs: %1\n").arg(gpuBackendNote());
    const std::string bf16Why = engine::cpu::bf16Unavailable();
    text += bf16Why.empty()
                ? QStringLiteral("Precision: fp32, bf16 (CPU towers: --precision bf16)\n")
                : QStringLiteral("Precision: fp32 only: %1\n").arg(QString::fromStdString(bf16Why));
    std::string whyNot;
    text += engine::processGroupsAvailable(&whyNot)
                ? QStringLiteral("Processes: MPI (towers-cli train under mpirun or srun)\n")
                : QStringLiteral("Processes: one only: %1\n").arg(QString::fromStdString(whyNot));
    text += QStringLiteral("Qt %1 (built with %2)\n")
                .arg(QString::fromLatin1(qVersion()), QStringLiteral(QT_VERSION_STR));
    return text;
}

} // namespace towers::app
