#pragma once
// One-off background jobs whose result only matters while it is the latest one asked for:
// scanning a dataset folder, loading a dataset for the sample grid, reading a runs folder,
// classifying a test set. The work runs on Qt's global thread pool; the result comes back to the
// owner's thread by a queued call. Starting a new job supersedes the running one: its result is
// dropped when it arrives, so a slow old scan never overwrites a newer answer.
#include <QFutureWatcher>
#include <QObject>
#include <QString>
#include <QtConcurrent/QtConcurrentRun>

#include <exception>
#include <functional>
#include <optional>
#include <utility>

namespace towers::app {

// What a job produced: a value, or the message of the exception it threw.
template <class T> struct JobResult
{
    std::optional<T> value;
    QString error;
    bool ok() const { return value.has_value(); }
};

template <class T> class LatestJob
{
public:
    // `owner` receives the results on its thread and must outlive this object (make the LatestJob
    // a member of the owner). The work itself must not touch the owner: it runs on another thread
    // and may finish after the owner is gone, so it captures copies or shared pointers only.
    explicit LatestJob(QObject* owner) : m_owner(owner) {}
    LatestJob(const LatestJob&) = delete;
    LatestJob& operator=(const LatestJob&) = delete;

    // Runs work() on the thread pool and then done(result) on the owner's thread, unless a later
    // start() or cancel() came first. Exceptions from work() become result.error.
    void start(std::function<T()> work, std::function<void(const JobResult<T>&)> done)
    {
        const quint64 generation = ++m_generation;
        m_running = true;
        auto* watcher = new QFutureWatcher<JobResult<T>>(m_owner);
        QObject::connect(watcher, &QFutureWatcherBase::finished, m_owner,
                         [this, watcher, generation, done = std::move(done)] {
                             watcher->deleteLater();
                             if (generation != m_generation) return; // superseded: dropped
                             m_running = false;
                             done(watcher->result());
                         });
        watcher->setFuture(QtConcurrent::run([work = std::move(work)] {
            JobResult<T> r;
            try {
                r.value.emplace(work());
            } catch (const std::exception& e) {
                r.error = QString::fromUtf8(e.what());
            } catch (...) {
                r.error = QStringLiteral("unexpected error of an unknown kind");
            }
            return r;
        }));
    }

    // Drops the result of the running job (the work itself finishes in the background; jobs that
    // can stop early take their own cancel flag).
    void cancel()
    {
        ++m_generation;
        m_running = false;
    }
    // True between start() and the delivery (or dropping) of its result.
    bool isRunning() const { return m_running; }

private:
    QObject* m_owner;
    quint64 m_generation = 0;
    bool m_running = false;
};

} // namespace towers::app
