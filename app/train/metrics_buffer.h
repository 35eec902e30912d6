#pragma once
// Between the training thread and the UI: the worker appends what the trainer reports under a
// mutex; the UI takes everything at once (drain) on its own schedule. push* tells the caller when
// the buffer went from empty to non-empty, the one moment worth a signal, so a fast trainer
// costs one queued signal per drain, not one per step.
#include <QString>
#include <QStringList>

#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "engine/train/evaluation.h"
#include "engine/train/trainer_observer.h"

namespace towers::app {

struct TrainingEvents
{
    std::vector<engine::StepMetrics> steps;
    std::vector<engine::EvalResult> evaluations;
    QStringList logLines;
    std::vector<std::pair<QString, std::int64_t>> checkpoints; // file, step

    bool isEmpty() const
    {
        return steps.empty() && evaluations.empty() && logLines.isEmpty() && checkpoints.empty();
    }
};

class MetricsBuffer
{
public:
    // Each returns true when the buffer was empty before the call.
    bool pushStep(const engine::StepMetrics& metrics);
    bool pushEvaluation(const engine::EvalResult& result);
    bool pushLog(const QString& line);
    bool pushCheckpoint(const QString& file, std::int64_t step);

    // Everything since the last drain, oldest first; the buffer is empty afterwards. The lock is
    // held only for a swap.
    TrainingEvents drain();
    bool isEmpty() const;

private:
    mutable std::mutex m_mutex;
    TrainingEvents m_events;
};

} // namespace towers::app
