#pragma once
// The host-side bookkeeping of the GPU communicators' asynchronous averages
// (Communicator::startAllReduceMean and complete), free of CUDA so that tests drive it on the CPU
// (tst_cuda_host_logic, tst_communicator):
//
//  * TicketOrder: a rank's tickets, 0, 1, 2... in the order it started them, each completed once
//    and in that order (anything else is refused with InvalidArgument, and changes nothing).
//  * TicketBoard: towers sharing one GPU (same_device_communicator.cpp). Each rank registers its
//    part of collective k (its tensors, and an event recorded on its stream) and goes on; the
//    rank that registers last enqueues the reduction of k (under the board's lock, so that the
//    collectives are enqueued in ticket order) and wakes the ranks waiting for it in complete().
//    complete() waits on the host only until collective k is enqueued, never for the GPU to run
//    it, and an abort releases it.
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/errors.h"

namespace towers::engine::cuda {

class TicketOrder
{
public:
    // The ticket of the rank's next start, and the first not completed.
    std::uint64_t next() const { return m_next; }
    std::uint64_t oldest() const { return m_completed; }
    // Started and not completed.
    std::uint64_t pending() const { return m_next - m_completed; }

    std::uint64_t start() { return m_next++; }
    // Throws InvalidArgument ("<what>: rank <rank> ...") unless `ticket` is the oldest ticket the
    // rank started and has not completed.
    void requireOldest(std::uint64_t ticket, const std::string& what, int rank) const
    {
        if (ticket == m_completed && ticket < m_next) return;
        const std::string head = what + ": rank " + std::to_string(rank) + " ";
        if (ticket >= m_next)
            throw InvalidArgument(head + "started no collective " + std::to_string(ticket));
        if (ticket < m_completed)
            throw InvalidArgument(head + "completed collective " + std::to_string(ticket) +
                                  " already");
        throw InvalidArgument(head + "must complete collective " + std::to_string(m_completed) +
                              " before " + std::to_string(ticket) + " (the order they started in)");
    }
    void completed() { ++m_completed; }

private:
    std::uint64_t m_next = 0, m_completed = 0;
};

// Slot: what a rank registers for a collective (default-constructible, movable); Done: what the
// enqueue makes of a collective (its 'done' event), handed to each rank's complete() and, once
// every rank has completed it, back to the caller to recycle. Thread-safe; each rank calls from
// one thread at a time.
template <class Slot, class Done> class TicketBoard
{
public:
    explicit TicketBoard(int ranks) : m_ranks(ranks), m_order(std::size_t(ranks)) {}

    int size() const { return m_ranks; }

    // Registers `slot` as rank's part of its next collective and returns its ticket. The rank
    // that registers last calls enqueue(ticket, slots) -> Done with every rank's slot (in rank
    // order; it may change them) under the board's lock, then wakes the ranks waiting for the
    // ticket. If enqueue throws, the board is aborted with its what() and the exception goes on.
    // Throws CollectiveAborted once the board is aborted.
    template <class Enqueue> std::uint64_t start(int rank, Slot slot, Enqueue&& enqueue)
    {
        std::lock_guard lock(m_mutex);
        if (m_aborted) throw CollectiveAborted(m_reason);
        const std::uint64_t ticket = m_order[std::size_t(rank)].start();
        Entry& e = m_entries[ticket];
        if (e.parts.empty()) e.parts.resize(std::size_t(m_ranks));
        e.parts[std::size_t(rank)] = std::move(slot);
        if (++e.arrived < m_ranks) return ticket;
        try {
            e.done = enqueue(ticket, e.parts);
        } catch (const std::exception& ex) {
            abortLocked(ex.what());
            throw;
        }
        e.enqueued = true;
        m_cv.notify_all();
        return ticket;
    }

    // Completes `ticket` for rank: refuses (InvalidArgument, `what` names the call) a ticket that
    // is not rank's oldest one not completed; waits until the collective is enqueued
    // (CollectiveAborted if the board is, or gets, aborted); then calls ordered(done, rank's
    // slot) without the lock, and, once it returned, drops rank's slot. Returns the Done to
    // recycle when rank was the last to complete the ticket. If ordered throws, nothing changes
    // (the caller aborts).
    template <class Ordered>
    std::optional<Done> complete(int rank, std::uint64_t ticket, const std::string& what,
                                 Ordered&& ordered)
    {
        std::unique_lock lock(m_mutex);
        m_order[std::size_t(rank)].requireOldest(ticket, what, rank);
        // The entry stays at least until this rank has completed it.
        const auto it = m_entries.find(ticket);
        m_cv.wait(lock, [&] { return it->second.enqueued || m_aborted; });
        if (m_aborted) throw CollectiveAborted(m_reason);
        Entry& e = it->second;
        lock.unlock();
        // e.done is not written after `enqueued`, nor this rank's slot by anyone but this rank.
        ordered(std::as_const(e.done), e.parts[std::size_t(rank)]);
        lock.lock();
        Slot drop = std::exchange(e.parts[std::size_t(rank)], Slot{});
        m_order[std::size_t(rank)].completed();
        std::optional<Done> recycle;
        if (++e.completed == m_ranks) {
            recycle = std::move(e.done);
            m_entries.erase(it);
        }
        lock.unlock();
        return recycle; // `drop` goes here, outside the lock
    }

    // Every waiting and later start() or complete() throws CollectiveAborted(reason); the first
    // reason stays. Thread-safe.
    void abort(const std::string& reason)
    {
        std::lock_guard lock(m_mutex);
        abortLocked(reason);
    }
    bool aborted() const
    {
        std::lock_guard lock(m_mutex);
        return m_aborted;
    }
    std::string reason() const
    {
        std::lock_guard lock(m_mutex);
        return m_reason;
    }

    // Collectives some rank started and not every rank completed.
    std::size_t inFlight() const
    {
        std::lock_guard lock(m_mutex);
        return m_entries.size();
    }

private:
    struct Entry
    {
        std::vector<Slot> parts; // by rank
        int arrived = 0, completed = 0;
        bool enqueued = false;
        Done done{};
    };

    void abortLocked(const std::string& reason)
    {
        if (!m_aborted) {
            m_aborted = true;
            m_reason = reason.empty() ? std::string("another tower failed") : reason;
        }
        m_cv.notify_all();
    }

    const int m_ranks;
    mutable std::mutex m_mutex;
    std::condition_variable m_cv;
    std::vector<TicketOrder> m_order;         // by rank
    std::map<std::uint64_t, Entry> m_entries; // by ticket; nodes stay where they are
    bool m_aborted = false;
    std::string m_reason;
};

} // namespace towers::engine::cuda
