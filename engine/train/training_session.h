#pragma once
// One training job from a TrainConfig: finds and loads the dataset, builds the preprocessing
// recipe, the batch loader, the trainer and its evaluator on the test set, and resumes when asked.
// The one glue object behind `towers-cli train` and the GUI's training worker.
#include <filesystem>
#include <memory>
#include <stop_token>
#include <vector>

#include "engine/data/batch_loader.h"
#include "engine/data/dataset.h"
#include "engine/train/trainer.h"

namespace towers::engine {

struct SessionOptions
{
    // The run's configuration. config.dataset names the dataset; config.augmentation is
    // "default" (the model's recipe, see recipe.h) or "none" (exact, augmentation-free runs).
    TrainConfig config;
    // Where to look for the dataset (defaultSearchPath()); a folder for it in config.dataDir, when
    // that is set, is loaded in preference (see loadDatasetPreferring).
    std::vector<std::filesystem::path> searchPath;
    std::filesystem::path runDirectory;
    // Continue from the run directory's newest good checkpoint (from the start when there is
    // none, which is logged).
    bool resume = false;
    int loaderWorkers = 1;
    // When set, the session trains on this dataset instead of loading one: it must be
    // config.dataset (InvalidArgument otherwise). The desktop application passes what its Data
    // page already holds, so the images are in memory once.
    std::shared_ptr<const Dataset> dataset;
};

class TrainingSession
{
public:
    // Loads and validates everything; throws IoError (dataset not found or damaged, run folder not
    // writable), InvalidArgument (a model that cannot take the dataset's images, a bad
    // configuration) with messages that say what and where. `observer` may be null and must
    // outlive the session.
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
    SessionOptions m_options;
    std::shared_ptr<const Dataset> m_dataset;
    Preprocessing m_recipe;
    std::unique_ptr<BatchLoader> m_loader;
    std::unique_ptr<Trainer> m_trainer;
    std::int64_t m_startStep = 0;
};

} // namespace towers::engine
