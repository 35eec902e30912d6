#include "app/data/dataset_downloader.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QLockFile>
#include <QNetworkAccessManager>

#include <cerrno>
#include <cstring>

#include <unistd.h>

#include "app/data/archive_unpacker.h"
#include "app/data/file_fetcher.h"
#include "app/data/file_ops.h"
#include "engine/errors.h"

namespace towers::app {

DatasetDownloader::DatasetDownloader(DatasetSpec spec, Options options, QObject* parent)
    : QObject(parent), m_spec(std::move(spec)), m_options(std::move(options))
{
    if (m_options.userAgent.isEmpty())
        m_options.userAgent = QByteArrayLiteral("towers/" TOWERS_VERSION);
    if (!m_options.dataDir.isEmpty())
        m_dataDir = QDir::cleanPath(QDir::current().absoluteFilePath(m_options.dataDir));
}

DatasetDownloader::~DatasetDownloader() = default;

QString DatasetDownloader::datasetFolder() const
{
    return m_dataDir + QLatin1Char('/') + m_spec.folderName();
}

QString DatasetDownloader::partialFolder() const
{
    return m_dataDir + QStringLiteral("/.") + m_spec.folderName() + QStringLiteral(".partial");
}

QUrl DatasetDownloader::fileUrl(const DatasetFile& file, const QUrl& baseUrl)
{
    if (baseUrl.isEmpty()) return file.url;
    QUrl url = baseUrl;
    QString path = url.path();
    if (!path.endsWith(QLatin1Char('/'))) path += QLatin1Char('/');
    url.setPath(path + file.name);
    return url;
}

void DatasetDownloader::start()
{
    if (m_outcome != Outcome::NotStarted) {
        qWarning("DatasetDownloader::start: a downloader runs once; create another one");
        return;
    }
    m_outcome = Outcome::Running;
    QMetaObject::invokeMethod(this, &DatasetDownloader::begin, Qt::QueuedConnection);
}

void DatasetDownloader::cancel()
{
    m_cancelRequested.store(true);
    QMetaObject::invokeMethod(this, &DatasetDownloader::cancelNow, Qt::QueuedConnection);
}

void DatasetDownloader::cancelNow()
{
    if (m_outcome != Outcome::Running) return;
    // The fetcher finishes as Cancelled, and onFileFinished ends the download.
    if (m_fetcher) m_fetcher->cancel();
}

void DatasetDownloader::begin()
{
    if (m_cancelRequested.load()) {
        finish(Outcome::Cancelled,
               QStringLiteral("the download of %1 was cancelled").arg(m_spec.name));
        return;
    }
    try {
        validateDatasetSpec(m_spec);
        if (m_dataDir.isEmpty())
            throw engine::InvalidArgument("no data directory was given to download into");
        if (!m_options.force && isDatasetComplete(m_spec, datasetFolder())) {
            finish(Outcome::AlreadyPresent, datasetFolder());
            return;
        }
        makeFolder(m_dataDir);
        acquireLock();
        // Another process may have finished the same dataset while we waited for nothing.
        if (!m_options.force && isDatasetComplete(m_spec, datasetFolder())) {
            finish(Outcome::AlreadyPresent, datasetFolder());
            return;
        }
        makeFolder(partialFolder() + QStringLiteral("/files"));
        m_fileDone = QList<qint64>(m_spec.files.size(), 0);
        m_fileTotal.clear();
        for (const auto& f : m_spec.files) m_fileTotal << f.size;
        m_network = new QNetworkAccessManager(this);
        nextFile(0);
    } catch (const engine::Error& e) {
        finish(Outcome::Failed, QString::fromStdString(e.what()));
    }
}

void DatasetDownloader::acquireLock()
{
    // By folder: a download of cifar100 and one of cifar100-coarse write the same folder.
    const QString path =
        m_dataDir + QStringLiteral("/.") + m_spec.folderName() + QStringLiteral(".lock");
    m_lock = std::make_unique<QLockFile>(path);
    // Stale only when its process is gone: a download may rightly hold it for hours.
    m_lock->setStaleLockTime(0);
    if (m_lock->tryLock(0)) return;
    const auto error = m_lock->error();
    m_lock.reset();
    if (error == QLockFile::LockFailedError)
        throw engine::IoError(QStringLiteral("another download into %1 is running (it holds "
                                             "the lock file %2)")
                                  .arg(datasetFolder(), path)
                                  .toStdString());
    // QLockFile says "permission" for any failure to create the file: the folder's own reason
    // where it has one (a read-only file system, a full disk's inodes are not that).
    QString why = error == QLockFile::PermissionError
                      ? QStringLiteral("Permission denied")
                      : QStringLiteral("the folder is not writable");
    if (::access(QFile::encodeName(m_dataDir).constData(), W_OK) != 0)
        why = QString::fromLocal8Bit(std::strerror(errno));
    throw engine::IoError(
        QStringLiteral("cannot create the lock file %1: %2").arg(path, why).toStdString());
}

void DatasetDownloader::nextFile(int index)
{
    if (index == m_spec.files.size()) {
        finishDataset();
        return;
    }
    m_index = index;
    const DatasetFile& file = m_spec.files[index];
    FileFetcher::Job job;
    job.url = fileUrl(file, m_options.baseUrl);
    job.target = partialFolder() + QStringLiteral("/files/") + file.name;
    job.md5 = file.md5;
    job.sizeHint = file.size;
    job.userAgent = m_options.userAgent;
    job.transferTimeoutMs = m_options.transferTimeoutMs;
    emit fileStarted(file.name, index, int(m_spec.files.size()));
    emit statusMessage(
        QStringLiteral("downloading %1 from %2").arg(file.name, job.url.toDisplayString()));
    m_fetcher = new FileFetcher(m_network, job, this);
    connect(m_fetcher, &FileFetcher::progress, this,
            [this, index](qint64 done, qint64 total) { onFileProgress(index, done, total); });
    connect(m_fetcher, &FileFetcher::statusMessage, this, &DatasetDownloader::statusMessage);
    connect(m_fetcher, &FileFetcher::finished, this, &DatasetDownloader::onFileFinished);
    m_fetcher->start();
}

void DatasetDownloader::onFileProgress(int index, qint64 done, qint64 total)
{
    m_fileDone[index] = done;
    if (total >= 0) m_fileTotal[index] = total;
    emit fileProgress(m_spec.files[index].name, done, total);
    qint64 allDone = 0, allTotal = 0;
    for (int i = 0; i < m_fileDone.size(); ++i) {
        allDone += m_fileDone[i];
        if (allTotal >= 0) allTotal = m_fileTotal[i] >= 0 ? allTotal + m_fileTotal[i] : -1;
    }
    emit progress(allDone, allTotal);
}

void DatasetDownloader::onFileFinished()
{
    FileFetcher* fetcher = m_fetcher;
    m_fetcher = nullptr;
    if (!fetcher) return;
    fetcher->deleteLater();
    switch (fetcher->result()) {
    case FileFetcher::Result::Succeeded:
        if (m_cancelRequested.load())
            finish(Outcome::Cancelled,
                   QStringLiteral("the download of %1 was cancelled; what was downloaded is kept "
                                  "in %2 for the next attempt")
                       .arg(m_spec.name, partialFolder()));
        else
            nextFile(m_index + 1);
        return;
    case FileFetcher::Result::Cancelled:
        finish(Outcome::Cancelled, QStringLiteral("the download of %1 was cancelled; what was "
                                                  "downloaded is kept in %2 for the next attempt")
                                       .arg(m_spec.name, partialFolder()));
        return;
    case FileFetcher::Result::Failed:
    case FileFetcher::Result::Running:
        finish(Outcome::Failed, fetcher->errorMessage());
        return;
    }
}

void DatasetDownloader::finishDataset()
{
    try {
        const QString source =
            m_spec.archiveRoot.isEmpty() ? preparePlainContents() : prepareArchiveContents();
        if (source.isEmpty()) { // cancelled while unpacking
            finish(Outcome::Cancelled,
                   QStringLiteral("the download of %1 was cancelled while unpacking; the verified "
                                  "download is kept in %2 for the next attempt")
                       .arg(m_spec.name, partialFolder()));
            return;
        }
        install(source);
        removeAll(partialFolder());
        syncFolder(m_dataDir);
        finish(Outcome::Downloaded, datasetFolder());
    } catch (const engine::Error& e) {
        finish(Outcome::Failed, QString::fromStdString(e.what()));
    }
}

QString DatasetDownloader::prepareArchiveContents()
{
    const QString archive = partialFolder() + QStringLiteral("/files/") + m_spec.files.first().name;
    const QString unpacked = partialFolder() + QStringLiteral("/unpacked");
    emit statusMessage(QStringLiteral("unpacking %1").arg(m_spec.files.first().name));
    removeAll(unpacked); // whatever an interrupted run left
    makeFolder(unpacked);
    const UnpackResult result = unpackTarGz(archive, unpacked, &m_cancelRequested);
    if (result.cancelled) return {};
    const QString root = unpacked + QLatin1Char('/') + m_spec.archiveRoot;
    if (!QFileInfo(root).isDir()) {
        const QStringList top = QDir(unpacked).entryList(QDir::AllEntries | QDir::NoDotAndDotDot);
        throw ArchiveError(
            QStringLiteral("the archive %1 has no folder %2/ (its top level holds: %3)")
                .arg(m_spec.files.first().name, m_spec.archiveRoot,
                     top.isEmpty() ? QStringLiteral("nothing") : top.join(QStringLiteral(", ")))
                .toStdString());
    }
    for (const QString& required : m_spec.requiredFiles)
        if (!QFileInfo(root + QLatin1Char('/') + required).isFile())
            throw ArchiveError(QStringLiteral("the archive %1 has no file %2/%3")
                                   .arg(m_spec.files.first().name, m_spec.archiveRoot, required)
                                   .toStdString());
    return root;
}

QString DatasetDownloader::preparePlainContents()
{
    const QString folder = partialFolder() + QStringLiteral("/files");
    QStringList names;
    for (const auto& f : m_spec.files) names << f.name;
    // The dataset folder holds the published files and nothing else.
    const QStringList present = QDir(folder).entryList(QDir::AllEntries | QDir::Hidden |
                                                       QDir::System | QDir::NoDotAndDotDot);
    for (const QString& entry : present)
        if (!names.contains(entry)) removeAll(folder + QLatin1Char('/') + entry);
    for (const QString& required : m_spec.requiredFiles)
        if (!QFileInfo(folder + QLatin1Char('/') + required).isFile())
            throw engine::IoError(QStringLiteral("the required file %1 of %2 is not among its "
                                                 "downloaded files")
                                      .arg(required, m_spec.name)
                                      .toStdString());
    return folder;
}

void DatasetDownloader::install(const QString& source)
{
    const QString target = datasetFolder();
    const QFileInfo existing(target);
    if (!existing.exists() && !existing.isSymLink()) {
        renamePath(source, target);
        return;
    }
    // An incomplete (or, with --force, complete) dataset is there: swapped with the new one in one
    // step where the file system can (the name never lacks a dataset), else moved aside and the
    // new one put in place; then the old one deleted, so the folder is never half-written.
    const QString old =
        m_dataDir + QStringLiteral("/.") + m_spec.folderName() + QStringLiteral(".old");
    removeAll(old);
    // Installed; then the old one goes (a link, never followed), from where it is.
    const QString replaced = replacePath(source, target, old) ? old : source;
    try {
        removeAll(replaced);
    } catch (const engine::Error& e) {
        emit statusMessage(QStringLiteral("the replaced dataset could not be removed: %1")
                               .arg(QString::fromStdString(e.what())));
    }
}

void DatasetDownloader::finish(Outcome outcome, const QString& message)
{
    if (m_outcome != Outcome::Running) return;
    m_outcome = outcome;
    const bool ok = outcome == Outcome::Downloaded || outcome == Outcome::AlreadyPresent;
    m_error = ok ? QString() : message;
    m_lock.reset(); // unlocks
    emit finished(ok, message);
}

} // namespace towers::app
