// towers-cli train stopped, as processes on the small generated dataset of
// train_command_support.h: divergence (exit 1, last good checkpoint kept), Ctrl-C (exit 130,
// checkpoint written), SIGTERM and SIGHUP, nohup, a signal while the run starts, its output closed,
// a stop during the final evaluation; a second trainer on a folder in use, two runs started in the
// same second. The rest of towers-cli train is in tst_train_command.cpp.
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QTest>
#include <QThread>
#include <csignal>
#include <filesystem>

#include "engine/train/checkpoint.h"
#include "train_command_support.h"

namespace fs = std::filesystem;
using namespace towers;

class TestTrainCommandStops : public test::TrainCommandTest
{
    Q_OBJECT

private slots:
    void divergenceStopsCleanly()
    {
        const QString dir = path(QStringLiteral("runs/diverge"));
        const CliRun r = run(
            small(dir) + QStringList{"--steps", "50", "--lr", "1e5", "--checkpoint-every", "1"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(QStringLiteral("diverged")), qPrintable(r.err));
        // What to change, as a command: a new run like it, a tenth of the rate, clipped.
        QVERIFY2(r.err.contains(QStringLiteral("a resume would diverge again: ")) &&
                     r.err.contains(QStringLiteral("e.g. towers-cli train --like ") + dir +
                                    QStringLiteral(" --lr 1e+04 --clip-grad-norm 1\n")),
                 qPrintable(r.err));
        // Whatever checkpoints were written hold the last good (finite) state and load.
        for (const auto& f : fs::directory_iterator(fs::path(dir.toStdString()) / "checkpoints")) {
            const auto c = engine::readCheckpoint(f.path());
            for (const auto& [name, t] : c.weights)
                if (t.dtype() == engine::DType::Float32)
                    for (std::int64_t i = 0; i < t.numel(); ++i)
                        QVERIFY2(std::isfinite(t.at(i)), name.c_str());
        }
    }

    void interruptWritesCheckpoint()
    {
        const QString dir = path(QStringLiteral("runs/interrupted"));
        const CliRun r =
            run(small(dir) + QStringList{"--steps", "1000000", "--checkpoint-every", "0"}, 120000,
                [](QProcess& p) {
                    // Wait for the first step's event, then Ctrl-C.
                    QByteArray seen;
                    while (!seen.contains("\"event\":\"step\"") && p.waitForReadyRead(60000))
                        seen += p.peek(1 << 20);
                    ::kill(static_cast<pid_t>(p.processId()), SIGINT);
                });
        QCOMPARE(r.exitCode, 130);
        QCOMPARE(r.events.last().value(QStringLiteral("event")).toString(),
                 QStringLiteral("stopped"));
        const int step = r.events.last().value(QStringLiteral("step")).toInt();
        QVERIFY(step >= 2);
        QCOMPARE(checkpointAt(dir, step).info.step, std::int64_t(step));
    }

    // Waits in `p` for a --json event line containing `needle`.
    static bool waitForEvent(QProcess& p, const QByteArray& needle, int ms = 60000)
    {
        QByteArray seen;
        QElapsedTimer t;
        t.start();
        while (!seen.contains(needle) && t.elapsed() < ms) {
            if (!p.waitForReadyRead(1000) && p.state() != QProcess::Running) return false;
            seen = p.peek(1 << 24);
        }
        return seen.contains(needle);
    }

    static std::vector<std::int64_t> loggedSteps(const QString& runDir)
    {
        std::vector<std::int64_t> steps;
        QFile f(runDir + QStringLiteral("/metrics.jsonl"));
        if (!f.open(QIODevice::ReadOnly)) return steps;
        for (const QByteArray& line : f.readAll().split('\n'))
            if (!line.isEmpty())
                steps.push_back(QJsonDocument::fromJson(line)
                                    .object()
                                    .value(QStringLiteral("step"))
                                    .toInteger());
        return steps;
    }

    // A second trainer on a folder in use is refused (a resume and a new run alike), naming the
    // folder and the first one's PID; the first finishes with its run intact (every step logged
    // once).
    void secondTrainerIsRefused()
    {
        const QString dir = path(QStringLiteral("runs/owned"));
        QString busyResume, busyNew;
        int resumeCode = -2, newCode = -2;
        qint64 firstPid = 0;
        const CliRun first =
            run(small(dir) + QStringList{"--steps", "1000000", "--checkpoint-every", "3"}, 120000,
                [&](QProcess& p) {
                    firstPid = p.processId();
                    QVERIFY(waitForEvent(p, "\"event\":\"checkpoint\""));
                    const CliRun r = run({QStringLiteral("train"), QStringLiteral("--resume"),
                                          QStringLiteral("--run-dir"), dir},
                                         60000);
                    resumeCode = r.exitCode;
                    busyResume = r.err;
                    const CliRun n = run(small(dir) + QStringList{"--steps", "3"}, 60000);
                    newCode = n.exitCode;
                    busyNew = n.err;
                    ::kill(static_cast<pid_t>(p.processId()), SIGTERM);
                });
        QCOMPARE(resumeCode, 1);
        QCOMPARE(newCode, 1);
        for (const QString& err : {busyResume, busyNew}) {
            QVERIFY2(err.contains(dir) &&
                         err.contains(QStringLiteral("in use by process %1").arg(firstPid)),
                     qPrintable(err));
            QVERIFY2(err.contains(QStringLiteral("towers-cli")), qPrintable(err));
        }
        QCOMPARE(first.exitCode, 143); // 128 + SIGTERM
        QCOMPARE(first.events.last().value(QStringLiteral("event")).toString(),
                 QStringLiteral("stopped"));
        const int step = first.events.last().value(QStringLiteral("step")).toInt();
        QCOMPARE(checkpointAt(dir, step).info.step, std::int64_t(step));
        const auto steps = loggedSteps(dir);
        QVERIFY(!steps.empty());
        for (std::size_t i = 1; i < steps.size(); ++i)
            QVERIFY2(steps[i] > steps[i - 1], "a step logged twice");
    }

    // Two runs started in the same second with default folders get two folders.
    void sameSecondDefaultFolders()
    {
        const QStringList args{QStringLiteral("train"),
                               QStringLiteral("--dataset"),
                               QStringLiteral("fashion-mnist"),
                               QStringLiteral("--batch-size"),
                               QStringLiteral("16"),
                               QStringLiteral("--steps"),
                               QStringLiteral("2"),
                               QStringLiteral("--augment"),
                               QStringLiteral("none"),
                               QStringLiteral("--json")};
        QProcess a, b;
        for (QProcess* p : {&a, &b}) {
            p->setProgram(QStringLiteral(TOWERS_CLI));
            p->setArguments(args);
            QProcessEnvironment env = environment();
            env.insert(QStringLiteral("TOWERS_RUNS"), path(QStringLiteral("same-second")));
            p->setProcessEnvironment(env);
        }
        a.start();
        b.start();
        QVERIFY(a.waitForFinished(120000) && b.waitForFinished(120000));
        QCOMPARE(a.exitCode(), 0);
        QCOMPARE(b.exitCode(), 0);
        const QString da = jsonLines(QString::fromUtf8(a.readAllStandardOutput()))
                               .last()
                               .value(QStringLiteral("run_dir"))
                               .toString();
        const QString db = jsonLines(QString::fromUtf8(b.readAllStandardOutput()))
                               .last()
                               .value(QStringLiteral("run_dir"))
                               .toString();
        QVERIFY2(da != db, qPrintable(da));
        for (const QString& d : {da, db}) {
            QCOMPARE(loggedSteps(d), (std::vector<std::int64_t>{2}));
            QCOMPARE(checkpointAt(d, 2).info.step, std::int64_t(2));
        }
    }

    // SIGTERM and SIGHUP stop like Ctrl-C: a checkpoint, and 128 + the signal's number.
    void signalsStopWithTheirCode_data()
    {
        QTest::addColumn<int>("signal");
        QTest::newRow("SIGTERM") << int(SIGTERM);
        QTest::newRow("SIGHUP") << int(SIGHUP);
    }

    void signalsStopWithTheirCode()
    {
        QFETCH(int, signal);
        const QString dir = path(QStringLiteral("runs/signal-%1").arg(signal));
        const CliRun r =
            run(small(dir) + QStringList{"--steps", "1000000", "--checkpoint-every", "0"}, 120000,
                [signal](QProcess& p) {
                    QVERIFY(waitForEvent(p, "\"event\":\"step\""));
                    ::kill(static_cast<pid_t>(p.processId()), signal);
                });
        QCOMPARE(r.exitCode, 128 + signal);
        QCOMPARE(r.events.last().value(QStringLiteral("event")).toString(),
                 QStringLiteral("stopped"));
        const int step = r.events.last().value(QStringLiteral("step")).toInt();
        QCOMPARE(checkpointAt(dir, step).info.step, std::int64_t(step));
    }

    // A signal ignored when towers-cli starts stays ignored: under nohup a SIGHUP (the terminal
    // closing) leaves the run training, and SIGTERM still stops it with a checkpoint.
    void nohupKeepsTraining()
    {
        const QString dir = path(QStringLiteral("runs/nohup"));
        QProcess p;
        p.setProgram(QStringLiteral("nohup"));
        p.setArguments(QStringList{QStringLiteral(TOWERS_CLI)} + small(dir) +
                       QStringList{"--steps", "1000000", "--checkpoint-every", "0"});
        p.setProcessEnvironment(environment());
        p.start();
        QVERIFY(p.waitForStarted(10000));
        QVERIFY(waitForEvent(p, "\"event\":\"step\""));
        const pid_t pid = static_cast<pid_t>(p.processId()); // nohup runs towers-cli in its place
        ::kill(pid, SIGHUP);
        const int seen = int(p.peek(1 << 24).count("\"event\":\"step\""));
        QElapsedTimer t;
        t.start();
        while (int(p.peek(1 << 24).count("\"event\":\"step\"")) < seen + 2 && t.elapsed() < 60000)
            QVERIFY2(p.waitForReadyRead(1000) || p.state() == QProcess::Running,
                     "towers-cli stopped after a SIGHUP it was started ignoring");
        QCOMPARE(p.state(), QProcess::Running);
        ::kill(pid, SIGTERM);
        QVERIFY(p.waitForFinished(120000));
        QCOMPARE(p.exitCode(), 128 + SIGTERM);
        const auto events = jsonLines(QString::fromUtf8(p.readAllStandardOutput()));
        QCOMPARE(events.last().value(QStringLiteral("event")).toString(),
                 QStringLiteral("stopped"));
        const int step = events.last().value(QStringLiteral("step")).toInt();
        QCOMPARE(checkpointAt(dir, step).info.step, std::int64_t(step));
    }

    // A Ctrl-C the moment the run folder appears (its lock taken, while the session still starts:
    // the towers being built) stops the run as one later does: exit 130, the folder a listed run
    // with its configuration and a checkpoint, not a lock and nothing else. With the handlers set
    // only once the session had started, SIGINT killed the process there.
    void aSignalWhileStartingStopsCleanly()
    {
        const QString dir = path(QStringLiteral("runs/early-signal"));
        QProcess p;
        p.setProgram(QStringLiteral(TOWERS_CLI));
        p.setArguments(small(dir) + QStringList{"--steps", "1000000", "--checkpoint-every", "0"});
        p.setProcessEnvironment(environment());
        test::withDefaultSignals(p);
        p.start();
        QVERIFY(p.waitForStarted(10000));
        const QString lock = dir + QStringLiteral("/towers.lock");
        QElapsedTimer t;
        t.start();
        while (!QFileInfo::exists(lock) && p.state() == QProcess::Running && t.elapsed() < 60000)
            QThread::usleep(200);
        QVERIFY2(QFileInfo::exists(lock), "the run folder's lock never appeared");
        ::kill(static_cast<pid_t>(p.processId()), SIGINT);
        QVERIFY(p.waitForFinished(120000));
        QCOMPARE(p.exitStatus(), QProcess::NormalExit); // not killed by the signal
        QCOMPARE(p.exitCode(), 128 + SIGINT);
        QVERIFY(QFileInfo::exists(dir + QStringLiteral("/config.json")));
        const auto events = jsonLines(QString::fromUtf8(p.readAllStandardOutput()));
        QVERIFY(!events.isEmpty());
        QCOMPARE(events.last().value(QStringLiteral("event")).toString(),
                 QStringLiteral("stopped"));
        const int step = events.last().value(QStringLiteral("step")).toInt();
        QCOMPARE(checkpointAt(dir, step).info.step, std::int64_t(step));
    }

    // Its output's reader going away (`towers-cli train | head`) stops a run as SIGTERM does: a
    // checkpoint of the step it reached (killed by SIGPIPE, it would leave none with
    // --checkpoint-every 0), 141 = 128 + SIGPIPE, and the end on the error stream.
    void closedOutputStops()
    {
        const QString dir = path(QStringLiteral("runs/closed-output"));
        QStringList args =
            small(dir) + QStringList{"--steps", "1000000", "--checkpoint-every", "0"};
        args.removeAll(QStringLiteral("--json"));
        QProcess p;
        p.setProgram(QStringLiteral("/bin/bash"));
        // grep leaves after the second step line; the pipeline's status is towers-cli's.
        p.setArguments(QStringList{QStringLiteral("-c"),
                                   QStringLiteral("\"$0\" \"$@\" | grep -m 2 ', loss = '; "
                                                  "exit ${PIPESTATUS[0]}"),
                                   QStringLiteral(TOWERS_CLI)} +
                       args);
        p.setProcessEnvironment(environment());
        p.start();
        QVERIFY(p.waitForFinished(120000));
        const QString out = QString::fromUtf8(p.readAllStandardOutput());
        const QString err = QString::fromUtf8(p.readAllStandardError());
        QCOMPARE(p.exitCode(), 128 + SIGPIPE);
        QCOMPARE(out.count(QStringLiteral(", loss = ")), 2);
        QVERIFY2(err.contains(QStringLiteral("the output was closed")), qPrintable(err));
        const auto stopped =
            QRegularExpression(QStringLiteral("stopped at step (\\d+) of ")).match(err);
        QVERIFY2(stopped.hasMatch(), qPrintable(err));
        const int step = stopped.captured(1).toInt();
        QCOMPARE(checkpointAt(dir, step).info.step, std::int64_t(step));
        QVERIFY2(err.contains(QStringLiteral("continue with: towers-cli train --resume")),
                 qPrintable(err));
    }

    // A stop during the final evaluation ends it at once (the checkpoint is already written) and
    // exits with the signal's code; nothing of the partial evaluation is recorded.
    void stopDuringTheFinalEvaluation()
    {
        const QString data = path(QStringLiteral("big-test"));
        test::writeIdxDataset((data + QStringLiteral("/fashion-mnist")).toStdString(), 64, 40000,
                              28, 28, true, 5);
        const QString dir = path(QStringLiteral("runs/final-eval"));
        QElapsedTimer sinceSignal;
        const CliRun r = run(small(dir) + QStringList{"--steps", "2", "--data-dir", data}, 120000,
                             [&](QProcess& p) {
                                 QVERIFY(waitForEvent(p, "\"event\":\"checkpoint\""));
                                 ::kill(static_cast<pid_t>(p.processId()), SIGTERM);
                                 sinceSignal.start();
                             });
        const qint64 ms = sinceSignal.elapsed();
        QCOMPARE(r.exitCode, 143);
        for (const auto& e : r.events)
            QVERIFY(e.value(QStringLiteral("event")).toString() != QLatin1String("eval"));
        QCOMPARE(r.events.last().value(QStringLiteral("event")).toString(),
                 QStringLiteral("stopped"));
        QCOMPARE(checkpointAt(dir, 2).info.step, std::int64_t(2));
        QVERIFY(!QFile::exists(dir + QStringLiteral("/eval.jsonl")) ||
                QFileInfo(dir + QStringLiteral("/eval.jsonl")).size() == 0);
        qInfo("stopped %lld ms after SIGTERM", ms);
    }
};

QTEST_GUILESS_MAIN(TestTrainCommandStops)
#include "tst_train_command_stops.moc"
