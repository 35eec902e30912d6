// TrainingHistory: the smoothed loss is TensorBoard's debiased exponential average (checked by the
// formula), per-tower examples per second from each tower's compute time, evaluations, progress,
// the trainer's ETA, and NaN losses that do not poison the smoothed curve.
#include <QTest>

#include <cmath>

#include "ui/models/training_history.h"

using towers::ui::TrainingHistory;

namespace {
towers::engine::StepMetrics metrics(std::int64_t step, double loss,
                                    std::vector<double> towerMs = {})
{
    towers::engine::StepMetrics m;
    m.step = step;
    m.epoch = double(step) / 100;
    m.loss = loss;
    m.lr = 0.1 / double(step);
    m.examplesPerSec = 1000 + double(step);
    m.towerComputeMs = std::move(towerMs);
    m.totalSteps = 400;
    m.etaSeconds = double(400 - step) * 0.05;
    return m;
}
} // namespace

class TestTrainingHistory : public QObject
{
    Q_OBJECT
private slots:
    void smoothing()
    {
        TrainingHistory h;
        h.reset(0, 400, 32);
        const double losses[] = {2.0, 1.0, 1.5, 0.5};
        double state = 0;
        for (int i = 0; i < 4; ++i) {
            h.add(metrics(10 * (i + 1), losses[i]));
            state = 0.9 * state + 0.1 * losses[i];
            const double expected = state / (1 - std::pow(0.9, i + 1));
            QCOMPARE(h.smoothedLoss()[i], expected);
        }
        QCOMPARE(h.smoothedLoss()[0], 2.0); // debiased: the first point is the first loss
        QCOMPARE(h.loss(), (QVector<double>{2.0, 1.0, 1.5, 0.5}));
        QCOMPARE(h.steps(), (QVector<double>{10, 20, 30, 40}));
        QCOMPARE(h.learningRate()[1], 0.1 / 20);
        QCOMPARE(h.examplesPerSec()[3], 1040.0);
        QVERIFY(std::isnan(h.lastGradNorm())); // these reports have no norm
        QCOMPARE(h.gradNorm().size(), 4);
        QVERIFY(std::isnan(h.gradNorm()[3]));
    }

    // The gradients' norm: every report's, for the plot, and the latest, for the status line.
    void gradientNorm()
    {
        TrainingHistory h;
        h.reset(0, 400, 32);
        QVERIFY(std::isnan(h.lastGradNorm()));
        for (const double norm : {2.5, 1.25}) {
            auto m = metrics(10, 1.0);
            m.gradNorm = norm;
            h.add(m);
            QCOMPARE(h.lastGradNorm(), norm);
        }
        QCOMPARE(h.gradNorm(), (QVector<double>{2.5, 1.25}));
        h.reset(0, 400, 32); // a new run
        QVERIFY(std::isnan(h.lastGradNorm()));
    }

    void nanLossDoesNotPoisonTheCurve()
    {
        TrainingHistory h;
        h.reset(0, 100, 8);
        h.add(metrics(1, 1.0));
        h.add(metrics(2, std::nan("")));
        h.add(metrics(3, 1.0));
        QVERIFY(std::isnan(h.loss()[1]));
        QVERIFY(std::isfinite(h.smoothedLoss()[1]));
        QCOMPARE(h.smoothedLoss()[2], 1.0);
    }

    // With gradient accumulation a tower computes its batch per tower times the batches it
    // accumulates in a step (TrainConfig::examplesPerTowerStep), in the time it reports.
    void towerThroughputCountsAccumulation()
    {
        TrainingHistory h;
        h.reset(0, 400, std::int64_t(32) * 4);
        h.add(metrics(10, 1.0, {40.0, 160.0}));
        QCOMPARE(h.towerExamplesPerSec()[0].front(), 3200.0); // 32 x 4 examples in 40 ms
        QCOMPARE(h.towerExamplesPerSec()[1].front(), 800.0);
    }

    void towersProgressEta()
    {
        TrainingHistory h;
        h.reset(100, 0, 32); // resumed at 100; the length comes with the first report
        QVERIFY(!h.etaSeconds());
        h.add(metrics(200, 1.0, {40.0, 80.0}));
        QCOMPARE(h.totalSteps(), 400);
        QCOMPARE(h.towerExamplesPerSec().size(), 2);
        QCOMPARE(h.towerExamplesPerSec()[0].front(), 800.0); // 32 examples in 40 ms
        QCOMPARE(h.towerExamplesPerSec()[1].front(), 400.0);
        QCOMPARE(h.progress(), 0.5);
        QCOMPARE(*h.etaSeconds(), 10.0);
        QCOMPARE(h.lastEpoch(), 2.0);
        towers::engine::EvalResult r(10);
        r.step = 200;
        r.precisionAt1 = 0.75;
        h.addEvaluation(r);
        QCOMPARE(h.evalSteps(), QVector<double>{200});
        QCOMPARE(h.evalAccuracy(), QVector<double>{0.75});
    }

    void durations()
    {
        QCOMPARE(towers::ui::durationText(12.4), QStringLiteral("12 s"));
        QCOMPARE(towers::ui::durationText(245), QStringLiteral("4 min 05 s"));
        QCOMPARE(towers::ui::durationText(3 * 3600 + 120), QStringLiteral("3 h 02 min"));
        QCOMPARE(towers::ui::durationText(-5), QStringLiteral("0 s"));
    }
};

QTEST_MAIN(TestTrainingHistory)
#include "tst_training_history.moc"
