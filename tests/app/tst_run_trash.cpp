// app::moveRunToTrash: a run folder goes to the freedesktop.org trash by rename only, with the
// .trashinfo record (its original path, percent-encoded, and when) that file managers restore it
// from; a second run of the same name gets its own name there; a run on another file system goes
// to that volume's $topdir/.Trash-$uid; what is not a run folder, or is being trained, stays.
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QTemporaryDir>
#include <QtTest>

#include <optional>

#include <sys/stat.h>
#include <unistd.h>

#include "app/runs/run_trash.h"
#include "engine/train/run_directory.h"
#include "engine/train/run_lock.h"
#include "engine/train/train_config.h"

namespace eng = towers::engine;
using towers::app::moveRunToTrash;

namespace {

void makeRun(const QString& folder)
{
    const eng::RunDirectory dir(folder.toStdString());
    dir.writeConfig(eng::TrainConfig{}.toJson());
    QFile f(QString::fromStdString(dir.checkpointPath(5).string()));
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("weights");
}

QByteArray readAll(const QString& file)
{
    QFile f(file);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

} // namespace

class TestRunTrash : public QObject
{
    Q_OBJECT

    QTemporaryDir m_root;
    QString m_trash;

private slots:
    void initTestCase()
    {
        QVERIFY(m_root.isValid());
        qputenv("XDG_DATA_HOME", m_root.filePath(QStringLiteral("xdg")).toUtf8());
        m_trash = m_root.filePath(QStringLiteral("xdg/Trash"));
    }

    void homeTrashWithItsRecord()
    {
        const QString folder = m_root.filePath(QStringLiteral("runs/a run #1"));
        makeRun(folder);
        const auto out = moveRunToTrash(folder);
        QVERIFY2(out.ok, qPrintable(out.error));
        QCOMPARE(out.trashPath, m_trash + QStringLiteral("/files/a run #1"));
        QCOMPARE(readAll(out.trashPath + QStringLiteral("/checkpoints/ckpt-00000005.safetensors")),
                 QByteArray("weights"));
        QVERIFY(!QFileInfo::exists(folder));
        const QByteArray info = readAll(m_trash + QStringLiteral("/info/a run #1.trashinfo"));
        QVERIFY2(info.startsWith(
                     "[Trash Info]\nPath=" + QFile::encodeName(m_root.path()).replace(" ", "%20") +
                     "/runs/a%20run%20%231\nDeletionDate=" +
                     QDate::currentDate().toString(Qt::ISODate).toLatin1() + "T"),
                 info.constData());
        QVERIFY(info.endsWith("\n"));

        // The same name again: its own name in the trash, the first one untouched.
        makeRun(folder);
        const auto again = moveRunToTrash(folder);
        QVERIFY2(again.ok, qPrintable(again.error));
        QCOMPARE(again.trashPath, m_trash + QStringLiteral("/files/a run #1.2"));
        QVERIFY(QFileInfo::exists(m_trash + QStringLiteral("/info/a run #1.2.trashinfo")));
        QVERIFY(QFileInfo::exists(m_trash + QStringLiteral("/files/a run #1/config.json")));
    }

    // A leftover folder in files/ without a record (another tool's, a crash): never replaced.
    void neverOntoSomethingThere()
    {
        QVERIFY(QDir().mkpath(m_trash + QStringLiteral("/files/b")));
        const QString folder = m_root.filePath(QStringLiteral("runs/b"));
        makeRun(folder);
        const auto out = moveRunToTrash(folder);
        QVERIFY2(out.ok, qPrintable(out.error));
        QCOMPARE(out.trashPath, m_trash + QStringLiteral("/files/b.2"));
        QVERIFY(!QFileInfo::exists(m_trash + QStringLiteral("/info/b.trashinfo")));
        QVERIFY(QDir(m_trash + QStringLiteral("/files/b")).isEmpty());
    }

    void refusals()
    {
        const QString plain = m_root.filePath(QStringLiteral("plain"));
        QVERIFY(QDir().mkpath(plain));
        auto out = moveRunToTrash(plain);
        QVERIFY(!out.ok);
        QVERIFY2(out.error.contains(QStringLiteral("is not a run folder: it has no "
                                                   "config.json")),
                 qPrintable(out.error));
        QVERIFY(QFileInfo::exists(plain));

        out = moveRunToTrash(m_root.filePath(QStringLiteral("missing")));
        QVERIFY(!out.ok);
        QVERIFY2(out.error.contains(QStringLiteral("no such folder")), qPrintable(out.error));

        // A link to a run: the link is no run folder; the run stays.
        const QString run = m_root.filePath(QStringLiteral("runs/linked"));
        makeRun(run);
        const QString link = m_root.filePath(QStringLiteral("link"));
        QVERIFY(QFile::link(run, link));
        out = moveRunToTrash(link);
        QVERIFY(!out.ok);
        QVERIFY2(out.error.contains(QStringLiteral("not a folder")), qPrintable(out.error));
        QVERIFY(QFileInfo::exists(run + QStringLiteral("/config.json")));

        // Being trained: stays, naming who trains it.
        std::optional<eng::RunLock> lock =
            eng::RunLock::acquire(run.toStdString(), "towers-cli train");
        out = moveRunToTrash(run);
        QVERIFY(!out.ok);
        QVERIFY2(
            out.error.contains(QStringLiteral("is being trained by process %1").arg(::getpid())) &&
                out.error.contains(QStringLiteral("towers-cli train")),
            qPrintable(out.error));
        QVERIFY(QFileInfo::exists(run + QStringLiteral("/config.json")));
        lock.reset();
        QVERIFY(moveRunToTrash(run).ok);

        // A run inside it being trained (a fine-tuning run kept in its parent's folder): stays,
        // naming that run and who trains it; its own set-aside runs' lock files hold nothing.
        const QString parent = m_root.filePath(QStringLiteral("runs/parent"));
        makeRun(parent);
        makeRun(parent + QStringLiteral("/set-aside/2026-11-30/"));
        (void)eng::RunLock::acquire(
            (parent + QStringLiteral("/set-aside/2026-11-30")).toStdString());
        const QString child = parent + QStringLiteral("/finetune");
        makeRun(child);
        lock = eng::RunLock::acquire(child.toStdString(), "towers-cli train");
        out = moveRunToTrash(parent);
        QVERIFY(!out.ok);
        QVERIFY2(out.error.contains(QStringLiteral("holds the run %1, which is being trained by "
                                                   "process %2")
                                        .arg(child)
                                        .arg(::getpid())),
                 qPrintable(out.error));
        QVERIFY(QFileInfo::exists(child + QStringLiteral("/config.json")));
        lock.reset();
        // A run inside whose lock file cannot be locked (a link) is trained by nobody: no
        // obstacle. The runs that go along are named (not the set-aside ones: its history).
        const QString copied = parent + QStringLiteral("/copied");
        makeRun(copied);
        QVERIFY(QFile::link(m_root.filePath(QStringLiteral("elsewhere")),
                            copied + QStringLiteral("/towers.lock")));
        QCOMPARE(towers::app::runsInside(parent),
                 (QStringList{QStringLiteral("copied"), QStringLiteral("finetune")}));
        const auto moved = moveRunToTrash(parent);
        QVERIFY2(moved.ok, qPrintable(moved.error));
        QCOMPARE(moved.runsInside,
                 (QStringList{QStringLiteral("copied"), QStringLiteral("finetune")}));
        QVERIFY(!QFileInfo::exists(parent));
    }

    // A folder that merely holds a file named config.json (a web project's) is no run: refused,
    // naming why, and left as it was (no towers.lock made in it either). A run's own files, or a
    // configuration of Towers', make one.
    void refusesAFolderThatHoldsNoRun()
    {
        const QString project = m_root.filePath(QStringLiteral("project"));
        QVERIFY(QDir().mkpath(project + QStringLiteral("/src")));
        const auto write = [](const QString& file, const QByteArray& text) {
            QFile f(file);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(text);
        };
        write(project + QStringLiteral("/config.json"), R"({"name":"my web app","version":"1.0"})");
        write(project + QStringLiteral("/src/main.c"), "int main(){}");
        auto out = moveRunToTrash(project);
        QVERIFY(!out.ok);
        QVERIFY2(out.error.contains(QStringLiteral("is not a run folder: its config.json "
                                                   "is no Towers run configuration (")) &&
                     out.error.contains(QStringLiteral("unknown field")) &&
                     out.error.contains(QStringLiteral("metrics.jsonl")) &&
                     out.error.contains(QStringLiteral("it stays where it is")),
                 qPrintable(out.error));
        QVERIFY(QFileInfo::exists(project + QStringLiteral("/src/main.c")));
        QVERIFY(!QFileInfo::exists(project + QStringLiteral("/towers.lock")));
        // A config.json that is a FIFO is not opened (that would block): no run, said at once.
        QVERIFY(QFile::remove(project + QStringLiteral("/config.json")));
        QCOMPARE(
            ::mkfifo(QFile::encodeName(project + QStringLiteral("/config.json")).constData(), 0600),
            0);
        out = moveRunToTrash(project);
        QVERIFY(!out.ok);
        QVERIFY2(out.error.contains(QStringLiteral("its config.json is no Towers run "
                                                   "configuration (is not a plain file)")),
                 qPrintable(out.error));
        QVERIFY(QFile::remove(project + QStringLiteral("/config.json")));
        // Not JSON at all, and an empty checkpoints/ folder: still no run.
        write(project + QStringLiteral("/config.json"), "port = 8080\n");
        QVERIFY(QDir().mkpath(project + QStringLiteral("/checkpoints")));
        QVERIFY(!moveRunToTrash(project).ok);
        QVERIFY(QFileInfo::exists(project + QStringLiteral("/src/main.c")));

        // Each of a run's own files makes one.
        for (const QString& file : {QStringLiteral("metrics.jsonl"), QStringLiteral("towers.lock"),
                                    QStringLiteral("events.out.tfevents.1700000000.host"),
                                    QStringLiteral("checkpoints/ckpt-00000010.safetensors")}) {
            const QString run =
                m_root.filePath(QStringLiteral("runs/with ") + QFileInfo(file).fileName());
            QVERIFY(QDir().mkpath(run + QStringLiteral("/checkpoints")));
            write(run + QStringLiteral("/config.json"), R"({"name":"not ours"})");
            write(run + QLatin1Char('/') + file, "");
            const auto moved = moveRunToTrash(run);
            QVERIFY2(moved.ok, qPrintable(file + QStringLiteral(": ") + moved.error));
        }
        // A configuration of Towers' alone (a run that has not logged a step yet) makes one; so
        // does one with a run id that this version does not read (another version's).
        const QString fresh = m_root.filePath(QStringLiteral("runs/fresh"));
        QVERIFY(QDir().mkpath(fresh));
        eng::TrainConfig config;
        config.steps = 10;
        write(fresh + QStringLiteral("/config.json"), QByteArray::fromStdString(config.toJson()));
        auto moved = moveRunToTrash(fresh);
        QVERIFY2(moved.ok, qPrintable(moved.error));
        const QString newer = m_root.filePath(QStringLiteral("runs/newer"));
        QVERIFY(QDir().mkpath(newer));
        write(newer + QStringLiteral("/config.json"),
              R"({"runId":"20260101-000000-abcd","aFieldOfLater":1})");
        moved = moveRunToTrash(newer);
        QVERIFY2(moved.ok, qPrintable(moved.error));
    }

    // A home trash that is no folder of ours (a file in its place): refused, the run unchanged.
    void unusableHomeTrash()
    {
        QTemporaryDir other;
        qputenv("XDG_DATA_HOME", other.filePath(QStringLiteral("xdg")).toUtf8());
        QVERIFY(QDir().mkpath(other.filePath(QStringLiteral("xdg"))));
        QFile blocker(other.filePath(QStringLiteral("xdg/Trash")));
        QVERIFY(blocker.open(QIODevice::WriteOnly));
        blocker.close();
        const QString run = other.filePath(QStringLiteral("run"));
        makeRun(run);
        const auto out = moveRunToTrash(run);
        qputenv("XDG_DATA_HOME", m_root.filePath(QStringLiteral("xdg")).toUtf8());
        QVERIFY(!out.ok);
        QVERIFY2(out.error.contains(QStringLiteral("is not a folder of yours")) &&
                     out.error.contains(QStringLiteral("it is unchanged")),
                 qPrintable(out.error));
        QVERIFY(QFileInfo::exists(run + QStringLiteral("/checkpoints")));
        QVERIFY(!QFileInfo::exists(QDir::currentPath() + QStringLiteral("/files/run")));
    }

    // On another file system than the home trash (a tmpfs at /dev/shm): its own $topdir trash.
    void volumeTrash()
    {
        struct stat shm
        {
        }, home{};
        if (::stat("/dev/shm", &shm) != 0 || ::access("/dev/shm", W_OK) != 0)
            QSKIP("no writable /dev/shm: no second file system to trash from");
        QVERIFY(::stat(QFile::encodeName(m_root.path()).constData(), &home) == 0);
        if (shm.st_dev == home.st_dev) QSKIP("/dev/shm is on the home trash's file system");
        QTemporaryDir volume(QStringLiteral("/dev/shm/towers-trash-XXXXXX"));
        QVERIFY(volume.isValid());
        const QString run = volume.filePath(QStringLiteral("run"));
        makeRun(run);
        const auto out = moveRunToTrash(run);
        QVERIFY2(out.ok, qPrintable(out.error));
        // The mount point is /dev/shm: its .Trash-$uid (or an administrator's .Trash/$uid).
        const QString uid = QString::number(::getuid());
        QVERIFY2(out.trashPath.startsWith(QStringLiteral("/dev/shm/.Trash-") + uid + "/files/") ||
                     out.trashPath.startsWith(QStringLiteral("/dev/shm/.Trash/") + uid + "/files/"),
                 qPrintable(out.trashPath));
        QVERIFY(QFileInfo::exists(out.trashPath + QStringLiteral("/config.json")));
        const QString name = QFileInfo(out.trashPath).fileName();
        const QString infoFile = QFileInfo(out.trashPath).absolutePath() +
                                 QStringLiteral("/../info/") + name + QStringLiteral(".trashinfo");
        // A volume trash records the path relative to the volume's top.
        QVERIFY2(readAll(infoFile).contains(
                     "\nPath=" +
                     QFile::encodeName(QDir(QStringLiteral("/dev/shm")).relativeFilePath(run)) +
                     "\n"),
                 readAll(infoFile).constData());
        QDir(out.trashPath).removeRecursively();
        QFile::remove(infoFile);
        // The trash folders this made, when empty (rmdir leaves anything else's alone).
        const QString trash = QFileInfo(QFileInfo(out.trashPath).absolutePath()).absolutePath();
        for (const QString& d :
             {trash + QStringLiteral("/files"), trash + QStringLiteral("/info"), trash})
            ::rmdir(QFile::encodeName(d).constData());
    }
};

QTEST_GUILESS_MAIN(TestRunTrash)
#include "tst_run_trash.moc"
