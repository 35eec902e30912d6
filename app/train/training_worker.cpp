#include "app/train/training_worker.h"

#include <exception>
#include <new>

#include "engine/errors.h"

namespace towers::app {

TrainingWorker::TrainingWorker(MetricsBuffer& buffer, QObject* parent)
    : QObject(parent), m_buffer(buffer)
{
}

TrainingWorker::~TrainingWorker() = default;

void TrainingWorker::run(engine::SessionOptions options)
{
    Outcome outcome = Outcome::Failed;
    QString message;
    qint64 step = -1;
    try {
        engine::TrainerObserver* observer =
            this; // a private base: converted here, inside the class
        auto session = std::make_unique<engine::TrainingSession>(std::move(options), observer);
        engine::Trainer& trainer = session->trainer();
        {
            std::lock_guard lock(m_mutex);
            m_session = session.get();
            if (m_pauseRequested.load()) trainer.pause();
        }
        if (m_stop.stop_requested()) {
            // Stopped while loading: nothing trained, nothing to save.
            outcome = Outcome::Stopped;
            message = tr("stopped before the first step");
        } else {
            emit started(QString::fromStdString(session->options().runDirectory.string()),
                         session->startStep(), trainer.totalSteps());
            const auto result = session->run(m_stop.get_token());
            step = trainer.step();
            // An early stop (TrainConfig::patience) ends the run as finishing does.
            outcome =
                result == engine::Trainer::Outcome::Stopped ? Outcome::Stopped : Outcome::Finished;
            message =
                result == engine::Trainer::Outcome::StoppedEarly
                    ? tr("stopped early at step %1 of %2: %n evaluation(s) in a row without a "
                         "better one",
                         nullptr, trainer.config().patience)
                          .arg(trainer.step())
                          .arg(trainer.totalSteps())
                : outcome == Outcome::Finished
                    ? tr("finished at step %1").arg(trainer.step())
                    : tr("stopped at step %1; its checkpoint is saved").arg(trainer.step());
        }
    } catch (const std::bad_alloc&) {
        message = tr("out of memory: try a smaller batch or fewer towers");
    } catch (const std::exception& e) {
        message = QString::fromUtf8(e.what());
    }
    {
        std::lock_guard lock(m_mutex);
        m_session = nullptr; // the session is gone (it was destroyed leaving the try block)
    }
    emit finished(outcome, message, step);
}

void TrainingWorker::pause()
{
    m_pauseRequested = true;
    std::lock_guard lock(m_mutex);
    if (m_session) m_session->trainer().pause();
}

void TrainingWorker::resume()
{
    m_pauseRequested = false;
    std::lock_guard lock(m_mutex);
    if (m_session) m_session->trainer().resume();
}

void TrainingWorker::requestStop()
{
    m_stop.request_stop(); // wakes a paused trainer too
    std::lock_guard lock(m_mutex);
    if (m_session) m_session->trainer().requestStop();
}

void TrainingWorker::notify(bool wasEmpty)
{
    if (wasEmpty) emit metricsAvailable();
}

void TrainingWorker::onStep(const engine::StepMetrics& metrics)
{
    notify(m_buffer.pushStep(metrics));
}

void TrainingWorker::onEvaluation(const engine::EvalResult& result)
{
    notify(m_buffer.pushEvaluation(result));
}

void TrainingWorker::onLog(const std::string& line)
{
    notify(m_buffer.pushLog(QString::fromStdString(line)));
}

void TrainingWorker::onCheckpoint(const std::filesystem::path& file, std::int64_t step)
{
    notify(m_buffer.pushCheckpoint(QString::fromStdString(file.string()), step));
}

void TrainingWorker::onPaused(std::int64_t step)
{
    emit paused(step);
}

void TrainingWorker::onResumed(std::int64_t step)
{
    emit resumed(step);
}

} // namespace towers::app
