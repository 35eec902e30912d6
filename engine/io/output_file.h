#pragma once
// A file the user asked for (an ONNX export, a model file) written whole or not at all: into a
// temporary file in the target's folder, fsync'ed, then renamed over the target, so that a full
// disk or a crash leaves either the old file or the new one, never half of one, and no temporary
// file behind.
#include <filesystem>
#include <string>

namespace towers::engine {

// Writes `bytes` to `target` (a replaced file's mode, else 0666 less the umask) as above. An
// existing `target` is refused unless `overwrite`: the rename itself refuses it
// (RENAME_NOREPLACE, else link), so a file that appears meanwhile is not replaced either. Throws
// IoError naming the file and the failing step.
void writeOutputFile(const std::filesystem::path& target, const std::string& bytes, bool overwrite);

// Refuses early what writeOutputFile would refuse at the end: a folder, a checkpoint's name
// (isCheckpointName), an existing `target`
// (unless `overwrite`), and, even with `overwrite`, a file that neverReplaced names. IoError as
// writeOutputFile's. writeOutputFile checks so too.
void checkOutputFile(const std::filesystem::path& target, bool overwrite);

// Why `target` is a file that no output replaces, --force or not; empty where none: a checkpoint
// (a safetensors file by its content, whatever its name: a run's weights and optimizer state),
// or a run's own record (config.json, metrics.jsonl, eval.jsonl, failure.json, towers.lock, its
// TensorBoard events) in a run's folder. A link is never followed: it is replaced as a link.
std::string neverReplaced(const std::filesystem::path& target);

// Whether `path` is named as a checkpoint is (.safetensors, in any case), which no other output
// may be named: runs and eval would take it for one.
bool isCheckpointName(const std::filesystem::path& path);

// "'out.onnx' already exists; choose another output or pass --force to replace it".
std::string outputExistsMessage(const std::filesystem::path& target);

} // namespace towers::engine
