// towers-cli lr-find: the learning-rate range test (engine/train/lr_range_test.h) for a model on
// a dataset, with the towers and batch a run would have: the loss as the rate rises, and the rate
// to train with.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>

#include <cmath>

#include "app/cli/command.h"
#include "app/data/data_dirs.h"
#include "app/devices/device_list.h"
#include "engine/backends.h"
#include "engine/data/dataset.h"
#include "engine/data/dataset_manifest.h"
#include "engine/data/dataset_spec.h"
#include "engine/dist/process_group.h"
#include "engine/errors.h"
#include "engine/optim/optimizer.h"
#include "engine/train/checkpoint.h"
#include "engine/train/lr_range_test.h"
#include "engine/train/recipe.h"

namespace towers::app {

namespace {

QString lrText(double lr)
{
    return QString::number(lr, 'g', 3);
}

// lr-find's options and help.
void addLrFindOptions(QCommandLineParser& p)
{
    p.setApplicationDescription(QStringLiteral(
        "Finds a learning rate by the range test (as fastai's lr_find): a few steps of the real\n"
        "training, from the seed's weights (or --init-from's), the rate rising exponentially\n"
        "from --min-lr to --max-lr, stopped when the loss runs away. The rate where the smoothed\n"
        "loss falls fastest is suggested (with the model's schedule it is the peak: --lr of\n"
        "train). Nothing is written."));
    const QString n = QStringLiteral("n");
    p.addOptions({
        {QStringLiteral("dataset"),
         QStringLiteral("The dataset (default: the first found, as train)."),
         QStringLiteral("name")},
        {QStringLiteral("data-dir"), QStringLiteral("Look for the dataset in this folder first."),
         QStringLiteral("dir")},
        {QStringLiteral("model"),
         QStringLiteral("The model, or a model file (.json) (default: the dataset's)."),
         QStringLiteral("name")},
    });
    p.addOptions(deviceOptions(QStringLiteral("cpu or cuda (default cpu).")));
    p.addOptions({
        {QStringLiteral("towers"),
         QStringLiteral("Number of towers (default 1; with --gpus, one per GPU)."), n},
        {QStringLiteral("batch-size"),
         QStringLiteral("Examples per tower per batch (default: the model's)."), n},
        {QStringLiteral("accumulate"),
         QStringLiteral("Batches per tower per step, as train --accumulate (default 1)."), n},
        {QStringLiteral("sampling"),
         QStringLiteral("uniform (default) or balanced, as train --sampling."),
         QStringLiteral("name")},
        {QStringLiteral("threads-per-tower"),
         QStringLiteral("CPU threads per tower (default: the cores shared out)."), n},
        {QStringLiteral("seed"), QStringLiteral("The weights' and the batches' seed."), n},
        {QStringLiteral("precision"),
         QStringLiteral("fp32 (default) or bf16, as train: the precision of the run the test is "
                        "for."),
         QStringLiteral("name")},
        {QStringLiteral("init-from"),
         QStringLiteral("Start from this checkpoint's weights, as train --init-from (a run's "
                        "folder or name gives its newest); its model unless --model."),
         QStringLiteral("checkpoint")},
        initBestOption(),
        {QStringLiteral("optimizer"),
         QStringLiteral("sgd, momentum, nesterov, adam or adamw, as train (default: the "
                        "model's): the rate found is this optimizer's."),
         QStringLiteral("name")},
        {QStringLiteral("weight-decay"),
         QStringLiteral("As train: the conv/linear weights' coefficient (default: the model's)."),
         QStringLiteral("x")},
        {QStringLiteral("label-smoothing"),
         QStringLiteral("As train: the loss's label smoothing (default 0)."), QStringLiteral("x")},
        {QStringLiteral("clip-grad-norm"),
         QStringLiteral("As train: the gradients' global norm clipped to x (default 0: none)."),
         QStringLiteral("x")},
        {QStringLiteral("min-lr"), QStringLiteral("The lowest learning rate (default 1e-5)."),
         QStringLiteral("lr")},
        {QStringLiteral("max-lr"), QStringLiteral("The highest learning rate (default 10)."),
         QStringLiteral("lr")},
        {QStringLiteral("steps"),
         QStringLiteral("Steps from the lowest to the highest (default "
                        "100)."),
         n},
        {QStringLiteral("json"), QStringLiteral("Print JSON: every step's rate and losses.")},
    });
}

// Under mpirun or srun: the exit code the command ends with here (rank 0's refusal, the others'
// quiet 0); nullopt to go on, in one process.
std::optional<int> launchedExit(const QCommandLineParser& p, CommandIo& io)
{
    // The test runs in one process. Under mpirun or srun every process would run all of it, each
    // printing; P processes of T towers train bitwise what one process of P x T towers trains, so
    // one process measures the rate of such a run. Refused, saying so, on rank 0 (exit 2, which
    // the launcher reports); the others leave quietly with 0, so that the refusal is printed once
    // and is not lost: a launcher kills every process as soon as one exits with an error, which
    // could be before rank 0 has said why.
    if (const engine::LaunchInfo launch = engine::detectLaunch();
        launch.launched || launch.unjoinable) {
        if (launch.rank == 0) {
            bool ok = false;
            const int towers = p.isSet(QStringLiteral("towers"))
                                   ? p.value(QStringLiteral("towers")).toInt(&ok)
                                   : 1;
            const QString total = p.isSet(QStringLiteral("towers")) && !ok
                                      ? QStringLiteral("%1 x your towers").arg(launch.size)
                                      : QString::number(qint64(launch.size) * std::max(towers, 1));
            io.err << "towers-cli lr-find: error: the range test runs in one process, but "
                   << QString::fromStdString(launch.launcher) << " started " << launch.size
                   << " (each would run the whole test and print it). A run of " << launch.size
                   << " processes trains bitwise what one process of all their towers trains: "
                      "run the test alone, without mpirun or srun, with the run's towers in "
                      "total (towers-cli lr-find --towers "
                   << total << " ...), then train with its rate across the processes.\n";
            return ExitUsage;
        }
        return ExitOk;
    }
    return std::nullopt;
}

// What the command line asks of the test, as the steps below read it in turn: the options, and
// what each step decides for the next.
struct LrFindRequest
{
    LrFindRequest(const QCommandLineParser& parser, CommandIo& cio) : p(parser), io(cio) {}

    const QCommandLineParser& p;
    CommandIo& io;
    DeviceChoice device;
    std::optional<engine::Precision> precision;
    std::vector<std::filesystem::path> searchPath;
    QString dataset;
    QString initFrom;                         // the checkpoint --init-from names, or ""
    const engine::ModelInfo* model = nullptr; // the model chosen (kept for the process)
    QString modelArgument;                    // how the suggestion names the model, or ""
    engine::TrainConfig c;                    // the configuration of the run the test is for
    engine::LrRangeOptions o;
    int towers = 1, threads = 0, batch = 0;
    bool bf16 = false;
    QString dataDir;        // --data-dir
    bool dataInDir = false; // the dataset was found in --data-dir
    bool json = false;      // --json
};

// The device, precision and search path options, then the dataset, the checkpoint to start from
// and the model, with the model's configuration in `r.c`. ExitOk, or the exit code after the
// message.
int chooseDatasetAndModel(LrFindRequest& r)
{
    const QCommandLineParser& p = r.p;
    CommandIo& io = r.io;
    DeviceChoice& device = r.device;
    std::optional<engine::Precision>& precision = r.precision;
    std::vector<std::filesystem::path>& searchPath = r.searchPath;
    QString& dataset = r.dataset;
    QString& initFrom = r.initFrom;
    engine::TrainConfig& c = r.c;
    if (!readDeviceOptions(p, QStringLiteral("towers-cli lr-find"), io, device)) return ExitUsage;
    if (!precisionOption(p, precision, io)) return ExitUsage;
    if (!searchPathOption(p, io, searchPath)) return ExitUsage;
    dataset = p.value(QStringLiteral("dataset"));
    if (dataset.isEmpty()) dataset = firstDatasetFound(searchPath);
    if (dataset.isEmpty()) {
        io.err << "towers-cli lr-find: no dataset found; name one with --dataset\n";
        return ExitFailure;
    }
    const engine::DatasetSpec spec = engine::datasetSpecAlong(dataset.toStdString(), searchPath);
    if (const int code = initFromOption(p, QStringLiteral("towers-cli lr-find"), io, initFrom);
        code != ExitOk)
        return code;
    std::optional<engine::CheckpointInfo> init;
    if (!initFrom.isEmpty())
        init = engine::readCheckpointInfo(initFrom.toStdString()); // IoError naming it
    const engine::ModelInfo& model = chosenModel(p, init ? &*init : nullptr, nullptr, spec);
    r.model = &model;
    c = engine::defaultConfigFor(model);
    // How the suggestion names the model: as given (a model file's path), by name, or not at all
    // for a model file's network that --init-from brings along.
    r.modelArgument = p.isSet(QStringLiteral("model")) ? p.value(QStringLiteral("model"))
                      : model.definition.empty()       ? QString::fromStdString(model.name)
                                                       : QString();
    c.dataset = dataset.toStdString();
    c.initFrom = initFrom.toStdString();
    return ExitOk;
}

// The test's own options (the rates, the steps) and the run's towers, batch, threads, seed,
// device and precision, into `r.o` and `r.c`. ExitOk, or the exit code after the message.
int sweepOptions(LrFindRequest& r)
{
    const QCommandLineParser& p = r.p;
    CommandIo& io = r.io;
    engine::TrainConfig& c = r.c;
    engine::LrRangeOptions& o = r.o;
    const DeviceChoice& device = r.device;
    const std::optional<engine::Precision>& precision = r.precision;
    int &towers = r.towers, &threads = r.threads, &batch = r.batch;
    batch = c.batchPerTower;
    int seed = int(std::min<std::uint64_t>(c.seed, 1u << 30));
    if (!intOption(p, QStringLiteral("towers"), 1, engine::TrainConfig::kMaxTowers, towers, io) ||
        !intOption(p, QStringLiteral("threads-per-tower"), 0,
                   engine::TrainConfig::kMaxThreadsPerTower, threads, io) ||
        !intOption(p, QStringLiteral("batch-size"), 1, 65536, batch, io) ||
        !batchOptions(p, c, io) || !intOption(p, QStringLiteral("seed"), 0, 1 << 30, seed, io) ||
        !intOption(p, QStringLiteral("steps"), 5, 100000, o.steps, io) ||
        !doubleOption(p, QStringLiteral("min-lr"), 1e-12, 1e6, o.minLr, io) ||
        !doubleOption(p, QStringLiteral("max-lr"), 1e-12, 1e6, o.maxLr, io) ||
        !recipeTermOptions(p, c, io))
        return ExitUsage;
    if (p.isSet(QStringLiteral("optimizer"))) {
        c.optimizer.kind = p.value(QStringLiteral("optimizer")).toStdString();
        try {
            engine::makeOptimizer(c.optimizer); // an unknown kind: the known ones named
        } catch (const engine::Error& e) {
            io.err << "towers-cli lr-find: --optimizer: " << e.what() << "\n";
            return ExitUsage;
        }
    }
    if (!(o.maxLr > o.minLr)) {
        io.err << "towers-cli lr-find: --max-lr must be above --min-lr\n";
        return ExitUsage;
    }
    c.towers = towers;
    applyDeviceChoice(device, c, p.isSet(QStringLiteral("towers")));
    towers = c.towers;
    if (c.backend == "cuda" && !gpuBackendAvailable()) {
        io.err << "towers-cli lr-find: error: --device cuda: " << gpuBackendNote()
               << " Run the test on the CPU with --device cpu.\n";
        return ExitFailure;
    }
    c.threadsPerTower = threads;
    if (threads > 0 && engine::isHostBackend(c.backend))
        noteThreadsBeyondCores(
            io, QStringLiteral("towers-cli lr-find"), long(towers) * threads,
            QStringLiteral("%1 x %2 per tower")
                .arg(QString::fromStdString(engine::counted(towers, "tower", "towers")))
                .arg(threads),
            QStringLiteral("--threads-per-tower 0 shares the cores out"));
    c.batchPerTower = batch;
    c.seed = std::uint64_t(seed);
    if (precision) c.precision = *precision;
    r.bf16 = c.precision == engine::Precision::BFloat16;
    return ExitOk;
}

// The dataset the test measures on (DatasetNotFound: exit 1), with `r.dataDir` and `r.dataInDir`.
engine::Dataset loadData(LrFindRequest& r)
{
    const QCommandLineParser& p = r.p;
    const engine::TrainConfig& c = r.c;
    QString& dataDir = r.dataDir;
    // As train loads it: the copy in --data-dir where that folder holds one (a damaged one there
    // is reported, never passed over), so that the rate is measured on the images train would use.
    dataDir = p.value(QStringLiteral("data-dir"));
    engine::Dataset data = engine::loadDatasetPreferring(c.dataset, dataDir.toStdString(),
                                                         r.searchPath); // DatasetNotFound: exit 1
    // train --data-dir requires the dataset there: the suggestion names it only then.
    r.dataInDir = !dataDir.isEmpty() && engine::datasetFolderIn(c.dataset, dataDir.toStdString());
    return data;
}

// Runs the test on `data`, printing the sweep as it goes unless --json (`r.json`); its result.
engine::LrRangeResult sweep(LrFindRequest& r, const engine::Dataset& data)
{
    const QCommandLineParser& p = r.p;
    CommandIo& io = r.io;
    const engine::ModelInfo& model = *r.model;
    const QString& dataset = r.dataset;
    const engine::TrainConfig& c = r.c;
    const engine::LrRangeOptions& o = r.o;
    const int towers = r.towers, batch = r.batch;
    const bool bf16 = r.bf16;
    r.json = p.isSet(QStringLiteral("json"));
    const bool json = r.json;
    // About ten lines over the sweep, as they come, under a header printed with the first: a
    // configuration the test refuses (a model that cannot take the images) prints none.
    const int every = std::max(1, o.steps / 10);
    // The terms of the loss and the gradients the rate is measured with: a weight decay given
    // (else the model's), label smoothing, clipping.
    QString terms;
    if (p.isSet(QStringLiteral("weight-decay")))
        terms += QStringLiteral(", weight decay ") + QString::number(c.weightDecay);
    if (c.labelSmoothing > 0)
        terms += QStringLiteral(", label smoothing ") + QString::number(c.labelSmoothing);
    if (c.clipGradNorm > 0)
        terms += QStringLiteral(", gradients clipped to ") + QString::number(c.clipGradNorm);
    return engine::runLrRangeTest(c, data, o, [&](const engine::LrRangePoint& pt) {
        if (!json && pt.step == 0)
            io.out << "learning-rate range test: " << QString::fromStdString(model.name) << " on "
                   << dataset << ", "
                   << QString::fromStdString(engine::counted(towers, "tower", "towers")) << " x "
                   << batch
                   << (c.accumulate > 1 ? QStringLiteral(" x %1 accumulated").arg(c.accumulate)
                                        : QString())
                   << ", " << (bf16 ? "bf16, " : "") << QString::fromStdString(c.optimizer.kind)
                   << terms << ", " << o.steps << " steps from " << lrText(o.minLr) << " to "
                   << lrText(o.maxLr) << "\n  learning rate      loss  smoothed\n";
        if (!json && pt.step % every == 0) {
            io.out << "  " << lrText(pt.lr).leftJustified(13)
                   << QString::number(pt.loss, 'f', 4).rightJustified(10)
                   << QString::number(pt.smoothed, 'f', 4).rightJustified(10) << "\n";
            io.out.flush();
        }
        return true;
    });
}

// The result as --json prints it: every step's rate and losses, and the suggestion.
QJsonObject reportJson(const LrFindRequest& r, const engine::LrRangeResult& result)
{
    const engine::ModelInfo& model = *r.model;
    const QString& dataset = r.dataset;
    const engine::TrainConfig& c = r.c;
    QJsonArray points;
    for (const auto& pt : result.points)
        points.append(QJsonObject{{QStringLiteral("step"), pt.step},
                                  {QStringLiteral("lr"), pt.lr},
                                  {QStringLiteral("loss"), pt.loss},
                                  {QStringLiteral("smoothed"), pt.smoothed}});
    return QJsonObject{{QStringLiteral("model"), QString::fromStdString(model.name)},
                       {QStringLiteral("dataset"), dataset},
                       {QStringLiteral("precision"),
                        QString::fromStdString(std::string(engine::precisionName(c.precision)))},
                       {QStringLiteral("points"), points},
                       {QStringLiteral("diverged"), result.diverged},
                       {QStringLiteral("steepest_lr"), result.steepestLr},
                       {QStringLiteral("minimum_lr"), result.minimumLr},
                       {QStringLiteral("suggested_lr"), result.suggestedLr},
                       {QStringLiteral("note"), QString::fromStdString(result.note)}};
}

// The result as text: where the loss ran away, and the rate suggested with the train command
// line that uses it (or why there is none).
void printSuggestion(const LrFindRequest& r, const engine::LrRangeResult& result)
{
    const QCommandLineParser& p = r.p;
    CommandIo& io = r.io;
    const engine::TrainConfig& c = r.c;
    const engine::LrRangeOptions& o = r.o;
    const DeviceChoice& device = r.device;
    const QString &dataset = r.dataset, &dataDir = r.dataDir, &initFrom = r.initFrom,
                  &modelArgument = r.modelArgument;
    const int towers = r.towers, threads = r.threads, batch = r.batch;
    const bool dataInDir = r.dataInDir, bf16 = r.bf16;
    if (result.diverged && !result.points.empty())
        io.out << "the loss ran away at a learning rate of " << lrText(result.points.back().lr)
               << " (" << o.divergeFactor << " times its lowest): stopped there\n";
    if (result.suggestedLr <= 0) {
        io.out << "no suggestion: " << QString::fromStdString(result.note) << "\n";
        return;
    }
    io.out << "lowest smoothed loss at a learning rate of " << lrText(result.minimumLr) << "\n"
           << "suggested learning rate: " << lrText(result.suggestedLr) << " ("
           << QString::fromStdString(result.note) << ")\n"
           << "use it: towers-cli train --dataset " << shellWord(dataset)
           << (dataInDir ? QStringLiteral(" --data-dir ") + shellWord(dataDir) : QString())
           << (modelArgument.isEmpty() ? QString()
                                       : QStringLiteral(" --model ") + shellWord(modelArgument))
           << " --towers "
           << towers
           // The batch and threads the rate was measured with, where they are not the recipe's.
           << (p.isSet(QStringLiteral("batch-size")) ? QStringLiteral(" --batch-size %1").arg(batch)
                                                     : QString())
           << (c.accumulate > 1 ? QStringLiteral(" --accumulate %1").arg(c.accumulate) : QString())
           << (c.sampling == "balanced" ? QStringLiteral(" --sampling balanced") : QString())
           << (p.isSet(QStringLiteral("threads-per-tower"))
                   ? QStringLiteral(" --threads-per-tower %1").arg(threads)
                   : QString())
           << (c.backend != "cuda"   ? QString()
               : device.gpus.empty() ? QStringLiteral(" --device cuda")
                                     : QStringLiteral(" --gpus ") + p.value(QStringLiteral("gpus")))
           << (initFrom.isEmpty() ? QString()
                                  : QStringLiteral(" --init-from ") + shellWord(initFrom))
           << (bf16 ? " --precision bf16" : "")
           // The recipe changes the rate was measured with.
           << (p.isSet(QStringLiteral("optimizer"))
                   ? QStringLiteral(" --optimizer ") + p.value(QStringLiteral("optimizer"))
                   : QString())
           << (p.isSet(QStringLiteral("weight-decay"))
                   ? QStringLiteral(" --weight-decay ") + QString::number(c.weightDecay)
                   : QString())
           << (p.isSet(QStringLiteral("label-smoothing"))
                   ? QStringLiteral(" --label-smoothing ") + QString::number(c.labelSmoothing)
                   : QString())
           << (p.isSet(QStringLiteral("clip-grad-norm"))
                   ? QStringLiteral(" --clip-grad-norm ") + QString::number(c.clipGradNorm)
                   : QString())
           << " --lr " << lrText(result.suggestedLr) << "\n";
}

} // namespace

int runLrFind(const QStringList& args, CommandIo& io)
{
    QCommandLineParser p;
    addLrFindOptions(p);
    int code = 0;
    if (!parseOrExplain(p, args, io, code, Arguments::None)) return code;
    if (const std::optional<int> ended = launchedExit(p, io)) return *ended;
    LrFindRequest r(p, io);
    if (code = chooseDatasetAndModel(r); code != ExitOk) return code;
    if (code = sweepOptions(r); code != ExitOk) return code;
    const engine::Dataset data = loadData(r);
    const engine::LrRangeResult result = sweep(r, data);
    if (r.json) {
        io.out << QJsonDocument(reportJson(r, result)).toJson(QJsonDocument::Indented);
        return ExitOk;
    }
    printSuggestion(r, result);
    return ExitOk;
}

} // namespace towers::app
