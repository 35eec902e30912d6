#pragma once
// Builds test archives in memory with libarchive: .tar.gz files with any entries (including the
// hostile ones an unpacker must refuse) and single-file .gz.
#include <QByteArray>
#include <QList>

namespace towers::test {

struct TarEntry
{
    enum Kind
    {
        File,
        Dir,
        Symlink,
        Hardlink,
        Fifo
    };
    QByteArray path; // written as given: no cleaning, so "../x" and "/x" stay hostile
    QByteArray data; // File only
    Kind kind = File;
    QByteArray target; // Symlink and Hardlink
};

// A gzip-compressed pax tar of `entries`, in order.
QByteArray makeTarGz(const QList<TarEntry>& entries);
// `data` gzip-compressed (a .gz file as the MNIST mirrors publish them).
QByteArray gzipBytes(const QByteArray& data);

} // namespace towers::test
