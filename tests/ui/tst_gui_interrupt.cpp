// The real `towers` executable, training, gets SIGTERM (a logout, `kill`): it stops the run after
// its current step, writes the checkpoint of that step, and exits with 128 + 15, as towers-cli
// does for Ctrl-C. No work is lost beyond the step in flight.
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <csignal>
#include <sys/types.h>

#include "app/settings/app_settings.h"
#include "engine/train/run_directory.h"
#include "training_fixture.h"
#include "ui_test_support.h"

namespace tt = towers::test;

class TestGuiInterrupt : public QObject
{
    Q_OBJECT
    QTemporaryDir m_root;

    // The run folder under runs/ and the number of its metrics lines, once there are some.
    std::pair<QString, int> progress() const
    {
        const QDir runs(m_root.filePath(QStringLiteral("runs")));
        for (const QString& d : runs.entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
            QFile f(runs.filePath(d + QStringLiteral("/metrics.jsonl")));
            if (f.open(QIODevice::ReadOnly))
                return {runs.filePath(d), int(f.readAll().count('\n'))};
        }
        return {QString(), 0};
    }

private slots:
    void sigtermStopsWithCheckpoint()
    {
        tt::writeTinyMnist(tt::fsPath(m_root.filePath(QStringLiteral("data"))));
        const QString settingsFile = tt::settingsFile(m_root.path());
        {
            towers::app::AppSettings settings(settingsFile);
            settings.setDatasetName(QStringLiteral("mnist"));
            settings.setDataDir(m_root.filePath(QStringLiteral("data")));
            settings.setRunsDir(m_root.filePath(QStringLiteral("runs")));
            // A run far longer than the test: only the signal ends it.
            const auto options = tt::tinyRun({}, {}, 1000000, 2);
            settings.setLastConfigJson(QString::fromStdString(options.config.toJson()));
            settings.sync();
        }

        QProcess gui;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
        env.insert(QStringLiteral("XDG_DATA_HOME"), m_root.filePath(QStringLiteral("xdg")));
        env.remove(QStringLiteral("TOWERS_DATA"));
        env.remove(QStringLiteral("TOWERS_RUNS"));
        gui.setProcessEnvironment(env);
        gui.setProcessChannelMode(QProcess::MergedChannels);
        gui.start(QStringLiteral(TOWERS_GUI_BINARY),
                  {QStringLiteral("--settings"), settingsFile, QStringLiteral("--train")});
        QVERIFY2(gui.waitForStarted(10000), qPrintable(gui.errorString()));

        // Wait until the run has logged a few steps.
        QElapsedTimer waited;
        waited.start();
        while (progress().second < 3 && waited.elapsed() < 90000 &&
               gui.state() == QProcess::Running)
            QTest::qWait(100);
        QVERIFY2(progress().second >= 3, gui.readAll().constData());

        ::kill(static_cast<pid_t>(gui.processId()), SIGTERM);
        QVERIFY2(gui.waitForFinished(60000), "towers did not exit within 60 s of SIGTERM");
        const QByteArray output = gui.readAll();
        QCOMPARE(gui.exitStatus(), QProcess::NormalExit);
        QVERIFY2(gui.exitCode() == 128 + SIGTERM, output.constData());

        // The checkpoint of the last step it ran is there and loadable.
        const auto [runDir, lines] = progress();
        towers::engine::RunDirectory run(tt::fsPath(runDir));
        const auto checkpoints = run.checkpoints();
        QVERIFY2(!checkpoints.empty(), "no checkpoint after SIGTERM");
        QVERIFY2(checkpoints.back().step >= lines,
                 qPrintable(QStringLiteral("checkpoint of step %1, %2 steps logged")
                                .arg(checkpoints.back().step)
                                .arg(lines)));
    }
};

QTEST_GUILESS_MAIN(TestGuiInterrupt)
#include "tst_gui_interrupt.moc"
