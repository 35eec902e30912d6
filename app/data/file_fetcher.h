#pragma once
// Fetches one file over HTTP(S) (or file://) into a local path, verifying its MD5 as the bytes
// stream in and resuming an earlier partial download with a Range request.
#include <QCryptographicHash>
#include <QFile>
#include <QObject>
#include <QPointer>
#include <QTimer>
#include <QUrl>

class QNetworkAccessManager;
class QNetworkReply;

namespace towers::app {

class FileFetcher : public QObject
{
    Q_OBJECT
public:
    struct Job
    {
        QUrl url;
        QString target;       // final path; bytes arrive in target + ".part" first
        QByteArray md5;       // expected MD5, lowercase hex
        qint64 sizeHint = -1; // expected size when known (progress only), else -1
        QByteArray userAgent;
        int transferTimeoutMs = 30000; // abort when no byte moves for this long
        int maxRedirects = 8;
    };
    enum class Result
    {
        Running,
        Succeeded,
        Failed,
        Cancelled
    };
    Q_ENUM(Result)

    // `network` must live in this object's thread and outlive the fetch.
    FileFetcher(QNetworkAccessManager* network, Job job, QObject* parent = nullptr);
    ~FileFetcher() override;

    // Starts the fetch; always finishes asynchronously (finished() is never emitted from here).
    // A complete target from an earlier run is checked against the MD5 and kept when it matches.
    // A non-empty target.part is resumed with "Range: bytes=N-": a 206 answer appends to it, a 200
    // answer starts it over. On success target.part is synced and renamed to target. A checksum
    // mismatch deletes the bad file; any other failure keeps target.part for the next attempt.
    void start();
    // Stops the transfer, keeps target.part, and finishes with Result::Cancelled.
    void cancel();

    Result result() const { return m_result; }
    QString errorMessage() const { return m_error; }
    const Job& job() const { return m_job; }

signals:
    // done: bytes of the file present so far (resumed bytes included); total: -1 when unknown.
    void progress(qint64 done, qint64 total);
    // A line worth showing: "resuming X at 12.3 MB", "the server does not resume; ...".
    void statusMessage(const QString& text);
    void finished();

private:
    enum class Answer
    {
        Write,
        Discard,
        Restarted
    };

    void begin();
    bool checkExistingTarget();
    // A file:// source that is no plain file (a FIFO would block): IoError naming it.
    void checkLocalSource() const;
    void openPart();
    void sendRequest();
    Answer acceptResponse();
    QString describeFailure(QNetworkReply* reply, int code) const;
    void onReadyRead();
    void onReplyFinished();
    void restartFromZero(const QString& why);
    void emitProgress();
    void complete();
    void finish(Result result, const QString& error = {});
    void dropReply();
    QString partPath() const { return m_job.target + QStringLiteral(".part"); }

    QNetworkAccessManager* m_network;
    Job m_job;
    QPointer<QNetworkReply> m_reply;
    QFile m_part;
    QCryptographicHash m_hash{QCryptographicHash::Md5};
    qint64 m_offset = 0;       // bytes of .part present before this request
    qint64 m_received = 0;     // bytes written by this request
    qint64 m_total = -1;       // whole-file size: the server's, else the hint, else -1
    bool m_totalKnown = false; // m_total comes from the server
    QTimer m_progressTimer;    // coalesces progress to a few signals a second
    bool m_accepted = false;
    bool m_restarted = false; // started over once already (guards against loops)
    Result m_result = Result::Running;
    QString m_error;
};

} // namespace towers::app
