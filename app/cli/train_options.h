#pragma once
// towers-cli train's options: their declarations and help text, and the settings the processes of
// a run compare before they train (engine/dist/process_state.h: requireSameSettings);
// train_command.cpp runs the command.
#include <QCommandLineParser>

#include <vector>

#include "engine/dist/process_state.h"

namespace towers::app {

// Declares towers-cli train's options on p, with the command's description: the help text, the
// datasets it trains (those with a default model) and the one it falls back to.
void addTrainOptions(QCommandLineParser& p);

// What the processes of a run compare before anything else: the build, and each option given
// (all but --data-dir: each machine keeps its data where it likes; the session compares the
// datasets' contents) by its long name and its meaning in one spelling, so that --lr 0.1, --lr=0.1
// and --lr 1e-1 agree, the options' order does not matter, and the last of a repeated option is
// the one compared, as it is the one used. A value that does not read is compared as given (its
// process then refuses it itself).
std::vector<engine::Setting> settingsGiven(const QCommandLineParser& p);

} // namespace towers::app
