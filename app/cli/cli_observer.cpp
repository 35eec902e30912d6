// CliObserver (cli_observer.h): the trainer's events printed for towers-cli train, as log lines
// or as JSON objects; the training itself is in train_command.cpp.
#include "app/cli/cli_observer.h"

#include <QJsonArray>
#include <QJsonDocument>

#include <cmath>

#include "engine/train/tower_times.h"

namespace towers::app {

namespace {

QJsonArray doubles(const std::vector<double>& v)
{
    QJsonArray a;
    for (double x : v) a.append(x);
    return a;
}

// Where each tower's step went, for --json: [{"compute_ms": ..., "comm_ms": ..., ...}, ...].
QJsonArray towerTimes(const std::vector<engine::TowerTimes>& times)
{
    QJsonArray out;
    for (const auto& t : times)
        out.append(QJsonObject{{QStringLiteral("compute_ms"), t.computeMs},
                               {QStringLiteral("comm_ms"), t.commMs},
                               {QStringLiteral("data_ms"), t.dataMs},
                               {QStringLiteral("update_ms"), t.updateMs}});
    return out;
}

} // namespace

void CliObserver::holdLog()
{
    std::lock_guard lock(m_mutex);
    m_holding = true;
}

void CliObserver::releaseLog()
{
    std::vector<QString> held;
    {
        std::lock_guard lock(m_mutex);
        m_holding = false;
        held.swap(m_held);
    }
    for (const QString& line : held) m_output.write(line);
}

void CliObserver::onStep(const engine::StepMetrics& m)
{
    if (!m_json) return; // the log line says it
    QJsonObject o{{QStringLiteral("event"), QStringLiteral("step")},
                  {QStringLiteral("step"), qint64(m.step)},
                  {QStringLiteral("total_steps"), qint64(m.totalSteps)},
                  {QStringLiteral("epoch"), m.epoch},
                  {QStringLiteral("loss"), m.loss},
                  {QStringLiteral("cross_entropy"), m.crossEntropy},
                  {QStringLiteral("lr"), m.lr},
                  {QStringLiteral("examples_per_sec"), m.examplesPerSec},
                  {QStringLiteral("sec_per_batch"), m.secPerBatch},
                  {QStringLiteral("data_wait_ms"), m.dataWaitMs},
                  {QStringLiteral("compute_ms"), m.computeMs},
                  {QStringLiteral("allreduce_ms"), m.allReduceMs},
                  {QStringLiteral("update_ms"), m.updateMs},
                  {QStringLiteral("tower_compute_ms"), doubles(m.towerComputeMs)},
                  {QStringLiteral("tower_times"), towerTimes(m.towerTimes)},
                  {QStringLiteral("elapsed_s"), m.elapsedSeconds},
                  {QStringLiteral("eta_s"), m.etaSeconds}};
    if (std::isfinite(m.gradNorm)) o[QStringLiteral("grad_norm")] = m.gradNorm; // a finite step's
    print(o);
}

void CliObserver::onEvaluation(const engine::EvalResult& r)
{
    std::lock_guard lock(m_mutex);
    m_lastEval = r;
    m_haveEval = true;
    if (!m_json) return;
    QJsonObject o{{QStringLiteral("event"), QStringLiteral("eval")},
                  {QStringLiteral("step"), qint64(r.step)},
                  {QStringLiteral("set"), QString::fromStdString(r.set)},
                  {QStringLiteral("precision_at_1"), r.precisionAt1},
                  {QStringLiteral("examples"), qint64(r.examples)},
                  {QStringLiteral("ema"), r.ema},
                  {QStringLiteral("mean_cross_entropy"), r.meanCrossEntropy},
                  {QStringLiteral("per_class_accuracy"), doubles(r.perClassAccuracy)},
                  {QStringLiteral("seconds"), r.seconds}};
    if (r.hasTop5()) {
        o[QStringLiteral("precision_at_5")] = r.precisionAt5;
        o[QStringLiteral("per_class_top5")] = doubles(r.perClassTop5);
    }
    printLocked(o);
}

void CliObserver::onLog(const std::string& line)
{
    if (m_json) {
        print({{QStringLiteral("event"), QStringLiteral("log")},
               {QStringLiteral("message"), QString::fromStdString(line)}});
        return;
    }
    {
        std::lock_guard lock(m_mutex);
        if (m_holding) {
            m_held.push_back(QString::fromStdString(line));
            return;
        }
    }
    m_output.write(QString::fromStdString(line));
}

void CliObserver::onCheckpoint(const std::filesystem::path& file, std::int64_t step)
{
    std::lock_guard lock(m_mutex);
    m_lastCheckpoint = QString::fromStdString(file.string());
    if (m_json)
        printLocked({{QStringLiteral("event"), QStringLiteral("checkpoint")},
                     {QStringLiteral("step"), qint64(step)},
                     {QStringLiteral("file"), m_lastCheckpoint}});
}

void CliObserver::print(const QJsonObject& o)
{
    std::lock_guard lock(m_mutex);
    printLocked(o);
}

void CliObserver::printLocked(const QJsonObject& o)
{
    m_output.write(QString::fromUtf8(QJsonDocument(o).toJson(QJsonDocument::Compact)));
}

} // namespace towers::app
