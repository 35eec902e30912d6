// towers-cli train across processes, started by mpirun as a user would on one machine, on a
// small generated Fashion-MNIST-format dataset: P processes x T towers train bitwise what one
// process with P·T towers trains; a run stopped by SIGTERM to mpirun resumes to the tensors of an
// uninterrupted run; a failure or another configuration on one rank stops every rank quickly,
// naming the rank; a run is resumed only with its own process count; --resume-or-start; and the
// MPI build still runs alone. Skipped when mpirun is not on PATH (Open MPI not installed); every
// case runs for real when it is. Every mpirun has a hard time limit: past it the process group
// (mpirun and its ranks) is killed and the case fails with the output.
#include <QDir>
#include <QDirIterator>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMap>
#include <QProcess>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <functional>
#include <sys/types.h>
#include <unistd.h>

#include "dataset_files.h"
#include "engine/cpu/host_memory.h"
#include "engine/models/model_file.h"
#include "engine/models/registry.h"
#include "engine/train/checkpoint.h"
#include "engine/train/memory_need.h"
#include "model_files.h"

namespace fs = std::filesystem;
using namespace towers;

namespace {

constexpr int kTimeoutMs = 90000; // one mpirun; the runs here take a few seconds

struct Run
{
    QStringList command;
    int exitCode = -1; // -1: crashed or killed
    bool timedOut = false;
    qint64 ms = 0;
    QString out, err; // stdout (rank 0's log under mpirun), stderr

    QString output() const { return out + err; }
    QString report() const
    {
        return QStringLiteral("%1\nexit code %2%3 after %4 ms\n--- stdout (end) ---\n%5\n"
                              "--- stderr (end) ---\n%6")
            .arg(command.join(QLatin1Char(' ')))
            .arg(exitCode)
            .arg(timedOut ? QStringLiteral(", TIMED OUT and killed") : QString())
            .arg(ms)
            .arg(out.right(6000), err.right(6000));
    }
};

// Every descendant of `root` (children first found by their parent in /proc).
QList<pid_t> descendants(pid_t root)
{
    QMultiHash<pid_t, pid_t> children;
    const QStringList entries = QDir(QStringLiteral("/proc")).entryList(QDir::Dirs);
    for (const QString& name : entries) {
        bool ok = false;
        const pid_t pid = name.toInt(&ok);
        if (!ok) continue;
        QFile stat(QStringLiteral("/proc/%1/stat").arg(pid));
        if (!stat.open(QIODevice::ReadOnly)) continue;
        const QByteArray line = stat.readAll();
        // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        const QList<QByteArray> fields = line.mid(line.lastIndexOf(')') + 2).split(' ');
        if (fields.size() > 1) children.insert(fields[1].toInt(), pid);
    }
    QList<pid_t> all, queue{root};
    while (!queue.isEmpty()) {
        const auto found = children.values(queue.takeFirst());
        all += found;
        queue += found;
    }
    return all;
}

// mpirun was started in its own process group: kill that group and, in case a rank left it,
// every descendant.
void killTree(QProcess& p)
{
    const auto pid = static_cast<pid_t>(p.processId());
    if (pid <= 0) return;
    const QList<pid_t> all = descendants(pid);
    ::kill(-pid, SIGKILL);
    for (pid_t d : all) ::kill(d, SIGKILL);
    ::kill(pid, SIGKILL);
    p.waitForFinished(10000);
}

QList<QJsonObject> jsonLinesOf(const QString& file)
{
    QList<QJsonObject> lines;
    QFile f(file);
    if (!f.open(QIODevice::ReadOnly)) return lines;
    for (const QByteArray& line : f.readAll().split('\n'))
        if (!line.trimmed().isEmpty()) lines << QJsonDocument::fromJson(line).object();
    return lines;
}

int lineCount(const QString& file)
{
    QFile f(file);
    if (!f.open(QIODevice::ReadOnly)) return 0;
    return int(f.readAll().count('\n'));
}

QJsonObject jsonFile(const QString& file)
{
    QFile f(file);
    if (!f.open(QIODevice::ReadOnly)) return {};
    return QJsonDocument::fromJson(f.readAll()).object();
}

// The steps of the checkpoints in <runDir>/checkpoints, ascending.
QList<qint64> checkpointSteps(const QString& runDir)
{
    static const QRegularExpression name(QStringLiteral("^ckpt-(\\d{8})\\.safetensors$"));
    QList<qint64> steps;
    for (const QString& f : QDir(runDir + QStringLiteral("/checkpoints")).entryList(QDir::Files)) {
        const auto m = name.match(f);
        if (m.hasMatch()) steps << m.captured(1).toLongLong();
    }
    std::sort(steps.begin(), steps.end());
    return steps;
}

// Files left from an interrupted atomic write (".<name>.tmp-<pid>-<n>") anywhere in the run.
QStringList temporaryFiles(const QString& runDir)
{
    QStringList found;
    QDirIterator it(runDir, QDir::Files | QDir::Hidden | QDir::System,
                    QDirIterator::Subdirectories);
    while (it.hasNext()) {
        const QString f = it.next();
        if (f.contains(QLatin1String(".tmp"))) found << f;
    }
    return found;
}

engine::Checkpoint checkpointAt(const QString& runDir, qint64 step)
{
    return engine::readCheckpoint(
        fs::path(runDir.toStdString()) / "checkpoints" /
        QStringLiteral("ckpt-%1.safetensors").arg(step, 8, 10, QLatin1Char('0')).toStdString());
}

// Empty when the two lists hold the same names in the same order with the same bytes; else what
// differs first.
QString tensorsDiffer(const engine::NamedTensors& a, const engine::NamedTensors& b,
                      const char* what)
{
    if (a.size() != b.size())
        return QStringLiteral("%1: %2 tensors against %3").arg(what).arg(a.size()).arg(b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        const QString name = QString::fromStdString(a[i].first);
        if (a[i].first != b[i].first)
            return QStringLiteral("%1: tensor %2 is %3 against %4")
                .arg(what)
                .arg(i)
                .arg(name, QString::fromStdString(b[i].first));
        const auto& x = a[i].second;
        const auto& y = b[i].second;
        if (x.bytes() != y.bytes())
            return QStringLiteral("%1: %2 has %3 bytes against %4")
                .arg(what, name)
                .arg(x.bytes())
                .arg(y.bytes());
        if (std::memcmp(x.raw(), y.raw(), x.bytes()) != 0)
            return QStringLiteral("%1: %2 differs").arg(what, name);
    }
    return {};
}

// Empty when the weights, the moving averages and the optimizer state are bitwise equal (not the
// whole file: its metadata holds the configuration, which names the process count).
QString checkpointsDiffer(const engine::Checkpoint& a, const engine::Checkpoint& b)
{
    if (a.info.step != b.info.step)
        return QStringLiteral("step %1 against %2").arg(a.info.step).arg(b.info.step);
    QString d = tensorsDiffer(a.weights, b.weights, "weights");
    if (d.isEmpty()) d = tensorsDiffer(a.ema, b.ema, "moving averages");
    if (d.isEmpty()) d = tensorsDiffer(a.optimizer, b.optimizer, "optimizer");
    return d;
}

// step -> loss, as metrics.jsonl logged it; a step logged twice is an error.
QMap<qint64, double> lossesOf(const QString& runDir, QString* error)
{
    QMap<qint64, double> losses;
    for (const QJsonObject& line : jsonLinesOf(runDir + QStringLiteral("/metrics.jsonl"))) {
        const qint64 step = line.value(QStringLiteral("step")).toInteger(-1);
        if (losses.contains(step))
            *error += QStringLiteral("step %1 logged twice in %2; ").arg(step).arg(runDir);
        losses.insert(step, line.value(QStringLiteral("loss")).toDouble());
    }
    return losses;
}

} // namespace

// QVERIFY2 cuts its message at 1,000 characters or so: the run's output goes before it, whole.
#define CHECK_RUN(cond, r)                                                                         \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            qWarning().noquote() << (r).report();                                                  \
            QTest::qVerify(false, #cond, "(the run is above)", __FILE__, __LINE__);                \
            return;                                                                                \
        }                                                                                          \
    } while (false)
#define VERIFY_RAN(r) CHECK_RUN(!(r).timedOut, r)
#define VERIFY_OK(r) CHECK_RUN(!(r).timedOut && (r).exitCode == 0, r)

class TestMpiTraining : public QObject
{
    Q_OBJECT

    QTemporaryDir m_tmp;
    QString m_mpirun;

    QString path(const QString& name) const { return m_tmp.filePath(name); }
    QString dataDir() const { return path(QStringLiteral("data")); }

    QProcessEnvironment environment() const
    {
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("HOME"), path(QStringLiteral("home")));
        env.insert(QStringLiteral("XDG_DATA_HOME"), path(QStringLiteral("xdg")));
        env.insert(QStringLiteral("TOWERS_DATA"), dataDir());
        env.insert(QStringLiteral("TOWERS_RUNS"), path(QStringLiteral("runs")));
        env.insert(QStringLiteral("OMP_NUM_THREADS"), QStringLiteral("1"));
        // The CPU's runs on any machine: no GPU backend.
        env.insert(QStringLiteral("TOWERS_CUDA_PLUGIN"),
                   QStringLiteral("/nonexistent/libtowers-cuda.so"));
        // We run as root here and in CI containers; Open MPI refuses that without these.
        env.insert(QStringLiteral("OMPI_ALLOW_RUN_AS_ROOT"), QStringLiteral("1"));
        env.insert(QStringLiteral("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"), QStringLiteral("1"));
        return env;
    }

    // `program args`, killed with its process group after `timeoutMs`; `during` runs once it
    // has started (it must keep the pipes drained, e.g. by p.waitForFinished(short)).
    Run launch(const QString& program, const QStringList& args, int timeoutMs = kTimeoutMs,
               const QStringList& extraEnv = {},
               const std::function<void(QProcess&, QElapsedTimer&)>& during = {})
    {
        Run r;
        r.command = QStringList{program} + args;
        QProcess p;
        p.setProgram(program);
        p.setArguments(args);
        QProcessEnvironment env = environment();
        for (const QString& kv : extraEnv)
            env.insert(kv.section(QLatin1Char('='), 0, 0), kv.section(QLatin1Char('='), 1));
        p.setProcessEnvironment(env);
        p.setStandardInputFile(QProcess::nullDevice());
        // Its own process group, so that a timeout kills mpirun and its ranks together.
        p.setChildProcessModifier([] { ::setpgid(0, 0); });
        QElapsedTimer clock;
        clock.start();
        p.start();
        if (!p.waitForStarted(10000)) {
            r.err = QStringLiteral("cannot start: ") + p.errorString();
            return r;
        }
        if (during) during(p, clock);
        const qint64 left = timeoutMs - clock.elapsed();
        if (p.state() != QProcess::NotRunning && (left <= 0 || !p.waitForFinished(int(left)))) {
            r.timedOut = true;
            killTree(p);
        }
        r.ms = clock.elapsed();
        r.exitCode = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
        r.out = QString::fromUtf8(p.readAllStandardOutput());
        r.err = QString::fromUtf8(p.readAllStandardError());
        return r;
    }

    // mpirun -np `np` `command`; --oversubscribe: Open MPI refuses more processes than cores
    // otherwise (a 1-core CI machine), and lets the towers' threads share the 2 cores unbound.
    Run mpirun(int np, const QStringList& command, int timeoutMs = kTimeoutMs,
               const QStringList& extraEnv = {},
               const std::function<void(QProcess&, QElapsedTimer&)>& during = {})
    {
        return launch(m_mpirun,
                      QStringList{QStringLiteral("--oversubscribe"), QStringLiteral("-np"),
                                  QString::number(np)} +
                          command,
                      timeoutMs, extraEnv, during);
    }

    Run alone(const QStringList& args, int timeoutMs = kTimeoutMs)
    {
        return launch(QStringLiteral(TOWERS_CLI), args, timeoutMs);
    }

    // towers-cli train with the options of a small, fast run (its towers and steps added).
    static QStringList train(const QString& runDir, const QStringList& more = {})
    {
        return QStringList{QStringLiteral(TOWERS_CLI),
                           QStringLiteral("train"),
                           QStringLiteral("--dataset"),
                           QStringLiteral("fashion-mnist"),
                           QStringLiteral("--batch-size"),
                           QStringLiteral("16"),
                           QStringLiteral("--threads-per-tower"),
                           QStringLiteral("1"),
                           QStringLiteral("--loader-workers"),
                           QStringLiteral("1"),
                           QStringLiteral("--log-every"),
                           QStringLiteral("1"),
                           QStringLiteral("--run-dir"),
                           runDir} +
               more;
    }
    // The same without the program (for towers-cli started directly).
    static QStringList trainArgs(const QString& runDir, const QStringList& more = {})
    {
        return train(runDir, more).mid(1);
    }

    // sh -c running `command` with `rankOneExtra` (plain words) appended on rank 1 only, and
    // --data-dir `rankOneData` there and `data` on the others (when not empty).
    static QStringList perRank(const QStringList& command, const QStringList& rankOneExtra,
                               const QString& data = {}, const QString& rankOneData = {})
    {
        const QString script = QStringLiteral(
            "prog=\"$0\"; one=\"$1\"; other=\"$2\"; extra=\"$3\"; shift 3; "
            "if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then D=\"$one\"; else D=\"$other\"; extra=; fi; "
            "if [ -n \"$D\" ]; then set -- \"$@\" --data-dir \"$D\"; fi; "
            "exec \"$prog\" \"$@\" $extra");
        return QStringList{QStringLiteral("sh"),
                           QStringLiteral("-c"),
                           script,
                           command.first(),
                           rankOneData,
                           data,
                           rankOneExtra.join(QLatin1Char(' '))} +
               command.mid(1);
    }

    // mpirun -np 1 A : -np 1 B: rank 0 runs `rank0`, rank 1 `rank1`.
    Run mpmd(const QStringList& rank0, const QStringList& rank1)
    {
        const QStringList one{QStringLiteral("-np"), QStringLiteral("1")};
        return launch(m_mpirun,
                      QStringList{QStringLiteral("--oversubscribe")} + one + rank0 +
                          QStringList{QStringLiteral(":")} + one + rank1,
                      30000);
    }

private slots:
    void initTestCase()
    {
        m_mpirun = QStandardPaths::findExecutable(QStringLiteral("mpirun"));
        if (m_mpirun.isEmpty())
            QSKIP("mpirun is not on PATH (install Open MPI, e.g. the openmpi-bin package, to run "
                  "training across processes)");
        QVERIFY(m_tmp.isValid());
        // 320 training and 96 test images of 28x28 in the IDX format: 10 steps an epoch at 2 x 16.
        test::writeIdxDataset((dataDir() + QStringLiteral("/fashion-mnist")).toStdString(), 320, 96,
                              28, 28, false, 7);
    }

    // The script perRank() builds hands each rank its own arguments (checked with echo, so a
    // mistake there cannot hide behind towers-cli's messages).
    void perRankArguments()
    {
        const Run r =
            mpirun(2, perRank({QStringLiteral("echo"), QStringLiteral("a b"), QStringLiteral("c")},
                              {QStringLiteral("--lr"), QStringLiteral("0.5")},
                              QStringLiteral("/good"), QStringLiteral("/bad dir")));
        VERIFY_OK(r);
        QStringList lines = r.out.split(QLatin1Char('\n'), Qt::SkipEmptyParts);
        lines.sort();
        QCOMPARE(lines, (QStringList{QStringLiteral("a b c --data-dir /bad dir --lr 0.5"),
                                     QStringLiteral("a b c --data-dir /good")}));
    }

    // The harness itself: an mpirun past its time limit is killed with its ranks, so that no case
    // can hang (the ranks here sleep 617 s, a length nothing else uses).
    void hungRunIsKilled()
    {
        const auto sleepers = [] {
            int n = 0;
            for (const QString& pid : QDir(QStringLiteral("/proc")).entryList(QDir::Dirs)) {
                QFile f(QStringLiteral("/proc/%1/cmdline").arg(pid));
                if (f.open(QIODevice::ReadOnly) && f.readAll() == QByteArray("sleep\0"
                                                                             "617\0",
                                                                             10))
                    ++n;
            }
            return n;
        };
        int running = 0;
        const Run r = mpirun(2, {QStringLiteral("sleep"), QStringLiteral("617")}, 3000, {},
                             [&](QProcess& p, QElapsedTimer& clock) {
                                 while ((running = sleepers()) < 2 && clock.elapsed() < 2500)
                                     p.waitForFinished(50);
                             });
        QCOMPARE(running, 2);
        QVERIFY2(r.timedOut, qPrintable(r.report()));
        QVERIFY2(r.ms < 15000, qPrintable(r.report()));
        QTRY_COMPARE_WITH_TIMEOUT(sleepers(), 0, 5000);
    }

    // 2 processes x 1 tower train bitwise what 1 process x 2 towers trains (default buckets and
    // augmentation): the same tensors, the same loss every step.
    void twoProcessesEqualOneProcess()
    {
        const QString a = path(QStringLiteral("runs/p2t1")), b = path(QStringLiteral("runs/p1t2"));
        const QStringList six{QStringLiteral("--steps"), QStringLiteral("6")};
        const Run two =
            mpirun(2, train(a, QStringList{QStringLiteral("--towers"), QStringLiteral("1")} + six));
        VERIFY_OK(two);
        qInfo("2 processes x 1 tower, 6 steps: %lld ms", two.ms);
        const Run one =
            alone(trainArgs(b, QStringList{QStringLiteral("--towers"), QStringLiteral("2")} + six));
        VERIFY_OK(one);
        CHECK_RUN(two.out.contains(QStringLiteral("2 processes x 1")), two);
        CHECK_RUN(two.out.contains(QStringLiteral("across 2 processes")), two);
        CHECK_RUN(!two.err.contains(QStringLiteral("[rank 1]")), two);

        QCOMPARE(jsonFile(a + QStringLiteral("/config.json")).value(QStringLiteral("processes")),
                 QJsonValue(2));
        QCOMPARE(jsonFile(b + QStringLiteral("/config.json")).value(QStringLiteral("processes")),
                 QJsonValue(1));
        const auto ma = jsonLinesOf(a + QStringLiteral("/metrics.jsonl"));
        const auto mb = jsonLinesOf(b + QStringLiteral("/metrics.jsonl"));
        QCOMPARE(ma.size(), 6);
        QCOMPARE(mb.size(), 6);
        for (int i = 0; i < 6; ++i) {
            QCOMPARE(ma[i].value(QStringLiteral("step")).toInteger(), qint64(i + 1));
            QCOMPARE(mb[i].value(QStringLiteral("step")).toInteger(), qint64(i + 1));
            QCOMPARE(ma[i].value(QStringLiteral("towerTimes")).toArray().size(), 2);
            QCOMPARE(mb[i].value(QStringLiteral("towerTimes")).toArray().size(), 2);
            const double la = ma[i].value(QStringLiteral("loss")).toDouble();
            const double lb = mb[i].value(QStringLiteral("loss")).toDouble();
            QVERIFY2(std::memcmp(&la, &lb, sizeof la) == 0,
                     qPrintable(QStringLiteral("step %1: loss %2 with 2 processes, %3 with one")
                                    .arg(i + 1)
                                    .arg(la, 0, 'g', 17)
                                    .arg(lb, 0, 'g', 17)));
        }
        QCOMPARE(checkpointSteps(a).last(), qint64(6));
        const QString d = checkpointsDiffer(checkpointAt(a, 6), checkpointAt(b, 6));
        QVERIFY2(d.isEmpty(), qPrintable(d));
    }

    // A run started from a checkpoint (--init-from): rank 0 reads it and sends its weights, so 2
    // processes equal 1 process with 2 towers, bitwise.
    void initFromEqualsOneProcess()
    {
        const QString base = path(QStringLiteral("runs/init-base"));
        const Run first =
            alone(trainArgs(base, QStringList{QStringLiteral("--steps"), QStringLiteral("2")}));
        VERIFY_OK(first);
        const QStringList more{QStringLiteral("--steps"),     QStringLiteral("3"),
                               QStringLiteral("--seed"),      QStringLiteral("5"),
                               QStringLiteral("--init-from"), base};
        const QString a = path(QStringLiteral("runs/init-p2")),
                      b = path(QStringLiteral("runs/init-p1"));
        const Run two = mpirun(
            2, train(a, QStringList{QStringLiteral("--towers"), QStringLiteral("1")} + more));
        VERIFY_OK(two);
        CHECK_RUN(two.out.contains(QStringLiteral("weights from ")), two);
        const Run one = alone(
            trainArgs(b, QStringList{QStringLiteral("--towers"), QStringLiteral("2")} + more));
        VERIFY_OK(one);
        const QString d = checkpointsDiffer(checkpointAt(a, 3), checkpointAt(b, 3));
        QVERIFY2(d.isEmpty(), qPrintable(d));
    }

    // --like across processes: rank 0 reads the run's configuration and every process trains
    // with it (another process need not see the run's folder).
    void likeAcrossProcesses()
    {
        const QString base = path(QStringLiteral("runs/like-base"));
        const Run first = alone(trainArgs(base, {QStringLiteral("--steps"), QStringLiteral("2"),
                                                 QStringLiteral("--lr"), QStringLiteral("0.02")}));
        VERIFY_OK(first);
        const QString c = path(QStringLiteral("runs/like-p2"));
        // Rank 0's note on stderr ("a new run like ...", written before the dataset loads) goes
        // out when written, not held until the process ends (after its training's lines).
        QString outBefore, out, err;
        bool noted = false;
        const Run two =
            mpirun(2,
                   train(c, QStringList{QStringLiteral("--like"), base, QStringLiteral("--towers"),
                                        QStringLiteral("1"), QStringLiteral("--seed"),
                                        QStringLiteral("4")}),
                   kTimeoutMs, {}, [&](QProcess& p, QElapsedTimer& clock) {
                       while (p.state() == QProcess::Running && clock.elapsed() < kTimeoutMs) {
                           p.waitForReadyRead(20);
                           out += QString::fromUtf8(p.readAllStandardOutput());
                           err += QString::fromUtf8(p.readAllStandardError());
                           if (!noted && err.contains(QStringLiteral("a new run like"))) {
                               noted = true;
                               outBefore = out;
                           }
                       }
                   });
        out += two.out;
        err += two.err;
        if (!noted && err.contains(QStringLiteral("a new run like"))) {
            noted = true;
            outBefore = out;
        }
        QVERIFY2(two.exitCode == 0, qPrintable(out + err));
        QVERIFY2(noted, qPrintable(err));
        QVERIFY2(
            !outBefore.contains(QStringLiteral("wrote checkpoint")),
            qPrintable(QStringLiteral("rank 0's note came after its training:\n") + out + err));
        const QJsonObject config = jsonFile(c + QStringLiteral("/config.json"));
        QCOMPARE(config.value(QStringLiteral("processes")).toInt(), 2);
        QCOMPARE(config.value(QStringLiteral("lr")).toDouble(), 0.02); // the run's, not the model's
        QCOMPARE(config.value(QStringLiteral("seed")).toInt(), 4);
        QCOMPARE(config.value(QStringLiteral("steps")).toInt(), 2);
    }

    // A model file across processes: rank 0 reads it and every process trains its network. The
    // same relative path names no file where rank 1 runs (another folder), as on a machine that
    // lacks the file.
    void modelFileAcrossProcesses()
    {
        QVERIFY(QDir().mkpath(path(QStringLiteral("here"))));
        QVERIFY(QDir().mkpath(path(QStringLiteral("elsewhere"))));
        QFile f(path(QStringLiteral("here/net.json")));
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(towers::test::fashionFastDefinition("mine").c_str());
        f.close();
        const QString c = path(QStringLiteral("runs/model-file-p2"));
        const QStringList command =
            train(c, {QStringLiteral("--towers"), QStringLiteral("1"), QStringLiteral("--steps"),
                      QStringLiteral("2"), QStringLiteral("--model"), QStringLiteral("net.json")});
        const Run two = mpirun(
            2, QStringList{QStringLiteral("sh"), QStringLiteral("-c"),
                           QStringLiteral("if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then cd \"$1\"; "
                                          "else cd \"$0\"; fi && shift && exec \"$@\""),
                           path(QStringLiteral("here")), path(QStringLiteral("elsewhere"))} +
                   command);
        VERIFY_OK(two);
        const QJsonObject config = jsonFile(c + QStringLiteral("/config.json"));
        QCOMPARE(config.value(QStringLiteral("processes")).toInt(), 2);
        QCOMPARE(config.value(QStringLiteral("model")).toString(), QStringLiteral("mine"));
        QCOMPARE(config.value(QStringLiteral("modelDefinition"))
                     .toObject()
                     .value(QStringLiteral("name"))
                     .toString(),
                 QStringLiteral("mine"));
    }

    // 2 processes x 2 towers = 1 process x 4 towers, bitwise (4 towers on 2 cores: few steps).
    void twoByTwoEqualsOneByFour()
    {
        const QString a = path(QStringLiteral("runs/p2t2")), b = path(QStringLiteral("runs/p1t4"));
        const QStringList steps{QStringLiteral("--steps"), QStringLiteral("3")};
        const Run two = mpirun(
            2, train(a, QStringList{QStringLiteral("--towers"), QStringLiteral("2")} + steps));
        VERIFY_OK(two);
        qInfo("2 processes x 2 towers, 3 steps: %lld ms", two.ms);
        CHECK_RUN(two.out.contains(QStringLiteral("2 processes x 2")), two);
        const Run one = alone(
            trainArgs(b, QStringList{QStringLiteral("--towers"), QStringLiteral("4")} + steps));
        VERIFY_OK(one);
        for (const QString& dir : {a, b})
            for (const QJsonObject& line : jsonLinesOf(dir + QStringLiteral("/metrics.jsonl")))
                QCOMPARE(line.value(QStringLiteral("towerTimes")).toArray().size(), 4);
        const QString d = checkpointsDiffer(checkpointAt(a, 3), checkpointAt(b, 3));
        QVERIFY2(d.isEmpty(), qPrintable(d));
    }

    // A validation set and an early stop across processes: every rank holds out the same images
    // and stops at the step rank 0's eval.jsonl decides, as one process with as many towers does.
    void earlyStopEqualsOneProcess()
    {
        const QString a = path(QStringLiteral("runs/p2-early")),
                      b = path(QStringLiteral("runs/p1-early"));
        const QStringList early{QStringLiteral("--steps"),      QStringLiteral("40"),
                                QStringLiteral("--eval-every"), QStringLiteral("2"),
                                QStringLiteral("--validation"), QStringLiteral("0.25"),
                                QStringLiteral("--patience"),   QStringLiteral("1")};
        const Run two = mpirun(
            2, train(a, QStringList{QStringLiteral("--towers"), QStringLiteral("1")} + early));
        VERIFY_OK(two);
        const Run one = alone(
            trainArgs(b, QStringList{QStringLiteral("--towers"), QStringLiteral("2")} + early));
        VERIFY_OK(one);
        CHECK_RUN(two.out.contains(QStringLiteral("holding out 80 of 320 training images")), two);
        const auto ea = jsonLinesOf(a + QStringLiteral("/eval.jsonl"));
        const auto eb = jsonLinesOf(b + QStringLiteral("/eval.jsonl"));
        QCOMPARE(ea.size(), eb.size());
        for (int i = 0; i < ea.size(); ++i) {
            QCOMPARE(ea[i].value(QStringLiteral("set")).toString(), QStringLiteral("validation"));
            QCOMPARE(ea[i].value(QStringLiteral("step")), eb[i].value(QStringLiteral("step")));
            QCOMPARE(ea[i].value(QStringLiteral("correct")),
                     eb[i].value(QStringLiteral("correct")));
        }
        const qint64 last = ea.last().value(QStringLiteral("step")).toInteger();
        CHECK_RUN(last < 40, two); // patience 1: the first evaluation no better stops it
        CHECK_RUN(two.out.contains(QStringLiteral("stopped early at step %1 of 40").arg(last)),
                  two);
        CHECK_RUN(one.out.contains(QStringLiteral("stopped early at step %1 of 40").arg(last)),
                  one);
        const QString d = checkpointsDiffer(checkpointAt(a, int(last)), checkpointAt(b, int(last)));
        QVERIFY2(d.isEmpty(), qPrintable(d));
    }

    // SIGTERM to mpirun (what a scheduler sends) stops every rank after a step; rank 0 writes a
    // checkpoint of that step; --resume under mpirun continues it to the tensors and losses of an
    // uninterrupted run.
    void resumeEqualsUninterrupted()
    {
        const QString stopped = path(QStringLiteral("runs/stopped")),
                      whole = path(QStringLiteral("runs/uninterrupted"));
        // A constant learning rate, so that the run's length (which the resume sets) changes
        // nothing else. The interrupted run is long: Open MPI forwards SIGTERM to the ranks only
        // odls_base_sigkill_timeout seconds after mpirun got it (SIGCONT, wait, SIGTERM, wait,
        // SIGKILL), and the run must still be training then.
        const QStringList options{QStringLiteral("--towers"),
                                  QStringLiteral("1"),
                                  QStringLiteral("--lr-schedule"),
                                  QStringLiteral("constant"),
                                  QStringLiteral("--lr"),
                                  QStringLiteral("0.05"),
                                  QStringLiteral("--checkpoint-every"),
                                  QStringLiteral("10")};
        const QString metrics = stopped + QStringLiteral("/metrics.jsonl");
        bool signalled = false;
        // 5 s between mpirun's SIGTERM to the ranks and its SIGKILL (default 1 s): plenty to
        // finish a step of ~10 ms and write a 1.5 MiB checkpoint on a loaded 2-core machine. Open
        // MPI also waits that long before it forwards the SIGTERM at all, so this is the time the
        // run trains on after the signal (longer would only make the test slower).
        const Run interrupted =
            mpirun(2,
                   train(stopped, options + QStringList{QStringLiteral("--steps"),
                                                        QStringLiteral("1000000")}),
                   kTimeoutMs, {QStringLiteral("OMPI_MCA_odls_base_sigkill_timeout=5")},
                   [&](QProcess& p, QElapsedTimer& clock) {
                       // Keep reading mpirun's output while polling the file (a full pipe would
                       // stall the ranks).
                       while (lineCount(metrics) < 12 && clock.elapsed() < 60000 &&
                              p.state() == QProcess::Running)
                           p.waitForFinished(20);
                       if (p.state() != QProcess::Running) return;
                       signalled = true;
                       ::kill(static_cast<pid_t>(p.processId()), SIGTERM);
                   });
        VERIFY_RAN(interrupted);
        CHECK_RUN(signalled, interrupted);
        qInfo("interrupted run: %lld ms", interrupted.ms);
        const QList<qint64> steps = checkpointSteps(stopped);
        CHECK_RUN(!steps.isEmpty() && steps.last() > 0, interrupted);
        const QStringList temporary = temporaryFiles(stopped);
        QVERIFY2(temporary.isEmpty(), qPrintable(temporary.join(QLatin1Char(' '))));
        // The stop wrote a checkpoint of the last step it trained (not only the last periodic
        // one). mpirun reads none of the ranks' output while it waits between its signals, and
        // what they print after the signal never reaches its output: the run folder is the
        // proof. (Rank 0 prints through a thread of its own, so a stalled output never keeps the
        // trainer from stopping cleanly.)
        const auto logged = jsonLinesOf(metrics);
        QVERIFY(!logged.isEmpty());
        const qint64 last = logged.last().value(QStringLiteral("step")).toInteger();
        if (steps.last() != last) qWarning().noquote() << interrupted.report();
        QVERIFY2(steps.last() == last,
                 qPrintable(QStringLiteral("the last step logged is %1, the newest checkpoint "
                                           "ckpt-%2: the stop wrote no checkpoint")
                                .arg(last)
                                .arg(steps.last())));

        // Resume to 10 steps beyond, and train an uninterrupted run just as long.
        const QString target = QString::number(last + 10);
        const Run resumed =
            mpirun(2, train(stopped, options + QStringList{QStringLiteral("--steps"), target,
                                                           QStringLiteral("--resume")}));
        VERIFY_OK(resumed);
        CHECK_RUN(resumed.out.contains(QStringLiteral("restored")) &&
                      resumed.out.contains(QStringLiteral("at step %1").arg(last)),
                  resumed);
        const Run reference =
            mpirun(2, train(whole, options + QStringList{QStringLiteral("--steps"), target}),
                   kTimeoutMs * 2);
        VERIFY_OK(reference);
        qInfo("stopped at step %lld; resumed to %s: %lld ms; uninterrupted: %lld ms", last,
              qPrintable(target), resumed.ms, reference.ms);

        const QString d =
            checkpointsDiffer(checkpointAt(stopped, last + 10), checkpointAt(whole, last + 10));
        QVERIFY2(d.isEmpty(), qPrintable(d));
        QString error;
        const auto x = lossesOf(stopped, &error), y = lossesOf(whole, &error);
        QVERIFY2(error.isEmpty(), qPrintable(error));
        QCOMPARE(x.size(), int(last + 10));
        QCOMPARE(x.keys(), y.keys());
        for (auto it = x.begin(); it != x.end(); ++it) {
            const double a = it.value(), b = y.value(it.key());
            QVERIFY2(std::memcmp(&a, &b, sizeof a) == 0,
                     qPrintable(QStringLiteral("step %1: loss %2 resumed, %3 uninterrupted")
                                    .arg(it.key())
                                    .arg(a, 0, 'g', 17)
                                    .arg(b, 0, 'g', 17)));
        }
    }

    // Rank 1 alone reads a damaged training file: it says so, rank 0 stops with its message, both
    // exit, mpirun fails - quickly, nobody waits forever in a collective.
    void faultInRankOneStopsBoth()
    {
        const QString bad = path(QStringLiteral("bad-data"));
        const fs::path folder = (bad + QStringLiteral("/fashion-mnist")).toStdString();
        test::writeIdxDataset(folder, 320, 96, 28, 28, false, 7);
        fs::resize_file(folder / "train-images-idx3-ubyte", 1000); // truncated
        QElapsedTimer clock;
        clock.start();
        const Run r = mpirun(2,
                             perRank(train(path(QStringLiteral("runs/fault")),
                                           {QStringLiteral("--towers"), QStringLiteral("1"),
                                            QStringLiteral("--steps"), QStringLiteral("6")}),
                                     {}, dataDir(), bad),
                             30000);
        const qint64 ms = clock.elapsed();
        VERIFY_RAN(r);
        qInfo("failed after %lld ms", ms);
        CHECK_RUN(ms < 30000, r);
        CHECK_RUN(r.exitCode != 0, r);
        for (const char* text : {"rank 1 failed:", "train-images-idx3-ubyte", "[rank 1]"}) {
            if (!r.output().contains(QLatin1String(text)))
                qWarning("no \"%s\" in the output", text);
            CHECK_RUN(r.output().contains(QLatin1String(text)), r);
        }
    }

    // Two processes on this machine whose towers fit in its free memory one at a time but not
    // together: every rank refuses at start, before taking the memory, and no folder is left.
    void aRunThatCannotFitOnTheMachineIsRefusedEverywhere()
    {
        // 1.2 GiB of fully connected weights: a tower takes 4.8 GiB at least with Nesterov
        // across processes (weights, gradients, momentum, the exchange).
        const char* network = R"({"name": "huge", "input": [28, 28, 1], "layers": [
            {"type": "flatten"}, {"type": "linear", "units": 65536},
            {"type": "linear", "units": 4096}, {"type": "linear", "units": "classes"}]})";
        const QString file = path(QStringLiteral("huge.json"));
        {
            QFile f(file);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(network);
        }
        const auto room = towers::engine::cpu::sharedHostMemory();
        if (!room) QSKIP("the system does not say how much memory is free");
        const auto model = towers::engine::buildModel(
            towers::engine::modelFromDefinition(network, "huge.json"), 10);
        const std::int64_t tower =
            towers::engine::hostMemoryNeed(*model, 1, 16, "nesterov", false, 2).floor();
        // Towers of which one process fits with room to spare and two do not by far (free
        // memory moves while other tests run).
        const auto count = std::int64_t(std::ceil(0.65 * double(room->bytes) / double(tower)));
        if (double(count * tower) > 0.8 * double(room->bytes) ||
            double(2 * count * tower) < 1.25 * double(room->bytes))
            QSKIP("no tower count fits one process and not two on this machine by a margin");
        const QString dir = path(QStringLiteral("runs/too-big"));
        QElapsedTimer clock;
        clock.start();
        const Run r = mpirun(2,
                             train(dir, {QStringLiteral("--towers"), QString::number(count),
                                         QStringLiteral("--model"), file,
                                         QStringLiteral("--optimizer"), QStringLiteral("nesterov"),
                                         QStringLiteral("--steps"), QStringLiteral("1")}),
                             60000);
        const qint64 ms = clock.elapsed();
        VERIFY_RAN(r);
        qInfo("%lld tower(s) a process; refused after %lld ms", qint64(count), ms);
        CHECK_RUN(r.exitCode == 1, r);
        int refusals = 0;
        for (const QString& line : r.output().split(QLatin1Char('\n')))
            if (line.contains(QStringLiteral("not enough memory for this run: its 2 processes on "
                                             "this machine need at least ")))
                ++refusals;
        CHECK_RUN(refusals == 2, r);
        CHECK_RUN(
            r.output().contains(QStringLiteral("gradients exchanged with the other processes")), r);
        CHECK_RUN(!QFileInfo::exists(dir), r);
    }

    // Rank 1 started with another option: every rank refuses at start, naming rank 1.
    void configurationMismatchNamesTheRank()
    {
        QElapsedTimer clock;
        clock.start();
        const Run r = mpirun(2,
                             perRank(train(path(QStringLiteral("runs/mismatch")),
                                           {QStringLiteral("--towers"), QStringLiteral("1"),
                                            QStringLiteral("--steps"), QStringLiteral("4")}),
                                     {QStringLiteral("--lr"), QStringLiteral("0.5")}),
                             30000);
        const qint64 ms = clock.elapsed();
        VERIFY_RAN(r);
        qInfo("refused after %lld ms", ms);
        CHECK_RUN(ms < 30000, r);
        CHECK_RUN(r.exitCode == 2, r);
        // Both ranks refuse, naming the setting and what it is on each rank: rank 0 and rank 1
        // (its lines marked).
        int unmarked = 0, marked = 0;
        for (const QString& line : r.output().split(QLatin1Char('\n')))
            if (line.contains(QStringLiteral("the processes of the run were started differently: "
                                             "--lr is not given on rank 0, 0.5 on rank 1.")))
                ++(line.startsWith(QStringLiteral("[rank 1] ")) ? marked : unmarked);
        CHECK_RUN(unmarked == 1 && marked == 1, r);
    }

    // The same settings spelt otherwise on each rank (--lr=0.1 and --lr 1e-1, 10% and 0.1, the
    // options in another order, the run folder by another path) are the same run; the same words
    // that mean different things are not.
    void settingsCompareByMeaning()
    {
        const QString dir = path(QStringLiteral("runs/spelt"));
        const Run same = mpmd(
            train(dir, {QStringLiteral("--towers"), QStringLiteral("1"), QStringLiteral("--steps"),
                        QStringLiteral("2"), QStringLiteral("--lr=0.1"),
                        QStringLiteral("--validation"), QStringLiteral("10%")}),
            QStringList{QStringLiteral(TOWERS_CLI), QStringLiteral("train"),
                        QStringLiteral("--validation"), QStringLiteral("0.1"),
                        QStringLiteral("--lr"), QStringLiteral("1e-1"), QStringLiteral("--steps"),
                        QStringLiteral("2"), QStringLiteral("--towers"), QStringLiteral("01")} +
                trainArgs(dir + QStringLiteral("/../spelt/")).mid(1));
        VERIFY_OK(same);
        const QJsonObject config = jsonFile(dir + QStringLiteral("/config.json"));
        QCOMPARE(config.value(QStringLiteral("processes")), QJsonValue(2));
        QCOMPARE(checkpointSteps(dir).last(), qint64(2));

        // --gpus 0,1 and --gpus 0 --gpus 1 were the same text to the comparison of command
        // lines, but the second means GPU 1 (the last given, as for every option): refused before
        // anything looks for a GPU.
        const QStringList gpus{QStringLiteral("--towers"), QStringLiteral("1"),
                               QStringLiteral("--steps"), QStringLiteral("2"),
                               QStringLiteral("--gpus")};
        const QString other = path(QStringLiteral("runs/gpus"));
        const Run apart =
            mpmd(train(other, gpus + QStringList{QStringLiteral("0,1")}),
                 train(other, gpus + QStringList{QStringLiteral("0"), QStringLiteral("--gpus"),
                                                 QStringLiteral("1")}));
        VERIFY_RAN(apart);
        CHECK_RUN(apart.exitCode == 2, apart);
        CHECK_RUN(apart.err.contains(QStringLiteral("--gpus is 0,1 on rank 0, 1 on rank 1.")),
                  apart);
        CHECK_RUN(!QFileInfo::exists(other), apart);
    }

    // lr-find under mpirun would run the whole test on each rank: refused once (rank 0), saying
    // how to measure the rate of the run's towers in one process.
    void lrFindIsRefusedOnce()
    {
        const Run r = mpirun(2,
                             {QStringLiteral(TOWERS_CLI), QStringLiteral("lr-find"),
                              QStringLiteral("--dataset"), QStringLiteral("fashion-mnist"),
                              QStringLiteral("--towers"), QStringLiteral("1"),
                              QStringLiteral("--steps"), QStringLiteral("10")},
                             30000);
        VERIFY_RAN(r);
        CHECK_RUN(r.exitCode == 2, r);
        CHECK_RUN(r.output().count(QStringLiteral("towers-cli lr-find: error: the range test runs "
                                                  "in one process")) == 1,
                  r);
        CHECK_RUN(r.output().contains(QStringLiteral("towers-cli lr-find --towers 2 ...")), r);
        CHECK_RUN(!r.output().contains(QStringLiteral("learning-rate range test")), r);
    }

    // Rank 1 stops (SIGSTOP) in the middle of a run: rank 0's wait ends after TOWERS_MPI_TIMEOUT
    // with rank 1 named as the one that did not come, and why it cannot say (it does not
    // answer), not with rank 0 named as if it were at fault.
    void timeoutNamesTheRankThatDidNotCome()
    {
        const QString dir = path(QStringLiteral("runs/stalled"));
        const QString metrics = dir + QStringLiteral("/metrics.jsonl");
        pid_t stopped = 0;
        const Run r = mpirun(
            2,
            train(dir, {QStringLiteral("--towers"), QStringLiteral("1"), QStringLiteral("--steps"),
                        QStringLiteral("1000000")}),
            // The limit holds from the start: long enough that a loaded machine's start-up, a
            // data load or a checkpoint never reaches it, short enough for a test.
            60000, {QStringLiteral("TOWERS_MPI_TIMEOUT=8")},
            [&](QProcess& p, QElapsedTimer& clock) {
                while (lineCount(metrics) < 3 && clock.elapsed() < 30000 &&
                       p.state() == QProcess::Running)
                    p.waitForFinished(20);
                for (const pid_t pid : descendants(static_cast<pid_t>(p.processId()))) {
                    QFile variables(QStringLiteral("/proc/%1/environ").arg(pid));
                    QFile cmdline(QStringLiteral("/proc/%1/cmdline").arg(pid));
                    if (variables.open(QIODevice::ReadOnly) && cmdline.open(QIODevice::ReadOnly) &&
                        cmdline.readAll().contains("towers-cli") &&
                        variables.readAll().contains(QByteArray("OMPI_COMM_WORLD_RANK=1\0", 23)))
                        stopped = pid;
                }
                if (stopped) ::kill(stopped, SIGSTOP);
            });
        if (stopped) ::kill(stopped, SIGKILL); // in case mpirun left it
        VERIFY_RAN(r);
        CHECK_RUN(stopped != 0, r);
        CHECK_RUN(r.exitCode != 0, r);
        const QString said = r.output();
        CHECK_RUN(said.contains(QRegularExpression(
                      QStringLiteral("towers-cli train: error: rank 1 did not come to (averaging "
                                     "gradients|the stop vote|an exchange between the processes): "
                                     "rank 0 \\(on [^)]*\\) waited [0-9]+ s for it there \\(rank "
                                     "1 on \\S+ does not answer"))),
                  r);
        CHECK_RUN(!said.contains(QStringLiteral("while averaging gradients (rank 0")), r);
    }

    // --gpus all with two processes on one machine would give both every GPU: both refuse it
    // (exit 2), saying how the processes share the GPUs instead, before any folder is made.
    void allGpusForSeveralProcessesIsRefused()
    {
        const QString dir = path(QStringLiteral("runs/all-gpus"));
        const Run r = mpirun(2,
                             train(dir, {QStringLiteral("--gpus"), QStringLiteral("all"),
                                         QStringLiteral("--steps"), QStringLiteral("2")}),
                             30000);
        VERIFY_RAN(r);
        CHECK_RUN(r.exitCode == 2, r);
        CHECK_RUN(r.output().contains(QStringLiteral(
                      "--gpus all would give each of the 2 processes on this machine every GPU")),
                  r);
        CHECK_RUN(!QFileInfo::exists(dir), r);
    }

    // A 2-process run resumed by towers-cli alone is refused, saying how to continue it.
    void resumeWithAnotherProcessCountIsRefused()
    {
        const QString dir = path(QStringLiteral("runs/two-process"));
        const Run two = mpirun(2, train(dir, {QStringLiteral("--towers"), QStringLiteral("1"),
                                              QStringLiteral("--steps"), QStringLiteral("2")}));
        VERIFY_OK(two);
        const Run r = alone({QStringLiteral("train"), QStringLiteral("--resume"),
                             QStringLiteral("--run-dir"), dir});
        VERIFY_RAN(r);
        CHECK_RUN(r.exitCode == 2, r);
        CHECK_RUN(r.err.contains(QStringLiteral("mpirun -np 2")), r);
    }

    // --resume-or-start: starts in an empty folder, continues it the next time.
    void resumeOrStart()
    {
        const QString dir = path(QStringLiteral("runs/requeued"));
        const auto job = [&](const char* steps) {
            return train(dir, {QStringLiteral("--towers"), QStringLiteral("1"),
                               QStringLiteral("--resume-or-start"), QStringLiteral("--steps"),
                               QLatin1String(steps)});
        };
        const Run first = mpirun(2, job("4"));
        VERIFY_OK(first);
        CHECK_RUN(QFile::exists(dir + QStringLiteral("/config.json")), first);
        CHECK_RUN(first.out.contains(QStringLiteral("finished at step 4")), first);
        CHECK_RUN(!first.out.contains(QStringLiteral("restored")), first);
        QCOMPARE(checkpointSteps(dir).last(), qint64(4));
        const Run second = mpirun(2, job("8"));
        VERIFY_OK(second);
        CHECK_RUN(second.out.contains(QStringLiteral("restored")) &&
                      second.out.contains(QStringLiteral("at step 4")),
                  second);
        CHECK_RUN(second.out.contains(QStringLiteral("finished at step 8")), second);
        QCOMPARE(checkpointSteps(dir).last(), qint64(8));
        QCOMPARE(jsonLinesOf(dir + QStringLiteral("/metrics.jsonl")).size(), 8);
    }

    // The MPI build started without a launcher trains alone.
    void aloneWithoutLauncher()
    {
        const QString dir = path(QStringLiteral("runs/alone"));
        const Run r = alone(trainArgs(dir, {QStringLiteral("--towers"), QStringLiteral("1"),
                                            QStringLiteral("--steps"), QStringLiteral("2")}));
        VERIFY_OK(r);
        CHECK_RUN(!r.out.contains(QStringLiteral("processes x")), r);
        QCOMPARE(jsonFile(dir + QStringLiteral("/config.json")).value(QStringLiteral("processes")),
                 QJsonValue(1));
        QCOMPARE(checkpointSteps(dir).last(), qint64(2));
    }
};

QTEST_GUILESS_MAIN(TestMpiTraining)
#include "tst_mpi_training.moc"
