#include "http_test_server.h"

#include <QHostAddress>
#include <QTcpSocket>

namespace towers::test {

HttpTestServer::HttpTestServer(QObject* parent) : QObject(parent)
{
    connect(&m_server, &QTcpServer::newConnection, this, &HttpTestServer::onNewConnection);
}

HttpTestServer::~HttpTestServer()
{
    // Stalled connections are still open: close them before the server goes.
    const auto sockets = m_buffers.keys();
    for (QTcpSocket* s : sockets) {
        s->disconnect(this);
        s->abort();
    }
}

bool HttpTestServer::listen()
{
    return m_server.listen(QHostAddress::LocalHost, 0);
}

quint16 HttpTestServer::port() const
{
    return m_server.serverPort();
}

QUrl HttpTestServer::baseUrl(const QByteArray& behaviours) const
{
    return QUrl(
        QStringLiteral("http://127.0.0.1:%1/%2").arg(port()).arg(QString::fromLatin1(behaviours)));
}

QList<HttpTestServer::Request> HttpTestServer::requestsFor(const QByteArray& name) const
{
    QList<Request> out;
    for (const auto& r : m_requests)
        if (r.path.endsWith('/' + name)) out << r;
    return out;
}

void HttpTestServer::onNewConnection()
{
    while (QTcpSocket* socket = m_server.nextPendingConnection()) {
        socket->setParent(this);
        m_buffers.insert(socket, {});
        connect(socket, &QTcpSocket::readyRead, this, [this, socket] { onReadyRead(socket); });
        connect(socket, &QTcpSocket::disconnected, this, [this, socket] {
            m_buffers.remove(socket);
            m_answered.remove(socket);
            socket->deleteLater();
        });
    }
}

void HttpTestServer::onReadyRead(QTcpSocket* socket)
{
    // One request per connection (every answer says "Connection: close"): a client that reuses
    // the connection before it sees the close gets no answer and must retry on a new one, as
    // with any server that closes idle connections.
    if (m_answered.contains(socket)) {
        socket->readAll();
        return;
    }
    QByteArray& buffer = m_buffers[socket];
    buffer += socket->readAll();
    const int end = buffer.indexOf("\r\n\r\n");
    if (end < 0) return;
    const QList<QByteArray> lines = buffer.left(end).split('\n');
    buffer.clear();
    Request request;
    const QList<QByteArray> first = lines.value(0).trimmed().split(' ');
    request.method = first.value(0);
    request.path = first.value(1);
    for (int i = 1; i < lines.size(); ++i) {
        const int colon = lines[i].indexOf(':');
        if (colon > 0)
            request.headers.insert(lines[i].left(colon).trimmed().toLower(),
                                   lines[i].mid(colon + 1).trimmed());
    }
    m_requests << request;
    m_answered.insert(socket);
    respond(socket, request);
    emit requestReceived();
}

void HttpTestServer::sendSimple(QTcpSocket* socket, int code, const QByteArray& reason,
                                const QByteArray& extraHeaders)
{
    const QByteArray body = reason + '\n';
    socket->write("HTTP/1.1 " + QByteArray::number(code) + ' ' + reason + "\r\n" + extraHeaders +
                  "Content-Type: text/plain\r\nContent-Length: " + QByteArray::number(body.size()) +
                  "\r\nConnection: close\r\n\r\n" + body);
    socket->disconnectFromHost();
}

void HttpTestServer::respond(QTcpSocket* socket, const Request& request)
{
    // /<behaviours>/<name>
    const QList<QByteArray> parts = request.path.split('/');
    if (parts.size() != 3 || !parts[0].isEmpty()) {
        sendSimple(socket, 400, "Bad Request");
        return;
    }
    const QList<QByteArray> behaviours = parts[1].split('+');
    const QByteArray name = parts[2];
    const auto has = [&](const char* b) { return behaviours.contains(QByteArray(b)); };
    if (has("404") || !m_files.contains(name)) {
        sendSimple(socket, 404, "Not Found");
        return;
    }
    if (has("500")) {
        sendSimple(socket, 500, "Internal Server Error");
        return;
    }
    const QByteArray origin = "http://127.0.0.1:" + QByteArray::number(port());
    if (has("redirect")) {
        sendSimple(socket, 302, "Found", "Location: " + origin + "/ok/" + name + "\r\n");
        return;
    }
    if (has("loop")) {
        sendSimple(socket, 302, "Found", "Location: " + origin + request.path + "\r\n");
        return;
    }

    QByteArray content = m_files.value(name);
    if (has("corrupt") && !content.isEmpty())
        content[content.size() / 2] = char(content[content.size() / 2] ^ 0xff);
    const qint64 size = content.size();
    qint64 start = 0;
    const QByteArray range = request.headers.value("range");
    if (!range.isEmpty() && !has("norange") && range.startsWith("bytes=") && range.endsWith('-')) {
        bool ok = false;
        start = range.mid(6, range.size() - 7).toLongLong(&ok);
        if (!ok || start < 0) start = 0;
        if (start >= size) {
            sendSimple(socket, 416, "Range Not Satisfiable",
                       "Content-Range: bytes */" + QByteArray::number(size) + "\r\n");
            return;
        }
    } else {
        start = 0;
    }
    const QByteArray body = content.mid(start);
    QByteArray head = start > 0 ? QByteArray("HTTP/1.1 206 Partial Content\r\n")
                                : QByteArray("HTTP/1.1 200 OK\r\n");
    if (start > 0)
        head += "Content-Range: bytes " + QByteArray::number(start) + '-' +
                QByteArray::number(size - 1) + '/' + QByteArray::number(size) + "\r\n";
    head += "Content-Type: application/octet-stream\r\nAccept-Ranges: bytes\r\n";
    if (!has("nolength")) head += "Content-Length: " + QByteArray::number(body.size()) + "\r\n";
    head += "Connection: close\r\n\r\n";

    if (has("stall")) {
        socket->write(head + body.left(stallAfter));
        return; // the connection stays open and silent
    }
    if (has("truncate") && start == 0) {
        socket->write(head + body.left(truncateAt));
        socket->disconnectFromHost();
        return;
    }
    socket->write(head + body);
    socket->disconnectFromHost();
}

} // namespace towers::test
