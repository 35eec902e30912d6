#pragma once
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "engine/dist/communicator.h"
#include "engine/dist/process_group.h"
#include "engine/dist/rendezvous.h"
#include "engine/train/started_collectives.h"

namespace towers::engine {

// The towers of this process (threads, host tensors) joined with the towers of the other processes
// of a ProcessGroup: its ranks are this process's towers, global towers group.rank() x size() ..
// + size() - 1 of group.size() x size(), and a mean is over every global tower.
//
// Deterministic as HostCommunicator, and bitwise equal to it: each element's mean is summed in
// global tower order, in double, and divided by the global tower count, so P processes of T towers
// compute exactly what one process of P x T towers computes, however the towers are spread. To
// keep that order every process receives every tower's tensors (an all-gather of each process's
// towers, then the same sum everywhere) rather than an MPI_Allreduce, whose order of summation
// depends on the algorithm the MPI library picks. For the few processes of a workstation or a
// small cluster it also moves less: (P - 1) x T x n floats into each process, where a ring
// all-reduce in double moves 2 (P - 1) / P x n doubles.
//
// A collective is started by the last of this process's towers to start it (the all-gather runs
// while the towers go on) and finished by the first tower to complete it; the others wait for it.
// broadcast() takes a global root tower; barrier() is this process's towers only.
class ProcessCommunicator final : public Communicator
{
public:
    // towers >= 1 ranks in this process; `group` must outlive the communicator.
    ProcessCommunicator(int towers, ProcessGroup& group);

    int size() const override { return m_size; }
    int globalTowers() const { return m_size * m_group.size(); }
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
    ProcessGroup& m_group;
    Rendezvous m_rendezvous;
    std::vector<std::span<Tensor>> m_slots; // each rank's tensors during a broadcast

    struct Gather
    {
        std::vector<char> send, receive;
        ProcessGroup::Request request = 0;
        bool gathering = false, folding = false;
    };
    std::mutex m_mutex;
    std::condition_variable m_changed;
    StartedCollectives<Gather> m_started;
};

} // namespace towers::engine
