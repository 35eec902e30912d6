#include "app/settings/app_settings.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QTimer>

#include "app/data/data_dirs.h"

namespace towers::app {

namespace {
const QString kDataDir = QStringLiteral("paths/dataDir");
const QString kRunsDir = QStringLiteral("paths/runsDir");
const QString kDataset = QStringLiteral("data/dataset");
const QString kLastConfig = QStringLiteral("train/lastConfig");
const QString kGeometry = QStringLiteral("window/geometry");
const QString kHiddenRunColumns = QStringLiteral("runs/hiddenColumns");
const QString kRunsLeftPlot = QStringLiteral("runs/leftPlot");
const QString kPage = QStringLiteral("window/page");

// Why `file` cannot be written, as far as its path tells: a folder in its place, a file where a
// folder is needed, a read-only file or folder. Empty when none of these is the reason.
QString whyUnwritable(const QString& file)
{
    const QFileInfo info(file);
    if (info.isDir()) return QStringLiteral("it is a folder");
    if (info.exists()) {
        QFile f(file);
        if (!f.open(QIODevice::ReadWrite)) return f.errorString(); // "Permission denied"
        return {};
    }
    // The nearest folder above it that is there: the file, or the folders to it, go in it.
    QString dir = info.absolutePath();
    while (!QFileInfo::exists(dir) && QFileInfo(dir).absolutePath() != dir)
        dir = QFileInfo(dir).absolutePath();
    const QFileInfo there(dir);
    if (!there.isDir()) return QStringLiteral("%1 is a file, not a folder").arg(dir);
    if (!there.isWritable()) return QStringLiteral("no permission to write in %1").arg(dir);
    if (dir != info.absolutePath())
        return QStringLiteral("its folder %1 could not be made").arg(info.absolutePath());
    return {};
}
} // namespace

AppSettings::AppSettings()
    : AppSettings(std::make_unique<QSettings>(QStringLiteral("Towers"), QStringLiteral("towers")))
{
}

AppSettings::AppSettings(const QString& iniFile)
    : AppSettings(std::make_unique<QSettings>(iniFile, QSettings::IniFormat))
{
}

AppSettings::AppSettings(std::unique_ptr<QSettings> settings)
    : m_settings(std::move(settings)), m_writeTimer(new QTimer(this))
{
    m_writeTimer->setSingleShot(true);
    m_writeTimer->setInterval(kWriteDelayMs);
    connect(m_writeTimer, &QTimer::timeout, this, &AppSettings::writeChanges);
}

AppSettings::~AppSettings() = default;

QString AppSettings::dataDir() const
{
    const QString dir = m_settings->value(kDataDir).toString();
    return dir.isEmpty() ? defaultDataDir() : dir;
}

void AppSettings::setDataDir(const QString& dir)
{
    setValue(kDataDir, dir);
}

QString AppSettings::runsDir() const
{
    const QString dir = m_settings->value(kRunsDir).toString();
    return dir.isEmpty() ? defaultRunsDir() : dir;
}

void AppSettings::setRunsDir(const QString& dir)
{
    setValue(kRunsDir, dir);
}

QString AppSettings::datasetName() const
{
    return m_settings->value(kDataset).toString();
}

void AppSettings::setDatasetName(const QString& name)
{
    setValue(kDataset, name);
}

QString AppSettings::lastConfigJson() const
{
    return m_settings->value(kLastConfig).toString();
}

void AppSettings::setLastConfigJson(const QString& json)
{
    setValue(kLastConfig, json);
}

QStringList AppSettings::hiddenRunColumns() const
{
    if (!m_settings->contains(kHiddenRunColumns))
        return {QStringLiteral("model"), QStringLiteral("dataset"), QStringLiteral("top5"),
                QStringLiteral("checkpoints")};
    return m_settings->value(kHiddenRunColumns).toStringList();
}

void AppSettings::setHiddenRunColumns(const QStringList& columns)
{
    setValue(kHiddenRunColumns, columns);
}

QString AppSettings::runsLeftPlot() const
{
    return m_settings->value(kRunsLeftPlot, QStringLiteral("loss")).toString();
}

void AppSettings::setRunsLeftPlot(const QString& plot)
{
    setValue(kRunsLeftPlot, plot);
}

QByteArray AppSettings::windowGeometry() const
{
    return m_settings->value(kGeometry).toByteArray();
}

void AppSettings::setWindowGeometry(const QByteArray& geometry)
{
    setValue(kGeometry, geometry);
}

int AppSettings::lastPage() const
{
    return m_settings->value(kPage, 0).toInt();
}

void AppSettings::setLastPage(int page)
{
    setValue(kPage, page);
}

void AppSettings::setValue(const QString& key, const QVariant& value)
{
    m_settings->setValue(key, value);
    if (!m_writeTimer->isActive()) m_writeTimer->start();
}

void AppSettings::sync()
{
    m_writeTimer->stop();
    m_settings->sync();
    // QSettings::status() keeps the first error it met for good (a FormatError read at start
    // hides every later failure; an AccessError stays after the file can be written again): the
    // file's path says whether it can be written now. An AccessError the path did not explain
    // when it came (a full disk) stays a failure: nothing tells when it is over.
    QString why = whyUnwritable(fileName());
    if (m_settings->status() == QSettings::AccessError) {
        if (!m_statusErrorSeen) m_statusErrorUnexplained = why.isEmpty();
        m_statusErrorSeen = true;
        if (why.isEmpty() && m_statusErrorUnexplained) why = QStringLiteral("writing it failed");
    }
    m_saveError =
        why.isEmpty()
            ? QString()
            : QStringLiteral("the settings could not be saved to %1: %2").arg(fileName(), why);
}

void AppSettings::writeChanges()
{
    const bool wasFailing = !m_saveError.isEmpty();
    sync();
    if (!wasFailing && !m_saveError.isEmpty()) emit saveFailed(m_saveError);
    if (wasFailing && m_saveError.isEmpty()) emit saveRecovered();
}

QString AppSettings::readError() const
{
    return m_settings->status() == QSettings::FormatError
               ? QStringLiteral("the settings file %1 has lines that are not in the INI format: "
                                "they are left out, and the file is written again without them")
                     .arg(fileName())
               : QString();
}

QString AppSettings::defaultRunsDir()
{
    const QString dir = app::defaultRunsDir(); // where towers-cli train puts runs
    return dir.isEmpty() ? QDir::current().absoluteFilePath(QStringLiteral("towers-runs")) : dir;
}

} // namespace towers::app
