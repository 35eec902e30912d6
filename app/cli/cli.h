#pragma once
#include <QStringList>

namespace towers::app {

// Runs towers-cli with the process arguments (arguments[0] is the program); returns the exit code.
int runCli(const QStringList& arguments);

// The first of the process's arguments after the program that is not UTF-8, described for a
// message ("argument 3, 'run\xff'": its invalid bytes as \xNN), or an empty string. Qt reads
// every argument as UTF-8, so an invalid byte would become U+FFFD, and a path another path: a run
// folder, a checkpoint or a settings file written where the user did not say.
QString undecodableArgument(int argc, const char* const* argv);

// undecodableArgument's refusal on stderr ("<program>: error: ..."); true when there was one.
bool refuseUndecodableArgument(const char* program, int argc, const char* const* argv);

} // namespace towers::app
