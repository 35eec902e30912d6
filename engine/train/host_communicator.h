#pragma once
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "engine/dist/communicator.h"
#include "engine/dist/rendezvous.h"
#include "engine/train/started_collectives.h"

namespace towers::engine {

// Collectives between towers that are threads of one process, through host memory. Deterministic:
// each element's mean is summed in rank order (in double) and divided by the rank count, whichever
// rank computes it, so every replica receives bitwise the same average whatever the timing. The
// work is shared: rank r reduces the r-th slice of the elements and writes the result into every
// rank's tensors (a reduce-scatter and all-gather in one pass), between two barriers.
//
// Started asynchronously (startAllReduceMean), a collective is reduced as soon as every rank has
// started it, by the rank that came last, while the others go on (with their backward); complete()
// waits until it is reduced. The same per-element formula, so the means are bitwise those of
// allReduceMean, however the tensors are grouped.
class HostCommunicator final : public Communicator
{
public:
    // size >= 1 ranks; InvalidArgument otherwise.
    explicit HostCommunicator(int size);

    int size() const override { return m_size; }
    void allReduceMean(int rank, std::span<Tensor> tensors) override;
    std::uint64_t startAllReduceMean(int rank, std::span<Tensor> tensors) override;
    void complete(int rank, std::uint64_t ticket) override;
    void broadcast(int rank, int root, std::span<Tensor> tensors) override;
    void barrier(int rank) override;
    void abort(const std::string& reason) override;
    bool aborted() const override;

private:
    void checkRank(int rank, const char* what) const;

    const int m_size;
    Rendezvous m_rendezvous;
    std::vector<std::span<Tensor>> m_slots; // each rank's tensors during a collective

    // Collectives started and not yet completed by every rank.
    std::mutex m_asyncMutex;
    std::condition_variable m_asyncDone;
    StartedCollectives<> m_started;
};

} // namespace towers::engine
