#include "app/data/data_dirs.h"

#include <QDir>

#include "engine/data/dataset.h"

namespace towers::app {

QString defaultDataDir()
{
    // One rule for both sides: the first folder of the engine's search path that a user owns
    // (the search path ends with the read-only /usr/share/datasets).
    const QString towersData = qEnvironmentVariable("TOWERS_DATA");
    const QStringList folders = towersData.split(QLatin1Char(':'), Qt::SkipEmptyParts);
    if (!folders.isEmpty())
        return QDir::cleanPath(QDir::current().absoluteFilePath(folders.first()));
    const auto user = engine::userDatasetDirectory();
    return user.empty() ? QString() : QDir::cleanPath(QString::fromStdString(user.string()));
}

QString defaultRunsDir()
{
    const QString runs = qEnvironmentVariable("TOWERS_RUNS");
    if (!runs.isEmpty()) return QDir::cleanPath(QDir::current().absoluteFilePath(runs));
    const auto datasets = engine::userDatasetDirectory(); // <data home>/towers/datasets
    return datasets.empty() ? QString()
                            : QDir::cleanPath(QString::fromStdString(
                                  (datasets.parent_path() / "runs").string()));
}

std::string noRunsFolder(const std::string& instead)
{
    return "no runs folder is known (no home folder: HOME is not set): name one with TOWERS_RUNS" +
           instead;
}

std::vector<std::filesystem::path> searchPathWith(const QString& dataDir)
{
    auto path = engine::defaultSearchPath();
    if (!dataDir.isEmpty()) path.insert(path.begin(), std::filesystem::path(dataDir.toStdString()));
    return path;
}

} // namespace towers::app
