#pragma once
// A small HTTP/1.1 server on 127.0.0.1 for download tests: serves in-memory files and misbehaves
// on request. A request for /<behaviours>/<name> serves the file <name>, where <behaviours> is
// '+'-separated:
//   ok        plain service; honours "Range: bytes=N-" with 206 and Content-Range
//   norange   ignores Range, always 200 with the whole file
//   404       answers 404 Not Found
//   500       answers 500 Internal Server Error
//   truncate  a request from the file's start (no Range) announces the whole length but sends
//             only truncateAt bytes, then closes the connection; one that resumes (Range) is
//             served whole. So a client that resends its request by itself (Qt's network access
//             may, once, where a connection closed early) is cut short again, and only a resume
//             gets the file.
//   corrupt   flips one byte in the middle of the body
//   stall     sends the headers and stallAfter bytes, then sends nothing more, keeping the
//             connection open
//   nolength  sends no Content-Length: the body ends when the connection closes
//   redirect  answers 302 with Location /ok/<name>
//   loop      answers 302 with Location to itself
#include <QByteArray>
#include <QHash>
#include <QList>
#include <QObject>
#include <QSet>
#include <QTcpServer>
#include <QUrl>

class QTcpSocket;

namespace towers::test {

class HttpTestServer : public QObject
{
    Q_OBJECT
public:
    struct Request
    {
        QByteArray method, path;
        QHash<QByteArray, QByteArray> headers; // names in lower case
    };

    explicit HttpTestServer(QObject* parent = nullptr);
    ~HttpTestServer() override;

    // Listens on 127.0.0.1 on a free port; false when that fails.
    bool listen();
    quint16 port() const;
    // http://127.0.0.1:<port>/<behaviours>
    QUrl baseUrl(const QByteArray& behaviours) const;

    void setFile(const QByteArray& name, const QByteArray& content) { m_files[name] = content; }
    QByteArray file(const QByteArray& name) const { return m_files.value(name); }

    qint64 truncateAt = 100;
    qint64 stallAfter = 100;

    const QList<Request>& requests() const { return m_requests; }
    // The requests whose path ends with "/<name>".
    QList<Request> requestsFor(const QByteArray& name) const;
    void clearRequests() { m_requests.clear(); }

signals:
    void requestReceived();

private:
    void onNewConnection();
    void onReadyRead(QTcpSocket* socket);
    void respond(QTcpSocket* socket, const Request& request);
    static void sendSimple(QTcpSocket* socket, int code, const QByteArray& reason,
                           const QByteArray& extraHeaders = {});

    QTcpServer m_server;
    QHash<QByteArray, QByteArray> m_files;
    QHash<QTcpSocket*, QByteArray> m_buffers;
    QSet<QTcpSocket*> m_answered;
    QList<Request> m_requests;
};

} // namespace towers::test
