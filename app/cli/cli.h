#pragma once
#include <QStringList>

namespace towers::app {

// Runs towers-cli with the process arguments (arguments[0] is the program); returns the exit code.
int runCli(const QStringList& arguments);

} // namespace towers::app
