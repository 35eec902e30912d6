#include "app/runs/run_scanner.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <dirent.h>
#include <exception>
#include <sys/stat.h>
#include <unistd.h>

#include "app/runs/run_log_reader.h"
#include "engine/train/run_lock.h"

namespace towers::app {

namespace {

// The last step record (a JSON object with a "step") of a .jsonl file; other lines, a user's
// note among them, are passed over. Reads only its tail: logs grow long.
std::optional<QJsonObject> lastStepRecord(const QString& path)
{
    if (!QFileInfo(path).isFile()) return std::nullopt; // nor a FIFO's open, which would block
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return std::nullopt;
    const qint64 tail = 64 * 1024;
    if (f.size() > tail) f.seek(f.size() - tail);
    const QList<QByteArray> lines = f.readAll().split('\n');
    for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
        const QByteArray line = it->trimmed();
        if (line.isEmpty()) continue;
        QJsonParseError error{};
        const QJsonDocument doc = QJsonDocument::fromJson(line, &error);
        if (error.error == QJsonParseError::NoError && doc.isObject() &&
            doc.object().contains(QStringLiteral("step")))
            return doc.object();
    }
    return std::nullopt;
}

void newer(QDateTime& current, const QString& path)
{
    const QFileInfo info(path);
    if (info.exists() && (!current.isValid() || info.lastModified() > current))
        current = info.lastModified();
}

} // namespace

std::int64_t runLength(const RunSummary& r)
{
    // config.json is written again by every start: a resume with another --steps (or --epochs)
    // says so before it logs a step.
    if (r.config && r.config->steps > 0) return r.config->steps;
    if (r.config && r.config->epochs > 0 && r.stepsPerEpoch >= 1)
        return r.config->totalSteps(r.stepsPerEpoch);
    return r.totalSteps;
}

bool finished(const RunSummary& r)
{
    const std::int64_t total = runLength(r);
    if (total <= 0 || r.lastStep < total) return false;
    // Its evaluation at the last step too (every finished training makes one): a stop during it
    // leaves the run to be resumed, which makes it.
    for (const engine::EvaluationMark& e : r.evaluations)
        if (e.step >= total) return true;
    return false;
}

RunSummary readRun(const QString& folder)
{
    RunSummary r;
    const QDir dir(folder);
    r.folder = dir.absolutePath();
    r.name = dir.dirName();
    QFile config(dir.filePath(QStringLiteral("config.json")));
    if (!QFileInfo(config.fileName()).isFile()) { // a FIFO's open would block
        r.problem = QStringLiteral("%1: not a plain file").arg(config.fileName());
        return r;
    }
    if (!config.open(QIODevice::ReadOnly)) {
        r.problem =
            QStringLiteral("%1: cannot read: %2").arg(config.fileName(), config.errorString());
        return r;
    }
    r.configJson = QString::fromUtf8(config.readAll());
    try {
        r.config = engine::TrainConfig::fromJson(r.configJson.toStdString());
    } catch (const std::exception& e) {
        r.problem = QStringLiteral("%1: %2").arg(config.fileName(), QString::fromUtf8(e.what()));
    }
    newer(r.modified, config.fileName());

    const QString metrics = dir.filePath(QStringLiteral("metrics.jsonl"));
    if (const auto last = lastStepRecord(metrics)) {
        r.lastStep = last->value(QStringLiteral("step")).toInteger();
        if (last->contains(QStringLiteral("loss")))
            r.lastLoss = last->value(QStringLiteral("loss")).toDouble();
        r.lastEpoch = last->value(QStringLiteral("epoch")).toDouble();
        r.totalSteps = last->value(QStringLiteral("totalSteps")).toInteger();
        if (r.lastStep > 0 && r.lastEpoch > 0)
            r.stepsPerEpoch = std::llround(double(r.lastStep) / r.lastEpoch);
    }
    newer(r.modified, metrics);
    r.checkpoints = runCheckpoints(r.folder, r.problem.isEmpty() ? &r.problem : nullptr);
    for (const auto& c : r.checkpoints) newer(r.modified, QString::fromStdString(c.path.string()));
    if (!r.checkpoints.empty()) r.lastStep = std::max(r.lastStep, r.checkpoints.back().step);
    // The engine's reading of eval.jsonl (a damaged or partial line skipped, the latest record of a
    // step kept), as the trainer's own: the accuracy shown is the latest step's.
    r.evaluations =
        engine::readEvaluations(dir.filePath(QStringLiteral("eval.jsonl")).toStdString());
    if (!r.evaluations.empty()) {
        r.accuracy = r.evaluations.back().precisionAt1;
        r.accuracyTop5 = r.evaluations.back().precisionAt5;
        r.accuracyStep = r.evaluations.back().step;
    }
    r.best = engine::bestCheckpoint(r.checkpoints, r.evaluations);
    r.trainingBy = runHolder(r.folder);
    if (const QString failure = dir.filePath(QStringLiteral("failure.json"));
        QFileInfo(failure).isFile()) {
        QFile f(failure);
        const QJsonObject o = f.open(QIODevice::ReadOnly) && f.size() < (1 << 20)
                                  ? QJsonDocument::fromJson(f.readAll()).object()
                                  : QJsonObject();
        r.failure = RunSummary::Failure{o.value(QStringLiteral("step")).toInteger(),
                                        o.value(QStringLiteral("error")).toString()};
        if (r.failure->error.isEmpty()) r.failure->error = QStringLiteral("(not recorded)");
    }
    return r;
}

bool failed(const RunSummary& r)
{
    return r.failure && !r.trainingBy && r.config; // an unreadable run is that first
}

bool diverged(const RunSummary& r)
{
    return failed(r) && isDivergence(r.failure->error);
}

bool isDivergence(const QString& error)
{
    return error.startsWith(QLatin1String("model diverged"));
}

bool stoppedEarly(const RunSummary& r)
{
    return r.config && r.config->patience > 0 && r.lastStep < runLength(r) &&
           engine::evaluationsSinceBest(r.evaluations, r.config->minDelta) >= r.config->patience;
}

bool evaluatesOnValidation(const RunSummary& r)
{
    return r.config && r.config->validation > 0;
}

QString evaluatedSet(const RunSummary& r)
{
    return evaluatesOnValidation(r) ? QStringLiteral("validation") : QStringLiteral("test");
}

std::vector<RunSummary> scanRuns(const QString& runsDir, RunsFolderProblems* problems)
{
    std::vector<RunSummary> runs;
    RunsFolderProblems ignored;
    RunsFolderProblems& said = problems ? *problems : ignored;
    const auto why = [] { return QString::fromLocal8Bit(std::strerror(errno)); };
    const QByteArray path = QFile::encodeName(runsDir);
    struct stat st
    {
    };
    if (::stat(path.constData(), &st) != 0) {
        if (errno != ENOENT) said.folder = QStringLiteral("cannot read %1: %2").arg(runsDir, why());
        return runs;
    }
    if (!S_ISDIR(st.st_mode)) {
        said.folder = QStringLiteral("%1 is not a folder").arg(runsDir);
        return runs;
    }
    DIR* listing = ::opendir(path.constData());
    if (!listing) {
        said.folder = QStringLiteral("cannot read %1: %2").arg(runsDir, why());
        return runs;
    }
    ::closedir(listing);
    const QDir dir(runsDir);
    for (const QFileInfo& sub : dir.entryInfoList(QDir::Dirs | QDir::NoDotAndDotDot)) {
        if (!QFileInfo::exists(sub.absoluteFilePath() + QStringLiteral("/config.json"))) {
            // A folder that cannot be entered may hold a run: said, not passed over unsaid (but a
            // file system's lost+found, which holds none).
            if (sub.fileName() != QLatin1String("lost+found") &&
                ::access(QFile::encodeName(sub.absoluteFilePath()).constData(), X_OK) != 0)
                said.inside
                    << QStringLiteral("cannot look into %1: %2").arg(sub.absoluteFilePath(), why());
            continue;
        }
        runs.push_back(readRun(sub.absoluteFilePath()));
    }
    std::stable_sort(runs.begin(), runs.end(), [](const RunSummary& a, const RunSummary& b) {
        return a.modified != b.modified ? a.modified > b.modified : a.name < b.name;
    });
    return runs;
}

std::vector<engine::CheckpointFile> runCheckpoints(const QString& folder, QString* problem)
{
    try {
        // RunDirectory creates missing folders; only list when the checkpoints folder is there.
        if (QDir(folder).exists(QStringLiteral("checkpoints")))
            return engine::RunDirectory(folder.toStdString()).checkpoints();
    } catch (const std::exception& e) {
        if (problem) *problem = QString::fromUtf8(e.what());
    }
    return {};
}

std::optional<QString> runHolder(const QString& folder)
{
    if (const auto who = engine::RunLock::holder(folder.toStdString()))
        return QString::fromStdString(*who);
    return std::nullopt;
}

RunCurves readRunCurves(const QString& folder)
{
    return RunLogReader(folder).read();
}

std::vector<engine::EvaluationMark> evaluationsOf(const RunCurves& curves)
{
    std::vector<engine::EvaluationMark> records;
    for (qsizetype i = 0; i < curves.evalSteps.size() && i < curves.accuracy.size(); ++i)
        records.push_back({std::int64_t(curves.evalSteps[i]), curves.accuracy[i]});
    return engine::latestByStep(records);
}

} // namespace towers::app
