#include "app/runs/run_log_reader.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QMutexLocker>

#include <cmath>
#include <optional>

namespace towers::app {

namespace {

// How many bytes before the offset are compared to notice a replaced file: a line's worth.
constexpr qsizetype kTailBytes = 64;
// Read in pieces so that a long log does not have to fit in one buffer.
constexpr qint64 kChunkBytes = 1 << 20;

std::optional<QJsonObject> parseLine(QByteArrayView line)
{
    const QByteArray text = line.trimmed().toByteArray();
    if (text.isEmpty()) return std::nullopt;
    QJsonParseError error{};
    const QJsonDocument doc = QJsonDocument::fromJson(text, &error);
    if (error.error != QJsonParseError::NoError || !doc.isObject()) return std::nullopt;
    return doc.object();
}

engine::TowerTimes towerTimesOf(const QJsonObject& o)
{
    engine::TowerTimes t;
    t.computeMs = o.value(QStringLiteral("computeMs")).toDouble();
    t.commMs = o.value(QStringLiteral("commMs")).toDouble();
    t.dataMs = o.value(QStringLiteral("dataMs")).toDouble();
    t.updateMs = o.value(QStringLiteral("updateMs")).toDouble();
    return t;
}

// An eval.jsonl record as the trainer wrote it (evalJson): its step, set, counts, accuracy and
// cross-entropy; nullopt for a record without its step or accuracy (a damaged line), which is no
// point of the curves.
std::optional<engine::EvalResult> evaluationOf(const QJsonObject& o)
{
    if (!o.value(QStringLiteral("step")).isDouble() ||
        !o.value(QStringLiteral("precisionAt1")).isDouble())
        return std::nullopt;
    // Precision @ 5, where the trainer wrote it (more than 10 classes, since 2026-12-03): the
    // result has its classes then, so that hasTop5() says it is known.
    const bool top5 = o.value(QStringLiteral("precisionAt5")).isDouble();
    engine::EvalResult r(top5 ? int(o.value(QStringLiteral("classCounts")).toArray().size()) : 0);
    if (top5) {
        r.precisionAt5 = o.value(QStringLiteral("precisionAt5")).toDouble();
        r.correctTop5 = o.value(QStringLiteral("correctTop5")).toInteger();
    }
    r.step = o.value(QStringLiteral("step")).toInteger();
    r.precisionAt1 = o.value(QStringLiteral("precisionAt1")).toDouble();
    r.meanCrossEntropy = o.value(QStringLiteral("meanCrossEntropy")).toDouble();
    r.examples = o.value(QStringLiteral("examples")).toInteger();
    r.correct = o.value(QStringLiteral("correct")).toInteger();
    r.ema = o.value(QStringLiteral("ema")).toBool();
    r.set = o.value(QStringLiteral("set")).toString(QStringLiteral("test")).toStdString();
    return r;
}

QString metricsFile(const QString& folder)
{
    return QDir(folder).filePath(QStringLiteral("metrics.jsonl"));
}

QString evalFile(const QString& folder)
{
    return QDir(folder).filePath(QStringLiteral("eval.jsonl"));
}

} // namespace

JsonlTail::Read JsonlTail::readNew()
{
    Read out;
    auto restart = [&] {
        out.restarted = true;
        m_offset = 0;
        m_tail.clear();
    };
    QFile f(m_path);
    if (!QFileInfo(m_path).isFile() || !f.open(QIODevice::ReadOnly)) { // a FIFO's open blocks
        if (m_offset > 0) restart();
        return out;
    }
    if (f.size() < m_offset) {
        restart();
    } else if (m_offset > 0) {
        // The same file as before, only longer? Its bytes before the offset must not have changed.
        if (!f.seek(m_offset - m_tail.size()) || f.read(m_tail.size()) != m_tail) restart();
    }
    if (!f.seek(m_offset)) return out;

    QByteArray pending; // read but not consumed: the start of a line whose newline is to come
    for (;;) {
        const QByteArray chunk = f.read(kChunkBytes);
        if (chunk.isEmpty()) break;
        pending += chunk;
        qsizetype start = 0;
        for (qsizetype nl; (nl = pending.indexOf('\n', start)) >= 0; start = nl + 1)
            if (auto o = parseLine(QByteArrayView(pending).sliced(start, nl - start)))
                out.objects.push_back(std::move(*o));
        m_offset += start;
        m_tail = start >= kTailBytes ? pending.sliced(start - kTailBytes, kTailBytes)
                                     : (m_tail + pending.first(start)).right(kTailBytes);
        pending.remove(0, start);
    }
    // The writer's line in progress, unless it is complete but for its newline.
    if (auto o = parseLine(pending)) {
        out.objects.push_back(std::move(*o));
        m_offset += pending.size();
        m_tail = (m_tail + pending).right(kTailBytes);
    }
    return out;
}

LoggedSteps readLoggedSteps(const QString& folder, std::int64_t upToStep)
{
    LoggedSteps logged;
    JsonlTail metrics(metricsFile(folder));
    for (const QJsonObject& o : metrics.readNew().objects) {
        if (!o.value(QStringLiteral("step")).isDouble()) continue;
        engine::StepMetrics m;
        m.step = o.value(QStringLiteral("step")).toInteger();
        if (m.step > upToStep) continue;
        const auto number = [&o](const char* key) {
            return o.value(QLatin1String(key)).toDouble();
        };
        m.totalSteps = o.value(QStringLiteral("totalSteps")).toInteger();
        m.elapsedSeconds = number("elapsedSeconds");
        m.epoch = number("epoch");
        m.loss = number("loss");
        m.crossEntropy = number("crossEntropy");
        m.lr = number("lr");
        m.examplesPerSec = number("examplesPerSec");
        m.secPerBatch = number("secPerBatch");
        m.stepMs = number("stepMs");
        m.dataWaitMs = number("dataWaitMs");
        m.computeMs = number("computeMs");
        m.allReduceMs = number("allReduceMs");
        m.updateMs = number("updateMs");
        if (o.value(QStringLiteral("gradNorm")).isDouble())
            m.gradNorm = number("gradNorm"); // written since 2026-12-03
        for (const QJsonValue& t : o.value(QStringLiteral("towerComputeMs")).toArray())
            m.towerComputeMs.push_back(t.toDouble());
        for (const QJsonValue& t : o.value(QStringLiteral("towerTimes")).toArray())
            m.towerTimes.push_back(towerTimesOf(t.toObject()));
        logged.steps.push_back(std::move(m));
    }
    JsonlTail eval(evalFile(folder));
    for (const QJsonObject& o : eval.readNew().objects)
        if (auto r = evaluationOf(o); r && r->step <= upToStep)
            logged.evaluations.push_back(std::move(*r));
    return logged;
}

RunLogReader::RunLogReader(const QString& folder)
    : m_metrics(metricsFile(folder)), m_eval(evalFile(folder))
{
}

RunCurves RunLogReader::read()
{
    const QMutexLocker lock(&m_mutex);
    RunCurves& c = m_curves;
    const JsonlTail::Read metrics = m_metrics.readNew();
    if (metrics.restarted) {
        const RunCurves empty;
        c.steps.clear();
        c.loss.clear();
        c.rateSteps.clear();
        c.lr.clear();
        c.normSteps.clear();
        c.norm.clear();
        c.totalSteps = empty.totalSteps;
        c.stepMs = empty.stepMs;
        c.examplesPerSec = empty.examplesPerSec;
        c.towerTimes.clear();
        c.towerTimesStep = empty.towerTimesStep;
    }
    for (const QJsonObject& o : metrics.objects) {
        const std::int64_t step = o.value(QStringLiteral("step")).toInteger();
        c.steps << double(step);
        c.loss << o.value(QStringLiteral("loss")).toDouble();
        if (const QJsonValue lr = o.value(QStringLiteral("lr")); lr.isDouble()) {
            c.rateSteps << double(step);
            c.lr << lr.toDouble();
        }
        if (const QJsonValue norm = o.value(QStringLiteral("gradNorm"));
            norm.isDouble() && std::isfinite(norm.toDouble())) {
            c.normSteps << double(step);
            c.norm << norm.toDouble();
        }
        c.totalSteps = o.value(QStringLiteral("totalSteps")).toInteger(c.totalSteps);
        c.stepMs = o.value(QStringLiteral("stepMs")).toDouble();
        c.examplesPerSec = o.value(QStringLiteral("examplesPerSec")).toDouble();
        const QJsonValue towers = o.value(QStringLiteral("towerTimes"));
        if (!towers.isArray()) continue;
        c.towerTimes.clear();
        for (const QJsonValue& t : towers.toArray())
            c.towerTimes.push_back(towerTimesOf(t.toObject()));
        c.towerTimesStep = step;
    }
    const JsonlTail::Read eval = m_eval.readNew();
    if (eval.restarted) {
        c.evalSteps.clear();
        c.accuracy.clear();
        c.evalLoss.clear();
        c.top5Steps.clear();
        c.accuracyTop5.clear();
    }
    for (const QJsonObject& o : eval.objects) {
        const auto r = evaluationOf(o);
        if (!r) continue;
        c.evalSteps << double(r->step);
        c.accuracy << r->precisionAt1;
        c.evalLoss << r->meanCrossEntropy;
        if (r->hasTop5()) {
            c.top5Steps << double(r->step);
            c.accuracyTop5 << r->precisionAt5;
        }
    }
    return c;
}

} // namespace towers::app
