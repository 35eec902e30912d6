#pragma once
// The UI thread's handle on training: starts a TrainingWorker on its own QThread, forwards pause,
// resume and stop as direct thread-safe calls, and drains the worker's MetricsBuffer on a short
// single-shot timer, so however fast the trainer reports, eventsReady() fires at most every
// kDrainIntervalMs (25 times a second) with everything that arrived since.
#include <QElapsedTimer>
#include <QObject>
#include <QPointer>

#include "app/train/metrics_buffer.h"
#include "app/train/training_worker.h"

class QThread;
class QTimer;

namespace towers::app {

class TrainingController : public QObject
{
    Q_OBJECT
public:
    static constexpr int kDrainIntervalMs = 40;
    enum class State
    {
        Idle,
        Loading,
        Running,
        Paused,
        Stopping
    };
    Q_ENUM(State)

    explicit TrainingController(QObject* parent = nullptr);
    // A running session is stopped (its checkpoint written) and waited for.
    ~TrainingController() override;

    // Starts a session; false (nothing happens) while one is active.
    bool start(engine::SessionOptions options);
    // The state is Paused at once; the trainer pauses after the step under way, and pausedStep()
    // is -1 until it says at which step (pausedAt()).
    void pause();
    void resume();
    void stop();

    State state() const { return m_state; }
    bool isActive() const { return m_state != State::Idle; }
    QString runDirectory() const { return m_runDirectory; }
    qint64 startStep() const { return m_startStep; }
    qint64 totalSteps() const { return m_totalSteps; }
    // The step the trainer paused at while Paused; -1 while it is still pausing (or not paused).
    qint64 pausedStep() const { return m_pausedStep; }
    // Once finished: the step the trainer reached (a stopped run's checkpoint's), -1 when it never
    // trained. The last metrics drained may be older: they come every few steps.
    qint64 finalStep() const { return m_finalStep; }
    // Drains so far (tests check the coalescing).
    int drainCount() const { return m_drains; }

    // Blocks (processing events) until the session has finished, up to `timeoutMs`; true when it
    // did. For closing the window and for tests.
    bool waitForFinished(int timeoutMs);

signals:
    void stateChanged(towers::app::TrainingController::State state);
    void started(const QString& runDirectory, qint64 startStep, qint64 totalSteps);
    void eventsReady(const towers::app::TrainingEvents& events);
    // The trainer has paused after `step` (only while the state is Paused).
    void pausedAt(qint64 step);
    // After the last eventsReady of the session.
    void finished(towers::app::TrainingWorker::Outcome outcome, const QString& message);

private:
    void setState(State state);
    void scheduleDrain();
    void drain();
    void onWorkerFinished(TrainingWorker::Outcome outcome, const QString& message, qint64 step);

    MetricsBuffer m_buffer;
    QThread* m_thread = nullptr;
    QPointer<TrainingWorker> m_worker;
    QTimer* m_drainTimer;
    QElapsedTimer m_sinceDrain;
    State m_state = State::Idle;
    QString m_runDirectory;
    qint64 m_startStep = 0, m_totalSteps = 0;
    qint64 m_pausedStep = -1;
    qint64 m_finalStep = -1;
    int m_drains = 0;
};

} // namespace towers::app
