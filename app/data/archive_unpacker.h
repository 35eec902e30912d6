#pragma once
// Unpacks a downloaded .tar.gz with libarchive, refusing every entry that could write outside the
// destination or create anything but plain files and folders.
#include <QString>
#include <QStringList>
#include <atomic>

#include "engine/errors.h"

namespace towers::app {

// The archive itself is bad: damaged, not a gzip-compressed tar, or holding an entry that is
// refused (absolute path, a '..' component, a link, a device, ...). The message names the archive
// and the entry. Local write failures are plain engine::IoError instead.
class ArchiveError : public engine::IoError
{
public:
    using engine::IoError::IoError;
};

struct UnpackLimits
{
    qint64 maxBytes = qint64(16) << 30; // all files together, uncompressed
    qint64 maxEntries = 1'000'000;
};

struct UnpackResult
{
    QStringList files;      // relative paths of the regular files written, in archive order
    qint64 bytes = 0;       // their total size
    bool cancelled = false; // stopped early because *cancel became true
};

// Unpacks the gzip-compressed tar `archivePath` into the existing folder `destDir`. Entry paths
// are taken relative to destDir ('.' components dropped); an entry with an absolute path, a '..'
// component, or a type other than regular file or directory (symbolic or hard link, device,
// FIFO, socket) throws ArchiveError, as does a damaged archive or one past `limits`. Files are
// created with default permissions (the archive's modes and owners are ignored) and synced to
// disk. Failing to write throws engine::IoError naming the path and the OS reason. Whatever was
// written before an error stays in destDir: unpack into a scratch folder. `cancel` is polled
// between blocks.
UnpackResult unpackTarGz(const QString& archivePath, const QString& destDir,
                         const std::atomic<bool>* cancel = nullptr,
                         const UnpackLimits& limits = {});

} // namespace towers::app
