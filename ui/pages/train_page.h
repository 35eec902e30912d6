#pragma once
// The Train page: start, pause, resume and stop a run; live plots of the loss (raw and
// smoothed), test accuracy, examples per second (total and per tower), learning rate and the
// gradients' norm (with a run's clipping bound); progress with the remaining time; the trainer's
// log in the tutorial's format; the run's folder one click away. Training runs on a worker thread
// (app::TrainingController); the plots take what arrived at most 25 times a second, so the window
// stays responsive however fast the steps are.
//
// While a run trains, "Add to queue" queues a new run with the pages' configuration of that
// moment (as DIGITS queued jobs): each queued run starts when the one before finishes (or fails),
// in order; a run stopped by the user (Stop, closing the window) holds the queue, which "Start
// next" then continues, and "Clear queue" empties.
#include <QStringList>
#include <QWidget>

#include <deque>
#include <functional>
#include <optional>

#include "app/train/training_controller.h"
#include "engine/train/tower_times.h"
#include "engine/train/training_session.h"
#include "ui/models/training_history.h"

class QLabel;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;

namespace towers::ui {

class PathLabel;
class PlotWidget;

class TrainPage : public QWidget
{
    Q_OBJECT
public:
    // Builds the options of a new run from the other pages, or says why it cannot (`error`).
    using OptionsProvider = std::function<std::optional<engine::SessionOptions>(QString* error)>;

    explicit TrainPage(QWidget* parent = nullptr);
    ~TrainPage() override;

    void setOptionsProvider(OptionsProvider provider);
    // Why no run may start now (a learning-rate range test trains), "" when one may: every start
    // asks (Start, Start next, a resume).
    void setStartBlocker(std::function<QString()> blocker) { m_blocker = std::move(blocker); }
    // Asks the provider again: Start is enabled, or shows why not.
    void refreshStartability();

    app::TrainingController* controller() const { return m_controller; }
    const TrainingHistory& history() const { return m_history; }
    bool isActive() const { return m_controller->isActive(); }
    QString runDirectory() const { return m_runDirectory; }

    // The runs waiting in the queue, and whether a stop holds it.
    int queuedRuns() const { return int(m_queue.size()); }
    bool queueHeld() const { return m_queueHeld; }

    PlotWidget* lossPlot() const { return m_loss; }
    PlotWidget* accuracyPlot() const { return m_accuracy; }
    // The accuracy plot's series of precision @ 5 (hidden unless the run has it).
    static constexpr int kTop5Series = 1;
    PlotWidget* speedPlot() const { return m_speed; }
    PlotWidget* lrPlot() const { return m_lr; }
    QPlainTextEdit* logView() const { return m_log; }
    QString statusText() const;

public slots:
    // A new run with the provider's options.
    void start();
    // Any session: a new run, or options.resume to continue the run in options.runDirectory.
    bool startSession(engine::SessionOptions options);
    void togglePause();
    // Stops the run after its current step; the queue, if any, waits.
    void stop();
    // "Add to queue": a new run with the provider's options, started after the runs before it.
    void enqueue();
    // Starts the queue's next run now (when no run trains).
    void startNextQueued();
    void clearQueue();
    void openRunFolder();

signals:
    // The session has really started: its folder locked, its data loaded and its towers built,
    // it trains now. A start that fails before then (its folder locked by another trainer, a
    // dataset that does not load) says only runFinished, Failed.
    void runStarted(const QString& runDirectory);
    void runFinished(towers::app::TrainingWorker::Outcome outcome, const QString& message,
                     const QString& runDirectory);
    // True as soon as a session is asked to start (runDirectory() is its folder), false after its
    // runFinished.
    void activeChanged(bool active);
    // Where each tower's time went in a reported step: data wait, compute, exposed communication,
    // update (the Devices page shows the split and what the towers wait on). One per report.
    void towerTimes(qint64 step, const std::vector<towers::engine::TowerTimes>& towerTimes);
    void checkpointWritten(const QString& file, qint64 step);
    void errorOccurred(const QString& message);
    void logMessage(const QString& line);

private:
    void onStateChanged(app::TrainingController::State state);
    void onStarted(const QString& runDirectory, qint64 startStep, qint64 totalSteps);
    void onEvents(const app::TrainingEvents& events);
    // Adds reports and evaluations to the history and the plots (a resumed run's logged ones,
    // then the live ones).
    void plotSteps(const std::vector<engine::StepMetrics>& reports,
                   const std::vector<engine::EvalResult>& evaluations);
    void onFinished(app::TrainingWorker::Outcome outcome, const QString& message);
    void updateProgress();
    void appendLog(const QString& line);
    // Logs the trainer's lines held back until the session started (or ended without starting).
    void flushHeldLog();
    void clearPlots();
    void updateQueue();

    app::TrainingController* m_controller;
    OptionsProvider m_provider;
    std::function<QString()> m_blocker;
    TrainingHistory m_history;
    engine::SessionOptions m_options;
    QString m_runDirectory;
    QString m_startError;
    QString m_outcomeText; // how the last run ended, shown while idle
    // The session has started (onStarted): the log has said so; until then the trainer's lines
    // wait in m_heldLog.
    bool m_sessionStarted = false;
    QStringList m_heldLog;
    double m_lastExamplesPerSec = 0;

    std::deque<engine::SessionOptions> m_queue;
    bool m_queueHeld = false;

    QPushButton* m_start;
    QPushButton* m_enqueue;
    QLabel* m_queueLabel;
    QPushButton* m_startQueued;
    QPushButton* m_clearQueue;
    QPushButton* m_pause;
    QPushButton* m_stop;
    QPushButton* m_folder;
    PathLabel* m_runLabel;
    QProgressBar* m_progress;
    QLabel* m_status;
    PlotWidget* m_loss;
    PlotWidget* m_accuracy;
    PlotWidget* m_speed;
    PlotWidget* m_lr;
    QPlainTextEdit* m_log;
};

} // namespace towers::ui
