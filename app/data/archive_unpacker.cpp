#include "app/data/archive_unpacker.h"

#include <QFile>
#include <QFileInfo>
#include <archive.h>
#include <archive_entry.h>
#include <memory>
#include <vector>

#include "app/data/file_ops.h"

namespace towers::app {

namespace {

struct ArchiveCloser
{
    void operator()(archive* a) const { archive_read_free(a); }
};

QString typeName(mode_t type)
{
    switch (type) {
    case AE_IFLNK:
        return QStringLiteral("a symbolic link");
    case AE_IFCHR:
        return QStringLiteral("a character device");
    case AE_IFBLK:
        return QStringLiteral("a block device");
    case AE_IFIFO:
        return QStringLiteral("a FIFO");
    case AE_IFSOCK:
        return QStringLiteral("a socket");
    default:
        return QStringLiteral("an entry of unknown type");
    }
}

class Unpacker
{
public:
    Unpacker(const QString& archivePath, const QString& destDir, const std::atomic<bool>* cancel,
             const UnpackLimits& limits)
        : m_archivePath(archivePath), m_destDir(destDir), m_cancel(cancel), m_limits(limits),
          m_buffer(64 * 1024)
    {
    }

    UnpackResult run()
    {
        std::unique_ptr<archive, ArchiveCloser> a(archive_read_new());
        if (!a) throw engine::IoError("libarchive could not allocate a reader (out of memory)");
        m_archive = a.get();
        // Only what a .tar.gz can be: gzip around tar (ustar, pax or GNU).
        archive_read_support_filter_gzip(m_archive);
        archive_read_support_format_tar(m_archive);
        if (!QFileInfo(m_archivePath).isFile())
            throw engine::IoError(
                QStringLiteral("cannot read %1: no such file").arg(m_archivePath).toStdString());
        if (archive_read_open_filename(m_archive, QFile::encodeName(m_archivePath).constData(),
                                       m_buffer.size()) != ARCHIVE_OK)
            damaged(QStringLiteral("cannot be opened"));

        qint64 entries = 0;
        for (;;) {
            if (cancelled()) return std::move(m_result);
            archive_entry* entry = nullptr;
            const int r = archive_read_next_header(m_archive, &entry);
            if (r == ARCHIVE_EOF) break;
            if (r < ARCHIVE_WARN) damaged(QStringLiteral("is damaged"));
            if (++entries > m_limits.maxEntries)
                throw ArchiveError(QStringLiteral("the archive %1 holds more than %2 entries; "
                                                  "refusing to unpack it")
                                       .arg(m_archivePath)
                                       .arg(m_limits.maxEntries)
                                       .toStdString());
            unpackEntry(entry);
            if (m_result.cancelled) break;
        }
        if (entries == 0) damaged(QStringLiteral("holds no entries"));
        return std::move(m_result);
    }

private:
    bool cancelled()
    {
        if (m_cancel && m_cancel->load(std::memory_order_relaxed)) m_result.cancelled = true;
        return m_result.cancelled;
    }

    [[noreturn]] void damaged(const QString& what) const
    {
        const char* reason = archive_error_string(m_archive);
        throw ArchiveError(
            QStringLiteral("the archive %1 %2%3")
                .arg(m_archivePath, what,
                     reason ? QStringLiteral(": ") + QString::fromLocal8Bit(reason) : QString())
                .toStdString());
    }

    [[noreturn]] void refuse(const QString& entryName, const QString& why) const
    {
        throw ArchiveError(QStringLiteral("the archive %1 holds the entry '%2', which is %3; "
                                          "refusing to unpack it")
                               .arg(m_archivePath, entryName, why)
                               .toStdString());
    }

    // The entry's path relative to the destination, or an ArchiveError when it could escape.
    QString safeRelativePath(archive_entry* entry) const
    {
        const char* raw = archive_entry_pathname(entry);
        if (!raw) raw = archive_entry_pathname_utf8(entry);
        if (!raw) refuse(QStringLiteral("?"), QStringLiteral("a name that cannot be decoded"));
        const QString name = QFile::decodeName(raw);
        if (name.isEmpty()) refuse(name, QStringLiteral("an empty name"));
        if (name.startsWith(QLatin1Char('/'))) refuse(name, QStringLiteral("an absolute path"));
        QStringList kept;
        for (const QString& part : name.split(QLatin1Char('/'), Qt::SkipEmptyParts)) {
            if (part == QLatin1String(".."))
                refuse(name, QStringLiteral("a path with a '..' component"));
            if (part != QLatin1String(".")) kept << part;
        }
        return kept.join(QLatin1Char('/'));
    }

    void unpackEntry(archive_entry* entry)
    {
        const QString rel = safeRelativePath(entry);
        const QString shown = QFile::decodeName(archive_entry_pathname(entry));
        if (archive_entry_hardlink(entry)) refuse(shown, QStringLiteral("a hard link"));
        const mode_t type = archive_entry_filetype(entry);
        if (type == AE_IFDIR) {
            if (!rel.isEmpty()) makeFolder(m_destDir + QLatin1Char('/') + rel);
            return;
        }
        if (type != AE_IFREG) refuse(shown, typeName(type));
        if (rel.isEmpty()) refuse(shown, QStringLiteral("a file without a name"));
        writeFile(rel);
    }

    void writeFile(const QString& rel)
    {
        const QString path = m_destDir + QLatin1Char('/') + rel;
        makeFolder(QFileInfo(path).path());
        QFile out(path);
        if (!out.open(QIODevice::WriteOnly | QIODevice::Truncate))
            throw engine::IoError(
                QStringLiteral("cannot write %1: %2").arg(path, out.errorString()).toStdString());
        for (;;) {
            if (cancelled()) return;
            const la_ssize_t n = archive_read_data(m_archive, m_buffer.data(), m_buffer.size());
            if (n == 0) break;
            if (n < 0) damaged(QStringLiteral("is damaged at '%1'").arg(rel));
            m_result.bytes += n;
            if (m_result.bytes > m_limits.maxBytes)
                throw ArchiveError(QStringLiteral("the archive %1 unpacks to more than %2 bytes; "
                                                  "refusing to unpack it")
                                       .arg(m_archivePath)
                                       .arg(m_limits.maxBytes)
                                       .toStdString());
            writeAll(out, m_buffer.data(), n);
        }
        syncFile(out);
        m_result.files << rel;
    }

    QString m_archivePath, m_destDir;
    const std::atomic<bool>* m_cancel;
    UnpackLimits m_limits;
    std::vector<char> m_buffer;
    archive* m_archive = nullptr;
    UnpackResult m_result;
};

} // namespace

UnpackResult unpackTarGz(const QString& archivePath, const QString& destDir,
                         const std::atomic<bool>* cancel, const UnpackLimits& limits)
{
    return Unpacker(archivePath, destDir, cancel, limits).run();
}

} // namespace towers::app
