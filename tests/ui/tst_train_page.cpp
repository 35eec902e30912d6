// TrainPage on real tiny runs: Start is refused with the reason while the configuration is not
// usable; a run fills the loss, accuracy, speed and learning-rate plots with exactly the reported
// points while redrawing at most 25 times a second; the buttons follow the state; the log holds
// the trainer's lines; a failure reaches errorOccurred.
#include <QAction>
#include <QClipboard>
#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QGuiApplication>
#include <QLocale>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include "app/runs/run_log_reader.h"
#include "dataset_files.h"
#include "engine/train/run_directory.h"
#include "engine/train/run_lock.h"
#include "training_fixture.h"
#include "ui/pages/train_page.h"
#include "ui/plots/plot_widget.h"
#include "ui/widgets/path_label.h"
#include "ui_test_support.h"
#include <qcustomplot.h>

using towers::ui::TrainPage;
namespace tt = towers::test;

namespace {
std::filesystem::path fs(const QString& p)
{
    return std::filesystem::path(p.toStdString());
}
QPushButton* button(TrainPage& page, const QString& text)
{
    for (auto* b : page.findChildren<QPushButton*>())
        if (b->text().remove(QLatin1Char('&')) == text) return b;
    return nullptr;
}
} // namespace

class TestTrainPage : public QObject
{
    Q_OBJECT
    QTemporaryDir m_data;

private slots:
    void initTestCase()
    {
        tt::writeTinyMnist(fs(m_data.path()));
        QVERIFY(tt::installPluralForms()); // "1 tower", as in towers
    }

    void startIsRefusedWithReason()
    {
        TrainPage page;
        page.setOptionsProvider(
            [](QString* error) -> std::optional<towers::engine::SessionOptions> {
                *error = QStringLiteral("learning rate: must be greater than 0");
                return std::nullopt;
            });
        auto* start = button(page, QStringLiteral("Start"));
        QVERIFY(start);
        QVERIFY(!start->isEnabled());
        QVERIFY(start->toolTip().contains(QStringLiteral("learning rate: must be greater than 0")));
        QVERIFY(page.statusText().contains(QStringLiteral("learning rate")));
    }

    // A run of 100 classes (CIFAR-100): precision @ 5 beside precision @ 1, each evaluation's.
    void topFiveOfManyClasses()
    {
        QTemporaryDir data, runs;
        towers::test::writeCifar100(fs(data.filePath(QStringLiteral("cifar100"))), 64, 40, 3);
        TrainPage page;
        page.resize(1000, 700);
        page.show();
        QVERIFY(QTest::qWaitForWindowExposed(&page));
        auto options =
            tt::tinyRun(fs(data.path()), fs(runs.filePath(QStringLiteral("r"))), 4, 1, 2);
        options.config.dataset = "cifar100";
        options.config.model = "cifar10-tutorial";
        page.setOptionsProvider([options](QString*) { return std::optional(options); });
        QSignalSpy finished(&page, &TrainPage::runFinished);
        QTest::mouseClick(button(page, QStringLiteral("Start")), Qt::LeftButton);
        QVERIFY(finished.wait(60000));
        QTest::qWait(2 * 40); // the last coalesced redraw
        towers::ui::PlotWidget* accuracy = page.accuracyPlot();
        QCOMPARE(accuracy->pointCount(0), 2);
        QVERIFY(accuracy->customPlot()->graph(TrainPage::kTop5Series)->visible());
        QCOMPARE(accuracy->pointCount(TrainPage::kTop5Series), 2);
        QCOMPARE(accuracy->seriesName(TrainPage::kTop5Series), QStringLiteral("test set, top 5"));
        // Dashed, with a dot at each evaluation, in a colour of its own (as the Runs page).
        const QCPGraph* top5 = accuracy->customPlot()->graph(TrainPage::kTop5Series);
        QCOMPARE(top5->pen().style(), Qt::DashLine);
        QVERIFY(top5->scatterStyle().shape() != QCPScatterStyle::ssNone);
        QVERIFY(top5->pen().color() != accuracy->customPlot()->graph(0)->pen().color());
        QCOMPARE(accuracy->customPlot()->legend->itemCount(), 2);
        QCOMPARE(accuracy->customPlot()->yAxis->label(), QStringLiteral("precision @ 1 and @ 5"));
        const auto evals =
            towers::app::readLoggedSteps(runs.filePath(QStringLiteral("r")), 4).evaluations;
        QCOMPARE(evals.size(), std::size_t(2));
        for (const auto& e : evals) {
            QVERIFY(e.hasTop5());
            QVERIFY(e.precisionAt5 >= e.precisionAt1);
        }
        QCOMPARE(accuracy->lastValue(TrainPage::kTop5Series), evals.back().precisionAt5);
    }

    void runFillsThePlots()
    {
        QTemporaryDir runs;
        TrainPage page;
        page.resize(1000, 700);
        page.show();
        QVERIFY(QTest::qWaitForWindowExposed(&page));
        const auto options =
            tt::tinyRun(fs(m_data.path()), fs(runs.filePath(QStringLiteral("r"))), 40, 2, 20);
        page.setOptionsProvider([options](QString*) { return std::optional(options); });
        auto* start = button(page, QStringLiteral("Start"));
        QVERIFY(start->isEnabled());
        QSignalSpy finished(&page, &TrainPage::runFinished);
        QSignalSpy towerTimes(&page, &TrainPage::towerTimes);
        const int replotsBefore = page.lossPlot()->replotCount();
        QElapsedTimer clock;
        clock.start();
        QTest::mouseClick(start, Qt::LeftButton);
        QVERIFY(page.isActive());
        QVERIFY(!start->isEnabled());
        QVERIFY(button(page, QStringLiteral("Stop"))->isEnabled());
        QVERIFY(finished.wait(60000));
        const qint64 elapsed = clock.elapsed();
        QCOMPARE(finished.at(0).at(0).value<towers::app::TrainingWorker::Outcome>(),
                 towers::app::TrainingWorker::Outcome::Finished);
        QTest::qWait(2 * 40); // the last coalesced redraw
        // Every logged step is a point; both evaluations are on the accuracy plot.
        QCOMPARE(page.lossPlot()->pointCount(0), 40);
        QCOMPARE(page.lossPlot()->pointCount(1), 40);
        QCOMPARE(page.lrPlot()->pointCount(0), 40);
        // The gradients' norm at every logged step, on the right axis; no bound (no clipping).
        QCOMPARE(page.lrPlot()->seriesCount(), 2);
        QCOMPARE(page.lrPlot()->seriesName(1), QStringLiteral("gradient norm"));
        QCOMPARE(page.lrPlot()->pointCount(1), 40);
        QVERIFY(page.lrPlot()->rightAxisShown());
        QCOMPARE(page.accuracyPlot()->pointCount(0), 2);
        // Ten classes: no precision @ 5, and no legend entry for it.
        QVERIFY(!page.accuracyPlot()->customPlot()->graph(TrainPage::kTop5Series)->visible());
        QCOMPARE(page.accuracyPlot()->customPlot()->legend->itemCount(), 1);
        // Each evaluation's cross-entropy beside the training loss.
        QCOMPARE(page.lossPlot()->pointCount(2), 2);
        QCOMPARE(page.lossPlot()->seriesName(2), QStringLiteral("test cross-entropy"));
        QCOMPARE(page.speedPlot()->seriesCount(), 3); // total + two towers
        QCOMPARE(page.speedPlot()->pointCount(2), 40);
        QCOMPARE(page.history().lastStep(), 40);
        QCOMPARE(page.lossPlot()->lastValue(0), page.history().loss().back());
        QVERIFY(towerTimes.count() >= 1);
        // One signal per report (the Devices page's timeline has each), with every tower's split.
        QCOMPARE(towerTimes.count(), 40);
        QCOMPARE(towerTimes.last().at(0).value<qint64>(), qint64(40));
        const auto split = towerTimes.last().at(1).value<std::vector<towers::engine::TowerTimes>>();
        QCOMPARE(split.size(), std::size_t(2));
        for (const auto& t : split) {
            QVERIFY(t.computeMs > 0);
            QVERIFY(t.commMs >= 0 && t.dataMs >= 0 && t.updateMs >= 0);
        }
        const int replots = page.lossPlot()->replotCount() - replotsBefore;
        QVERIFY2(replots <= elapsed / towers::ui::PlotWidget::kMinReplotIntervalMs + 2,
                 qPrintable(QStringLiteral("%1 redraws in %2 ms").arg(replots).arg(elapsed)));
        QVERIFY(page.logView()->toPlainText().contains(QStringLiteral("step 40, loss = ")));
        QVERIFY(page.statusText().contains(QStringLiteral("Finished")));
        QVERIFY(start->isEnabled());
        QVERIFY(!button(page, QStringLiteral("Stop"))->isEnabled());
        QCOMPARE(page.runDirectory(), runs.filePath(QStringLiteral("r")));
        QVERIFY2(page.history().lastGradNorm() > 0, // measured, though the run does not clip
                 qPrintable(QString::number(page.history().lastGradNorm())));
        QCOMPARE(page.lrPlot()->lastValue(1), page.history().lastGradNorm());
    }

    // A run that accumulates its gradients: each tower computes its batch times the batches it
    // accumulates per step, in the time it reports; its speed on the plot counts them all.
    void accumulatingRunCountsEveryBatchInTheTowersSpeed()
    {
        QTemporaryDir runs;
        TrainPage page;
        auto options =
            tt::tinyRun(fs(m_data.path()), fs(runs.filePath(QStringLiteral("r"))), 3, 2, 0);
        options.config.accumulate = 2;
        page.setOptionsProvider([options](QString*) { return std::optional(options); });
        QSignalSpy finished(&page, &TrainPage::runFinished);
        QSignalSpy towerTimes(&page, &TrainPage::towerTimes);
        QTest::mouseClick(button(page, QStringLiteral("Start")), Qt::LeftButton);
        QVERIFY(finished.wait(60000));
        QCOMPARE(finished.at(0).at(0).value<towers::app::TrainingWorker::Outcome>(),
                 towers::app::TrainingWorker::Outcome::Finished);
        QCOMPARE(page.history().lastStep(), 3);
        QVERIFY(towerTimes.count() >= 1);
        const auto split = towerTimes.last().at(1).value<std::vector<towers::engine::TowerTimes>>();
        const auto& speeds = page.history().towerExamplesPerSec();
        QCOMPARE(speeds.size(), qsizetype(2));
        for (std::size_t t = 0; t < split.size(); ++t) {
            QVERIFY(split[t].computeMs > 0);
            QCOMPARE(speeds[qsizetype(t)].last(), 16 * 2 * 1000.0 / split[t].computeMs);
        }
    }

    // A run that clips its gradients: the history has their norm for the status line, the plot
    // has it above the bound, drawn across the steps, and the log's step lines say it and that
    // the step clipped.
    void clippingRunShowsTheGradientNorm()
    {
        QTemporaryDir runs;
        TrainPage page;
        auto options =
            tt::tinyRun(fs(m_data.path()), fs(runs.filePath(QStringLiteral("r"))), 6, 2, 3);
        options.config.clipGradNorm = 0.01;
        page.setOptionsProvider([options](QString*) { return std::optional(options); });
        QSignalSpy finished(&page, &TrainPage::runFinished);
        QTest::mouseClick(button(page, QStringLiteral("Start")), Qt::LeftButton);
        QVERIFY(finished.wait(60000));
        QTest::qWait(2 * 40);
        QVERIFY2(page.history().lastGradNorm() > 0.01,
                 qPrintable(QString::number(page.history().lastGradNorm())));
        QCOMPARE(page.lrPlot()->seriesCount(), 3);
        QCOMPARE(page.lrPlot()->seriesName(2), QStringLiteral("clipped to 0.01"));
        QCOMPARE(page.lrPlot()->pointCount(1), 6);
        QCOMPARE(page.lrPlot()->pointCount(2), 2);
        QCOMPARE(page.lrPlot()->lastValue(2), 0.01);
        QVERIFY(page.lrPlot()->lastValue(1) > 0.01);
        QVERIFY2(page.logView()->toPlainText().contains(
                     QRegularExpression(QStringLiteral("step 6, loss = .*, gradient norm "
                                                       "[0-9.e+-]+ \\(clipped to 0\\.01\\)"))),
                 qPrintable(page.logView()->toPlainText()));
        // A resumed run's curves come from metrics.jsonl: the norms with them.
        const auto logged = towers::app::readLoggedSteps(runs.filePath(QStringLiteral("r")), 6);
        QCOMPARE(logged.steps.size(), std::size_t(6));
        QCOMPARE(logged.steps.back().gradNorm, page.history().lastGradNorm());
        for (const auto& m : logged.steps) QVERIFY(m.gradNorm > 0.01);
    }

    void pauseResumeStopButtons()
    {
        QTemporaryDir runs;
        TrainPage page;
        const auto options =
            tt::tinyRun(fs(m_data.path()), fs(runs.filePath(QStringLiteral("r"))), 100000, 1);
        page.setOptionsProvider([options](QString*) { return std::optional(options); });
        QSignalSpy finished(&page, &TrainPage::runFinished);
        page.start();
        QTRY_VERIFY_WITH_TIMEOUT(page.history().lastStep() >= 2, 30000);
        auto* pause = button(page, QStringLiteral("Pause"));
        QVERIFY(pause);
        QTest::mouseClick(pause, Qt::LeftButton);
        QCOMPARE(page.controller()->state(), towers::app::TrainingController::State::Paused);
        QCOMPARE(pause->text().remove(QLatin1Char('&')), QStringLiteral("Resume"));
        // "Pausing…" until the trainer says where it paused, then that step, which later
        // reports (the step that was under way) do not overwrite.
        QVERIFY2(page.statusText().startsWith(QStringLiteral("Pausing")),
                 qPrintable(page.statusText()));
        QTRY_VERIFY_WITH_TIMEOUT(page.controller()->pausedStep() >= 2, 30000);
        const QString paused = QStringLiteral("Paused at step %1.")
                                   .arg(QLocale().toString(page.controller()->pausedStep()));
        QCOMPARE(page.statusText(), paused);
        QTRY_COMPARE_WITH_TIMEOUT(page.history().lastStep(), page.controller()->pausedStep(),
                                  30000);
        QTest::qWait(300);
        QCOMPARE(page.statusText(), paused);
        QTest::mouseClick(pause, Qt::LeftButton);
        QCOMPARE(page.controller()->state(), towers::app::TrainingController::State::Running);
        QTest::mouseClick(button(page, QStringLiteral("Stop")), Qt::LeftButton);
        QVERIFY(finished.wait(30000));
        QCOMPARE(finished.at(0).at(0).value<towers::app::TrainingWorker::Outcome>(),
                 towers::app::TrainingWorker::Outcome::Stopped);
        QVERIFY(page.statusText().contains(QStringLiteral("Stopped at step")));
    }

    // A stopped run's status names the step its checkpoint is of, the trainer's last: the last
    // metrics drained are older when steps are logged every few (it said "Stopped at step 170"
    // of a checkpoint of step 179).
    void stoppedAtTheCheckpointsStep()
    {
        QTemporaryDir runs;
        TrainPage page;
        auto options =
            tt::tinyRun(fs(m_data.path()), fs(runs.filePath(QStringLiteral("r"))), 100000, 1);
        options.config.logEvery = 50; // the stop falls between two metrics lines
        page.setOptionsProvider([options](QString*) { return std::optional(options); });
        QSignalSpy finished(&page, &TrainPage::runFinished);
        page.start();
        QTRY_VERIFY_WITH_TIMEOUT(page.history().lastStep() >= 50, 60000);
        QTest::mouseClick(button(page, QStringLiteral("Stop")), Qt::LeftButton);
        QVERIFY(finished.wait(30000));
        const QStringList checkpoints =
            QDir(runs.filePath(QStringLiteral("r/checkpoints")))
                .entryList({QStringLiteral("ckpt-*.safetensors")}, QDir::Files, QDir::Name);
        QCOMPARE(checkpoints.size(), 1);
        const qint64 step = checkpoints.first()
                                .section(QLatin1Char('-'), 1)
                                .section(QLatin1Char('.'), 0, 0)
                                .toLongLong();
        QVERIFY2(step >= 50, qPrintable(checkpoints.first()));
        QCOMPARE(page.controller()->finalStep(), step);
        QVERIFY2(page.statusText().startsWith(
                     QStringLiteral("Stopped at step %1;").arg(QLocale().toString(step))),
                 qPrintable(page.statusText() + QStringLiteral(" / ") + checkpoints.first()));
    }

    // A resumed run's plots show its curves from step 1, as its logs have them up to the resume,
    // then the new steps (they started at the resume: the earlier curve was gone).
    void resumedRunShowsItsWholeCurves()
    {
        QTemporaryDir runs;
        TrainPage page;
        auto options =
            tt::tinyRun(fs(m_data.path()), fs(runs.filePath(QStringLiteral("r"))), 100000, 1, 4);
        options.config.logEvery = 2;
        page.setOptionsProvider([&options](QString*) { return std::optional(options); });
        QSignalSpy finished(&page, &TrainPage::runFinished);
        page.start();
        QTRY_VERIFY_WITH_TIMEOUT(page.history().evalSteps().size() >= 2, 60000);
        QTest::mouseClick(button(page, QStringLiteral("Stop")), Qt::LeftButton);
        QVERIFY(finished.wait(30000));
        const qint64 stopped = page.controller()->finalStep();
        const int lossPoints = page.lossPlot()->pointCount(0);
        const int evaluations = page.accuracyPlot()->pointCount(0);
        QVERIFY(lossPoints >= 4 && evaluations >= 2);

        options.resume = true;
        page.start();
        // At the resume, the run stands at its checkpoint's step, not at the last logged one.
        QTRY_VERIFY_WITH_TIMEOUT(!page.history().steps().isEmpty(), 30000);
        QCOMPARE(page.history().steps().first(), 2.0); // the first logged step, not the resume's
        QVERIFY(page.history().lastStep() >= stopped);
        QTRY_VERIFY_WITH_TIMEOUT(page.history().lastStep() > stopped + 2, 30000);
        QVERIFY2(page.lossPlot()->pointCount(0) > lossPoints,
                 qPrintable(QString::number(page.lossPlot()->pointCount(0))));
        QVERIFY(page.accuracyPlot()->pointCount(0) >= evaluations);
        QVERIFY(page.lrPlot()->pointCount(0) > lossPoints);
        QVERIFY(page.speedPlot()->pointCount(0) > lossPoints);
        QTest::mouseClick(button(page, QStringLiteral("Stop")), Qt::LeftButton);
        QVERIFY(finished.wait(30000));
    }

    // A long run folder path does not widen the page (it scrolled sideways, the plots cut off):
    // it is elided in the middle, the whole path in its tooltip.
    void longRunFolderDoesNotWidenThePage()
    {
        QTemporaryDir runs;
        TrainPage page;
        page.resize(900, 600);
        page.show();
        QVERIFY(QTest::qWaitForWindowExposed(&page));
        QSignalSpy finished(&page, &TrainPage::runFinished);
        // The page's least width while a run in `dir` trains.
        const auto leastWidthWith = [&](const QString& dir) {
            const auto options = tt::tinyRun(fs(m_data.path()), fs(dir), 100000, 1);
            page.setOptionsProvider([options](QString*) { return std::optional(options); });
            page.start();
            QCoreApplication::processEvents();
            const int least = page.minimumSizeHint().width();
            QTest::mouseClick(button(page, QStringLiteral("Stop")), Qt::LeftButton);
            return finished.wait(30000) ? least : -1;
        };
        const int shortPath = leastWidthWith(runs.filePath(QStringLiteral("r")));
        const QString dir = runs.filePath(QStringLiteral("a-long-folder-name-for-the-runs/%1/r")
                                              .arg(QString(120, QLatin1Char('x'))));
        const int longPath = leastWidthWith(dir);
        QVERIFY(shortPath > 0);
        QCOMPARE(longPath, shortPath);
        auto* label = page.findChild<towers::ui::PathLabel*>();
        QVERIFY(label);
        QCOMPARE(label->toolTip(), dir);
        QVERIFY2(label->text().contains(QChar(0x2026)), qPrintable(label->text())); // "…"
        QVERIFY(label->text().endsWith(QStringLiteral("/r")));
        QCOMPARE(label->actions().size(), 1); // "Copy path": the whole path
        label->actions().first()->trigger();
        QCOMPARE(QGuiApplication::clipboard()->text(), dir);
    }

    // The queue: while a run trains, "Add to queue" takes the pages' configuration of that moment;
    // each queued run starts when the one before finishes, in order; a stop holds the queue until
    // Start next; Clear queue empties it.
    void queuedRunsStartInTurn()
    {
        QTemporaryDir runs;
        TrainPage page;
        // What the pages say next: a run's folder name and its length.
        QString name = QStringLiteral("r1");
        std::int64_t steps = 100000;
        page.setOptionsProvider([&](QString*) {
            return std::optional(tt::tinyRun(fs(m_data.path()), fs(runs.filePath(name)), steps, 1));
        });
        QSignalSpy started(&page, &TrainPage::runStarted);
        QSignalSpy finished(&page, &TrainPage::runFinished);
        auto* enqueue = page.findChild<QPushButton*>(QStringLiteral("enqueue"));
        QVERIFY(enqueue);
        QVERIFY(enqueue->isHidden()); // nothing trains: Start
        page.start();                 // r1, long
        QTRY_VERIFY_WITH_TIMEOUT(page.history().lastStep() >= 1, 30000);
        QVERIFY(!enqueue->isHidden() && enqueue->isEnabled());
        name = QStringLiteral("r2");
        steps = 6;
        QTest::mouseClick(enqueue, Qt::LeftButton);
        name = QStringLiteral("r3");
        QTest::mouseClick(enqueue, Qt::LeftButton);
        QCOMPARE(page.queuedRuns(), 2);
        // A stop holds the queue.
        page.stop();
        QVERIFY(finished.wait(30000));
        QTest::qWait(100);
        QCOMPARE(page.queuedRuns(), 2);
        QVERIFY(page.queueHeld());
        QVERIFY(!page.isActive());
        QVERIFY(button(page, QStringLiteral("Start next"))->isEnabled());
        // Start next: r2, then r3 on its own once r2 finished.
        QTest::mouseClick(button(page, QStringLiteral("Start next")), Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 3, 60000);
        QTRY_VERIFY_WITH_TIMEOUT(!page.isActive(), 30000);
        QCOMPARE(page.queuedRuns(), 0);
        QStringList order;
        for (const auto& s : started) order << QFileInfo(s.at(0).toString()).fileName();
        QCOMPARE(order,
                 (QStringList{QStringLiteral("r1"), QStringLiteral("r2"), QStringLiteral("r3")}));
        for (int i = 1; i < 3; ++i)
            QCOMPARE(finished.at(i).at(0).value<towers::app::TrainingWorker::Outcome>(),
                     towers::app::TrainingWorker::Outcome::Finished);
        QVERIFY(page.logView()->toPlainText().contains(QStringLiteral("Queued run 2")));

        // Clear queue: queued, then cleared; nothing more starts.
        name = QStringLiteral("r4");
        steps = 100000;
        page.start();
        QTRY_VERIFY_WITH_TIMEOUT(page.history().lastStep() >= 1, 30000);
        name = QStringLiteral("r5");
        QTest::mouseClick(enqueue, Qt::LeftButton);
        QTest::mouseClick(button(page, QStringLiteral("Clear queue")), Qt::LeftButton);
        QCOMPARE(page.queuedRuns(), 0);
        page.stop();
        QTRY_VERIFY_WITH_TIMEOUT(!page.isActive(), 30000);
        QTest::qWait(100);
        QCOMPARE(started.count(), 4);
    }

    // A queued run in a new folder is named when it starts (<dataset>-<model>-<now>), not when it
    // was queued.
    void queuedNewFolderIsNamedWhenItStarts()
    {
        QTemporaryDir runs;
        TrainPage page;
        std::int64_t steps = 100000;
        page.setOptionsProvider([&](QString*) {
            auto o = tt::tinyRun(fs(m_data.path()), fs(runs.filePath(QStringLiteral("first"))),
                                 steps, 1);
            if (steps < 100000) { // the queued one: a new folder, proposed long ago
                o.newFolder = true;
                o.runDirectory =
                    fs(runs.filePath(QStringLiteral("%1-%2-20000101-000000")
                                         .arg(QString::fromStdString(o.config.dataset),
                                              QString::fromStdString(o.config.model))));
            }
            return std::optional(o);
        });
        QSignalSpy started(&page, &TrainPage::runStarted);
        QSignalSpy finished(&page, &TrainPage::runFinished);
        page.start();
        QTRY_VERIFY_WITH_TIMEOUT(page.history().lastStep() >= 1, 30000);
        steps = 2;
        page.enqueue();
        QCOMPARE(page.queuedRuns(), 1);
        page.stop();
        QVERIFY(finished.wait(30000));
        page.startNextQueued();
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 2, 60000);
        QCOMPARE(started.count(), 2);
        const QString folder = QFileInfo(started.at(1).at(0).toString()).fileName();
        QVERIFY2(!folder.contains(QStringLiteral("20000101")) &&
                     QRegularExpression(QStringLiteral("-\\d{8}-\\d{6}$")).match(folder).hasMatch(),
                 qPrintable(folder));
        QVERIFY(QFileInfo(started.at(1).at(0).toString()).isDir());
    }

    void divergedLossIsReported()
    {
        QTemporaryDir runs;
        TrainPage page;
        auto options =
            tt::tinyRun(fs(m_data.path()), fs(runs.filePath(QStringLiteral("r"))), 500, 1);
        options.config.schedule.lr = 1e9; // blows up within a few steps
        page.setOptionsProvider([options](QString*) { return std::optional(options); });
        QSignalSpy errors(&page, &TrainPage::errorOccurred);
        QSignalSpy finished(&page, &TrainPage::runFinished);
        page.start();
        QVERIFY(finished.wait(60000));
        QCOMPARE(finished.at(0).at(0).value<towers::app::TrainingWorker::Outcome>(),
                 towers::app::TrainingWorker::Outcome::Failed);
        QCOMPARE(errors.count(), 1);
        const QString message = errors.at(0).at(0).toString();
        QVERIFY2(message.contains(QStringLiteral("diverged")), qPrintable(message));
        QVERIFY(page.logView()->toPlainText().contains(QStringLiteral("diverged")));
        // What to change: a resume would diverge again.
        QVERIFY2(message.contains(QStringLiteral("A resume would diverge again: start a new run "
                                                 "with a lower learning rate")),
                 qPrintable(message));
        QVERIFY(page.statusText().contains(QStringLiteral("maximum gradient norm")));
    }

    // A failure of another kind says only what it was: no divergence's advice.
    void failureIsReported()
    {
        QTemporaryDir runs, empty;
        TrainPage page;
        const auto options =
            tt::tinyRun(fs(empty.path()), fs(runs.filePath(QStringLiteral("r"))), 10);
        page.setOptionsProvider([options](QString*) { return std::optional(options); });
        QSignalSpy errors(&page, &TrainPage::errorOccurred);
        QSignalSpy finished(&page, &TrainPage::runFinished);
        page.start();
        QVERIFY(finished.wait(30000));
        QCOMPARE(errors.count(), 1);
        QVERIFY(errors.at(0).at(0).toString().contains(QStringLiteral("mnist")));
        QVERIFY(!errors.at(0).at(0).toString().contains(QStringLiteral("diverge")));
        QVERIFY(page.statusText().startsWith(QStringLiteral("Failed")));
    }

    // A start that fails at once (its folder locked by another trainer) does not say it started
    // (runStarted is the session's real start), neither in the log ("New run in …" is said once
    // the session has started) nor by clearing the plots: they keep the last run's curves.
    void failedStartKeepsTheLastRunsPlots()
    {
        QTemporaryDir runs;
        TrainPage page;
        QString name = QStringLiteral("first");
        page.setOptionsProvider([&](QString*) {
            return std::optional(tt::tinyRun(fs(m_data.path()), fs(runs.filePath(name)), 6, 1));
        });
        QSignalSpy started(&page, &TrainPage::runStarted);
        QSignalSpy finished(&page, &TrainPage::runFinished);
        page.start();
        QVERIFY(finished.wait(30000));
        QCOMPARE(started.count(), 1);
        const int points = page.lossPlot()->pointCount(0);
        QVERIFY(points > 0);
        QVERIFY2(page.logView()->toPlainText().contains(
                     QStringLiteral("New run in %1: fashion-fast on mnist, 1 tower\n")
                         .arg(runs.filePath(QStringLiteral("first")))),
                 qPrintable(page.logView()->toPlainText()));

        name = QStringLiteral("locked");
        const auto lock = towers::engine::RunLock::acquire(fs(runs.filePath(name)), "another");
        QSignalSpy errors(&page, &TrainPage::errorOccurred);
        QSignalSpy active(&page, &TrainPage::activeChanged);
        page.start();
        QVERIFY(finished.wait(30000));
        QCOMPARE(finished.at(1).at(0).value<towers::app::TrainingWorker::Outcome>(),
                 towers::app::TrainingWorker::Outcome::Failed);
        QCOMPARE(errors.count(), 1);
        QCOMPARE(started.count(), 1); // the first run's only
        QCOMPARE(active.count(), 2);  // it was active, then not
        QCOMPARE(page.lossPlot()->pointCount(0), points);
        QVERIFY(page.statusText().startsWith(QStringLiteral("Failed")));
        const QString log = page.logView()->toPlainText();
        QVERIFY2(
            log.count(QStringLiteral("New run in ")) == 1 && // the first run's only
                log.section(QLatin1Char('\n'), -1).startsWith(QStringLiteral("Training failed: ")),
            qPrintable(log));
    }

    // A new run's folder is made when its session starts, "-2" appended where the name is taken:
    // the log names the folder it made, once the session has started, and the trainer's notes
    // from while the session was made (here the validation set held out) follow that line.
    void logNamesTheFolderTheRunMade()
    {
        QTemporaryDir runs;
        QVERIFY(QDir().mkpath(runs.filePath(QStringLiteral("r")))); // the name is taken
        auto options = tt::tinyRun(fs(m_data.path()), fs(runs.filePath(QStringLiteral("r"))), 4, 2);
        options.newFolder = true;
        options.config.validation = 0.25;
        TrainPage page;
        page.setOptionsProvider([options](QString*) { return std::optional(options); });
        QSignalSpy finished(&page, &TrainPage::runFinished);
        page.start();
        QVERIFY(finished.wait(30000));
        QCOMPARE(finished.at(0).at(0).value<towers::app::TrainingWorker::Outcome>(),
                 towers::app::TrainingWorker::Outcome::Finished);
        QCOMPARE(page.runDirectory(), runs.filePath(QStringLiteral("r-2")));
        const QString log = page.logView()->toPlainText();
        const QString line = QStringLiteral("New run in %1: fashion-fast on mnist, 2 towers\n")
                                 .arg(runs.filePath(QStringLiteral("r-2")));
        QVERIFY2(log.startsWith(line), qPrintable(log));
        QVERIFY2(log.contains(QStringLiteral("\nholding out ")), qPrintable(log));
    }

    // Stop before the session has started (the data loading): the status says nothing was
    // trained, not "Stopped at step 0; the checkpoint is saved". The stop races the start: when
    // the session wins, the run stops after a step and says so with its checkpoint.
    void stopWhileLoadingSaysNothingWasSaved()
    {
        QTemporaryDir runs;
        TrainPage page;
        page.setOptionsProvider([&](QString*) {
            return std::optional(
                tt::tinyRun(fs(m_data.path()), fs(runs.filePath(QStringLiteral("r"))), 1000, 1));
        });
        QSignalSpy finished(&page, &TrainPage::runFinished);
        page.start();
        page.stop(); // at once: the worker's thread is still making the session
        QVERIFY(finished.wait(30000));
        QCOMPARE(finished.at(0).at(0).value<towers::app::TrainingWorker::Outcome>(),
                 towers::app::TrainingWorker::Outcome::Stopped);
        const bool trained = !QDir(runs.filePath(QStringLiteral("r/checkpoints")))
                                  .entryList({QStringLiteral("*.safetensors")})
                                  .isEmpty();
        QVERIFY2(page.statusText().startsWith(trained
                                                  ? QStringLiteral("Stopped at step")
                                                  : QStringLiteral("Stopped before the first "
                                                                   "step: nothing was trained")),
                 qPrintable(page.statusText()));
    }

    // A run folder another trainer holds (here this process, as a second program would): the
    // page says so, naming the folder and the holder; a folder that holds a run is not touched.
    void busyOrOccupiedFolderIsRefused()
    {
        QTemporaryDir runs;
        const auto folder = fs(runs.filePath(QStringLiteral("r")));
        const auto options = tt::tinyRun(fs(m_data.path()), folder, 10);
        {
            const auto lock = towers::engine::RunLock::acquire(folder, "another trainer");
            TrainPage page;
            page.setOptionsProvider([options](QString*) { return std::optional(options); });
            QSignalSpy errors(&page, &TrainPage::errorOccurred);
            QSignalSpy finished(&page, &TrainPage::runFinished);
            page.start();
            QVERIFY(finished.wait(30000));
            QCOMPARE(errors.count(), 1);
            const QString message = errors.at(0).at(0).toString();
            QVERIFY2(message.contains(QString::fromStdString(folder.string())) &&
                         message.contains(QStringLiteral("in use by process %1")
                                              .arg(QCoreApplication::applicationPid())) &&
                         message.contains(QStringLiteral("another trainer")),
                     qPrintable(message));
        }
        towers::engine::RunDirectory(folder).writeConfig("{}");
        TrainPage page;
        page.setOptionsProvider([options](QString*) { return std::optional(options); });
        QSignalSpy errors(&page, &TrainPage::errorOccurred);
        QSignalSpy finished(&page, &TrainPage::runFinished);
        page.start();
        QVERIFY(finished.wait(30000));
        QVERIFY2(errors.at(0).at(0).toString().contains(QStringLiteral("already holds a run")),
                 qPrintable(errors.at(0).at(0).toString()));
        QCOMPARE(*towers::engine::RunDirectory(folder).readConfig(), std::string("{}\n"));
    }
};

QTEST_MAIN(TestTrainPage)
#include "tst_train_page.moc"
