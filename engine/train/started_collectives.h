#pragma once
// The bookkeeping of asynchronous collectives between the ranks of one process (HostCommunicator,
// ProcessCommunicator): by ticket, each rank's tensors, how many ranks have started and completed
// it, and whether it is reduced. Not locked: the communicator calls it under its own mutex.
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "engine/errors.h"
#include "engine/tensor/tensor.h"

namespace towers::engine {

struct NoExtra
{
};

template <class Extra = NoExtra> class StartedCollectives
{
public:
    struct Entry : Extra
    {
        std::vector<std::vector<Tensor>> tensors; // each rank's
        int arrived = 0, completed = 0;
        bool reduced = false;
    };

    explicit StartedCollectives(int ranks) : m_ranks(ranks), m_next(std::size_t(ranks), 0) {}

    // Registers rank's tensors as its next collective: its ticket, and the entry (which stays in
    // place until forgotten), whose tensors are all there once arrived == ranks.
    std::pair<std::uint64_t, Entry*> start(int rank, std::span<Tensor> tensors)
    {
        const std::uint64_t ticket = m_next[std::size_t(rank)]++;
        Entry& e = m_entries[ticket];
        e.tensors.resize(std::size_t(m_ranks));
        e.tensors[std::size_t(rank)].assign(tensors.begin(), tensors.end());
        ++e.arrived;
        return {ticket, &e};
    }
    bool allArrived(const Entry& e) const { return e.arrived == m_ranks; }

    // The entry of a ticket rank started; InvalidArgument when it started no such collective.
    Entry& find(int rank, std::uint64_t ticket)
    {
        const auto it = m_entries.find(ticket);
        if (it == m_entries.end() || ticket >= m_next[std::size_t(rank)])
            throw InvalidArgument("complete: rank " + std::to_string(rank) +
                                  " started no collective " + std::to_string(ticket));
        return it->second;
    }
    // Rank is done with the collective; forgotten once every rank is.
    void completed(std::uint64_t ticket)
    {
        const auto it = m_entries.find(ticket);
        if (it != m_entries.end() && ++it->second.completed == m_ranks) m_entries.erase(it);
    }

private:
    const int m_ranks;
    std::map<std::uint64_t, Entry> m_entries; // std::map: entries stay where they are
    std::vector<std::uint64_t> m_next;        // each rank's next ticket
};

} // namespace towers::engine
