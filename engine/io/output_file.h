#pragma once
// A file the user asked for (an ONNX export, a model file) written whole or not at all: into a
// temporary file in the target's folder, fsync'ed, then renamed over the target, so that a full
// disk or a crash leaves either the old file or the new one, never half of one, and no temporary
// file behind.
#include <filesystem>
#include <string>

namespace towers::engine {

// Writes `bytes` to `target` (mode 0644) as above. An existing `target` is refused unless
// `overwrite`: the rename itself refuses it (RENAME_NOREPLACE, else link), so a file that appears
// meanwhile is not replaced either. Throws IoError naming the file and the failing step.
void writeOutputFile(const std::filesystem::path& target, const std::string& bytes, bool overwrite);

// Refuses early what writeOutputFile would refuse at the end: an existing `target` (unless
// `overwrite`) or a folder. IoError as writeOutputFile's.
void checkOutputFile(const std::filesystem::path& target, bool overwrite);

// "'out.onnx' already exists; choose another output or pass --force to replace it".
std::string outputExistsMessage(const std::filesystem::path& target);

} // namespace towers::engine
