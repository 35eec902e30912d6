#include "app/data/file_ops.h"

#include <QFile>
#include <cerrno>
#include <cstdio> // renameat2
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <system_error>
#include <unistd.h>

#include "engine/errors.h"

namespace towers::app {

namespace {

std::filesystem::path fsPath(const QString& path)
{
    return std::filesystem::path(QFile::encodeName(path).toStdString());
}

[[noreturn]] void fail(const QString& what, const std::error_code& ec)
{
    throw engine::IoError(
        (what + QStringLiteral(": ") + QString::fromLocal8Bit(ec.message().c_str())).toStdString());
}

} // namespace

void makeFolder(const QString& path)
{
    std::error_code ec;
    std::filesystem::create_directories(fsPath(path), ec);
    if (ec) fail(QStringLiteral("cannot create the folder %1").arg(path), ec);
}

void removeAll(const QString& path)
{
    std::error_code ec;
    std::filesystem::remove_all(fsPath(path), ec);
    if (ec) fail(QStringLiteral("cannot remove %1").arg(path), ec);
}

void renamePath(const QString& from, const QString& to)
{
    std::error_code ec;
    std::filesystem::rename(fsPath(from), fsPath(to), ec);
    if (ec) fail(QStringLiteral("cannot rename %1 to %2").arg(from, to), ec);
}

bool exchangePaths(const QString& a, const QString& b)
{
    if (::renameat2(AT_FDCWD, QFile::encodeName(a).constData(), AT_FDCWD,
                    QFile::encodeName(b).constData(), RENAME_EXCHANGE) == 0)
        return true;
    const int e = errno;
    if (e == EINVAL || e == ENOSYS || e == ENOTSUP || e == EOPNOTSUPP) return false;
    fail(QStringLiteral("cannot swap %1 and %2").arg(a, b),
         std::error_code(e, std::generic_category()));
}

bool replacePath(const QString& fresh, const QString& target, const QString& aside)
{
    if (exchangePaths(fresh, target)) {
        try {
            renamePath(fresh, aside);
        } catch (const engine::IoError&) {
            return false;
        }
        return true;
    }
    renamePath(target, aside);
    try {
        renamePath(fresh, target);
    } catch (const engine::IoError&) {
        try {
            renamePath(aside, target); // the old one back in place
        } catch (const engine::IoError&) {
        }
        throw;
    }
    return true;
}

void writeAll(QFile& file, const char* data, qint64 size)
{
    qint64 done = 0;
    while (done < size) {
        const qint64 n = file.write(data + done, size - done);
        if (n <= 0)
            throw engine::IoError(QStringLiteral("cannot write %1: %2")
                                      .arg(file.fileName(), file.errorString())
                                      .toStdString());
        done += n;
    }
}

void syncFile(QFile& file)
{
    if (!file.flush())
        throw engine::IoError(QStringLiteral("cannot write %1: %2")
                                  .arg(file.fileName(), file.errorString())
                                  .toStdString());
    if (::fsync(file.handle()) != 0)
        fail(QStringLiteral("cannot write %1").arg(file.fileName()),
             std::error_code(errno, std::generic_category()));
}

void syncFolder(const QString& path)
{
    // Only makes a finished rename durable; a failure here loses nothing that is not on disk
    // already, so it is not reported.
    const int fd = ::open(QFile::encodeName(path).constData(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    ::fsync(fd);
    ::close(fd);
}

} // namespace towers::app
