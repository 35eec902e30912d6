// The run builder both front ends call: new folders' names, which run a resume continues and with
// what configuration, which options may be repeated on resume (the run's own values) and which
// are refused (another value), the limits, and which checkpoints of a run cannot be loaded.
#include <QDir>
#include <QFile>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>

#include <filesystem>

#include "app/runs/run_builder.h"
#include "engine/models/registry.h"
#include "engine/train/checkpoint.h"
#include "engine/train/run_directory.h"
#include "engine/train/train_config.h"

using namespace towers;
namespace fs = std::filesystem;

namespace {

engine::TrainConfig config()
{
    engine::TrainConfig c;
    c.model = "fashion-fast";
    c.dataset = "fashion-mnist";
    c.towers = 2;
    c.threadsPerTower = 1;
    c.batchPerTower = 16;
    c.steps = 10;
    c.schedule.lr = 0.05;
    c.schedule.kind = engine::LrSchedule::Kind::OneCycle;
    c.optimizer.kind = "nesterov";
    c.augmentation = "default";
    c.seed = 7;
    return c;
}

void writeRun(const QString& folder, const engine::TrainConfig& c)
{
    engine::RunDirectory run(folder.toStdString());
    run.writeConfig(c.toJson());
}

} // namespace

class TestRunBuilder : public QObject
{
    Q_OBJECT

private slots:
    void proposedFolderName()
    {
        const QString f = app::proposedRunFolder(QStringLiteral("/runs"), QStringLiteral("cifar10"),
                                                 QStringLiteral("cifar10-tutorial"));
        QVERIFY2(
            QRegularExpression(QStringLiteral("^/runs/cifar10-cifar10-tutorial-\\d{8}-\\d{6}$"))
                .match(f)
                .hasMatch(),
            qPrintable(f));
    }

    void planNewRunTouchesNothing()
    {
        QTemporaryDir dir;
        app::NewRunRequest r;
        r.config = config();
        r.runsDir = dir.filePath(QStringLiteral("runs"));
        const engine::SessionOptions o = app::planNewRun(r);
        QVERIFY(o.newFolder);
        QVERIFY(!o.resume);
        QVERIFY(!o.setAside);
        QVERIFY(QString::fromStdString(o.runDirectory.string())
                    .startsWith(r.runsDir + QStringLiteral("/fashion-mnist-fashion-fast-")));
        QVERIFY(!QFileInfo::exists(r.runsDir)); // made when the run starts, not when it is planned

        r.runDir = dir.filePath(QStringLiteral("mine"));
        r.overwrite = true;
        const engine::SessionOptions named = app::planNewRun(r);
        QVERIFY(!named.newFolder);
        QVERIFY(named.setAside);
        QCOMPARE(QString::fromStdString(named.runDirectory.string()), r.runDir);

        // The runs folder itself (as it is spelt otherwise, or by a link) is no run's folder,
        // nor one that holds it.
        QVERIFY(QDir().mkpath(r.runsDir));
        QVERIFY(QFile::link(r.runsDir, dir.filePath(QStringLiteral("link"))));
        for (const QString& runs :
             {r.runsDir, r.runsDir + QStringLiteral("/./"), dir.filePath(QStringLiteral("link")),
              dir.path(), QStringLiteral("/")}) {
            r.runDir = runs;
            try {
                (void)app::planNewRun(r);
                QFAIL("the runs folder was taken as a run's");
            } catch (const engine::InvalidArgument& e) {
                QVERIFY2(QString::fromUtf8(e.what()).contains(
                             QStringLiteral(", where each run gets a folder of its own: name one "
                                            "inside it (") +
                             r.runsDir + QStringLiteral("/NAME)")),
                         e.what());
                QVERIFY2(QString::fromUtf8(e.what()).contains(
                             runs == dir.path() || runs == QLatin1String("/")
                                 ? QStringLiteral(" holds the runs folder ")
                                 : QStringLiteral(" is the runs folder itself")),
                         e.what());
            }
        }
    }

    void limitsAreTheEngines()
    {
        app::NewRunRequest r;
        r.config = config();
        r.runsDir = QStringLiteral("/nonexistent");
        r.config.towers = engine::TrainConfig::kMaxTowers + 1;
        QVERIFY_THROWS_EXCEPTION(engine::InvalidArgument, app::planNewRun(r));
        r.config.towers = engine::TrainConfig::kMaxTowers;
        r.config.threadsPerTower = engine::TrainConfig::kMaxThreadsPerTower;
        try {
            app::planNewRun(r);
            QFAIL("256 towers x 1024 threads were accepted");
        } catch (const engine::InvalidArgument& e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(
                         QStringLiteral("256 towers x 1024 threads per tower")),
                     e.what());
        }
    }

    // A precision the backend cannot run is refused when the run is planned, before any folder,
    // saying why; a resume may change it (checkpoints are float32), and must where the run's own
    // does not run here.
    void precisionIsCheckedWhenPlanned()
    {
        QTemporaryDir dir;
        app::NewRunRequest r;
        r.config = config();
        r.config.backend = "reference"; // bf16 on no machine
        r.config.precision = engine::Precision::BFloat16;
        r.runDir = dir.filePath(QStringLiteral("bf16"));
        try {
            app::planNewRun(r);
            QFAIL("bf16 on the reference backend was planned");
        } catch (const engine::Unsupported& e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(QStringLiteral("--precision bf16")),
                     e.what());
        }
        QVERIFY(!QFileInfo::exists(r.runDir));

        const QString run = dir.filePath(QStringLiteral("runs/reference"));
        writeRun(run, r.config);
        app::ResumeRequest resume;
        resume.runDir = run;
        QVERIFY_THROWS_EXCEPTION(engine::Unsupported, app::planResume(resume));
        resume.changes = [](engine::TrainConfig& c) { c.precision = engine::Precision::Float32; };
        QVERIFY(app::planResume(resume).config.precision == engine::Precision::Float32);
    }

    void resumeReadsTheRun()
    {
        QTemporaryDir dir;
        const QString runs = dir.filePath(QStringLiteral("runs"));
        const QString older = runs + QStringLiteral("/older"),
                      newer = runs + QStringLiteral("/newer");
        engine::TrainConfig c = config();
        writeRun(older, c);
        QThread::msleep(1100); // modification times one second apart
        c.seed = 8;
        writeRun(newer, c);
        QCOMPARE(QDir(app::newestRun(runs)).absolutePath(), QDir(newer).absolutePath());

        app::ResumeRequest r;
        r.runsDir = runs;
        r.changes = [](engine::TrainConfig& run) { run.steps = 20; };
        engine::SessionOptions o = app::planResume(r); // the newest
        QCOMPARE(o.config.seed, std::uint64_t(8));
        QCOMPARE(o.config.steps, std::int64_t(20));
        QVERIFY(o.resume && !o.setAside && !o.newFolder);
        r.runDir = older;
        r.restart = true;
        o = app::planResume(r);
        QCOMPARE(o.config.seed, std::uint64_t(7));
        QVERIFY(o.setAside);

        r.runDir = dir.filePath(QStringLiteral("not-a-run"));
        QDir().mkpath(r.runDir);
        try {
            app::planResume(r);
            QFAIL("resumed a folder without config.json");
        } catch (const engine::InvalidArgument& e) { // the caller named no run
            QVERIFY2(
                QString::fromUtf8(e.what()).contains(QStringLiteral("not a Towers run folder")),
                e.what());
        }
        QFile bad(older + QStringLiteral("/config.json"));
        QVERIFY(bad.open(QIODevice::WriteOnly | QIODevice::Truncate));
        bad.write("{\"towers\": \"two\"}");
        bad.close();
        try {
            app::readRunConfig(older);
            QFAIL("a damaged config.json was read");
        } catch (const engine::IoError& e) { // the run's file is damaged
            QVERIFY2(QString::fromUtf8(e.what()).contains(QStringLiteral("config.json")), e.what());
        }
        r.runsDir = dir.filePath(QStringLiteral("empty"));
        r.runDir.clear();
        QVERIFY_THROWS_EXCEPTION(engine::IoError, app::planResume(r));
    }

    // The same command line plus --resume is accepted: every run-defining option with the run's own
    // value (aliases included), and each with another value refused, naming both.
    void resumeMismatch_data()
    {
        QTest::addColumn<QString>("option");
        QTest::addColumn<QString>("same");
        QTest::addColumn<QString>("other");
        QTest::newRow("dataset") << "dataset"
                                 << "fashion-mnist"
                                 << "mnist";
        QTest::newRow("model") << "model"
                               << "fashion-fast"
                               << "fashion-wide";
        QTest::newRow("towers") << "towers"
                                << "2"
                                << "3";
        QTest::newRow("threads") << "threads-per-tower"
                                 << "1"
                                 << "0";
        QTest::newRow("batch") << "batch-size"
                               << "16"
                               << "32";
        QTest::newRow("optimizer") << "optimizer"
                                   << "nesterov"
                                   << "adam";
        QTest::newRow("lr") << "lr"
                            << "0.050"
                            << "0.5";
        QTest::newRow("schedule alias") << "lr-schedule"
                                        << "one-cycle"
                                        << "cosine";
        QTest::newRow("schedule") << "lr-schedule"
                                  << "onecycle"
                                  << "constant";
        QTest::newRow("momentum") << "momentum"
                                  << "0.9"
                                  << "0.95";
        QTest::newRow("weight decay") << "weight-decay"
                                      << "-1"
                                      << "0.0005";
        QTest::newRow("ema") << "ema-decay"
                             << "0"
                             << "0.999";
        QTest::newRow("augment alias") << "augment"
                                       << "tutorial"
                                       << "none";
        QTest::newRow("seed") << "seed"
                              << "7"
                              << "8";
    }
    void resumeMismatch()
    {
        QFETCH(QString, option);
        QFETCH(QString, same);
        QFETCH(QString, other);
        QVERIFY(app::runDefiningOptions().contains(option));
        const engine::TrainConfig run =
            engine::TrainConfig::fromJson(config().toJson()); // as config.json holds it
        QCOMPARE(app::resumeMismatch(option, same, run), QString());
        const QString why = app::resumeMismatch(option, other, run);
        QVERIFY2(why.startsWith(QStringLiteral("--%1 cannot change").arg(option)) &&
                     why.contains(other),
                 qPrintable(why));
    }

    void unloadableCheckpoints()
    {
        QTemporaryDir dir;
        const QString folder = dir.filePath(QStringLiteral("run"));
        engine::TrainConfig c = config();
        writeRun(folder, c);
        app::ResumeRequest r;
        r.runDir = folder;
        const engine::SessionOptions o = app::planResume(r);
        QVERIFY(app::unloadableCheckpoints(o).isEmpty()); // none at all: the run starts at 0

        engine::RunDirectory run(folder.toStdString());
        auto model = engine::buildModel(c.model);
        model->initialize(1);
        engine::CheckpointInfo info;
        info.step = 5;
        engine::writeCheckpoint(run.checkpointPath(5), engine::makeCheckpoint(*model, info));
        QVERIFY(app::unloadableCheckpoints(o).isEmpty()); // one loads
        fs::resize_file(run.checkpointPath(5), 300);
        auto other = engine::buildModel("cifar10-tutorial");
        info.step = 6;
        engine::writeCheckpoint(run.checkpointPath(6), engine::makeCheckpoint(*other, info));
        const QStringList bad = app::unloadableCheckpoints(o);
        QCOMPARE(bad.size(), 2);
        QVERIFY2(bad.join(QLatin1Char('\n')).contains(QStringLiteral("ckpt-00000005")) &&
                     bad.join(QLatin1Char('\n')).contains(QStringLiteral("ckpt-00000006")),
                 qPrintable(bad.join(QLatin1Char('\n'))));
    }
};

QTEST_GUILESS_MAIN(TestRunBuilder)
#include "tst_run_builder.moc"
