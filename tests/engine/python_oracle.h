#pragma once
// Runs the PyTorch oracle scripts of tests/ (Debian's /usr/bin/python3 with python3-torch).
#include <QString>
#include <QStringList>

namespace towers::test {

struct OracleRun
{
    int exitCode = -1; // 77: PyTorch is missing (the caller QSKIPs)
    QString output;    // stdout and stderr merged
};

// $TOWERS_SOURCE_DIR/tests/<name>; empty when the variable or the file is missing.
QString oracleScript(const QString& name);
// Whether /usr/bin/python3 can import torch (probed once).
bool torchAvailable();
// Runs /usr/bin/python3 script args... and waits (up to 5 minutes).
OracleRun runOracle(const QString& script, const QStringList& args);

// tests/optim_crosscheck.py checks several files in one run and prints a section per file
// ("== <file name>" then its lines). The section of `fileName`, empty when absent.
QString oracleSection(const QString& output, const QString& fileName);
// Whether a section ends with "<what>: N/N tensors within <tol>" (every tensor matched).
bool sectionPassed(const QString& section);

} // namespace towers::test
