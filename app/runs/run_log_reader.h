#pragma once
// Reading a run's logs while they grow. The trainer appends one JSON line per logged step to
// metrics.jsonl (and per evaluation to eval.jsonl), one write per line, possibly from another
// process on a shared folder, while the GUI follows the run. A JsonlTail remembers how far it has
// read, so a read costs what was appended since the last one, not the whole (long) log; a
// RunLogReader keeps a run's curves up to date with two of them.
#include <QByteArray>
#include <QJsonObject>
#include <QMutex>
#include <QString>

#include <vector>

#include "app/runs/run_scanner.h"
#include "engine/train/evaluation.h"
#include "engine/train/trainer_observer.h"

namespace towers::app {

// The complete lines appended to one .jsonl file since the last read.
class JsonlTail
{
public:
    explicit JsonlTail(QString path) : m_path(std::move(path)) {}

    struct Read
    {
        std::vector<QJsonObject> objects; // in file order
        // The file was truncated or replaced since the last read (it is shorter than what was read,
        // or the bytes before the offset changed; a log rewritten by a resumed run): `objects` are
        // the whole file's again and what was read before is void.
        bool restarted = false;
    };

    // The JSON objects of the lines appended since the last call. A last line without its newline
    // is the writer's unfinished line: it is left for a later call unless it already parses as a
    // JSON object. Lines that do not parse are skipped. A missing file reads as empty (as a
    // restart when something had been read). Never throws.
    Read readNew();
    // How many bytes of the file have been consumed.
    qint64 offset() const { return m_offset; }
    const QString& path() const { return m_path; }

private:
    QString m_path;
    qint64 m_offset = 0;
    QByteArray m_tail; // the last bytes before m_offset, to notice a replaced file
};

// A run folder's curves, read incrementally: each read() parses only the lines appended to
// metrics.jsonl and eval.jsonl since the previous one and returns every point so far.
class RunLogReader
{
public:
    explicit RunLogReader(const QString& folder);
    RunLogReader(const RunLogReader&) = delete;
    RunLogReader& operator=(const RunLogReader&) = delete;

    // The curves of the whole logs as they are now. Safe to call from any thread (one read at a
    // time); never throws.
    RunCurves read();

private:
    QMutex m_mutex;
    JsonlTail m_metrics, m_eval;
    RunCurves m_curves;
};

// What a run logged up to `upToStep`: metrics.jsonl's steps and eval.jsonl's evaluations as the
// trainer reported them (an evaluation's step, set, accuracy and cross-entropy), for a resumed
// run's plots to show its steps before the resume. Lines that do not parse are skipped; missing
// files read as empty. Never throws.
struct LoggedSteps
{
    std::vector<engine::StepMetrics> steps;
    std::vector<engine::EvalResult> evaluations;
};
LoggedSteps readLoggedSteps(const QString& folder, std::int64_t upToStep);

} // namespace towers::app
