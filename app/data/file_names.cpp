#include "app/data/file_names.h"

#include <QFile>
#include <QStringDecoder>

#include <dirent.h>

namespace towers::app {

bool isUtf8(const QByteArray& bytes)
{
    QStringDecoder utf8(QStringDecoder::Utf8, QStringDecoder::Flag::Stateless);
    const QString text = utf8(bytes); // decoded here: the call itself only wraps the bytes
    return !utf8.hasError();
}

QString escapedName(const QByteArray& bytes)
{
    QString shown;
    for (qsizetype at = 0; at < bytes.size();) {
        const auto lead = static_cast<unsigned char>(bytes[at]);
        if (lead < 0x80) {
            shown += QLatin1Char(char(lead));
            ++at;
            continue;
        }
        // The sequence a lead byte announces (C2..F4; C0, C1 and F5.. begin none), kept when it
        // decodes; otherwise the lead byte alone is shown escaped and the next one looked at.
        const qsizetype length = lead < 0xc2   ? 0
                                 : lead < 0xe0 ? 2
                                 : lead < 0xf0 ? 3
                                 : lead < 0xf5 ? 4
                                               : 0;
        if (length > 0 && at + length <= bytes.size()) {
            const QByteArray sequence = bytes.mid(at, length);
            if (isUtf8(sequence)) {
                shown += QString::fromUtf8(sequence);
                at += length;
                continue;
            }
        }
        shown += QStringLiteral("\\x%1").arg(lead, 2, 16, QLatin1Char('0'));
        ++at;
    }
    return shown;
}

QStringList namesNotUtf8(const QString& dir)
{
    QStringList out;
    DIR* d = ::opendir(QFile::encodeName(dir).constData());
    if (!d) return out;
    while (const dirent* e = ::readdir(d)) {
        const QByteArray name(e->d_name);
        if (name.startsWith('.') || isUtf8(name)) continue;
        out << escapedName(name);
    }
    ::closedir(d);
    out.sort();
    return out;
}

} // namespace towers::app
