#pragma once
// Pauses between the polls of a wait that must stay interruptible (a device's event, a
// collective's stream): yields first (work of a few microseconds is seen at once), then sleeps,
// doubling up to a fifth of a millisecond (a long wait costs next to no CPU, and is seen finished
// within that).
#include <algorithm>
#include <chrono>
#include <thread>

namespace towers::engine {

class PollBackoff
{
public:
    void pause()
    {
        if (m_polls++ < 64) {
            std::this_thread::yield();
            return;
        }
        std::this_thread::sleep_for(m_sleep);
        m_sleep = std::min(m_sleep * 2, std::chrono::microseconds(200));
    }

private:
    int m_polls = 0;
    std::chrono::microseconds m_sleep{10};
};

} // namespace towers::engine
