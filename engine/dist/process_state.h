#pragma once
// What the processes of a run exchange besides gradients: the training state that rank 0 read from
// a checkpoint (no shared file system needed), and the start-up checks that every process runs
// the same build, configuration and data.
#include <string>
#include <vector>

#include "engine/dist/process_group.h"
#include "engine/io/safetensors.h"

namespace towers::engine {

// A byte form of named tensors' names, dtypes and shapes and back (the training state rank 0
// sends, then a tensor at a time). unpackTensorEntries throws Error when the bytes are not such a
// form.
std::string packTensorEntries(const NamedTensors& tensors);
std::vector<SafeTensorEntry> unpackTensorEntries(const std::string& bytes);

// Collective: every process passes its own `mine` (the same kind of description on each: a build
// id, a configuration as JSON lines, a dataset's fingerprint); throws InvalidArgument on every
// process when one differs from rank 0's, naming the first rank that differs, `what` and the first
// line where they differ ("rank 1 runs another configuration than rank 0: "towers": 2 there,
// "towers": 1 on rank 0"). `usage`: whether a difference is the command line's (InvalidArgument:
// exit 2), else the data's or the installation's (Error: exit 1).
void requireSameEverywhere(ProcessGroup& group, const std::string& mine, const std::string& what,
                           bool usage = true);

// "rank 2", "ranks 0 and 2", "ranks 0, 1 and 3": the processes a message names.
std::string rankList(const std::vector<int>& ranks);

// One setting a process was started with, for requireSameSettings: its name as the user knows it
// ("--lr", "the Towers build"), its meaning in one spelling (what is compared: "0.1" for --lr 0.1,
// --lr=0.10 and --lr 1e-1) and how it was given on this process (what a refusal shows).
struct Setting
{
    std::string name, canonical, given;
};

// Collective: every process passes the settings it was started with (in any order); throws
// InvalidArgument on every process when they differ, naming the first setting (in rank 0's
// order, then the others') whose meaning differs and what it is on each rank: "the processes
// were started differently: --lr is 0.1 on rank 0, 0.5 on rank 1 (...)"; a setting one process
// lacks is "not given" there. Equal meanings spelt differently pass.
void requireSameSettings(ProcessGroup& group, const std::vector<Setting>& mine);

} // namespace towers::engine
