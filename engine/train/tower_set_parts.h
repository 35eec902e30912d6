#pragma once
// Private to engine/train: the types of TowerSet's implementation that tower_set.cpp,
// tower_set_step.cpp and tower_set_state.cpp share (a tower, and the step slots it keeps).
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/train/tower_set.h"
#include "engine/train/tower_thread.h"

namespace towers::engine {

// What one issued step keeps on a tower until collect(): two, so that a step can be issued while
// the one before it still runs (they alternate).
struct StepSlot
{
    std::vector<Tensor> savedBuffers; // the buffers before the step's forward (batch-norm stats)
    Tensor flag;                      // gated: the step's finiteness flag where the tower computes
    Tensor flagHost;                  // gated: its page-locked copy
    LossCopy lossCopy;                // gated: the loss on its way to the host
    // With accumulation (TowerSetOptions::accumulate): the loss of each part before the last, on
    // its way to the host.
    std::vector<LossCopy> partLosses;
    Tensor images, labels, draws; // gated: page-locked copies of the tower's slice
    Tensor deviceImages, deviceLabels, deviceDraws; // gated: the slice where the tower computes
    Tensor scalars, deviceScalars; // gated: the step's StepScalars, page-locked and on the device
    // On tower 0 (TowerSetOptions::gradNorm, or a run that clips): the squares of the averages,
    // summed by the optimizer (Optimizer::gradSumSquares), copied to the host (page-locked) after
    // the update.
    Tensor gradSumSquares;
    // A GPU tower's step captured (TowerSetOptions::graphs), replayed while the shapes stay;
    // `warm`: the slot has run a step op by op with them since the captures were last dropped.
    std::unique_ptr<CapturedWork> graph;
    bool warm = false;
    int dataMark = 0, computeMark = 0, backwardMark = 0, commMark = 0, updateMark = 0, endMark = 0;
    double startedMs = 0; // in the buckets' collectives during backward
    // Known once the step is done (at once for a step that is not gated).
    LossValue loss;
    TowerTimes times;

    // Copies the optimizer's sum of the gradients' squares of the step just issued when it
    // measures them (after its step(), on the tower's stream: read once the step is done).
    void copyGradSumSquares(Ops& ops, const Optimizer& optimizer)
    {
        if (!optimizer.measuresGradNorm()) return;
        if (gradSumSquares.empty()) gradSumSquares = Tensor::pinned({1}, DType::Float64);
        ops.download(optimizer.gradSumSquares(), gradSumSquares);
    }
    // The step's split from its marks, once `ops` has finished them.
    TowerTimes timesFrom(Ops& ops) const
    {
        return {ops.millisecondsBetween(computeMark, backwardMark) - startedMs,
                ops.millisecondsBetween(backwardMark, commMark) + startedMs,
                ops.millisecondsBetween(dataMark, computeMark),
                ops.millisecondsBetween(commMark, updateMark)};
    }
    // The step's loss from its last part's (`last`) and partLosses, once the step is done: the
    // mean of the parts' cross-entropies (each the mean over its part), the weight decay the
    // last's (the same weights for every part).
    LossValue lossOfParts(LossValue last) const
    {
        if (partLosses.empty()) return last;
        double sum = 0;
        for (const LossCopy& part : partLosses) sum += part.value().crossEntropy;
        last.crossEntropy = (sum + last.crossEntropy) / double(partLosses.size() + 1);
        return last;
    }
    // Puts back the buffers of `params` (a replica's parameters()) saved before the step.
    void restoreBuffers(const std::vector<Parameter*>& params) const
    {
        for (std::size_t i = 0; i < params.size(); ++i)
            if (!params[i]->trainable) params[i]->value.copyFrom(savedBuffers[i]);
    }
};

struct TowerSet::Tower
{
    std::unique_ptr<Ops> ops;
    std::unique_ptr<Model> model;
    std::unique_ptr<Optimizer> optimizer;
    Device device;               // where the replica lives
    std::vector<Tensor> reduce;  // this step's gradients and float buffers (views)
    std::vector<Tensor> staging; // host copies of `reduce` for a GPU tower's collectives
    Tensor images, labels;       // a GPU tower's slice of the batch
    Tensor source, draws;        // the held training set (shared on a device), the step's draws
    Tensor flagZero;             // a GPU tower's page-locked 0 to reset a step's flag
    // A step slot per step in flight: a slot's buffers (its pinned copies, its device inputs) are
    // written again only once its previous step was collected, which holds while no more steps
    // are in flight than there are slots (and resetFlag's "the step before is slot ^ 1").
    StepSlot slots[2];
    static_assert(TowerSet::kMaxInFlight == 2, "one step slot per step in flight, two of them");
    std::unique_ptr<TowerBuckets> buckets;          // null with one tower or bucketMb = 0
    std::string graphKey;                           // the inputs of its captured steps
    std::string graphFailure;                       // why its last capture failed, for issue()
    std::int64_t replayed = 0;                      // its steps replayed from a capture
    std::chrono::steady_clock::time_point finished; // when its part of the step ended
    EvalResult eval;
    TowerThread thread; // declared last: joined before the model and ops it uses are destroyed
};

} // namespace towers::engine
