#pragma once
// N towers: full model replicas, each with its own backend ops (a oneDNN stream and primitive
// cache) on its own persistent thread with its own OpenMP team, kept bitwise identical by
// averaging gradients (and batch-norm running statistics) through a Communicator and applying the
// same optimizer update everywhere. The engine of the Trainer; usable alone for tests and tools.
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "engine/data/batch_source.h"
#include "engine/data/preprocessing.h"
#include "engine/dist/communicator.h"
#include "engine/dist/process_group.h"
#include "engine/models/model.h"
#include "engine/ops/precision.h"
#include "engine/optim/ema.h"
#include "engine/optim/optimizer.h"
#include "engine/train/evaluation.h"
#include "engine/train/gradient_buckets.h"
#include "engine/train/tower_times.h"

namespace towers::engine {

// The GPU of tower t of this process's `towers` (TowerSetOptions::gpus): gpus[t] when a list is
// given, else GPU (localRank x towers + t) modulo `gpuCount`, so that the processes of one
// machine take its GPUs in turn by local rank. The number is not checked against gpuCount.
int gpuOfTower(const std::vector<int>& gpus, int towers, int localRank, int t, int gpuCount);

// For GPU towers (`backend` not a host one, a GPU backend loaded): page-locked host memory is
// made in the context of this process's first tower's GPU (DeviceMemory::setPinnedDevice), so
// that a batch loader's threads, which choose no GPU, start no context on GPU 0 in a process
// that computes on another. Called before anything page-locked is made.
void choosePinnedDevice(const std::string& backend, const std::vector<int>& gpus, int towers,
                        int localRank);

struct TowerSetOptions
{
    std::string model = "cifar10-tutorial"; // a registered model
    std::string modelDefinition;            // or a model file's network (resolveModel)
    // When set, builds each replica instead of the registry (a network that is not registered:
    // tests, experiments). `model` is then only a name.
    std::function<std::unique_ptr<Model>()> build;
    // The registered model's classes (its dataset's); 0: ModelInfo::numClasses. Not used with
    // `build`.
    int numClasses = 0;
    // Float32, or Float64 with the reference backend (exact comparisons); batches are float32
    // and converted per tower.
    DType dtype = DType::Float32;
    std::string backend = "onednn"; // "onednn", "reference" or "cuda"
    int towers = 1;
    // With "cuda": the GPU of each tower (towers may share one: {0, 0} is two towers on GPU 0);
    // empty puts tower t on GPU t modulo the GPU count.
    std::vector<int> gpus;
    bool allowTf32 = false; // "cuda": TF32 tensor cores for float32 convolutions and GEMMs
    // "cuda": convolution algorithms measured by cuDNN (BackendOptions::measureAlgorithms).
    bool cudnnBenchmark = false;
    // Convolutions and matrix products in bfloat16 (engine/ops/precision.h): the replicas, the
    // averaging and the update stay float32.
    Precision precision = Precision::Float32;
    // GPU towers' gradient averaging: "auto" keeps the tensors on the GPUs (NCCL across GPUs, a
    // kernel when the towers share one GPU) where the backend can, else the host; "host" always
    // averages through host copies (the seeds' design).
    std::string allreduce = "auto";
    // When set, the communicator of the towers, given their tensors where they live (tests: a
    // stand-in for NCCL on a stand-in device).
    std::function<std::unique_ptr<Communicator>(int towers)> makeCommunicator;
    // Gradient buckets (PyTorch DDP's bucket_cap_mb): the gradients and batch-norm statistics are
    // averaged in groups of about this many MiB, each as soon as every tower's backward has
    // produced it, while backward goes on; the first bucket (the last layers') holds firstBucketMb.
    // 0: everything in one collective after backward (no overlap). The results are bitwise the
    // same either way.
    double bucketMb = 25;
    double firstBucketMb = 1;
    // CUDA graphs: GPU towers whose ops can capture (Ops::beginCapture) and whose averages stay
    // on the GPUs capture each of their two step slots' steps once the slot has run one with the
    // same shapes, and replay the capture from then on (the data copies, the flag's reset and the
    // marks stay outside it). With several towers, each tower's step is captured in parts, and
    // the collectives (a bucket's start, their completion) are launched between the parts as
    // they would be op by op (Ops::outsideCapture). The captures are dropped when a shape changes
    // and by evaluate, holdTrainingSet and loadState. A capture that fails is logged once
    // (graphDescription()) and the steps of every tower are issued op by op from then on. The
    // results are bitwise the same either way. false: never.
    bool graphs = true;
    // When set, makes tower t's ops instead of `backend` (tests: a backend with a fault, a
    // stand-in device). The replica lives where the ops' device() says.
    std::function<std::unique_ptr<Ops>(int tower)> makeOps;
    int threadsPerTower = 1; // OpenMP threads of each tower (>= 1)
    // Gradient accumulation: each tower runs its slice of a step's batch as this many equal parts
    // one after the other (forward and backward each, Model::backwardPart), so that its layers
    // hold one part's examples at a time, and the step's update is that of the whole slice.
    // Part j of global tower g draws the dropout masks of global tower g x accumulate + j: one
    // tower accumulating 2 parts trains as 2 towers would (but for the order of the sums, and the
    // batch-norm running statistics, which each part moves in turn). 1: none.
    int accumulate = 1;
    OptimizerOptions optimizer;
    double weightDecay = -1;   // >= 0 overrides the conv/linear weights' coefficient
    bool dropout = true;       // false: dropout layers are the identity (exact comparisons)
    double emaDecay = 0;       // 0: no moving average
    double labelSmoothing = 0; // the training loss's (Model::setLabelSmoothing)
    double clipGradNorm = 0;   // > 0: the averaged gradients' norm clipped (setMaxGradNorm)
    // Tower 0 measures the averaged gradients' global norm at every step (TowerStepResult::
    // gradNorm): a sum of squares over the parameters, where they live, without the host waiting.
    bool gradNorm = true;
    std::uint64_t seed = 1; // weight initialisation (and dropout streams)
    // When set, these towers are one process's share of a run across processes: its towers are
    // global towers rank x towers .. + towers - 1 of size x towers (dropout streams, evaluation
    // shares and the averages are global), and gradients are averaged across every process (see
    // ProcessCommunicator). GPU towers without `gpus` take GPUs from the process's local rank.
    // Must outlive the TowerSet.
    ProcessGroup* processes = nullptr;
};

struct TowerStepResult
{
    double loss = 0, crossEntropy = 0; // means over the towers
    // False when a loss or an averaged gradient (or batch-norm statistic) was NaN or infinite:
    // the update was then skipped and the buffers restored on every tower, so the replicas keep
    // the state of the previous step. GPU towers whose averages stay on their GPUs decide that
    // there (the update kernels read a flag set on the GPU) without the host waiting; there a
    // loss that is not finite while every gradient is (which finite logits never make) is
    // reported but does not stop the update.
    bool finite = true;
    // The averaged gradients' global norm, before any clipping (the same on every tower), when
    // tower 0 measures it (TowerSetOptions::gradNorm, or clipGradNorm > 0). NaN otherwise, or
    // for a step that was not finite.
    double gradNorm = std::numeric_limits<double>::quiet_NaN();
    std::vector<TowerTimes> towers; // every global tower's, in global order
    std::int64_t step = 0;          // the global step this is the result of
    // Steps issued after this one (TowerSet::issue) that were not taken because this one was not
    // finite: their updates were skipped as well and they are no longer in flight.
    int discarded = 0;
};

struct StepSlot;  // tower_set_parts.h
class GpuBackend; // engine/gpu/gpu_backend.h

class TowerSet
{
public:
    // Builds every tower on its thread, initialises the replicas from `seed` and broadcasts tower
    // 0's weights to all. Throws InvalidArgument / UnknownName for bad options.
    explicit TowerSet(const TowerSetOptions& options);
    ~TowerSet();
    TowerSet(const TowerSet&) = delete;
    TowerSet& operator=(const TowerSet&) = delete;

    // This process's towers.
    int size() const;
    // Every process's towers, and the global index of this process's first.
    int globalTowers() const { return m_globalTowers; }
    int firstTower() const { return m_firstTower; }
    const TowerSetOptions& options() const { return m_opt; }

    // One synchronous step on a batch of size() slices (this process's share of the global batch
    // when across processes; every process calls it for the same step): forward and backward on
    // every tower's slice, gradients and batch-norm statistics averaged, the optimizer update with
    // learning rate `lr`, and the EMA (numUpdates = globalStep + 1). `globalStep` seeds dropout.
    // A non-finite loss or gradient skips the update everywhere (see TowerStepResult::finite).
    // Rethrows the first tower's error (the others are released, never left waiting).
    // Nothing may be in flight (issue()).
    TowerStepResult step(const Batch& batch, std::int64_t globalStep, double lr);

    // The same step in two halves, so that the host can prepare and issue the next step while a
    // GPU still computes this one: issue() returns once every tower has issued its work (where
    // pipelines() is true, without waiting for it; else having done it), collect() waits for the
    // oldest issued step and returns its result. At most kMaxInFlight steps are issued and not
    // collected (InvalidArgument beyond). The batch may change as soon as issue() returns. A
    // step issued after one that turns out not finite is not taken either (its updates are
    // skipped where it runs, or it does not run): collect() of the first says so
    // (TowerStepResult::discarded) and drops it, and the towers are then as before the first.
    // Everything else (evaluate, holdTrainingSet, loadState, compareReplicas) needs nothing in
    // flight (InvalidArgument otherwise); so do model() and optimizer() readers.
    static constexpr std::size_t kMaxInFlight = 2;
    void issue(const Batch& batch, std::int64_t globalStep, double lr);
    TowerStepResult collect();
    std::size_t inFlight() const { return m_flight.size(); }
    // Whether issue() returns before the step's work is done: GPU towers whose averages stay on
    // the GPUs (or a lone GPU tower), which decide on the device whether a step is taken.
    bool pipelines() const { return m_gated && (m_globalTowers == 1 || m_deviceCollectives); }

    // Evaluates on all towers at once (global tower g takes every globalTowers()-th batch, from
    // the g-th) and merges the results (across processes too: a collective there);
    // with the moving averages of the weights when useEma (InvalidArgument without EMA).
    // `cancelled`, asked before each batch, ends the evaluation part-way (complete = false).
    // Across processes every process passes one or none: the processes then vote while their
    // towers evaluate (StopVote), so that a stop asked on any ends every process's share within
    // about a batch and StopVote::kInterval, and all merge the same part-way result.
    EvalResult evaluate(std::int64_t count, int batchSize, const EvalBatchFn& batches, bool useEma,
                        const CancelFn& cancelled = {});

    // Keeps the training set where each tower computes (one copy per GPU, as bytes; the host's
    // towers share one) so that a step's batch may carry draws instead of images
    // (LoaderOptions::drawsOnly): each tower then preprocesses its slice with its ops'
    // preprocessImages, the same images as the loader's to the last bit. Returns where, in words,
    // for the run's log. Float32 towers only; InvalidArgument when the recipe does not make the
    // model's input or does not fit the set; DeviceOutOfMemory when a GPU has no room for it.
    std::string holdTrainingSet(const ImageSet& set, const Preprocessing& recipe);

    // Compares every tower's parameters, buffers and optimizer state with tower 0's, byte for
    // byte; returns a description of the first difference, empty when the replicas are identical.
    std::string compareReplicas();
    // Throws Error with that description when they differ.
    void verifyReplicas();

    // Tower 0's replica and optimizer (all towers hold the same); use between steps only.
    Model& model();
    // Tower t's replica (between steps only: for checks and tests).
    Model& model(int tower);
    // Where tower t runs (the host, or a GPU).
    Device device(int tower) const;
    // How the gradients are averaged, in words ("on the host", "with NCCL across GPUs 0, 1",
    // "on GPU 0", "on the host (NCCL could not start: ...)"), for the run's log.
    const std::string& allReduceDescription() const { return m_allReduceText; }
    // The gradient buckets, in words ("3 buckets (1.0, 25.0, 4.1 MiB) while backward runs", "one
    // collective after backward", "one tower: no gradients to average"), for the run's log.
    std::string bucketDescription() const;
    // Both in one phrase for the run's log: "gradients averaged on the host in 2 buckets (...)
    // while backward runs", or "one tower: no gradients to average".
    std::string averagingDescription() const;
    // How the steps are issued (TowerSetOptions::graphs), in words for the run's log: "captured
    // as CUDA graphs once warm", "issued op by op (...why...)"; empty for host towers, where
    // there is nothing to capture. It changes when a capture fails.
    std::string graphDescription() const;
    Optimizer& optimizer();
    const Ema* ema() const;

    // A state to set, handed over one tensor at a time (a checkpoint read from its file: no more
    // than its largest tensor in memory beside the towers): every tensor's name, dtype and shape
    // first (a file's header), then `read`, which gives each tensor in turn to the function it
    // is passed.
    struct StateSource
    {
        std::vector<SafeTensorEntry> tensors;
        std::function<void(const SafeTensorFn&)> read;
    };
    // Sets every tower's state (weights and buffers under the model's names, optimizer "optim.*"
    // and EMA "ema.*" tensors; "ema.*" ignored where the run keeps no average, and where the
    // state has none the average starts from the weights); InvalidArgument naming the tensor
    // when something does not fit, checked on the names, dtypes and shapes before anything
    // changes. What `read` throws (a file that no longer reads), or a tensor it did not give,
    // leaves the towers part loaded: the caller discards them then.
    void loadState(const StateSource& state);
    // The same from tensors in memory (the weights under the model's names, "optim.*" tensors of
    // `optimizerState` and "ema.*" of `emaState`; their other names are ignored).
    void loadState(const NamedTensors& weights, const NamedTensors& optimizerState,
                   const NamedTensors& emaState);

    // Steps that tower 0 issued by replaying a capture (graphDescription()), for tests and
    // benchmarks.
    std::int64_t replayedSteps() const;

private:
    struct Tower;
    // The constructor's parts, in order. The GPU of each tower (`gpu` gets the CUDA backend):
    // Unsupported where there is none, InvalidArgument for a --gpus that does not fit.
    std::vector<int> towerGpus(GpuBackend*& gpu) const;
    // How the towers average: a given communicator, NCCL (across processes, or the GPUs of this
    // one), or the host (with the reason where GPU towers could not use NCCL).
    void makeCommunicator(GpuBackend* gpu, const std::vector<int>& gpuOf);
    // Each tower on its own thread: its ops, its replica of the model (tower 0's weights
    // broadcast to the others) and its optimizer.
    void buildTowers(GpuBackend* gpu, const std::vector<int>& gpuOf,
                     const std::function<std::unique_ptr<Model>()>& build);
    // The gradient buckets, the moving averages, whether steps are gated on the device and
    // whether they are captured as CUDA graphs (with what the log says of it).
    void planSteps();
    // InvalidArgument naming `what` when steps are in flight.
    void requireIdle(const char* what) const;
    // Runs job(t) on every tower's thread and waits; rethrows the most meaningful error.
    // `meanwhile`, when given, runs on the calling thread once the jobs are posted (its error
    // comes after the towers').
    void runOnAll(const std::function<void(int tower)>& job,
                  const std::function<void()>& meanwhile = {});
    // Issues a GPU tower's step `work` (its forward to its update; `marks`: whether it may mark
    // its split, not in a capture) through the slot's capture when graphs are on: replays it, or
    // captures it once the slot is warm with shapes `key`, else runs it op by op. True when the
    // step ran as a capture (its marks then only frame it). On the tower's thread: a capture that
    // fails is left in the tower's graphFailure, for issue() to stop every tower's captures.
    bool issueCaptured(Tower& tw, StepSlot& sl, const std::string& key,
                       const std::function<void(bool marks)>& work);
    struct TowerStep; // tower_set_step.cpp
    // issue()'s parts, on each tower's thread: the tower's share of the step (the buffers saved
    // to undo it, its slice placed, then the rest), its slice of the batch where its ops read it,
    // and the rest of the step gated (on the device, without the host: GPU towers that average
    // where they compute) or synchronised (the host checks the averages before the update).
    void issueOnTower(TowerStep& s, const Batch& batch);
    void placeSlice(TowerStep& s, const Batch& batch);
    void issueGated(TowerStep& s);
    void issueSynchronised(TowerStep& s);
    // Drops every capture (their tensors are about to change) and the slots' warmth: every
    // tower's, or one's.
    void dropGraphs();
    static void dropGraphs(Tower& tw);
    // Runs a collective on tower t's tensors: directly on the host, through host copies for a GPU
    // tower (the seeds' design: averages are computed on the host).
    void collective(int tower, std::vector<Tensor>& tensors,
                    const std::function<void(std::span<Tensor>)>& run);

    TowerSetOptions m_opt;
    std::unique_ptr<Communicator> m_comm;
    bool m_deviceCollectives = false; // m_comm takes the towers' tensors where they live
    std::string m_allReduceText = "on the host";
    std::unique_ptr<Ema> m_ema;
    BucketPlan m_buckets; // empty with bucketMb = 0
    std::vector<std::unique_ptr<Tower>> m_towers;
    PreprocessDesc m_heldRecipe;          // of the set the towers hold (their Tower::source)
    std::atomic<bool> m_nonFinite{false}; // set by any tower during a step
    // Whether a step's update is gated by a flag on the device (GPU towers that do not average
    // through host copies), decided there without the host: collect() waits for such a step and
    // reads its flag.
    bool m_gated = false;
    struct Issued
    {
        std::int64_t step = 0;
        int slot = 0;           // of each tower's StepSlot pair
        bool nonFinite = false; // not gated: known at issue()
        bool discarded = false; // not taken: behind a step that was not finite
    };
    std::deque<Issued> m_flight; // issued, not collected, oldest first
    int m_nextSlot = 0;
    int m_globalTowers = 1, m_firstTower = 0;
    bool m_graphs = false;   // the GPU towers' steps are captured (TowerSetOptions::graphs)
    std::string m_graphText; // graphDescription()
};

} // namespace towers::engine
