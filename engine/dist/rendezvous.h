#pragma once
// The meeting point of the ranks of an in-process communicator: a reusable barrier that can be
// aborted, so that when one rank fails the others are released with its reason instead of
// waiting forever. Shared by the host communicator and the GPU backend's communicators.
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

namespace towers::engine {

class Rendezvous
{
public:
    // size >= 1 ranks; InvalidArgument otherwise.
    explicit Rendezvous(int size);

    int size() const { return m_size; }
    // Waits until every rank has arrived; throws CollectiveAborted with the reason when the
    // rendezvous was aborted before that.
    void arrive();
    // Releases every waiting and later arrive() with CollectiveAborted(reason). Idempotent: the
    // first reason stays. Thread-safe.
    void abort(const std::string& reason);
    bool aborted() const;
    // The abort's reason ("" while not aborted).
    std::string reason() const;

private:
    const int m_size;
    mutable std::mutex m_mutex;
    std::condition_variable m_cv;
    int m_arrived = 0;
    std::uint64_t m_generation = 0;
    bool m_aborted = false;
    std::string m_reason;
};

} // namespace towers::engine
