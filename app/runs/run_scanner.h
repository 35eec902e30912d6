#pragma once
// Earlier runs in a runs folder, as the Runs & checkpoints page lists them: each sub-folder that
// holds a config.json (the run directory layout of engine/train/run_directory.h), with its
// configuration, how far it got, its latest test accuracy and its checkpoints. Reading is
// tolerant: a damaged config.json or log line is reported in the summary, never thrown, so one bad
// folder does not hide the others.
#include <QDateTime>
#include <QString>
#include <QVector>

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/train/run_directory.h"
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
    double lastLoss = 0;
    double lastEpoch = 0;
    std::optional<double> accuracy; // the latest evaluation's precision @ 1 (eval.jsonl)
    std::int64_t accuracyStep = 0;
    std::vector<engine::CheckpointFile> checkpoints; // oldest first
    QDateTime modified; // newest of config.json, metrics.jsonl and the checkpoints
};

// One run folder. Never throws.
RunSummary readRun(const QString& folder);
// Every run folder directly under `runsDir`, the most recently modified first. Never throws; a
// missing folder gives an empty list.
std::vector<RunSummary> scanRuns(const QString& runsDir);

// The logged curves of a run for its history plot: (step, loss) from metrics.jsonl and (step,
// precision @ 1) from eval.jsonl. Lines that do not parse are skipped.
struct RunCurves
{
    QVector<double> steps, loss, evalSteps, accuracy;
};
RunCurves readRunCurves(const QString& folder);

} // namespace towers::app
