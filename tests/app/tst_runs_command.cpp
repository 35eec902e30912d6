// towers-cli runs: the runs of a runs folder (--runs-dir, else $TOWERS_RUNS), newest first, each
// with its model, dataset, step, latest test accuracy, checkpoints and the process training it;
// a damaged run is listed with its problem, never hiding the others; one run in detail by name or
// path, with every checkpoint; --json; clear errors for what is not a run.
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <optional>

#include <cerrno>
#include <cstring>
#include <unistd.h>

#include "cli_process.h"
#include "engine/models/registry.h"
#include "engine/train/checkpoint.h"
#include "engine/train/run_directory.h"
#include "engine/train/run_lock.h"
#include "engine/train/train_config.h"

namespace eng = towers::engine;

namespace {

// A run of `steps` logged steps out of `total`, an evaluation at the end and two checkpoints.
void makeRun(const QString& folder, std::int64_t steps, std::int64_t total, double accuracy,
             const std::string& initFrom = {}, bool evaluated = true)
{
    const eng::RunDirectory dir(folder.toStdString());
    eng::TrainConfig c;
    c.initFrom = initFrom;
    c.model = "fashion-fast";
    c.dataset = "fashion-mnist";
    c.towers = 2;
    c.batchPerTower = 32;
    c.steps = total;
    dir.writeConfig(c.toJson());
    for (std::int64_t s = 1; s <= steps; ++s)
        dir.appendMetrics("{\"step\":" + std::to_string(s) +
                          ",\"totalSteps\":" + std::to_string(total) +
                          ",\"epoch\":0.5,\"loss\":" + std::to_string(1.0 / double(s)) + "}");
    if (evaluated)
        dir.appendEval("{\"step\":" + std::to_string(steps) +
                       ",\"precisionAt1\":" + std::to_string(accuracy) + "}");
    for (std::int64_t s : {steps / 2, steps}) {
        QFile f(QString::fromStdString(dir.checkpointPath(s).string()));
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(QByteArray(2048, 'x'));
    }
}

} // namespace

class TestRunsCommand : public QObject
{
    Q_OBJECT

    using Result = towers::test::CliResult;

    static Result run(const QStringList& args, const QString& runsEnv = {})
    {
        return towers::test::runCliProcess(
            QStringLiteral(TOWERS_CLI), QStringList{QStringLiteral("runs")} + args,
            runsEnv.isEmpty() ? QStringList{}
                              : QStringList{QStringLiteral("TOWERS_RUNS=") + runsEnv},
            -1, 30000);
    }

private slots:
    // A runs folder that cannot be read is said so, exit 1: it was listed as "No runs in ...".
    void unreadableFolder()
    {
        QTemporaryDir root;
        QFile file(root.filePath(QStringLiteral("afile")));
        QVERIFY(file.open(QIODevice::WriteOnly));
        file.close();
        for (const QString& runs : {root.filePath(QStringLiteral("afile")),
                                    root.filePath(QStringLiteral("afile/runs"))}) {
            const Result r = run({}, runs);
            QCOMPARE(r.exitCode, 1);
            QVERIFY2(!r.out.contains(QStringLiteral("No runs")), qPrintable(r.out));
            QVERIFY2(r.err.contains(runs) &&
                         (r.err.contains(QStringLiteral("is not a folder")) ||
                          r.err.contains(QString::fromLocal8Bit(std::strerror(ENOTDIR)))),
                     qPrintable(r.err));
        }
        if (::geteuid() == 0)
            QSKIP("running as root, for whom no folder is unreadable: the folder in the runs "
                  "folder that cannot be entered is not tried");
        QVERIFY(QDir(root.path()).mkpath(QStringLiteral("runs/locked")));
        QVERIFY(QFile::setPermissions(root.filePath(QStringLiteral("runs/locked")),
                                      QFileDevice::WriteOwner));
        const Result r = run({}, root.filePath(QStringLiteral("runs")));
        QFile::setPermissions(root.filePath(QStringLiteral("runs/locked")),
                              QFileDevice::ReadOwner | QFileDevice::WriteOwner |
                                  QFileDevice::ExeOwner);
        QCOMPARE(r.exitCode, 0);
        QVERIFY2(r.err.contains(QStringLiteral("cannot look into ") +
                                root.filePath(QStringLiteral("runs/locked"))),
                 qPrintable(r.err));
    }

    void emptyFolder()
    {
        QTemporaryDir root;
        const Result r = run({}, root.path());
        QCOMPARE(r.exitCode, 0);
        QVERIFY2(r.out.contains(QStringLiteral("No runs in ") + root.path()), qPrintable(r.out));
    }

    // With no home folder known (HOME unset, as under some service managers) and no
    // TOWERS_RUNS, there is no runs folder: runs, a new run without --run-dir and a resume
    // without one say so (exit 1) instead of taking the working folder or '/' for it.
    void noHomeFolderNoRunsFolder()
    {
        QTemporaryDir here;
        const auto cli = [&](const QStringList& args) {
            QProcess p;
            QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
            for (const char* name : {"HOME", "TOWERS_RUNS", "XDG_DATA_HOME"})
                e.remove(QString::fromLatin1(name));
            p.setProcessEnvironment(e);
            p.setWorkingDirectory(here.path());
            p.start(QStringLiteral(TOWERS_CLI), args);
            if (!p.waitForFinished(60000)) p.kill();
            return std::pair{p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1,
                             QString::fromUtf8(p.readAllStandardError())};
        };
        // A folder in the working folder that looks like a run is no run of a runs folder.
        makeRun(here.filePath(QStringLiteral("stray")), 4, 4, 0.5);
        for (const auto& [args, said] :
             {std::pair{QStringList{QStringLiteral("runs")},
                        QStringLiteral("towers-cli runs: no runs folder is known (no home folder: "
                                       "HOME is not set): name one with TOWERS_RUNS, or with "
                                       "--runs-dir")},
              std::pair{QStringList{QStringLiteral("train"), QStringLiteral("--dataset"),
                                    QStringLiteral("fashion-mnist"), QStringLiteral("--steps"),
                                    QStringLiteral("1")},
                        QStringLiteral("name one with TOWERS_RUNS, or the run's folder with "
                                       "--run-dir")},
              std::pair{QStringList{QStringLiteral("train"), QStringLiteral("--resume")},
                        QStringLiteral("name one with TOWERS_RUNS, or the run with --run-dir")}}) {
            const auto [code, err] = cli(args);
            QVERIFY2(code == 1 && err.contains(said), qPrintable(args.join(' ') + ": " + err));
        }
        QCOMPARE(QDir(here.path()).entryList(QDir::Dirs | QDir::NoDotAndDotDot),
                 QStringList{QStringLiteral("stray")});
        // A run named as a folder still works.
        const auto [code, err] =
            cli({QStringLiteral("runs"), here.filePath(QStringLiteral("stray"))});
        QVERIFY2(code == 0, qPrintable(err));
    }

    void listsRunsNewestFirst()
    {
        QTemporaryDir root;
        const QDir dir(root.path());
        makeRun(dir.filePath(QStringLiteral("older")), 40, 100, 0.5);
        QTest::qWait(1100); // a later modification time
        makeRun(dir.filePath(QStringLiteral("newer")), 60, 60, 0.8765);
        // A damaged run: listed with its problem, the others still shown.
        QVERIFY(dir.mkpath(QStringLiteral("damaged")));
        QFile bad(dir.filePath(QStringLiteral("damaged/config.json")));
        QVERIFY(bad.open(QIODevice::WriteOnly));
        bad.write("{\"model\": ");
        bad.close();
        // Not a run (no config.json): not listed.
        QVERIFY(dir.mkpath(QStringLiteral("notes")));

        // --runs-dir, and $TOWERS_RUNS alike.
        for (const Result& r :
             {run({QStringLiteral("--runs-dir"), root.path()}), run({}, root.path())}) {
            QCOMPARE(r.exitCode, 0);
            const QStringList lines = r.out.split(QLatin1Char('\n'));
            const auto at = [&](const QString& name) {
                for (int i = 0; i < lines.size(); ++i)
                    if (lines[i].startsWith(name + QLatin1Char(' '))) return i;
                return -1;
            };
            QVERIFY2(at(QStringLiteral("newer")) > 0 && at(QStringLiteral("older")) > 0 &&
                         at(QStringLiteral("damaged")) > 0,
                     qPrintable(r.out));
            QVERIFY2(at(QStringLiteral("newer")) < at(QStringLiteral("older")), qPrintable(r.out));
            QCOMPARE(at(QStringLiteral("notes")), -1);
            const QString newer = lines[at(QStringLiteral("newer"))];
            QVERIFY2(newer.contains(QStringLiteral("fashion-fast")) &&
                         newer.contains(QStringLiteral("fashion-mnist")) &&
                         newer.contains(QStringLiteral("60 / 60  finished")) &&
                         newer.contains(QStringLiteral("87.65 % @ 60")),
                     qPrintable(newer));
            QVERIFY2(
                lines[at(QStringLiteral("older"))].contains(QStringLiteral("40 / 100  stopped")),
                qPrintable(r.out));
            const int damaged = at(QStringLiteral("damaged"));
            QVERIFY2(lines[damaged].contains(QStringLiteral("(unreadable)")) &&
                         lines[damaged].contains(QStringLiteral(" unreadable ")),
                     qPrintable(r.out));
            QVERIFY2(lines[damaged + 1].contains(QStringLiteral("problem: ")) &&
                         lines[damaged + 1].contains(QStringLiteral("config.json")),
                     qPrintable(r.out));
        }

        const Result json =
            run({QStringLiteral("--runs-dir"), root.path(), QStringLiteral("--json")});
        QCOMPARE(json.exitCode, 0);
        const QJsonArray runs = QJsonDocument::fromJson(json.out.toUtf8())
                                    .object()
                                    .value(QStringLiteral("runs"))
                                    .toArray();
        QCOMPARE(runs.size(), 3);
        QJsonObject newest;
        for (const auto& v : runs)
            if (v.toObject().value(QStringLiteral("name")) == QStringLiteral("newer"))
                newest = v.toObject();
        QCOMPARE(newest.value(QStringLiteral("step")).toInteger(), 60);
        QCOMPARE(newest.value(QStringLiteral("total_steps")).toInteger(), 60);
        QCOMPARE(newest.value(QStringLiteral("test_accuracy")).toDouble(), 0.8765);
        QCOMPARE(newest.value(QStringLiteral("towers")).toInt(), 2);
        QCOMPARE(newest.value(QStringLiteral("checkpoints")).toInt(), 2);
        QVERIFY(newest.value(QStringLiteral("training_now")).isNull());
        QCOMPARE(newest.value(QStringLiteral("state")).toString(), QStringLiteral("finished"));
    }

    // A run at its last step whose evaluation there a stop cut short is stopped, not finished
    // (a resume makes that evaluation); so is one resumed for more steps (config.json says how
    // many) and stopped before it logged one.
    void aRunNotDoneIsStopped()
    {
        QTemporaryDir root;
        const QDir dir(root.path());
        makeRun(dir.filePath(QStringLiteral("cut")), 60, 60, 0.5, {}, false);
        makeRun(dir.filePath(QStringLiteral("longer")), 60, 60, 0.5);
        eng::TrainConfig c = eng::TrainConfig::fromJson(
            eng::RunDirectory(dir.filePath(QStringLiteral("longer")).toStdString())
                .readConfig()
                .value());
        c.steps = 90;
        eng::RunDirectory(dir.filePath(QStringLiteral("longer")).toStdString())
            .writeConfig(c.toJson());
        // Resumed for more epochs (0.75 of 120 steps each, its records say: 0.5 at step 60),
        // stopped at a step it did not log (its newest checkpoint's, 61).
        makeRun(dir.filePath(QStringLiteral("epochs")), 60, 60, 0.5);
        {
            QFile f(QString::fromStdString(
                eng::RunDirectory(dir.filePath(QStringLiteral("epochs")).toStdString())
                    .checkpointPath(61)
                    .string()));
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(QByteArray(2048, 'x'));
        }
        c.steps = 0;
        c.epochs = 0.75;
        eng::RunDirectory(dir.filePath(QStringLiteral("epochs")).toStdString())
            .writeConfig(c.toJson());
        for (const QString& name :
             {QStringLiteral("cut"), QStringLiteral("longer"), QStringLiteral("epochs")}) {
            const Result r = run({dir.filePath(name)});
            QCOMPARE(r.exitCode, 0);
            QVERIFY2(r.out.contains(QRegularExpression(QStringLiteral(
                         "\nstate +stopped; continue with: towers-cli train --resume"))),
                     qPrintable(r.out));
        }
        const Result r = run({QStringLiteral("--runs-dir"), root.path()});
        QVERIFY2(r.out.contains(QStringLiteral("60 / 60  stopped")) &&
                     r.out.contains(QStringLiteral("60 / 90  stopped")) &&
                     r.out.contains(QStringLiteral("61 / 90  stopped")),
                 qPrintable(r.out));
    }

    // A config.json of brackets nested 100,000 deep (200 KB, whose quote in a message overflowed
    // the stack) is one unreadable run, named with its problem; the others are still listed.
    // Brackets inside a string are text, not nesting.
    void aDeeplyNestedConfigIsUnreadable()
    {
        QTemporaryDir root;
        const QDir dir(root.path());
        makeRun(dir.filePath(QStringLiteral("good")), 40, 100, 0.5);
        QVERIFY(dir.mkpath(QStringLiteral("deep")));
        QFile deep(dir.filePath(QStringLiteral("deep/config.json")));
        QVERIFY(deep.open(QIODevice::WriteOnly));
        deep.write("{\"runId\": \"" + QByteArray(300, '[') +
                   "\", \"seed\": " + QByteArray(100000, '[') + QByteArray(100000, ']') + "}");
        deep.close();
        for (const QStringList& args : {QStringList{QStringLiteral("--runs-dir"), root.path()},
                                        QStringList{dir.filePath(QStringLiteral("deep"))}}) {
            const Result r = run(args);
            QCOMPARE(r.exitCode, 0); // shown, with its problem
            const QString all = r.out + r.err;
            QVERIFY2(all.contains(QStringLiteral("nested more than 128 levels deep")) &&
                         all.contains(QStringLiteral("config.json")),
                     qPrintable(all));
            if (args.size() == 2)
                QVERIFY2(r.out.contains(QStringLiteral("good ")), qPrintable(r.out));
        }
    }

    // A run whose training failed (failure.json) is shown failed, with the error and the way on:
    // after a divergence a resume would diverge again, so a new run like it with a lower rate;
    // after another error (a full disk), the resume once it is fixed.
    void aFailedRunSaysWhyAndWhatNext()
    {
        QTemporaryDir root;
        const QDir dir(root.path());
        const QString div = dir.filePath(QStringLiteral("div")), full = dir.filePath("full");
        makeRun(div, 40, 100, 0.5);
        makeRun(full, 40, 100, 0.5);
        const auto fail = [](const QString& run, const char* error) {
            QFile f(run + QStringLiteral("/failure.json"));
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(QByteArray("{\"step\": 40, \"error\": \"") + error + "\"}\n");
        };
        fail(div, "model diverged at step 41: its gradients are NaN or infinite (loss = 3e+27)");
        fail(full, "cannot write ckpt: No space left on device");
        const Result list = run({QStringLiteral("--runs-dir"), root.path()});
        QCOMPARE(list.exitCode, 0);
        QVERIFY2(list.out.contains(QStringLiteral("40 / 100  failed")) &&
                     list.out.contains(QStringLiteral("    failed: model diverged at step 41")),
                 qPrintable(list.out));
        const Result d = run({div});
        QVERIFY2(d.out.contains(QStringLiteral("failed after step 40: model diverged")) &&
                     d.out.contains(QStringLiteral("a resume would diverge again")) &&
                     d.out.contains(QStringLiteral("towers-cli train --like ") + div + " --lr ") &&
                     d.out.contains(QStringLiteral(" --clip-grad-norm 1")),
                 qPrintable(d.out));
        const Result f = run({full, QStringLiteral("--json")});
        const QJsonObject o = QJsonDocument::fromJson(f.out.toUtf8()).object();
        QCOMPARE(o.value(QStringLiteral("state")).toString(), QStringLiteral("failed"));
        QCOMPARE(o.value(QStringLiteral("failure")).toObject().value("step").toInt(), 40);
        const Result ft = run({full});
        QVERIFY2(ft.out.contains(QStringLiteral("No space left on device; once that is fixed, "
                                                "continue with: towers-cli train --resume")),
                 qPrintable(ft.out));
        // Failed, then its config.json damaged: unreadable first, shown without its settings.
        QFile config(full + QStringLiteral("/config.json"));
        QVERIFY(config.resize(20));
        const Result damaged = run({full});
        QCOMPARE(damaged.exitCode, 0);
        QVERIFY2(damaged.out.contains(QStringLiteral("unreadable")), qPrintable(damaged.out));
    }

    void showsOneRun()
    {
        QTemporaryDir root;
        const QString folder = QDir(root.path()).filePath(QStringLiteral("fm"));
        makeRun(folder, 80, 200, 0.9);
        // By name in the runs folder and by path: the same.
        const Result byName = run({QStringLiteral("fm")}, root.path());
        const Result byPath = run({folder});
        QCOMPARE(byName.exitCode, 0);
        QCOMPARE(byPath.out, byName.out);
        const QString& out = byName.out;
        QVERIFY2(out.contains(QStringLiteral("fashion-fast on fashion-mnist")), qPrintable(out));
        QVERIFY2(out.contains(QStringLiteral("2 towers x 32 (global batch 64) on the CPU, fp32")),
                 qPrintable(out));
        QVERIFY2(out.contains(QStringLiteral("step 80 / 200")), qPrintable(out));
        QVERIFY2(out.contains(QStringLiteral("90.00 % (test precision @ 1) at step 80")),
                 qPrintable(out));
        // Stopped short of its length: how to continue it.
        QVERIFY2(out.contains(QStringLiteral("stopped; continue with: towers-cli train --resume "
                                             "--run-dir ") +
                              QDir(folder).absolutePath() + QLatin1Char('\n')),
                 qPrintable(out));
        // Every checkpoint, newest first, with its path.
        const qsizetype newest = out.indexOf(QStringLiteral("ckpt-00000080.safetensors"));
        const qsizetype older = out.indexOf(QStringLiteral("ckpt-00000040.safetensors"));
        QVERIFY2(newest > 0 && older > newest, qPrintable(out));

        const Result json = run({folder, QStringLiteral("--json")});
        QCOMPARE(json.exitCode, 0);
        const QJsonObject o = QJsonDocument::fromJson(json.out.toUtf8()).object();
        const QJsonArray files = o.value(QStringLiteral("checkpoint_files")).toArray();
        QCOMPARE(files.size(), 2);
        QCOMPARE(files[0].toObject().value(QStringLiteral("step")).toInteger(), 80);
        QCOMPARE(files[0].toObject().value(QStringLiteral("bytes")).toInteger(), 2048);
        QVERIFY(files[1]
                    .toObject()
                    .value(QStringLiteral("path"))
                    .toString()
                    .endsWith(QStringLiteral("ckpt-00000040.safetensors")));
        QVERIFY(!o.contains(QStringLiteral("init_from")));
        QVERIFY(!out.contains(QStringLiteral("started from")));
        QVERIFY(!o.contains(QStringLiteral("test_accuracy_top5")));
        QVERIFY(!out.contains(QStringLiteral("@ 5")));

        // A run of more than 10 classes logs precision @ 5: the detail and --json have it.
        const QString many = QDir(root.path()).filePath(QStringLiteral("many"));
        makeRun(many, 10, 10, 0.25, {}, false);
        eng::RunDirectory(many.toStdString())
            .appendEval(R"({"step":10,"precisionAt1":0.25,"precisionAt5":0.625})");
        QVERIFY2(run({many}).out.contains(
                     QStringLiteral("25.00 % (test precision @ 1; @ 5: 62.50 %) at step 10")),
                 qPrintable(run({many}).out));
        QCOMPARE(QJsonDocument::fromJson(run({many, QStringLiteral("--json")}).out.toUtf8())
                     .object()
                     .value(QStringLiteral("test_accuracy_top5"))
                     .toDouble(),
                 0.625);

        // A run started from another's checkpoint (--init-from) says which.
        const QString tuned = QDir(root.path()).filePath(QStringLiteral("tuned"));
        makeRun(tuned, 10, 10, 0.5, "/runs/fm/checkpoints/ckpt-00000080.safetensors");
        const Result t = run({tuned});
        QVERIFY2(t.out.contains(QStringLiteral(
                     "started from /runs/fm/checkpoints/ckpt-00000080.safetensors\n")),
                 qPrintable(t.out));
        QCOMPARE(QJsonDocument::fromJson(run({tuned, QStringLiteral("--json")}).out.toUtf8())
                     .object()
                     .value(QStringLiteral("init_from"))
                     .toString(),
                 QStringLiteral("/runs/fm/checkpoints/ckpt-00000080.safetensors"));
    }

    // The best checkpoint: the detail names it and marks it among the checkpoints with the test
    // accuracy at each evaluated step; --json has it; --best of eval, classify and export picks it
    // from a run (by name or folder), passes it over saying so where it does not read, and says
    // why not for a file or a run with none evaluated (or none that reads).
    void bestCheckpointOfARun()
    {
        QTemporaryDir root;
        const QString folder = QDir(root.path()).filePath(QStringLiteral("fm"));
        makeRun(folder, 80, 80, 0.9); // checkpoints at 40 and 80, evaluated at 80
        const eng::RunDirectory dir(folder.toStdString());
        dir.appendEval(R"({"step":40,"precisionAt1":0.925})");
        dir.appendEval(R"({"step":60,"precisionAt1":0.95})"); // no checkpoint at 60
        const Result r = run({QStringLiteral("fm")}, root.path());
        QCOMPARE(r.exitCode, 0);
        QVERIFY2(r.out.contains(QStringLiteral("best         92.50 % at step 40")),
                 qPrintable(r.out));
        // The better evaluation at 60 whose checkpoint is gone is said, not passed over.
        QVERIFY2(r.out.contains(QStringLiteral("; its best evaluation, 95.00 % at step 60, has no "
                                               "checkpoint left (was it deleted or moved?)")),
                 qPrintable(r.out));
        QVERIFY2(r.out.contains(QRegularExpression(QStringLiteral(
                     R"(\n +80 +2\.0 KiB +90\.00 % +\S+ckpt-00000080\.safetensors\n)"))),
                 qPrintable(r.out));
        QVERIFY2(r.out.contains(QRegularExpression(QStringLiteral(
                     R"(\n +40 +2\.0 KiB +92\.50 % best +\S+ckpt-00000040\.safetensors\n)"))),
                 qPrintable(r.out));
        const QJsonObject o =
            QJsonDocument::fromJson(run({folder, QStringLiteral("--json")}).out.toUtf8()).object();
        const QJsonObject best = o.value(QStringLiteral("best_checkpoint")).toObject();
        QCOMPARE(best.value(QStringLiteral("step")).toInteger(), 40);
        QCOMPARE(best.value(QStringLiteral("test_accuracy")).toDouble(), 0.925);
        const QJsonArray files = o.value(QStringLiteral("checkpoint_files")).toArray();
        QCOMPARE(files[0].toObject().value(QStringLiteral("best")).toBool(), false);
        QCOMPARE(files[0].toObject().value(QStringLiteral("test_accuracy")).toDouble(), 0.9);
        QCOMPARE(files[1].toObject().value(QStringLiteral("best")).toBool(), true);

        const auto cli = [&](const QString& command, const QStringList& args) {
            return towers::test::runCliProcess(QStringLiteral(TOWERS_CLI),
                                               QStringList{command} + args,
                                               {QStringLiteral("TOWERS_RUNS=") + root.path()});
        };
        // Checkpoints that read whole (a run's choice takes only those), with no preprocessing
        // recipe: each command stops at that, after saying which one it picked.
        const auto writeReal = [&](std::int64_t step) {
            auto model = eng::createModel("fashion-fast", 10);
            eng::CheckpointInfo info;
            info.dataset = "fashion-mnist";
            info.step = step;
            eng::writeCheckpoint(dir.checkpointPath(step), eng::makeCheckpoint(*model, info));
        };
        writeReal(40);
        writeReal(80);
        for (const QString& command :
             {QStringLiteral("eval"), QStringLiteral("classify"), QStringLiteral("export")}) {
            // What matters is which checkpoint is read. classify also takes an image (not read:
            // the checkpoint fails first).
            const QStringList image = command == QLatin1String("classify")
                                          ? QStringList{QStringLiteral("image.png")}
                                          : QStringList{};
            const Result picked =
                cli(command, QStringList{QStringLiteral("--checkpoint"), QStringLiteral("fm"),
                                         QStringLiteral("--best")} +
                                 image);
            QVERIFY2(picked.err.contains(QStringLiteral("the best checkpoint of ") +
                                         QDir(folder).absolutePath() +
                                         QStringLiteral(": step 40, test accuracy 92.50 %")),
                     qPrintable(picked.err));
            QVERIFY2(picked.err.contains(QStringLiteral("ckpt-00000040.safetensors")),
                     qPrintable(picked.err));
            QVERIFY2(!picked.err.contains(QStringLiteral("ckpt-00000080")), qPrintable(picked.err));
            QVERIFY2(picked.err.contains(QStringLiteral(": note: its best evaluation, 95.00 % at "
                                                        "step 60, has no checkpoint left")),
                     qPrintable(picked.err));
            // A file is one checkpoint already.
            const QString file = QString::fromStdString(dir.checkpointPath(80).string());
            const Result onFile = cli(command, QStringList{QStringLiteral("--checkpoint"), file,
                                                           QStringLiteral("--best")} +
                                                   image);
            QCOMPARE(onFile.exitCode, 2);
            QVERIFY2(onFile.err.contains(QStringLiteral("--best picks among a run's checkpoints")),
                     qPrintable(onFile.err));
        }
        // The best one damaged (its bytes no longer match its checksum): passed over, saying why,
        // for the next best that reads.
        const QString best40 = QString::fromStdString(dir.checkpointPath(40).string());
        {
            QFile f(best40);
            QVERIFY(f.open(QIODevice::ReadWrite));
            QByteArray bytes = f.readAll();
            bytes[bytes.size() - 3] = char(bytes[bytes.size() - 3] ^ 0x55);
            QVERIFY(f.seek(0) && f.write(bytes) == bytes.size());
        }
        const Result passed =
            cli(QStringLiteral("export"),
                {QStringLiteral("--checkpoint"), QStringLiteral("fm"), QStringLiteral("--best")});
        QVERIFY2(passed.err.contains(
                     QStringLiteral("towers-cli export: note: passing over the "
                                    "checkpoint at step 40, which does not read: ") +
                     QStringLiteral("checkpoint '") + best40 + QStringLiteral("' is damaged")),
                 qPrintable(passed.err));
        QVERIFY2(passed.err.contains(QStringLiteral("the best checkpoint of ") +
                                     QDir(folder).absolutePath() +
                                     QStringLiteral(" that reads: step 80, test accuracy 90.00 %")),
                 qPrintable(passed.err));
        // The one better still, at step 60, has no file at all: said as before.
        QVERIFY2(passed.err.contains(QStringLiteral("note: its best evaluation, 95.00 % at step "
                                                    "60, has no checkpoint left")),
                 qPrintable(passed.err));
        // Every evaluated one damaged: none to take, exit 1, saying so.
        {
            QFile f(QString::fromStdString(dir.checkpointPath(80).string()));
            QVERIFY(f.resize(f.size() - 10));
        }
        const Result noneReads = cli(QStringLiteral("eval"), {QStringLiteral("--checkpoint"),
                                                              folder, QStringLiteral("--best")});
        QCOMPARE(noneReads.exitCode, 1);
        QVERIFY2(noneReads.err.contains(QStringLiteral("no checkpoint of the run ") +
                                        QDir(folder).absolutePath() +
                                        QStringLiteral(" that was evaluated reads whole (2 "
                                                       "evaluated, each above)")),
                 qPrintable(noneReads.err));
        // A run whose evaluations are at steps with no checkpoint left.
        const QString other = QDir(root.path()).filePath(QStringLiteral("other"));
        makeRun(other, 10, 10, 0.5);
        QVERIFY(QFile::remove(QString::fromStdString(
            eng::RunDirectory(other.toStdString()).checkpointPath(10).string())));
        const Result none = cli(QStringLiteral("eval"),
                                {QStringLiteral("--checkpoint"), other, QStringLiteral("--best")});
        QCOMPARE(none.exitCode, 1);
        QVERIFY2(none.err.contains(QStringLiteral("no checkpoint of the run ") +
                                   QDir(other).absolutePath() +
                                   QStringLiteral(" was evaluated (eval.jsonl's 1 evaluation is "
                                                  "at a step with no checkpoint left); "
                                                  "without --best, --checkpoint takes its newest")),
                 qPrintable(none.err));
    }

    // A run another process trains (its lock held): the list and the detail say who.
    void saysWhoTrainsIt()
    {
        QTemporaryDir root;
        const QString folder = QDir(root.path()).filePath(QStringLiteral("live"));
        makeRun(folder, 10, 100, 0.3);
        std::optional<eng::RunLock> lock =
            eng::RunLock::acquire(folder.toStdString(), "towers-cli train");
        const QString pid = QStringLiteral("process %1").arg(::getpid());
        const Result list = run({}, root.path());
        QVERIFY2(list.out.contains(QStringLiteral("    training now: ") + pid) &&
                     list.out.contains(QStringLiteral("10 / 100  training ")),
                 qPrintable(list.out));
        const Result one = run({folder});
        QVERIFY2(one.out.contains(QStringLiteral("training now: ") + pid), qPrintable(one.out));
        lock.reset();
        QVERIFY(run({folder}).out.contains(QStringLiteral("stopped; continue with: ")));
    }

    // --trash: the run goes to the trash (here the test's own $XDG_DATA_HOME/Trash), where a file
    // manager restores it from; refused while a process trains it, and without a run.
    void trashesARun()
    {
        QTemporaryDir root;
        const QString folder = QDir(root.path()).filePath(QStringLiteral("old run"));
        makeRun(folder, 10, 100, 0.3);
        const QString xdg = QStringLiteral("XDG_DATA_HOME=") + root.filePath(QStringLiteral("xdg"));
        const auto trash = [&](const QStringList& args) {
            return towers::test::runCliProcess(
                QStringLiteral(TOWERS_CLI), QStringList{QStringLiteral("runs")} + args,
                {xdg, QStringLiteral("TOWERS_RUNS=") + root.path()}, -1, 30000);
        };
        {
            std::optional<eng::RunLock> lock =
                eng::RunLock::acquire(folder.toStdString(), "towers-cli train");
            const Result busy = trash({QStringLiteral("old run"), QStringLiteral("--trash")});
            QCOMPARE(busy.exitCode, 1);
            QVERIFY2(busy.err.contains(QStringLiteral("is being trained by process")),
                     qPrintable(busy.err));
            QVERIFY(QFile::exists(folder + QStringLiteral("/config.json")));
        }
        const Result moved = trash({QStringLiteral("old run"), QStringLiteral("--trash")});
        QVERIFY2(moved.exitCode == 0, qPrintable(moved.err));
        const QString there = root.filePath(QStringLiteral("xdg/Trash/files/old run"));
        QVERIFY2(moved.out.contains(QStringLiteral("to the trash: ") + there),
                 qPrintable(moved.out));
        QVERIFY(QFile::exists(there + QStringLiteral("/config.json")));
        QVERIFY(!QFile::exists(folder));
        QVERIFY(!run({}, root.path()).out.contains(QStringLiteral("old run")));
        const Result none = trash({QStringLiteral("--trash")});
        QCOMPARE(none.exitCode, 2);
        QVERIFY2(none.err.contains(QStringLiteral("--trash needs the run")), qPrintable(none.err));

        // A folder with a config.json that is no run's (a web project's): refused as one without
        // config.json is, naming why; it stays.
        const QString project = root.filePath(QStringLiteral("project"));
        QVERIFY(QDir().mkpath(project));
        QFile config(project + QStringLiteral("/config.json"));
        QVERIFY(config.open(QIODevice::WriteOnly));
        config.write(R"({"name":"my web app","version":"1.0"})");
        config.close();
        const Result web = trash({project, QStringLiteral("--trash")});
        QCOMPARE(web.exitCode, 1);
        QVERIFY2(web.err.contains(QStringLiteral("is not a run folder: its config.json is no "
                                                 "Towers run configuration")),
                 qPrintable(web.err));
        QVERIFY(QFile::exists(project + QStringLiteral("/config.json")));
    }

    // Several runs: side by side, the settings that differ (never the run id), then how each
    // went; --json has the same.
    void comparesRuns()
    {
        QTemporaryDir root;
        makeRun(root.filePath(QStringLiteral("fm")), 100, 200, 0.8);
        makeRun(root.filePath(QStringLiteral("tuned")), 50, 300, 0.6,
                "/somewhere/ckpt-00000100.safetensors");
        const Result r = run({QStringLiteral("fm"), QStringLiteral("tuned")}, root.path());
        QCOMPARE(r.exitCode, 0);
        const QStringList lines = r.out.split(QLatin1Char('\n'));
        const auto line = [&](const QString& first) {
            for (const QString& l : lines)
                if (l.startsWith(first + QLatin1Char(' '))) return l.simplified();
            return QString();
        };
        QCOMPARE(line(QStringLiteral("run")), QStringLiteral("run fm tuned"));
        QCOMPARE(line(QStringLiteral("steps")), QStringLiteral("steps 200 300"));
        QCOMPARE(line(QStringLiteral("initFrom")),
                 QStringLiteral("initFrom - /somewhere/ckpt-00000100.safetensors"));
        QCOMPARE(line(QStringLiteral("step")), QStringLiteral("step 100 / 200 50 / 300"));
        QCOMPARE(line(QStringLiteral("accuracy")),
                 QStringLiteral("accuracy 80.00 % @ 100 60.00 % @ 50"));
        QVERIFY2(line(QStringLiteral("model")).isEmpty() && line(QStringLiteral("runId")).isEmpty(),
                 qPrintable(r.out)); // the same model; run ids always differ
        QVERIFY2(line(QStringLiteral("@")).isEmpty(), qPrintable(r.out)); // ten classes: no @ 5
        // A run that logged precision @ 5 (more than 10 classes): a row of it, "-" for the other.
        eng::RunDirectory(root.filePath(QStringLiteral("tuned")).toStdString())
            .appendEval(R"({"step":60,"precisionAt1":0.625,"precisionAt5":0.875})");
        const Result many = run({QStringLiteral("fm"), QStringLiteral("tuned")}, root.path());
        const QStringList manyLines = many.out.split(QLatin1Char('\n'));
        QVERIFY2(std::any_of(manyLines.begin(), manyLines.end(),
                             [](const QString& l) {
                                 return l.simplified() == QStringLiteral("@ 5 - 87.50 %");
                             }),
                 qPrintable(many.out));

        const QJsonObject o =
            QJsonDocument::fromJson(
                run({QStringLiteral("fm"), QStringLiteral("tuned"), QStringLiteral("--json")},
                    root.path())
                    .out.toUtf8())
                .object();
        QCOMPARE(o.value(QStringLiteral("runs")).toArray().size(), 2);
        QStringList settings;
        for (const QJsonValue& d : o.value(QStringLiteral("differences")).toArray())
            settings << d.toObject().value(QStringLiteral("setting")).toString();
        QCOMPARE(settings, (QStringList{QStringLiteral("initFrom"), QStringLiteral("steps")}));
    }

    void badInput()
    {
        QTemporaryDir root;
        const Result unknown = run({QStringLiteral("nope")}, root.path());
        QCOMPARE(unknown.exitCode, 1);
        QVERIFY2(unknown.err.contains(QStringLiteral("no run 'nope'")) &&
                     unknown.err.contains(root.path()),
                 qPrintable(unknown.err));
        const Result notRun = run({root.path()});
        QCOMPARE(notRun.exitCode, 1);
        QVERIFY2(notRun.err.contains(QStringLiteral("is not a Towers run folder: it has no "
                                                    "config.json")),
                 qPrintable(notRun.err));
        const Result noFolder =
            run({QStringLiteral("--runs-dir"), root.filePath(QStringLiteral("x"))});
        QCOMPARE(noFolder.exitCode, 2);
        QVERIFY2(noFolder.err.contains(QStringLiteral("is not a folder")),
                 qPrintable(noFolder.err));
        QCOMPARE(run({QStringLiteral("a"), QStringLiteral("b")}, root.path()).exitCode, 1);
        QCOMPARE(
            run({QStringLiteral("a"), QStringLiteral("b"), QStringLiteral("--trash")}, root.path())
                .exitCode,
            2);
        QCOMPARE(run({QStringLiteral("--bogus")}, root.path()).exitCode, 2);
    }
};

QTEST_GUILESS_MAIN(TestRunsCommand)
#include "tst_runs_command.moc"
