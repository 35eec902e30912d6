// towers-cli train: a tower-replicated training run on a dataset, into a run directory (what it
// prints of the training: cli_observer.h; its options and the settings its processes compare:
// train_options.h).
#include <QDateTime>
#include <QDir>
#include <QEventLoop>
#include <QFileInfo>
#include <QJsonObject>
#include <csignal>
#include <cstring>
#include <optional>
#include <thread>

#include "app/cli/cli_observer.h"
#include "app/cli/command.h"
#include "app/cli/train_command.h"
#include "app/cli/train_options.h"
#include "app/data/data_dirs.h"
#include "app/devices/device_list.h"
#include "app/process/interrupt_notifier.h"
#include "app/runs/run_builder.h"
#include "engine/data/dataset.h"
#include "engine/data/dataset_manifest.h"
#include "engine/dist/process_state.h"
#include "engine/models/model_file.h"
#include "engine/models/registry.h"
#include "engine/train/checkpoint.h"
#include "engine/train/recipe.h"
#include "engine/train/training_session.h"

namespace towers::app {

namespace {

using engine::TrainConfig;

// A resume that changes a run's length lays a schedule over the whole run (cosine, one-cycle)
// out again for the new one: what that does to the learning rate where the run goes on, in words;
// "" where nothing changes (the same length, a schedule of epochs or none, no step done yet).
QString scheduleChange(const TrainConfig& before, const engine::Trainer& trainer)
{
    using Kind = engine::LrSchedule::Kind;
    const engine::LrSchedule& s = before.schedule;
    if (s.kind != Kind::Cosine && s.kind != Kind::OneCycle) return {};
    const std::int64_t perEpoch = trainer.stepsPerEpoch(), done = trainer.step();
    const std::int64_t was = before.totalSteps(perEpoch), now = trainer.totalSteps();
    if (was == now || done < 1 || done >= now) return {};
    const double last = s.at(done - 1, perEpoch, was), next = s.at(done, perEpoch, now);
    const auto rate = [](double lr) { return QString::number(lr, 'g', 3); };
    return QStringLiteral("the %1 learning-rate schedule is laid out again for %2 steps (it was "
                          "for %3): step %4 trained at %5, step %6 trains at %7")
        .arg(QString::fromStdString(engine::LrSchedule::kindName(s.kind)))
        .arg(now)
        .arg(was)
        .arg(done)
        .arg(rate(last))
        .arg(done + 1)
        .arg(rate(next));
}

bool int64Option(const QCommandLineParser& p, const QString& name, qint64 min, qint64 max,
                 std::int64_t& value, CommandIo& io)
{
    if (!p.isSet(name)) return true;
    bool ok = false;
    const qint64 v = p.value(name).toLongLong(&ok);
    if (!ok || v < min || v > max) {
        io.err << io.program << ": --" << name << " must be an integer from " << min << " to "
               << max << ", got '" << p.value(name) << "'\n";
        return false;
    }
    value = v;
    return true;
}

// What the command line asks of a run, as the steps below read it in turn: the options, the
// process group, and what each step decides for the next.
struct TrainRequest
{
    TrainRequest(const QCommandLineParser& parser, CommandIo& cio, engine::ProcessGroup* g)
        : p(parser), io(cio), group(g)
    {
    }

    const QCommandLineParser& p;
    CommandIo& io;
    engine::ProcessGroup* group = nullptr;
    bool lead = true; // rank 0, or the only process: decides, writes and prints
    DeviceChoice device;
    std::optional<engine::Precision> precision;
    std::vector<std::filesystem::path> searchPath;
    bool resume = false; // --resume, or --resume-or-start finding the run there
    bool resumeOrStart = false;
    QString runDir; // --run-dir, or the run a resume found
    // The process count of --like's run and its examples a step in each, as rank 0 read them.
    int likeProcesses = 0;
    qint64 likeBatchPerProcess = 0;
    int loaderWorkers = 1;
};

// The absolute path of the checkpoint --init-from names (a run gives its newest, or its best with
// --best).
int initFromFile(const TrainRequest& r, QString& file)
{
    return initFromOption(r.p, QStringLiteral("towers-cli train"), r.io, file);
}

// The options that decide what kind of start this is (a new run, a resume) and that the others
// must agree with. ExitOk, or the exit code after the message.
int readStartOptions(TrainRequest& r)
{
    const QCommandLineParser& p = r.p;
    CommandIo& io = r.io;
    engine::ProcessGroup* group = r.group;
    DeviceChoice& device = r.device;
    if (!readDeviceOptions(p, QStringLiteral("towers-cli train"), io, device)) return ExitUsage;
    if (device.allGpus && group && group->localSize() > 1) { // every process says so, and stops
        io.err << "towers-cli train: --gpus all would give each of the " << group->localSize()
               << " processes on this machine every GPU; leave out --gpus and they share them "
                  "out by local rank\n";
        return ExitUsage;
    }
    if (!precisionOption(p, r.precision, io)) return ExitUsage;
    if (p.isSet(QStringLiteral("steps")) && p.isSet(QStringLiteral("epochs"))) {
        io.err << "towers-cli train: give --steps or --epochs, not both\n";
        return ExitUsage;
    }
    if (!searchPathOption(p, io, r.searchPath)) return ExitUsage;
    r.lead = !group || group->rank() == 0;
    if (!initBestUsable(p, QStringLiteral("towers-cli train"), io)) return ExitUsage;
    bool& resume = r.resume;
    resume = p.isSet(QStringLiteral("resume"));
    r.resumeOrStart = p.isSet(QStringLiteral("resume-or-start"));
    const bool resumeOrStart = r.resumeOrStart;
    if (resumeOrStart) {
        if (resume || p.isSet(QStringLiteral("overwrite"))) {
            io.err << "towers-cli train: --resume-or-start decides by itself; give it without "
                      "--resume or --overwrite\n";
            return ExitUsage;
        }
        if (!p.isSet(QStringLiteral("run-dir"))) {
            io.err << "towers-cli train: --resume-or-start needs --run-dir (the folder the job "
                      "continues, or starts)\n";
            return ExitUsage;
        }
        // Rank 0's folder decides, for every process.
        resume = QFileInfo::exists(
            QDir(p.value(QStringLiteral("run-dir"))).filePath(QStringLiteral("config.json")));
        if (group) resume = group->broadcastString(resume ? "1" : "0", 0) == "1";
    }

    if (p.isSet(QStringLiteral("restart")) && !resume && !resumeOrStart) {
        io.err
            << "towers-cli train: --restart is for --resume (a new run starts at step 0 anyway)\n";
        return ExitUsage;
    }
    if (p.isSet(QStringLiteral("like")) && (resume || resumeOrStart)) {
        io.err << "towers-cli train: --like is for a new run (a resumed run keeps its own "
                  "configuration)\n";
        return ExitUsage;
    }
    if (p.isSet(QStringLiteral("overwrite")) && resume) {
        io.err << "towers-cli train: --overwrite is for a new run; to start a resumed run over, "
                  "use --restart\n";
        return ExitUsage;
    }
    return ExitOk;
}

// A resumed run's configuration, as rank 0 reads it from the run (the other processes take it
// from rank 0), with the run-defining options checked against it.
int resumedConfig(TrainRequest& r, TrainConfig& c)
{
    const QCommandLineParser& p = r.p;
    CommandIo& io = r.io;
    QString& runDir = r.runDir;
    if (runDir.isEmpty() && defaultRunsDir().isEmpty()) {
        io.err << "towers-cli train: --resume: "
               << QString::fromStdString(noRunsFolder(", or the run with --run-dir")) << "\n";
        return ExitFailure;
    }
    if (runDir.isEmpty()) runDir = newestRun(defaultRunsDir());
    if (runDir.isEmpty()) {
        io.err << "towers-cli train: --resume: no run to resume in " << defaultRunsDir()
               << " (name one with --run-dir)\n";
        return ExitUsage;
    }
    try {
        c = readRunConfig(runDir);
    } catch (const engine::Error& e) {
        // Not a run: the command line's mistake; a damaged config.json: the run's.
        io.err << "towers-cli train: --resume: " << e.what() << "\n";
        return exitCodeOf(e);
    }
    for (const QString& o : runDefiningOptions()) {
        if (!p.isSet(o)) continue;
        const QString value = p.value(o);
        if (o == QLatin1String("model") && engine::namesModelFile(value.toStdString())) {
            // A model file (a requeued job's command line): the run's network if the file
            // describes it (the run keeps its own copy in config.json), whatever its path.
            try {
                const engine::ModelInfo& m = modelOption(value);
                if (m.name == c.model && m.definition == c.modelDefinition) continue;
                io.err << "towers-cli train: --model cannot change when resuming: " << value
                       << " describes "
                       << (m.name == c.model
                               ? QStringLiteral("a different '%1' than the run's copy (its "
                                                "network, recipe or description differ)")
                                     .arg(QString::fromStdString(c.model))
                               : QStringLiteral("the model '%1', not the run's '%2'")
                                     .arg(QString::fromStdString(m.name),
                                          QString::fromStdString(c.model)))
                       << " (the run keeps its model in its config.json: resume without "
                          "--model, or start a new run to change it)\n";
                return ExitUsage;
            } catch (const engine::Error& e) {
                io.err << "towers-cli train: --model " << value << ": " << e.what()
                       << " (a resume may leave --model out: the run keeps its network in "
                          "its config.json)\n";
                return exitCodeOf(e);
            }
        }
        if (const QString why = resumeMismatch(o, value, c); !why.isEmpty()) {
            io.err << "towers-cli train: " << why << "\n";
            return ExitUsage;
        }
    }
    // The same --init-from as the run's is accepted (a requeued job's command line): the
    // weights it gave are in the run's checkpoints, or, where it has none yet, are read
    // from it again.
    if (p.isSet(QStringLiteral("init-from"))) {
        QString file;
        if (const int code = initFromFile(r, file); code != ExitOk) return code;
        if (file.toStdString() != c.initFrom) {
            io.err << "towers-cli train: --init-from cannot change when resuming: the run "
                      "started from "
                   << (c.initFrom.empty() ? QStringLiteral("its seed's weights")
                                          : QString::fromStdString(c.initFrom))
                   << ", the command line says " << file << "\n";
            return ExitUsage;
        }
    }
    return ExitOk;
}

// --like: the configuration of the run named, which the options given then change. Rank 0 reads
// it; the other processes take the configuration from it (`like` stays empty there).
int likeConfig(TrainRequest& r, std::optional<TrainConfig>& like)
{
    CommandIo& io = r.io;
    if (!r.p.isSet(QStringLiteral("like")) || !r.lead) return ExitOk;
    const QString given = r.p.value(QStringLiteral("like"));
    const QString folder = runFolderOf(given, defaultRunsDir());
    if (folder.isEmpty()) {
        io.err << "towers-cli train: --like: no run '" << given << "': "
               << (defaultRunsDir().isEmpty()
                       ? QStringLiteral("no such folder, and ") +
                             QString::fromStdString(noRunsFolder())
                       : QStringLiteral("neither a folder nor a run in ") + defaultRunsDir() +
                             QStringLiteral(" (towers-cli runs lists them)"))
               << "\n";
        return ExitUsage;
    }
    try {
        like = likeRunConfig(folder, &r.likeProcesses);
        r.likeBatchPerProcess = qint64(like->towers) * like->examplesPerTowerStep();
    } catch (const engine::Error& e) {
        io.err << "towers-cli train: --like: " << e.what() << "\n";
        return exitCodeOf(e);
    }
    io.err << "towers-cli train: a new run like " << QDir(folder).absolutePath() << "\n";
    return ExitOk;
}

// The options of a new run's training (towers, batch, optimizer, schedule, augmentation,
// validation) over `c`, its model's defaults or --like's run.
int trainingOptions(const TrainRequest& r, const std::optional<TrainConfig>& like, TrainConfig& c)
{
    const QCommandLineParser& p = r.p;
    CommandIo& io = r.io;
    int towers = like ? like->towers : 1, threads = like ? like->threadsPerTower : 0,
        batch = c.batchPerTower;
    std::int64_t seed = std::int64_t(c.seed);
    if (!intOption(p, QStringLiteral("towers"), 1, TrainConfig::kMaxTowers, towers, io) ||
        !intOption(p, QStringLiteral("threads-per-tower"), 0, TrainConfig::kMaxThreadsPerTower,
                   threads, io) ||
        !intOption(p, QStringLiteral("batch-size"), 1, 65536, batch, io) ||
        !batchOptions(p, c, io) ||
        !int64Option(p, QStringLiteral("seed"), 0, std::numeric_limits<qint64>::max(), seed, io) ||
        !doubleOption(p, QStringLiteral("lr"), 1e-12, 1e6, c.schedule.lr, io) ||
        !doubleOption(p, QStringLiteral("momentum"), 0, 0.999999, c.optimizer.momentum, io) ||
        !doubleOption(p, QStringLiteral("ema-decay"), 0, 0.999999999, c.emaDecay, io) ||
        !recipeTermOptions(p, c, io))
        return ExitUsage;
    c.towers = towers;
    c.threadsPerTower = threads;
    c.batchPerTower = batch;
    c.seed = std::uint64_t(seed);
    if (p.isSet(QStringLiteral("optimizer")))
        c.optimizer.kind = p.value(QStringLiteral("optimizer")).toStdString();
    if (p.isSet(QStringLiteral("lr-schedule"))) {
        c.schedule.kind = engine::LrSchedule::kindFromName(
            scheduleName(p.value(QStringLiteral("lr-schedule"))).toStdString());
    }
    QString augment = like ? QString::fromStdString(like->augmentation) : QString();
    if (!choiceOption(p, QStringLiteral("augment"), {"default", "tutorial", "none"}, augment, io))
        return ExitUsage;
    c.augmentation = augmentName(augment).toStdString();
    if (p.isSet(QStringLiteral("validation"))) {
        const auto share = validationShare(p.value(QStringLiteral("validation")));
        if (!share) {
            io.err << "towers-cli train: --validation: expected a share of the training "
                      "images from 0 to 0.5 (0.1) or a percentage up to 50% (10%), got '"
                   << p.value(QStringLiteral("validation")) << "'\n";
            return ExitUsage;
        }
        c.validation = *share;
    }
    return ExitOk;
}

// A new run's configuration: --like's run, the dataset, the checkpoint to start from and the
// model, then the training options. Every process builds one; rank 0's is the one that counts.
int newRunConfig(TrainRequest& r, TrainConfig& c)
{
    const QCommandLineParser& p = r.p;
    CommandIo& io = r.io;
    const bool lead = r.lead;
    std::vector<std::filesystem::path>& searchPath = r.searchPath;
    std::optional<TrainConfig> like;
    if (const int code = likeConfig(r, like); code != ExitOk) return code;
    QString dataset = p.value(QStringLiteral("dataset"));
    if (dataset.isEmpty() && like) dataset = QString::fromStdString(like->dataset);
    // The run's own dataset is looked for where that run found it first (an imported one
    // need not be on the search path), unless --data-dir says where.
    if (like && !like->dataDir.empty() && like->dataset == dataset.toStdString() &&
        !p.isSet(QStringLiteral("data-dir")))
        searchPath.insert(searchPath.begin(), std::filesystem::path(like->dataDir));
    if (dataset.isEmpty()) {
        dataset = firstDatasetFound(searchPath);
        if (dataset.isEmpty()) {
            io.err << "towers-cli train: no dataset found (looked in";
            for (const auto& f : searchPath) io.err << " " << QString::fromStdString(f.string());
            io.err << "); get one with 'towers-cli download fashion-mnist' or install Debian's "
                      "dataset-fashion-mnist\n";
            return ExitFailure;
        }
    }
    // The table's, or one imported from a folder of images; UnknownName -> exit 2 with the
    // list.
    const engine::DatasetSpec spec = engine::datasetSpecAlong(dataset.toStdString(), searchPath);
    // Rank 0 reads the checkpoint to start from (and sends its weights); the other processes
    // take the configuration from it below. Its model is the run's unless --model says.
    std::string initFrom;
    std::optional<engine::CheckpointInfo> init;
    if (p.isSet(QStringLiteral("init-from")) && lead) {
        QString file;
        if (const int code = initFromFile(r, file); code != ExitOk) return code;
        initFrom = file.toStdString();
        init = engine::readCheckpointInfo(initFrom); // IoError naming the file
    } else if (like) {
        initFrom = like->initFrom; // the weights that run started from, if any
    }
    // Rank 0 reads a model file too: the other processes take its network with the
    // configuration below (another machine need not see the file).
    const engine::ModelInfo& model =
        chosenModel(p, init ? &*init : nullptr, like ? &*like : nullptr, spec, lead);
    c = like ? *like : engine::defaultConfigFor(model);
    c.model = model.name;
    c.modelDefinition = model.definition;
    if (like && like->dataset != dataset.toStdString()) {
        c.dataDir.clear(); // where that run found its own dataset
        c.classes = 0;     // the new dataset's, when the run is built
    }
    c.dataset = dataset.toStdString();
    c.initFrom = initFrom;
    return trainingOptions(r, like, c);
}

// Rank 0's configuration and run folder, to every process; the process count checked against
// a resumed run's and compared with --like's.
int sharedConfig(TrainRequest& r, TrainConfig& c)
{
    CommandIo& io = r.io;
    engine::ProcessGroup* group = r.group;
    const bool resume = r.resume;
    QString& runDir = r.runDir;
    const int likeProcesses = r.likeProcesses;
    const qint64 likeBatchPerProcess = r.likeBatchPerProcess;
    const int processes = group ? group->size() : 1;
    if (group) {
        c = TrainConfig::fromJson(group->broadcastString(c.toJson(), 0));
        runDir = QString::fromStdString(group->broadcastString(runDir.toStdString(), 0));
    }
    if (resume && c.processes != processes) {
        io.err << "towers-cli train: --resume: the run in " << runDir << " trains on "
               << c.processes << (c.processes == 1 ? " process" : " processes") << ", this is "
               << processes << "; continue it with "
               << (c.processes == 1
                       ? QStringLiteral("towers-cli alone")
                       : QStringLiteral("mpirun -np %1 (or srun -n %1)").arg(c.processes))
               << "\n";
        return ExitUsage;
    }
    // A run like one of another process count: its global batch differs (processes x towers x
    // batch x accumulate), which the user may not mean. Said, not refused: it is a new run. Where
    // this run's batches add up to that run's, accumulating them here trains as it did: the same
    // examples and dropout masks a step (TowerSetOptions::accumulate).
    const qint64 likeGlobal = likeProcesses * likeBatchPerProcess,
                 global = qint64(processes) * c.towers * c.examplesPerTowerStep(),
                 batches = qint64(processes) * c.towers * c.batchPerTower;
    if (likeProcesses > 0 && likeProcesses != processes && likeGlobal != global)
        io.err << "towers-cli train: note: the run trained on " << likeProcesses
               << (likeProcesses == 1 ? " process" : " processes") << " (a global batch of "
               << likeGlobal << "), this is " << processes
               << (processes == 1 ? " process" : " processes") << " (a global batch of " << global
               << "); to train as it did, start it with "
               << (likeProcesses == 1
                       ? QStringLiteral("towers-cli alone")
                       : QStringLiteral("mpirun -np %1 (or srun -n %1)").arg(likeProcesses))
               << (likeGlobal > global && likeGlobal % batches == 0 &&
                           likeGlobal / batches <= TrainConfig::kMaxAccumulate
                       ? QStringLiteral(", or here with --accumulate %1 (its batches one after "
                                        "the other on these towers)")
                             .arg(likeGlobal / batches)
                       : QString())
               << "\n";
    c.processes = processes;
    return ExitOk;
}

// What may change on resume too: the length (to extend a run), logging, checkpointing, the
// device, the precision and the data folder.
int runningOptions(TrainRequest& r, TrainConfig& c)
{
    const QCommandLineParser& p = r.p;
    CommandIo& io = r.io;
    const bool resume = r.resume;
    if (p.isSet(QStringLiteral("steps"))) {
        c.epochs = 0;
        if (!int64Option(p, QStringLiteral("steps"), 1, TrainConfig::kMaxSteps, c.steps, io))
            return ExitUsage;
    }
    if (p.isSet(QStringLiteral("epochs"))) {
        c.steps = 0;
        if (!doubleOption(p, QStringLiteral("epochs"), 1e-6, TrainConfig::kMaxEpochs, c.epochs, io))
            return ExitUsage;
    }
    int keep = c.keepCheckpoints;
    if (!int64Option(p, QStringLiteral("checkpoint-every"), 0, std::numeric_limits<qint64>::max(),
                     c.checkpointEvery, io) ||
        !int64Option(p, QStringLiteral("eval-every"), 0, std::numeric_limits<qint64>::max(),
                     c.evalEvery, io) ||
        !int64Option(p, QStringLiteral("log-every"), 1, std::numeric_limits<qint64>::max(),
                     c.logEvery, io) ||
        !int64Option(p, QStringLiteral("histogram-every"), 0, std::numeric_limits<qint64>::max(),
                     c.histogramEvery, io) ||
        !intOption(p, QStringLiteral("keep-checkpoints"), 1, 1000000, keep, io) ||
        !intOption(p, QStringLiteral("patience"), 0, 1000000, c.patience, io) ||
        !intOption(p, QStringLiteral("loader-workers"), 0, 64, r.loaderWorkers, io))
        return ExitUsage;
    if (p.isSet(QStringLiteral("min-delta"))) {
        const auto delta = shareOf(p.value(QStringLiteral("min-delta")), engine::kMaxMinDelta);
        if (!delta) {
            io.err << "towers-cli train: --min-delta: expected a gain in precision @ 1 from 0 to "
                      "50% (0.2%) or as a share from 0 to 0.5 (0.002), got '"
                   << p.value(QStringLiteral("min-delta")) << "'\n";
            return ExitUsage;
        }
        c.minDelta = *delta;
    }
    c.keepCheckpoints = keep;
    // The device may change on resume (a checkpoint holds host tensors): a GPU run continues on
    // the CPU when its GPU is gone, and the other way round.
    applyDeviceChoice(r.device, c, resume || p.isSet(QStringLiteral("towers")));
    if (p.isSet(QStringLiteral("tf32"))) c.allowTf32 = true;
    // The precision too: the checkpoints are float32, whatever the precision they were trained in
    // (the trainer logs a change).
    if (r.precision) c.precision = *r.precision;
    QString allreduce = QString::fromStdString(c.allreduce),
            gpuData = QString::fromStdString(c.gpuData);
    if (!choiceOption(p, QStringLiteral("allreduce"), {"auto", "host"}, allreduce, io) ||
        !choiceOption(p, QStringLiteral("gpu-data"), {"auto", "off"}, gpuData, io))
        return ExitUsage;
    c.allreduce = allreduce.toStdString();
    c.gpuData = gpuData.toStdString();
    if (!onOffOption(p, QStringLiteral("cuda-graphs"), c.cudaGraphs, io) ||
        !onOffOption(p, QStringLiteral("cudnn-benchmark"), c.cudnnBenchmark, io))
        return ExitUsage;
    if (!doubleOption(p, QStringLiteral("bucket-mb"), 0, TrainConfig::kMaxBucketMb, c.bucketMb, io))
        return ExitUsage;
    // (A GPU run's own TF32, resumed on the CPU, has no effect there: only the option is refused.)
    if (c.backend != "cuda" && c.allowTf32 && p.isSet(QStringLiteral("tf32"))) {
        io.err << "towers-cli train: --tf32 is for --device cuda\n";
        return ExitUsage;
    }
    if (c.backend != "cuda" && c.cudnnBenchmark && p.isSet(QStringLiteral("cudnn-benchmark"))) {
        io.err << "towers-cli train: --cudnn-benchmark is for --device cuda\n";
        return ExitUsage;
    }
    if (c.backend == "cuda" && !gpuBackendAvailable()) {
        io.err << "towers-cli train: error: --device cuda: " << gpuBackendNote()
               << (resume ? " Continue this run on the CPU with --device cpu.\n"
                          : " Train on the CPU with --device cpu.\n");
        return ExitFailure;
    }
    if (p.isSet(QStringLiteral("data-dir"))) {
        c.dataDir = QDir(p.value(QStringLiteral("data-dir"))).absolutePath().toStdString();
        // A folder the user names is used or refused with the reason, never silently passed over
        // for a copy elsewhere.
        std::string why;
        if (!engine::datasetFolderIn(c.dataset, c.dataDir, &why)) {
            io.err << "towers-cli train: --data-dir: " << QString::fromStdString(why) << "\n";
            return ExitUsage;
        }
    }
    return ExitOk;
}

// The session to run: a resume's plan, or a new run's (InvalidArgument naming the field -> exit
// 2).
engine::SessionOptions sessionOptions(const TrainRequest& tr, const TrainConfig& c)
{
    const QCommandLineParser& p = tr.p;
    const QString& runDir = tr.runDir;
    const auto& searchPath = tr.searchPath;
    const int workers = tr.loaderWorkers;
    engine::SessionOptions so;
    if (tr.resume) {
        ResumeRequest r;
        r.runDir = runDir;
        r.searchPath = searchPath;
        r.restart = p.isSet(QStringLiteral("restart"));
        r.loaderWorkers = workers;
        r.config = c; // read above, with the changes a resume allows
        so = planResume(std::move(r));
    } else {
        NewRunRequest r;
        r.config = c;
        r.runDir = runDir;
        r.runsDir = defaultRunsDir();
        r.searchPath = searchPath;
        r.overwrite = p.isSet(QStringLiteral("overwrite"));
        r.loaderWorkers = workers;
        so = planNewRun(std::move(r)); // InvalidArgument naming the field -> exit 2
    }
    so.processes = tr.group;
    return so;
}

// Runs the session until it ends, here or by the stop Ctrl-C, SIGTERM or a closed output asks
// for; what the session threw is in `failure`.
engine::Trainer::Outcome runListening(engine::TrainingSession& session,
                                      InterruptNotifier& interrupts, CliObserver& observer,
                                      CommandIo& io, std::exception_ptr& failure)
{
    // The trainer runs on its own thread so that Ctrl-C (delivered to this thread's event loop)
    // can ask it to stop; it then finishes the step, writes a checkpoint and returns.
    // Its output's reader going away (`towers-cli train | head`) stops it so too: a run killed
    // by SIGPIPE would leave no checkpoint of what it trained.
    QEventLoop loop;
    QObject::connect(&interrupts, &InterruptNotifier::interrupted, &loop, [&](int sig) {
        if (sig == SIGPIPE) {
            io.err << "towers-cli train: the output was closed: stopping after this step and "
                      "writing a checkpoint\n";
            io.err.flush();
        } else {
            observer.onLog(std::string("interrupted: stopping after this step and writing a "
                                       "checkpoint (") +
                           (sig == SIGINT ? "Ctrl-C again"
                                          : std::string("another SIG") + ::sigabbrev_np(sig)) +
                           " kills it)");
        }
        session.trainer().requestStop();
    });
    engine::Trainer::Outcome outcome = engine::Trainer::Outcome::Finished;
    observer.startBackgroundOutput();
    std::thread worker([&] {
        try {
            outcome = session.run();
        } catch (...) {
            failure = std::current_exception();
        }
        QMetaObject::invokeMethod(&loop, &QEventLoop::quit, Qt::QueuedConnection);
    });
    loop.exec();
    worker.join();
    observer.finishBackgroundOutput();
    return outcome;
}

// What the run ended with: its step, its last evaluation, its checkpoints and what to do next,
// as text or as --json's last event.
void sayEnd(const TrainRequest& tr, engine::TrainingSession& session, CliObserver& observer,
            engine::Trainer::Outcome outcome, int signal, bool json)
{
    CommandIo& io = tr.io;
    const QString& runDir = tr.runDir;
    const int processes = tr.group ? tr.group->size() : 1;
    const auto& t = session.trainer();
    const bool stopped = outcome == engine::Trainer::Outcome::Stopped;
    const bool early = outcome == engine::Trainer::Outcome::StoppedEarly;
    // With a validation set, the checkpoint to keep is the one best on it (rotation kept it);
    // the test set measures it once, afterwards.
    std::optional<engine::BestCheckpoint> best;
    if (!stopped && t.config().validation > 0 && t.writesRun())
        best = engine::bestCheckpoint(
            session.trainer().runDirectory().checkpoints(),
            engine::readEvaluations(session.trainer().runDirectory().evalPath()));
    // The run's newest checkpoint: the one this process wrote last, or, when it wrote none (a
    // resume of a finished or stopped-early run, which ends at once), the one it restored.
    QString checkpoint = observer.lastCheckpoint();
    if (checkpoint.isEmpty() && t.writesRun()) {
        const auto all = session.trainer().runDirectory().checkpoints();
        if (!all.empty()) checkpoint = QString::fromStdString(all.back().path.string());
    }
    if (json) {
        QJsonObject end{{QStringLiteral("event"),
                         stopped ? QStringLiteral("stopped") : QStringLiteral("finished")},
                        {QStringLiteral("step"), qint64(t.step())},
                        {QStringLiteral("run_dir"), runDir},
                        {QStringLiteral("checkpoint"), checkpoint}};
        if (!stopped) end.insert(QStringLiteral("stopped_early"), early);
        if (observer.haveEval()) {
            end.insert(QStringLiteral("precision_at_1"), observer.lastEval().precisionAt1);
            end.insert(QStringLiteral("set"), QString::fromStdString(observer.lastEval().set));
        }
        if (best) {
            end.insert(QStringLiteral("best_checkpoint"),
                       QString::fromStdString(best->file.path.string()));
            end.insert(QStringLiteral("best_precision_at_1"), best->precisionAt1);
        }
        observer.print(end);
    }
    // With its output closed, the end still reaches the user: on the error stream.
    const bool outputClosed = signal == SIGPIPE;
    if (!json || outputClosed) {
        QTextStream& say = outputClosed ? io.err : io.out;
        say << (stopped ? "stopped"
                : early ? "stopped early"
                        : "finished")
            << " at step " << t.step() << " of " << t.totalSteps();
        if (observer.haveEval())
            say << ", " << QString::fromStdString(observer.lastEval().set) << " precision @ 1 = "
                << QString::number(100 * observer.lastEval().precisionAt1, 'f', 2) << "%"
                << (observer.lastEval().ema ? " (moving averages)" : "");
        say << "\ncheckpoint " << checkpoint << "\n";
        if (best) {
            say << "best on the validation set: step " << best->file.step << " ("
                << QString::number(100 * best->precisionAt1, 'f', 2) << "%), "
                << QString::fromStdString(best->file.path.string()) << "\n"
                << "measure it on the test set: towers-cli eval --checkpoint " << shellWord(runDir)
                << " --best\n";
        } else if (!stopped && !checkpoint.isEmpty()) {
            say << "use it: towers-cli classify --checkpoint " << shellWord(checkpoint)
                << " IMAGE... (or eval, export; towers-cli runs lists the runs)\n";
        }
        if (stopped) say << "continue with: " << resumeCommandLine(runDir, processes) << "\n";
    }
}

// The run itself, from its session's start to what it ended with; the exit code.
int trainSession(TrainRequest& tr, const TrainConfig& c,
                 const std::optional<TrainConfig>& lengthBefore)
{
    const QCommandLineParser& p = tr.p;
    CommandIo& io = tr.io;
    QString& runDir = tr.runDir;
    const bool json = p.isSet(QStringLiteral("json"));
    CliObserver observer(io, json);
    // Ctrl-C, SIGTERM or a closed output from here on stops the run cleanly: the handlers are set
    // before the run folder is made, so that a signal while the session starts (the dataset
    // loading, the towers being built) cannot kill the process with a folder half made (a lock
    // and nothing else, which no listing shows). The byte waits in the notifier's pipe until the
    // event loop below reads it; the trainer then stops after its first step, writing a
    // checkpoint.
    InterruptNotifier interrupts(InterruptNotifier::ClosedOutput::Interrupts);
    // --json ends with one event, also where the run cannot start (its folder locked, its data
    // missing) or fails with an error of another kind (out of memory): said as ever besides.
    const auto sayFailed = [&](const char* message) {
        if (json)
            observer.print({{QStringLiteral("event"), QStringLiteral("failed")},
                            {QStringLiteral("message"), QString::fromUtf8(message)}});
    };
    try {
        const engine::SessionOptions so = sessionOptions(tr, c);
        std::unique_ptr<engine::TrainingSession> sessionPtr;
        runDir = QString::fromStdString(so.runDirectory.string());
        io.err.flush(); // the notes above come before what the run prints
        if (!json) observer.holdLog();
        try {
            sessionPtr = std::make_unique<engine::TrainingSession>(so, &observer);
        } catch (const engine::RunFolderHoldsRun& e) {
            sayFailed(e.what());
            observer.releaseLog();
            io.err << "towers-cli train: error: " << e.what()
                   << ".\nContinue it with --resume, or start a new run "
                   << "there with --overwrite (the earlier run's files are moved to " << runDir
                   << "/set-aside/, never deleted).\n";
            return ExitUsage;
        } catch (const engine::NoCheckpointLoads& e) {
            sayFailed(e.what());
            observer.releaseLog();
            io.err << "towers-cli train: error: " << e.what()
                   << "\nTo start this run over from step 0, add --restart "
                   << "(its files are moved to " << runDir << "/set-aside/, never deleted).\n";
            return ExitFailure;
        }
        engine::TrainingSession& session = *sessionPtr;
        runDir = QString::fromStdString(
            session.options().runDirectory.string()); // a new folder: the one made
        if (!json)
            io.out << "run folder " << runDir << "\n"
                   << "dataset    " << QString::fromStdString(session.dataset().name) << " from "
                   << QString::fromStdString(session.dataset().location.string()) << " ("
                   << session.dataset().train.count << " train, " << session.dataset().test.count
                   << " test)\n";
        io.out.flush();
        observer.releaseLog();
        if (lengthBefore && tr.lead)
            if (const QString change = scheduleChange(*lengthBefore, session.trainer());
                !change.isEmpty()) {
                io.err << "towers-cli train: note: " << change << "\n";
                io.err.flush(); // now, not when the run is over
            }

        std::exception_ptr failure;
        const engine::Trainer::Outcome outcome =
            runListening(session, interrupts, observer, io, failure);
        if (failure) {
            try {
                std::rethrow_exception(failure);
            } catch (const engine::Error& e) {
                // Diverged, bad data, disk full...: the message says what; the last good checkpoint
                // stays.
                sayFailed(e.what());
                io.err << "towers-cli train: error: " << e.what() << "\n";
                if (!observer.lastCheckpoint().isEmpty())
                    io.err << "the last good checkpoint is " << observer.lastCheckpoint() << "\n";
                // The same checkpoint, data and rate would diverge again: what to change.
                if (dynamic_cast<const engine::DivergedError*>(&e))
                    io.err << divergenceAdvice(runDir, c) << "\n";
                return ExitFailure;
            }
        }
        const bool stopped = outcome == engine::Trainer::Outcome::Stopped;
        sayEnd(tr, session, observer, outcome, interrupts.received(), json);
        // 128 + the signal's number, as a shell reports a program the signal ended (130 for Ctrl-C,
        // 143 for SIGTERM, 129 for SIGHUP).
        return stopped && interrupts.received() ? 128 + interrupts.received() : ExitOk;
    } catch (const std::exception& e) {
        sayFailed(e.what());
        throw;
    }
}

} // namespace

int runTrainIn(const QStringList& args, CommandIo& io, engine::ProcessGroup* group)
{
    QCommandLineParser p;
    addTrainOptions(p);
    int code = 0;
    if (!parseOrExplain(p, args, io, code, Arguments::None)) return code;
    // Every process must be started with the same options, by the same build.
    if (group) engine::requireSameSettings(*group, settingsGiven(p));
    TrainRequest r{p, io, group};
    if (code = readStartOptions(r); code != ExitOk) return code;
    TrainConfig c;
    r.runDir = p.value(QStringLiteral("run-dir"));
    // A resume's configuration is read by rank 0; the other processes take it from rank 0.
    if (r.resume && r.lead) code = resumedConfig(r, c);
    if (!r.resume) code = newRunConfig(r, c);
    if (code == ExitOk) code = sharedConfig(r, c);
    if (code != ExitOk) return code;
    // A resumed run's configuration before the length given now changes it.
    const std::optional<TrainConfig> lengthBefore = r.resume ? std::optional(c) : std::nullopt;
    if (code = runningOptions(r, c); code != ExitOk) return code;
    return trainSession(r, c, lengthBefore);
}

} // namespace towers::app
