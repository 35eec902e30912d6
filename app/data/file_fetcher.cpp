#include "app/data/file_fetcher.h"

#include <QFile>
#include <QFileInfo>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QNetworkRequest>

#include <sys/stat.h>

#include "app/data/file_ops.h"
#include "engine/errors.h"

namespace towers::app {

namespace {

constexpr qint64 kChunk = 256 * 1024;
constexpr qint64 kReadBuffer = 4 * 1024 * 1024;
constexpr qint64 kProgressIntervalMs = 50;

QString megabytes(qint64 bytes)
{
    return QStringLiteral("%1 MB").arg(double(bytes) / 1e6, 0, 'f', 1);
}

// "bytes START-END/TOTAL" (TOTAL may be '*'): START, and TOTAL or -1. False when malformed.
bool parseContentRange(const QByteArray& value, qint64& start, qint64& total)
{
    const QByteArray v = value.trimmed();
    if (!v.startsWith("bytes ")) return false;
    const int dash = v.indexOf('-'), slash = v.indexOf('/');
    if (dash < 0 || slash < dash) return false;
    bool ok = false;
    start = v.mid(6, dash - 6).trimmed().toLongLong(&ok);
    if (!ok) return false;
    const QByteArray t = v.mid(slash + 1).trimmed();
    total = t == "*" ? -1 : t.toLongLong(&ok);
    return t == "*" || ok;
}

} // namespace

FileFetcher::FileFetcher(QNetworkAccessManager* network, Job job, QObject* parent)
    : QObject(parent), m_network(network), m_job(std::move(job))
{
    m_progressTimer.setSingleShot(true);
    m_progressTimer.setInterval(kProgressIntervalMs);
    connect(&m_progressTimer, &QTimer::timeout, this, &FileFetcher::emitProgress);
}

FileFetcher::~FileFetcher()
{
    dropReply();
}

void FileFetcher::start()
{
    QMetaObject::invokeMethod(this, &FileFetcher::begin, Qt::QueuedConnection);
}

void FileFetcher::cancel()
{
    if (m_result != Result::Running) return;
    finish(Result::Cancelled, QStringLiteral("cancelled"));
}

void FileFetcher::begin()
{
    if (m_result != Result::Running) return; // cancelled before it began
    try {
        if (checkExistingTarget()) {
            const qint64 size = QFileInfo(m_job.target).size();
            emit progress(size, size);
            finish(Result::Succeeded);
            return;
        }
        checkLocalSource();
        openPart();
        sendRequest();
    } catch (const engine::Error& e) {
        finish(Result::Failed, QString::fromStdString(e.what()));
    }
}

void FileFetcher::checkLocalSource() const
{
    // A file:// mirror's file is opened by Qt in this thread: a FIFO there would block it (and
    // the signals that stop it) until something writes, a device would never end. Plain files
    // only, as a web server serves them.
    if (!m_job.url.isLocalFile()) return;
    const QString path = m_job.url.toLocalFile();
    struct stat st = {};
    if (::stat(QFile::encodeName(path).constData(), &st) != 0) return; // Qt says why it fails
    if (S_ISREG(st.st_mode)) return;
    const QString kind = S_ISFIFO(st.st_mode)   ? QStringLiteral("a FIFO (named pipe)")
                         : S_ISDIR(st.st_mode)  ? QStringLiteral("a folder")
                         : S_ISSOCK(st.st_mode) ? QStringLiteral("a socket")
                                                : QStringLiteral("a device");
    throw engine::IoError(
        QStringLiteral("%1 is %2, not a file: a mirror holds the dataset's files as plain files")
            .arg(path, kind)
            .toStdString());
}

bool FileFetcher::checkExistingTarget()
{
    QFile existing(m_job.target);
    if (!existing.exists()) return false;
    if (!existing.open(QIODevice::ReadOnly))
        throw engine::IoError(QStringLiteral("cannot read %1: %2")
                                  .arg(m_job.target, existing.errorString())
                                  .toStdString());
    QCryptographicHash hash(QCryptographicHash::Md5);
    if (!hash.addData(&existing))
        throw engine::IoError(QStringLiteral("cannot read %1: %2")
                                  .arg(m_job.target, existing.errorString())
                                  .toStdString());
    existing.close();
    if (hash.result().toHex() == m_job.md5) return true;
    emit statusMessage(QStringLiteral("%1 is there from an earlier attempt but its checksum "
                                      "differs; downloading it again")
                           .arg(QFileInfo(m_job.target).fileName()));
    removeAll(m_job.target);
    return false;
}

void FileFetcher::openPart()
{
    const QString path = partPath();
    const QString name = QFileInfo(m_job.target).fileName();
    m_part.setFileName(path);
    m_offset = QFileInfo(path).isFile() ? QFileInfo(path).size() : 0;
    m_hash.reset();
    if (m_offset > 0 && m_job.sizeHint > 0 && m_offset > m_job.sizeHint) {
        emit statusMessage(QStringLiteral("%1: the partial file is larger than the whole file "
                                          "should be; downloading it from the start")
                               .arg(name));
        m_offset = 0;
    }
    if (m_offset > 0) {
        // The MD5 covers the whole file, so the bytes already here are hashed first.
        if (!m_part.open(QIODevice::ReadOnly) || !m_hash.addData(&m_part))
            throw engine::IoError(
                QStringLiteral("cannot read %1: %2").arg(path, m_part.errorString()).toStdString());
        m_part.close();
    }
    // Unbuffered: a full disk shows up at the write that hits it, not at a later flush.
    const QIODevice::OpenMode mode = QIODevice::WriteOnly | QIODevice::Unbuffered |
                                     (m_offset > 0 ? QIODevice::Append : QIODevice::Truncate);
    if (!m_part.open(mode))
        throw engine::IoError(
            QStringLiteral("cannot write %1: %2").arg(path, m_part.errorString()).toStdString());
    if (m_offset > 0)
        emit statusMessage(QStringLiteral("resuming %1 at %2").arg(name, megabytes(m_offset)));
}

void FileFetcher::sendRequest()
{
    QNetworkRequest request(m_job.url);
    request.setHeader(QNetworkRequest::UserAgentHeader, m_job.userAgent);
    // The published bytes, not a re-encoding: the MD5 and byte ranges refer to them (and Qt
    // would otherwise inflate a .gz served with Content-Encoding: gzip).
    request.setRawHeader("Accept-Encoding", "identity");
    // Follow redirects, but never from HTTPS to plain HTTP.
    request.setAttribute(QNetworkRequest::RedirectPolicyAttribute,
                         QNetworkRequest::NoLessSafeRedirectPolicy);
    request.setMaximumRedirectsAllowed(m_job.maxRedirects);
    request.setTransferTimeout(m_job.transferTimeoutMs);
    if (m_offset > 0) request.setRawHeader("Range", "bytes=" + QByteArray::number(m_offset) + "-");
    m_accepted = false;
    m_totalKnown = false;
    m_received = 0;
    m_total = m_job.sizeHint;
    m_reply = m_network->get(request);
    // Back-pressure: without a bound Qt buffers as fast as the network delivers, which is
    // hundreds of MB from a fast mirror.
    m_reply->setReadBufferSize(kReadBuffer);
    connect(m_reply, &QNetworkReply::readyRead, this, &FileFetcher::onReadyRead);
    connect(m_reply, &QNetworkReply::finished, this, &FileFetcher::onReplyFinished);
    emit progress(m_offset, m_total);
}

FileFetcher::Answer FileFetcher::acceptResponse()
{
    const QVariant status = m_reply->attribute(QNetworkRequest::HttpStatusCodeAttribute);
    const QVariant lengthHeader = m_reply->header(QNetworkRequest::ContentLengthHeader);
    const qint64 length = lengthHeader.isValid() ? lengthHeader.toLongLong() : -1;
    // No status: not HTTP (file://), which always sends the whole file.
    const int code = status.isValid() ? status.toInt() : 200;
    if (code == 200) {
        if (m_offset > 0) {
            emit statusMessage(QStringLiteral("%1: the server does not resume downloads; "
                                              "downloading it from the start")
                                   .arg(QFileInfo(m_job.target).fileName()));
            if (!m_part.resize(0))
                throw engine::IoError(QStringLiteral("cannot write %1: %2")
                                          .arg(partPath(), m_part.errorString())
                                          .toStdString());
            m_hash.reset();
            m_offset = 0;
        }
        m_totalKnown = length >= 0;
        m_total = m_totalKnown ? length : m_job.sizeHint;
        m_accepted = true;
        return Answer::Write;
    }
    if (code == 206) {
        qint64 start = -1, total = -1;
        if (!parseContentRange(m_reply->rawHeader("Content-Range"), start, total) ||
            start != m_offset) {
            restartFromZero(QStringLiteral("the server sent another byte range than asked for"));
            return Answer::Restarted;
        }
        m_total = total >= 0 ? total : (length >= 0 ? m_offset + length : -1);
        m_totalKnown = m_total >= 0;
        m_accepted = true;
        return Answer::Write;
    }
    // Errors, 416 and refused redirects are handled when the reply finishes; their bodies are
    // not the file.
    return Answer::Discard;
}

void FileFetcher::onReadyRead()
{
    if (!m_reply || m_result != Result::Running) return;
    try {
        if (!m_accepted) {
            const Answer answer = acceptResponse();
            if (answer == Answer::Restarted) return;
            if (answer == Answer::Discard) {
                m_reply->readAll();
                return;
            }
        }
        while (m_reply->bytesAvailable() > 0) {
            const QByteArray chunk = m_reply->read(kChunk);
            writeAll(m_part, chunk.constData(), chunk.size());
            m_hash.addData(chunk);
            m_received += chunk.size();
        }
    } catch (const engine::Error& e) {
        finish(Result::Failed, QString::fromStdString(e.what()));
        return;
    }
    if (!m_progressTimer.isActive()) m_progressTimer.start();
}

void FileFetcher::emitProgress()
{
    if (m_result == Result::Running) emit progress(m_offset + m_received, m_total);
}

void FileFetcher::onReplyFinished()
{
    QNetworkReply* reply = m_reply;
    if (!reply || m_result != Result::Running) return;
    // Whatever arrived with the end of the reply is written before the reply goes.
    if (reply->bytesAvailable() > 0) onReadyRead();
    if (m_result != Result::Running || m_reply != reply) return;
    m_reply = nullptr;
    reply->deleteLater();

    const QVariant status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute);
    const int code = status.isValid() ? status.toInt() : 0;
    try {
        if (code == 416 && m_offset > 0) {
            // The partial file may be whole already (a run stopped between the last byte and
            // the rename); the MD5 says whether it is.
            if (m_hash.result().toHex() == m_job.md5) {
                m_total = m_offset;
                complete();
            } else {
                restartFromZero(QStringLiteral("the server refused the range of the partial file"));
            }
            return;
        }
        if (reply->error() != QNetworkReply::NoError || code >= 300) {
            finish(Result::Failed, describeFailure(reply, code));
            return;
        }
        if (!m_accepted) { // an empty body: readyRead never came
            const Answer answer = acceptResponse();
            if (answer == Answer::Restarted) return;
            if (answer == Answer::Discard) {
                finish(Result::Failed, QStringLiteral("unexpected answer HTTP %1 from %2")
                                           .arg(code)
                                           .arg(m_job.url.toDisplayString()));
                return;
            }
        }
        // Only the server's own length tells a cut transfer; the size hint may be off.
        const qint64 have = m_offset + m_received;
        if (m_totalKnown && have != m_total) {
            finish(Result::Failed,
                   QStringLiteral("the download of %1 ended after %2 of %3 bytes; the partial file "
                                  "is kept and the next attempt resumes it")
                       .arg(m_job.url.toDisplayString())
                       .arg(have)
                       .arg(m_total));
            return;
        }
        m_total = have;
        complete();
    } catch (const engine::Error& e) {
        finish(Result::Failed, QString::fromStdString(e.what()));
    }
}

QString FileFetcher::describeFailure(QNetworkReply* reply, int code) const
{
    const QString url = m_job.url.toDisplayString();
    QString where = url;
    if (reply->url().isValid() && reply->url() != m_job.url)
        where += QStringLiteral(" (redirected to %1)").arg(reply->url().toDisplayString());
    switch (reply->error()) {
    case QNetworkReply::InsecureRedirectError:
        return QStringLiteral("refusing the redirect from %1 to %2: it leaves HTTPS")
            .arg(url, reply->attribute(QNetworkRequest::RedirectionTargetAttribute)
                          .toUrl()
                          .toDisplayString());
    case QNetworkReply::TooManyRedirectsError:
        return QStringLiteral("too many redirects (more than %1) from %2")
            .arg(m_job.maxRedirects)
            .arg(url);
    default:
        break;
    }
    if (code >= 300) {
        const QString reason =
            reply->attribute(QNetworkRequest::HttpReasonPhraseAttribute).toString();
        return QStringLiteral("HTTP %1%2 from %3")
            .arg(code)
            .arg(reason.isEmpty() ? QString() : QLatin1Char(' ') + reason, where);
    }
    const qint64 have = m_offset + m_received;
    const QString kept =
        have > 0 ? QStringLiteral("; the %1 bytes received are kept and the next attempt resumes")
                       .arg(have)
                 : QString();
    if (reply->error() == QNetworkReply::RemoteHostClosedError && m_totalKnown && have < m_total)
        return QStringLiteral(
                   "the download of %1 ended after %2 of %3 bytes (the server closed the "
                   "connection)%4")
            .arg(where)
            .arg(have)
            .arg(m_total)
            .arg(kept);
    // Our own aborts disconnect first, so an abort seen here is Qt's transfer timeout.
    if (reply->error() == QNetworkReply::OperationCanceledError ||
        reply->error() == QNetworkReply::TimeoutError)
        return QStringLiteral("no data from %1 for %2 s; gave up%3")
            .arg(where)
            .arg(m_job.transferTimeoutMs / 1000.0)
            .arg(kept);
    return QStringLiteral("cannot download %1: %2%3").arg(where, reply->errorString(), kept);
}

void FileFetcher::restartFromZero(const QString& why)
{
    dropReply();
    const QString name = QFileInfo(m_job.target).fileName();
    if (m_restarted) {
        finish(Result::Failed, QStringLiteral("%1: %2, again after starting over; giving up")
                                   .arg(m_job.url.toDisplayString(), why));
        return;
    }
    m_restarted = true;
    emit statusMessage(QStringLiteral("%1: %2; downloading it from the start").arg(name, why));
    if (!m_part.resize(0))
        throw engine::IoError(QStringLiteral("cannot write %1: %2")
                                  .arg(partPath(), m_part.errorString())
                                  .toStdString());
    m_hash.reset();
    m_offset = 0;
    sendRequest();
}

void FileFetcher::complete()
{
    emit progress(m_total, m_total);
    syncFile(m_part);
    m_part.close();
    const QByteArray got = m_hash.result().toHex();
    if (got != m_job.md5) {
        const bool removed = QFile::remove(partPath());
        finish(Result::Failed,
               QStringLiteral("checksum mismatch for %1 (from %2): expected MD5 %3, got %4; %5")
                   .arg(QFileInfo(m_job.target).fileName(), m_job.url.toDisplayString(),
                        QString::fromLatin1(m_job.md5), QString::fromLatin1(got),
                        removed
                            ? QStringLiteral("the bad file was deleted")
                            : QStringLiteral("could not delete the bad file %1").arg(partPath())));
        return;
    }
    renamePath(partPath(), m_job.target);
    finish(Result::Succeeded);
}

void FileFetcher::finish(Result result, const QString& error)
{
    if (m_result != Result::Running) return;
    m_result = result;
    m_error = error;
    m_progressTimer.stop();
    dropReply();
    if (m_part.isOpen()) m_part.close();
    emit finished();
}

void FileFetcher::dropReply()
{
    if (!m_reply) return;
    QNetworkReply* reply = m_reply;
    m_reply = nullptr;
    reply->disconnect(this);
    reply->abort();
    reply->deleteLater();
}

} // namespace towers::app
