// Run folder scanning: what a run folder written by the engine's RunDirectory says (configuration,
// last step, latest accuracy, checkpoints, who trains it now), tolerance of damaged files, newest
// runs first, and the curves for the history plot, read incrementally while the run grows
// (app::RunLogReader, app::JsonlTail).
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QTemporaryDir>
#include <QTest>

#include <unistd.h>

#include "app/runs/config_difference.h"
#include "app/runs/run_log_reader.h"
#include "app/runs/run_scanner.h"
#include "engine/train/run_directory.h"
#include "engine/train/run_lock.h"
#include <cerrno>
#include <cstring>

using namespace towers::app;
namespace eng = towers::engine;

namespace {
// A run folder as a training run leaves it: config.json, logged steps and evaluations, and
// checkpoint files (RunDirectory lists them by name).
void makeRun(const QString& folder, std::int64_t steps, int evalEvery,
             const std::string& model = "fashion-fast")
{
    const eng::RunDirectory dir(folder.toStdString());
    eng::TrainConfig c;
    c.model = model;
    c.dataset = "fashion-mnist";
    c.steps = steps;
    c.towers = 2;
    dir.writeConfig(c.toJson());
    for (std::int64_t s = 10; s <= steps; s += 10)
        dir.appendMetrics("{\"step\":" + std::to_string(s) +
                          ",\"epoch\":" + std::to_string(double(s) / 100) +
                          ",\"totalSteps\":" + std::to_string(steps) +
                          ",\"loss\":" + std::to_string(2.0 / double(s)) + "}");
    for (std::int64_t s = evalEvery; s <= steps; s += evalEvery)
        dir.appendEval("{\"step\":" + std::to_string(s) +
                       ",\"precisionAt1\":" + std::to_string(0.5 + double(s) / 1000) + "}");
    for (std::int64_t s : {steps / 2, steps}) {
        QFile f(QString::fromStdString(dir.checkpointPath(s).string()));
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("not opened by the scanner");
    }
}
void append(const QString& path, const QByteArray& bytes)
{
    QFile f(path);
    QVERIFY(f.open(QIODevice::Append));
    QCOMPARE(f.write(bytes), bytes.size());
}

void rewrite(const QString& path, const QByteArray& bytes)
{
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
    QCOMPARE(f.write(bytes), bytes.size());
}

QByteArray metricsLine(int step, int towers = 0)
{
    QByteArray line = "{\"step\":" + QByteArray::number(step) +
                      ",\"totalSteps\":100,\"loss\":" + QByteArray::number(double(step) / 10) +
                      ",\"stepMs\":" + QByteArray::number(step * 2);
    if (towers > 0) {
        line += ",\"towerTimes\":[";
        for (int t = 0; t < towers; ++t)
            line += QByteArray(t ? "," : "") + "{\"computeMs\":" + QByteArray::number(step + t) +
                    ",\"commMs\":1,\"dataMs\":0.5,\"updateMs\":0.25}";
        line += "]";
    }
    return line + "}\n";
}
} // namespace

class TestRunScanner : public QObject
{
    Q_OBJECT
private slots:
    void readsARun()
    {
        QTemporaryDir root;
        const QString folder = root.filePath(QStringLiteral("fashion-mnist-fashion-fast-1"));
        makeRun(folder, 200, 50);
        const RunSummary r = readRun(folder);
        QVERIFY2(r.problem.isEmpty(), qPrintable(r.problem));
        QCOMPARE(r.name, QStringLiteral("fashion-mnist-fashion-fast-1"));
        QVERIFY(r.config.has_value());
        QCOMPARE(r.config->model, std::string("fashion-fast"));
        QCOMPARE(r.config->towers, 2);
        QCOMPARE(r.lastStep, 200);
        QCOMPARE(r.lastLoss, std::optional<double>(2.0 / 200));
        QCOMPARE(r.lastEpoch, 2.0);
        QCOMPARE(r.totalSteps, 200); // as logged: an epochs run's length is known only so
        QVERIFY(r.accuracy.has_value());
        QCOMPARE(*r.accuracy, 0.7);
        QCOMPARE(r.accuracyStep, 200);
        QCOMPARE(r.checkpoints.size(), std::size_t(2));
        QCOMPARE(r.checkpoints[0].step, 100);
        QVERIFY(r.modified.isValid());
        QVERIFY(r.configJson.contains(QStringLiteral("fashion-fast")));

        const RunCurves c = readRunCurves(folder);
        QCOMPARE(c.steps.size(), 20);
        QCOMPARE(c.loss.front(), 0.2);
        QCOMPARE(c.evalSteps, (QVector<double>{50, 100, 150, 200}));
        QCOMPARE(c.accuracy.back(), 0.7);
    }

    // What differs between configurations: nested settings by path, a setting one lacks (""),
    // text that is no JSON object as no settings; never the run id.
    void configDifferencesBetweenRuns()
    {
        const QStringList configs{
            QStringLiteral(
                R"({"runId": "a", "lr": 0.1, "optimizer": {"kind": "momentum", "momentum": 0.9}, "seed": 1})"),
            QStringLiteral(
                R"({"runId": "b", "lr": 0.1, "optimizer": {"kind": "momentum", "momentum": 0.95}, "seed": 1, "patience": 3})"),
            QStringLiteral("not json")};
        const auto d = towers::app::configDifferences(configs.mid(0, 2));
        QCOMPARE(d.size(), std::size_t(2));
        QCOMPARE(d[0].setting, QStringLiteral("optimizer/momentum"));
        QCOMPARE(d[0].values, (QStringList{QStringLiteral("0.9"), QStringLiteral("0.95")}));
        QCOMPARE(d[1].setting, QStringLiteral("patience"));
        QCOMPARE(d[1].values, (QStringList{QString(), QStringLiteral("3")}));
        const auto all = towers::app::configDifferences(configs);
        QCOMPARE(all.size(), std::size_t(5)); // lr, optimizer/kind, momentum, seed, patience
        QCOMPARE(all[0].values,
                 (QStringList{QStringLiteral("0.1"), QStringLiteral("0.1"), QString()}));
        QVERIFY(towers::app::configDifferences({configs[0], configs[0]}).empty());

        // A model file's network is one setting: its name, its layers and a digest, so two
        // versions of one file differ, and the same network does not.
        const QString a = QStringLiteral(
            R"({"model": "n", "modelDefinition": {"name": "n", "input": [8, 8, 1], "layers": [{"type": "flatten"}, {"type": "linear", "units": "classes"}]}})");
        QString b = a;
        b.replace(QStringLiteral(R"("units": "classes"})"),
                  QStringLiteral(R"("units": "classes", "bias": false})"));
        const auto net =
            towers::app::configDifferences({a, b, QStringLiteral(R"({"model": "m"})")});
        QCOMPARE(net.size(), std::size_t(2)); // model, modelDefinition
        QCOMPARE(net[1].setting, QStringLiteral("modelDefinition"));
        QVERIFY2(net[1].values[0].startsWith(QStringLiteral("n: 2 layers (#")),
                 qPrintable(net[1].values[0]));
        QCOMPARE(net[1].values[0].size(), net[1].values[1].size());
        QVERIFY(net[1].values[0] != net[1].values[1]);
        QCOMPARE(net[1].values[2], QString());
        QVERIFY(towers::app::configDifferences({a, a}).empty());

        // What a run trained on is one setting too: its classes and examples and a digest; a run
        // from before the record has none.
        const QString x = QStringLiteral(
            R"({"datasetContent": {"classes": ["a", "b"], "train": {"examples": 4, "crc32": 1}, "test": {"examples": 2, "crc32": 2}}})");
        QString y = x;
        y.replace(QStringLiteral(R"("crc32": 2)"), QStringLiteral(R"("crc32": 3)"));
        const auto data = towers::app::configDifferences({x, y, QStringLiteral("{}")});
        QCOMPARE(data.size(), std::size_t(1));
        QCOMPARE(data[0].setting, QStringLiteral("datasetContent"));
        QVERIFY2(data[0].values[0].startsWith(
                     QStringLiteral("2 classes, 4 training and 2 test examples (#")),
                 qPrintable(data[0].values[0]));
        QVERIFY(data[0].values[0] != data[0].values[1]);
        QCOMPARE(data[0].values[2], QString());
    }

    void damagedFilesAreReportedNotThrown()
    {
        QTemporaryDir root;
        const QString folder = root.filePath(QStringLiteral("bad"));
        makeRun(folder, 100, 50);
        QFile config(folder + QStringLiteral("/config.json"));
        QVERIFY(config.open(QIODevice::WriteOnly | QIODevice::Truncate));
        config.write("{\"model\": 3}");
        config.close();
        QFile metrics(folder + QStringLiteral("/metrics.jsonl"));
        QVERIFY(metrics.open(QIODevice::Append));
        metrics.write("{\"step\": 11"); // a kill in the middle of a line
        metrics.close();
        const RunSummary r = readRun(folder);
        QVERIFY(!r.config);
        QVERIFY2(r.problem.contains(QStringLiteral("config.json")), qPrintable(r.problem));
        QCOMPARE(r.lastStep, 100); // the last complete line
        QCOMPARE(readRunCurves(folder).steps.size(), 10);

        // An evaluation record without a number for its accuracy, then a line that is no JSON:
        // neither is the run's accuracy, nor a point of its curve.
        append(folder + QStringLiteral("/eval.jsonl"),
               "{\"step\":150,\"precisionAt1\":\"x\"}\nnot json\n");
        const RunSummary again = readRun(folder);
        QVERIFY(again.accuracy.has_value());
        QCOMPARE(*again.accuracy, 0.6);
        QCOMPARE(again.accuracyStep, 100);
        QCOMPARE(readRunCurves(folder).evalSteps, (QVector<double>{50, 100}));
    }

    void scanListsRunsNewestFirst()
    {
        QTemporaryDir root;
        makeRun(root.filePath(QStringLiteral("old")), 100, 50);
        makeRun(root.filePath(QStringLiteral("new")), 100, 50);
        QDir(root.path()).mkdir(QStringLiteral("not-a-run")); // no config.json: skipped
        // Make "old" older.
        const QDateTime past = QDateTime::currentDateTime().addDays(-2);
        for (const QString& f : QDir(root.filePath(QStringLiteral("old"))).entryList(QDir::Files)) {
            QFile file(root.filePath(QStringLiteral("old/") + f));
            QVERIFY(file.open(QIODevice::ReadWrite));
            QVERIFY(file.setFileTime(past, QFileDevice::FileModificationTime));
        }
        for (const QString& f :
             QDir(root.filePath(QStringLiteral("old/checkpoints"))).entryList(QDir::Files)) {
            QFile file(root.filePath(QStringLiteral("old/checkpoints/") + f));
            QVERIFY(file.open(QIODevice::ReadWrite));
            QVERIFY(file.setFileTime(past, QFileDevice::FileModificationTime));
        }
        const auto runs = scanRuns(root.path());
        QCOMPARE(runs.size(), std::size_t(2));
        QCOMPARE(runs[0].name, QStringLiteral("new"));
        QCOMPARE(runs[1].name, QStringLiteral("old"));
        QVERIFY(scanRuns(root.filePath(QStringLiteral("missing"))).empty());
        // Nothing there yet is no problem (the first run makes the folder); a runs folder that
        // cannot be listed is one, naming it.
        RunsFolderProblems problems;
        QVERIFY(scanRuns(root.filePath(QStringLiteral("missing")), &problems).empty());
        QVERIFY(!problems.any());
        QVERIFY(scanRuns(root.path(), &problems).size() == 2 && !problems.any());
        const QString file = root.filePath(QStringLiteral("new/config.json"));
        QVERIFY(scanRuns(file, &problems).empty());
        QCOMPARE(problems.folder, file + QStringLiteral(" is not a folder"));
        problems = {};
        QVERIFY(scanRuns(file + QStringLiteral("/runs"), &problems).empty());
        QCOMPARE(problems.folder, QStringLiteral("cannot read %1/runs: %2")
                                      .arg(file, QString::fromLocal8Bit(std::strerror(ENOTDIR))));
    }

    // The run's lock, held by a trainer, says who trains it; released, nobody.
    void saysWhoTrainsIt()
    {
        QTemporaryDir root;
        const QString folder = root.filePath(QStringLiteral("live"));
        makeRun(folder, 100, 50);
        QVERIFY(!readRun(folder).trainingBy);
        QVERIFY(!runHolder(folder));
        {
            const auto lock = eng::RunLock::acquire(folder.toStdString(), "towers-cli train");
            const RunSummary r = readRun(folder);
            QVERIFY(r.trainingBy.has_value());
            QVERIFY2(r.trainingBy->contains(QStringLiteral("process %1").arg(getpid())) &&
                         r.trainingBy->contains(QStringLiteral("towers-cli train")),
                     qPrintable(*r.trainingBy));
            QCOMPARE(runHolder(folder), r.trainingBy);
        }
        QVERIFY(!readRun(folder).trainingBy);
    }

    // Appended lines are read once each; the writer's unfinished last line waits for its end.
    void readsOnlyWhatWasAppended()
    {
        QTemporaryDir root;
        const QString path = root.filePath(QStringLiteral("metrics.jsonl"));
        JsonlTail tail(path);
        QVERIFY(tail.readNew().objects.empty()); // no file yet
        QVERIFY(!tail.readNew().restarted);
        append(path, metricsLine(1) + metricsLine(2));
        auto r = tail.readNew();
        QCOMPARE(r.objects.size(), std::size_t(2));
        QVERIFY(!r.restarted);
        QCOMPARE(tail.offset(), QFileInfo(path).size());
        QVERIFY(tail.readNew().objects.empty()); // nothing new: nothing read again

        const QByteArray third = metricsLine(3);
        append(path, third.first(10)); // the trainer is mid-line
        QVERIFY(tail.readNew().objects.empty());
        QCOMPARE(tail.offset(), QFileInfo(path).size() - 10);
        append(path, third.sliced(10));
        r = tail.readNew();
        QCOMPARE(r.objects.size(), std::size_t(1));
        QCOMPARE(r.objects[0].value(QStringLiteral("step")).toInteger(), 3);
        QVERIFY(!r.restarted);

        append(path, "not json\n" + metricsLine(4)); // a damaged line is skipped, not an error
        r = tail.readNew();
        QCOMPARE(r.objects.size(), std::size_t(1));
        QCOMPARE(r.objects[0].value(QStringLiteral("step")).toInteger(), 4);
    }

    // A log shorter than what was read (truncated), or replaced by another of the same length or
    // longer (rotated, rewritten by a resumed run), is read again from its start.
    void rereadsATruncatedOrReplacedLog()
    {
        QTemporaryDir root;
        const QString path = root.filePath(QStringLiteral("metrics.jsonl"));
        JsonlTail tail(path);
        append(path, metricsLine(1) + metricsLine(2) + metricsLine(3));
        QCOMPARE(tail.readNew().objects.size(), std::size_t(3));

        rewrite(path, metricsLine(1));
        auto r = tail.readNew();
        QVERIFY(r.restarted);
        QCOMPARE(r.objects.size(), std::size_t(1));

        rewrite(path, metricsLine(7) + metricsLine(8) + metricsLine(9)); // longer, different
        r = tail.readNew();
        QVERIFY(r.restarted);
        QCOMPARE(r.objects.size(), std::size_t(3));
        QCOMPARE(r.objects[0].value(QStringLiteral("step")).toInteger(), 7);

        QVERIFY(QFile::remove(path));
        r = tail.readNew();
        QVERIFY(r.restarted);
        QVERIFY(r.objects.empty());
        QCOMPARE(tail.offset(), 0);
    }

    // The run's curves grow with its logs; the latest step's tower times are kept.
    void followsAGrowingRun()
    {
        QTemporaryDir root;
        const QString folder = root.path();
        const QString metrics = root.filePath(QStringLiteral("metrics.jsonl"));
        RunLogReader reader(folder);
        QVERIFY(reader.read().steps.isEmpty());
        append(metrics, metricsLine(1, 4) + metricsLine(2, 4));
        RunCurves c = reader.read();
        QCOMPARE(c.steps, (QVector<double>{1, 2}));
        QCOMPARE(c.loss, (QVector<double>{0.1, 0.2}));
        QCOMPARE(c.totalSteps, 100);
        QCOMPARE(c.stepMs, 4.0);
        QCOMPARE(c.towerTimes.size(), std::size_t(4));
        QCOMPARE(c.towerTimesStep, 2);
        QCOMPARE(c.towerTimes[3].computeMs, 5.0);
        QCOMPARE(c.towerTimes[3].commMs, 1.0);
        QCOMPARE(c.towerTimes[3].dataMs, 0.5);
        QCOMPARE(c.towerTimes[3].updateMs, 0.25);

        append(metrics, metricsLine(3) + metricsLine(4, 2).chopped(1)); // no newline yet
        append(root.filePath(QStringLiteral("eval.jsonl")), "{\"step\":3,\"precisionAt1\":0.4}\n");
        c = reader.read();
        // The unfinished line is a complete object already: read, and not again with its newline.
        QCOMPARE(c.steps, (QVector<double>{1, 2, 3, 4}));
        QCOMPARE(c.towerTimes.size(), std::size_t(2));
        QCOMPARE(c.towerTimesStep, 4);
        QCOMPARE(c.evalSteps, (QVector<double>{3}));
        append(metrics, "\n");
        QCOMPARE(reader.read().steps.size(), 4);

        rewrite(metrics, metricsLine(1)); // a resumed run cut its log back
        c = reader.read();
        QCOMPARE(c.steps, (QVector<double>{1}));
        QVERIFY(c.towerTimes.empty());
        QCOMPARE(c.evalSteps.size(), 1);
        QCOMPARE(readRunCurves(folder).steps, c.steps);
    }
};

QTEST_GUILESS_MAIN(TestRunScanner)
#include "tst_run_scanner.moc"
