#include "ui/pages/run_follower.h"

#include <QDir>
#include <QTimer>

#include "app/runs/run_log_reader.h"

namespace towers::ui {

RunFollower::RunFollower(QObject* parent) : QObject(parent), m_timer(new QTimer(this))
{
    m_timer->setInterval(kDefaultIntervalMs);
    connect(m_timer, &QTimer::timeout, this, &RunFollower::readNow);
}

RunFollower::~RunFollower() = default;

void RunFollower::setRun(const QString& folder)
{
    const QString clean = folder.isEmpty() ? QString() : QDir::cleanPath(folder);
    if (clean == m_folder) {
        readNow();
        return;
    }
    m_read.cancel(); // a read of the previous run is dropped when it arrives
    m_folder = clean;
    m_reader = clean.isEmpty() ? nullptr : std::make_shared<app::RunLogReader>(clean);
    m_holder.clear();
    m_curves = {};
    m_checkpoints.clear();
    setState(State::None);
    readNow();
}

void RunFollower::setOwnRunFolder(const QString& folder)
{
    m_ownFolder = folder.isEmpty() ? QString() : QDir::cleanPath(folder);
    if (!m_folder.isEmpty() && m_state != State::None) readNow();
}

void RunFollower::setActive(bool active)
{
    if (m_active == active) return;
    m_active = active;
    // Shown again: the run may have started or ended meanwhile.
    if (m_active) readNow();
    updateTimer();
}

void RunFollower::setInterval(int ms)
{
    m_timer->setInterval(ms);
}

int RunFollower::interval() const
{
    return m_timer->interval();
}

bool RunFollower::isPolling() const
{
    return m_timer->isActive();
}

bool RunFollower::isOwn(const QString& folder) const
{
    return !m_ownFolder.isEmpty() && folder == m_ownFolder;
}

void RunFollower::readNow()
{
    if (!m_reader || m_read.isRunning()) return;
    const QString folder = m_folder;
    const std::shared_ptr<app::RunLogReader> reader = m_reader;
    m_read.start(
        [folder, reader] {
            Reading r;
            // The lock first: when it is found released, the logs read after it are final.
            r.holder = app::runHolder(folder);
            r.curves = reader->read();
            r.checkpoints = app::runCheckpoints(folder);
            return r;
        },
        [this](const app::JobResult<Reading>& r) { onRead(r); });
}

void RunFollower::onRead(const app::JobResult<Reading>& r)
{
    if (!r.ok()) return; // the reads never throw; nothing to show if they did
    m_curves = r.value->curves;
    m_checkpoints = r.value->checkpoints;
    const bool live = r.value->holder && !isOwn(m_folder);
    if (live) m_holder = *r.value->holder;
    State next = State::Still;
    if (live)
        next = State::Live;
    else if (!isOwn(m_folder) && (m_state == State::Live || m_state == State::Ended))
        next = State::Ended;
    const bool changed = next != m_state;
    m_state = next;
    updateTimer();
    emit updated();
    if (changed) emit stateChanged(next);
}

void RunFollower::setState(State state)
{
    const bool changed = state != m_state;
    m_state = state;
    updateTimer();
    if (changed) emit stateChanged(state);
}

void RunFollower::updateTimer()
{
    if (m_state == State::Live && m_active) {
        if (!m_timer->isActive()) m_timer->start();
    } else {
        m_timer->stop();
    }
}

} // namespace towers::ui
