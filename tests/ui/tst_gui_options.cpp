// The real `towers` executable's command line as a user meets it: a --dataset that names no
// dataset is refused before the window opens (exit 2, the known names listed, an imported one
// among them); --train starts the last session's configuration, as --help says, and on a dataset
// that cannot be loaded says why on stderr and starts nothing, the window staying open; a settings
// file that cannot be written is said on stderr.
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <csignal>
#include <sys/types.h>

#include "app/settings/app_settings.h"
#include "cli_process.h"
#include "dataset_files.h"
#include "engine/data/dataset_manifest.h"
#include "engine/train/train_config.h"
#include "training_fixture.h"
#include "ui_test_support.h"

namespace tt = towers::test;

namespace {

struct GuiResult
{
    int exitCode = -1; // -1: it crashed, was killed, or did not end
    QString err;
};

} // namespace

class TestGuiOptions : public QObject
{
    Q_OBJECT
    QTemporaryDir m_root;

    QString dataDir() const { return m_root.filePath(QStringLiteral("data")); }

    // Settings with the data folder `data` and `dataset` chosen, in a new file.
    QString settingsWith(const QString& dataset, const QString& name)
    {
        const QString file = m_root.filePath(name + QStringLiteral(".ini"));
        towers::app::AppSettings settings(file);
        settings.setDataDir(dataDir());
        settings.setRunsDir(m_root.filePath(QStringLiteral("runs")));
        if (!dataset.isEmpty()) settings.setDatasetName(dataset);
        settings.sync();
        return file;
    }

    void prepare(QProcess& gui) const
    {
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
        env.insert(QStringLiteral("XDG_DATA_HOME"), m_root.filePath(QStringLiteral("xdg")));
        env.insert(QStringLiteral("XDG_CONFIG_HOME"), m_root.filePath(QStringLiteral("config")));
        env.remove(QStringLiteral("TOWERS_DATA"));
        env.remove(QStringLiteral("TOWERS_RUNS"));
        gui.setProcessEnvironment(env);
        tt::withDefaultSignals(gui);
    }

    // towers `args` until it ends by itself (at most `timeoutMs`).
    GuiResult run(const QStringList& args, int timeoutMs = 60000)
    {
        QProcess gui;
        prepare(gui);
        gui.start(QStringLiteral(TOWERS_GUI_BINARY), args);
        GuiResult r;
        if (!gui.waitForFinished(timeoutMs)) {
            gui.kill();
            gui.waitForFinished();
        } else if (gui.exitStatus() == QProcess::NormalExit) {
            r.exitCode = gui.exitCode();
        }
        r.err = QString::fromUtf8(gui.readAllStandardError());
        return r;
    }

private slots:
    void initTestCase()
    {
        QVERIFY(m_root.isValid());
        tt::writeIdxDataset(tt::fsPath(dataDir() + QStringLiteral("/mnist")), 30, 10, 28, 28, false,
                            1);
        // An imported dataset, found only by scanning the data folder.
        const auto birds = tt::fsPath(dataDir() + QStringLiteral("/birds"));
        tt::writeIdxDataset(birds, 12, 6, 28, 28, false, 2);
        std::vector<std::string> classes;
        for (int c = 0; c < 10; ++c) classes.push_back("bird " + std::to_string(c));
        tt::writeText(
            birds / towers::engine::kDatasetManifest,
            towers::engine::datasetManifestJson(
                towers::engine::importedDatasetSpec("birds", {28, 28, 1}, classes, false, "mine"),
                {}));
    }

    // A wrong name was passed over without a word (exit 0, the previous dataset shown; with
    // --train, a run on another dataset than the one named).
    void unknownDatasetIsRefused()
    {
        const QString settings = settingsWith(QStringLiteral("mnist"), QStringLiteral("unknown"));
        const GuiResult r =
            run({QStringLiteral("--settings"), settings, QStringLiteral("--dataset"),
                 QStringLiteral("fashion_mnist"), QStringLiteral("--measure-startup")});
        QVERIFY2(r.exitCode == 2, qPrintable(r.err));
        QVERIFY2(r.err.contains(QStringLiteral("'fashion_mnist'")), qPrintable(r.err));
        // The known names: the table's, and the one imported into the data folder.
        QVERIFY2(r.err.contains(QStringLiteral("fashion-mnist")), qPrintable(r.err));
        QVERIFY2(r.err.contains(QStringLiteral("birds")), qPrintable(r.err));
    }

    void importedDatasetIsAccepted()
    {
        const QString settings = settingsWith(QStringLiteral("mnist"), QStringLiteral("imported"));
        const GuiResult r =
            run({QStringLiteral("--settings"), settings, QStringLiteral("--dataset"),
                 QStringLiteral("birds"), QStringLiteral("--measure-startup")});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(!r.err.contains(QStringLiteral("unknown")), qPrintable(r.err));
        QCOMPARE(towers::app::AppSettings(settings).datasetName(), QStringLiteral("birds"));
    }

    // --train waited for a load that never came, without a word. Now it says why and starts
    // nothing; the window stays open (to download it, or choose another folder). A saved dataset
    // that is gone is not replaced by the first one found for --train either (it trained that).
    void trainSaysWhyTheDatasetCannotBeLoaded_data()
    {
        QTest::addColumn<QString>("saved");
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("said");
        QTest::newRow("--dataset not found")
            << QString() << QStringList{QStringLiteral("--dataset"), QStringLiteral("cifar100")}
            << QStringLiteral("--train did not start a run: cifar100 was not found");
        QTest::newRow("saved dataset gone")
            << QStringLiteral("nosuch") << QStringList()
            << QStringLiteral("--train did not start a run: the saved dataset nosuch is not found");
    }

    void trainSaysWhyTheDatasetCannotBeLoaded()
    {
        QFETCH(QString, saved);
        QFETCH(QStringList, args);
        QFETCH(QString, said);
        const QString settings = settingsWith(saved, QStringLiteral("train"));
        QProcess gui;
        prepare(gui);
        gui.start(QStringLiteral(TOWERS_GUI_BINARY),
                  QStringList{QStringLiteral("--settings"), settings} + args +
                      QStringList{QStringLiteral("--train")});
        QVERIFY2(gui.waitForStarted(10000), qPrintable(gui.errorString()));
        QByteArray err;
        QElapsedTimer waited;
        waited.start();
        while (!err.contains("--train") && waited.elapsed() < 30000 &&
               gui.state() == QProcess::Running) {
            gui.waitForReadyRead(200);
            err += gui.readAllStandardError();
        }
        QVERIFY2(gui.state() == QProcess::Running, err.constData()); // the window stays open
        ::kill(static_cast<pid_t>(gui.processId()), SIGTERM);
        QVERIFY(gui.waitForFinished(30000));
        err += gui.readAllStandardError();
        QVERIFY2(err.contains(said.toUtf8()), err.constData());
        if (saved.isEmpty())
            QVERIFY2(err.contains(dataDir().toUtf8()), err.constData()); // where it looked
        else
            QCOMPARE(towers::app::AppSettings(settings).datasetName(), saved); // still saved
        QVERIFY(!QDir(m_root.filePath(QStringLiteral("runs"))).exists());
    }

    // The screenshot tour (which trains a run) keeps its settings and its run in a folder of its
    // own: it saved its configuration as the user's last one and its run in the user's runs
    // folder. On a dataset that cannot be shown it stops at once, exit 1, saying why (it waited
    // at every step).
    void screenshotTourTouchesNothingOfTheUsers()
    {
        const QString config = m_root.filePath(QStringLiteral("config"));
        const QString runs = m_root.filePath(QStringLiteral("xdg/towers/runs"));
        QDir(config).removeRecursively();
        QProcess gui;
        prepare(gui);
        gui.start(QStringLiteral(TOWERS_GUI_BINARY),
                  {QStringLiteral("--screenshot-tour"), m_root.filePath(QStringLiteral("tour"))});
        QVERIFY2(gui.waitForStarted(10000), qPrintable(gui.errorString()));
        QByteArray err;
        QElapsedTimer waited;
        waited.start();
        // Into the tour's training (or its end, where no dataset is found).
        while (!err.contains("screenshot tour: devices") && waited.elapsed() < 60000 &&
               gui.state() == QProcess::Running) {
            gui.waitForReadyRead(200);
            err += gui.readAllStandardError();
        }
        if (gui.state() == QProcess::Running) ::kill(static_cast<pid_t>(gui.processId()), SIGTERM);
        QVERIFY(gui.waitForFinished(60000));
        QVERIFY2(!QDir(config).exists(), err.constData());
        QVERIFY2(!QDir(runs).exists(), err.constData());

        const QString settings = settingsWith(QStringLiteral("cifar100"), QStringLiteral("tour"));
        const GuiResult r =
            run({QStringLiteral("--settings"), settings, QStringLiteral("--screenshot-tour"),
                 m_root.filePath(QStringLiteral("tour2"))},
                30000);
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(
            r.err.contains(QStringLiteral(
                "screenshot tour: stopped, as no dataset can be shown: cifar100 was not found")),
            qPrintable(r.err));
    }

    // --train starts the Model page's configuration, the last session's here (a learning rate and
    // a length that are not fashion-fast's recipe), as --help says: it said "with the model's
    // recipe".
    void trainStartsTheLastConfiguration()
    {
        QProcess helper;
        prepare(helper);
        helper.start(QStringLiteral(TOWERS_GUI_BINARY), {QStringLiteral("--help")});
        QVERIFY(helper.waitForFinished(30000));
        const QString help = QString::fromUtf8(helper.readAllStandardOutput()).simplified();
        QVERIFY2(help.contains(QStringLiteral(
                     "with the Model page's configuration: the recipe of the dataset's model on a "
                     "first start, else the last session's")),
                 qPrintable(help));

        const QString runs = m_root.filePath(QStringLiteral("runs-last"));
        const QString settingsFile = settingsWith(QStringLiteral("mnist"), QStringLiteral("last"));
        {
            towers::app::AppSettings settings(settingsFile);
            settings.setRunsDir(runs);
            auto options = tt::tinyRun(tt::fsPath(dataDir()), {}, 7, 1);
            options.config.schedule.lr = 0.0123;
            settings.setLastConfigJson(QString::fromStdString(options.config.toJson()));
            settings.sync();
        }
        QProcess gui;
        prepare(gui);
        gui.start(QStringLiteral(TOWERS_GUI_BINARY),
                  {QStringLiteral("--settings"), settingsFile, QStringLiteral("--train")});
        QVERIFY2(gui.waitForStarted(10000), qPrintable(gui.errorString()));
        QString config;
        QElapsedTimer waited;
        waited.start();
        while (config.isEmpty() && waited.elapsed() < 60000 && gui.state() == QProcess::Running) {
            QTest::qWait(100);
            for (const QString& d : QDir(runs).entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
                const QString file = runs + QLatin1Char('/') + d + QStringLiteral("/config.json");
                if (QFile::exists(file)) config = file;
            }
        }
        ::kill(static_cast<pid_t>(gui.processId()), SIGTERM);
        QVERIFY(gui.waitForFinished(60000));
        QVERIFY2(!config.isEmpty(), gui.readAllStandardError().constData());
        QTest::qWait(100);
        QFile f(config);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const auto c = towers::engine::TrainConfig::fromJson(f.readAll().toStdString());
        QCOMPARE(c.schedule.lr, 0.0123);
        QCOMPARE(c.steps, std::int64_t(7));
    }

    // QSettings keeps what it cannot write in memory: the changes were lost at exit, silently.
    void unwritableSettingsAreSaid()
    {
        QFile plain(m_root.filePath(QStringLiteral("plain")));
        QVERIFY(plain.open(QIODevice::WriteOnly));
        plain.close();
        const QString settings = m_root.filePath(QStringLiteral("plain/towers.ini"));
        const GuiResult r =
            run({QStringLiteral("--settings"), settings, QStringLiteral("--dataset"),
                 QStringLiteral("mnist"), QStringLiteral("--measure-startup")});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.err.contains(QStringLiteral("could not be saved to %1").arg(settings)),
                 qPrintable(r.err));
    }
};

QTEST_GUILESS_MAIN(TestGuiOptions)
#include "tst_gui_options.moc"
