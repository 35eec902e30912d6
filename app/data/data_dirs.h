#pragma once
// Where datasets live by default. The engine's discovery (engine/data/dataset.h,
// defaultSearchPath) searches the same folders, so a dataset downloaded without --data-dir is
// found without one.
#include <QString>

#include <filesystem>
#include <vector>

namespace towers::app {

// The folder downloads go to when none is given: the first non-empty folder of $TOWERS_DATA
// (":"-separated) when set, else the engine's userDatasetDirectory() ($XDG_DATA_HOME, or
// ~/.local/share) followed by "towers/datasets". Returns an absolute, cleaned path, or an empty
// string when no home folder is known. The folder is not created.
QString defaultDataDir();

// The folder runs go to when no --run-dir is given, and where the GUI lists earlier runs:
// $TOWERS_RUNS when set, else "towers/runs" in the user's data folder ($XDG_DATA_HOME or
// ~/.local/share), beside the datasets. Absolute and cleaned; empty when no home folder is known.
QString defaultRunsDir();
// Why defaultRunsDir() is empty, and what to do: "no runs folder is known (no home folder: HOME
// is not set): name one with TOWERS_RUNS". `instead`: what else the command takes (", or the
// run's folder with --run-dir").
std::string noRunsFolder(const std::string& instead = {});

// The dataset search path (engine::defaultSearchPath()) with `dataDir`, when not empty, in front:
// what the CLI's --data-dir and the GUI's data folder mean.
std::vector<std::filesystem::path> searchPathWith(const QString& dataDir);

} // namespace towers::app
