#include "engine/train/tower_thread.h"

#include <system_error>

#include "engine/errors.h"

namespace towers::engine {

TowerThread::TowerThread()
{
    try {
        m_thread = std::thread([this] { loop(); });
    } catch (const std::system_error& e) {
        throw Error(
            std::string("cannot start a tower's thread (too many threads for this machine?): ") +
            e.what());
    }
}

TowerThread::~TowerThread()
{
    {
        std::unique_lock lock(m_mutex);
        m_cv.wait(lock, [&] { return !m_busy; });
        m_quit = true;
    }
    m_cv.notify_all();
    m_thread.join();
}

void TowerThread::post(std::function<void()> job)
{
    {
        std::unique_lock lock(m_mutex);
        m_cv.wait(lock, [&] { return !m_busy && !m_job; });
        m_job = std::move(job);
        m_busy = true;
        m_error = nullptr;
    }
    m_cv.notify_all();
}

void TowerThread::wait()
{
    std::unique_lock lock(m_mutex);
    m_cv.wait(lock, [&] { return !m_busy; });
    if (m_error) {
        auto e = m_error;
        m_error = nullptr;
        std::rethrow_exception(e);
    }
}

void TowerThread::loop()
{
    for (;;) {
        std::function<void()> job;
        {
            std::unique_lock lock(m_mutex);
            m_cv.wait(lock, [&] { return m_quit || m_job; });
            if (!m_job) return; // quit with nothing left to run
            job = std::move(m_job);
            m_job = nullptr;
        }
        std::exception_ptr error;
        try {
            job();
        } catch (...) {
            error = std::current_exception();
        }
        job = nullptr; // release captures on this thread, before the caller moves on
        {
            std::lock_guard lock(m_mutex);
            m_error = error;
            m_busy = false;
        }
        m_cv.notify_all();
    }
}

} // namespace towers::engine
