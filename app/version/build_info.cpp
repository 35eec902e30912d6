#include "app/version/build_info.h"

#include <QtGlobal>

#include "app/devices/device_list.h"
#include "engine/cpu/cpu_info.h"
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
    // The engine has exactly these two today (engine/cpu and engine/reference); a GPU backend
    // adds itself here when it is built.
    return {QStringLiteral("cpu (oneDNN %1)").arg(QString::fromStdString(engine::cpu::cpuInfo().onednnVersion)),
            QStringLiteral("reference")};
}

QString versionText(const QString& program)
{
    QString text = versionLine(program) + QLatin1Char('\n');
    text += QStringLiteral("Backends: %1\n").arg(compiledBackends().join(QStringLiteral(", ")));
    if (!gpuBackendAvailable()) text += QStringLiteral("GPUs: %1\n").arg(gpuBackendNote());
    text += QStringLiteral("Qt %1 (built with %2)\n").arg(QString::fromLatin1(qVersion()), QStringLiteral(QT_VERSION_STR));
    return text;
}

} // namespace towers::app
