#pragma once
// Earlier runs in a runs folder, as the Runs & checkpoints page lists them: each sub-folder that
// holds a config.json (the run directory layout of engine/train/run_directory.h), with its
// configuration, how far it got, its latest test accuracy and its checkpoints. Reading is
// tolerant: a damaged config.json or log line is reported in the summary, never thrown, so one bad
// folder does not hide the others.
#include <QDateTime>
#include <QString>
#include <QStringList>
#include <QVector>

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/train/run_directory.h"
#include "engine/train/tower_times.h"
#include "engine/train/train_config.h"

namespace towers::app {

struct RunSummary
{
    QString folder;                            // absolute path
    QString name;                              // the folder's name
    QString configJson;                        // config.json as written
    std::optional<engine::TrainConfig> config; // nullopt when config.json does not parse
    QString problem;           // why config.json or the logs could not be read; empty when fine
    std::int64_t lastStep = 0; // the latest logged step (metrics.jsonl), 0 when none
    std::optional<double> lastLoss; // the latest logged record's (nullopt: none read)
    double lastEpoch = 0;
    std::int64_t totalSteps = 0; // the run's length as it logged it (metrics.jsonl); 0 = not logged
    // Its steps per epoch, as that record shows them (step / epoch); 0 when not known.
    std::int64_t stepsPerEpoch = 0;
    // The latest evaluation's precision @ 1 (eval.jsonl), on evaluatedSet().
    std::optional<double> accuracy;
    std::optional<double> accuracyTop5; // its precision @ 5, where it has one (> 10 classes)
    std::int64_t accuracyStep = 0;
    std::vector<engine::CheckpointFile> checkpoints; // oldest first
    // Every evaluation of eval.jsonl by step (the last record of a step), and the checkpoint of
    // the best one that has a checkpoint: what rotation keeps besides the newest.
    std::vector<engine::EvaluationMark> evaluations;
    std::optional<engine::BestCheckpoint> best;
    QDateTime modified; // newest of config.json, metrics.jsonl and the checkpoints
    // Who trains the run right now (RunLock::holder: "process 1234 on host h since ... (towers-cli
    // train)"), or nullopt when nobody holds its lock. This process's own training counts too.
    std::optional<QString> trainingBy;
    // How its last training ended in an error (failure.json: a divergence, a full disk), while
    // nothing has trained it since; nullopt otherwise.
    struct Failure
    {
        std::int64_t step = 0;
        QString error;
    };
    std::optional<Failure> failure;
};

// Whether its last training failed (RunSummary::failure) and nothing trains it now.
bool failed(const RunSummary& run);
// Whether that failure was a divergence ("model diverged ..."): a resume repeats it (the same
// data, the same rate); a new run with a lower learning rate is the way on.
bool diverged(const RunSummary& run);
// Whether a training error is a divergence (engine::DivergedError's "model diverged ...").
bool isDivergence(const QString& error);

// Whether its patience (TrainConfig::patience) ran out before its last step, so that it ended
// there: the evaluations after the best are as many as the patience.
bool stoppedEarly(const RunSummary& run);
// Whether it evaluates on a validation set held out of its training images
// (TrainConfig::validation) rather than on the test set.
bool evaluatesOnValidation(const RunSummary& run);
// The set its evaluations are on: "validation" or "test".
QString evaluatedSet(const RunSummary& run);

// The run's length when known: its configured steps (as its latest start wrote them), else the
// totalSteps it logged (an epochs run's); 0 when neither is known.
std::int64_t runLength(const RunSummary& r);
// Whether it reached its length and made its evaluation there (a stop during that evaluation
// leaves it to a resume, which makes it).
bool finished(const RunSummary& r);

// One run folder. Never throws.
RunSummary readRun(const QString& folder);
// Every run folder directly under `runsDir`, the most recently modified first. Never throws; a
// missing folder gives an empty list (the first run makes it). What could not be looked into goes
// to `problems`, naming the folder and why; an unreadable runs folder listed as "No runs yet".
struct RunsFolderProblems
{
    // The runs folder itself: "cannot read /x/runs: Permission denied", "/x/runs is not a
    // folder"; empty when it could be listed.
    QString folder;
    // Folders in it that cannot be entered, where a run may be: "cannot look into /x/runs/r:
    // Permission denied".
    QStringList inside;
    bool any() const { return !folder.isEmpty() || !inside.isEmpty(); }
};
std::vector<RunSummary> scanRuns(const QString& runsDir, RunsFolderProblems* problems = nullptr);

// The checkpoints of the run in `folder`, oldest first; empty when it has none (or no checkpoints
// folder: nothing is created). Never throws: why they could not be listed goes to `problem`.
std::vector<engine::CheckpointFile> runCheckpoints(const QString& folder,
                                                   QString* problem = nullptr);

// Who holds the lock of the run in `folder` (a process training in it, this one included), or
// nullopt when nobody does. Reads only; never throws.
std::optional<QString> runHolder(const QString& folder);

// The logged curves of a run for its history plot: (step, loss) from metrics.jsonl and (step,
// precision @ 1) and (step, mean cross-entropy) from eval.jsonl, and where the latest logged step's
// time went. Lines that do not parse are skipped.
struct RunCurves
{
    QVector<double> steps, loss, evalSteps, accuracy;
    QVector<double> evalLoss; // each evaluation's mean cross-entropy, beside evalSteps
    // Precision @ 5 of the evaluations that have it (a run of more than 10 classes, since
    // 2026-12-03), with their steps; empty for the others.
    QVector<double> top5Steps, accuracyTop5;
    // The learning rate ("lr") and the gradients' global norm before any clipping ("gradNorm",
    // logged since 2026-12-03, and only for a step whose norm was finite), each with the logged
    // steps that have it: a line without the key (an older run's norm) is no point, rather than a
    // point at 0.
    QVector<double> rateSteps, lr, normSteps, norm;
    std::int64_t totalSteps = 0; // of the last metrics line; 0 when not logged
    double stepMs = 0, examplesPerSec = 0;
    // Each global tower's split of the latest step that logged one ("towerTimes": rank by rank,
    // the towers of rank 0 first), and that step; empty when none did.
    std::vector<engine::TowerTimes> towerTimes;
    std::int64_t towerTimesStep = 0;
};
// Reads the whole logs once (app::RunLogReader follows a growing run).
RunCurves readRunCurves(const QString& folder);
// The curves' evaluations by step, as engine::readEvaluations gives eval.jsonl's (the last of a
// step).
std::vector<engine::EvaluationMark> evaluationsOf(const RunCurves& curves);

} // namespace towers::app
