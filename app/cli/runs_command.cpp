// towers-cli runs: the runs of a runs folder, or one run in detail, as the desktop application's
// Runs & checkpoints page shows them (app/runs/run_scanner.h reads them for both).
#include <QDir>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLocale>

#include <algorithm>
#include <cstdint>
#include <filesystem>

#include "app/cli/command.h"
#include "app/data/data_dirs.h"
#include "app/runs/config_difference.h"
#include "app/runs/run_scanner.h"
#include "app/runs/run_trash.h"
#include "engine/errors.h"
#include "engine/ops/precision.h"

namespace towers::app {

namespace {

// "372 / 600", or "372" when the length is not known.
QString stepText(const RunSummary& r)
{
    const std::int64_t total = runLength(r);
    return total > 0 ? QStringLiteral("%1 / %2").arg(r.lastStep).arg(total)
                     : QString::number(r.lastStep);
}

// "training" (a process holds its lock), "failed" (its last training ended in an error),
// "finished" (it reached its length and evaluated there), "stopped early" (its patience ran out),
// "stopped" (it can be resumed) or "unreadable" (its config.json does not parse).
QString stateText(const RunSummary& r)
{
    if (!r.config) return QStringLiteral("unreadable");
    if (r.trainingBy) return QStringLiteral("training");
    if (failed(r)) return QStringLiteral("failed");
    if (stoppedEarly(r)) return QStringLiteral("stopped early");
    return finished(r) ? QStringLiteral("finished") : QStringLiteral("stopped");
}

// "91.20 % @ 1000", with " val" when measured on a validation set.
QString accuracyText(const RunSummary& r)
{
    if (!r.accuracy) return QStringLiteral("-");
    return QStringLiteral("%1 % @ %2%3")
        .arg(*r.accuracy * 100, 0, 'f', 2)
        .arg(r.accuracyStep)
        .arg(evaluatesOnValidation(r) ? QStringLiteral(" val") : QString());
}

// The JSON key of an accuracy of the run's evaluations: "test_accuracy" or
// "validation_accuracy".
QString accuracyKey(const RunSummary& r)
{
    return evaluatedSet(r) + QStringLiteral("_accuracy");
}

QString changedText(const RunSummary& r)
{
    return r.modified.isValid() ? r.modified.toString(QStringLiteral("yyyy-MM-dd HH:mm"))
                                : QStringLiteral("-");
}

// "2 towers x 64 (global batch 128) on the CPU, fp32", "1 tower x 64 x 4 accumulated (global
// batch 256) ..." and the like.
QString layoutText(const engine::TrainConfig& c)
{
    const int global = c.processes * c.towers;
    const QString towers = QString::fromStdString(engine::counted(c.towers, "tower", "towers"));
    QString text =
        c.processes > 1 ? QStringLiteral("%1 processes x %2").arg(c.processes).arg(towers) : towers;
    text += QStringLiteral(" x %1").arg(c.batchPerTower);
    if (c.accumulate > 1) text += QStringLiteral(" x %1 accumulated").arg(c.accumulate);
    text += QStringLiteral(" (global batch %1)").arg(qint64(global) * c.examplesPerTowerStep());
    text += c.backend == "cuda" ? QStringLiteral(" on GPUs") : QStringLiteral(" on the CPU");
    text += QStringLiteral(", ") + QString::fromStdString(std::string(precisionName(c.precision)));
    return text;
}

QString sizeText(const std::filesystem::path& p)
{
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(p, ec);
    if (ec) return QStringLiteral("?");
    return QLocale::c().formattedDataSize(qint64(bytes), 1, QLocale::DataSizeIecFormat);
}

// The accuracy eval.jsonl records at `step`, when that step was evaluated.
std::optional<double> accuracyAt(const RunSummary& r, std::int64_t step)
{
    for (const auto& e : r.evaluations)
        if (e.step == step) return e.precisionAt1;
    return std::nullopt;
}

// Runs side by side: a column each, the settings that differ, then how each went.
void printComparison(const std::vector<RunSummary>& runs, CommandIo& io)
{
    QStringList configs;
    for (const auto& r : runs) configs << r.configJson;
    const auto differences = configDifferences(configs);
    // Rows of cells: the header (each run's name), the settings, then the outcome.
    std::vector<QStringList> rows;
    QStringList header{QStringLiteral("run")};
    for (const auto& r : runs) header << r.name;
    rows.push_back(header);
    for (const auto& d : differences) {
        QStringList cells{d.setting};
        for (const QString& v : d.values) cells << (v.isEmpty() ? QStringLiteral("-") : v);
        rows.push_back(cells);
    }
    const std::size_t outcome = rows.size();
    const auto row = [&](const QString& name, auto cell) {
        QStringList cells{name};
        for (const auto& r : runs) cells << cell(r);
        rows.push_back(cells);
    };
    row(QStringLiteral("step"), [](const RunSummary& r) { return stepText(r); });
    row(QStringLiteral("state"), [](const RunSummary& r) { return stateText(r); });
    row(QStringLiteral("accuracy"), [](const RunSummary& r) { return accuracyText(r); });
    // Precision @ 5 of the same evaluation, where a run logged it (more than 10 classes).
    if (std::any_of(runs.begin(), runs.end(), [](const RunSummary& r) { return r.accuracyTop5; }))
        row(QStringLiteral("@ 5"), [](const RunSummary& r) {
            return r.accuracyTop5 ? QStringLiteral("%1 %").arg(*r.accuracyTop5 * 100, 0, 'f', 2)
                                  : QStringLiteral("-");
        });
    row(QStringLiteral("best"), [](const RunSummary& r) {
        return r.best ? QStringLiteral("%1 % @ %2")
                            .arg(r.best->precisionAt1 * 100, 0, 'f', 2)
                            .arg(r.best->file.step)
                      : QStringLiteral("-");
    });
    // Columns as wide as their widest cell, up to 40 characters (a longer one keeps its end,
    // where a run's name has its time).
    constexpr qsizetype kWidest = 40;
    const auto fit = [](const QString& s) {
        return s.size() <= kWidest ? s : QStringLiteral("…") + s.right(kWidest - 1);
    };
    std::vector<qsizetype> width(std::size_t(header.size()), 0);
    for (const auto& cells : rows)
        for (qsizetype i = 0; i < cells.size(); ++i)
            width[std::size_t(i)] = std::max(width[std::size_t(i)], fit(cells[i]).size());
    const auto print = [&](const QStringList& cells) {
        QString line;
        for (qsizetype i = 0; i < cells.size(); ++i)
            line += fit(cells[i]).leftJustified(width[std::size_t(i)] + 2);
        io.out << line.trimmed() << "\n";
    };
    print(rows.front());
    if (differences.empty()) io.out << "(the same configuration, but for each run's id)\n";
    for (std::size_t i = 1; i < rows.size(); ++i) {
        if (i == outcome) io.out << "\n";
        print(rows[i]);
    }
}

bool isBest(const RunSummary& r, const engine::CheckpointFile& c)
{
    return r.best && r.best->file.step == c.step;
}

QJsonObject runJson(const RunSummary& r, bool withCheckpoints)
{
    QJsonObject o{{QStringLiteral("name"), r.name},
                  {QStringLiteral("folder"), r.folder},
                  {QStringLiteral("step"), qint64(r.lastStep)},
                  {QStringLiteral("checkpoints"), int(r.checkpoints.size())}};
    if (r.config) {
        o.insert(QStringLiteral("model"), QString::fromStdString(r.config->model));
        o.insert(QStringLiteral("dataset"), QString::fromStdString(r.config->dataset));
        if (!r.config->initFrom.empty())
            o.insert(QStringLiteral("init_from"), QString::fromStdString(r.config->initFrom));
        o.insert(QStringLiteral("processes"), r.config->processes);
        o.insert(QStringLiteral("towers"), r.config->towers);
        o.insert(QStringLiteral("batch_per_tower"), r.config->batchPerTower);
        o.insert(QStringLiteral("accumulate"), r.config->accumulate);
        o.insert(QStringLiteral("backend"), QString::fromStdString(r.config->backend));
        o.insert(QStringLiteral("precision"),
                 QString::fromStdString(std::string(precisionName(r.config->precision))));
        o.insert(QStringLiteral("evaluated_on"), evaluatedSet(r));
        if (evaluatesOnValidation(r))
            o.insert(QStringLiteral("validation_share"), r.config->validation);
        if (r.config->patience > 0) o.insert(QStringLiteral("patience"), r.config->patience);
        if (r.config->patience > 0 && r.config->minDelta > 0)
            o.insert(QStringLiteral("min_delta"), r.config->minDelta);
    }
    if (const std::int64_t total = runLength(r); total > 0)
        o.insert(QStringLiteral("total_steps"), qint64(total));
    if (r.lastLoss) {
        o.insert(QStringLiteral("loss"), *r.lastLoss);
        o.insert(QStringLiteral("epoch"), r.lastEpoch);
    }
    if (r.accuracy) {
        o.insert(accuracyKey(r), *r.accuracy);
        o.insert(accuracyKey(r) + QStringLiteral("_step"), qint64(r.accuracyStep));
        if (r.accuracyTop5) o.insert(accuracyKey(r) + QStringLiteral("_top5"), *r.accuracyTop5);
    }
    if (r.best)
        o.insert(QStringLiteral("best_checkpoint"),
                 QJsonObject{
                     {QStringLiteral("step"), qint64(r.best->file.step)},
                     {accuracyKey(r), r.best->precisionAt1},
                     {QStringLiteral("path"), QString::fromStdString(r.best->file.path.string())}});
    if (r.modified.isValid())
        o.insert(QStringLiteral("modified"), r.modified.toString(Qt::ISODate));
    o.insert(QStringLiteral("state"), stateText(r));
    o.insert(QStringLiteral("training_now"),
             r.trainingBy ? QJsonValue(*r.trainingBy) : QJsonValue());
    if (!r.problem.isEmpty()) o.insert(QStringLiteral("problem"), r.problem);
    if (failed(r))
        o.insert(QStringLiteral("failure"),
                 QJsonObject{{QStringLiteral("step"), qint64(r.failure->step)},
                             {QStringLiteral("error"), r.failure->error}});
    if (withCheckpoints) {
        QJsonArray list;
        for (auto it = r.checkpoints.rbegin(); it != r.checkpoints.rend(); ++it) {
            std::error_code ec;
            const auto bytes = std::filesystem::file_size(it->path, ec);
            QJsonObject c{{QStringLiteral("step"), qint64(it->step)},
                          {QStringLiteral("path"), QString::fromStdString(it->path.string())},
                          {QStringLiteral("bytes"), ec ? QJsonValue() : qint64(bytes)}};
            if (const auto a = accuracyAt(r, it->step)) c.insert(accuracyKey(r), *a);
            c.insert(QStringLiteral("best"), isBest(r, *it));
            list.append(c);
        }
        o.insert(QStringLiteral("checkpoint_files"), list);
    }
    return o;
}

void printList(const QString& runsDir, const std::vector<RunSummary>& runs, CommandIo& io)
{
    if (runs.empty()) {
        io.out << "No runs in " << runsDir << " (towers-cli train puts them there).\n";
        return;
    }
    io.out << "Runs in " << runsDir << ", the most recently changed first:\n\n";
    int nameWidth = 3;
    for (const auto& r : runs) nameWidth = std::max(nameWidth, int(r.name.size()));
    const auto row = [&](const QString& name, const QString& model, const QString& dataset,
                         const QString& step, const QString& state, const QString& acc,
                         const QString& ckpts, const QString& changed) {
        return name.leftJustified(nameWidth + 2) + model.leftJustified(18) +
               dataset.leftJustified(15) + step.rightJustified(15) + QStringLiteral("  ") +
               state.leftJustified(14) + acc.leftJustified(22) + ckpts.rightJustified(5) +
               QStringLiteral("  ") + changed;
    };
    io.out << row(QStringLiteral("run"), QStringLiteral("model"), QStringLiteral("dataset"),
                  QStringLiteral("step"), QStringLiteral("state"), QStringLiteral("accuracy"),
                  QStringLiteral("ckpts"), QStringLiteral("changed"))
                  .trimmed()
           << "\n";
    for (const auto& r : runs) {
        io.out << row(r.name,
                      r.config ? QString::fromStdString(r.config->model)
                               : QStringLiteral("(unreadable)"),
                      r.config ? QString::fromStdString(r.config->dataset) : QString(), stepText(r),
                      stateText(r), accuracyText(r), QString::number(r.checkpoints.size()),
                      changedText(r))
                      .trimmed()
               << "\n";
        if (r.trainingBy) io.out << "    training now: " << *r.trainingBy << "\n";
        if (failed(r)) io.out << "    failed: " << r.failure->error << "\n";
        if (!r.problem.isEmpty()) io.out << "    problem: " << r.problem << "\n";
    }
}

void printRun(const RunSummary& r, CommandIo& io)
{
    const auto line = [&](const char* label, const QString& text) {
        io.out << QString::fromLatin1(label).leftJustified(13) << text << "\n";
    };
    line("run", r.folder);
    if (r.config) {
        line("model", QStringLiteral("%1 on %2")
                          .arg(QString::fromStdString(r.config->model),
                               QString::fromStdString(r.config->dataset)));
        line("towers", layoutText(*r.config));
        if (!r.config->initFrom.empty())
            line("started from", QString::fromStdString(r.config->initFrom));
    }
    QString progress = QStringLiteral("step ") + stepText(r);
    if (r.lastLoss) // a log whose records were all lost gives none, not a loss of 0
        progress += QStringLiteral(", epoch %1, loss %2")
                        .arg(r.lastEpoch, 0, 'f', 2)
                        .arg(*r.lastLoss, 0, 'g', 4);
    line("progress", progress);
    line("accuracy",
         r.accuracy
             ? QStringLiteral("%1 % (%2 precision @ 1%3) at step %4")
                   .arg(*r.accuracy * 100, 0, 'f', 2)
                   .arg(evaluatedSet(r))
                   .arg(r.accuracyTop5
                            ? QStringLiteral("; @ 5: %1 %").arg(*r.accuracyTop5 * 100, 0, 'f', 2)
                            : QString())
                   .arg(r.accuracyStep)
             : QStringLiteral("not evaluated yet"));
    if (evaluatesOnValidation(r))
        line("validation", QStringLiteral("%1 % of each class's training images held out; the "
                                          "test set is left for eval --best")
                               .arg(r.config->validation * 100, 0, 'g', 3));
    const QString state = stateText(r);
    if (state == QLatin1String("training"))
        line("state", QStringLiteral("training now: ") + *r.trainingBy);
    else if (diverged(r))
        // A resume would diverge again: the same checkpoint, data and rate.
        line("state", QStringLiteral("failed after step %1: %2; %3")
                          .arg(QString::number(r.failure->step), r.failure->error,
                               divergenceAdvice(r.folder, *r.config)));
    else if (failed(r))
        line("state",
             QStringLiteral("failed after step %1: %2; once that is fixed, continue with: %3")
                 .arg(QString::number(r.failure->step), r.failure->error,
                      resumeCommandLine(r.folder, r.config->processes)));
    else if (stoppedEarly(r))
        line("state",
             QStringLiteral("stopped early at step %1: %2 evaluations in a row "
                            "without a better one (patience %3%4)")
                 .arg(r.lastStep)
                 .arg(engine::evaluationsSinceBest(r.evaluations, r.config->minDelta))
                 .arg(r.config->patience)
                 .arg(r.config->minDelta > 0 ? QStringLiteral(", better by more than %1 points")
                                                   .arg(r.config->minDelta * 100, 0, 'g', 3)
                                             : QString()));
    else if (state == QLatin1String("stopped"))
        line("state", QStringLiteral("stopped; continue with: ") +
                          resumeCommandLine(r.folder, r.config->processes));
    else
        line("state", state);
    if (r.best) {
        QString text = QStringLiteral("%1 % at step %2: the checkpoint --best picks, kept by "
                                      "rotation")
                           .arg(r.best->precisionAt1 * 100, 0, 'f', 2)
                           .arg(r.best->file.step);
        // A better evaluation whose checkpoint is gone (deleted, moved): said, not passed over.
        if (const auto top = engine::bestEvaluation(r.evaluations);
            top && top->precisionAt1 > r.best->precisionAt1)
            text += QStringLiteral("; its best evaluation, %1 % at step %2, has no checkpoint left "
                                   "(was it deleted or moved?)")
                        .arg(top->precisionAt1 * 100, 0, 'f', 2)
                        .arg(top->step);
        line("best", text);
    }
    line("changed", changedText(r));
    if (!r.problem.isEmpty()) line("problem", r.problem);
    if (r.checkpoints.empty()) {
        line("checkpoints", QStringLiteral("none"));
        return;
    }
    io.out << "checkpoints (newest first; the " << evaluatedSet(r)
           << " accuracy at their step where evaluated):\n";
    for (auto it = r.checkpoints.rbegin(); it != r.checkpoints.rend(); ++it) {
        const auto a = accuracyAt(r, it->step);
        io.out
            << "  " << QString::number(it->step).rightJustified(9) << "  "
            << sizeText(it->path).rightJustified(9) << "  "
            << (a ? QStringLiteral("%1 %").arg(*a * 100, 0, 'f', 2) : QString()).rightJustified(8)
            << (isBest(r, *it) ? QStringLiteral(" best") : QStringLiteral("     ")) << "  "
            << QString::fromStdString(it->path.string()) << "\n";
    }
}

} // namespace

int runRuns(const QStringList& args, CommandIo& io)
{
    QCommandLineParser p;
    p.setApplicationDescription(QStringLiteral(
        "Lists the training runs in the runs folder, the most recently changed first, as the\n"
        "desktop application's Runs & checkpoints page does: each run's model and dataset, its\n"
        "latest step, its latest accuracy (on the test set, or on the validation set of a run "
        "that\n"
        "holds one out), its checkpoints, and the process that trains it now, if any. With a run "
        "(a\n"
        "folder in the runs folder, by name, or any run folder's path), that run in detail with\n"
        "every checkpoint. The runs folder is $TOWERS_RUNS, else $XDG_DATA_HOME/towers/runs\n"
        "(~/.local/share/towers/runs), where towers-cli train puts its runs. With --trash, the\n"
        "run's folder goes to the desktop's trash (the freedesktop.org trash that file managers\n"
        "restore from), nothing deleted; a run that a process trains stays."));
    p.addOptions({
        {QStringLiteral("runs-dir"),
         QStringLiteral("The runs folder to list (default: $TOWERS_RUNS, else the user's)."),
         QStringLiteral("dir")},
        {QStringLiteral("json"), QStringLiteral("Print JSON.")},
        {QStringLiteral("trash"), QStringLiteral("Move the run's folder to the trash.")},
    });
    p.addPositionalArgument(
        QStringLiteral("run"),
        QStringLiteral("A run to show: its folder's name or path. Several: side by side, the "
                       "settings that differ and how each went."),
        QStringLiteral("[run...]"));
    int code = 0;
    if (!parseOrExplain(p, args, io, code)) return code;
    const QStringList positional = p.positionalArguments();
    if (positional.size() > 1 && p.isSet(QStringLiteral("trash"))) {
        io.err << "towers-cli runs: --trash moves one run at a time, got " << positional.size()
               << "\n";
        return ExitUsage;
    }
    const QString runsDir = p.isSet(QStringLiteral("runs-dir"))
                                ? p.value(QStringLiteral("runs-dir"))
                                : defaultRunsDir();
    if (runsDir.isEmpty() && positional.isEmpty()) {
        io.err << "towers-cli runs: "
               << QString::fromStdString(noRunsFolder(", or with --runs-dir")) << "\n";
        return ExitFailure;
    }
    const bool json = p.isSet(QStringLiteral("json"));
    const bool trash = p.isSet(QStringLiteral("trash"));
    if (trash && positional.isEmpty()) {
        io.err << "towers-cli runs: --trash needs the run to move, by name or path\n";
        return ExitUsage;
    }

    if (positional.isEmpty()) {
        if (p.isSet(QStringLiteral("runs-dir")) && !QFileInfo(runsDir).isDir()) {
            io.err << "towers-cli runs: --runs-dir: '" << runsDir << "' is not a folder\n";
            return ExitUsage;
        }
        RunsFolderProblems problems;
        const auto runs = scanRuns(runsDir, &problems);
        // The runs folder itself cannot be read: no list, rather than an empty one.
        if (!problems.folder.isEmpty()) {
            io.err << "towers-cli runs: " << problems.folder << "\n";
            return ExitFailure;
        }
        for (const QString& problem : problems.inside)
            io.err << "towers-cli runs: " << problem << " (a run there is not listed)\n";
        if (json) {
            QJsonArray list;
            for (const auto& r : runs) list.append(runJson(r, false));
            io.out << QJsonDocument(
                          QJsonObject{{QStringLiteral("runs_dir"), QDir(runsDir).absolutePath()},
                                      {QStringLiteral("runs"), list}})
                          .toJson(QJsonDocument::Indented);
        } else {
            printList(QDir(runsDir).absolutePath(), runs, io);
        }
        return ExitOk;
    }

    // Each run by name in the runs folder, else by path.
    QStringList folders;
    for (const QString& given : positional) {
        const QString named = runsDirEntry(given, runsDir);
        const QString folder = named.isEmpty() ? given : named;
        if (!QFileInfo(folder).isDir()) {
            io.err << "towers-cli runs: no run '" << given << "': " << folder
                   << " is not a folder ("
                   << (runsDir.isEmpty()
                           ? QString::fromStdString(noRunsFolder(", or with --runs-dir"))
                           : QStringLiteral("towers-cli runs lists the runs in ") + runsDir)
                   << ")\n";
            return ExitFailure;
        }
        if (!QFileInfo::exists(QDir(folder).filePath(QStringLiteral("config.json")))) {
            io.err << "towers-cli runs: " << QDir(folder).absolutePath()
                   << " is not a Towers run folder: it has no config.json\n";
            return ExitFailure;
        }
        folders << folder;
    }
    if (folders.size() > 1) {
        std::vector<RunSummary> runs;
        for (const QString& f : folders) runs.push_back(readRun(f));
        if (json) {
            QJsonArray list, differences;
            for (const auto& r : runs) list.append(runJson(r, false));
            QStringList configs;
            for (const auto& r : runs) configs << r.configJson;
            for (const auto& d : configDifferences(configs))
                differences.append(
                    QJsonObject{{QStringLiteral("setting"), d.setting},
                                {QStringLiteral("values"), QJsonArray::fromStringList(d.values)}});
            io.out << QJsonDocument(QJsonObject{{QStringLiteral("runs"), list},
                                                {QStringLiteral("differences"), differences}})
                          .toJson(QJsonDocument::Indented);
        } else {
            printComparison(runs, io);
        }
        return ExitOk;
    }
    const QString folder = folders.front();
    if (trash) {
        const TrashOutcome moved = moveRunToTrash(folder);
        if (!moved.ok) {
            io.err << "towers-cli runs: " << moved.error << "\n";
            return ExitFailure;
        }
        if (json)
            io.out << QJsonDocument(
                          QJsonObject{{QStringLiteral("trashed"), QDir(folder).absolutePath()},
                                      {QStringLiteral("trash_path"), moved.trashPath},
                                      {QStringLiteral("runs_inside"),
                                       QJsonArray::fromStringList(moved.runsInside)}})
                          .toJson(QJsonDocument::Indented);
        else
            io.out << "moved " << QDir(folder).absolutePath()
                   << " to the trash: " << moved.trashPath
                   << (moved.runsInside.isEmpty()
                           ? QString()
                           : QStringLiteral(", with the runs inside it (%1)")
                                 .arg(moved.runsInside.join(QStringLiteral(", "))))
                   << " (restore it from there)\n";
        return ExitOk;
    }
    const RunSummary r = readRun(folder);
    if (json)
        io.out << QJsonDocument(runJson(r, true)).toJson(QJsonDocument::Indented);
    else
        printRun(r, io);
    return ExitOk;
}

} // namespace towers::app
