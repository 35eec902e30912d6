#pragma once
// The series the Train page plots, accumulated from the trainer's reports: loss (raw and
// smoothed), learning rate, gradient norm, examples per second (total and per tower), test
// accuracy, and the progress and remaining time of the run. Plain data, so it is tested without
// widgets.
#include <QVector>

#include <cstdint>
#include <limits>
#include <optional>

#include "engine/train/evaluation.h"
#include "engine/train/trainer_observer.h"

namespace towers::ui {

class TrainingHistory
{
public:
    // TensorBoard's smoothing weight: each smoothed point is 0.9 of the previous one and 0.1 of
    // the new loss, debiased at the start (so the first point is the first loss).
    static constexpr double kSmoothing = 0.9;

    // A new run (or resumed run) from `startStep` to `totalSteps` (0: unknown until the first
    // report), `examplesPerTower` examples per tower and step (TrainConfig::examplesPerTowerStep:
    // the batch per tower times the batches it accumulates).
    void reset(std::int64_t startStep, std::int64_t totalSteps, std::int64_t examplesPerTower);
    void add(const engine::StepMetrics& m);
    void addEvaluation(const engine::EvalResult& r);

    const QVector<double>& steps() const { return m_steps; }
    const QVector<double>& loss() const { return m_loss; }
    const QVector<double>& smoothedLoss() const { return m_smoothed; }
    const QVector<double>& learningRate() const { return m_lr; }
    // The averaged gradients' global norm of each report (before clipping; NaN where a report
    // has none: a step that was not finite, or a run logged before Towers measured it).
    const QVector<double>& gradNorm() const { return m_gradNorm; }
    const QVector<double>& examplesPerSec() const { return m_examples; }
    // Per tower: its examples per step / its forward + backward time (of every accumulated
    // batch).
    const QVector<QVector<double>>& towerExamplesPerSec() const { return m_towerExamples; }
    const QVector<double>& evalSteps() const { return m_evalSteps; }
    const QVector<double>& evalAccuracy() const { return m_evalAccuracy; }

    // The latest report's gradient norm before clipping (StepMetrics::gradNorm); NaN where it has
    // none, or before the first report.
    double lastGradNorm() const { return m_lastGradNorm; }
    std::int64_t lastStep() const { return m_lastStep; }
    std::int64_t totalSteps() const { return m_total; }
    double lastEpoch() const { return m_lastEpoch; }
    // Share of the run done, 0..1.
    double progress() const;
    // Seconds left at the run's pace (the trainer's estimate, as towers-cli prints it); nullopt
    // before the first report.
    std::optional<double> etaSeconds() const { return m_eta; }
    // After a resumed run's logged steps were added: the run stands at `step`, its checkpoint's
    // (the last logged step may be older), with no estimate until its first report (the logs
    // keep none).
    void standAt(std::int64_t step)
    {
        m_lastStep = step;
        m_eta.reset();
    }

private:
    std::int64_t m_start = 0, m_total = 0, m_lastStep = 0;
    std::int64_t m_examplesPerTower = 1;
    double m_lastEpoch = 0;
    double m_lastGradNorm = std::numeric_limits<double>::quiet_NaN();
    double m_smoothState = 0;
    int m_smoothCount = 0;
    std::optional<double> m_eta;
    QVector<double> m_steps, m_loss, m_smoothed, m_lr, m_gradNorm, m_examples;
    QVector<QVector<double>> m_towerExamples;
    QVector<double> m_evalSteps, m_evalAccuracy;
};

// "3 h 02 min", "4 min 05 s", "12 s".
QString durationText(double seconds);

} // namespace towers::ui
