#include "app/cli/output_queue.h"

namespace towers::app {

OutputQueue::OutputQueue(QTextStream& out, std::size_t capacity) : m_out(out), m_capacity(capacity)
{
}

OutputQueue::~OutputQueue()
{
    finish();
}

void OutputQueue::start()
{
    std::lock_guard lock(m_mutex);
    if (m_started) return;
    m_started = true;
    m_stopping = false;
    m_thread = std::thread([this] { run(); });
}

void OutputQueue::finish()
{
    {
        std::lock_guard lock(m_mutex);
        if (!m_started) return;
        m_stopping = true;
    }
    m_changed.notify_all();
    m_thread.join();
    std::lock_guard lock(m_mutex);
    m_started = false;
}

void OutputQueue::write(const QString& line)
{
    std::unique_lock lock(m_mutex);
    if (!m_started) { // before start() and after finish(): the caller's thread writes
        m_out << line << "\n";
        m_out.flush();
        return;
    }
    if (m_lines.size() >= m_capacity) {
        ++m_dropped;
        ++m_droppedTotal;
        return;
    }
    m_lines.push_back(line);
    lock.unlock();
    m_changed.notify_one();
}

std::size_t OutputQueue::dropped() const
{
    std::lock_guard lock(m_mutex);
    return m_droppedTotal;
}

void OutputQueue::run()
{
    std::unique_lock lock(m_mutex);
    for (;;) {
        m_changed.wait(lock, [&] { return m_stopping || !m_lines.empty() || m_dropped; });
        if (m_lines.empty() && !m_dropped && m_stopping) return;
        std::deque<QString> lines;
        lines.swap(m_lines);
        const std::size_t dropped = m_dropped;
        m_dropped = 0;
        lock.unlock(); // the writes may block; the producers never wait for them
        if (dropped)
            m_out << "(" << dropped
                  << " lines of output were dropped: the output was not being read)\n";
        for (const QString& l : lines) m_out << l << "\n";
        m_out.flush();
        lock.lock();
    }
}

} // namespace towers::app
