#pragma once
// How a training run is put together, once for both front ends (towers-cli train and the desktop
// application): the new run's folder, which run a resume continues and with what configuration,
// which options may change on resume, and the limits. The run folder's own rules (one owner at a
// time, never deleting what the user has: engine/train/run_lock.h, Trainer::startNew and
// resumeFromNewest) are the engine's and hold for both alike.
#include <QString>
#include <QStringList>

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/train/training_session.h"

namespace towers::app {

// The name of a new run's folder under `runsDir`: <dataset>-<model>-<yyyyMMdd-HHmmss>. The session
// makes it when the run starts, with "-2", "-3", ... appended when the name is taken (two runs
// started in the same second get two folders; engine::createNewFolder).
QString proposedRunFolder(const QString& runsDir, const QString& dataset, const QString& model);

// The most recently modified run folder under `runsDir` (the Runs page's order), or "".
QString newestRun(const QString& runsDir);

// A run folder's config.json. engine::InvalidArgument when `folder` is not a folder or has none
// ("... is not a Towers run folder": the caller named something else); engine::IoError naming the
// file when it cannot be read or does not parse (the run's file is damaged).
engine::TrainConfig readRunConfig(const QString& folder);

// The configuration of a new run like the one in `folder` (DIGITS' "Clone job": the same model,
// dataset, hyperparameters, towers and devices, to change what one will): its config.json less
// what was that run's alone, its id (a new run gets its own) and its process count (the
// launcher's; `processes`, when given, gets the count that run trained on). Throws as
// readRunConfig.
engine::TrainConfig likeRunConfig(const QString& folder, int* processes = nullptr);

// The data folder of the run that wrote `checkpointFile` (config.json's dataDir, where the run
// found its dataset), when the file lies in a run folder's checkpoints/; "" otherwise or when the
// run's configuration cannot be read. Evaluating a checkpoint looks there too.
QString runDataDirOf(const QString& checkpointFile);

// A share as the command line gives it: "0.1" or "10%", from 0 to `most`; nullopt for anything
// else.
std::optional<double> shareOf(const QString& text, double most);
// A validation share (TrainConfig::validation): shareOf up to 0.5 (50%).
std::optional<double> validationShare(const QString& text);

// The run's names for what the command line also spells otherwise: --augment tutorial (or none
// given) is "default", --lr-schedule one-cycle is "onecycle"; any other text as it is.
QString augmentName(const QString& s);
QString scheduleName(const QString& s);

// The command-line options that define a run (its model, data, optimisation, seed): they cannot
// change when it is resumed.
const QStringList& runDefiningOptions();
// "" when `value`, given for the run-defining `option` ("lr", "towers", ...), is the run's own
// value (the same command line plus --resume is accepted, as a requeued job script sends it);
// otherwise a message naming the option, the run's value and the new one.
QString resumeMismatch(const QString& option, const QString& value, const engine::TrainConfig& run);

struct NewRunRequest
{
    engine::TrainConfig config; // complete: model, dataset, towers, hyperparameters
    QString runDir;             // "" = a new folder under runsDir (proposedRunFolder)
    QString runsDir;
    std::vector<std::filesystem::path> searchPath;
    std::shared_ptr<const engine::Dataset> dataset; // already in memory (the GUI's Data page)
    bool overwrite = false; // the folder holds a run: move it to set-aside/ (else refused)
    int loaderWorkers = 1;
};
// Validates the configuration (engine::InvalidArgument naming the field, the thread budget;
// engine::Unsupported saying why when the precision cannot run here); a run with no folder named
// gets a new one when it starts. Touches no file. The session then
// refuses a folder that holds a run unless `overwrite`, and one that another process trains in.
engine::SessionOptions planNewRun(NewRunRequest request);

struct ResumeRequest
{
    QString runDir; // "" = the newest run under runsDir
    QString runsDir;
    std::vector<std::filesystem::path> searchPath;
    bool restart = false; // no checkpoint loads: start over, the old files set aside
    int loaderWorkers = 1;
    // The run's configuration when the caller has read it already (readRunConfig), as the CLI
    // does to compare its options with it; otherwise it is read from runDir.
    std::optional<engine::TrainConfig> config;
    // What may change on resume (the length, logging, checkpoints, the device, the precision),
    // applied to the run's configuration before it is validated.
    std::function<void(engine::TrainConfig&)> changes;
};
// The run's configuration from its config.json with `changes` applied and validated; IoError when
// there is no run to resume, Unsupported when its precision cannot run here (a bf16 run on a CPU
// without bf16: `changes` may set fp32, as checkpoints are float32).
engine::SessionOptions planResume(ResumeRequest request);

// For a resume planned by planResume: when the run folder holds checkpoints and none of them
// loads for the run's model, each file with the reason ("...ckpt-00000300.safetensors: checksum
// mismatch"); empty when one loads or there are none (the session would then start at step 0).
// Lets a front end ask before it sets `setAside` (the CLI's --restart). Never throws.
QStringList unloadableCheckpoints(const engine::SessionOptions& resume);

} // namespace towers::app
