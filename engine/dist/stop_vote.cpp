#include "engine/dist/stop_vote.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "engine/dist/process_group.h"

namespace towers::engine {

StopVote::StopVote(ProcessGroup& group, std::function<bool()> stopAsked, int workers,
                   std::chrono::milliseconds interval)
    : m_group(group), m_stopAsked(std::move(stopAsked)), m_interval(interval), m_working(workers)
{
}

void StopVote::workerDone(bool failed)
{
    {
        std::lock_guard lock(m_mutex);
        --m_working;
        m_failed = m_failed || failed;
    }
    m_changed.notify_all();
}

void StopVote::run()
{
    constexpr std::uint8_t kStop = 1, kDone = 2;
    std::vector<std::uint8_t> all(static_cast<std::size_t>(m_group.size()));
    try {
        for (;;) {
            bool done = false, failed = false;
            {
                std::unique_lock lock(m_mutex);
                m_changed.wait_for(lock, m_interval, [&] { return m_working <= 0; });
                done = m_working <= 0;
                failed = m_failed;
            }
            // Asked after `done` was read: a stop that ended the workers here is seen.
            const bool stop = failed || (m_stopAsked && m_stopAsked());
            const std::uint8_t mine = std::uint8_t((stop ? kStop : 0) | (done ? kDone : 0));
            m_group.allGather(&mine, 1, all.data());
            bool anyStop = false, allDone = true;
            for (const std::uint8_t a : all) {
                anyStop = anyStop || (a & kStop) != 0;
                allDone = allDone && (a & kDone) != 0;
            }
            if (anyStop) {
                m_stopped = true;
                return;
            }
            if (allDone) return;
        }
    } catch (...) {
        m_stopped = true; // the workers here end too; the caller waits for them
        throw;
    }
}

} // namespace towers::engine
