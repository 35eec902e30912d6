#include "app/cli/command.h"

#include <QDir>
#include <QFileInfo>
#include <QRegularExpression>
#include <locale.h>
#include <wchar.h>

#include "app/data/data_dirs.h"
#include "app/devices/device_list.h"
#include "app/runs/run_builder.h"
#include "app/runs/run_scanner.h"
#include "engine/cpu/cores.h"
#include "engine/data/dataset.h"
#include "engine/data/dataset_spec.h"
#include "engine/errors.h"
#include "engine/gpu/gpu_backend.h"
#include "engine/models/model_file.h"
#include "engine/train/checkpoint.h"
#include "engine/train/classifier.h"
#include "engine/train/recipe.h"

namespace towers::app {

bool parseOrExplain(QCommandLineParser& parser, const QStringList& args, CommandIo& io,
                    int& exitCode, Arguments arguments)
{
    const QCommandLineOption help({QStringLiteral("h"), QStringLiteral("help")},
                                  QStringLiteral("Show this help."));
    parser.addOption(help);
    if (!parser.parse(args)) {
        io.err << io.program << ": " << parser.errorText() << "\n"
               << "Run '" << args.value(0) << " --help' for usage.\n";
        exitCode = ExitUsage;
        return false;
    }
    if (parser.isSet(help)) {
        io.out << helpTextFor(parser, args.value(0));
        exitCode = ExitOk;
        return false;
    }
    if (arguments == Arguments::None && !parser.positionalArguments().isEmpty()) {
        io.err << args.value(0) << ": unexpected argument '" << parser.positionalArguments().first()
               << "'\n";
        exitCode = ExitUsage;
        return false;
    }
    return true;
}

QString helpTextFor(const QCommandLineParser& parser, const QString& program)
{
    QString text = parser.helpText();
    const QLatin1String usage("Usage: ");
    const qsizetype end = text.indexOf(QLatin1String(" [options]"));
    if (text.startsWith(usage) && end >= usage.size())
        text.replace(usage.size(), end - usage.size(), program);
    return text;
}

QString firstDatasetFound(const std::vector<std::filesystem::path>& searchPath)
{
    for (const std::string& name : engine::autoTrainDatasets())
        if (engine::findDataset(name, searchPath)) return QString::fromStdString(name);
    return {};
}

bool doubleOption(const QCommandLineParser& parser, const QString& name, double min, double max,
                  double& value, CommandIo& io)
{
    if (!parser.isSet(name)) return true;
    bool ok = false;
    const double v = parser.value(name).toDouble(&ok);
    if (!ok || !(v >= min && v <= max)) {
        io.err << io.program << ": --" << name << " must be a number from " << min << " to " << max
               << ", got '" << parser.value(name) << "'\n";
        return false;
    }
    value = v;
    return true;
}

bool recipeTermOptions(const QCommandLineParser& parser, engine::TrainConfig& c, CommandIo& io)
{
    return doubleOption(parser, QStringLiteral("weight-decay"), 0, 1, c.weightDecay, io) &&
           doubleOption(parser, QStringLiteral("label-smoothing"), 0, 0.999, c.labelSmoothing,
                        io) &&
           doubleOption(parser, QStringLiteral("clip-grad-norm"), 0, 1e6, c.clipGradNorm, io);
}

bool batchOptions(const QCommandLineParser& parser, engine::TrainConfig& c, CommandIo& io)
{
    QString sampling = QString::fromStdString(c.sampling);
    if (!intOption(parser, QStringLiteral("accumulate"), 1, engine::TrainConfig::kMaxAccumulate,
                   c.accumulate, io) ||
        !choiceOption(parser, QStringLiteral("sampling"), {"uniform", "balanced"}, sampling, io))
        return false;
    c.sampling = sampling.toStdString();
    return true;
}

bool intOption(const QCommandLineParser& parser, const QString& name, int min, int max, int& value,
               CommandIo& io)
{
    if (!parser.isSet(name)) return true;
    bool ok = false;
    const QString text = parser.value(name);
    const int v = text.toInt(&ok);
    if (!ok || v < min || v > max) {
        io.err << io.program << ": --" << name << " must be an integer from " << min << " to "
               << max << ", got '" << text << "'\n";
        return false;
    }
    value = v;
    return true;
}

bool onOffOption(const QCommandLineParser& parser, const QString& name, bool& value, CommandIo& io)
{
    QString text;
    if (!choiceOption(parser, name, {"on", "off"}, text, io)) return false;
    if (!text.isEmpty()) value = text == QLatin1String("on");
    return true;
}

bool choiceOption(const QCommandLineParser& parser, const QString& name,
                  std::initializer_list<const char*> choices, QString& value, CommandIo& io)
{
    if (!parser.isSet(name)) return true;
    const QString text = parser.value(name);
    for (const char* c : choices)
        if (text == QLatin1String(c)) {
            value = text;
            return true;
        }
    QString list;
    int i = 0;
    for (const char* c : choices) {
        ++i;
        if (i > 1) list += i == int(choices.size()) ? QStringLiteral(" or ") : QStringLiteral(", ");
        list += QLatin1String(c);
    }
    io.err << io.program << ": --" << name << " must be " << list << ", got '" << text << "'\n";
    return false;
}

bool precisionOption(const QCommandLineParser& parser, std::optional<engine::Precision>& value,
                     CommandIo& io)
{
    if (!parser.isSet(QStringLiteral("precision"))) return true;
    try {
        value = engine::parsePrecision(parser.value(QStringLiteral("precision")).toStdString());
        return true;
    } catch (const engine::InvalidArgument& e) {
        io.err << io.program << ": --precision: " << e.what() << "\n";
        return false;
    }
}

const engine::ModelInfo& modelOption(const QString& value)
{
    const std::string model = value.toStdString();
    if (!engine::namesModelFile(model)) {
        try {
            return engine::findModel(model);
        } catch (const engine::UnknownName& e) {
            // A file named like a model: say how to give it.
            if (!QFileInfo(value).isFile()) throw;
            throw engine::UnknownName(std::string(e.what()) + "; for the model file " + model +
                                      ", give it as ./" + model +
                                      " (a path with a '/', or a name "
                                      "ending in .json, is a model file)");
        }
    }
    return engine::loadModelFile(model);
}

const engine::ModelInfo& chosenModel(const QCommandLineParser& parser,
                                     const engine::CheckpointInfo* init,
                                     const engine::TrainConfig* like,
                                     const engine::DatasetSpec& spec, bool readFile)
{
    const QString given = parser.value(QStringLiteral("model"));
    if (parser.isSet(QStringLiteral("model")) &&
        (readFile || !engine::namesModelFile(given.toStdString())))
        return modelOption(given);
    if (init) return engine::resolveModel(init->model, init->modelDefinition);
    if (like) return engine::resolveModel(like->model, like->modelDefinition);
    return engine::findModel(engine::defaultModelFor(spec));
}

QString shapeText(const engine::Shape& s)
{
    QStringList parts;
    for (auto d : s.dims()) parts << QString::number(d);
    return parts.join(QLatin1Char('x'));
}

int textColumns(const QString& text)
{
    static const locale_t utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", locale_t(nullptr));
    const auto chars = text.toUcs4(); // QList<uint> in Qt 6.4
    if (!utf8) return int(chars.size());
    const locale_t before = uselocale(utf8);
    int columns = 0;
    for (const auto c : chars) columns += std::max(0, wcwidth(wchar_t(c))); // a control: 0
    uselocale(before);
    return columns;
}

QString padColumns(const QString& text, int columns)
{
    return text + QString(std::max(0, columns - textColumns(text)), QLatin1Char(' '));
}

QJsonArray shapeJson(const engine::Shape& s)
{
    QJsonArray a;
    for (auto d : s.dims()) a.append(qint64(d));
    return a;
}

QString runsDirEntry(const QString& given, const QString& runsDir)
{
    if (runsDir.isEmpty() || given.contains(QLatin1Char('/')) || QFileInfo::exists(given))
        return {};
    return QDir(runsDir).filePath(given);
}

QString runFolderOf(const QString& given, const QString& runsDir)
{
    if (QFileInfo(given).isDir()) return given;
    if (const QString named = runsDirEntry(given, runsDir);
        !named.isEmpty() && QFileInfo(named).isDir())
        return named; // a run's name, as 'runs' lists it
    return {};
}

int exitCodeOf(const std::exception& e)
{
    return dynamic_cast<const engine::InvalidArgument*>(&e) ? ExitUsage : ExitFailure;
}

QString shellWord(const QString& word)
{
    static const QRegularExpression plain(QStringLiteral("^[A-Za-z0-9_@%+=:,./-]+$"));
    if (plain.match(word).hasMatch()) return word;
    QString quoted = word;
    quoted.replace(QLatin1Char('\''), QStringLiteral("'\\''"));
    return QLatin1Char('\'') + quoted + QLatin1Char('\'');
}

QString resumeCommandLine(const QString& runDir, int processes)
{
    return (processes > 1 ? QStringLiteral("mpirun -np %1 ").arg(processes) : QString()) +
           QStringLiteral("towers-cli train --resume --run-dir ") + shellWord(runDir);
}

QString divergenceAdvice(const QString& runDir, const engine::TrainConfig& c)
{
    const bool clips = c.clipGradNorm > 0;
    return QStringLiteral("a resume would diverge again: start a new run like it with a lower "
                          "learning rate (towers-cli lr-find suggests one)%1, e.g. towers-cli "
                          "train --like %2 --lr %3%4")
        .arg(clips ? QString() : QStringLiteral(" or its gradients clipped"), shellWord(runDir),
             QString::number(c.schedule.lr / 10, 'g', 3),
             clips ? QString() : QStringLiteral(" --clip-grad-norm 1"));
}

QList<QCommandLineOption> deviceOptions(const QString& deviceHelp)
{
    return {{QStringLiteral("device"), deviceHelp, QStringLiteral("name")},
            {QStringLiteral("gpus"),
             QStringLiteral(
                 "cuda: the GPUs of the towers, e.g. 0,1,3, or all: every GPU CUDA sees (one "
                 "tower each, unless --towers says more: then round-robin); default: tower t on "
                 "GPU t mod the GPU count (several processes on a machine share its GPUs out by "
                 "their local rank: give them no --gpus)."),
             QStringLiteral("list")}};
}

bool readDeviceOptions(const QCommandLineParser& parser, const QString& command, CommandIo& io,
                       DeviceChoice& out)
{
    QString device = parser.value(QStringLiteral("device"));
    if (!choiceOption(parser, QStringLiteral("device"), {"cpu", "cuda"}, device, io)) return false;
    out = {};
    out.deviceSet = parser.isSet(QStringLiteral("device"));
    out.cuda = out.deviceSet && device == QLatin1String("cuda");
    if (!parser.isSet(QStringLiteral("gpus"))) return true;
    out.gpusSet = true;
    if (parser.value(QStringLiteral("gpus")).trimmed() == QLatin1String("all")) {
        out.allGpus = true;
        if (out.deviceSet && !out.cuda) {
            io.err << command << ": --gpus is for --device cuda\n";
            return false;
        }
        out.cuda = true;
        // Where there is none, the command says why when it asks for the GPU backend.
        if (gpuBackendAvailable())
            for (int g = 0; g < engine::cudaBackend()->deviceCount(); ++g) out.gpus.push_back(g);
        return true;
    }
    for (const QString& item : parser.value(QStringLiteral("gpus")).split(QLatin1Char(','))) {
        bool ok = false;
        const int g = item.trimmed().toInt(&ok);
        if (!ok || g < 0) {
            io.err << command
                   << ": --gpus takes GPU numbers separated by commas (e.g. 0,1,3) or all, got '"
                   << parser.value(QStringLiteral("gpus")) << "'\n";
            return false;
        }
        out.gpus.push_back(g);
    }
    if (out.deviceSet && !out.cuda) {
        io.err << command << ": --gpus is for --device cuda\n";
        return false;
    }
    out.cuda = true;
    return true;
}

void applyDeviceChoice(const DeviceChoice& d, engine::TrainConfig& c, bool keepTowers)
{
    if (!d.deviceSet && !d.gpusSet) return;
    c.backend = d.cuda ? "cuda" : "onednn";
    c.gpus.clear();
    if (d.gpus.empty()) return;
    if (!keepTowers) c.towers = int(d.gpus.size());
    for (int t = 0; t < c.towers; ++t) c.gpus.push_back(d.gpus[std::size_t(t) % d.gpus.size()]);
}

QList<QCommandLineOption> inferenceDeviceOptions()
{
    return {{QStringLiteral("device"),
             QStringLiteral("cpu (default) or cuda: where the network runs (on a GPU as a GPU "
                            "tower evaluates during training)."),
             QStringLiteral("name")},
            {QStringLiteral("gpu"), QStringLiteral("cuda: the GPU, by number (default 0)."),
             QStringLiteral("n")}};
}

int gpuOption(const QCommandLineParser& parser, const QString& command, CommandIo& io,
              QString& device, int& gpu)
{
    if (!parser.isSet(QStringLiteral("gpu"))) return ExitOk;
    if (!intOption(parser, QStringLiteral("gpu"), 0, 1023, gpu, io)) return ExitUsage;
    if (parser.isSet(QStringLiteral("device")) && device != QLatin1String("cuda")) {
        io.err << command << ": --gpu is for --device cuda\n";
        return ExitUsage;
    }
    device = QStringLiteral("cuda");
    return ExitOk;
}

int inferenceDeviceOption(const QCommandLineParser& parser, const QString& command, CommandIo& io,
                          engine::InferenceDevice& out)
{
    QString device = QStringLiteral("cpu");
    if (!choiceOption(parser, QStringLiteral("device"), {"cpu", "cuda"}, device, io))
        return ExitUsage;
    out = {};
    if (const int c = gpuOption(parser, command, io, device, out.gpu); c != ExitOk) return c;
    if (device != QLatin1String("cuda")) return ExitOk;
    if (!gpuBackendAvailable()) {
        io.err << command << ": error: --device cuda: " << gpuBackendNote()
               << " Leave out --device cuda and --gpu to run it on the CPU.\n";
        return ExitFailure;
    }
    if (!gpuNumberUsable(out.gpu, command, io)) return ExitFailure;
    out.backend = "cuda";
    return ExitOk;
}

bool gpuNumberUsable(int gpu, const QString& command, CommandIo& io)
{
    const engine::GpuBackend* backend = engine::cudaBackend();
    const int count = backend ? backend->deviceCount() : 0;
    if (gpu < count) return true;
    io.err << command << ": error: --gpu " << gpu << ": "
           << (count == 1
                   ? QStringLiteral("CUDA sees one GPU here, GPU 0")
                   : QStringLiteral("CUDA sees %1 GPUs here, 0 to %2").arg(count).arg(count - 1))
           << " ('towers-cli devices' lists them)\n";
    return false;
}

QString deviceName(const engine::Device& device)
{
    return device.isHost() ? QStringLiteral("cpu") : QString::fromStdString(device.str());
}

QCommandLineOption bestOption()
{
    return {QStringLiteral("best"),
            QStringLiteral("With a run for --checkpoint: its best checkpoint (the highest "
                           "accuracy of its evaluations, on its validation set when it held one "
                           "out, else on the test set; rotation keeps it) instead of its "
                           "newest.")};
}

QCommandLineOption inferencePrecisionOption()
{
    return {QStringLiteral("precision"),
            QStringLiteral("fp32 or bf16 (convolutions and matrix products in bfloat16 with "
                           "float32 accumulation; needs a CPU with AVX512_BF16 or AMX, faster "
                           "with AMX). Default: the precision the checkpoint was trained in, so "
                           "that the figures are its run's own, where this CPU runs it (else "
                           "fp32, saying so)."),
            QStringLiteral("name")};
}

QCommandLineOption ttaOption()
{
    return {QStringLiteral("tta"),
            QStringLiteral("Test-time augmentation: none (default), or mirror: each image's "
                           "logits averaged with its left-right mirror image's, for a network "
                           "that trained on mirror images (twice the forward passes; often a "
                           "few tenths of a percent more accuracy)."),
            QStringLiteral("kind")};
}

int applyTtaOption(const QCommandLineParser& parser, engine::Classifier& classifier, CommandIo& io)
{
    QString kind;
    if (!choiceOption(parser, QStringLiteral("tta"), {"none", "mirror"}, kind, io))
        return ExitUsage;
    if (kind.isEmpty()) return ExitOk;
    try {
        classifier.setTestTimeAugmentation(
            engine::testTimeAugmentationFromName(kind.toStdString()));
    } catch (const engine::InvalidArgument& e) {
        io.err << io.program << ": --tta " << kind << ": " << QString::fromUtf8(e.what()) << "\n";
        return ExitUsage;
    }
    return ExitOk;
}

QCommandLineOption initBestOption()
{
    return {QStringLiteral("best"),
            QStringLiteral("With a run for --init-from: its best checkpoint (the highest "
                           "accuracy of its evaluations, which rotation keeps) instead of its "
                           "newest.")};
}

bool initBestUsable(const QCommandLineParser& parser, const QString& command, CommandIo& io)
{
    if (!parser.isSet(QStringLiteral("best")) || parser.isSet(QStringLiteral("init-from")))
        return true;
    io.err << command
           << ": --best picks a run's best checkpoint to start from: give --init-from RUN too\n";
    return false;
}

int initFromOption(const QCommandLineParser& parser, const QString& command, CommandIo& io,
                   QString& file)
{
    if (!initBestUsable(parser, command, io)) return ExitUsage;
    if (!parser.isSet(QStringLiteral("init-from"))) return ExitOk;
    const bool best = parser.isSet(QStringLiteral("best"));
    const int r =
        resolveCheckpoint(parser.value(QStringLiteral("init-from")), QStringLiteral("--init-from"),
                          command, io, file, best ? RunCheckpoint::Best : RunCheckpoint::Newest);
    if (r == ExitOk) file = QFileInfo(file).absoluteFilePath();
    return r;
}

int checkpointOption(const QCommandLineParser& parser, const QString& command, CommandIo& io,
                     QString& file, std::optional<engine::VerifiedCheckpoint>* verified)
{
    if (!parser.isSet(QStringLiteral("checkpoint"))) {
        io.err << command
               << ": --checkpoint FILE is required (a checkpoint, or a run folder for "
                  "its newest checkpoint)\n";
        return ExitUsage;
    }
    return resolveCheckpoint(
        parser.value(QStringLiteral("checkpoint")), QStringLiteral("--checkpoint"), command, io,
        file, parser.isSet(QStringLiteral("best")) ? RunCheckpoint::Best : RunCheckpoint::Newest,
        verified);
}

void noteThreadsBeyondCores(CommandIo& io, const QString& command, long threads,
                            const QString& breakdown, const QString& advice)
{
    const std::string note =
        engine::cpu::threadsBeyondCores(threads, breakdown.toStdString(), advice.toStdString());
    if (note.empty()) return;
    io.err << command << ": note: " << QString::fromStdString(note) << "\n";
    io.err.flush();
}

int resolveCheckpoint(const QString& given, const QString& option, const QString& command,
                      CommandIo& io, QString& file, RunCheckpoint which,
                      std::optional<engine::VerifiedCheckpoint>* verified)
{
    if (verified) verified->reset();
    const QString folder = runFolderOf(given, defaultRunsDir());
    if (folder.isEmpty()) {
        if (which == RunCheckpoint::Best) {
            io.err << command << ": --best picks among a run's checkpoints: give " << option
                   << " a run (its folder, or its name as 'towers-cli runs' lists it), not the "
                      "file "
                   << given << "\n";
            return ExitUsage;
        }
        file = given; // a file (or nothing there: the reader says so, naming it)
        return ExitOk;
    }
    QDir run(folder);
    if (!run.exists(QStringLiteral("checkpoints")) && run.dirName() == QLatin1String("checkpoints"))
        run.cdUp();
    if (!run.exists(QStringLiteral("checkpoints"))) {
        io.err << command << ": " << option << ": " << QDir(folder).absolutePath()
               << " is a folder, not a checkpoint, nor a run folder (it has no checkpoints/)\n";
        return ExitFailure;
    }
    QString problem;
    const auto checkpoints = runCheckpoints(run.absolutePath(), &problem);
    if (checkpoints.empty()) {
        io.err << command << ": " << option << ": the run " << run.absolutePath()
               << " has no checkpoint yet" << (problem.isEmpty() ? QString() : ": " + problem)
               << "\n";
        return ExitFailure;
    }
    // A checkpoint is taken only once it reads whole (verifyCheckpoint: every byte against its
    // checksum); a damaged one (a disk that filled, a copy cut short) is passed over for the next,
    // saying so, as a resume does.
    const auto readsWhole = [&](const engine::CheckpointFile& c, QString& why) {
        try {
            engine::VerifiedCheckpoint checked;
            (void)engine::verifyCheckpoint(c.path, nullptr, &checked);
            if (verified) *verified = std::move(checked);
            return true;
        } catch (const engine::Error& e) {
            why = QString::fromUtf8(e.what());
            return false;
        }
    };
    const auto skipping = [&](const engine::CheckpointFile& c, const QString& why) {
        io.err << command << ": note: passing over the checkpoint at step " << c.step
               << ", which does not read: " << why << "\n";
    };
    if (which == RunCheckpoint::Best) {
        const auto evaluations =
            engine::readEvaluations(run.filePath(QStringLiteral("eval.jsonl")).toStdString());
        auto candidates = checkpoints;
        std::optional<engine::BestCheckpoint> best;
        int damaged = 0;
        while ((best = engine::bestCheckpoint(candidates, evaluations))) {
            QString why;
            if (readsWhole(best->file, why)) break;
            skipping(best->file, why);
            ++damaged;
            std::erase_if(candidates, [&](const engine::CheckpointFile& c) {
                return c.path == best->file.path;
            });
        }
        if (!best) {
            io.err << command << ": --best: no checkpoint of the run " << run.absolutePath()
                   << (damaged > 0
                           ? QStringLiteral(" that was evaluated reads whole (%1 "
                                            "evaluated, each above); without --best, %2 "
                                            "takes its newest that reads\n")
                                 .arg(damaged)
                                 .arg(option)
                           : QStringLiteral(" was evaluated (%1); without --best, %2 "
                                            "takes its newest\n")
                                 .arg(evaluations.empty()
                                          ? QStringLiteral("eval.jsonl records no evaluation")
                                          : QStringLiteral("eval.jsonl's %1 with no "
                                                           "checkpoint left")
                                                .arg(QString::fromStdString(
                                                    engine::counted(qint64(evaluations.size()),
                                                                    "evaluation is at a step",
                                                                    "evaluations are at steps"))))
                                 .arg(option));
            return ExitFailure;
        }
        file = QString::fromStdString(best->file.path.string());
        bool validation = false;
        try {
            validation = readRunConfig(run.absolutePath()).validation > 0;
        } catch (const engine::Error&) {
            // an unreadable config.json: its evaluations are named as a test set's
        }
        io.err << command << ": the best checkpoint of " << run.absolutePath()
               << (damaged > 0 ? " that reads" : "") << ": step " << best->file.step
               << (validation ? ", validation accuracy " : ", test accuracy ")
               << QString::number(best->precisionAt1 * 100, 'f', 2) << " %, " << file << "\n";
        // A better evaluation whose checkpoint is gone (deleted, moved): said, not passed over.
        if (const auto top = engine::bestEvaluation(evaluations);
            top && top->precisionAt1 > best->precisionAt1 &&
            !std::any_of(checkpoints.begin(), checkpoints.end(),
                         [&](const engine::CheckpointFile& c) { return c.step == top->step; }))
            io.err << command << ": note: its best evaluation, "
                   << QString::number(top->precisionAt1 * 100, 'f', 2) << " % at step " << top->step
                   << ", has no checkpoint left (rotation keeps it: was it deleted or moved?); "
                      "this is the best of those there are\n";
        io.err.flush();
        return ExitOk;
    }
    for (auto it = checkpoints.rbegin(); it != checkpoints.rend(); ++it) {
        QString why;
        if (!readsWhole(*it, why)) {
            skipping(*it, why);
            continue;
        }
        file = QString::fromStdString(it->path.string());
        io.err << command << ": the newest checkpoint of " << run.absolutePath()
               << (it == checkpoints.rbegin() ? "" : " that reads") << ": step " << it->step << ", "
               << file << "\n";
        io.err.flush(); // before what the command prints on standard output
        return ExitOk;
    }
    if (checkpoints.size() == 1)
        io.err << command << ": " << option << ": the one checkpoint of the run "
               << run.absolutePath() << " does not read whole (above)\n";
    else
        io.err << command << ": " << option << ": none of the " << checkpoints.size()
               << " checkpoints of the run " << run.absolutePath() << " reads whole (each above)\n";
    return ExitFailure;
}

} // namespace towers::app
