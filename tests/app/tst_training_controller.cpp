// TrainingController on real (tiny) training runs: metrics arrive on the UI thread in drains at
// most every kDrainIntervalMs, nothing is lost, pause holds the steps, stop ends the run within a
// step and leaves a checkpoint, a resumed run continues from it, and failures come back as
// messages.
#include <QElapsedTimer>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>

#include "app/runs/run_scanner.h"
#include "app/train/training_controller.h"
#include "training_fixture.h"

using towers::app::TrainingController;
using towers::app::TrainingEvents;
using towers::app::TrainingWorker;
namespace tt = towers::test;

namespace {
std::filesystem::path fs(const QString& p)
{
    return std::filesystem::path(p.toStdString());
}

struct Collected
{
    std::vector<std::int64_t> steps;
    std::vector<std::int64_t> evalSteps;
    QStringList log;
    std::vector<std::int64_t> checkpointSteps;
    int drains = 0;
    bool onUiThread = true;
};

void collect(TrainingController& c, Collected& out)
{
    QObject::connect(&c, &TrainingController::eventsReady, &c, [&out](const TrainingEvents& e) {
        ++out.drains;
        out.onUiThread =
            out.onUiThread && QThread::currentThread() == QCoreApplication::instance()->thread();
        for (const auto& m : e.steps) out.steps.push_back(m.step);
        for (const auto& r : e.evaluations) out.evalSteps.push_back(r.step);
        out.log << e.logLines;
        for (const auto& c2 : e.checkpoints) out.checkpointSteps.push_back(c2.second);
    });
}
} // namespace

class TestTrainingController : public QObject
{
    Q_OBJECT
    QTemporaryDir m_data;

private slots:
    void initTestCase() { tt::writeTinyMnist(fs(m_data.path())); }

    void runsToTheEnd()
    {
        QTemporaryDir runs;
        TrainingController c;
        Collected got;
        collect(c, got);
        QSignalSpy started(&c, &TrainingController::started);
        QSignalSpy finished(&c, &TrainingController::finished);
        QElapsedTimer clock;
        clock.start();
        QVERIFY(c.start(
            tt::tinyRun(fs(m_data.path()), fs(runs.filePath(QStringLiteral("r"))), 30, 2, 15)));
        QVERIFY(c.isActive());
        QVERIFY(!c.start(tt::tinyRun(fs(m_data.path()), fs(runs.filePath(QStringLiteral("r2"))),
                                     5))); // one at a time
        QVERIFY(finished.wait(60000));
        const qint64 elapsed = clock.elapsed();
        QCOMPARE(finished.at(0).at(0).value<TrainingWorker::Outcome>(),
                 TrainingWorker::Outcome::Finished);
        QCOMPARE(c.state(), TrainingController::State::Idle);
        QCOMPARE(started.count(), 1);
        QCOMPARE(started.at(0).at(2).toLongLong(), 30);
        // Every step, in order, on the UI thread, in few drains.
        std::vector<std::int64_t> expected;
        for (int s = 1; s <= 30; ++s) expected.push_back(s);
        QCOMPARE(got.steps, expected);
        QCOMPARE(got.evalSteps, (std::vector<std::int64_t>{15, 30}));
        QVERIFY(got.onUiThread);
        QCOMPARE(c.drainCount(), got.drains);
        QVERIFY2(got.drains <= elapsed / TrainingController::kDrainIntervalMs + 2,
                 qPrintable(QStringLiteral("%1 drains in %2 ms").arg(got.drains).arg(elapsed)));
        QVERIFY(!got.log.isEmpty());
        QVERIFY(got.log.join(QLatin1Char('\n')).contains(QStringLiteral("step 30, loss = ")));
        // The end's checkpoint, and step 15's: its evaluation, the first, was the best so far.
        QCOMPARE(got.checkpointSteps, (std::vector<std::int64_t>{15, 30}));
        const auto run = towers::app::readRun(runs.filePath(QStringLiteral("r")));
        QCOMPARE(run.lastStep, 30);
        QCOMPARE(run.checkpoints.back().step, 30);
        QCOMPARE(run.evaluations.size(), std::size_t(2));
        QVERIFY(run.best);
    }

    // A run that holds a validation set out and stops early ends as a finished run does, with
    // the reason in its message; its evaluations are on the validation set.
    void earlyStopEndsAsFinished()
    {
        QTemporaryDir runs;
        TrainingController c;
        Collected got;
        collect(c, got);
        QSignalSpy finished(&c, &TrainingController::finished);
        auto options =
            tt::tinyRun(fs(m_data.path()), fs(runs.filePath(QStringLiteral("r"))), 80, 2, 2);
        options.config.validation = 0.25;
        options.config.patience = 1;
        QVERIFY(c.start(options));
        QVERIFY(finished.wait(60000));
        QCOMPARE(finished.at(0).at(0).value<TrainingWorker::Outcome>(),
                 TrainingWorker::Outcome::Finished);
        const auto run = towers::app::readRun(runs.filePath(QStringLiteral("r")));
        QVERIFY2(towers::app::stoppedEarly(run), qPrintable(got.log.join(QLatin1Char('\n'))));
        QCOMPARE(finished.at(0).at(1).toString(),
                 QStringLiteral("stopped early at step %1 of 80: 1 evaluation(s) in a row "
                                "without a better one")
                     .arg(run.lastStep));
        QCOMPARE(got.evalSteps.back(), run.lastStep);
        QCOMPARE(towers::app::evaluatedSet(run), QStringLiteral("validation"));
        QVERIFY(got.log.join(QLatin1Char('\n'))
                    .contains(QStringLiteral("validation precision @ 1 = ")));
    }

    void stopWithinAStepAndResume()
    {
        QTemporaryDir runs;
        const auto dir = fs(runs.filePath(QStringLiteral("r")));
        TrainingController c;
        Collected got;
        collect(c, got);
        QSignalSpy finished(&c, &TrainingController::finished);
        QVERIFY(c.start(tt::tinyRun(fs(m_data.path()), dir, 100000)));
        QTRY_VERIFY_WITH_TIMEOUT(got.steps.size() >= 3, 30000);
        QElapsedTimer clock;
        clock.start();
        c.stop();
        QCOMPARE(c.state(), TrainingController::State::Stopping);
        QVERIFY(finished.wait(30000));
        // A step of this run takes milliseconds; the stop (with its checkpoint) a fraction of a
        // second.
        QVERIFY2(clock.elapsed() < 5000, qPrintable(QString::number(clock.elapsed())));
        QCOMPARE(finished.at(0).at(0).value<TrainingWorker::Outcome>(),
                 TrainingWorker::Outcome::Stopped);
        const std::int64_t last = got.steps.back();
        QVERIFY(last < 100000);
        QCOMPARE(got.checkpointSteps.back(), last); // the checkpoint of the step reached

        // Resume: from that checkpoint to step last + 5.
        Collected more;
        collect(c, more);
        QSignalSpy started(&c, &TrainingController::started);
        auto options = tt::tinyRun(fs(m_data.path()), dir, last + 5);
        options.resume = true;
        QVERIFY(c.start(options));
        QVERIFY(finished.wait(30000));
        QCOMPARE(finished.last().at(0).value<TrainingWorker::Outcome>(),
                 TrainingWorker::Outcome::Finished);
        QCOMPARE(started.at(0).at(1).toLongLong(), last);
        QCOMPARE(more.steps.front(), last + 1);
        QCOMPARE(more.steps.back(), last + 5);
    }

    void pauseHoldsTheSteps()
    {
        QTemporaryDir runs;
        TrainingController c;
        Collected got;
        collect(c, got);
        QSignalSpy finished(&c, &TrainingController::finished);
        QVERIFY(c.start(
            tt::tinyRun(fs(m_data.path()), fs(runs.filePath(QStringLiteral("r"))), 100000)));
        QTRY_VERIFY_WITH_TIMEOUT(got.steps.size() >= 2, 30000);
        QSignalSpy pausedAt(&c, &TrainingController::pausedAt);
        c.pause();
        QCOMPARE(c.state(), TrainingController::State::Paused);
        QCOMPARE(c.pausedStep(), qint64(-1)); // pausing: the trainer has not said where yet
        // The step under way finishes and its metrics arrive; after that, nothing more.
        std::size_t held = 0;
        int quietChecks = 0;
        for (int tries = 0; tries < 30 && quietChecks < 2; ++tries) {
            held = got.steps.size();
            QTest::qWait(250);
            quietChecks = got.steps.size() == held ? quietChecks + 1 : 0;
        }
        QCOMPARE(quietChecks, 2);
        QTest::qWait(300);
        QCOMPARE(got.steps.size(), held);
        // The step the trainer paused at: the last one it reported (every step is logged).
        QCOMPARE(pausedAt.count(), 1);
        QCOMPARE(pausedAt.at(0).at(0).toLongLong(), got.steps.back());
        QCOMPARE(c.pausedStep(), got.steps.back());
        c.resume();
        QCOMPARE(c.pausedStep(), qint64(-1));
        QCOMPARE(c.state(), TrainingController::State::Running);
        QTRY_VERIFY_WITH_TIMEOUT(got.steps.size() > held + 2, 30000);
        // Stop while paused works too.
        c.pause();
        c.stop();
        QVERIFY(finished.wait(30000));
        QCOMPARE(finished.at(0).at(0).value<TrainingWorker::Outcome>(),
                 TrainingWorker::Outcome::Stopped);
    }

    void failureComesBackAsMessage()
    {
        QTemporaryDir runs, empty;
        TrainingController c;
        QSignalSpy finished(&c, &TrainingController::finished);
        QVERIFY(c.start(tt::tinyRun(fs(empty.path()), fs(runs.filePath(QStringLiteral("r"))), 10)));
        QVERIFY(finished.wait(30000));
        QCOMPARE(finished.at(0).at(0).value<TrainingWorker::Outcome>(),
                 TrainingWorker::Outcome::Failed);
        const QString message = finished.at(0).at(1).toString();
        QVERIFY2(message.contains(QStringLiteral("mnist")), qPrintable(message));
        QCOMPARE(c.state(), TrainingController::State::Idle);
        QVERIFY(c.waitForFinished(10));
    }

    void stopWhileLoading()
    {
        QTemporaryDir runs;
        TrainingController c;
        QSignalSpy finished(&c, &TrainingController::finished);
        QVERIFY(c.start(
            tt::tinyRun(fs(m_data.path()), fs(runs.filePath(QStringLiteral("r"))), 100000)));
        c.stop();
        QVERIFY(c.waitForFinished(30000));
        QCOMPARE(finished.count(), 1);
        QCOMPARE(finished.at(0).at(0).value<TrainingWorker::Outcome>(),
                 TrainingWorker::Outcome::Stopped);
    }

    void destructorStopsTheRun()
    {
        QTemporaryDir runs;
        const auto dir = fs(runs.filePath(QStringLiteral("r")));
        {
            TrainingController c;
            Collected got;
            collect(c, got);
            QVERIFY(c.start(tt::tinyRun(fs(m_data.path()), dir, 100000)));
            QTRY_VERIFY_WITH_TIMEOUT(got.steps.size() >= 2, 30000);
        } // stops and waits; the run's checkpoint is written
        const auto run = towers::app::readRun(runs.filePath(QStringLiteral("r")));
        QVERIFY(!run.checkpoints.empty());
    }
};

QTEST_GUILESS_MAIN(TestTrainingController)
#include "tst_training_controller.moc"
