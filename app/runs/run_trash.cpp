#include "app/runs/run_trash.h"

#include <QByteArray>
#include <QDateTime>
#include <QDir>
#include <QDirIterator>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QStandardPaths>
#include <QUrl>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/errors.h"
#include "engine/train/run_lock.h"
#include "engine/train/train_config.h"

namespace towers::app {

namespace {

// Qt's QFile::moveToTrash is not used: Debian 12's Qt 6.4 moves the file into the *current
// directory* ("./files/NAME") when it cannot settle on a trash directory. The freedesktop.org
// trash specification (1.0) is short; what follows is its home trash and its per-volume
// $topdir/.Trash/$uid and $topdir/.Trash-$uid trashes, by rename only, so nothing is ever copied
// or half-moved.

QString errnoText(int e)
{
    return QString::fromLocal8Bit(std::strerror(e));
}

std::optional<struct stat> lstatOf(const QString& path)
{
    struct stat st
    {
    };
    if (::lstat(QFile::encodeName(path).constData(), &st) != 0) return std::nullopt;
    return st;
}

// A trash directory we may use: a real directory (not a link) of this user's; made (0700) when
// missing and `create`.
bool usableTrash(const QString& dir, bool create)
{
    auto st = lstatOf(dir);
    if (!st && create && ::mkdir(QFile::encodeName(dir).constData(), 0700) == 0) st = lstatOf(dir);
    return st && S_ISDIR(st->st_mode) && st->st_uid == ::getuid();
}

// The mount point of the file system that holds `path`: the highest folder above it on its device.
QString topDirOf(const QString& path, dev_t device)
{
    QString top = path;
    for (QString up = QFileInfo(top).absolutePath(); up != top;
         up = QFileInfo(top).absolutePath()) {
        const auto st = lstatOf(up);
        if (!st || st->st_dev != device) break;
        top = up;
    }
    return top;
}

// The trash directory for a file on `device`: the home trash when it is on the home trash's file
// system, else the volume's own ($topdir/.Trash/$uid when an administrator made $topdir/.Trash,
// sticky and not a link; else $topdir/.Trash-$uid), with `top` set to $topdir (its records' paths
// are relative to it; left empty for the home trash). Empty with `why` set when there is none.
QString trashFor(const QString& path, dev_t device, QString& top, QString& why)
{
    top.clear();
    const QString dataHome = QStandardPaths::writableLocation(QStandardPaths::GenericDataLocation);
    if (!dataHome.isEmpty() && QDir().mkpath(dataHome)) {
        const QString home = dataHome + QStringLiteral("/Trash");
        const auto st = lstatOf(dataHome);
        if (st && st->st_dev == device) {
            if (QDir().mkpath(home) && usableTrash(home, false)) return home;
            why = QStringLiteral("the trash %1 is not a folder of yours").arg(home);
            return {};
        }
    }
    top = topDirOf(path, device);
    const QString uid = QString::number(::getuid());
    const QString shared = top + QStringLiteral("/.Trash");
    if (const auto st = lstatOf(shared); st && S_ISDIR(st->st_mode) && (st->st_mode & S_ISVTX)) {
        const QString mine = shared + QLatin1Char('/') + uid;
        if (usableTrash(mine, true)) return mine;
    }
    const QString own = top + QStringLiteral("/.Trash-") + uid;
    if (usableTrash(own, true)) return own;
    why = QStringLiteral("its file system (mounted at %1) has no trash this user can use, and the "
                         "home trash is on another one")
              .arg(top);
    return {};
}

// Moves `path` (absolute, existing) into the trash; its new path, or empty with `why` set.
QString moveToTrash(const QString& path, QString& why)
{
    const auto st = lstatOf(path);
    if (!st) {
        why = errnoText(errno);
        return {};
    }
    QString top;
    const QString trash = trashFor(path, st->st_dev, top, why);
    if (trash.isEmpty()) return {};
    const QString files = trash + QStringLiteral("/files"), info = trash + QStringLiteral("/info");
    if (!QDir().mkpath(files) || !QDir().mkpath(info)) {
        why = QStringLiteral("cannot make %1/files and info").arg(trash);
        return {};
    }
    const QString inTrash = top.isEmpty() ? path : QDir(top).relativeFilePath(path);
    const QByteArray record =
        "[Trash Info]\nPath=" + QUrl::toPercentEncoding(inTrash, "/") + "\nDeletionDate=" +
        QDateTime::currentDateTime().toString(QStringLiteral("yyyy-MM-ddThh:mm:ss")).toLatin1() +
        "\n";
    const QString base = QFileInfo(path).fileName();
    for (int n = 1; n < 10000; ++n) {
        const QString name = n == 1 ? base : QStringLiteral("%1.%2").arg(base).arg(n);
        // The .trashinfo file first, made exclusively: it reserves the name.
        const QString infoFile = info + QLatin1Char('/') + name + QStringLiteral(".trashinfo");
        const int fd = ::open(QFile::encodeName(infoFile).constData(),
                              O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) {
            if (errno == EEXIST) continue;
            why = QStringLiteral("cannot write %1: %2").arg(infoFile, errnoText(errno));
            return {};
        }
        const bool written =
            ::write(fd, record.constData(), std::size_t(record.size())) == ssize_t(record.size()) &&
            ::fsync(fd) == 0;
        const int writeErrno = errno;
        ::close(fd);
        const QByteArray infoName = QFile::encodeName(infoFile);
        if (!written) {
            ::unlink(infoName.constData());
            why = QStringLiteral("cannot write %1: %2").arg(infoFile, errnoText(writeErrno));
            return {};
        }
        const QString target = files + QLatin1Char('/') + name;
        // Never onto something there (a rename would replace an empty folder).
        if (::renameat2(AT_FDCWD, QFile::encodeName(path).constData(), AT_FDCWD,
                        QFile::encodeName(target).constData(), RENAME_NOREPLACE) == 0)
            return target;
        const int e = errno;
        ::unlink(infoName.constData());
        if (e == EEXIST) continue;
        why = e == EXDEV ? QStringLiteral("the trash %1 is on another file system").arg(trash)
                         : QStringLiteral("cannot move it to %1: %2").arg(target, errnoText(e));
        return {};
    }
    why = QStringLiteral("the trash %1 has too many items named %2").arg(trash, base);
    return {};
}

// Whether `dir` holds a Towers run: a config.json that reads as a run configuration (or, from
// another version of Towers, one with a run id), or one of the files only Towers writes into a run
// (checkpoints/ckpt-*.safetensors, metrics.jsonl, towers.lock, a TensorBoard event file). A folder
// that merely holds a file named config.json (a web project's, say) is none. Empty when it holds
// one; else why not, naming what was looked for.
QString whyNoRun(const QDir& dir)
{
    QString configProblem;
    QFile config(dir.filePath(QStringLiteral("config.json")));
    const bool hasConfig = config.exists();
    if (hasConfig) {
        if (!QFileInfo(config.fileName()).isFile()) { // a FIFO's open would block
            configProblem = QStringLiteral("is not a plain file");
        } else if (!config.open(QIODevice::ReadOnly)) {
            configProblem = QStringLiteral("cannot be read: %1").arg(config.errorString());
        } else {
            constexpr qint64 kMaxConfigBytes = 4 << 20; // a run's is a few kilobytes
            const QByteArray text = config.read(kMaxConfigBytes + 1);
            if (text.size() > kMaxConfigBytes)
                configProblem = QStringLiteral("is larger than a run configuration");
            else
                try {
                    engine::TrainConfig::fromJson(text.toStdString());
                    return {};
                } catch (const std::exception& e) {
                    const QJsonObject o = QJsonDocument::fromJson(text).object();
                    if (o.value(QStringLiteral("runId")).isString() &&
                        !o.value(QStringLiteral("runId")).toString().isEmpty())
                        return {}; // another version's configuration of a run
                    configProblem = QString::fromUtf8(e.what());
                }
        }
    }
    if (!QDir(dir.filePath(QStringLiteral("checkpoints")))
             .entryList({QStringLiteral("ckpt-*.safetensors")}, QDir::Files)
             .isEmpty() ||
        QFileInfo::exists(dir.filePath(QStringLiteral("metrics.jsonl"))) ||
        QFileInfo::exists(dir.filePath(QString::fromLatin1(engine::RunLock::kFileName))) ||
        !dir.entryList({QStringLiteral("events.out.tfevents.*")}, QDir::Files).isEmpty())
        return {};
    const QString files = QStringLiteral("checkpoints/ckpt-*.safetensors, metrics.jsonl, %1, "
                                         "events.out.tfevents.*")
                              .arg(QString::fromLatin1(engine::RunLock::kFileName));
    return hasConfig ? QStringLiteral("its config.json is no Towers run configuration (%1), and "
                                      "it holds none of the files Towers writes into a run (%2)")
                           .arg(configProblem, files)
                     : QStringLiteral("it has no config.json, and none of the files Towers "
                                      "writes into a run (%1)")
                           .arg(files);
}

// The folders below `path` (not itself) that hold a run's lock file: the runs inside it, those
// set aside included.
std::vector<QString> lockedFoldersInside(const QString& path)
{
    std::vector<QString> out;
    QDirIterator it(path, {QString::fromLatin1(engine::RunLock::kFileName)},
                    QDir::Files | QDir::Hidden | QDir::System | QDir::NoDotAndDotDot,
                    QDirIterator::Subdirectories);
    while (it.hasNext()) {
        const QString run = QDir::cleanPath(QFileInfo(it.next()).absolutePath());
        if (run != path) out.push_back(run);
    }
    return out;
}

// Of those, the runs that are not `path`'s history (its own earlier runs, and theirs, set aside
// by --overwrite or --restart), by their paths below it, sorted.
QStringList namedRuns(const QString& path, const std::vector<QString>& locked)
{
    QStringList out;
    for (const QString& run : locked) {
        const QString relative = QDir(path).relativeFilePath(run);
        if (relative.split(QLatin1Char('/')).contains(QLatin1String("set-aside"))) continue;
        out << relative;
    }
    out.sort();
    return out;
}

} // namespace

QStringList runsInside(const QString& folder)
{
    const QString path = QDir::cleanPath(QFileInfo(folder).absoluteFilePath());
    return namedRuns(path, lockedFoldersInside(path));
}

TrashOutcome moveRunToTrash(const QString& folder)
{
    TrashOutcome out;
    const QFileInfo info(folder);
    const QString path = QDir::cleanPath(info.absoluteFilePath());
    if (!info.exists() && !info.isSymLink()) {
        out.error = QStringLiteral("%1: no such folder").arg(path);
        return out;
    }
    if (!info.isDir() || info.isSymLink()) {
        out.error = QStringLiteral("%1 is not a run folder (not a folder)").arg(path);
        return out;
    }
    // Before the lock below, which would leave a towers.lock in any folder.
    if (const QString why = whyNoRun(QDir(path)); !why.isEmpty()) {
        out.error =
            QStringLiteral("%1 is not a run folder: %2; it stays where it is").arg(path, why);
        return out;
    }
    // The runs inside it too (a fine-tuning run kept in its parent's folder, a runs folder that
    // was made a run's --run-dir): a training there would lose what it has not written yet.
    const std::vector<QString> inside = lockedFoldersInside(path);
    out.runsInside = namedRuns(path, inside);
    const auto trainedBy = [&](const QString& run, const QString& who) {
        return QStringLiteral("%1 holds the run %2, which is being trained by %3: it stays where "
                              "it is (stop that training first)")
            .arg(path, run, who);
    };
    try {
        // Held for the move: a training that starts meanwhile is refused instead of writing into
        // a folder on its way to the trash. The lock files move with the folders.
        const engine::RunLock lock = engine::RunLock::acquire(path.toStdString());
        std::vector<engine::RunLock> insideLocks;
        for (const QString& run : inside) {
            try {
                insideLocks.push_back(engine::RunLock::acquire(run.toStdString()));
            } catch (const engine::RunFolderBusy& e) {
                const auto who = engine::RunLock::holder(run.toStdString());
                out.error = trainedBy(run, who ? QString::fromStdString(*who)
                                               : QString::fromUtf8(e.what()));
                return out;
            } catch (const engine::IoError&) {
                // A lock file it cannot lock: a link (which no training takes) moves as it is;
                // another user's that nobody holds too; one it cannot even read says nothing of
                // whether it trains: that stays.
                const QFileInfo lockFile(run + QLatin1Char('/') +
                                         QString::fromLatin1(engine::RunLock::kFileName));
                if (lockFile.isSymLink()) continue;
                if (const auto who = engine::RunLock::holder(run.toStdString())) {
                    out.error = trainedBy(run, QString::fromStdString(*who));
                    return out;
                }
                if (!lockFile.isReadable()) {
                    out.error = QStringLiteral("%1 holds the run %2, whose lock file cannot be "
                                               "read here, so whether it trains cannot be told: "
                                               "it stays where it is")
                                    .arg(path, run);
                    return out;
                }
            }
        }
        QString why;
        out.trashPath = moveToTrash(path, why);
        out.ok = !out.trashPath.isEmpty();
        if (!out.ok)
            out.error = QStringLiteral("%1 could not be moved to the trash: %2; it is unchanged")
                            .arg(path, why);
    } catch (const engine::RunFolderBusy& e) {
        const auto who = engine::RunLock::holder(path.toStdString());
        out.error = who ? QStringLiteral("%1 is being trained by %2: it stays where it is (stop "
                                         "that training first)")
                              .arg(path, QString::fromStdString(*who))
                        : QString::fromUtf8(e.what());
    } catch (const engine::Error& e) {
        out.error = QStringLiteral("%1 could not be moved to the trash: %2")
                        .arg(path, QString::fromUtf8(e.what()));
    }
    return out;
}

} // namespace towers::app
