// towers-cli selftest: the op-case table (engine/selftest/op_cases.h) on a device's backend against
// the reference backend, a line per case and a line per op, then a few training steps; pass or
// fail per check. A user's first command on a new machine.
#include <QElapsedTimer>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>

#include "app/cli/command.h"
#include "app/devices/device_list.h"
#include "engine/cpu/cpu_info.h"
#include "engine/gpu/gpu_backend.h"
#include "engine/selftest/selftest.h"
#include "engine/train/train_config.h"

namespace towers::app {

namespace {

QString number(double v)
{
    return QString::number(v, 'g', 2);
}

QJsonObject checkJson(const engine::SelfTestResult& r)
{
    QJsonObject o{{QStringLiteral("name"), QString::fromStdString(r.name)},
                  {QStringLiteral("passed"), r.passed},
                  {QStringLiteral("error"), r.error},
                  {QStringLiteral("tolerance"), r.tolerance},
                  {QStringLiteral("detail"), QString::fromStdString(r.detail)}};
    if (!r.op.empty()) {
        o.insert(QStringLiteral("op"), QString::fromStdString(r.op));
        o.insert(QStringLiteral("case"), QString::fromStdString(r.caseName));
        QJsonArray outputs;
        for (const auto& out : r.outputs)
            outputs.append(QJsonObject{{QStringLiteral("name"), QString::fromStdString(out.name)},
                                       {QStringLiteral("passed"), out.passed},
                                       {QStringLiteral("error"), out.error},
                                       {QStringLiteral("tolerance"), out.tolerance}});
        o.insert(QStringLiteral("outputs"), outputs);
    }
    return o;
}

QJsonObject opJson(const engine::SelfTestOpSummary& s)
{
    return QJsonObject{{QStringLiteral("op"), QString::fromStdString(s.op)},
                       {QStringLiteral("passed"), s.failed == 0},
                       {QStringLiteral("cases"), s.cases},
                       {QStringLiteral("failed"), s.failed},
                       {QStringLiteral("worstCase"), QString::fromStdString(s.worstCase)},
                       {QStringLiteral("worstError"), s.worstError},
                       {QStringLiteral("worstTolerance"), s.worstTolerance}};
}

// The options and the help text.
void addSelftestOptions(QCommandLineParser& p)
{
    p.setApplicationDescription(QStringLiteral(
        "Checks that Towers computes correctly on this machine. First the op-case table: every op\n"
        "of the device's backend (convolution, pooling, LRN, linear, ReLU, add, dropout, batch\n"
        "norm, layouts, loss, sum of squares, axpy, optimizer updates, the input's preprocessing;\n"
        "forward and backward) on odd sizes, asymmetric SAME pads, strides, batch 1, large\n"
        "channel counts, ties in max-pooling and the registered models' layers, each output\n"
        "against the plain reference backend in float64 by normalised error (the case's tolerance\n"
        "for the backend's math mode); the same cases the test suite runs on every backend. Then\n"
        "a few training steps with two towers: the loss falls, the replicas stay identical, and\n"
        "they equal one tower of the same global batch. Prints PASS or FAIL and the error per\n"
        "case, then per op.\n"
        "Exit codes: 0 all passed, 1 some failed, 2 bad usage."));
    p.addOptions({
        {QStringLiteral("device"), QStringLiteral("cpu or cuda (default cpu)."),
         QStringLiteral("name"), QStringLiteral("cpu")},
        {QStringLiteral("gpu"),
         QStringLiteral("cuda: the GPU the op cases and both training towers run on (default: "
                        "the op cases on GPU 0, the towers on GPUs 0 and 1 where there are two)."),
         QStringLiteral("n")},
        {QStringLiteral("tf32"),
         QStringLiteral("cuda: let cuDNN and cuBLAS use TF32 tensor cores (convolution and "
                        "linear cases to 1e-2).")},
        {QStringLiteral("precision"),
         QStringLiteral("fp32 (default) or bf16: the convolutions and matrix products in bfloat16, "
                        "as training with --precision bf16 runs them (cpu, where the CPU has "
                        "AVX512_BF16 or AMX; cuda, on a GPU of compute capability 8.0 or later; "
                        "those cases to 1e-2)."),
         QStringLiteral("fp32|bf16"), QStringLiteral("fp32")},
        {QStringLiteral("no-training"),
         QStringLiteral("Only the op checks, not the training steps.")},
        {QStringLiteral("filter"),
         QStringLiteral("Only the op cases whose name contains this text (\"LRN\", "
                        "\"cifar10-tutorial\")."),
         QStringLiteral("text")},
        {QStringLiteral("list"),
         QStringLiteral("Print the op cases (op, then case; those --filter names), one a line, "
                        "without running them.")},
        {QStringLiteral("json"), QStringLiteral("Print JSON.")},
    });
}

// --list: the op cases (those --filter names), one a line or as JSON, without running them.
// Returns ExitOk.
int listCases(const QCommandLineParser& p, CommandIo& io)
{
    const bool json = p.isSet(QStringLiteral("json"));
    const std::string filter = p.value(QStringLiteral("filter")).toStdString();
    QJsonArray cases;
    for (const auto& c : engine::opCases()) {
        if (c.label().find(filter) == std::string::npos) continue;
        if (json)
            cases.append(QJsonObject{{QStringLiteral("op"), QString::fromStdString(c.op)},
                                     {QStringLiteral("case"), QString::fromStdString(c.name)}});
        else
            io.out << QString::fromStdString(c.label()) << "\n";
    }
    if (json) io.out << QJsonDocument(cases).toJson(QJsonDocument::Indented);
    return ExitOk;
}

// What the command line asks of a selftest, as the steps below read it in turn: the options, the
// device, and the checks to run on it.
struct SelftestRequest
{
    SelftestRequest(const QCommandLineParser& parser, CommandIo& cio)
        : p(parser), io(cio), json(parser.isSet(QStringLiteral("json")))
    {
    }

    const QCommandLineParser& p;
    CommandIo& io;
    bool json = false; // --json: the report as JSON, no line per check
    QString device = QStringLiteral("cpu");
    int gpu = -1;
    bool cuda = false; // --device cuda
    engine::SelfTestOptions o;
};

// --device and --gpu, and whether that device is usable here. ExitOk, or the exit code after the
// message.
int readDevice(SelftestRequest& r)
{
    const QCommandLineParser& p = r.p;
    CommandIo& io = r.io;
    QString& device = r.device;
    int& gpu = r.gpu;
    if (!choiceOption(p, QStringLiteral("device"), {"cpu", "cuda"}, device, io)) return ExitUsage;
    if (gpuOption(p, QStringLiteral("towers-cli selftest"), io, device, gpu) != ExitOk)
        return ExitUsage;
    if (device == QLatin1String("cuda") && !gpuBackendAvailable()) {
        io.err << "towers-cli selftest: error: --device cuda: " << gpuBackendNote() << "\n";
        return ExitFailure;
    }
    if (gpu >= 0 && !gpuNumberUsable(gpu, QStringLiteral("towers-cli selftest"), io))
        return ExitFailure;
    return ExitOk;
}

// The checks' options (backend, TF32, precision, training, filter), checked against the device.
// ExitOk, or the exit code after the message.
int readCheckOptions(SelftestRequest& r)
{
    const QCommandLineParser& p = r.p;
    CommandIo& io = r.io;
    engine::SelfTestOptions& o = r.o;
    const int gpu = r.gpu;
    bool& cuda = r.cuda;
    cuda = r.device == QLatin1String("cuda");
    o.backend = cuda ? "cuda" : "onednn";
    o.gpu = gpu;
    o.allowTf32 = p.isSet(QStringLiteral("tf32"));
    if (o.allowTf32 && !cuda) {
        io.err << "towers-cli selftest: --tf32 is for --device cuda\n";
        return ExitUsage;
    }
    std::optional<engine::Precision> precision;
    if (!precisionOption(p, precision, io)) return ExitUsage;
    o.precision = precision.value_or(engine::Precision::Float32);
    // The backend's own refusal, as training gives it.
    if (const std::string no = engine::TrainConfig::precisionUnavailable(o.backend, o.precision);
        !no.empty()) {
        io.err << "towers-cli selftest: error: " << QString::fromStdString(no) << "\n";
        return ExitFailure;
    }
    o.training = !p.isSet(QStringLiteral("no-training"));
    o.filter = p.value(QStringLiteral("filter")).toStdString();
    if (p.isSet(QStringLiteral("filter"))) {
        const bool any = std::any_of(
            engine::opCases().begin(), engine::opCases().end(),
            [&](const engine::OpCase& c) { return c.label().find(o.filter) != std::string::npos; });
        if (!any) {
            io.err << "towers-cli selftest: --filter '" << p.value(QStringLiteral("filter"))
                   << "' matches no op case (towers-cli selftest --list shows them)\n";
            return ExitUsage;
        }
    }
    return ExitOk;
}

// The backend the op cases run on, in words: oneDNN's version and the CPU's ISA, or the GPU, its
// compute capability and the GPU libraries' versions.
QString backendNameOf(const SelftestRequest& r)
{
    const engine::SelfTestOptions& o = r.o;
    const int gpu = r.gpu;
    const bool cuda = r.cuda;
    QString backendName =
        QStringLiteral("oneDNN %1, %2%3")
            .arg(QString::fromStdString(engine::cpu::cpuInfo().onednnVersion),
                 QString::fromStdString(engine::cpu::cpuInfo().isa),
                 o.precision == engine::Precision::BFloat16 ? QStringLiteral(", bf16") : QString());
    if (cuda) {
        auto* backend = engine::cudaBackend();
        const auto info = backend->deviceInfo(std::max(gpu, 0));
        backendName = QStringLiteral("GPU %1 %2, compute capability %3.%4; %5%6")
                          .arg(std::max(gpu, 0))
                          .arg(QString::fromStdString(info.name))
                          .arg(info.computeMajor)
                          .arg(info.computeMinor)
                          .arg(QString::fromStdString(backend->versions()),
                               o.allowTf32 ? QStringLiteral(", TF32") : QString());
    }
    return backendName;
}

// What a selftest found, for the report at the end.
struct SelftestReport
{
    QString device;
    QString backendName;
    QString mathMode;
    std::vector<engine::SelfTestResult> results{};
    std::vector<engine::SelfTestOpSummary> ops{};
    int failed = 0;
    QJsonArray checks{};
    double seconds = 0;
};

// Runs the checks, printing a heading and a line per check as it ends (not with --json). Returns
// the results, the failures, each check's JSON, the per-op summaries and the seconds taken.
SelftestReport runChecks(const SelftestRequest& request)
{
    const engine::SelfTestOptions& o = request.o;
    CommandIo& io = request.io;
    const bool json = request.json;
    const QString& device = request.device;
    const QString backendName = backendNameOf(request);
    const QString mathMode = QString::fromStdString(mathModeName(engine::selfTestMathMode(o)));
    if (!json)
        io.out << "selftest on " << device << " (" << backendName
               << ") against the reference backend in float64; op cases judged in " << mathMode
               << "\n";
    QElapsedTimer timer;
    timer.start();
    auto results = engine::runSelfTest(o, [&](const engine::SelfTestResult& r) {
        if (json) return;
        io.out << (r.passed ? "PASS  " : "FAIL  ") << QString::fromStdString(r.name);
        // An op case that ran has its worst output's error; one that threw, only its message.
        const bool measured = r.op.empty() ? r.tolerance > 0 : !r.outputs.empty();
        if (measured)
            io.out << "  (" << number(r.error) << (r.passed ? " <= " : " > ") << number(r.tolerance)
                   << ")";
        if (!r.detail.empty()) io.out << "  " << QString::fromStdString(r.detail);
        io.out << "\n";
        io.out.flush();
    });
    int failed = 0;
    QJsonArray checks;
    for (const auto& r : results) {
        failed += r.passed ? 0 : 1;
        checks.append(checkJson(r));
    }
    auto ops = engine::summarizeByOp(results);
    const double seconds = double(timer.elapsed()) / 1000.0;
    return SelftestReport{device,         backendName, mathMode,          std::move(results),
                          std::move(ops), failed,      std::move(checks), seconds};
}

// The report as --json prints it.
QJsonObject reportJson(const SelftestReport& e)
{
    const QString& device = e.device;
    const QString& backendName = e.backendName;
    const QString& mathMode = e.mathMode;
    const auto& ops = e.ops;
    const int failed = e.failed;
    const QJsonArray& checks = e.checks;
    const double seconds = e.seconds;
    QJsonArray opArray;
    for (const auto& s : ops) opArray.append(opJson(s));
    return QJsonObject{
        {QStringLiteral("device"), device},     {QStringLiteral("backend"), backendName},
        {QStringLiteral("mathMode"), mathMode}, {QStringLiteral("passed"), failed == 0},
        {QStringLiteral("failed"), failed},     {QStringLiteral("seconds"), seconds},
        {QStringLiteral("ops"), opArray},       {QStringLiteral("checks"), checks}};
}

// The report as text: a line per op, then how many checks passed.
void printSummary(const SelftestReport& e, CommandIo& io)
{
    const QString& device = e.device;
    const auto& results = e.results;
    const auto& ops = e.ops;
    const int failed = e.failed;
    const double seconds = e.seconds;
    if (!ops.empty()) {
        io.out << "per op:\n";
        int width = 0;
        for (const auto& s : ops) width = std::max(width, int(s.op.size()));
        for (const auto& s : ops) {
            io.out << (s.failed ? "FAIL  " : "PASS  ")
                   << QString::fromStdString(s.op).leftJustified(width) << "  "
                   << QString::number(s.cases).rightJustified(3) << " cases";
            if (s.failed)
                io.out << ", " << s.failed << " FAILED, the first: ";
            else
                io.out << ", worst " << number(s.worstError) << " <= " << number(s.worstTolerance)
                       << ": ";
            io.out << QString::fromStdString(s.worstCase) << "\n";
        }
    }
    io.out << "selftest: " << (results.size() - std::size_t(failed)) << " of " << results.size()
           << " checks passed on " << device << " in " << QString::number(seconds, 'f', 1) << " s"
           << (failed ? QStringLiteral(": %1 FAILED").arg(failed) : QString()) << "\n";
}

} // namespace

int runSelftest(const QStringList& args, CommandIo& io)
{
    QCommandLineParser p;
    addSelftestOptions(p);
    int code = 0;
    if (!parseOrExplain(p, args, io, code, Arguments::None)) return code;
    if (p.isSet(QStringLiteral("list"))) return listCases(p, io);
    SelftestRequest r{p, io};
    if (code = readDevice(r); code != ExitOk) return code;
    if (code = readCheckOptions(r); code != ExitOk) return code;
    const SelftestReport e = runChecks(r);
    if (r.json)
        io.out << QJsonDocument(reportJson(e)).toJson(QJsonDocument::Indented);
    else
        printSummary(e, io);
    return e.failed ? ExitFailure : ExitOk;
}

} // namespace towers::app
