#include "app/runs/run_builder.h"

#include <cmath>

#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QLocale>

#include "app/data/data_dirs.h"
#include "app/runs/run_scanner.h"
#include "engine/data/validation_split.h"
#include "engine/errors.h"
#include "engine/models/registry.h"
#include "engine/train/run_directory.h"

namespace towers::app {

namespace {

using engine::TrainConfig;

// A number as config.json writes it, for comparing and for messages.
// The shortest text that reads back as exactly `v` ("0.1", not 0.10000000000000001).
QString number(double v)
{
    return QString::number(v, 'g', QLocale::FloatingPointShortest);
}

enum class Kind
{
    Text,
    Integer,
    Real
};

struct Defining
{
    const char* option;
    Kind kind;
    QString (*runValue)(const TrainConfig&);
    // The command line's spelling brought to the run's (aliases), for Text options.
    QString (*normalise)(const QString&) = nullptr;
};

const Defining kDefining[] = {
    {"dataset", Kind::Text, [](const TrainConfig& c) { return QString::fromStdString(c.dataset); }},
    {"model", Kind::Text, [](const TrainConfig& c) { return QString::fromStdString(c.model); }},
    {"towers", Kind::Integer, [](const TrainConfig& c) { return QString::number(c.towers); }},
    {"threads-per-tower", Kind::Integer,
     [](const TrainConfig& c) { return QString::number(c.threadsPerTower); }},
    {"batch-size", Kind::Integer,
     [](const TrainConfig& c) { return QString::number(c.batchPerTower); }},
    {"accumulate", Kind::Integer,
     [](const TrainConfig& c) { return QString::number(c.accumulate); }},
    {"optimizer", Kind::Text,
     [](const TrainConfig& c) { return QString::fromStdString(c.optimizer.kind); }},
    {"lr", Kind::Real, [](const TrainConfig& c) { return number(c.schedule.lr); }},
    {"lr-schedule", Kind::Text,
     [](const TrainConfig& c) {
         return QString::fromStdString(engine::LrSchedule::kindName(c.schedule.kind));
     },
     scheduleName},
    {"momentum", Kind::Real, [](const TrainConfig& c) { return number(c.optimizer.momentum); }},
    {"weight-decay", Kind::Real, [](const TrainConfig& c) { return number(c.weightDecay); }},
    {"ema-decay", Kind::Real, [](const TrainConfig& c) { return number(c.emaDecay); }},
    {"label-smoothing", Kind::Real, [](const TrainConfig& c) { return number(c.labelSmoothing); }},
    {"clip-grad-norm", Kind::Real, [](const TrainConfig& c) { return number(c.clipGradNorm); }},
    {"augment", Kind::Text,
     [](const TrainConfig& c) { return augmentName(QString::fromStdString(c.augmentation)); },
     augmentName},
    {"sampling", Kind::Text,
     [](const TrainConfig& c) { return QString::fromStdString(c.sampling); }},
    {"seed", Kind::Integer,
     [](const TrainConfig& c) { return QString::number(qulonglong(c.seed)); }},
    // Another share would train on other images.
    {"validation", Kind::Text,
     [](const TrainConfig& c) { return QString::number(c.validation, 'g', 9); },
     [](const QString& s) {
         const auto share = validationShare(s);
         return share ? QString::number(*share, 'g', 9) : s;
     }},
};

bool sameValue(const Defining& d, const QString& given, const QString& run)
{
    switch (d.kind) {
    case Kind::Integer: {
        bool a = false, b = false;
        const qlonglong x = given.trimmed().toLongLong(&a), y = run.toLongLong(&b);
        return a && b && x == y;
    }
    case Kind::Real: {
        bool a = false, b = false;
        const double x = given.trimmed().toDouble(&a), y = run.toDouble(&b);
        return a && b && x == y;
    }
    case Kind::Text:
        return (d.normalise ? d.normalise(given) : given) == run;
    }
    return false;
}

} // namespace

QString augmentName(const QString& s)
{
    return s.isEmpty() || s == QLatin1String("tutorial") ? QStringLiteral("default") : s;
}
QString scheduleName(const QString& s)
{
    return s == QLatin1String("one-cycle") ? QStringLiteral("onecycle") : s;
}

QString proposedRunFolder(const QString& runsDir, const QString& dataset, const QString& model)
{
    return runsDir + QLatin1Char('/') + dataset + QLatin1Char('-') + model + QLatin1Char('-') +
           QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss"));
}

QString newestRun(const QString& runsDir)
{
    if (runsDir.isEmpty()) return {}; // no runs folder known: not the working folder
    const auto runs = scanRuns(runsDir);
    return runs.empty() ? QString() : runs.front().folder;
}

TrainConfig readRunConfig(const QString& folder)
{
    const QString file = folder + QStringLiteral("/config.json");
    QFile f(file);
    if (!QFileInfo(folder).isDir())
        throw engine::InvalidArgument("'" + folder.toStdString() + "' is not a folder");
    if (!f.exists())
        throw engine::InvalidArgument("'" + folder.toStdString() +
                                      "' has no config.json: it is not a Towers run folder");
    if (!QFileInfo(file).isFile()) // a FIFO's open would block
        throw engine::IoError("'" + file.toStdString() + "' is not a plain file");
    if (!f.open(QIODevice::ReadOnly))
        throw engine::IoError("cannot read '" + file.toStdString() +
                              "': " + f.errorString().toStdString());
    try {
        return TrainConfig::fromJson(f.readAll().toStdString());
    } catch (const engine::InvalidArgument& e) {
        throw engine::IoError(file.toStdString() + ": " + e.what()); // the file is damaged
    }
}

QString runDataDirOf(const QString& checkpointFile)
{
    QDir dir = QFileInfo(checkpointFile).absoluteDir();
    if (dir.dirName() != QLatin1String("checkpoints") || !dir.cdUp() ||
        !dir.exists(QStringLiteral("config.json")))
        return {};
    try {
        return QString::fromStdString(readRunConfig(dir.path()).dataDir);
    } catch (const engine::Error&) {
        return {}; // an unreadable configuration: the search path as it is
    }
}

TrainConfig likeRunConfig(const QString& folder, int* processes)
{
    TrainConfig c = readRunConfig(folder);
    if (processes) *processes = c.processes;
    c.runId.clear();
    c.processes = 1;
    return c;
}

std::optional<double> shareOf(const QString& text, double most)
{
    QString t = text.trimmed();
    const bool percent = t.endsWith(QLatin1Char('%'));
    if (percent) t.chop(1);
    bool ok = false;
    double v = t.trimmed().toDouble(&ok);
    if (!ok || !std::isfinite(v)) return std::nullopt;
    if (percent) v /= 100;
    if (v < 0 || v > most) return std::nullopt;
    return v;
}

std::optional<double> validationShare(const QString& text)
{
    return shareOf(text, engine::kMaxValidationShare);
}

const QStringList& runDefiningOptions()
{
    static const QStringList names = [] {
        QStringList n;
        for (const auto& d : kDefining) n << QString::fromLatin1(d.option);
        return n;
    }();
    return names;
}

QString resumeMismatch(const QString& option, const QString& value, const TrainConfig& run)
{
    for (const auto& d : kDefining) {
        if (option != QLatin1String(d.option)) continue;
        const QString runs = d.runValue(run);
        if (sameValue(d, value, runs)) return {};
        return QStringLiteral("--%1 cannot change when resuming: the run has %2, the command line "
                              "says %3 (the same "
                              "value is accepted; start a new run to change it)")
            .arg(option, runs.isEmpty() ? QStringLiteral("none") : runs, value);
    }
    return {};
}

engine::SessionOptions planNewRun(NewRunRequest r)
{
    TrainConfig& c = r.config;
    if (c.augmentation.empty()) c.augmentation = "default";
    c.validate();
    c.checkThreadBudget();
    c.checkPrecision();
    engine::SessionOptions o;
    // A run in the runs folder itself would be no run of it (runs and the Runs page list the
    // folders in it) and would take every run there with it when it is moved to the trash.
    if (!r.runDir.isEmpty() && !r.runsDir.isEmpty()) {
        // As the file system sees them (links resolved) where they are there.
        const auto real = [](const QString& p) {
            const QString canonical = QFileInfo(p).canonicalFilePath();
            return canonical.isEmpty() ? QDir::cleanPath(QDir(p).absolutePath()) : canonical;
        };
        const QString run = real(r.runDir), runs = real(r.runsDir);
        const QString inside = run.endsWith(QLatin1Char('/')) ? run : run + QLatin1Char('/');
        if (run == runs || runs.startsWith(inside))
            throw engine::InvalidArgument(
                "the run folder " + QDir(r.runDir).absolutePath().toStdString() +
                (run == runs ? " is the runs folder itself"
                             : " holds the runs folder " + runs.toStdString()) +
                ", where each run gets a folder of its own: name one inside it (" +
                QDir(r.runsDir).absoluteFilePath(QStringLiteral("NAME")).toStdString() +
                "), or leave the folder to Towers");
    }
    o.newFolder = r.runDir.isEmpty();
    if (o.newFolder && r.runsDir.isEmpty())
        throw engine::IoError(noRunsFolder(", or the run's folder with --run-dir"));
    if (o.newFolder)
        r.runDir = proposedRunFolder(r.runsDir, QString::fromStdString(c.dataset),
                                     QString::fromStdString(c.model));
    o.config = c;
    o.searchPath = std::move(r.searchPath);
    if (!c.dataDir.empty()) o.searchPath.insert(o.searchPath.begin(), c.dataDir);
    o.runDirectory = QDir(r.runDir).absolutePath().toStdString();
    o.resume = false;
    o.setAside = r.overwrite;
    o.loaderWorkers = r.loaderWorkers;
    o.dataset = std::move(r.dataset);
    return o;
}

engine::SessionOptions planResume(ResumeRequest r)
{
    if (r.runDir.isEmpty() && r.runsDir.isEmpty())
        throw engine::IoError(noRunsFolder(", or the run with --run-dir"));
    if (r.runDir.isEmpty()) r.runDir = newestRun(r.runsDir);
    if (r.runDir.isEmpty())
        throw engine::IoError("no run to resume in '" + r.runsDir.toStdString() +
                              "' (name one with --run-dir)");
    engine::SessionOptions o;
    o.config = r.config ? std::move(*r.config) : readRunConfig(r.runDir);
    if (r.changes) r.changes(o.config);
    o.config.validate();
    o.config.checkThreadBudget();
    o.config.checkPrecision();
    o.searchPath = std::move(r.searchPath);
    if (!o.config.dataDir.empty()) o.searchPath.insert(o.searchPath.begin(), o.config.dataDir);
    o.runDirectory = QDir(r.runDir).absolutePath().toStdString();
    o.resume = true;
    o.setAside = r.restart;
    o.loaderWorkers = r.loaderWorkers;
    return o;
}

QStringList unloadableCheckpoints(const engine::SessionOptions& resume)
{
    QStringList out;
    try {
        const engine::RunDirectory dir(resume.runDirectory);
        if (dir.checkpoints().empty()) return out;
        const auto model = engine::buildModel(
            engine::resolveModel(resume.config.model, resume.config.modelDefinition),
            resume.config.classes);
        std::vector<std::string> skipped;
        if (dir.newestGoodCheckpoint(model.get(), &skipped, resume.config.runId)) return out;
        for (const auto& s : skipped) out << QString::fromStdString(s);
    } catch (const std::exception& e) {
        out << QString::fromUtf8(e.what());
    }
    return out;
}

} // namespace towers::app
