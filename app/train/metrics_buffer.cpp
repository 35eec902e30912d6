#include "app/train/metrics_buffer.h"

namespace towers::app {

bool MetricsBuffer::pushStep(const engine::StepMetrics& metrics)
{
    std::lock_guard lock(m_mutex);
    const bool wasEmpty = m_events.isEmpty();
    m_events.steps.push_back(metrics);
    return wasEmpty;
}

bool MetricsBuffer::pushEvaluation(const engine::EvalResult& result)
{
    std::lock_guard lock(m_mutex);
    const bool wasEmpty = m_events.isEmpty();
    m_events.evaluations.push_back(result);
    return wasEmpty;
}

bool MetricsBuffer::pushLog(const QString& line)
{
    std::lock_guard lock(m_mutex);
    const bool wasEmpty = m_events.isEmpty();
    m_events.logLines.push_back(line);
    return wasEmpty;
}

bool MetricsBuffer::pushCheckpoint(const QString& file, std::int64_t step)
{
    std::lock_guard lock(m_mutex);
    const bool wasEmpty = m_events.isEmpty();
    m_events.checkpoints.emplace_back(file, step);
    return wasEmpty;
}

TrainingEvents MetricsBuffer::drain()
{
    TrainingEvents out;
    std::lock_guard lock(m_mutex);
    std::swap(out, m_events);
    return out;
}

bool MetricsBuffer::isEmpty() const
{
    std::lock_guard lock(m_mutex);
    return m_events.isEmpty();
}

} // namespace towers::app
