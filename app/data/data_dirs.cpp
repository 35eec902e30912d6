#include "app/data/data_dirs.h"

#include <QDir>
#include <QStandardPaths>

namespace towers::app {

QString defaultDataDir()
{
    const QString towersData = qEnvironmentVariable("TOWERS_DATA");
    const QStringList folders = towersData.split(QLatin1Char(':'), Qt::SkipEmptyParts);
    if (!folders.isEmpty())
        return QDir::cleanPath(QDir::current().absoluteFilePath(folders.first()));
    const QString base = QStandardPaths::writableLocation(QStandardPaths::GenericDataLocation);
    if (base.isEmpty()) return {};
    return QDir::cleanPath(base + QStringLiteral("/towers/datasets"));
}

} // namespace towers::app
