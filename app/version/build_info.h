#pragma once
// What this build is: the version (one place: project() in the top CMakeLists.txt), the git
// revision it was built from, and the backends compiled in. Printed by `towers --version` and
// `towers-cli --version`, and logged when a run starts.
#include <QString>
#include <QStringList>

namespace towers::app {

// "0.1.0".
QString versionNumber();
// The short git commit the build came from ("1a2b3c4d5e", "…-modified" with local changes), or
// empty when built outside a git checkout.
QString gitRevision();
// "<program> 0.1.0 (git 1a2b3c4d5e)".
QString versionLine(const QString& program);
// The backends this build can run ops on, fastest first: "cpu (oneDNN 3.0.0)", "reference".
QStringList compiledBackends();
// The whole --version text: the version line, the backends, the GPU backend's state, the
// precisions this machine runs (bf16 where the CPU has AVX512_BF16 or AMX), the processes and the
// Qt version, one per line, ending with a newline.
QString versionText(const QString& program);

} // namespace towers::app
