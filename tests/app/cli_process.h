#pragma once
// Runs towers-cli (TOWERS_CLI, the built executable) as a user would, for the command tests.
#include <QProcessEnvironment>
#include <QString>
#include <QStringList>

namespace towers::test {

struct CliResult
{
    int exitCode = -1; // -1: it crashed or was killed
    QString out, err;
};

// towers-cli `args` with `env` ("NAME=value") added to this process's environment; after
// `interruptAfterMs` (>= 0) it gets SIGINT. Killed after `timeoutMs`.
CliResult runCliProcess(const QString& program, const QStringList& args,
                        const QStringList& env = {}, int interruptAfterMs = -1,
                        int timeoutMs = 120000);

} // namespace towers::test
