#include "engine/dist/rendezvous.h"

#include "engine/errors.h"

namespace towers::engine {

Rendezvous::Rendezvous(int size) : m_size(size)
{
    if (size < 1)
        throw InvalidArgument("a communicator needs at least one rank, got " +
                              std::to_string(size));
}

void Rendezvous::arrive()
{
    std::unique_lock lock(m_mutex);
    if (m_aborted) throw CollectiveAborted(m_reason);
    const std::uint64_t generation = m_generation;
    if (++m_arrived == m_size) {
        m_arrived = 0;
        ++m_generation;
        m_cv.notify_all();
        return;
    }
    m_cv.wait(lock, [&] { return m_generation != generation || m_aborted; });
    if (m_generation == generation) throw CollectiveAborted(m_reason);
}

void Rendezvous::abort(const std::string& reason)
{
    {
        std::lock_guard lock(m_mutex);
        if (m_aborted) return;
        m_aborted = true;
        m_reason = reason.empty() ? "another tower failed" : reason;
    }
    m_cv.notify_all();
}

bool Rendezvous::aborted() const
{
    std::lock_guard lock(m_mutex);
    return m_aborted;
}

std::string Rendezvous::reason() const
{
    std::lock_guard lock(m_mutex);
    return m_reason;
}

} // namespace towers::engine
