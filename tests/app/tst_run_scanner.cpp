// Run folder scanning: what a run folder written by the engine's RunDirectory says (configuration,
// last step, latest accuracy, checkpoints), tolerance of damaged files, newest runs first, and the
// curves for the history plot.
#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include "app/runs/run_scanner.h"
#include "engine/train/run_directory.h"

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
        QCOMPARE(r.lastLoss, 2.0 / 200);
        QCOMPARE(r.lastEpoch, 2.0);
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
    }
};

QTEST_GUILESS_MAIN(TestRunScanner)
#include "tst_run_scanner.moc"
