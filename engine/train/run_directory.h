#pragma once
// The folder of one training run, shared by the GUI and towers-cli:
//   config.json                        the run configuration
//   metrics.jsonl                      one JSON object per logged step
//   eval.jsonl                         one JSON object per evaluation
//   checkpoints/ckpt-<step>.safetensors  the step zero-padded to 8 digits; the last K kept
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "engine/models/model.h"

namespace towers::engine {

struct CheckpointFile
{
    std::int64_t step = 0;
    std::filesystem::path path;
};

class RunDirectory
{
public:
    // Creates `root` and root/checkpoints when missing; IoError naming the folder if it cannot.
    explicit RunDirectory(std::filesystem::path root);

    const std::filesystem::path& root() const { return m_root; }
    std::filesystem::path configPath() const { return m_root / "config.json"; }
    std::filesystem::path metricsPath() const { return m_root / "metrics.jsonl"; }
    std::filesystem::path evalPath() const { return m_root / "eval.jsonl"; }
    std::filesystem::path checkpointDir() const { return m_root / "checkpoints"; }
    // checkpoints/ckpt-00001000.safetensors
    std::filesystem::path checkpointPath(std::int64_t step) const;

    // Writes config.json atomically (temporary file, fsync, rename).
    void writeConfig(const std::string& json) const;
    // config.json's text, or nullopt when there is none.
    std::optional<std::string> readConfig() const;
    // Appends one line (a JSON object without newline) to metrics.jsonl / eval.jsonl.
    void appendMetrics(const std::string& jsonLine) const;
    void appendEval(const std::string& jsonLine) const;
    // Keeps only the lines of metrics.jsonl and eval.jsonl whose "step" is <= step (a run resumed
    // at `step` logs the later steps again), and drops a partial last line a kill left behind.
    void truncateLogs(std::int64_t step) const;

    // The checkpoint files (names ckpt-<digits>.safetensors), oldest step first. Files are not
    // opened.
    std::vector<CheckpointFile> checkpoints() const;
    // Deletes all but the newest `keep` (>= 1) checkpoints.
    void pruneCheckpoints(int keep) const;
    // Deletes the checkpoints of steps after `step`; returns their paths.
    std::vector<std::filesystem::path> removeCheckpointsAfter(std::int64_t step) const;
    // Deletes the temporary files of checkpoint writes that were killed before their rename.
    void removeStaleTemporaries() const;
    // The newest checkpoint that reads (readCheckpoint: intact, checksum right) and, when `model`
    // is given, fits it (validateCheckpoint); files that fail are skipped, and their errors
    // appended to `skipped` when given. nullopt when no file qualifies.
    std::optional<CheckpointFile> newestGoodCheckpoint(const Model* model = nullptr,
                                                       std::vector<std::string>* skipped = nullptr) const;

private:
    void appendLine(const std::filesystem::path& file, const std::string& line) const;
    std::filesystem::path m_root;
};

} // namespace towers::engine
