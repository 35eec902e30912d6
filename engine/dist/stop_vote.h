#pragma once
// The processes' stop vote while each process's threads work through its share of a job whose
// shares may differ in length (an evaluation: one process may have a batch more). A stop asked
// on one process must end the work of every process, but the workers ask only their own process;
// so the thread that waits for them votes meanwhile, in rounds of one small all-gather on the
// control channel: each process says whether it was asked to stop and whether its workers are
// done. Every process sees the same answers, so all end their rounds after the same one and take
// part in the same collectives, however many batches each has.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>

namespace towers::engine {

class ProcessGroup;

class StopVote
{
public:
    // A round every `interval` at most (sooner when this process's workers are done), so a stop
    // reaches the others within about that, plus the batch each is on.
    static constexpr std::chrono::milliseconds kInterval{50};

    // `stopAsked`: whether this process was asked to stop (called on the voting thread);
    // `workers`: how many threads work here, each calling workerDone() once.
    StopVote(ProcessGroup& group, std::function<bool()> stopAsked, int workers,
             std::chrono::milliseconds interval = kInterval);

    // For the workers, before each piece of work: true once any process asked to stop (or the
    // vote failed here).
    bool stopped() const { return m_stopped.load(std::memory_order_relaxed); }
    // A worker ended (failed: with an error, which stops every process's work as a stop does).
    void workerDone(bool failed);

    // On the waiting thread while the workers work: votes until every process's workers are done
    // or any process asked to stop. Throws what the group's wait throws (another process failed,
    // this one aborted, a timeout); stopped() is then true, so that the workers here end too.
    void run();

private:
    ProcessGroup& m_group;
    std::function<bool()> m_stopAsked;
    std::chrono::milliseconds m_interval;
    std::atomic<bool> m_stopped{false};
    std::mutex m_mutex;
    std::condition_variable m_changed;
    int m_working; // under m_mutex
    bool m_failed = false;
};

} // namespace towers::engine
