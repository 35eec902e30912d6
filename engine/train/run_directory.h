#pragma once
// The folder of one training run, shared by the GUI and towers-cli:
//   config.json                        the run configuration
//   metrics.jsonl                      one JSON object per logged step
//   eval.jsonl                         one JSON object per evaluation
//   checkpoints/ckpt-<step>.safetensors  the step zero-padded to 8 digits; the last K of this run
//   kept towers.lock                        who trains in it now (run_lock.h) set-aside/<time>/ an
//   earlier run's files, moved there by --overwrite/--restart
//                                      or a resume that could not load them; never deleted
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "engine/errors.h"
#include "engine/models/model.h"

namespace towers::engine {

// A new run was to start in a folder that holds one (config.json, logs, checkpoints); the message
// lists what it holds. Nothing was touched.
class TOWERS_VISIBLE RunFolderHoldsRun : public InvalidArgument
{
public:
    using InvalidArgument::InvalidArgument;
};

// A resume found checkpoints but could load none of them; the message lists each file and why.
// Nothing was touched.
class TOWERS_VISIBLE NoCheckpointLoads : public IoError
{
public:
    using IoError::IoError;
};

struct VerifiedCheckpoint;

struct CheckpointFile
{
    std::int64_t step = 0;
    std::filesystem::path path;
};

// One evaluation as eval.jsonl records it: the step and its precision @ 1 (on the test set, or on
// the validation set of a run that holds one out: TrainConfig::validation).
struct EvaluationMark
{
    std::int64_t step = 0;
    double precisionAt1 = 0;
    // Precision @ 5, where the record has it (a run of more than 10 classes, since 2026-12-03).
    std::optional<double> precisionAt5 = std::nullopt;
};

// `records` in the order they were made, reduced to one per step (a step evaluated more than once
// keeps its last), in step order.
std::vector<EvaluationMark> latestByStep(const std::vector<EvaluationMark>& records);

// The evaluations recorded in `evalFile` (eval.jsonl), by step (latestByStep). Lines that do not
// parse (a partial last line a kill left) are skipped; a missing file gives none. Reads only; never
// throws.
std::vector<EvaluationMark> readEvaluations(const std::filesystem::path& evalFile) noexcept;

// The run's best checkpoint: of `checkpoints`, the one whose step's evaluation has the highest
// precision @ 1 (the earliest of equals). nullopt when no checkpoint's step was evaluated.
struct BestCheckpoint
{
    CheckpointFile file;
    double precisionAt1 = 0;
};
std::optional<BestCheckpoint> bestCheckpoint(const std::vector<CheckpointFile>& checkpoints,
                                             const std::vector<EvaluationMark>& evaluations);
// The highest precision @ 1 of `evaluations` (the earliest of equals); nullopt when there are none.
std::optional<EvaluationMark> bestEvaluation(const std::vector<EvaluationMark>& evaluations);
// The evaluations in a row, at the end of `evaluations` (by step), that were no better than the
// best before them, which TrainConfig::patience counts: as Keras' EarlyStopping, an evaluation is
// better when it beats the best so far by more than `minDelta` (TrainConfig::minDelta), and only
// a better one becomes the best that the next are measured against. With minDelta 0, those after
// bestEvaluation. 0 when there are none.
int evaluationsSinceBest(const std::vector<EvaluationMark>& evaluations, double minDelta = 0);
// That count, one evaluation at a time (the trainer's, as its evaluations come).
struct PatienceCount
{
    std::optional<double> best; // the precision @ 1 of the last better evaluation
    int since = 0;              // the evaluations after it
    void add(double precisionAt1, double minDelta);
};
// The count over `evaluations` (by step); evaluationsSinceBest is its `since`.
PatienceCount patienceCount(const std::vector<EvaluationMark>& evaluations, double minDelta);

// Makes a new, empty folder at `proposed`, or when that name is taken at "<proposed>-2", "-3", ...
// with a mkdir that fails when the folder exists, so two runs started at the same moment never
// get one folder. Creates the parent folders. Returns the folder made; IoError naming it when it
// cannot be made.
std::filesystem::path createNewFolder(const std::filesystem::path& proposed);

class RunDirectory
{
public:
    // Creates `root` and root/checkpoints when missing; IoError naming the folder if it cannot.
    explicit RunDirectory(std::filesystem::path root);

    const std::filesystem::path& root() const { return m_root; }
    std::filesystem::path configPath() const { return m_root / "config.json"; }
    std::filesystem::path metricsPath() const { return m_root / "metrics.jsonl"; }
    std::filesystem::path evalPath() const { return m_root / "eval.jsonl"; }
    // failure.json: how the run's last training ended in an error, while nothing has trained it
    // since ({"step": N, "error": "..."}).
    std::filesystem::path failurePath() const { return m_root / "failure.json"; }
    std::filesystem::path checkpointDir() const { return m_root / "checkpoints"; }
    // checkpoints/ckpt-00001000.safetensors
    std::filesystem::path checkpointPath(std::int64_t step) const;

    // Writes config.json atomically (temporary file, fsync, rename).
    void writeConfig(const std::string& json) const;
    // config.json's text, or nullopt when there is none. IoError naming it when it is there but
    // not a plain file (a FIFO, a device, a folder), as for each file below.
    std::optional<std::string> readConfig() const;
    // Records that training failed at `step` with `error` (written atomically), so that the run
    // is shown as failed, and why, rather than as one to resume; clearFailure when it trains again.
    void writeFailure(std::int64_t step, const std::string& error) const;
    void clearFailure() const;
    // Appends one line (a JSON object without newline) to metrics.jsonl / eval.jsonl.
    void appendMetrics(const std::string& jsonLine) const;
    void appendEval(const std::string& jsonLine) const;
    // Drops the records of metrics.jsonl and eval.jsonl whose "step" is > step (a run resumed at
    // `step` logs the later steps again) and a partial last line a kill left behind; every other
    // line stays, one that is not a record too.
    void truncateLogs(std::int64_t step) const;

    // The checkpoint files (names ckpt-<digits>.safetensors), oldest step first. Files are not
    // opened.
    std::vector<CheckpointFile> checkpoints() const;
    // What of a run the folder holds, for messages: "config.json", "metrics.jsonl", "eval.jsonl",
    // "3 checkpoints, steps 100 to 300"; empty when it holds none (a new or empty folder).
    std::vector<std::string> runContents() const;
    bool holdsRun() const { return !runContents().empty(); }
    // Moves the run's files (config.json, the logs, checkpoints/, TensorBoard event files) into a
    // new folder set-aside/<yyyyMMdd-HHmmss>[-n]/ of the run and returns it; nothing is deleted.
    // IoError naming the file when a move fails.
    std::filesystem::path setAside() const;
    // Moves `files` (checkpoints of this run) into a new set-aside/<...>/checkpoints/ and returns
    // that folder.
    std::filesystem::path
    setAsideCheckpoints(const std::vector<std::filesystem::path>& files) const;
    // Deletes one checkpoint file (rotation); IoError naming it on failure.
    void removeCheckpoint(const std::filesystem::path& file) const;
    // Deletes the temporary files of checkpoint writes that were killed before their rename.
    void removeStaleTemporaries() const;
    // The newest checkpoint that reads (verifyCheckpoint: intact, checksum right), when `model`
    // is given fits it (validateCheckpoint's checks), and when `runId` is given is that run's (a
    // checkpoint that records another run's id was copied in from elsewhere: continuing from it
    // would mix the two runs); files that fail are skipped, and why appended to `skipped` when
    // given. nullopt when no file qualifies. `verified`, where given, gets what verifyCheckpoint
    // found the one returned to be (a resume reads it again against that).
    std::optional<CheckpointFile>
    newestGoodCheckpoint(const Model* model = nullptr, std::vector<std::string>* skipped = nullptr,
                         const std::string& runId = {},
                         VerifiedCheckpoint* verified = nullptr) const;

private:
    void appendLine(const std::filesystem::path& file, const std::string& line) const;
    std::filesystem::path m_root;
};

} // namespace towers::engine
