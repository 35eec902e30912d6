#pragma once
// The error paths of the NCCL communicator, free of CUDA and NCCL so that tests drive them with
// stand-ins (tst_communicator): a rank never blocks where nothing can release it, and no rank
// touches a communicator handle that another thread has torn down.
//
//  * A collective is enqueued, then waited for by polling (the driver's poll(): for NCCL,
//    ncclCommGetAsyncError and cudaStreamQuery) with a short pause, checking between polls whether
//    the communicator was aborted, and giving up after a time limit. Nothing waits in
//    cudaStreamSynchronize, which nothing could interrupt.
//  * Every call that uses the handles (enqueue, poll) holds a lease of the CommunicatorLifecycle.
//    abort() marks the communicator aborted (no lease is granted after that: the rank throws
//    CollectiveAborted with the first failure's reason), waits for the leases held (calls that
//    return at once: the NCCL communicators are non-blocking), then tears the handles down, once,
//    on the aborting thread (ncclCommAbort on every rank's communicator, which releases the kernels
//    of the collectives in flight; NCCL frees all the in-process communicators when the last one
//    is aborted, so no handle is used again after that).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>

#include "engine/errors.h"
#include "engine/train/communicator.h"
#include "engine/train/rendezvous.h"

namespace towers::engine::cuda {

enum class CollectiveState
{
    Pending, // enqueued (or still being enqueued), not finished
    Done,
    Failed, // `error` says why
};

struct CollectiveStatus
{
    CollectiveState state = CollectiveState::Done;
    std::string error;
};

// The lifetime of handles shared by rank threads: leases while they are used, and a teardown run
// exactly once, after the last lease, by one thread.
class CommunicatorLifecycle
{
public:
    // Runs f() holding a lease; throws CollectiveAborted("<what>: <reason>") without calling it
    // once the communicator was aborted. f must return promptly (it delays an abort by its
    // duration).
    template <class F> auto use(const std::string& what, F&& f) -> decltype(f())
    {
        {
            std::lock_guard lock(m_mutex);
            if (m_state != State::Open) throw CollectiveAborted(what + ": " + m_reason);
            ++m_leases;
        }
        ++t_leasesHeld;
        struct Release
        {
            CommunicatorLifecycle& life;
            ~Release()
            {
                --t_leasesHeld;
                std::lock_guard lock(life.m_mutex);
                if (--life.m_leases == 0) life.m_cv.notify_all();
            }
        } release{*this};
        return f();
    }

    // Marks the communicator aborted with `reason` (the first reason stays), waits until no lease
    // is held, then runs teardown on this thread. Returns whether this call ran it (false when the
    // communicator was already aborted or closed). Thread-safe; not from inside use().
    bool abort(const std::string& reason, const std::function<void()>& teardown)
    {
        if (t_leasesHeld > 0)
            throw std::logic_error("a communicator was aborted from inside one of its calls");
        std::unique_lock lock(m_mutex);
        if (m_state != State::Open) return false;
        m_state = State::Aborting;
        m_reason = reason.empty() ? std::string("another tower failed") : reason;
        m_cv.wait(lock, [&] { return m_leases == 0; });
        lock.unlock();
        teardown();
        lock.lock();
        m_state = State::TornDown;
        m_cv.notify_all();
        return true;
    }

    // The end of the communicator's life (its destructor, once no rank calls it any more): runs
    // `finish` when it was never aborted, else waits until the abort's teardown is over.
    void close(const std::function<void()>& finish)
    {
        std::unique_lock lock(m_mutex);
        if (m_state == State::Open) {
            m_state = State::Closing;
            m_cv.wait(lock, [&] { return m_leases == 0; });
            lock.unlock();
            finish();
            lock.lock();
            m_state = State::TornDown;
            m_cv.notify_all();
            return;
        }
        m_cv.wait(lock, [&] { return m_state == State::TornDown; });
    }

    bool aborted() const
    {
        std::lock_guard lock(m_mutex);
        return !m_reason.empty();
    }
    std::string reason() const
    {
        std::lock_guard lock(m_mutex);
        return m_reason;
    }

private:
    enum class State
    {
        Open,
        Aborting,
        Closing,
        TornDown
    };
    mutable std::mutex m_mutex;
    std::condition_variable m_cv;
    State m_state = State::Open;
    int m_leases = 0;
    std::string m_reason; // set by abort()
    inline static thread_local int t_leasesHeld = 0;
};

// Pauses between polls: yields first (a collective of a few microseconds is seen at once), then
// sleeps, doubling up to a fifth of a millisecond (a long one costs next to no CPU, and is seen
// finished within that).
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

enum class CollectiveKind
{
    AllReduceMean, // float32 only
    Broadcast,
};

// A Communicator over a driver of per-rank handles (the NCCL driver in nccl_communicator.cpp, a
// stand-in in tests):
//   int size() const;
//   Device device(int rank) const;   where rank's tensors live
//   const char* name() const;        "NCCL", for messages
//   // Enqueues the collective on rank's handle: Pending (then poll), Done or Failed.
//   CollectiveStatus launch(int rank, CollectiveKind, int root, std::span<Tensor>);
//   CollectiveStatus poll(int rank);  Pending, Done or Failed; returns at once
//   void abortAll() noexcept;         tears every rank's handle down, releasing what is in flight
//   void destroyAll() noexcept;       the normal end, nothing in flight
// launch and poll run under a lease; abortAll and destroyAll run once, when no lease is held.
template <class Driver> class AbortableCommunicator final : public Communicator
{
public:
    // A collective not finished after `timeout` fails (a rank that never comes, a hung link).
    explicit AbortableCommunicator(Driver driver,
                                   std::chrono::milliseconds timeout = std::chrono::minutes(10))
        : m_driver(std::move(driver)), m_rendezvous(m_driver.size()), m_timeout(timeout)
    {
    }
    ~AbortableCommunicator() override
    {
        m_life.close([&] { m_driver.destroyAll(); });
    }
    AbortableCommunicator(const AbortableCommunicator&) = delete;
    AbortableCommunicator& operator=(const AbortableCommunicator&) = delete;

    int size() const override { return m_driver.size(); }

    void allReduceMean(int rank, std::span<Tensor> tensors) override
    {
        run(rank, CollectiveKind::AllReduceMean, 0, tensors, "allReduceMean");
    }

    void broadcast(int rank, int root, std::span<Tensor> tensors) override
    {
        if (root < 0 || root >= size())
            throw InvalidArgument(std::string(m_driver.name()) + " broadcast: no root rank " +
                                  std::to_string(root));
        run(rank, CollectiveKind::Broadcast, root, tensors, "broadcast");
    }

    void barrier(int rank) override
    {
        requireRank(rank);
        m_rendezvous.arrive();
    }

    // Thread-safe, from any thread but from inside a collective of this communicator; the ranks
    // waiting in a collective throw CollectiveAborted with `reason` within a poll's pause.
    void abort(const std::string& reason) override
    {
        m_rendezvous.abort(reason);
        m_life.abort(reason, [&] { m_driver.abortAll(); });
    }
    bool aborted() const override { return m_life.aborted(); }

    Driver& driver() { return m_driver; }

private:
    void requireRank(int rank) const
    {
        if (rank < 0 || rank >= size())
            throw InvalidArgument(std::string(m_driver.name()) + ": no rank " +
                                  std::to_string(rank));
    }

    static std::string durationText(std::chrono::milliseconds d)
    {
        return d < std::chrono::seconds(1)
                   ? std::to_string(d.count()) + " ms"
                   : std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count()) +
                         " s";
    }

    void run(int rank, CollectiveKind kind, int root, std::span<Tensor> tensors, const char* what)
    {
        requireRank(rank);
        const std::string name = std::string(m_driver.name()) + " " + what;
        const Device here = m_driver.device(rank);
        for (const auto& t : tensors) {
            if (t.device() != here)
                throw InvalidArgument(name + ": rank " + std::to_string(rank) + " on " +
                                      here.str() + " was given " + t.describe());
            if (kind == CollectiveKind::AllReduceMean && t.dtype() != DType::Float32)
                throw InvalidArgument(name + ": only float32 tensors, got " + t.describe());
        }
        const std::string abortedText = name + ": another tower failed";
        CollectiveStatus s;
        try {
            s = m_life.use(abortedText, [&] { return m_driver.launch(rank, kind, root, tensors); });
            const auto deadline = std::chrono::steady_clock::now() + m_timeout;
            PollBackoff backoff;
            while (s.state == CollectiveState::Pending) {
                if (std::chrono::steady_clock::now() > deadline) {
                    s = {CollectiveState::Failed, "not finished after " + durationText(m_timeout) +
                                                      " (a tower that never came, or a hung link)"};
                    break;
                }
                backoff.pause();
                s = m_life.use(abortedText, [&] { return m_driver.poll(rank); });
            }
        } catch (const CollectiveAborted&) {
            throw;
        } catch (const std::exception& e) {
            s = {CollectiveState::Failed, e.what()};
        }
        if (s.state == CollectiveState::Failed) {
            const std::string why = name + " failed on " + here.str() + ": " + s.error;
            abort(why);
            throw BackendError(why);
        }
    }

    Driver m_driver;
    Rendezvous m_rendezvous;
    std::chrono::milliseconds m_timeout;
    CommunicatorLifecycle m_life;
};

} // namespace towers::engine::cuda
