#pragma once
// A subcommand of towers-cli: its name, a one-line summary, and the function that runs it.
#include <QCommandLineParser>
#include <QJsonArray>
#include <QStringList>
#include <QTextStream>

#include <exception>
#include <filesystem>
#include <optional>
#include <vector>

#include "engine/models/registry.h"
#include "engine/tensor/shape.h"
#include "engine/train/train_config.h"

namespace towers::engine {
class Classifier;
struct CheckpointInfo;
struct DatasetSpec;
struct Device;
struct InferenceDevice;
struct VerifiedCheckpoint;
} // namespace towers::engine

namespace towers::app {

// Exit codes: 0 success, 1 the work failed (bad data, diverged, I/O), 2 bad usage, 128 + the
// signal's number when a signal stopped it (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP: what shells
// report for a program the signal ended).
enum ExitCode
{
    ExitOk = 0,
    ExitFailure = 1,
    ExitUsage = 2,
    ExitInterrupted = 130
};

// The exit code of an error that ends a command: ExitUsage for engine::InvalidArgument (the
// command line asked for something wrong), ExitFailure for any other (the work or its files).
int exitCodeOf(const std::exception& e);

struct CommandIo
{
    QTextStream& out;
    QTextStream& err;
    // The command's name in its messages ("towers-cli train"): the option checks below start
    // theirs with it, as the command's own messages do.
    QString program = QStringLiteral("towers-cli");
};

struct Command
{
    const char* name;
    const char* summary;
    // args: the subcommand's arguments, args[0] being "towers-cli <name>".
    int (*run)(const QStringList& args, CommandIo& io);
};

// Whether a command takes positional arguments (image files, a dataset name) or only options.
enum class Arguments
{
    Allowed,
    None
};
// Parses args with `parser` (adding --help); on a usage error (an unknown option, a positional
// argument where there are None) prints it with a hint and returns false with `exitCode` set;
// after --help, returns false with exitCode 0.
bool parseOrExplain(QCommandLineParser& parser, const QStringList& args, CommandIo& io,
                    int& exitCode, Arguments arguments = Arguments::Allowed);
// parser.helpText() with `program` ("towers-cli train", "towers") as the usage line's name, in
// place of the executable's path (or nothing, before a QCoreApplication exists).
QString helpTextFor(const QCommandLineParser& parser, const QString& program);
// Reads an integer option, accepting [min, max]; prints an error naming the option otherwise.
bool intOption(const QCommandLineParser& parser, const QString& name, int min, int max, int& value,
               CommandIo& io);
// The first dataset found of those tried when none is named, in the dataset table's order of
// preference (DatasetSpec::autoTrainRank); "" when none is.
QString firstDatasetFound(const std::vector<std::filesystem::path>& searchPath);
// Reads a number option, accepting [min, max]; prints an error naming the option otherwise.
bool doubleOption(const QCommandLineParser& parser, const QString& name, double min, double max,
                  double& value, CommandIo& io);
// The terms of the loss and the gradients that train and lr-find both take: --weight-decay (0 to
// 1), --label-smoothing (0 to 0.999) and --clip-grad-norm (0 to 1e6), into `c`, each left as it is
// when not given; false with doubleOption's error for the first out of range.
bool recipeTermOptions(const QCommandLineParser& parser, engine::TrainConfig& c, CommandIo& io);
// How the batches of a step are made, as train and lr-find both take it: --accumulate (1 to
// TrainConfig::kMaxAccumulate) and --sampling (uniform or balanced), into `c`, each left as it is
// when not given; false with intOption's or choiceOption's error otherwise.
bool batchOptions(const QCommandLineParser& parser, engine::TrainConfig& c, CommandIo& io);
// Reads an on|off option into `value` (left as it is when the option is not given); prints an
// error naming the option otherwise.
bool onOffOption(const QCommandLineParser& parser, const QString& name, bool& value, CommandIo& io);
// Reads an option whose value is one of `choices` into `value` (left as it is when the option is
// not given); otherwise prints "towers-cli train: --name must be a, b or c, got 'x'" and returns
// false.
bool choiceOption(const QCommandLineParser& parser, const QString& name,
                  std::initializer_list<const char*> choices, QString& value, CommandIo& io);
// Reads --precision (fp32 or bf16, engine::parsePrecision) into `value`, left as it is when the
// option is not given; otherwise prints "towers-cli eval: --precision: unknown precision 'x'
// (known: fp32, bf16)" and returns false. Whether this machine runs it is the backend's question.
bool precisionOption(const QCommandLineParser& parser, std::optional<engine::Precision>& value,
                     CommandIo& io);

// The model a --model value names: a built-in model, or a model file (engine::namesModelFile:
// a path with a '/' or ending in ".json") read now. UnknownName listing the built-in models;
// IoError naming the file when it cannot be read or describes no valid network or recipe.
const engine::ModelInfo& modelOption(const QString& value);
// The model a new run trains (train, lr-find): --model's (modelOption), else that of the
// checkpoint it starts from (`init`), else that of the run it is like (`like`), else `spec`'s
// default. Without `readFile`, a model file named by --model is left to another process (rank 0
// reads it and sends the configuration) and the fallbacks answer.
const engine::ModelInfo& chosenModel(const QCommandLineParser& parser,
                                     const engine::CheckpointInfo* init,
                                     const engine::TrainConfig* like,
                                     const engine::DatasetSpec& spec, bool readFile = true);

// "28x28x1" and [28, 28, 1]
QString shapeText(const engine::Shape& s);

// The columns a terminal gives `text` (a Chinese character two, a combining accent none: glibc's
// wcwidth in the C.UTF-8 locale, whatever the user's), and `text` padded with spaces to `columns`
// of them: the tables' class names line up whatever their script.
int textColumns(const QString& text);
QString padColumns(const QString& text, int columns);
QJsonArray shapeJson(const engine::Shape& s);

// The same from the parser's --data-dir option; prints an error and returns false when the
// option names no folder.
bool searchPathOption(const QCommandLineParser& parser, CommandIo& io,
                      std::vector<std::filesystem::path>& path);

// The path of a run named as 'towers-cli runs' lists it: runsDir/given when `given` is a bare
// name (no slash) that names nothing here; otherwise "" (it is a path).
QString runsDirEntry(const QString& given, const QString& runsDir);
// The run folder `given` names: the folder as given, else the run of that name in `runsDir`
// (runsDirEntry); "" when it names no folder.
QString runFolderOf(const QString& given, const QString& runsDir);
// `word` as one word of a POSIX shell's command line: as it is when it holds nothing the shell
// reads, else in single quotes ("my run" -> 'my run'), for the commands Towers suggests.
QString shellWord(const QString& word);
// The command that continues the run in `runDir` ("mpirun -np P towers-cli train --resume
// --run-dir DIR" for a run of P processes).
QString resumeCommandLine(const QString& runDir, int processes);
// What to do after the run in `runDir` (of configuration `c`) diverged, as train and runs say it:
// "a resume would diverge again: start a new run like it with a lower learning rate ... e.g.
// towers-cli train --like DIR --lr LR/10", with --clip-grad-norm 1 where the run did not clip.
QString divergenceAdvice(const QString& runDir, const engine::TrainConfig& c);

// --device cpu|cuda and --gpus LIST, as train and lr-find take them.
struct DeviceChoice
{
    bool deviceSet = false; // --device given
    bool cuda = false;      // --device cuda, or --gpus
    bool gpusSet = false;   // --gpus given
    bool allGpus = false;   // --gpus all: every GPU CUDA sees (none where there is none)
    std::vector<int> gpus;  // --gpus, in order
};
// The two options' definitions; `deviceHelp` says what --device is (its default).
QList<QCommandLineOption> deviceOptions(const QString& deviceHelp);
// Reads them; false after printing the usage error (naming `command`): a device not cpu or cuda,
// a --gpus that is not numbers separated by commas, --gpus with --device cpu.
bool readDeviceOptions(const QCommandLineParser& parser, const QString& command, CommandIo& io,
                       DeviceChoice& out);
// Sets `c`'s backend (cuda or onednn) and GPUs from a choice that names a device: with --gpus,
// towers round-robin over them, and one tower per listed GPU unless `keepTowers`. A choice that
// names none leaves `c` as it is.
void applyDeviceChoice(const DeviceChoice& d, engine::TrainConfig& c, bool keepTowers);

// --gpu n, where a command takes it beside --device: a GPU number (0 to 1023) into `gpu`, which
// means --device cuda (`device` becomes "cuda"); with --device given as anything else, a usage
// error. Not given: `gpu` and `device` stay as they are. ExitOk, or ExitUsage after printing
// the error (naming `command`).
int gpuOption(const QCommandLineParser& parser, const QString& command, CommandIo& io,
              QString& device, int& gpu);

// --device and --gpu for the commands that run one network (eval, classify).
QList<QCommandLineOption> inferenceDeviceOptions();
// Reads them into `out` (backend "onednn", or "cuda" and its GPU). ExitOk, or the error printed
// (naming `command`) and its exit code: ExitUsage for a device not cpu or cuda, a --gpu that is
// not a GPU number, --gpu with --device cpu; ExitFailure for cuda where this build or machine
// has no GPU to run on (why, and that the CPU runs it without --device).
int inferenceDeviceOption(const QCommandLineParser& parser, const QString& command, CommandIo& io,
                          engine::InferenceDevice& out);

// Whether GPU `gpu` is one of this machine's (where the GPU backend runs); else false after
// printing, naming `command`, how many there are.
bool gpuNumberUsable(int gpu, const QString& command, CommandIo& io);

// Where a network runs, as eval and classify say it: "cpu" or "cuda:N".
QString deviceName(const engine::Device& device);

// --best, for the commands that take --checkpoint (which defines it with bestOption()).
QCommandLineOption bestOption();
// --precision for eval and classify: the forward pass in fp32 or bf16, by default the checkpoint's
// own (precisionOption reads it; engine::Classifier decides the default).
QCommandLineOption inferencePrecisionOption();
// --tta for eval and classify: test-time augmentation, none (the default) or mirror.
QCommandLineOption ttaOption();
// Sets --tta on `classifier`. ExitOk, or ExitUsage after the error: a value other than none or
// mirror, or mirror for a checkpoint whose run never trained on a mirror image (saying why).
int applyTtaOption(const QCommandLineParser& parser, engine::Classifier& classifier, CommandIo& io);
// --best, for the commands that take --init-from (train, lr-find): a run's best checkpoint.
QCommandLineOption initBestOption();
// False, with the error printed, for --best without --init-from (initFromOption checks it too).
bool initBestUsable(const QCommandLineParser& parser, const QString& command, CommandIo& io);
// The absolute path of the checkpoint --init-from names: a file, or a run (folder or name) for
// its newest checkpoint, or its best with --best. ExitOk, or the error printed and its exit code
// (ExitUsage: --best without --init-from, or with a file).
int initFromOption(const QCommandLineParser& parser, const QString& command, CommandIo& io,
                   QString& file);
// The checkpoint file that --checkpoint names, for eval, classify and export: a file as given;
// a run folder (or its checkpoints/ folder, or a run's name in the runs folder, as 'towers-cli
// runs' lists them) gives its newest checkpoint, or with --best its best (the checkpoint of its
// highest accuracy on the set it evaluated: its validation set, else the test set), which a line
// on stderr names; of a run's checkpoints, only one that reads whole (verifyCheckpoint) is taken,
// each passed over named on stderr. Returns ExitOk, or prints an error and returns the exit code:
// ExitUsage without --checkpoint or for --best with a file, ExitFailure for a folder with no
// checkpoint that reads (with --best: none evaluated). `command` is "towers-cli eval" and the
// like. `verified`, where given, gets what verifyCheckpoint found of a run's checkpoint (so that
// the command reads it once more, not twice), and stays empty for a file given as such.
int checkpointOption(const QCommandLineParser& parser, const QString& command, CommandIo& io,
                     QString& file, std::optional<engine::VerifiedCheckpoint>* verified = nullptr);
// Which of a run's checkpoints a run folder or name stands for.
enum class RunCheckpoint
{
    Newest,
    Best // the checkpoint of the run's highest evaluated accuracy (eval.jsonl)
};
// The checkpoint file `given` names, as for --checkpoint: a file as given, a run folder or a run's
// name for its newest or best checkpoint that reads whole (named on stderr, as is each passed
// over). ExitOk, or the error printed (naming `option`) and ExitFailure (ExitUsage: Best with a
// file). `verified` as checkpointOption's.
int resolveCheckpoint(const QString& given, const QString& option, const QString& command,
                      CommandIo& io, QString& file, RunCheckpoint which = RunCheckpoint::Newest,
                      std::optional<engine::VerifiedCheckpoint>* verified = nullptr);

// engine::cpu::threadsBeyondCores's note on stderr, as train's log gives it, where `threads`
// compute threads (`breakdown`: "2 towers x 32 per tower") are more than this machine's cores.
// `advice`: what would use the cores better.
void noteThreadsBeyondCores(CommandIo& io, const QString& command, long threads,
                            const QString& breakdown, const QString& advice);

int runBench(const QStringList& args, CommandIo& io);
int runDownload(const QStringList& args, CommandIo& io);
int runModels(const QStringList& args, CommandIo& io);
int runDevices(const QStringList& args, CommandIo& io);
int runDatasets(const QStringList& args, CommandIo& io);
int runImport(const QStringList& args, CommandIo& io);
int runRuns(const QStringList& args, CommandIo& io);
int runTrain(const QStringList& args, CommandIo& io);
int runLrFind(const QStringList& args, CommandIo& io);
int runEval(const QStringList& args, CommandIo& io);
int runClassify(const QStringList& args, CommandIo& io);
int runExport(const QStringList& args, CommandIo& io);
int runSelftest(const QStringList& args, CommandIo& io);

} // namespace towers::app
