#include "app/train/training_controller.h"

#include <QEventLoop>
#include <QThread>
#include <QTimer>

namespace towers::app {

TrainingController::TrainingController(QObject* parent)
    : QObject(parent), m_drainTimer(new QTimer(this))
{
    m_drainTimer->setSingleShot(true);
    connect(m_drainTimer, &QTimer::timeout, this, &TrainingController::drain);
}

TrainingController::~TrainingController()
{
    if (!m_thread) return;
    if (m_worker) m_worker->requestStop();
    m_thread->quit(); // the loop ends once run() has returned
    m_thread->wait();
}

bool TrainingController::start(engine::SessionOptions options)
{
    if (isActive()) return false;
    m_buffer.drain(); // nothing of an earlier session
    m_runDirectory = QString::fromStdString(options.runDirectory.string());
    m_startStep = m_totalSteps = 0;
    m_pausedStep = -1;
    m_finalStep = -1;
    m_thread = new QThread(this);
    m_thread->setObjectName(QStringLiteral("training"));
    auto* worker = new TrainingWorker(m_buffer);
    worker->moveToThread(m_thread);
    m_worker = worker;
    connect(m_thread, &QThread::finished, worker, &QObject::deleteLater);
    connect(worker, &TrainingWorker::metricsAvailable, this, &TrainingController::scheduleDrain);
    connect(worker, &TrainingWorker::started, this,
            [this](const QString& dir, qint64 startStep, qint64 totalSteps) {
                m_runDirectory = dir;
                m_startStep = startStep;
                m_totalSteps = totalSteps;
                if (m_state == State::Loading) setState(State::Running);
                emit started(dir, startStep, totalSteps);
            });
    connect(worker, &TrainingWorker::paused, this, [this](qint64 step) {
        // A pause already resumed again (or stopped) by the time it arrives is old news.
        if (m_state != State::Paused) return;
        m_pausedStep = step;
        emit pausedAt(step);
    });
    connect(worker, &TrainingWorker::finished, this, &TrainingController::onWorkerFinished);
    m_thread->start();
    setState(State::Loading);
    QMetaObject::invokeMethod(
        worker,
        [worker, options = std::move(options)]() mutable { worker->run(std::move(options)); },
        Qt::QueuedConnection);
    return true;
}

void TrainingController::pause()
{
    if (m_state != State::Running && m_state != State::Loading) return;
    m_pausedStep = -1; // until the trainer says where it paused
    m_worker->pause();
    setState(State::Paused);
}

void TrainingController::resume()
{
    if (m_state != State::Paused) return;
    m_pausedStep = -1;
    m_worker->resume();
    setState(m_totalSteps > 0 ? State::Running : State::Loading);
}

void TrainingController::stop()
{
    if (!isActive() || m_state == State::Stopping) return;
    m_worker->requestStop();
    setState(State::Stopping);
}

bool TrainingController::waitForFinished(int timeoutMs)
{
    if (!isActive()) return true;
    QEventLoop loop;
    QTimer timeout;
    timeout.setSingleShot(true);
    connect(&timeout, &QTimer::timeout, &loop, &QEventLoop::quit);
    connect(this, &TrainingController::finished, &loop, &QEventLoop::quit);
    timeout.start(timeoutMs);
    loop.exec();
    return !isActive();
}

void TrainingController::setState(State state)
{
    if (m_state == state) return;
    m_state = state;
    emit stateChanged(state);
}

void TrainingController::scheduleDrain()
{
    if (m_drainTimer->isActive()) return;
    const qint64 since = m_sinceDrain.isValid() ? m_sinceDrain.elapsed() : kDrainIntervalMs;
    m_drainTimer->start(int(std::max<qint64>(0, kDrainIntervalMs - since)));
}

void TrainingController::drain()
{
    TrainingEvents events = m_buffer.drain();
    m_sinceDrain.restart();
    if (events.isEmpty()) return;
    ++m_drains;
    emit eventsReady(events);
}

void TrainingController::onWorkerFinished(TrainingWorker::Outcome outcome, const QString& message,
                                          qint64 step)
{
    m_finalStep = step;
    m_drainTimer->stop();
    drain(); // the last metrics come before finished()
    m_thread->quit();
    m_thread->wait();
    m_thread->deleteLater();
    m_thread = nullptr;
    m_worker = nullptr;
    setState(State::Idle);
    emit finished(outcome, message);
}

} // namespace towers::app
