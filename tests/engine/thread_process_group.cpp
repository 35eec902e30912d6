#include "thread_process_group.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>

namespace towers::test {

using namespace towers::engine;

// One exchange: every member's bytes, by rank.
struct Exchange
{
    std::vector<std::optional<std::string>> from;
    int collected = 0;
};

class ThreadWorld
{
public:
    ThreadWorld(int size, double timeout) : m_size(size), m_timeout(timeout) {}

    int size() const { return m_size; }
    double timeout() const { return m_timeout; }

    // Deposits `mine` as member `rank`'s part of exchange `seq` on `channel`.
    void deposit(int channel, std::uint64_t seq, int rank, std::string mine)
    {
        std::lock_guard lock(m_mutex);
        Exchange& e = m_exchanges[{channel, seq}];
        e.from.resize(std::size_t(m_size));
        e.from[std::size_t(rank)] = std::move(mine);
        m_changed.notify_all();
    }

    // Every member's part once all have deposited; throws as the real group's waits do.
    std::vector<std::string> collect(int channel, std::uint64_t seq, int rank,
                                     const std::function<void()>& throwIfAborted)
    {
        std::unique_lock lock(m_mutex);
        const auto deadline =
            std::chrono::steady_clock::now() + std::chrono::duration<double>(m_timeout);
        for (;;) {
            Exchange& e = m_exchanges[{channel, seq}];
            e.from.resize(std::size_t(m_size));
            bool all = true;
            for (const auto& f : e.from) all = all && f.has_value();
            if (all) {
                std::vector<std::string> out;
                for (const auto& f : e.from) out.push_back(*f);
                if (++e.collected == m_size) m_exchanges.erase({channel, seq});
                return out;
            }
            if (m_failedRank >= 0 && m_failedRank != rank)
                throw ProcessFailed(m_failedRank, "rank " + std::to_string(m_failedRank) +
                                                      " failed: " + m_failure);
            lock.unlock();
            throwIfAborted();
            lock.lock();
            if (std::chrono::steady_clock::now() > deadline)
                throw ProcessFailed(-1, "no answer from the other processes (a test timeout)");
            m_changed.wait_for(lock, std::chrono::milliseconds(2));
        }
    }

    void fail(int rank, const std::string& message)
    {
        std::lock_guard lock(m_mutex);
        if (m_failedRank < 0) {
            m_failedRank = rank;
            m_failure = message;
        }
        m_changed.notify_all();
    }
    void throwIfFailed(int rank)
    {
        std::lock_guard lock(m_mutex);
        if (m_failedRank >= 0 && m_failedRank != rank)
            throw ProcessFailed(m_failedRank,
                                "rank " + std::to_string(m_failedRank) + " failed: " + m_failure);
    }

private:
    const int m_size;
    const double m_timeout;
    std::mutex m_mutex;
    std::condition_variable m_changed;
    std::map<std::pair<int, std::uint64_t>, Exchange> m_exchanges;
    int m_failedRank = -1;
    std::string m_failure;
};

namespace {

enum Channel
{
    Control,
    Gradients
};

class ThreadProcessGroup final : public ProcessGroup
{
public:
    ThreadProcessGroup(std::shared_ptr<ThreadWorld> world, int rank)
        : m_world(std::move(world)), m_rank(rank)
    {
    }

    int rank() const override { return m_rank; }
    int size() const override { return m_world->size(); }
    int localRank() const override { return m_rank; }
    int localSize() const override { return m_world->size(); }
    std::string hostName() const override { return "test-host"; }
    std::string description() const override { return "threads of a test"; }
    double timeoutSeconds() const override { return m_world->timeout(); }

    void barrier() override { exchange(Control, {}); }
    void broadcast(void* data, std::size_t bytes, int root) override
    {
        const std::string mine(static_cast<const char*>(data), bytes);
        const auto all = exchange(Control, m_rank == root ? mine : std::string());
        if (all[std::size_t(root)].size() != bytes)
            throw InvalidArgument("broadcast: sizes differ between the members");
        if (bytes) std::memcpy(data, all[std::size_t(root)].data(), bytes);
    }
    std::string broadcastString(const std::string& mine, int root) override
    {
        return exchange(Control, m_rank == root ? mine : std::string())[std::size_t(root)];
    }
    void allGather(const void* mine, std::size_t bytes, void* all) override
    {
        char* out = static_cast<char*>(all);
        for (const auto& part :
             exchange(Control, std::string(static_cast<const char*>(mine), bytes))) {
            if (part.size() != bytes)
                throw InvalidArgument("allGather: sizes differ between the members");
            std::memcpy(out, part.data(), bytes);
            out += bytes;
        }
    }
    std::vector<std::string> allGatherStrings(const std::string& mine) override
    {
        return exchange(Control, mine);
    }
    bool any(bool mine, const std::string&) override
    {
        for (const auto& s : exchange(Control, mine ? "1" : "0"))
            if (s == "1") return true;
        return false;
    }

    Request startAllGather(const void* send, std::size_t bytes, void* recv) override
    {
        std::lock_guard lock(m_mutex);
        m_world->throwIfFailed(m_rank);
        const std::uint64_t seq = m_seq[Gradients]++;
        m_world->deposit(Gradients, seq, m_rank,
                         std::string(static_cast<const char*>(send), bytes));
        m_pending[seq] = {recv, bytes};
        return seq;
    }
    void wait(Request request) override
    {
        std::pair<void*, std::size_t> target;
        {
            std::lock_guard lock(m_mutex);
            target = m_pending.at(request);
            m_pending.erase(request);
        }
        const auto all = m_world->collect(Gradients, request, m_rank, [this] { throwIfAborted(); });
        char* out = static_cast<char*>(target.first);
        for (const auto& part : all) {
            std::memcpy(out, part.data(), target.second);
            out += target.second;
        }
    }

    void announceFailure(const std::string& message) override
    {
        abortLocal(message);
        m_world->fail(m_rank, message);
    }
    void throwIfFailed() override { m_world->throwIfFailed(m_rank); }
    void abortLocal(const std::string& reason) override
    {
        std::lock_guard lock(m_mutex);
        if (m_abort.empty()) m_abort = reason.empty() ? "aborted" : reason;
    }

private:
    void throwIfAborted()
    {
        std::lock_guard lock(m_mutex);
        if (!m_abort.empty()) throw CollectiveAborted(m_abort);
    }

    std::vector<std::string> exchange(Channel channel, std::string mine)
    {
        std::uint64_t seq;
        {
            std::lock_guard lock(m_mutex);
            seq = m_seq[channel]++;
        }
        m_world->deposit(channel, seq, m_rank, std::move(mine));
        return m_world->collect(channel, seq, m_rank, [this] { throwIfAborted(); });
    }

    std::shared_ptr<ThreadWorld> m_world;
    const int m_rank;
    std::mutex m_mutex;
    std::uint64_t m_seq[2] = {0, 0};
    std::map<Request, std::pair<void*, std::size_t>> m_pending;
    std::string m_abort;
};

} // namespace

std::shared_ptr<ThreadWorld> makeThreadWorld(int size, double timeoutSeconds)
{
    return std::make_shared<ThreadWorld>(size, timeoutSeconds);
}

std::unique_ptr<ProcessGroup> joinThreadWorld(std::shared_ptr<ThreadWorld> world, int rank)
{
    return std::make_unique<ThreadProcessGroup>(std::move(world), rank);
}

} // namespace towers::test
