#include "app/cli/cli.h"

#include <QCoreApplication>
#include <cstdio>
#include <exception>
#include <new>

#include "app/cli/command.h"
#include "app/data/dataset_catalog.h"
#include "app/data/file_names.h"
#include "app/version/build_info.h"
#include "engine/data/dataset.h"
#include "engine/errors.h"

namespace towers::app {

namespace {

const Command kCommands[] = {
    {"bench", "Time training steps (or, --inference, forward passes) on synthetic data", runBench},
    {"download", "Download, verify and unpack a dataset (cifar10, cifar100, mnist, ...)",
     runDownload},
    {"models", "List the models, or show one model's layers", runModels},
    {"train", "Train a model with replicated towers on a dataset", runTrain},
    {"lr-find", "Find a learning rate: the range test, the loss as the rate rises", runLrFind},
    {"eval", "Evaluate a checkpoint on its dataset's test set", runEval},
    {"classify", "Classify image files with a checkpoint", runClassify},
    {"export", "Write a checkpoint's model as an ONNX file", runExport},
    {"runs", "List the training runs and their checkpoints, or show one run", runRuns},
    {"datasets", "List the datasets found on this machine", runDatasets},
    {"import", "Make a dataset from a folder of your images, one sub-folder per class", runImport},
    {"devices", "List the CPU and GPUs that can run towers", runDevices},
    {"selftest", "Check every op against the reference, then a few training steps", runSelftest},
};

// How to get a dataset that was not found: its download, or an import for a name the table does
// not have; either way the folder that holds it may be named.
QString howToGet(const std::string& dataset)
{
    const QString name = QString::fromStdString(dataset);
    if (const std::optional<DatasetSpec> spec = findBuiltInDataset(name)) {
        qint64 bytes = 0;
        for (const DatasetFile& f : spec->files)
            bytes = (bytes < 0 || f.size < 0) ? -1 : bytes + f.size;
        const QString size =
            bytes > 0 ? QStringLiteral(" (%1 MB)").arg((bytes + 500000) / 1000000) : QString();
        return QStringLiteral("Get it with 'towers-cli download %1'%2, or name the folder that "
                              "holds it with --data-dir.")
            .arg(name, size);
    }
    return QStringLiteral("Make it from a folder of images (one sub-folder per class) with "
                          "'towers-cli import FOLDER --name %1', or name the folder that holds it "
                          "with --data-dir.")
        .arg(name);
}

void printUsage(QTextStream& s)
{
    s << "Usage: towers-cli <command> [options]\n\n"
         "Towers trains convolutional networks by synchronous data parallelism with replicated\n"
         "towers. Commands:\n";
    for (const auto& c : kCommands)
        s << "  " << QString::fromLatin1(c.name).leftJustified(10) << c.summary << "\n";
    s << "\nRun 'towers-cli <command> --help' for a command's options.\n"
         "Global options: --help, --version.\n";
}

} // namespace

QString undecodableArgument(int argc, const char* const* argv)
{
    for (int i = 1; i < argc; ++i)
        if (const QByteArray bytes(argv[i]); !isUtf8(bytes))
            return QStringLiteral("argument %1, '%2'").arg(i).arg(escapedName(bytes));
    return {};
}

bool refuseUndecodableArgument(const char* program, int argc, const char* const* argv)
{
    const QString bad = undecodableArgument(argc, argv);
    if (bad.isEmpty()) return false;
    std::fprintf(stderr,
                 "%s: error: %s, is not UTF-8 text (its invalid bytes shown as \\xNN): %s "
                 "reads its arguments as UTF-8 and would take this one for another name. Rename "
                 "the file or folder, or give it through a link whose name is UTF-8.\n",
                 program, qPrintable(bad), program);
    return true;
}

int runCli(const QStringList& arguments)
{
    QTextStream out(stdout), err(stderr);
    CommandIo io{out, err};
    const QString first = arguments.value(1);
    if (first.isEmpty() || first == QLatin1String("--help") || first == QLatin1String("-h") ||
        first == QLatin1String("help")) {
        printUsage(first.isEmpty() ? err : out);
        return first.isEmpty() ? ExitUsage : ExitOk;
    }
    if (first == QLatin1String("--version") || first == QLatin1String("-v")) {
        out << versionText(QStringLiteral("towers-cli"));
        return ExitOk;
    }
    for (const auto& c : kCommands) {
        if (first != QLatin1String(c.name)) continue;
        QStringList args = arguments.mid(1);
        args[0] = QStringLiteral("towers-cli ") + first;
        io.program = args[0];
        try {
            return c.run(args, io);
        } catch (const engine::InvalidArgument& e) {
            err << "towers-cli " << first << ": error: " << e.what() << "\n";
            return ExitUsage;
        } catch (const engine::DatasetNotFound& e) {
            err << "towers-cli " << first << ": error: " << e.what() << "\n"
                << howToGet(e.dataset()) << "\n";
            return ExitFailure;
        } catch (const engine::Error& e) {
            err << "towers-cli " << first << ": error: " << e.what() << "\n";
            return ExitFailure;
        } catch (const std::bad_alloc&) {
            err << "towers-cli " << first << ": error: out of memory\n";
            return ExitFailure;
        } catch (const std::exception& e) {
            err << "towers-cli " << first << ": internal error: " << e.what() << "\n";
            return ExitFailure;
        }
    }
    err << "towers-cli: unknown command '" << first << "'\n\n";
    printUsage(err);
    return ExitUsage;
}

} // namespace towers::app
