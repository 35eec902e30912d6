// RunsPage over run folders written like a training run writes them: lists them, shows the
// selected run's configuration, curves and checkpoints (newest first), and asks to resume the run
// or classify with a checkpoint; resuming is refused while another run trains.
#include <QFile>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include "app/settings/app_settings.h"
#include "engine/train/run_directory.h"
#include "ui/models/checkpoint_list_model.h"
#include "ui/models/run_list_model.h"
#include "ui/pages/runs_page.h"
#include "ui/plots/plot_widget.h"
#include "ui_test_support.h"

using towers::ui::RunsPage;
namespace eng = towers::engine;

namespace {
void makeRun(const QString& folder, std::int64_t steps)
{
    const eng::RunDirectory dir(folder.toStdString());
    eng::TrainConfig c;
    c.model = "fashion-fast";
    c.dataset = "mnist";
    c.steps = steps;
    dir.writeConfig(c.toJson());
    for (std::int64_t s = 1; s <= steps; ++s)
        dir.appendMetrics("{\"step\":" + std::to_string(s) +
                          ",\"loss\":" + std::to_string(1.0 / double(s)) + "}");
    dir.appendEval("{\"step\":" + std::to_string(steps) + ",\"precisionAt1\":0.5}");
    for (std::int64_t s : {steps / 2, steps}) {
        QFile f(QString::fromStdString(dir.checkpointPath(s).string()));
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("x");
    }
}

QPushButton* button(RunsPage& page, const QString& text)
{
    for (auto* b : page.findChildren<QPushButton*>())
        if (b->text().remove(QLatin1Char('&')) == text) return b;
    return nullptr;
}
} // namespace

class TestRunsPage : public QObject
{
    Q_OBJECT
private slots:
    void listsAndActs()
    {
        QTemporaryDir root;
        makeRun(root.filePath(QStringLiteral("runs/one")), 20);
        makeRun(root.filePath(QStringLiteral("runs/two")), 40);
        towers::app::AppSettings settings(towers::test::settingsFile(root.path()));
        settings.setRunsDir(root.filePath(QStringLiteral("runs")));
        RunsPage page(settings);
        page.show();
        QSignalSpy refreshed(&page, &RunsPage::refreshed);
        QVERIFY(refreshed.wait(10000));
        QCOMPARE(page.runModel()->rowCount(), 2);
        page.selectRun(root.filePath(QStringLiteral("runs/two")));
        QCOMPARE(page.selectedRun(), root.filePath(QStringLiteral("runs/two")));
        QCOMPARE(page.checkpointModel()->rowCount(), 2);
        QVERIFY(page.selectedCheckpoint().endsWith(QStringLiteral("ckpt-00000040.safetensors")));
        QVERIFY(page.findChild<QPlainTextEdit*>()->toPlainText().contains(
            QStringLiteral("\"steps\": 40")));
        QTRY_COMPARE(page.lossPlot()->pointCount(0), 40);
        QCOMPARE(page.accuracyPlot()->pointCount(0), 1);

        QSignalSpy resume(&page, &RunsPage::resumeRequested);
        QSignalSpy classify(&page, &RunsPage::classifyRequested);
        QTest::mouseClick(button(page, QStringLiteral("Resume this run")), Qt::LeftButton);
        QCOMPARE(resume.count(), 1);
        QCOMPARE(resume.at(0).at(0).toString(), root.filePath(QStringLiteral("runs/two")));
        QTest::mouseClick(button(page, QStringLiteral("Classify with this checkpoint")),
                          Qt::LeftButton);
        QCOMPARE(classify.count(), 1);
        QVERIFY(
            classify.at(0).at(0).toString().endsWith(QStringLiteral("ckpt-00000040.safetensors")));

        page.setResumeAllowed(false);
        QVERIFY(!button(page, QStringLiteral("Resume this run"))->isEnabled());

        // A new run appears on refresh, the selection stays.
        makeRun(root.filePath(QStringLiteral("runs/three")), 10);
        page.refresh();
        QVERIFY(refreshed.wait(10000));
        QCOMPARE(page.runModel()->rowCount(), 3);
        QCOMPARE(page.selectedRun(), root.filePath(QStringLiteral("runs/two")));
    }

    void emptyFolder()
    {
        QTemporaryDir root;
        towers::app::AppSettings settings(towers::test::settingsFile(root.path()));
        settings.setRunsDir(root.filePath(QStringLiteral("none-yet")));
        RunsPage page(settings);
        QSignalSpy refreshed(&page, &RunsPage::refreshed);
        QVERIFY(refreshed.wait(10000));
        QCOMPARE(page.runModel()->rowCount(), 0);
        QVERIFY(page.selectedRun().isEmpty());
        QVERIFY(!button(page, QStringLiteral("Classify with this checkpoint"))->isEnabled());
    }
};

QTEST_MAIN(TestRunsPage)
#include "tst_runs_page.moc"
