#pragma once
// The collective operations between towers: the interface that the in-process host implementation
// (HostCommunicator, the seeds' "average on the CPU"), NCCL (one rank per GPU) and MPI (several
// machines) share. Every call is collective: each rank makes it from its own thread, with tensors
// of the same shapes and dtypes in the same order, and it returns once the operation is complete
// for that rank. The asynchronous average (startAllReduceMean, complete) lets a rank go on with
// its backward while the gradients of its later layers are averaged (TowerSet's buckets).
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "engine/tensor/tensor.h"

namespace towers::engine {

class Ops;

class Communicator
{
public:
    virtual ~Communicator() = default;

    // The number of ranks (towers).
    virtual int size() const = 0;

    // Replaces each of rank's float tensors by the element-wise mean over all ranks. Every rank
    // receives bitwise the same values. Throws InvalidArgument (on every rank) when the ranks'
    // tensors do not match, CollectiveAborted when the communicator was aborted.
    virtual void allReduceMean(int rank, std::span<Tensor> tensors) = 0;

    // The asynchronous form of allReduceMean: starts averaging rank's tensors and returns a ticket,
    // at once where the communicator can (the default runs allReduceMean to the end here). The
    // tensors are the communicator's until complete(rank, ticket): the rank neither reads nor
    // writes them before. Every rank starts the same collectives in the same order, and the
    // synchronous calls keep their place in that order.
    virtual std::uint64_t startAllReduceMean(int rank, std::span<Tensor> tensors);
    // Returns once the collective of `ticket` is complete for rank: its tensors hold the mean
    // (a GPU communicator: once the work the rank issues next on its stream is ordered after it;
    // the host does not wait for the GPU). Throws as allReduceMean does: CollectiveAborted when
    // the communicator was aborted, whichever rank failed. Each ticket is completed once, in the
    // order the rank started them.
    virtual void complete(int rank, std::uint64_t ticket);
    // Tells the communicator the ops rank's tensors are computed with, before any collective (a
    // GPU communicator orders its collectives after the work issued on that tower's stream, and
    // that stream's later work after them). The default ignores it.
    virtual void attach(int rank, Ops& ops);

    // Copies root's tensors (any dtype) into every other rank's tensors.
    virtual void broadcast(int rank, int root, std::span<Tensor> tensors) = 0;

    // Waits until every rank has arrived.
    virtual void barrier(int rank) = 0;

    // Called by a rank that failed: every pending and later collective throws CollectiveAborted
    // with `reason` on the other ranks, so that they do not wait forever. Thread-safe.
    virtual void abort(const std::string& reason) = 0;
    virtual bool aborted() const = 0;
};

// For communicators that gather every rank's tensors: each rank's must match rank 0's (count,
// shapes, dtypes), live on `device` and, for an average, be of a dtype in `averaged` (empty: any
// dtype, as a broadcast takes). Throws InvalidArgument naming the collective, the rank and the
// tensor.
void requireSameLayout(const std::vector<std::span<Tensor>>& slots, const char* what,
                       const Device& device, std::initializer_list<DType> averaged = {});

} // namespace towers::engine
