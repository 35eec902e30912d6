#pragma once
// The processes of one training run (mpirun / srun: one rank each), as the engine sees them. The
// engine's towers are threads of one process; a ProcessGroup joins the towers of several processes
// (on one machine or many) into one run: the global towers are size() x (towers per process),
// numbered rank by rank. MPI is the implementation (mpi_process_group.cpp, built when MPI is
// found); nothing MPI appears here.
//
// Every collective is called by every process in the same order, from one thread at a time per
// channel: the blocking ones on the control channel (the trainer's thread: start-up checks, the
// state broadcast, the per-step stop vote, merged evaluations), the all-gathers on the gradients
// channel (whichever tower thread starts a bucket). Every wait is
// abortable: it returns early, throwing, when another process announced a failure (ProcessFailed
// with that process's message), when this process aborted (CollectiveAborted), or when nothing
// arrived within timeoutSeconds() (ProcessFailed naming the ranks that did not answer).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/errors.h"

namespace towers::engine {

// Another process of the run failed (its message), or did not answer in time.
class TOWERS_VISIBLE ProcessFailed : public Error
{
public:
    ProcessFailed(int rank, const std::string& message) : Error(message), m_rank(rank) {}
    // The process that failed; -1 when unknown (a timeout waiting on several).
    int rank() const { return m_rank; }

private:
    int m_rank;
};

class ProcessGroup
{
public:
    virtual ~ProcessGroup() = default;

    virtual int rank() const = 0; // this process, 0..size()-1
    virtual int size() const = 0;
    // This process among those on its machine (picks its GPUs), and how many there are.
    virtual int localRank() const = 0;
    virtual int localSize() const = 0;
    virtual std::string hostName() const = 0;
    // "Open MPI 4.1.4", for the run's log.
    virtual std::string description() const = 0;
    // Seconds a wait may last without progress before it gives up (TOWERS_MPI_TIMEOUT).
    virtual double timeoutSeconds() const = 0;

    // Blocking collectives on the Control channel.
    virtual void barrier() = 0;
    // root's bytes into everyone's `data` (every process passes the same `bytes`).
    virtual void broadcast(void* data, std::size_t bytes, int root) = 0;
    // root's string to everyone (sizes may differ before).
    virtual std::string broadcastString(const std::string& mine, int root) = 0;
    // `bytes` from every process (the same count everywhere) into `all` (size() x bytes, by rank).
    virtual void allGather(const void* mine, std::size_t bytes, void* all) = 0;
    // Every process's string, by rank (lengths may differ).
    virtual std::vector<std::string> allGatherStrings(const std::string& mine) = 0;
    // True on every process when `mine` is true on any. `what` names the question in a message of
    // a wait that timed out ("the stop vote").
    virtual bool any(bool mine, const std::string& what) = 0;

    // Non-blocking all-gather on the Gradients channel: `bytes` from each process into `recv`
    // (size() x bytes, by rank). `send` and `recv` stay untouched by the caller until wait().
    // Started in the same order everywhere; waited on in any order.
    using Request = std::uint64_t;
    virtual Request startAllGather(const void* send, std::size_t bytes, void* recv) = 0;
    virtual void wait(Request request) = 0;

    // This process failed with `message`: tells every other process (their waits throw
    // ProcessFailed(rank(), message)) within a bounded time, and makes this process's own waits
    // throw CollectiveAborted. Thread-safe, idempotent.
    virtual void announceFailure(const std::string& message) = 0;
    // A failure another process announced, without waiting (ProcessFailed thrown by any wait).
    virtual void throwIfFailed() = 0;
    // Aborts this process's waits (CollectiveAborted with `reason`) without telling the others
    // (used when the news came from another process). Thread-safe.
    virtual void abortLocal(const std::string& reason) = 0;
};

// Where this process stands: whether a launcher (mpirun, srun) started it as one of several,
// detected from the environment without initialising anything.
struct LaunchInfo
{
    bool launched = false; // started by a launcher with a world of size > 1
    int rank = 0, size = 1;
    std::string launcher; // "Open MPI", "PMI" (MPICH, Slurm), "PMIx"; "Slurm" when unjoinable
    // Started by srun as task `rank` of `size` (> 1), but without the PMI that lets MPI join the
    // tasks (srun without --mpi=pmix or pmi2): MPI would make every task a run of its own, all
    // writing the same run folder. launched is false then; unjoinableReason() says what to do.
    bool unjoinable = false;
};
LaunchInfo detectLaunch();
// For a launch that cannot be joined (LaunchInfo::unjoinable): why, and the command that works
// ("srun started 4 tasks without MPI's process management: ... srun --mpi=pmix ..."); "" else.
std::string unjoinableReason(const LaunchInfo& launch);

// Whether this build can join processes (built with MPI), and if not why.
bool processGroupsAvailable(std::string* whyNot = nullptr);

// Initialises MPI when a launcher started this process (detectLaunch().launched), and returns the
// group; nullptr when the process runs alone. Throws Unsupported when launched as one of several
// but this build has no MPI, InvalidArgument when srun started several tasks that MPI cannot join
// (unjoinableReason), Error when MPI fails to start. The group finalises MPI when
// destroyed (or, after a failure, leaves the process to exit at once).
std::unique_ptr<ProcessGroup> joinProcessGroup();

} // namespace towers::engine
