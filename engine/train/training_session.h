#pragma once
// One training job from a TrainConfig: finds and loads the dataset, builds the preprocessing
// recipe, the batch loader, the trainer and its evaluator (on the test set, or on a validation set
// held out of the training images), and resumes when asked.
// The one glue object behind `towers-cli train` and the GUI's training worker.
#include <filesystem>
#include <memory>
#include <stop_token>
#include <vector>

#include "engine/data/batch_loader.h"
#include "engine/data/dataset.h"
#include "engine/data/validation_split.h"
#include "engine/train/trainer.h"

namespace towers::engine {

// The batch loader's options a configuration asks for: this process's towers (its share of the
// global towers of `processes`), the examples each takes a step (batchPerTower x accumulate), the
// seed, the distortions, the sampling, and page-locked batches for GPU towers. The training
// session builds its loader from them, and so does the learning-rate range test.
LoaderOptions loaderOptionsFor(const TrainConfig& config, ProcessGroup* processes = nullptr);

struct SessionOptions
{
    // The run's configuration. config.dataset names the dataset; config.augmentation is
    // "default" (the model's recipe, see recipe.h) or "none" (exact, augmentation-free runs).
    TrainConfig config;
    // Where to look for the dataset (defaultSearchPath()); a folder for it in config.dataDir, when
    // that is set, is loaded in preference (see loadDatasetPreferring).
    std::vector<std::filesystem::path> searchPath;
    std::filesystem::path runDirectory;
    // Continue from the run directory's newest checkpoint that loads (from the start when there
    // is none, which is logged; NoCheckpointLoads when there are checkpoints but none loads).
    // Without it, a new run: RunFolderHoldsRun when the folder already holds one.
    bool resume = false;
    // What to do with the earlier run's files where the above refuses: move them to the run's
    // set-aside/ folder (never deleted) and start a new run at step 0 (--overwrite for a new run,
    // --restart for a resume).
    bool setAside = false;
    // runDirectory is the name proposed for a new run's folder: the session makes it when it
    // starts, with "-2", "-3", ... appended when the name is taken (createNewFolder), and removes
    // it again if it fails to start before writing anything. options().runDirectory is then the
    // folder made.
    bool newFolder = false;
    int loaderWorkers = 1;
    // When set, the session trains on this dataset instead of loading one: it must be
    // config.dataset (InvalidArgument otherwise). The desktop application passes what its Data
    // page already holds, so the images are in memory once.
    std::shared_ptr<const Dataset> dataset;
    // A run across processes (config.processes = its size): every process makes its session with
    // the same options; rank 0 alone makes, locks and writes the run folder (see Trainer), every
    // process loads the dataset from its own disk and checks that it is the same as rank 0's.
    ProcessGroup* processes = nullptr;
};

class TrainingSession
{
public:
    // Loads and validates everything; throws RunFolderBusy (another process trains in the run
    // folder), RunFolderHoldsRun / NoCheckpointLoads (see resume), IoError (dataset not found or
    // damaged, run folder not writable), InvalidArgument (a model that cannot take the dataset's
    // images, a bad configuration), Unsupported (a precision the backend or the CPU cannot run,
    // before any folder is made) with messages that say what and where. `observer` may be null
    // and must outlive the session.
    explicit TrainingSession(SessionOptions options, TrainerObserver* observer = nullptr);
    ~TrainingSession();

    // Trains (see Trainer::run): blocks; throws what failed (DivergedError, IoError, ...).
    Trainer::Outcome run(std::stop_token stop = {});

    Trainer& trainer() { return *m_trainer; }
    const Dataset& dataset() const { return *m_dataset; }
    const Preprocessing& preprocessing() const { return m_recipe; }
    const SessionOptions& options() const { return m_options; }
    // The step training starts from (non-zero after a resume).
    std::int64_t startStep() const { return m_startStep; }

private:
    void build(TrainerObserver* observer);

    SessionOptions m_options;
    std::shared_ptr<const Dataset> m_dataset;
    // The training images and the validation set held out of them (TrainConfig::validation);
    // null without one.
    std::unique_ptr<ValidationSplit> m_split;
    Preprocessing m_recipe;
    std::unique_ptr<BatchLoader> m_loader;
    std::unique_ptr<Trainer> m_trainer;
    std::int64_t m_startStep = 0;
};

} // namespace towers::engine
