#pragma once
// Runs one training session (engine::TrainingSession: dataset, recipe, loader, trainer) on the
// thread it lives on, a dedicated QThread. What the trainer reports goes into a MetricsBuffer;
// metricsAvailable() is emitted only when the buffer goes from empty to non-empty. pause(),
// resume() and requestStop() are plain thread-safe calls, not slots: the worker's event loop is
// busy inside run() for the whole run.
#include <QObject>
#include <QString>

#include <atomic>
#include <memory>
#include <mutex>
#include <stop_token>

#include "app/train/metrics_buffer.h"
#include "engine/train/training_session.h"

namespace towers::app {

class TrainingWorker : public QObject, private engine::TrainerObserver
{
    Q_OBJECT
public:
    enum class Outcome
    {
        Finished,
        Stopped,
        Failed
    };
    Q_ENUM(Outcome)

    // `buffer` must outlive the worker.
    explicit TrainingWorker(MetricsBuffer& buffer, QObject* parent = nullptr);
    ~TrainingWorker() override;

    // Loads the data, builds the towers (resuming when options.resume), trains until the end or a
    // stop, and emits finished() (always exactly once). Blocks: call it on the worker's thread.
    void run(engine::SessionOptions options);

    // Thread-safe. Before the trainer exists (while loading) they are remembered and applied.
    void pause();
    void resume();
    // Stops within one step; the trainer writes a checkpoint of the step reached.
    void requestStop();
    bool isStopRequested() const { return m_stop.stop_requested(); }

signals:
    // The buffer went from empty to non-empty (emitted on the worker thread).
    void metricsAvailable();
    // The session is built and about to train: its run folder, first and total steps.
    void started(const QString& runDirectory, qint64 startStep, qint64 totalSteps);
    void paused(qint64 step);
    void resumed(qint64 step);
    // Finished: the last step was reached. Stopped: a stop was requested (the checkpoint is
    // written when training had started). Failed: `message` says what went wrong. `step`: the
    // step the trainer reached (its checkpoint's, when stopped), -1 when it never trained.
    void finished(towers::app::TrainingWorker::Outcome outcome, const QString& message,
                  qint64 step);

private:
    void onStep(const engine::StepMetrics& metrics) override;
    void onEvaluation(const engine::EvalResult& result) override;
    void onLog(const std::string& line) override;
    void onCheckpoint(const std::filesystem::path& file, std::int64_t step) override;
    void onPaused(std::int64_t step) override;
    void onResumed(std::int64_t step) override;
    void notify(bool wasEmpty);

    MetricsBuffer& m_buffer;
    std::stop_source m_stop;
    std::atomic<bool> m_pauseRequested{false};
    std::mutex m_mutex; // guards m_session against pause/resume/stop from other threads
    engine::TrainingSession* m_session = nullptr;
};

} // namespace towers::app
