#pragma once
// Following a run that another process trains: a cluster job (towers-cli under mpirun or srun, or
// another desktop) writes to a shared run folder while this GUI watches. The follower reads the
// selected run's logs off the UI thread (incrementally: app::RunLogReader), asks whether the run
// folder's lock is held (app::runHolder) and, while another process holds it and the page is
// visible, reads again every couple of seconds. When the lock is released it reads once more (the
// final logs) and stops. It only reads: nothing in the run folder is written or locked for long.
#include <QObject>
#include <QString>

#include <memory>
#include <optional>
#include <vector>

#include "app/jobs/latest_job.h"
#include "app/runs/run_scanner.h"

class QTimer;

namespace towers::app {
class RunLogReader;
}

namespace towers::ui {

class RunFollower : public QObject
{
    Q_OBJECT
public:
    enum class State
    {
        None,  // no run, or its first read has not arrived yet
        Still, // nobody else trains it (finished, stopped, or trained by this process)
        Live,  // another process trains it: followed
        Ended, // was followed, and the other process has let it go since
    };
    Q_ENUM(State)

    static constexpr int kDefaultIntervalMs = 2000;

    explicit RunFollower(QObject* parent = nullptr);
    ~RunFollower() override;

    // The run to show (empty: none). A new run is read at once from the start; the same run again
    // reads only what was appended since (and whether it is trained now).
    void setRun(const QString& folder);
    QString run() const { return m_folder; }
    // The run folder this process trains itself, never followed (empty: none).
    void setOwnRunFolder(const QString& folder);
    QString ownRunFolder() const { return m_ownFolder; }
    // Reads again on a timer only while active (the page is shown); becoming active reads at once.
    void setActive(bool active);
    bool isActive() const { return m_active; }
    void setInterval(int ms);
    int interval() const;

    State state() const { return m_state; }
    bool isLive() const { return m_state == State::Live; }
    // Whether the timer that reads again runs (live and active).
    bool isPolling() const;
    // Who trains the run (RunLock::holder's words): while live, and the last one after it ended.
    QString holder() const { return m_holder; }
    // What the last read found.
    const app::RunCurves& curves() const { return m_curves; }
    const std::vector<engine::CheckpointFile>& checkpoints() const { return m_checkpoints; }

public slots:
    // Reads the run now unless a read is under way.
    void readNow();

signals:
    // After each read of the run: curves(), checkpoints() and state() are the new ones.
    void updated();
    void stateChanged(towers::ui::RunFollower::State state);

private:
    struct Reading
    {
        std::optional<QString> holder;
        app::RunCurves curves;
        std::vector<engine::CheckpointFile> checkpoints;
    };
    void onRead(const app::JobResult<Reading>& r);
    void setState(State state);
    void updateTimer();
    bool isOwn(const QString& folder) const;

    QString m_folder, m_ownFolder, m_holder;
    std::shared_ptr<app::RunLogReader> m_reader;
    app::LatestJob<Reading> m_read{this};
    QTimer* m_timer;
    bool m_active = false;
    State m_state = State::None;
    app::RunCurves m_curves;
    std::vector<engine::CheckpointFile> m_checkpoints;
};

} // namespace towers::ui
