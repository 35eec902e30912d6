#pragma once
// Downloads one dataset into a data directory: fetches its files (resuming partial ones),
// verifies each against its published MD5, unpacks archives, and only then makes the dataset
// folder appear, by a rename. Shared by towers-cli and the GUI.
#include <QList>
#include <QObject>
#include <QPointer>
#include <QUrl>
#include <atomic>
#include <memory>

#include "app/data/dataset_catalog.h"

class QLockFile;
class QNetworkAccessManager;

namespace towers::app {

class FileFetcher;

// Layout under the data directory D, for a dataset called N:
//   D/N/              the dataset, complete (appears last, by rename)
//   D/.N.partial/     work in progress: files/ (downloads, *.part while incomplete), unpacked/
//   D/.N.lock         held while a download runs (a second one into D fails instead of racing)
// Everything of an interrupted run stays in D/.N.partial/ and the next run resumes it.
//
// Threads: the object does its work in the thread it lives in (network replies, hashing,
// unpacking); a GUI moves it to a worker thread. cancel() may be called from any thread.
class DatasetDownloader : public QObject
{
    Q_OBJECT
public:
    struct Options
    {
        QString dataDir;    // required; created when missing
        QUrl baseUrl;       // empty: the published URLs; else each file from <base>/<name>
        bool force = false; // download again even when the dataset is complete
        int transferTimeoutMs = 30000; // give up on a file when no byte moves for this long
        QByteArray userAgent;          // empty: "towers/<version>"
    };
    enum class Outcome
    {
        NotStarted,
        Running,
        Downloaded,
        AlreadyPresent,
        Failed,
        Cancelled
    };
    Q_ENUM(Outcome)

    DatasetDownloader(DatasetSpec spec, Options options, QObject* parent = nullptr);
    // Destroying a running downloader stops it as cancel() does, without finished().
    ~DatasetDownloader() override;

    const DatasetSpec& spec() const { return m_spec; }
    // <dataDir>/<name> and <dataDir>/.<name>.partial, absolute.
    QString datasetFolder() const;
    QString partialFolder() const;
    Outcome outcome() const { return m_outcome; }
    // Why it failed or was cancelled; empty otherwise.
    QString errorMessage() const { return m_error; }

    // Where `file` is fetched from: its own URL, or <baseUrl>/<file name> when baseUrl is set.
    static QUrl fileUrl(const DatasetFile& file, const QUrl& baseUrl);

public slots:
    // Starts the download (once per object); finished() always comes later, from the event loop.
    // An existing complete dataset finishes at once as AlreadyPresent unless Options::force.
    void start();
    // Stops the download: partial files stay for the next run, the dataset folder is not
    // touched, and finished() reports Cancelled. Thread-safe; no effect once finished.
    void cancel();

signals:
    void fileStarted(const QString& file, int index, int count);
    // Bytes of one file present so far (resumed bytes included); total -1 when unknown.
    void fileProgress(const QString& file, qint64 done, qint64 total);
    // All files together; total -1 while any file's size is unknown.
    void progress(qint64 done, qint64 total);
    // A line for a log: "downloading ...", "resuming ...", "unpacking ...".
    void statusMessage(const QString& text);
    // ok: the dataset is in place (message: its folder); else message says what went wrong,
    // naming the URL, file or path involved (outcome() tells Failed from Cancelled).
    void finished(bool ok, const QString& message);

private:
    void begin();
    void cancelNow();
    void acquireLock();
    void nextFile(int index);
    void onFileProgress(int index, qint64 done, qint64 total);
    void onFileFinished();
    void finishDataset();
    QString prepareArchiveContents();
    QString preparePlainContents();
    void install(const QString& source);
    void finish(Outcome outcome, const QString& message);

    DatasetSpec m_spec;
    Options m_options;
    QString m_dataDir;
    Outcome m_outcome = Outcome::NotStarted;
    QString m_error;
    std::atomic<bool> m_cancelRequested{false};
    std::unique_ptr<QLockFile> m_lock;
    QNetworkAccessManager* m_network = nullptr;
    QPointer<FileFetcher> m_fetcher;
    int m_index = -1;
    QList<qint64> m_fileDone, m_fileTotal;
};

} // namespace towers::app
