#pragma once
// Runs towers-cli (TOWERS_CLI, the built executable) as a user would, for the command tests.
#include <QProcessEnvironment>
#include <QString>
#include <QStringList>

#include <vector>

class QProcess;

namespace towers::test {

// The child `p` starts with SIGINT and SIGHUP at their default actions, whatever this test was
// started with (a script's background job ignores SIGINT, nohup SIGHUP): towers-cli keeps a
// signal ignored at its start ignored, so the tests that send one would otherwise wait in vain.
void withDefaultSignals(QProcess& p);

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

// The logits of the first image that `towers-cli classify --json` printed as `out` answered (its
// "results"[0]), in class order; empty where there is none.
std::vector<double> firstClassifiedLogits(const QString& out);

} // namespace towers::test
