#pragma once
// Lines a long job prints while it works, written by a thread of their own: a terminal that
// stops reading (Ctrl-S, a launcher such as mpirun that stops reading its ranks' output while it
// delivers a signal, a pipe nobody drains) must never stall training, nor keep a stop from
// finishing its step and writing its checkpoint. Lines beyond `capacity` waiting are dropped and
// counted, and the count is printed once the output moves again.
#include <QString>
#include <QTextStream>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <thread>

namespace towers::app {

class OutputQueue
{
public:
    explicit OutputQueue(QTextStream& out, std::size_t capacity = 4096);
    ~OutputQueue();
    OutputQueue(const OutputQueue&) = delete;
    OutputQueue& operator=(const OutputQueue&) = delete;

    // From now on, write() queues lines for the writer thread.
    void start();
    // Writes what is queued (waiting for the output as any program does), then writes directly
    // again, on the caller's thread.
    void finish();
    // A whole line (without its newline); never blocks while started. Thread-safe.
    void write(const QString& line);
    // Lines dropped so far.
    std::size_t dropped() const;

private:
    void run();

    QTextStream& m_out;
    const std::size_t m_capacity;
    mutable std::mutex m_mutex;
    std::condition_variable m_changed;
    std::deque<QString> m_lines;
    std::size_t m_dropped = 0, m_droppedTotal = 0;
    bool m_started = false, m_stopping = false, m_writing = false;
    std::thread m_thread;
};

} // namespace towers::app
