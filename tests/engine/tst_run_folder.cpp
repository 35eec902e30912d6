// A run folder is the user's: one owner at a time (RunLock: refused with the holder named, freed
// when the holder dies, even by SIGKILL), new folders never shared (createNewFolder), a new run
// never clobbers an earlier one and a resume never deletes a checkpoint it could not load (both
// move files to set-aside/ only when asked), rotation removes only this run's own readable
// checkpoints, and a stop during an evaluation ends it at once.
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <atomic>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "engine/models/registry.h"
#include "engine/train/checkpoint.h"
#include "engine/train/run_lock.h"
#include "engine/train/trainer.h"
#include "error_message.h"
#include "synthetic_batches.h"

using namespace towers::engine;
using namespace towers::test;
namespace fs = std::filesystem;

namespace {

TrainConfig smallConfig()
{
    TrainConfig c = smallTrainConfig();
    c.steps = 4;
    c.checkpointEvery = 1;
    c.keepCheckpoints = 2;
    c.logEvery = 1;
    return c;
}

std::string readAll(const fs::path& p)
{
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

void truncateTo(const fs::path& p, std::size_t bytes)
{
    fs::resize_file(p, bytes);
}

// A whole run of `c` into `root`, from its start.
void trainToEnd(const TrainConfig& c, const fs::path& root)
{
    auto src = syntheticBatchesFor(c);
    Trainer t(c, src, root);
    QCOMPARE(t.run(), Trainer::Outcome::Finished);
}

TrainConfig readConfigOf(const RunDirectory& run)
{
    return TrainConfig::fromJson(*run.readConfig());
}

// The steps of the run's checkpoint files, oldest first.
std::vector<std::int64_t> checkpointSteps(const RunDirectory& run)
{
    std::vector<std::int64_t> steps;
    for (const auto& f : run.checkpoints()) steps.push_back(f.step);
    return steps;
}

// The run in `root` (trained to step 4) resumed to `steps`, evaluated after every step.
void resumeEvaluatingEveryStep(const fs::path& root, std::int64_t steps, std::int64_t from = 4)
{
    TrainConfig longer = readConfigOf(RunDirectory(root));
    longer.steps = steps;
    longer.evalEvery = 1;
    auto src = syntheticBatchesFor(longer);
    Trainer t(longer, src, root);
    t.setEvaluator(40, src.evaluationBatches());
    QCOMPARE(t.resumeFromNewest(), std::optional<std::int64_t>(from));
    QCOMPARE(t.run(), Trainer::Outcome::Finished);
}

// What a resumed run logged, and the step it finished at.
struct RunLog : TrainerObserver
{
    QStringList lines;
    std::int64_t finished = -1;
    void onLog(const std::string& line) override { lines << QString::fromStdString(line); }
    void onFinished(std::int64_t step) override { finished = step; }
};

// The run in `root` resumed to `steps`, evaluated after every step, with this patience and min
// delta: its outcome and step.
std::pair<Trainer::Outcome, std::int64_t> resumeWithPatience(const fs::path& root, int patience,
                                                             double minDelta, RunLog& log,
                                                             std::int64_t steps = 20)
{
    TrainConfig longer = readConfigOf(RunDirectory(root));
    longer.steps = steps;
    longer.evalEvery = 1;
    longer.patience = patience;
    longer.minDelta = minDelta;
    auto src = syntheticBatchesFor(longer);
    Trainer t(longer, src, root, {}, &log);
    t.setEvaluator(40, src.evaluationBatches());
    t.resumeFromNewest();
    const Trainer::Outcome outcome = t.run();
    return {outcome, t.step()};
}

// Every file under `root` (relative path -> content).
std::map<std::string, std::string> snapshot(const fs::path& root)
{
    std::map<std::string, std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(root))
        if (e.is_regular_file() && e.path().filename() != RunLock::kFileName)
            out[fs::relative(e.path(), root).string()] = readAll(e.path());
    return out;
}

} // namespace

class TestRunFolder : public QObject
{
    Q_OBJECT
private slots:
    void lockIsExclusiveAndNamesItsHolder()
    {
        QTemporaryDir dir;
        const fs::path root = fs::path(dir.path().toStdString()) / "run";
        QVERIFY(!RunLock::holder(root));
        {
            const RunLock lock = RunLock::acquire(root, "tst_run_folder");
            QVERIFY(fs::is_directory(root));
            const auto who = RunLock::holder(root);
            QVERIFY(who);
            QVERIFY2(who->find("process " + std::to_string(::getpid())) != std::string::npos,
                     who->c_str());
            QVERIFY2(who->find("tst_run_folder") != std::string::npos, who->c_str());
            // A second owner, even in this process, is refused with the holder named.
            const std::string m = messageOf([&] { RunLock::acquire(root); });
            QVERIFY2(m.find(root.string()) != std::string::npos &&
                         m.find(std::to_string(::getpid())) != std::string::npos,
                     m.c_str());
            QVERIFY_THROWS_EXCEPTION(RunFolderBusy, RunLock::acquire(root));
        }
        QVERIFY(!RunLock::holder(root)); // released with the RunLock
        const RunLock again = RunLock::acquire(root);
        QVERIFY(fs::exists(root / RunLock::kFileName));
    }

    // Another process holds it (util-linux flock(1), the same flock(2)); killed with SIGKILL, the
    // kernel frees the lock: no stale lock after a crash.
    void lockDiesWithItsProcess()
    {
        if (QStandardPaths::findExecutable(QStringLiteral("flock")).isEmpty())
            QSKIP("flock(1) is not installed");
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        // -o: the lock stays with flock itself, not with the command it runs (which says when the
        // lock is held).
        QProcess holder;
        holder.start(QStringLiteral("flock"),
                     {QStringLiteral("-o"),
                      QString::fromStdString((root / RunLock::kFileName).string()),
                      QStringLiteral("sh"), QStringLiteral("-c"),
                      QStringLiteral("echo held; read x")}); // ends at EOF on its input
        QVERIFY(holder.waitForReadyRead(10000));
        QVERIFY_THROWS_EXCEPTION(RunFolderBusy, RunLock::acquire(root));
        QVERIFY(RunLock::holder(root));
        holder.kill(); // SIGKILL to the lock's holder
        QVERIFY(holder.waitForFinished(10000));
        QVERIFY(!RunLock::holder(root));
        const RunLock mine = RunLock::acquire(root);
    }

    void newFoldersAreNeverShared()
    {
        QTemporaryDir dir;
        const fs::path proposed = fs::path(dir.path().toStdString()) / "runs" /
                                  "fashion-mnist-fashion-fast-20261124-010203";
        const fs::path a = createNewFolder(proposed), b = createNewFolder(proposed),
                       c = createNewFolder(proposed);
        QCOMPARE(a, proposed);
        QCOMPARE(b.string(), proposed.string() + "-2");
        QCOMPARE(c.string(), proposed.string() + "-3");
    }

    // A new run into a folder that holds one is refused, touching nothing; asked to, it moves the
    // earlier run to set-aside/ and starts.
    void newRunNeverClobbersAnEarlierOne()
    {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        TrainConfig c = smallConfig();
        trainToEnd(c, root);
        const auto before = snapshot(root);
        QVERIFY(before.count("config.json") && before.count("metrics.jsonl"));
        {
            auto src = syntheticBatchesFor(c);
            Trainer t(c, src, root);
            const std::string m = messageOf([&] { t.run(); }); // run() alone is a new run
            QVERIFY2(m.find("already holds a run") != std::string::npos &&
                         m.find("checkpoints") != std::string::npos,
                     m.c_str());
        }
        QCOMPARE(snapshot(root), before);
        {
            auto src = syntheticBatchesFor(c);
            Trainer t(c, src, root);
            QVERIFY_THROWS_EXCEPTION(RunFolderHoldsRun, t.startNew(false));
            t.startNew(true);
            QCOMPARE(t.run(), Trainer::Outcome::Finished);
        }
        const auto sets = fs::directory_iterator(root / "set-aside");
        const fs::path aside = sets->path();
        for (const auto& [name, content] : before)
            QVERIFY2(readAll(aside / name) == content,
                     name.c_str()); // every byte of the earlier run
        QVERIFY(fs::exists(root / "config.json"));
    }

    // Checkpoints that do not load are never deleted: a resume refuses, listing each; asked to
    // restart, it moves them aside. A newer unloadable one above a good one is moved, not removed.
    void unloadableCheckpointsSurviveAResume()
    {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        TrainConfig c = smallConfig();
        c.keepCheckpoints = 10;
        trainToEnd(c, root);
        RunDirectory run(root);
        QCOMPARE(run.checkpoints().size(), std::size_t(4));
        // Step 4 damaged: the resume continues from 3, and step 4's file goes to set-aside/.
        const fs::path four = run.checkpointPath(4);
        truncateTo(four, fs::file_size(four) / 2);
        const std::string damaged = readAll(four);
        {
            auto src = syntheticBatchesFor(c);
            TrainConfig longer = c;
            longer.steps = 5;
            Trainer t(longer, src, root);
            QCOMPARE(t.resumeFromNewest(), std::optional<std::int64_t>(3));
            QCOMPARE(t.run(), Trainer::Outcome::Finished);
        }
        bool found = false;
        for (const auto& e : fs::recursive_directory_iterator(root / "set-aside"))
            found =
                found || (e.path().filename() == four.filename() && readAll(e.path()) == damaged);
        QVERIFY2(found, "the damaged checkpoint was not kept in set-aside/");

        // Now every checkpoint is damaged, and one of another model is copied in.
        for (const auto& f : run.checkpoints()) truncateTo(f.path, 100);
        auto other = buildModel("cifar10-tutorial");
        CheckpointInfo info;
        info.step = 9;
        writeCheckpoint(run.checkpointPath(9), makeCheckpoint(*other, info));
        const auto before = snapshot(root);
        {
            auto src = syntheticBatchesFor(c);
            Trainer t(c, src, root);
            const std::string m = messageOf([&] { t.resumeFromNewest(); });
            QVERIFY2(m.find("no checkpoint in") != std::string::npos, m.c_str());
            QVERIFY_THROWS_EXCEPTION(RunFolderBusy, Trainer(c, src, root)); // t holds it
            for (const auto& f : run.checkpoints())
                QVERIFY2(m.find(f.path.filename().string()) != std::string::npos, m.c_str());
        }
        {
            auto src = syntheticBatchesFor(c);
            QVERIFY_THROWS_EXCEPTION(NoCheckpointLoads, Trainer(c, src, root).resumeFromNewest());
        }
        QCOMPARE(snapshot(root), before);
        {
            auto src = syntheticBatchesFor(c);
            Trainer t(c, src, root);
            QCOMPARE(t.resumeFromNewest(true), std::nullopt); // restart: set aside, step 0
            QCOMPARE(t.run(), Trainer::Outcome::Finished);
        }
        std::size_t keptFiles = 0;
        for (const auto& e : fs::recursive_directory_iterator(root / "set-aside"))
            keptFiles += e.is_regular_file() && e.path().extension() == ".safetensors";
        QCOMPARE(keptFiles,
                 std::size_t(1 + 5 + 1)); // step 4 from before, the five damaged, the foreign one
    }

    // A checkpoint of another run copied into a run's folder is never continued from (the two runs
    // would be mixed): a resume passes over it, saying whose it is, and moves it aside when it
    // lies beyond the step it continues from; with nothing of its own, a resume refuses.
    void aCheckpointOfAnotherRunIsPassedOver()
    {
        QTemporaryDir dirA, dirB;
        const fs::path a = dirA.path().toStdString(), b = dirB.path().toStdString();
        TrainConfig c = smallConfig();
        c.keepCheckpoints = 10;
        trainToEnd(c, a);
        TrainConfig other = c;
        other.steps = 6;
        other.seed = 7;
        trainToEnd(other, b);
        const RunDirectory runA(a), runB(b);
        c.runId = TrainConfig::fromJson(*runA.readConfig()).runId;
        const std::string otherId = TrainConfig::fromJson(*runB.readConfig()).runId;
        QVERIFY(!c.runId.empty() && !otherId.empty() && c.runId != otherId);
        fs::copy_file(runB.checkpointPath(6), runA.checkpointPath(6));
        const std::string foreign = readAll(runA.checkpointPath(6));

        std::vector<std::string> skipped;
        const auto found = runA.newestGoodCheckpoint(nullptr, &skipped, c.runId);
        QVERIFY(found);
        QCOMPARE(found->step, std::int64_t(4));
        QCOMPARE(skipped.size(), std::size_t(1));
        QVERIFY2(skipped[0].find("another run") != std::string::npos &&
                     skipped[0].find(otherId) != std::string::npos,
                 skipped[0].c_str());
        {
            auto src = syntheticBatchesFor(c);
            TrainConfig longer = c;
            longer.steps = 8;
            Trainer t(longer, src, a);
            QCOMPARE(t.resumeFromNewest(), std::optional<std::int64_t>(4));
            QCOMPARE(t.run(), Trainer::Outcome::Finished);
        }
        bool kept = false;
        for (const auto& e : fs::recursive_directory_iterator(a / "set-aside"))
            kept = kept || (e.is_regular_file() && readAll(e.path()) == foreign);
        QVERIFY2(kept, "the other run's checkpoint was not kept in set-aside/");
        QVERIFY(readAll(runA.checkpointPath(6)) != foreign); // step 6 is this run's own now

        // Only the other run's checkpoint: nothing to continue from, and nothing changed.
        for (const auto& f : runA.checkpoints()) fs::remove(f.path);
        fs::copy_file(runB.checkpointPath(6), runA.checkpointPath(6));
        const auto before = snapshot(a);
        {
            auto src = syntheticBatchesFor(c);
            TrainConfig longer = c;
            longer.steps = 8;
            Trainer t(longer, src, a);
            const std::string m = messageOf([&] { t.resumeFromNewest(); });
            QVERIFY2(m.find("another run") != std::string::npos, m.c_str());
        }
        QCOMPARE(snapshot(a), before);
    }

    // Rotation keeps this run's newest keepCheckpoints and never touches a file of another run, one
    // from before run ids, or one that does not read, even across a resume.
    void rotationRemovesOnlyThisRunsCheckpoints()
    {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        TrainConfig c = smallConfig();
        c.keepCheckpoints = 2;
        trainToEnd(c, root);
        RunDirectory run(root);
        const auto steps = [&] { return checkpointSteps(run); };
        QCOMPARE(steps(), (std::vector<std::int64_t>{3, 4}));
        auto model = buildModel(c.model);
        model->initialize(1);
        auto put = [&](std::int64_t step, const std::string& runId) {
            TrainConfig other = c;
            other.runId = runId;
            CheckpointInfo info;
            info.step = step;
            info.config = other.toJson();
            writeCheckpoint(run.checkpointPath(step), makeCheckpoint(*model, info));
        };
        put(1, "another-run"); // copied in from another run
        put(2, "");            // written before run ids
        std::ofstream(run.checkpointPath(0)) << "not a checkpoint";
        std::map<std::int64_t, std::string> kept;
        for (std::int64_t s : {0, 1, 2}) kept[s] = readAll(run.checkpointPath(s));
        {
            auto src = syntheticBatchesFor(c);
            TrainConfig longer = readConfigOf(run);
            longer.steps = 8;
            Trainer t(longer, src, root);
            QCOMPARE(t.resumeFromNewest(), std::optional<std::int64_t>(4));
            QCOMPARE(t.run(), Trainer::Outcome::Finished);
        }
        QCOMPARE(steps(), (std::vector<std::int64_t>{0, 1, 2, 7, 8}));
        for (const auto& [s, content] : kept) QVERIFY(readAll(run.checkpointPath(s)) == content);
    }

    // eval.jsonl as the run folder's readers take it: the last record of a step, damaged and
    // partial lines skipped; the best is the highest precision @ 1, the earliest of equals, and
    // the best checkpoint the best of the evaluated checkpoints.
    void evaluationsAndTheBestCheckpoint()
    {
        QTemporaryDir dir;
        const fs::path file = fs::path(dir.path().toStdString()) / "eval.jsonl";
        QVERIFY(readEvaluations(file).empty()); // none yet
        std::ofstream(file) << R"({"step": 2, "precisionAt1": 0.5})"
                               "\n"
                            << "not json\n"
                            << R"({"step": 4, "precisionAt1": 0.8})"
                               "\n"
                            << R"({"step": 3, "precisionAt1": 0.8})"
                               "\n"
                            << R"({"step": 2, "precisionAt1": 0.9})"
                               "\n" // evaluated again
                            << R"({"step": 6})"
                               "\n"
                            << R"({"step": 5, "precisionAt1": 0.99)"; // a kill's partial line
        const auto e = readEvaluations(file);
        QCOMPARE(e.size(), std::size_t(3));
        QCOMPARE(e[0].step, std::int64_t(2));
        QCOMPARE(e[0].precisionAt1, 0.9);
        QCOMPARE(e[1].step, std::int64_t(3));
        QCOMPARE(e[2].step, std::int64_t(4));
        QCOMPARE(bestEvaluation(e)->step, std::int64_t(2));
        const std::vector<CheckpointFile> some{{1, "a"}, {3, "b"}, {4, "c"}};
        const auto best = bestCheckpoint(some, e);
        QVERIFY(best);
        QCOMPARE(best->file.step, std::int64_t(3)); // 3 and 4 tie: the earlier
        QCOMPARE(best->precisionAt1, 0.8);
        QVERIFY(!bestCheckpoint({{1, "a"}, {5, "d"}}, e));
        QVERIFY(!bestEvaluation({}));
    }

    // Rotation keeps the checkpoint of the run's best evaluation besides the newest
    // keepCheckpoints, across a resume that reads the best from eval.jsonl.
    void rotationKeepsTheBestCheckpoint()
    {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        TrainConfig c = smallConfig(); // a checkpoint every step, two kept
        trainToEnd(c, root);
        RunDirectory run(root);
        const auto steps = [&] { return checkpointSteps(run); };
        QCOMPARE(steps(), (std::vector<std::int64_t>{3, 4}));
        // Step 3 measured better than anything the synthetic evaluations below reach.
        std::ofstream(run.evalPath()) << R"({"step": 3, "precisionAt1": 1.5})"
                                         "\n"
                                      << R"({"step": 4, "precisionAt1": 0.25})"
                                         "\n";
        resumeEvaluatingEveryStep(root, 8);
        QCOMPARE(steps(), (std::vector<std::int64_t>{3, 7, 8}));
        QCOMPARE(readEvaluations(run.evalPath()).size(), std::size_t(6)); // 3 to 8
    }

    // A best among the newest keepCheckpoints is one of them: no older checkpoint is kept in its
    // place (keep 3 leaves 3 files, not 4).
    void aBestAmongTheNewestCountsAsOneOfThem()
    {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        TrainConfig c = smallConfig();
        c.keepCheckpoints = 3;
        trainToEnd(c, root);
        RunDirectory run(root);
        QCOMPARE(checkpointSteps(run), (std::vector<std::int64_t>{2, 3, 4}));
        // Step 4 measured better than anything the synthetic evaluations below reach.
        std::ofstream(run.evalPath()) << R"({"step": 4, "precisionAt1": 1.5})"
                                         "\n";
        resumeEvaluatingEveryStep(root, 6);
        QCOMPARE(checkpointSteps(run), (std::vector<std::int64_t>{4, 5, 6}));
        // Older than the newest three, it is kept besides them.
        resumeEvaluatingEveryStep(root, 8, 6);
        QCOMPARE(checkpointSteps(run), (std::vector<std::int64_t>{4, 6, 7, 8}));
    }

    // When the newest checkpoint's evaluation beats the best, the former best's checkpoint goes
    // at once (beyond keepCheckpoints), not at the next checkpoint: a run's end leaves no extra.
    void theFormerBestGoesWhenTheNewestIsBetter()
    {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        TrainConfig c = smallConfig();
        c.keepCheckpoints = 1;
        trainToEnd(c, root);
        RunDirectory run(root);
        // Below any real evaluation: step 4 is the best so far, and the evaluation of step 5 beats
        // it.
        std::ofstream(run.evalPath()) << R"({"step": 4, "precisionAt1": -0.5})"
                                         "\n";
        resumeEvaluatingEveryStep(root, 5);
        QCOMPARE(checkpointSteps(run), std::vector<std::int64_t>{5});
    }

    // An evaluation better than every earlier one between checkpoints gets its own checkpoint,
    // kept: the run's best weights are never rotated away.
    void aBestEvaluationBetweenCheckpointsIsSaved()
    {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        TrainConfig c = smallConfig();
        c.steps = 6;
        c.checkpointEvery = 0; // at the end only
        c.keepCheckpoints = 1;
        c.evalEvery = 2;
        struct Log : TrainerObserver
        {
            QStringList lines;
            void onLog(const std::string& line) override { lines << QString::fromStdString(line); }
        } log;
        {
            auto src = syntheticBatchesFor(c);
            Trainer t(c, src, root, {}, &log);
            t.setEvaluator(40, src.evaluationBatches());
            QCOMPARE(t.run(), Trainer::Outcome::Finished);
        }
        RunDirectory run(root);
        const auto evaluations = readEvaluations(run.evalPath());
        QCOMPARE(evaluations.size(), std::size_t(3)); // 2, 4, 6
        const auto best = bestEvaluation(evaluations);
        std::vector<std::int64_t> expected{best->step};
        if (best->step != 6) expected.push_back(6);
        QCOMPARE(checkpointSteps(run), expected);
        const auto kept = bestCheckpoint(run.checkpoints(), evaluations);
        QVERIFY(kept);
        QCOMPARE(kept->file.step, best->step);
        validateCheckpoint(readCheckpoint(kept->file.path), *buildModel(c.model), kept->file.path);
        // The first evaluation is the best so far by definition: step 2 was written for it.
        QVERIFY2(log.lines.join('\n').contains("ckpt-00000002.safetensors, kept as the run's best"),
                 qPrintable(log.lines.join('\n')));
    }

    // Patience: once that many evaluations in a row are no better than the best, the run stops
    // early (a checkpoint of its step written, every issued step done); resumed, it stays
    // stopped unless the patience grows, and then goes on to the next run-out.
    void patienceStopsTheRunEarly()
    {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        TrainConfig c = smallConfig(); // 4 steps, a checkpoint every step
        trainToEnd(c, root);
        RunDirectory run(root);
        // Step 4 measured better than anything the synthetic evaluations reach.
        std::ofstream(run.evalPath()) << R"({"step": 4, "precisionAt1": 1.5})"
                                         "\n";
        const auto resume = [&](int patience, RunLog& log, std::int64_t steps = 20) {
            return resumeWithPatience(root, patience, 0, log, steps);
        };
        RunLog first;
        const auto [outcome, step] = resume(3, first);
        QCOMPARE(outcome, Trainer::Outcome::StoppedEarly);
        QCOMPARE(step, std::int64_t(7)); // evaluations 5, 6 and 7 no better than step 4's
        QCOMPARE(first.finished, std::int64_t(7));
        QCOMPARE(checkpointSteps(run).back(), std::int64_t(7));
        QCOMPARE(readEvaluations(run.evalPath()).size(), std::size_t(4));
        const QString log = first.lines.join('\n');
        QVERIFY2(log.contains("stopping early at step 7: the last 3 evaluations were no better "
                              "than step 4's (test precision @ 1 = 1.500; patience 3)"),
                 qPrintable(log));
        QVERIFY2(!log.contains("stopped early at step"), qPrintable(log)); // the front end's say

        // Resumed with the same patience: nothing to do, nothing written.
        const auto before = snapshot(root);
        RunLog again;
        QCOMPARE(resume(3, again), std::make_pair(Trainer::Outcome::StoppedEarly, std::int64_t(7)));
        QVERIFY2(again.lines.join('\n').contains("the run stopped early at step 7"),
                 qPrintable(again.lines.join('\n')));
        for (const char* file : {"metrics.jsonl", "eval.jsonl"})
            QCOMPARE(snapshot(root).at(file), before.at(file));
        QCOMPARE(checkpointSteps(run).back(), std::int64_t(7));

        // A larger patience trains on, to its own run-out.
        RunLog more;
        QCOMPARE(resume(5, more), std::make_pair(Trainer::Outcome::StoppedEarly, std::int64_t(9)));
        // Patience that runs out at the last step: the run simply finishes there.
        RunLog last;
        QCOMPARE(resume(6, last, 10), std::make_pair(Trainer::Outcome::Finished, std::int64_t(10)));
        QVERIFY(!last.lines.join('\n').contains("stop"));
        // Without patience, to the end.
        RunLog rest;
        QCOMPARE(resume(0, rest), std::make_pair(Trainer::Outcome::Finished, std::int64_t(20)));
        QCOMPARE(evaluationsSinceBest(readEvaluations(run.evalPath())), 16);
    }

    // TrainConfig::minDelta: evaluations that beat the best by less do not keep the run going,
    // while the best checkpoint is still the highest.
    void minDeltaStopsGainsTooSmall()
    {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        TrainConfig c = smallConfig(); // 4 steps, a checkpoint every step
        trainToEnd(c, root);
        RunDirectory run(root);
        // Step 4 measured at 0: every evaluation after it is at least as good.
        std::ofstream(run.evalPath()) << R"({"step": 4, "precisionAt1": 0})"
                                         "\n";
        // A gain of more than half of precision @ 1 is out of reach of these 40 examples: the
        // evaluations at steps 5, 6 and 7 are no better than step 4's 0.
        RunLog resumed;
        QCOMPARE(resumeWithPatience(root, 3, 0.5, resumed),
                 std::make_pair(Trainer::Outcome::StoppedEarly, std::int64_t(7)));
        const auto marks = readEvaluations(run.evalPath());
        QCOMPARE(marks.size(), std::size_t(4));
        const auto best = bestEvaluation(marks);
        QVERIFY(best && best->precisionAt1 > 0); // an evaluation beat 0, by less than 0.5
        const QString log = resumed.lines.join('\n');
        QVERIFY2(log.contains(QStringLiteral("stopping early at step 7: the last 3 evaluations "
                                             "did not beat test precision @ 1 = 0.0000 by more "
                                             "than 0.5 (min delta; the best: step %1's")
                                  .arg(best->step)),
                 qPrintable(log));
        // The best checkpoint is the highest evaluation's, kept by rotation.
        QCOMPARE(bestCheckpoint(run.checkpoints(), marks)->file.step, best->step);
        QCOMPARE(evaluationsSinceBest(marks, 0.5), 3);
        QVERIFY(evaluationsSinceBest(marks) < 3); // without the min delta, the run goes on
    }

    void evaluationsSinceTheBest()
    {
        QCOMPARE(evaluationsSinceBest({}), 0);
        QCOMPARE(evaluationsSinceBest({{1, 0.5}}), 0);
        QCOMPARE(evaluationsSinceBest({{1, 0.5}, {2, 0.6}, {3, 0.6}, {4, 0.55}}),
                 2); // equal: no better
        QCOMPARE(evaluationsSinceBest({{1, 0.9}, {2, 0.6}, {3, 0.95}}), 0);
        // A min delta (Keras' min_delta): better is more than that above the last better one.
        QCOMPARE(evaluationsSinceBest({{1, 0.5}, {2, 0.505}, {3, 0.509}}), 0);
        QCOMPARE(evaluationsSinceBest({{1, 0.5}, {2, 0.505}, {3, 0.509}}, 0.01), 2);
        QCOMPARE(evaluationsSinceBest({{1, 0.5}, {2, 0.505}, {3, 0.509}, {4, 0.52}}, 0.01), 0);
        // 0.509 was no better, so 0.515 is measured against 0.5, not against it.
        QCOMPARE(evaluationsSinceBest({{1, 0.5}, {2, 0.509}, {3, 0.515}}, 0.01), 0);
        QCOMPARE(evaluationsSinceBest({{1, 0.5}, {2, 0.51}}, 0.01), 1); // exactly: no better
    }

    // A stop during an evaluation ends it at the next batch: the checkpoint of the step is already
    // written, nothing of the partial evaluation is recorded, and the outcome is Stopped.
    void stopEndsAnEvaluation()
    {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        TrainConfig c = smallConfig();
        c.steps = 2;
        c.checkpointEvery = 0;
        auto src = syntheticBatchesFor(c);
        Trainer t(c, src, root);
        std::atomic<int> batches{0};
        const EvalBatchFn inner = src.evaluationBatches();
        t.setEvaluator(400, [&](std::int64_t b, std::int64_t e, Tensor& images, Tensor& labels) {
            if (++batches == 3) t.requestStop(); // from within, as a signal would arrive
            inner(b, e, images, labels);
        });
        QCOMPARE(t.run(), Trainer::Outcome::Stopped);
        QVERIFY2(batches < 10, qPrintable(QString::number(batches))); // of 100 batches of 4
        QCOMPARE(t.step(), std::int64_t(2));
        QVERIFY(fs::exists(RunDirectory(root).checkpointPath(2)));
        QVERIFY(!fs::exists(root / "eval.jsonl") || fs::file_size(root / "eval.jsonl") == 0);
    }
};

QTEST_GUILESS_MAIN(TestRunFolder)
#include "tst_run_folder.moc"
