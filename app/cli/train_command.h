#pragma once
// towers-cli train, in one process (group null) or as one process of a run across processes
// (runTrain joins the group when a launcher started it: train_processes.cpp).
#include "app/cli/command.h"
#include "engine/dist/process_group.h"

namespace towers::app {

int runTrainIn(const QStringList& args, CommandIo& io, engine::ProcessGroup* group);

} // namespace towers::app
