#pragma once
// Tower-replicated synchronous training: the loop of the tutorial's cifar10_multi_gpu_train on
// a TowerSet, with the learning-rate schedule, moving averages, metrics, periodic evaluation,
// checkpoints in a run directory, resume, pause and stop. Drives from a GUI worker thread or the
// CLI: run() blocks; pause(), resume() and requestStop() are thread-safe and act within a step.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <vector>

#include "engine/data/batch_source.h"
#include "engine/data/dataset_spec.h"
#include "engine/train/evaluation.h"
#include "engine/train/run_directory.h"
#include "engine/train/run_lock.h"
#include "engine/train/tower_set.h"
#include "engine/train/train_config.h"
#include "engine/train/trainer_observer.h"

namespace towers::engine {

class TensorBoardWriter;

// What checkpoints say about the data, for evaluation and inference later.
struct DataDescription
{
    std::vector<std::string> classNames; // index = label
    std::string preprocessing;           // the recipe as JSON (Preprocessing::toJson)
    Shape imageShape;                    // [H, W, C] of the dataset's images (may be empty)
    ImageFit imageFit = ImageFit::Crop;  // how image files became them (Dataset::imageFit)
};

// The towers' options a configuration asks for (model, devices, optimizer, precision, seed...);
// the trainer builds its towers from them, and so does the learning-rate range test.
// `processesSharingCores`: the run's processes on this process's cores, this one included, among
// which 0 threads per tower shares the cores out (TrainConfig::resolvedThreadsPerTower).
TowerSetOptions towerSetOptionsFor(const TrainConfig& config, ProcessGroup* processes = nullptr,
                                   int processesSharingCores = 1);

// The weights a run started from a checkpoint (TrainConfig::initFrom) begins with: the
// checkpoint's, its moving averages where it has them, except the classifier when the classes
// differ (`model`'s own draw then); `note` says so for the log. InvalidArgument naming the file
// and the tensor when the checkpoint is another model's or does not fit; Error saying so where
// memory runs out (the file is read a tensor at a time, the weights taken held). IoError as
// verifyCheckpoint's.
struct StartingWeights
{
    NamedTensors weights;
    std::string note;
};
StartingWeights startingWeights(const std::filesystem::path& file, const Model& model,
                                const std::vector<std::string>& classNames,
                                const Shape& imageShape);

class Trainer
{
public:
    enum class Outcome
    {
        Finished,
        Stopped,
        // TrainConfig::patience ran out: the last evaluations were no better than the best
        // (observer->onFinished; a resume of it stops again at once unless the patience grows).
        StoppedEarly
    };

    // Validates the configuration (InvalidArgument naming the field), takes the run directory's
    // lock (RunFolderBusy naming the holder when another process trains in it; held until the
    // trainer is destroyed), creates the directory and builds the towers (threads, replicas
    // initialised from config.seed). `source` must yield batches split for config.towers towers
    // of config.batchPerTower examples; it and `observer` (may be null) must outlive the trainer.
    //
    // With `processes` (a run across processes: config.processes must be its size, `source` this
    // process's share of the batches), every process constructs its trainer and makes the same
    // calls; they are collective. Rank 0 alone takes the lock and writes the run directory, the
    // logs, the events and the checkpoints, and decides how the run starts (startNew,
    // resumeFromNewest), sending the state it restored to the others; the other ranks write
    // nothing. Every process checks first that all run the same build and configuration
    // (InvalidArgument naming the rank that differs). A stop on any process stops all after the
    // same step.
    //
    // `towerOptions`, when set, adjusts the towers' options made from the configuration before
    // they are built (tests and tools: a stand-in device's ops and communicator).
    Trainer(TrainConfig config, BatchSource& source, std::filesystem::path runDirectory,
            DataDescription data = {}, TrainerObserver* observer = nullptr,
            ProcessGroup* processes = nullptr,
            const std::function<void(TowerSetOptions&)>& towerOptions = {});
    ~Trainer();
    Trainer(const Trainer&) = delete;
    Trainer& operator=(const Trainer&) = delete;

    // Evaluates on `count` examples every config.evalEvery steps and at the end of the run
    // (results to the observer and eval.jsonl), with the moving averages when EMA is on. `set`
    // names them in the log, eval.jsonl and EvalResult::set: "test" or "validation".
    void setEvaluator(std::int64_t count, EvalBatchFn batches, std::string set = "test");

    // Before run(), when `source` delivers draws (LoaderOptions::drawsOnly): the towers hold
    // `set` where they compute and preprocess it themselves (TowerSet::holdTrainingSet); the run's
    // first log line says where. `set` must outlive the trainer. DeviceOutOfMemory when a GPU has
    // no room for it.
    void holdTrainingSet(const ImageSet& set, const Preprocessing& recipe);
    // A note on where the training images are made, for that line, when the towers do not hold
    // the set ("the training set stays on the host: ...").
    void setDataNote(std::string note) { m_dataNote = std::move(note); }

    // Before run(): restores weights, buffers, moving averages, optimizer state and the step from
    // a checkpoint (the data order and learning rate follow from the step). Throws IoError /
    // InvalidArgument naming the file and the tensor when it does not fit. Returns the step.
    // `verified`: what verifyCheckpoint found it to be against this run's model, where it was
    // checked already (newestGoodCheckpoint), so that it is read once more, not twice.
    std::int64_t restore(const std::filesystem::path& checkpoint,
                         const VerifiedCheckpoint* verified = nullptr);
    // Before run(), one of these says how the run starts (run() alone means startNew(false)):
    //
    // A new run (a new run id). When the folder already holds a run: RunFolderHoldsRun listing
    // what it holds, or with setAsideExisting, its files are moved to set-aside/ (never deleted).
    void startNew(bool setAsideExisting = false);
    // Continues the run: restore() from the newest checkpoint that loads (newer ones that do not
    // are moved to set-aside/ when run() starts, never deleted). No checkpoint at all: nullopt,
    // and the run starts at step 0. Checkpoints that all fail to load: NoCheckpointLoads listing
    // each file and why, or with setAsideUnloadable, the run's files are moved to set-aside/ and
    // the run starts over at step 0 (nullopt).
    std::optional<std::int64_t> resumeFromNewest(bool setAsideUnloadable = false);

    // Trains until the configured number of steps or a stop (from `stop` or requestStop()), which
    // writes a checkpoint first; a stop during an evaluation ends it at once (the checkpoint of the
    // step is written before evaluating). Blocks. Starting, it writes config.json, drops the
    // logged steps beyond the starting step and moves checkpoints beyond it (newer ones that did
    // not load) to set-aside/. Throws what failed (after observer->onFailed), e.g.
    // DivergedError "model diverged with loss = NaN at step 12" (or "...: its gradients are NaN
    // or infinite") before the update of that step, without writing a checkpoint of the diverged
    // state. Can be called once.
    Outcome run(std::stop_token stop = {});

    // Thread-safe; take effect between steps.
    void pause();
    void resume();
    void requestStop();
    bool isPaused() const { return m_pauseRequested.load(); }

    // Global steps done (thread-safe) and the run's length.
    std::int64_t step() const { return m_step.load(); }
    std::int64_t totalSteps() const { return m_total; }
    std::int64_t stepsPerEpoch() const { return m_stepsPerEpoch; }

    // Evaluates now on `count` examples (not while run() is stepping; from an observer's
    // onCheckpoint or onEvaluation is fine; from onStep, GPU towers may have the next step in
    // flight: InvalidArgument). useEma defaults to "when EMA is on".
    EvalResult evaluate(std::int64_t count, const EvalBatchFn& batches,
                        std::optional<bool> useEma = std::nullopt);
    // Writes the checkpoint of the current step into the run directory now, reads it back
    // (IoError when it does not load), then removes this run's checkpoints beyond the newest
    // config.keepCheckpoints: only ones of this run id that read, never another run's or an
    // unreadable file, nor the run's best (the checkpoint of its best evaluation so far, kept
    // besides the newest keepCheckpoints). Returns its path.
    std::filesystem::path writeCheckpoint();
    // Throws Error if the replicas are not bitwise identical (weights, buffers, optimizer state).
    void verifyReplicas() { m_towers->verifyReplicas(); }

    const TrainConfig& config() const { return m_config; }
    // The TensorBoard events file run() writes (tensorboard_writer.h); empty before run().
    std::filesystem::path eventsFile() const;
    TowerSet& towers() { return *m_towers; }
    // Rank 0's (and a run's in one process); InvalidArgument on the other ranks, which write none.
    RunDirectory& runDirectory();
    // Whether this process writes the run directory (rank 0, or the only process).
    bool writesRun() const { return m_dir.has_value(); }

private:
    // restore()'s work; out of memory (std::bad_alloc) is said by restore().
    std::int64_t restoreFrom(const std::filesystem::path& checkpoint,
                             const VerifiedCheckpoint* verified);
    bool stopRequested(const std::stop_token& stop) const;
    // Returns false when a stop arrived while paused.
    bool waitWhilePaused(const std::stop_token& stop);
    StepMetrics metricsOf(std::int64_t done, const TowerStepResult& r, double lr, double stepMs,
                          double waitMs) const;
    void report(const StepMetrics& m);
    void beginNewRun(bool setAsideExisting);
    // Moves the run folder's run aside (RunDirectory::setAside), and initFrom with it where it
    // named one of its checkpoints; returns where it went.
    std::filesystem::path setAsideRun();
    // A new run's start on every process: the folder (rank 0), the weights of
    // TrainConfig::initFrom (rank 0, sent to the others), the shared start.
    void startFresh(bool setAsideExisting);
    // Sets every tower's weights from the checkpoint `file` (TrainConfig::initFrom): its moving
    // averages where it has them, else its raw weights; the classifier keeps its fresh draw when
    // the checkpoint's classes are not this dataset's. InvalidArgument naming the file and what
    // does not fit (another model, another image shape).
    void initialiseFrom(const std::filesystem::path& file);
    std::optional<std::int64_t> resumeHere(bool setAsideUnloadable);
    // Across processes: rank 0 sends how the run starts (and the state it restored); the others
    // take it.
    void shareStart();
    // The stop decision of this step: any process's, on every process.
    bool stopVote(const std::stop_token& stop);
    // false when a stop ended it part-way (nothing is recorded then).
    bool runEvaluation(const std::stop_token& stop);
    // run()'s parts, in order. The run folder made ready to continue from step `from`: its
    // configuration written, its logs cut back to `from`, its checkpoints beyond it set aside.
    void prepareRunFolder(std::int64_t from);
    // TensorBoard: this run()'s events file, from `eventsStart` (after a resumed step S: S + 1).
    void startEvents(std::int64_t from, std::int64_t eventsStart);
    // The line that says what trains where, and a note where the threads outnumber the cores.
    void logStart();
    // A resumed run's evaluation at its starting step: one that was recorded is not made again
    // (a finished run resumed); one that a stop cut short (the checkpoint at its step is written
    // first) is made now, so that the curves, the best checkpoint and the patience miss no
    // evaluation. Rank 0's eval.jsonl decides for every process. false when a stop ended it.
    bool evaluateAtResume(std::int64_t from, const std::stop_token& stop);
    // The steps up to the end, a stop or an early stop; `graphs` is how the steps are issued, as
    // logged (a change is logged again).
    Outcome trainSteps(const std::stop_token& stop, std::int64_t eventsStart, std::string graphs);
    // A stop: the checkpoint of the last step done, said to the observer.
    Outcome stopped();
    // The run reached its end, or stopped early: the same close for both.
    Outcome ended(Outcome outcome);
    // An error that ends run(), `e` being handled: recorded in the events file and the run folder
    // (where runs shows it) and said to the observer, then thrown on (std::bad_alloc as an Error
    // that says what to do; any other as it is). Called only from run()'s handler.
    [[noreturn]] void failed(const std::exception& e);
    // Whether TrainConfig::patience has run out: rank 0's count of the evaluations since the best
    // (read from eval.jsonl once with the best, then kept), on every process; `why` gets rank 0's
    // reason ("the last 3 evaluations were no better than ...").
    bool patienceRanOut(std::string& why);
    void log(const std::string& line);
    // Whether `file` is a checkpoint of this run that may be rotated away.
    bool rotatable(const std::filesystem::path& file);
    void rotateCheckpoints(std::int64_t newest);
    // The run's best evaluation so far (eval.jsonl's highest precision @ 1, read once, with
    // m_patience), whose checkpoint rotation keeps; nullopt before the first, and on the ranks
    // that write no run.
    const std::optional<EvaluationMark>& bestEvaluationSoFar();

    enum class Start
    {
        Unset,
        New,
        Resumed
    };

    TrainConfig m_config;
    BatchSource& m_source;
    ProcessGroup* m_group;
    std::optional<RunLock> m_lock;     // before m_dir: nothing is written before the lock is held
    std::optional<RunDirectory> m_dir; // rank 0's only
    DataDescription m_data;
    TrainerObserver* m_observer;
    std::unique_ptr<TowerSet> m_towers;
    int m_coreSharers = 1; // the run's processes on this process's cores, this one included
    std::int64_t m_stepsPerEpoch = 1, m_total = 1;
    std::atomic<std::int64_t> m_step{0};
    std::int64_t m_lastCheckpointStep = -1;
    std::int64_t m_lastEvalStep = -1;
    std::optional<EvaluationMark> m_best; // bestEvaluationSoFar()
    // What TrainConfig::patience counts (evaluationsSinceBest with TrainConfig::minDelta), kept
    // with m_best.
    PatienceCount m_patience;
    bool m_bestRead = false;
    // Pace of this run() for the ETA: when it started, at which step, and time spent paused.
    std::chrono::steady_clock::time_point m_runStart{};
    std::int64_t m_runStartStep = 0;
    double m_pausedSeconds = 0;
    bool m_ran = false;
    Start m_start = Start::Unset;
    bool m_initialised = false; // the weights came from TrainConfig::initFrom (rank 0)
    std::map<std::filesystem::path, bool> m_rotatable; // what rotatable() found, per file
    std::unique_ptr<TensorBoardWriter> m_events;       // made by run(), one file per run()
    std::int64_t m_evalCount = 0;
    EvalBatchFn m_evalBatches;
    std::string m_evalSet = "test";
    bool m_stopEarly = false; // patienceRanOut() after an evaluation
    // The set the towers hold (holdTrainingSet) and its recipe, for TensorBoard's image grid.
    const ImageSet* m_heldSet = nullptr;
    Preprocessing m_heldRecipe;
    std::string m_dataNote;

    std::atomic<bool> m_pauseRequested{false}, m_stopRequested{false};
    std::mutex m_mutex;
    std::condition_variable m_cv;
};

} // namespace towers::engine
