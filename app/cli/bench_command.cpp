// towers-cli bench: the train-step benchmark.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <cstdio>
#include <unistd.h>

#include "app/cli/command.h"
#include "app/devices/device_list.h"
#include "engine/bench/train_step_bench.h"
#include "engine/errors.h"

namespace towers::app {

namespace {

// What the command line asks of a benchmark, as the steps below read it in turn: the options and
// the benchmark's settings made of them.
struct BenchRequest
{
    BenchRequest(const QCommandLineParser& parser, CommandIo& cio) : p(parser), io(cio) {}

    const QCommandLineParser& p;
    CommandIo& io;
    engine::TrainStepBenchOptions o;
};

// A benchmark's result with the settings it ran under, as the report below prints it.
struct BenchReport
{
    const engine::TrainStepBenchOptions& o;
    const engine::TrainStepBenchResult& r;
};

// The options and help of towers-cli bench.
void addBenchOptions(QCommandLineParser& p)
{
    p.setApplicationDescription(QStringLiteral(
        "Times full training steps (forward + loss, backward, SGD update) of a model\n"
        "on synthetic data after a warm-up, and prints images per second with the\n"
        "step split into forward, backward and update; with --inference, its forward\n"
        "pass in evaluation mode instead (what eval and classify run). Compare with\n"
        "PyTorch on the same machine with bench/compare.py."));
    p.addOptions({
        {QStringLiteral("model"),
         QStringLiteral("Model to time (see 'towers-cli models'), or a model file (.json)."),
         QStringLiteral("name"), QStringLiteral("cifar10-tutorial")},
        {QStringLiteral("batch-size"), QStringLiteral("Images per step."), QStringLiteral("n"),
         QStringLiteral("128")},
        {QStringLiteral("threads"), QStringLiteral("CPU threads (0 = every core)."),
         QStringLiteral("n"), QStringLiteral("0")},
        {QStringLiteral("steps"), QStringLiteral("Timed steps."), QStringLiteral("n"),
         QStringLiteral("20")},
        {QStringLiteral("warmup"), QStringLiteral("Untimed steps before timing."),
         QStringLiteral("n"), QStringLiteral("3")},
        {QStringLiteral("backend"),
         QStringLiteral("onednn, reference or cuda (the GPU --gpu names; default onednn, or cuda "
                        "with --device cuda)."),
         QStringLiteral("name")},
        {QStringLiteral("device"),
         QStringLiteral("cpu (oneDNN; default) or cuda, as training's --device."),
         QStringLiteral("name")},
        {QStringLiteral("gpu"), QStringLiteral("cuda: the GPU, by number (default 0)."),
         QStringLiteral("n")},
        {QStringLiteral("tf32"),
         QStringLiteral("cuda: let cuDNN and cuBLAS use TF32 tensor cores.")},
        {QStringLiteral("cuda-graphs"),
         QStringLiteral("cuda: on (also time the step replayed from one capture, a CUDA "
                        "graph, as training replays a GPU tower's) or off (default on)."),
         QStringLiteral("on|off"), QStringLiteral("on")},
        {QStringLiteral("cudnn-benchmark"),
         QStringLiteral("cuda: on (each convolution's algorithm the fastest that cuDNN "
                        "measures, as torch.backends.cudnn.benchmark) or off (the first of "
                        "cuDNN's heuristics, as training by default) (default off)."),
         QStringLiteral("on|off"), QStringLiteral("off")},
        {QStringLiteral("precision"),
         QStringLiteral("fp32 or bf16 (convolutions and matrix products in bfloat16 with "
                        "float32 accumulation; onednn on a CPU with AVX512_BF16 or AMX, cuda on a "
                        "GPU of compute capability 8.0 or later)."),
         QStringLiteral("name"), QStringLiteral("fp32")},
        {QStringLiteral("per-layer"),
         QStringLiteral("Also time each layer's forward and backward and name the "
                        "implementation its primitives ran on (a reference loop shows "
                        "as '...ref...').")},
        {QStringLiteral("inference"),
         QStringLiteral("Time the forward pass alone in evaluation mode (batch norms with "
                        "their running statistics, no dropout, loss, backward or update), as "
                        "eval, classify and the evaluations during training run it.")},
        {QStringLiteral("json"), QStringLiteral("Print the result as JSON.")},
    });
}

// The model and where it runs: --model, --device, --gpu and --backend, which must agree.
// ExitOk, or the exit code after the message.
int readBackend(BenchRequest& req)
{
    const QCommandLineParser& p = req.p;
    CommandIo& io = req.io;
    engine::TrainStepBenchOptions& o = req.o;
    const engine::ModelInfo& model = modelOption(p.value(QStringLiteral("model")));
    o.model = model.name;
    o.modelDefinition = model.definition;
    // --device says where, --backend which arithmetic: both must agree where both are given.
    QString device;
    if (!choiceOption(p, QStringLiteral("device"), {"cpu", "cuda"}, device, io)) return ExitUsage;
    const bool deviceGiven = !device.isEmpty();
    if (gpuOption(p, QStringLiteral("towers-cli bench"), io, device, o.gpu) != ExitOk)
        return ExitUsage;
    const bool cuda = device == QLatin1String("cuda");
    o.backend = p.isSet(QStringLiteral("backend"))
                    ? p.value(QStringLiteral("backend")).toStdString()
                : cuda ? "cuda"
                       : "onednn";
    if (deviceGiven && cuda != (o.backend == "cuda")) {
        io.err << "towers-cli bench: --backend " << QString::fromStdString(o.backend)
               << " does not run on --device " << device << "\n";
        return ExitUsage;
    }
    if (p.isSet(QStringLiteral("gpu")) && o.backend != "cuda") {
        io.err << "towers-cli bench: --gpu is for --device cuda\n";
        return ExitUsage;
    }
    if (o.backend == "cuda" && gpuBackendAvailable() &&
        !gpuNumberUsable(o.gpu, QStringLiteral("towers-cli bench"), io))
        return ExitFailure;
    return ExitOk;
}

// How the steps run and how many: TF32, CUDA graphs, cuDNN's choice, the precision, the modes,
// the batch, the threads and the step counts. ExitOk, or the exit code after the message.
int readTimingOptions(BenchRequest& req)
{
    const QCommandLineParser& p = req.p;
    CommandIo& io = req.io;
    engine::TrainStepBenchOptions& o = req.o;
    o.allowTf32 = p.isSet(QStringLiteral("tf32"));
    o.perLayer = p.isSet(QStringLiteral("per-layer"));
    o.inference = p.isSet(QStringLiteral("inference"));
    if (!onOffOption(p, QStringLiteral("cuda-graphs"), o.graphs, io) ||
        !onOffOption(p, QStringLiteral("cudnn-benchmark"), o.cudnnBenchmark, io))
        return ExitUsage;
    std::optional<engine::Precision> precision;
    if (!precisionOption(p, precision, io)) return ExitUsage;
    o.precision = precision.value_or(engine::Precision::Float32);
    if (!intOption(p, QStringLiteral("batch-size"), 1, 65536, o.batchSize, io) ||
        !intOption(p, QStringLiteral("threads"), 0, 1024, o.threads, io) ||
        !intOption(p, QStringLiteral("steps"), 1, 1000000, o.steps, io) ||
        !intOption(p, QStringLiteral("warmup"), 0, 1000000, o.warmup, io))
        return ExitUsage;
    if (o.threads > 0 && o.backend != "cuda")
        noteThreadsBeyondCores(io, QStringLiteral("towers-cli bench"), o.threads,
                               QStringLiteral("--threads %1").arg(o.threads),
                               QStringLiteral("--threads 0 takes every core"));
    return ExitOk;
}

// The warm-up and the timed steps, into `r`, counting them on stderr where `progress`. ExitOk,
// or ExitFailure after the message where the steps run out of memory.
int timeSteps(BenchRequest& req, bool progress, engine::TrainStepBenchResult& r)
{
    const engine::TrainStepBenchOptions& o = req.o;
    CommandIo& io = req.io;
    try {
        r = engine::benchmarkTrainStep(o, [&](int step, int total) {
            if (progress) {
                io.err << "\rstep " << step << "/" << total;
                io.err.flush();
            }
        });
    } catch (const std::bad_alloc&) {
        io.err << (progress ? "\n" : "") << "towers-cli bench: error: out of memory running "
               << QString::fromStdString(o.model) << " at a batch of " << o.batchSize
               << (o.batchSize > 1 ? QStringLiteral(" (its layer outputs and their gradients grow "
                                                    "with the batch): a smaller --batch-size "
                                                    "may fit\n")
                                   : QStringLiteral(": a smaller model, or more memory (free "
                                                    "memory, ulimit -v), is needed\n"));
        return ExitFailure;
    }
    return ExitOk;
}

// The report as --json prints it.
QJsonObject reportJson(const BenchReport& b)
{
    const engine::TrainStepBenchOptions& o = b.o;
    const engine::TrainStepBenchResult& r = b.r;
    QJsonObject j{
        {QStringLiteral("model"), QString::fromStdString(o.model)},
        {QStringLiteral("batch_size"), o.batchSize},
        {QStringLiteral("threads"), r.threads},
        {QStringLiteral("mode"),
         o.inference ? QStringLiteral("inference") : QStringLiteral("training")},
        {QStringLiteral("steps"), o.steps},
        {QStringLiteral("warmup"), o.warmup},
        {QStringLiteral("backend"), QString::fromStdString(r.backend)},
        {QStringLiteral("precision"),
         QString::fromStdString(std::string(engine::precisionName(o.precision)))},
        {QStringLiteral("images_per_sec"), r.imagesPerSec},
        {QStringLiteral("step_ms"), r.stepMs},
        {QStringLiteral("forward_ms"), r.forwardMs},
        {QStringLiteral("backward_ms"), r.backwardMs},
        {QStringLiteral("update_ms"), r.updateMs},
        {QStringLiteral("phases_ms"), r.phasesMs},
        {QStringLiteral("back_to_back"), r.backToBack},
        {QStringLiteral("graph_step_ms"), r.graphStepMs},
        {QStringLiteral("graph_images_per_sec"), r.graphImagesPerSec},
        {QStringLiteral("graphs_unavailable"), QString::fromStdString(r.graphsUnavailable)},
        {QStringLiteral("gflop_per_image"), r.gflopsPerImage},
        {QStringLiteral("achieved_gflops"), r.achievedGflops},
        {QStringLiteral("last_loss"), r.lastLoss},
    };
    if (o.inference) j.insert(QStringLiteral("chunking"), QString::fromStdString(r.chunking));
    if (!r.isa.empty()) {
        j.insert(QStringLiteral("isa"), QString::fromStdString(r.isa));
        j.insert(QStringLiteral("simd_target"), QString::fromStdString(r.simdTarget));
    }
    if (o.perLayer) {
        QJsonArray layers;
        auto strings = [](const std::vector<std::string>& v) {
            QJsonArray a;
            for (const auto& x : v) a.append(QString::fromStdString(x));
            return a;
        };
        for (const auto& l : r.layers)
            layers.append(
                QJsonObject{{QStringLiteral("name"), QString::fromStdString(l.name)},
                            {QStringLiteral("kind"), QString::fromStdString(l.kind)},
                            {QStringLiteral("description"), QString::fromStdString(l.description)},
                            {QStringLiteral("forward_ms"), l.forwardMs},
                            {QStringLiteral("backward_ms"), l.backwardMs},
                            {QStringLiteral("forward_impl"), strings(l.forwardImpl)},
                            {QStringLiteral("backward_impl"), strings(l.backwardImpl)}});
        j.insert(QStringLiteral("layers"), layers);
    }
    return j;
}

// The report as text: the speed, the step's phases, the CUDA graphs, the compute and the CPU's
// kernels.
void printSummary(const BenchReport& b, CommandIo& io)
{
    const engine::TrainStepBenchOptions& o = b.o;
    const engine::TrainStepBenchResult& r = b.r;
    io.out << "model      " << QString::fromStdString(o.model) << ", batch " << o.batchSize << ", "
           << QString::fromStdString(engine::counted(r.threads, "thread", "threads")) << ", "
           << QString::fromStdString(r.backend) << "\n"
           << (o.inference ? "passes     " : "steps      ") << o.steps << " timed after "
           << o.warmup << " warm-up" << (o.inference ? ", forward in evaluation mode" : "") << "\n"
           << "images/s   " << QString::number(r.imagesPerSec, 'f', 1) << "\n";
    const QString phases = QStringLiteral("forward %1, backward %2, update %3")
                               .arg(r.forwardMs, 0, 'f', 2)
                               .arg(r.backwardMs, 0, 'f', 2)
                               .arg(r.updateMs, 0, 'f', 2);
    if (o.inference)
        io.out << "forward    " << QString::number(r.stepMs, 'f', 2) << " ms"
               << (r.backToBack ? QStringLiteral(", issued back to back (%1 ms each waited for)")
                                      .arg(r.phasesMs, 0, 'f', 2)
                                : QString())
               << "\n"
               << "chunks     "
               << (r.chunking.empty() ? QStringLiteral("none: every layer takes the whole batch")
                                      : QString::fromStdString(r.chunking))
               << "\n";
    else if (!r.backToBack) // the CPU: ops finish before they return
        io.out << "step       " << QString::number(r.stepMs, 'f', 2) << " ms (" << phases << ")\n";
    else // a GPU: the steps issued back to back, the phases each waited for
        io.out << "step       " << QString::number(r.stepMs, 'f', 2) << " ms, issued back to back\n"
               << "phases     " << QString::number(r.phasesMs, 'f', 2) << " ms, each waited for ("
               << phases << ")\n";
    if (r.graphStepMs > 0)
        io.out << "graphs     " << QString::number(r.graphStepMs, 'f', 2)
               << " ms per step replayed from one capture ("
               << QString::number(r.graphImagesPerSec, 'f', 1) << " images/s)\n";
    else if (!r.graphsUnavailable.empty())
        io.out << "graphs     not timed: " << QString::fromStdString(r.graphsUnavailable) << "\n";
    io.out << "compute    " << QString::number(r.gflopsPerImage, 'f', 3) << " GFLOP per image, "
           << QString::number(r.achievedGflops, 'f', 1) << " GFLOP/s achieved\n";
    if (!r.isa.empty())
        io.out << "cpu        oneDNN kernels for " << QString::fromStdString(r.isa)
               << ", Towers' own for " << QString::fromStdString(r.simdTarget) << "\n";
}

// --per-layer's table, as text: each layer's times and the implementations it ran on.
void printLayers(const BenchReport& b, CommandIo& io)
{
    const engine::TrainStepBenchOptions& o = b.o;
    const engine::TrainStepBenchResult& r = b.r;
    io.out << "\nper layer (ms per " << (o.inference ? "pass" : "step")
           << "; each timed alone, so they add up to a little more than the "
           << (o.inference ? "pass" : "step") << ")\n";
    auto join = [](const std::vector<std::string>& v) {
        QStringList l;
        for (const auto& x : v) l << QString::fromStdString(x);
        return l.isEmpty() ? QStringLiteral("-") : l.join(QStringLiteral(", "));
    };
    // Inference has no backward: no column for it.
    const bool backward = !o.inference;
    auto line = [&](const QString& name, const QString& kind, const QString& forward,
                    const QString& back, const QString& impl) {
        io.out << QStringLiteral("%1 %2 %3").arg(name, -16).arg(kind, -10).arg(forward, 9)
               << (backward ? QStringLiteral(" %1").arg(back, 9) : QString()) << "  " << impl
               << "\n";
    };
    line(QStringLiteral("layer"), QStringLiteral("kind"), QStringLiteral("forward"),
         QStringLiteral("backward"),
         backward ? QStringLiteral("implementation (forward | backward)")
                  : QStringLiteral("implementation"));
    for (const auto& l : r.layers)
        line(QString::fromStdString(l.name), QString::fromStdString(l.kind),
             QString::number(l.forwardMs, 'f', 2), QString::number(l.backwardMs, 'f', 2),
             backward ? join(l.forwardImpl) + QStringLiteral(" | ") + join(l.backwardImpl)
                      : join(l.forwardImpl));
}

} // namespace

int runBench(const QStringList& args, CommandIo& io)
{
    QCommandLineParser p;
    addBenchOptions(p);
    int code = 0;
    if (!parseOrExplain(p, args, io, code, Arguments::None)) return code;
    BenchRequest req(p, io);
    if (const int c = readBackend(req); c != ExitOk) return c;
    if (const int c = readTimingOptions(req); c != ExitOk) return c;

    const bool json = p.isSet(QStringLiteral("json"));
    // The step counter, overwritten in place, only on a terminal (not in a log or a pipe).
    const bool progress = !json && ::isatty(::fileno(stderr)) == 1;
    engine::TrainStepBenchResult r;
    if (const int c = timeSteps(req, progress, r); c != ExitOk) return c;
    const BenchReport b{req.o, r};
    if (json) {
        io.out << QJsonDocument(reportJson(b)).toJson(QJsonDocument::Indented);
        return ExitOk;
    }
    if (progress) {
        io.err << "\r" << QString(24, QLatin1Char(' ')) << "\r";
        io.err.flush();
    }
    printSummary(b, io);
    if (req.o.perLayer) printLayers(b, io);
    return ExitOk;
}

} // namespace towers::app
