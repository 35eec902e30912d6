// towers-cli selftest: every op of a device's backend against the reference backend, then a few
// training steps; pass or fail per check. A user's first command on a new machine.
#include <QElapsedTimer>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include "app/cli/command.h"
#include "app/devices/device_list.h"
#include "engine/cpu/cpu_info.h"
#include "engine/gpu/gpu_backend.h"
#include "engine/selftest/selftest.h"

namespace towers::app {

int runSelftest(const QStringList& args, CommandIo& io)
{
    QCommandLineParser p;
    p.setApplicationDescription(QStringLiteral(
        "Checks that Towers computes correctly on this machine: every op of the device's backend\n"
        "(convolution, pooling, LRN, linear, batch norm, dropout, loss, optimizer updates; "
        "forward\n"
        "and backward, the seeds' shapes among them) against the plain reference backend in "
        "float64\n"
        "(normalised error within the tolerance), then a few training steps with two towers: the\n"
        "loss falls, the replicas stay identical, and they equal one tower of the same global\n"
        "batch. Prints PASS or FAIL per check. Exit codes: 0 all passed, 1 some failed, 2 bad "
        "usage."));
    p.addOptions({
        {QStringLiteral("device"), QStringLiteral("cpu or cuda (default cpu)."),
         QStringLiteral("name"), QStringLiteral("cpu")},
        {QStringLiteral("tf32"),
         QStringLiteral("cuda: let cuDNN and cuBLAS use TF32 tensor cores (tolerance 1e-2).")},
        {QStringLiteral("no-training"),
         QStringLiteral("Only the op checks, not the training steps.")},
        {QStringLiteral("json"), QStringLiteral("Print JSON.")},
    });
    int code = 0;
    if (!parseOrExplain(p, args, io, code, Arguments::None)) return code;
    const QString device = p.value(QStringLiteral("device"));
    if (device == QLatin1String("cuda")) {
        if (!gpuBackendAvailable()) {
            io.err << "towers-cli selftest: error: --device cuda: " << gpuBackendNote() << "\n";
            return ExitFailure;
        }
    } else if (device != QLatin1String("cpu")) {
        io.err << "towers-cli selftest: --device must be cpu or cuda, got '" << device << "'\n";
        return ExitUsage;
    }

    engine::SelfTestOptions o;
    const bool cuda = device == QLatin1String("cuda");
    o.backend = cuda ? "cuda" : "onednn";
    o.allowTf32 = p.isSet(QStringLiteral("tf32"));
    if (o.allowTf32 && !cuda) {
        io.err << "towers-cli selftest: --tf32 is for --device cuda\n";
        return ExitUsage;
    }
    o.training = !p.isSet(QStringLiteral("no-training"));
    const bool json = p.isSet(QStringLiteral("json"));
    QString backendName = QStringLiteral("oneDNN %1, %2")
                              .arg(QString::fromStdString(engine::cpu::cpuInfo().onednnVersion),
                                   QString::fromStdString(engine::cpu::cpuInfo().isa));
    if (cuda) {
        auto* gpu = engine::cudaBackend();
        const auto info = gpu->deviceInfo(0);
        backendName = QStringLiteral("GPU 0 %1, compute capability %2.%3; %4%5")
                          .arg(QString::fromStdString(info.name))
                          .arg(info.computeMajor)
                          .arg(info.computeMinor)
                          .arg(QString::fromStdString(gpu->versions()),
                               o.allowTf32 ? QStringLiteral(", TF32") : QString());
    }
    if (!json)
        io.out << "selftest on " << device << " (" << backendName
               << ") against the reference backend\n";
    QElapsedTimer timer;
    timer.start();
    const auto results = engine::runSelfTest(o, [&](const engine::SelfTestResult& r) {
        if (json) return;
        io.out << (r.passed ? "PASS  " : "FAIL  ") << QString::fromStdString(r.name);
        if (r.tolerance > 0)
            io.out << "  (" << QString::number(r.error, 'g', 3)
                   << " <= " << QString::number(r.tolerance, 'g', 3)
                   << (r.passed ? ")" : " does not hold)");
        if (!r.detail.empty()) io.out << "  " << QString::fromStdString(r.detail);
        io.out << "\n";
        io.out.flush();
    });
    int failed = 0;
    QJsonArray checks;
    for (const auto& r : results) {
        failed += r.passed ? 0 : 1;
        checks.append(QJsonObject{{QStringLiteral("name"), QString::fromStdString(r.name)},
                                  {QStringLiteral("passed"), r.passed},
                                  {QStringLiteral("error"), r.error},
                                  {QStringLiteral("tolerance"), r.tolerance},
                                  {QStringLiteral("detail"), QString::fromStdString(r.detail)}});
    }
    const double seconds = double(timer.elapsed()) / 1000.0;
    if (json) {
        io.out << QJsonDocument(QJsonObject{{QStringLiteral("device"), device},
                                            {QStringLiteral("backend"), backendName},
                                            {QStringLiteral("passed"), failed == 0},
                                            {QStringLiteral("failed"), failed},
                                            {QStringLiteral("seconds"), seconds},
                                            {QStringLiteral("checks"), checks}})
                      .toJson(QJsonDocument::Indented);
    } else {
        io.out << "selftest: " << (results.size() - std::size_t(failed)) << " of " << results.size()
               << " checks passed on " << device << " in " << QString::number(seconds, 'f', 1)
               << " s" << (failed ? QStringLiteral(": %1 FAILED").arg(failed) : QString()) << "\n";
    }
    return failed ? ExitFailure : ExitOk;
}

} // namespace towers::app
