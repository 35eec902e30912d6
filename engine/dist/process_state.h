#pragma once
// What the processes of a run exchange besides gradients: the training state that rank 0 read from
// a checkpoint (no shared file system needed), and the start-up checks that every process runs
// the same build, configuration and data.
#include <string>

#include "engine/dist/process_group.h"
#include "engine/io/safetensors.h"

namespace towers::engine {

// A byte form of named host tensors (names, dtypes, shapes, bytes) and back. unpackTensors throws
// Error when the bytes are not such a form.
std::string packTensors(const NamedTensors& tensors);
NamedTensors unpackTensors(const std::string& bytes);

// Collective: every process passes its own `mine` (the same kind of description on each: a build
// id, a configuration as JSON lines, a dataset's fingerprint); throws InvalidArgument on every
// process when one differs from rank 0's, naming the first rank that differs, `what` and the first
// line where they differ ("rank 1 runs another configuration than rank 0: "towers": 2 there,
// "towers": 1 on rank 0"). `usage`: whether a difference is the command line's (InvalidArgument:
// exit 2), else the data's or the installation's (Error: exit 1).
void requireSameEverywhere(ProcessGroup& group, const std::string& mine, const std::string& what,
                           bool usage = true);

} // namespace towers::engine
