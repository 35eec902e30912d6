#pragma once
// towers-cli train, in one process (group null) or as one process of a run across processes
// (runTrain joins the group when a launcher started it: train_processes.cpp).
#include "app/cli/command.h"
#include "engine/dist/process_group.h"

namespace towers::app {

// What a process of a run marks its messages with: "[rank r] ", nothing on rank 0 (whose output is
// the run's).
QString rankPrefix(int rank);

int runTrainIn(const QStringList& args, CommandIo& io, engine::ProcessGroup* group);

} // namespace towers::app
