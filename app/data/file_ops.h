#pragma once
// File-system steps of a download (create, rename, remove, sync) that throw engine::IoError
// naming the path and the operating system's reason, so a full disk or an unwritable folder
// reads as such.
#include <QString>

class QFile;

namespace towers::app {

// Creates `path` and its missing parents.
void makeFolder(const QString& path);
// Removes `path` (a file, or a folder with everything in it) when it exists.
void removeAll(const QString& path);
// rename(2): atomic on one file system; replaces an existing file (not a non-empty folder).
void renamePath(const QString& from, const QString& to);
// Swaps `a` and `b` (both existing, on one file system) in one step (renameat2 RENAME_EXCHANGE),
// so that neither name is ever missing: true when done, false where the file system cannot
// (NFS, older kernels), nothing changed then; IoError for any other failure.
bool exchangePaths(const QString& a, const QString& b);
// Puts `fresh` in the place of `target` (both existing, on one file system) and the old `target`
// at `aside` (which must not exist): swapped in one step where the file system can (the name never
// lacks one), else `target` moved aside and `fresh` moved in, the old one put back where that
// fails (IoError then, `fresh` where it was). Once swapped, the replacement is done: where the old
// one cannot be moved to `aside` after all, it stays at `fresh`'s path and false is returned.
bool replacePath(const QString& fresh, const QString& target, const QString& aside);
// Writes all `size` bytes to `file`, retrying short writes so that a full disk reports its reason
// (ENOSPC) instead of a bare short count.
void writeAll(QFile& file, const char* data, qint64 size);
// Flushes `file` (open for writing) and asks the OS to put its bytes on disk.
void syncFile(QFile& file);
// Asks the OS to put a folder's entries (renames, new files) on disk; best effort.
void syncFolder(const QString& path);

} // namespace towers::app
