// towers-cli import: a dataset from a folder of the user's images (app/data/image_folder_import.h).
#include <QEventLoop>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTimer>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <optional>
#include <thread>
#include <unistd.h>

#include "app/cli/command.h"
#include "app/data/image_folder_import.h"
#include "app/process/interrupt_notifier.h"
#include "engine/data/dataset.h"
#include "engine/data/dataset_manifest.h"
#include "engine/errors.h"
#include "engine/models/registry.h"
#include "engine/train/recipe.h"

namespace towers::app {

namespace {

// The command's description and options, for --help and the parser.
void addImportOptions(QCommandLineParser& p)
{
    p.setApplicationDescription(QStringLiteral(
        "Makes a dataset from a folder of your images, one sub-folder per class (named after the\n"
        "class), or train/ and test/ (or val/) folders that each hold the class folders. Every\n"
        "image (PNG, JPEG, BMP, GIF, PPM/PGM, ...; sub-folders of a class too) is brought to the\n"
        "size as --fit says (by default cropped to its central square and scaled), as\n"
        "'towers-cli classify' then reads an image for a checkpoint trained on it, and the\n"
        "dataset is written to the data folder under its name, where\n"
        "'towers-cli train --dataset NAME', eval, the desktop application and\n"
        "'towers-cli datasets' find it. Files that are no image, and images that cannot be read,\n"
        "are passed over and listed."));
    p.addPositionalArgument(QStringLiteral("folder"), QStringLiteral("The folder of images."));
    p.addOptions({
        {QStringLiteral("name"),
         QStringLiteral("The dataset's name (lowercase letters, digits, '-', '_', '.'); default: "
                        "from the folder's name."),
         QStringLiteral("name")},
        {QStringLiteral("data-dir"),
         QStringLiteral("Where to write it (default: the first folder of $TOWERS_DATA, else "
                        "~/.local/share/towers/datasets)."),
         QStringLiteral("dir")},
        {QStringLiteral("size"),
         QStringLiteral("Side of the square images in pixels, %1 to %2 (default: 28 for "
                        "grayscale, 32 for colour: the built-in networks take 24 to 32).")
             .arg(kMinImportSide)
             .arg(kMaxImportSide),
         QStringLiteral("pixels")},
        {QStringLiteral("channels"),
         QStringLiteral("1 (grayscale), 3 (colour) or auto: 1 when every image is gray "
                        "(default)."),
         QStringLiteral("n")},
        {QStringLiteral("fit"),
         QStringLiteral("How each image is brought to the size (as NVIDIA DIGITS' resize modes): "
                        "crop (default): its central square, scaled; squash: the whole image "
                        "scaled, its aspect ratio not kept; fill: the whole image scaled to fit "
                        "inside, its aspect ratio kept, the rest black."),
         QStringLiteral("mode")},
        {QStringLiteral("test-fraction"),
         QStringLiteral("Share of each class held out as the test set when there is no test "
                        "folder (default 0.1; 0 only with a test folder)."),
         QStringLiteral("f")},
        {QStringLiteral("no-flip"),
         QStringLiteral("Left-right mirrors change the class (text, digits, arrows): training "
                        "never flips these images.")},
        {QStringLiteral("seed"), QStringLiteral("Which images are held out (default 1)."),
         QStringLiteral("n")},
        {QStringLiteral("force"),
         QStringLiteral("Replace an imported dataset of the same name (never one that holds files "
                        "an import does not write).")},
        {QStringLiteral("json"), QStringLiteral("Print the result as JSON.")},
    });
}

// What the command line asks of an import, as the steps below read it in turn: the options,
// and what they make of them (the import's options, --json).
struct ImportRequest
{
    ImportRequest(const QCommandLineParser& parser, CommandIo& cio) : p(parser), io(cio) {}

    const QCommandLineParser& p;
    CommandIo& io;
    ImportOptions o;
    bool json = false;
};

// The folder and the options, checked, into the request's import options. ExitOk, or the exit
// code after the message.
int readImportOptions(ImportRequest& r)
{
    const QCommandLineParser& p = r.p;
    CommandIo& io = r.io;
    ImportOptions& o = r.o;
    const QStringList pos = p.positionalArguments();
    if (pos.size() != 1) {
        io.err << "towers-cli import: expected one folder of images, got " << pos.size()
               << " arguments (see 'towers-cli import --help')\n";
        return ExitUsage;
    }
    o.source = pos.front();
    o.name = p.value(QStringLiteral("name"));
    for (const char* option : {"name", "data-dir"})
        if (p.isSet(QLatin1String(option)) && p.value(QLatin1String(option)).isEmpty()) {
            io.err << "towers-cli import: --" << option << " must not be empty\n";
            return ExitUsage;
        }
    o.dataDir = p.value(QStringLiteral("data-dir"));
    if (!intOption(p, QStringLiteral("size"), kMinImportSide, kMaxImportSide, o.size, io))
        return ExitUsage;
    if (p.isSet(QStringLiteral("channels"))) {
        const QString c = p.value(QStringLiteral("channels"));
        if (c == QLatin1String("1") || c == QLatin1String("3"))
            o.channels = c.toInt();
        else if (c != QLatin1String("auto")) {
            io.err << "towers-cli import: --channels must be 1, 3 or auto, got '" << c << "'\n";
            return ExitUsage;
        }
    }
    if (p.isSet(QStringLiteral("fit"))) {
        try {
            o.fit = engine::imageFitFromName(p.value(QStringLiteral("fit")).toStdString());
        } catch (const engine::InvalidArgument& e) {
            io.err << "towers-cli import: --fit: " << QString::fromUtf8(e.what()) << "\n";
            return ExitUsage;
        }
    }
    if (p.isSet(QStringLiteral("test-fraction"))) {
        bool ok = false;
        o.testFraction = p.value(QStringLiteral("test-fraction")).toDouble(&ok);
        if (!ok || !(o.testFraction >= 0 && o.testFraction < 1)) {
            io.err << "towers-cli import: --test-fraction must be a number from 0 to below 1, "
                      "got '"
                   << p.value(QStringLiteral("test-fraction")) << "'\n";
            return ExitUsage;
        }
    }
    int seed = 1;
    if (!intOption(p, QStringLiteral("seed"), 0, 2147483647, seed, io)) return ExitUsage;
    o.seed = std::uint64_t(seed);
    o.mirrorSafe = !p.isSet(QStringLiteral("no-flip"));
    o.overwrite = p.isSet(QStringLiteral("force"));
    r.json = p.isSet(QStringLiteral("json"));
    if (!o.name.isEmpty()) {
        std::string why;
        if (!engine::isImportedDatasetName(o.name.toStdString(), &why)) {
            io.err << "towers-cli import: --name: " << QString::fromStdString(why) << "\n";
            return ExitUsage;
        }
    }
    return ExitOk;
}

// The import itself, with its progress on a terminal and Ctrl-C (`interrupts`) cancelling it:
// `result` on success and ExitOk, or the exit code after the message.
int importImages(const ImportRequest& r, InterruptNotifier& interrupts,
                 std::optional<ImportResult>& result)
{
    const ImportOptions& o = r.o;
    CommandIo& io = r.io;
    const bool json = r.json;
    // The import runs on a thread of its own, so that Ctrl-C cancels it cleanly (nothing is
    // left behind) rather than killing it half-written.
    std::atomic<bool> cancel{false};
    std::string error;
    std::mutex progressMutex;
    qint64 done = 0, total = -1;
    const bool tty = !json && ::isatty(::fileno(stderr)) == 1;
    QEventLoop loop;
    QObject::connect(&interrupts, &InterruptNotifier::interrupted, &loop, [&] {
        cancel = true;
        if (tty) io.err << "\r\x1b[K";
        io.err << "towers-cli import: cancelling...\n";
        io.err.flush();
    });
    QTimer ticker;
    QObject::connect(&ticker, &QTimer::timeout, &loop, [&] {
        std::lock_guard lock(progressMutex);
        if (tty && total > 0 && !cancel) {
            io.err << "\r\x1b[Kimporting: " << done << " of " << total << " images";
            io.err.flush();
        }
    });
    ticker.start(200);
    std::thread worker([&] {
        try {
            result = importImageFolder(
                o,
                [&](qint64 d, qint64 t) {
                    std::lock_guard lock(progressMutex);
                    done = d;
                    total = t;
                },
                &cancel);
        } catch (const std::exception& e) { // the folder, the name taken, the disk: exit 1
            error = e.what();
        }
        QMetaObject::invokeMethod(&loop, &QEventLoop::quit, Qt::QueuedConnection);
    });
    loop.exec();
    worker.join();
    ticker.stop();
    if (tty) io.err << "\r\x1b[K";
    if (!result) {
        io.err << "towers-cli import: " << QString::fromUtf8(error.c_str()) << "\n";
        return cancel ? ExitInterrupted : ExitFailure;
    }
    return ExitOk;
}

// What the import made, for its report: the result and its dataset, the images written, the
// built-in model for them ("" where none takes them) and the dataset's name.
struct ImportReport
{
    const ImportResult& r;
    const engine::DatasetSpec& s;
    qint64 train = 0, test = 0;
    QString model{};
    QString name{};
};

// The report of `r` (which it refers to).
ImportReport importReport(const ImportResult& r)
{
    const engine::DatasetSpec& s = r.spec;
    const qint64 train = r.trainImages(), test = r.testImages();
    QString model;
    try {
        model = QString::fromStdString(engine::defaultModelFor(s));
    } catch (const engine::Error&) {
    }
    const QString name = QString::fromStdString(s.name);
    return {r, s, train, test, model, name};
}

// The report as --json prints it.
QJsonObject reportJson(const ImportReport& e)
{
    const ImportResult& r = e.r;
    const engine::DatasetSpec& s = e.s;
    const qint64 train = e.train, test = e.test;
    const QString& model = e.model;
    const QString& name = e.name;
    QJsonArray classes, skipped, unreadable, ignored;
    for (std::size_t c = 0; c < s.labels.names.size(); ++c)
        classes.append(
            QJsonObject{{QStringLiteral("name"), QString::fromStdString(s.labels.names[c])},
                        {QStringLiteral("train"), r.train[c]},
                        {QStringLiteral("test"), r.test[c]}});
    // "skipped" as before ("file: reason", the path exact); "unreadable" has them apart.
    for (const auto& u : r.unreadable) {
        skipped.append(u.path + QStringLiteral(": ") + u.reason);
        unreadable.append(
            QJsonObject{{QStringLiteral("path"), u.path}, {QStringLiteral("reason"), u.reason}});
    }
    for (const QString& f : r.ignored) ignored.append(f);
    return QJsonObject{{QStringLiteral("name"), name},
                       {QStringLiteral("folder"), r.folder},
                       {QStringLiteral("image_shape"), shapeJson(s.imageShape)},
                       {QStringLiteral("train"), train},
                       {QStringLiteral("test"), test},
                       {QStringLiteral("classes"), classes},
                       {QStringLiteral("flips"), s.mirrorSafe},
                       {QStringLiteral("fit"), QLatin1String(engine::imageFitName(s.imageFit))},
                       {QStringLiteral("model"), model},
                       {QStringLiteral("skipped"), skipped},
                       {QStringLiteral("unreadable"), unreadable},
                       {QStringLiteral("ignored"), ignored},
                       {QStringLiteral("name_note"), r.nameNote}};
}

// The report as text: the files passed over (on stderr), then the dataset, its classes and how
// to train on it.
void printImport(const ImportRequest& req, const ImportReport& e)
{
    const QCommandLineParser& p = req.p;
    CommandIo& io = req.io;
    const ImportResult& r = e.r;
    const engine::DatasetSpec& s = e.s;
    const qint64 train = e.train, test = e.test;
    const QString& model = e.model;
    const QString& name = e.name;
    constexpr int kListed = 10;
    for (qsizetype i = 0; i < r.skipped.size() && i < kListed; ++i)
        io.err << "towers-cli import: passed over " << r.skipped[i] << "\n";
    if (r.skipped.size() > kListed)
        io.err << "towers-cli import: ... and " << (r.skipped.size() - kListed)
               << " more images that could not be read\n";
    if (!r.ignored.isEmpty())
        io.err << "towers-cli import: " << r.ignored.size() << " file"
               << (r.ignored.size() == 1 ? " or link was" : "s or links were") << " passed over ("
               << r.ignored.mid(0, 3).join(QStringLiteral(", "))
               << (r.ignored.size() > 3 ? QStringLiteral(", ...") : QString()) << ")\n";
    if (!r.nameNote.isEmpty())
        io.err << "towers-cli import: " << r.nameNote << " (--name chooses another)\n";
    io.out << "dataset " << name << " in " << r.folder << "\n"
           << train << " train + " << test << " test images of " << shapeText(s.imageShape)
           << " (HxWxC"
           << (s.imageFit == engine::ImageFit::Crop
                   ? QString()
                   : QStringLiteral(", fit ") + QLatin1String(engine::imageFitName(s.imageFit)))
           << "), " << s.labels.names.size() << " classes"
           << (s.mirrorSafe ? "" : ", never flipped") << ":\n";
    int width = 5;
    for (const auto& c : s.labels.names)
        width = std::max(width, textColumns(QString::fromStdString(c)));
    io.out << "  " << QStringLiteral("class").leftJustified(width) << "  train   test\n";
    for (std::size_t c = 0; c < s.labels.names.size(); ++c)
        io.out << "  " << padColumns(QString::fromStdString(s.labels.names[c]), width) << "  "
               << QString::number(r.train[c]).rightJustified(5) << "  "
               << QString::number(r.test[c]).rightJustified(5) << "\n";
    // Classes with less than half the largest's images (engine::ClassBalance::small): the
    // command proposed samples them equally, and says why.
    const auto balance = engine::classBalance({r.train.begin(), r.train.end()});
    const std::int64_t small = balance ? balance->smallClasses : 0;
    if (!model.isEmpty())
        io.out << "train it: towers-cli train --dataset " << name
               << (p.isSet(QStringLiteral("data-dir"))
                       ? QStringLiteral(" --data-dir ") + p.value(QStringLiteral("data-dir"))
                       : QString())
               << (small > 0 ? " --sampling balanced" : "") << "   (" << model << ", the model for "
               << shapeText(s.imageShape) << " images"
               << (small > 0 ? QStringLiteral("; %1 less than half the largest's images")
                                   .arg(QString::fromStdString(
                                       engine::counted(small, "class has", "classes have")))
                             : QString())
               << ")\n";
    else
        io.out << "no built-in network takes " << shapeText(s.imageShape)
               << " images ('towers-cli models' lists their inputs): import again with --size "
                  "28 or 32\n";
}

} // namespace

int runImport(const QStringList& args, CommandIo& io)
{
    QCommandLineParser p;
    addImportOptions(p);
    int code = 0;
    if (!parseOrExplain(p, args, io, code)) return code;
    ImportRequest r{p, io};
    if (code = readImportOptions(r); code != ExitOk) return code;
    // Ctrl-C is caught from here on: it cancels the import (and, as ever, does not end the
    // command while its result is printed).
    InterruptNotifier interrupts;
    std::optional<ImportResult> result;
    if (code = importImages(r, interrupts, result); code != ExitOk) return code;
    const ImportReport e = importReport(*result);
    if (r.json) {
        io.out << QJsonDocument(reportJson(e)).toJson(QJsonDocument::Indented);
        return ExitOk;
    }
    printImport(r, e);
    return ExitOk;
}

} // namespace towers::app
