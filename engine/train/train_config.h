#pragma once
// The configuration of a training run: a plain struct the CLI and the GUI fill, with a JSON form
// (config.json of the run directory, and the "config" metadata of every checkpoint).
#include <cstdint>
#include <string>
#include <vector>

#include "engine/ops/precision.h"
#include "engine/optim/lr_schedule.h"
#include "engine/optim/optimizer.h"

namespace towers::engine {

// The largest TrainConfig::minDelta: half of precision @ 1.
inline constexpr double kMaxMinDelta = 0.5;

struct TrainConfig
{
    std::string model = "cifar10-tutorial";
    // A network from a model file (engine/models/model_file.h): its canonical definition, so that
    // config.json and every checkpoint hold it and the run needs the file no more. "" for a
    // built-in model. JSON "modelDefinition": the definition's object; absent: "".
    std::string modelDefinition;
    // The classifier's outputs: the dataset's class count, set when the run is built
    // (TrainingSession). 0: the model's default (ModelInfo::numClasses), as in a run from before
    // it was recorded.
    int classes = 0;
    std::string backend = "onednn"; // "onednn", "reference" or "cuda"
    int towers = 1;                 // towers of each process
    // Processes training together (mpirun / srun, one rank each; 1 = this process alone). The
    // global towers are processes x towers, numbered rank by rank; the global batch is
    // processes x towers x batchPerTower. Set from the launcher, recorded in config.json.
    int processes = 1;
    std::vector<int> gpus;  // "cuda": each tower's GPU; empty = tower t on GPU t mod count
    bool allowTf32 = false; // "cuda": TF32 tensor cores for float32
    // "cuda": each convolution's algorithm is the fastest that cuDNN measures (as
    // torch.backends.cudnn.benchmark); timing noise may make another process choose another, so
    // a run no longer repeats bitwise. False: the first of cuDNN's heuristics that the rules allow,
    // the same in every process. Absent (a run from before it): false.
    bool cudnnBenchmark = false;
    // Convolutions and matrix products in bfloat16 with float32 accumulation (precision.h):
    // "onednn" on a CPU with AVX512_BF16 or AMX. The master weights, the optimizer state, the loss
    // and the checkpoints stay float32, so a resumed run may change it. JSON: "fp32" or "bf16";
    // absent (a run from before it): fp32.
    Precision precision = Precision::Float32;
    std::string allreduce = "auto"; // "cuda": "auto" (NCCL / on the GPU where possible) or "host"
    // "cuda": "auto" keeps the training set on the GPUs as bytes when it fits (a quarter of each
    // GPU's free memory at most) and runs the recipe's distortions there (the same images as the
    // host's pipeline); "off" preprocesses on the host and copies the batches.
    std::string gpuData = "auto";
    // "cuda": the GPU towers' steps are captured as CUDA graphs once warm and replayed
    // (TowerSetOptions::graphs); false issues them op by op. The results are bitwise the same
    // either way, so a resumed run may change it and the processes of a run need not agree.
    // Absent (a run from before it): true.
    bool cudaGraphs = true;
    // MiB of gradients per bucket, averaged while backward runs (0 = one collective after
    // backward); the first bucket holds 1 MiB. Bitwise the same results whatever the size.
    double bucketMb = 25;
    int threadsPerTower = 1; // OpenMP threads per tower; 0 = the cores shared out
    int batchPerTower = 128; // the global batch is towers * batchPerTower * accumulate
    // Gradient accumulation (DIGITS' batch accumulation, Lightning's accumulate_grad_batches):
    // each tower runs this many batches of batchPerTower per step, one after the other, and the
    // step updates with the gradients of all of them, so a step takes towers * batchPerTower *
    // accumulate examples while each tower holds the layer outputs of batchPerTower only
    // (TowerSetOptions::accumulate). JSON "accumulate"; absent (a run from before it): 1.
    int accumulate = 1;
    std::int64_t steps = 0; // total global steps; 0 = from `epochs`
    double epochs = 0;      // used when steps = 0: ceil(epochs * steps per epoch)

    OptimizerOptions optimizer; // JSON: "optimizer": {"kind": "momentum", "momentum": 0.9}
    LrSchedule schedule;        // JSON: "lr" (schedule.lr) and "schedule": {"kind": ...}
    double weightDecay = -1;    // >= 0 replaces the conv/linear weights' coefficient
    double emaDecay = 0;        // 0 = off; the tutorial's 0.9999
    double labelSmoothing = 0;  // the training loss's, in [0, 1); 0 = none
    double clipGradNorm = 0;    // > 0: the gradients' global norm clipped to it; 0 = none
    bool dropout = true;        // false: dropout layers are the identity
    std::uint64_t seed = 1;     // weights, dropout (the data order has its own seed)

    std::int64_t checkpointEvery = 1000; // steps; 0 = only at the end and on stop
    int keepCheckpoints = 5;
    std::int64_t evalEvery = 0; // steps; 0 = only at the end (when an evaluator is set)
    // The share of each class's training images held out as a validation set (splitValidation,
    // the same images for every run with the same share): the run evaluates on it instead of the
    // test set, and its best checkpoint is the best on it. 0 = none: the run evaluates on the test
    // set. At most 0.5. JSON "validation"; absent (a run from before it): 0.
    double validation = 0;
    // Stops the run early (Trainer::Outcome::StoppedEarly) once this many evaluations in a row
    // were no better than the best before them (Keras' EarlyStopping patience); 0 = never. Needs
    // evalEvery > 0. JSON "patience"; absent: 0.
    int patience = 0;
    // What an evaluation must gain on the best before it to count as better, for patience: a
    // share of precision @ 1 (0.002 = 0.2 points), as Keras' EarlyStopping min_delta; at most
    // kMaxMinDelta. The best checkpoint is still the highest. JSON "minDelta"; absent: 0.
    double minDelta = 0;
    int evalBatchSize = 0;      // 0 = batchPerTower
    std::int64_t logEvery = 10; // steps between metrics (and log lines)
    // Steps between TensorBoard histograms of every layer's weights and gradients (as the
    // tutorial's tf.summary.histogram); 0 = none.
    std::int64_t histogramEvery = 100;
    // Steps between bitwise checks that the replicas are identical (an Error if not); 0 = never.
    // Debug builds check every 100 steps by default.
#ifdef NDEBUG
    std::int64_t verifyEvery = 0;
#else
    std::int64_t verifyEvery = 100;
#endif

    // What the CLI or GUI reports about the data; carried into the checkpoints' metadata.
    std::string dataset; // e.g. "cifar10"
    std::string dataDir;
    // What the run trains on (engine/data/dataset_content.h: the classes, each set's examples and
    // CRC-32), set when the run is built; a resume refuses a dataset of the same name whose
    // content differs. JSON "datasetContent": the record's object; absent ("": a run from before
    // it was recorded): not checked.
    std::string datasetContent;
    // A new run starts from this checkpoint's weights (fine-tuning) instead of the seed's draw:
    // every tensor of the same model, except the classifier's when the classes differ; "" = none.
    std::string initFrom;
    std::string augmentation; // e.g. "on", "off" or a description
    // The order the training images come in: "uniform" (a fresh permutation of them every epoch)
    // or "balanced" (every class equally often every epoch, a small class's images repeated and a
    // large class's only some of them drawn: LoaderOptions::balanced), for a training set whose
    // classes are far apart in size. Evaluation counts the test set as it is. JSON "sampling";
    // absent (a run from before it): "uniform".
    std::string sampling = "uniform";
    // The run's identity: made when a run starts (Trainer::startNew), kept by resumes, recorded in
    // every checkpoint. Checkpoint rotation removes only checkpoints of this run (never a copied-in
    // one of another run, nor one written before run ids existed).
    std::string runId;

    // Limits of the configuration, the same for the CLI, the GUI and config.json.
    static constexpr int kMaxTowers = 256;
    static constexpr int kMaxProcesses = 65536;
    static constexpr int kMaxThreadsPerTower = 1024;
    static constexpr double kMaxBucketMb = 65536;
    static constexpr int kMaxAccumulate = 4096;
    static constexpr double kMaxEpochs = 1e6;
    // 10^12 steps: a million times a long run, and no sum over them near int64's end (the
    // schedule's plot multiplied steps and overflowed above about 10^16).
    static constexpr std::int64_t kMaxSteps = 1'000'000'000'000;

    // Throws InvalidArgument naming the field ("batchPerTower: must be at least 1, got 0").
    void validate() const;
    // Throws InvalidArgument when towers x threads per tower is more than this machine can start
    // (maxComputeThreads()), naming both and the limit: a thread library that cannot start its
    // threads ends the process rather than reporting it.
    void checkThreadBudget() const;
    // The most compute threads a run may ask for here: 4096, or less where the system's limits
    // (threads-max, RLIMIT_NPROC) are lower.
    static int maxComputeThreads();
    // "" when `backend` runs `precision` on this machine, else why not, in words a user can act on
    // (makeBackendOps' Unsupported message: the CPU's instruction set, or a backend that computes
    // in float32 only; for cuda, from the GPUs' compute capability, without a context on one: no
    // usable GPU, or none of 8.0 or later). Float32 is always "".
    static std::string precisionUnavailable(const std::string& backend, Precision precision);
    // Throws Unsupported with precisionUnavailable()'s reason for this configuration's backend
    // and precision: called before a run folder is made, so that nothing is half-created.
    void checkPrecision() const;
    // The examples each tower takes per step: batchPerTower * accumulate.
    std::int64_t examplesPerTowerStep() const
    {
        return std::int64_t(batchPerTower) * accumulate;
    }
    // The number of steps of the run for a source of `stepsPerEpoch` steps per epoch.
    std::int64_t totalSteps(std::int64_t stepsPerEpoch) const;
    // The threads each tower gets once 0 ("share the cores") is resolved: the cores this process
    // may use (cpu::usableCores(): its affinity mask, its control group's quota) shared out among
    // the towers of the `processesSharingCores` processes of a run that run on those cores
    // (cpu::processesSharingCores: 1 where a launcher bound each process to cores of its own).
    int resolvedThreadsPerTower(int processesSharingCores = 1) const;

    std::string toJson() const; // pretty-printed, every field
    // Reads a JSON object; absent fields keep their defaults, unknown fields and wrong types
    // throw InvalidArgument naming the field. The result is validated.
    static TrainConfig fromJson(const std::string& json);
};

} // namespace towers::engine
