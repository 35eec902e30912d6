#pragma once
// The error paths of the NCCL communicator, free of CUDA and NCCL so that tests drive them with
// stand-ins (tst_communicator): a rank never blocks where nothing can release it, and no rank
// touches a communicator handle that another thread has torn down.
//
//  * A synchronous collective is enqueued, then waited for by polling (the driver's poll(): for
//    NCCL, ncclCommGetAsyncError and cudaStreamQuery) with a short pause, checking between polls
//    whether the communicator was aborted, and giving up after a time limit. Nothing waits in
//    cudaStreamSynchronize, which nothing could interrupt.
//  * An asynchronous one (startAllReduceMean) is enqueued and not waited for: complete() only has
//    the driver order the rank's later work after it (ordered(): for NCCL, an event). The host
//    waits in two places only, both polled the same way: while NCCL is still enqueuing the rank's
//    last collective (a non-blocking communicator answers ncclInProgress, and takes no other call
//    until it is done: the driver's enqueued()), before the rank's next NCCL call and in
//    complete(); and for a synchronous collective to finish. An asynchronous error the driver
//    reports there (a peer gone, a CUDA fault) makes that call fail (BackendError, the others
//    aborted), an abort makes it throw CollectiveAborted. The time limit covers the host's waits;
//    a collective that never ends on the GPU is ended by the abort (ncclCommAbort releases it).
//  * Every call that uses the handles (enqueue, poll) holds a lease of the CommunicatorLifecycle.
//    abort() marks the communicator aborted (no lease is granted after that: the rank throws
//    CollectiveAborted with the first failure's reason), waits for the leases held (calls that
//    return at once: the NCCL communicators are non-blocking), then tears the handles down, once,
//    on the aborting thread (ncclCommAbort on every rank's communicator, which releases the kernels
//    of the collectives in flight; NCCL frees all the in-process communicators when the last one
//    is aborted, so no handle is used again after that; then the streams and events).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>

#include "engine/cuda/ticket_board.h"
#include "engine/dist/communicator.h"
#include "engine/dist/rendezvous.h"
#include "engine/errors.h"
#include "engine/ops/poll_backoff.h"

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

enum class CollectiveKind
{
    AllReduceMean, // float32 only
    Broadcast,
    Barrier, // no tensors: the driver's own collective, where its ranks span processes
};

// What launchAsync returns: Failed; Pending while the driver is still enqueuing it (enqueued()
// says when it is done); Done once enqueued (not finished: the GPU runs it later). `token` names
// it for ordered().
struct AsyncLaunch
{
    CollectiveStatus status;
    std::uint64_t token = 0;
};

// A Communicator over a driver of per-rank handles (the NCCL driver in nccl_communicator.cpp, a
// stand-in in tests):
//   int size() const;
//   Device device(int rank) const;   where rank's tensors live
//   const char* name() const;        "NCCL", for messages
//   // Whether the ranks are this process's part of a world of several processes: barrier() is
//   // then the driver's collective (CollectiveKind::Barrier, no tensors) instead of a rendezvous
//   // of this process's ranks, and broadcast() takes root 0 only (the world's first rank).
//   bool spansProcesses() const;
//   // Where rank's tensors are computed (its tower's ops, whose stream orders the collectives).
//   void attach(int rank, Ops& ops);
//   // Enqueues the collective on rank's handle: Pending (then poll), Done or Failed.
//   CollectiveStatus launch(int rank, CollectiveKind, int root, std::span<Tensor>);
//   CollectiveStatus poll(int rank);  Pending, Done (finished) or Failed; returns at once
//   // Enqueues the average of rank's tensors after the work issued so far on rank's stream,
//   // without waiting for it; the driver keeps the token's resources until ordered() or the
//   // teardown.
//   AsyncLaunch launchAsync(int rank, std::span<Tensor>);
//   // Pending while rank's last launch is still being enqueued, Failed on an asynchronous
//   // error, else Done; returns at once. Nothing else is launched on rank before it says Done.
//   CollectiveStatus enqueued(int rank);
//   // The work issued next on rank's stream runs after the collective `token` (enqueued), and
//   // the token's resources are the driver's again. Returns at once: Done or Failed.
//   CollectiveStatus ordered(int rank, std::uint64_t token);
//   void abortAll() noexcept;         tears every rank's handle down, releasing what is in flight
//   void destroyAll() noexcept;       the normal end, nothing in flight
// Every call but abortAll and destroyAll runs under a lease; those two run once, when no lease is
// held. Each rank is called from one thread at a time (its tower's), so the per-rank state of the
// template and of the driver is that thread's.
//
// Order: a rank's collectives, synchronous and asynchronous, reach the driver in the order the
// rank calls them (every rank the same order), each after the previous one is enqueued; the
// driver keeps that order on the device (the NCCL driver: one stream per rank for all of them).
template <class Driver> class AbortableCommunicator final : public Communicator
{
public:
    // A host wait that does not end after `timeout` fails (a rank that never comes, a hung link).
    explicit AbortableCommunicator(Driver driver,
                                   std::chrono::milliseconds timeout = std::chrono::minutes(10))
        : m_driver(std::move(driver)), m_rendezvous(m_driver.size()), m_timeout(timeout),
          m_ranks(std::size_t(m_driver.size()))
    {
    }
    ~AbortableCommunicator() override
    {
        m_life.close([&] { m_driver.destroyAll(); });
    }
    AbortableCommunicator(const AbortableCommunicator&) = delete;
    AbortableCommunicator& operator=(const AbortableCommunicator&) = delete;

    int size() const override { return m_driver.size(); }

    void attach(int rank, Ops& ops) override
    {
        requireRank(rank);
        m_life.use(std::string(m_driver.name()) + " attach: another tower failed",
                   [&] { m_driver.attach(rank, ops); });
    }

    void allReduceMean(int rank, std::span<Tensor> tensors) override
    {
        run(rank, CollectiveKind::AllReduceMean, 0, tensors, "allReduceMean");
    }

    std::uint64_t startAllReduceMean(int rank, std::span<Tensor> tensors) override
    {
        const std::string name = std::string(m_driver.name()) + " allReduceMean";
        requireRank(rank);
        requireTensors(name, rank, CollectiveKind::AllReduceMean, tensors);
        settle(rank, name);
        AsyncLaunch launched;
        try {
            launched = m_life.use(name + ": another tower failed",
                                  [&] { return m_driver.launchAsync(rank, tensors); });
        } catch (const CollectiveAborted&) {
            throw;
        } catch (const std::exception& e) {
            launched.status = {CollectiveState::Failed, e.what()};
        }
        if (launched.status.state == CollectiveState::Failed)
            fail(name, rank, launched.status.error);
        RankState& mine = m_ranks[std::size_t(rank)];
        mine.tokens.push_back(launched.token);
        return mine.order.start();
    }

    void complete(int rank, std::uint64_t ticket) override
    {
        const std::string name = std::string(m_driver.name()) + " allReduceMean";
        requireRank(rank);
        RankState& mine = m_ranks[std::size_t(rank)];
        mine.order.requireOldest(ticket, std::string(m_driver.name()) + " complete", rank);
        // Enqueued (no host wait for the GPU), and no asynchronous error so far.
        settle(rank, name);
        CollectiveStatus s;
        try {
            s = m_life.use(name + ": another tower failed",
                           [&] { return m_driver.ordered(rank, mine.tokens.front()); });
        } catch (const CollectiveAborted&) {
            throw;
        } catch (const std::exception& e) {
            s = {CollectiveState::Failed, e.what()};
        }
        if (s.state == CollectiveState::Failed) fail(name, rank, s.error);
        mine.tokens.pop_front();
        mine.order.completed();
    }

    // With ranks in several processes, root 0 only: the world's rank 0, in another process or
    // this one's rank 0.
    void broadcast(int rank, int root, std::span<Tensor> tensors) override
    {
        const std::string name = std::string(m_driver.name()) + " broadcast";
        if (m_driver.spansProcesses() && root != 0)
            throw InvalidArgument(name +
                                  ": with ranks in several processes the root is global "
                                  "rank 0 (root 0), not " +
                                  std::to_string(root));
        if (root < 0 || root >= size())
            throw InvalidArgument(name + ": no root rank " + std::to_string(root));
        run(rank, CollectiveKind::Broadcast, root, tensors, "broadcast");
    }

    // Every rank of the world, through the driver, where the ranks span processes.
    void barrier(int rank) override
    {
        requireRank(rank);
        if (m_driver.spansProcesses()) {
            run(rank, CollectiveKind::Barrier, 0, {}, "barrier");
            return;
        }
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
    struct RankState
    {
        TicketOrder order;
        std::deque<std::uint64_t> tokens; // the driver's, of the tickets not completed, in order
    };

    void requireRank(int rank) const
    {
        if (rank < 0 || rank >= size())
            throw InvalidArgument(std::string(m_driver.name()) + ": no rank " +
                                  std::to_string(rank));
    }

    void requireTensors(const std::string& name, int rank, CollectiveKind kind,
                        std::span<Tensor> tensors) const
    {
        const Device here = m_driver.device(rank);
        for (const auto& t : tensors) {
            if (t.device() != here)
                throw InvalidArgument(name + ": rank " + std::to_string(rank) + " on " +
                                      here.str() + " was given " + t.describe());
            if (kind == CollectiveKind::AllReduceMean && t.dtype() != DType::Float32)
                throw InvalidArgument(name + ": only float32 tensors, got " + t.describe());
        }
    }

    static std::string durationText(std::chrono::milliseconds d)
    {
        return d < std::chrono::seconds(1)
                   ? std::to_string(d.count()) + " ms"
                   : std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count()) +
                         " s";
    }

    // A failure on rank: the others are released with its reason.
    [[noreturn]] void fail(const std::string& name, int rank, const std::string& error)
    {
        const std::string why = name + " failed on " + m_driver.device(rank).str() + ": " + error;
        abort(why);
        throw BackendError(why);
    }

    // Polls `next` (under a lease) while it says Pending: the status it ends with, or Failed
    // after the time limit. Throws CollectiveAborted once the communicator is aborted.
    template <class Next> CollectiveStatus pollWhilePending(const std::string& name, Next&& next)
    {
        const std::string abortedText = name + ": another tower failed";
        CollectiveStatus s;
        try {
            s = m_life.use(abortedText, next);
            const auto deadline = std::chrono::steady_clock::now() + m_timeout;
            PollBackoff backoff;
            while (s.state == CollectiveState::Pending) {
                if (std::chrono::steady_clock::now() > deadline)
                    return {CollectiveState::Failed,
                            "not finished after " + durationText(m_timeout) +
                                " (a tower that never came, or a hung link)"};
                backoff.pause();
                s = m_life.use(abortedText, next);
            }
        } catch (const CollectiveAborted&) {
            throw;
        } catch (const std::exception& e) {
            s = {CollectiveState::Failed, e.what()};
        }
        return s;
    }

    // Waits (on the host) until rank's last collective is enqueued, and checks for an
    // asynchronous error.
    void settle(int rank, const std::string& name)
    {
        const CollectiveStatus s = pollWhilePending(name, [&] { return m_driver.enqueued(rank); });
        if (s.state == CollectiveState::Failed) fail(name, rank, s.error);
    }

    void run(int rank, CollectiveKind kind, int root, std::span<Tensor> tensors, const char* what)
    {
        requireRank(rank);
        const std::string name = std::string(m_driver.name()) + " " + what;
        requireTensors(name, rank, kind, tensors);
        settle(rank, name); // after the asynchronous collectives this rank started before
        bool launched = false;
        const CollectiveStatus s = pollWhilePending(name, [&] {
            if (launched) return m_driver.poll(rank);
            launched = true;
            return m_driver.launch(rank, kind, root, tensors);
        });
        if (s.state == CollectiveState::Failed) fail(name, rank, s.error);
    }

    Driver m_driver;
    Rendezvous m_rendezvous;
    std::chrono::milliseconds m_timeout;
    CommunicatorLifecycle m_life;
    std::vector<RankState> m_ranks; // each touched by its rank's thread only
};

} // namespace towers::engine::cuda
