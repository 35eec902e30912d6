#pragma once
// Gradients averaged while backward still runs (PyTorch DDP's buckets): a model's gradients (and
// float buffers: batch-norm running statistics) are grouped, from the last layer to the first, into
// buckets of a few MiB; each tower starts a bucket's average as soon as its backward has produced
// every tensor in it, and goes on with the earlier layers meanwhile. Every tower starts the same
// buckets in the same order, so the collectives match; each element's mean is the communicator's
// usual one, so a bucketed step is bitwise an unbucketed one.
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/dist/communicator.h"
#include "engine/nn/layer.h"
#include "engine/ops/ops.h"

namespace towers::engine {

// Which tensors go together, for one model (every replica has the same parameter list).
struct BucketPlan
{
    // Builds the buckets of `params` (a model's parameters(), in order): the averaged tensors
    // (every trainable gradient and every float buffer) taken from the last to the first, a bucket
    // closed once it holds at least its cap: firstMb MiB for the first (the last layers', so that
    // averaging starts early), bucketMb MiB for the others. A tensor is never split. bucketMb and
    // firstMb must be > 0 (InvalidArgument).
    static BucketPlan make(const std::vector<Parameter*>& params, double bucketMb, double firstMb);

    std::vector<std::vector<std::size_t>> buckets; // parameter indices, in the order started
    std::vector<std::int64_t> bytes;               // per bucket
    std::vector<int> bucketOf; // per parameter index: its bucket, -1 when not averaged

    // "3 buckets (0.5, 25.0, 4.1 MiB)".
    std::string describe() const;
};

// The tensor of a parameter that the towers average: its gradient when trainable, else its value
// (a buffer). Empty when it is not averaged (integer bookkeeping).
Tensor averagedTensor(Parameter& p);

// One tower's buckets, step after step: ready() as backward reports each parameter, then finish().
class TowerBuckets
{
public:
    // rank's replica `params` (parameters(), the plan's order); staged: the tensors live on a GPU
    // and the communicator takes host tensors, so each bucket goes through host copies. `ops`:
    // the tower's, through whose outsideCapture() the communicator's calls go (run when made, or,
    // in a captured step, launched between its captured parts).
    TowerBuckets(const BucketPlan& plan, Communicator& comm, int rank,
                 const std::vector<Parameter*>& params, bool staged, Ops& ops);

    // A new step: nothing started, no time spent in the communicator.
    void begin();
    // Backward is done with p: starts, in order, every bucket whose tensors are all ready.
    void ready(const Parameter& p);
    // Starts what backward did not report, then completes every bucket in order: the averaged
    // tensors hold the means. Returns the averaged tensors (where they live), bucket by bucket
    // (during a capture: the tensors that will hold them once the captured work has run).
    const std::vector<Tensor>& finish();

    // The time this step spent in the communicator's calls (starting, copying, completing).
    double collectiveMs() const { return m_collectiveMs; }

private:
    // Takes the bucket's tensors and starts its average (through m_ops' outsideCapture).
    void launch(std::size_t bucket);
    void start(std::size_t bucket); // the communicator's calls of launch()
    void completeAll();             // and of finish()

    const BucketPlan& m_plan;
    Communicator& m_comm;
    const int m_rank;
    const std::vector<Parameter*>& m_params;
    const bool m_staged;
    Ops& m_ops;
    std::unordered_map<const Parameter*, std::size_t> m_index;
    std::vector<int> m_pending;               // per bucket: tensors not yet ready
    std::vector<std::uint64_t> m_tickets;     // per bucket started
    std::vector<std::vector<Tensor>> m_where; // per bucket: the averaged tensors this step
    std::vector<std::vector<Tensor>> m_host;  // per bucket: host copies when staged
    std::vector<Tensor> m_all;
    std::size_t m_next = 0; // the next bucket to start
    double m_collectiveMs = 0;
};

} // namespace towers::engine
