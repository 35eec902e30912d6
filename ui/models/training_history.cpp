#include "ui/models/training_history.h"

#include <QString>

#include <algorithm>
#include <cmath>

namespace towers::ui {

void TrainingHistory::reset(std::int64_t startStep, std::int64_t totalSteps,
                            std::int64_t examplesPerTower)
{
    *this = TrainingHistory();
    m_start = m_lastStep = startStep;
    m_total = totalSteps;
    m_examplesPerTower = std::max<std::int64_t>(1, examplesPerTower);
}

void TrainingHistory::add(const engine::StepMetrics& m)
{
    const double x = double(m.step);
    m_steps << x;
    m_loss << m.loss;
    if (std::isfinite(m.loss)) {
        m_smoothState = kSmoothing * m_smoothState + (1 - kSmoothing) * m.loss;
        ++m_smoothCount;
    }
    m_smoothed << (m_smoothCount ? m_smoothState / (1 - std::pow(kSmoothing, m_smoothCount))
                                 : m.loss);
    m_lr << m.lr;
    m_gradNorm << m.gradNorm;
    m_examples << m.examplesPerSec;
    if (m.totalSteps > 0) m_total = m.totalSteps;
    m_eta = m.etaSeconds;
    if (m_towerExamples.size() < qsizetype(m.towerComputeMs.size()))
        m_towerExamples.resize(qsizetype(m.towerComputeMs.size()));
    for (std::size_t t = 0; t < m.towerComputeMs.size(); ++t)
        m_towerExamples[qsizetype(t)]
            << (m.towerComputeMs[t] > 0 ? double(m_examplesPerTower) * 1000.0 / m.towerComputeMs[t]
                                        : 0.0);
    m_lastStep = m.step;
    m_lastEpoch = m.epoch;
    m_lastGradNorm = m.gradNorm;
}

void TrainingHistory::addEvaluation(const engine::EvalResult& r)
{
    m_evalSteps << double(r.step);
    m_evalAccuracy << r.precisionAt1;
}

double TrainingHistory::progress() const
{
    return m_total > 0 ? std::clamp(double(m_lastStep) / double(m_total), 0.0, 1.0) : 0.0;
}

QString durationText(double seconds)
{
    const auto s = std::int64_t(std::llround(std::max(0.0, seconds)));
    if (s >= 3600)
        return QStringLiteral("%1 h %2 min")
            .arg(s / 3600)
            .arg((s % 3600) / 60, 2, 10, QLatin1Char('0'));
    if (s >= 60)
        return QStringLiteral("%1 min %2 s").arg(s / 60).arg(s % 60, 2, 10, QLatin1Char('0'));
    return QStringLiteral("%1 s").arg(s);
}

} // namespace towers::ui
