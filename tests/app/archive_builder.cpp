#include "archive_builder.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdexcept>

namespace towers::test {

namespace {

la_ssize_t appendTo(archive*, void* client, const void* buffer, size_t length)
{
    static_cast<QByteArray*>(client)->append(static_cast<const char*>(buffer), qsizetype(length));
    return la_ssize_t(length);
}

void check(archive* a, int r)
{
    if (r < ARCHIVE_WARN)
        throw std::runtime_error(std::string("libarchive: ") + archive_error_string(a));
}

QByteArray write(const QList<TarEntry>& entries, bool raw)
{
    QByteArray out;
    archive* a = archive_write_new();
    check(a, archive_write_add_filter_gzip(a));
    check(a, raw ? archive_write_set_format_raw(a) : archive_write_set_format_pax_restricted(a));
    check(a, archive_write_open(a, &out, nullptr, appendTo, nullptr));
    for (const auto& e : entries) {
        archive_entry* entry = archive_entry_new();
        archive_entry_set_pathname(entry, e.path.constData());
        archive_entry_set_perm(entry, e.kind == TarEntry::Dir ? 0755 : 0644);
        archive_entry_set_mtime(entry, 1700000000, 0);
        switch (e.kind) {
        case TarEntry::File:
            archive_entry_set_filetype(entry, AE_IFREG);
            archive_entry_set_size(entry, e.data.size());
            break;
        case TarEntry::Dir:
            archive_entry_set_filetype(entry, AE_IFDIR);
            break;
        case TarEntry::Symlink:
            archive_entry_set_filetype(entry, AE_IFLNK);
            archive_entry_set_symlink(entry, e.target.constData());
            break;
        case TarEntry::Hardlink:
            archive_entry_set_filetype(entry, AE_IFREG);
            archive_entry_set_hardlink(entry, e.target.constData());
            break;
        case TarEntry::Fifo:
            archive_entry_set_filetype(entry, AE_IFIFO);
            break;
        }
        check(a, archive_write_header(a, entry));
        if (e.kind == TarEntry::File && !e.data.isEmpty())
            if (archive_write_data(a, e.data.constData(), size_t(e.data.size())) != e.data.size())
                check(a, ARCHIVE_FATAL);
        archive_entry_free(entry);
    }
    check(a, archive_write_close(a));
    archive_write_free(a);
    return out;
}

} // namespace

QByteArray makeTarGz(const QList<TarEntry>& entries)
{
    return write(entries, false);
}

QByteArray gzipBytes(const QByteArray& data)
{
    return write({{"data", data, TarEntry::File, {}}}, true);
}

} // namespace towers::test
