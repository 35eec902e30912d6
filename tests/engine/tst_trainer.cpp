// The trainer: a resumed run ends bitwise where an uninterrupted one does (weights, moving
// averages, optimizer state); a diverging run stops with DivergedError at the right step and
// keeps its last good checkpoint; stop and pause from another thread act within a step;
// evaluation, metrics and log lines land in the run directory.
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "engine/cpu/cores.h"
#include "engine/data/batch_loader.h"
#include "engine/models/registry.h"
#include "engine/train/checkpoint.h"
#include "engine/train/trainer.h"
#include "error_message.h"
#include "fake_device.h"
#include "gradcheck.h"
#include "replication.h"
#include "synthetic_batches.h"

using namespace towers::engine;
using namespace towers::test;
namespace fs = std::filesystem;

namespace {

TrainConfig baseConfig()
{
    TrainConfig c = smallTrainConfig();
    c.emaDecay = 0.99;
    c.checkpointEvery = 3;
    c.logEvery = 1;
    c.verifyEvery = 1; // replicas compared bitwise after every step
    return c;
}

// A source whose batch of one step cannot be allocated (std::bad_alloc), as a machine out of
// memory gives; the other steps' batches are `inner`'s.
class OutOfMemoryAt final : public BatchSource
{
public:
    OutOfMemoryAt(SyntheticBatches& inner, std::int64_t step) : m_inner(inner), m_step(step) {}
    std::int64_t stepsPerEpoch() const override { return m_inner.stepsPerEpoch(); }
    void seek(std::int64_t step) override
    {
        m_next = step;
        m_inner.seek(step);
    }
    const Batch& next() override
    {
        if (m_next++ == m_step) throw std::bad_alloc();
        return m_inner.next();
    }
    double lastWaitMs() const override { return 0; }

private:
    SyntheticBatches& m_inner;
    std::int64_t m_step, m_next = 0;
};

// Records what the trainer reports; waitFor() blocks until a condition on the record holds.
class Recorder : public TrainerObserver
{
public:
    void onStep(const StepMetrics& m) override
    {
        update([&] { steps.push_back(m); });
    }
    void onEvaluation(const EvalResult& r) override
    {
        update([&] { evals.push_back(r); });
    }
    void onLog(const std::string& line) override
    {
        update([&] { logs.push_back(line); });
    }
    void onCheckpoint(const fs::path& file, std::int64_t step) override
    {
        update([&] { checkpoints.emplace_back(file, step); });
    }
    void onPaused(std::int64_t) override
    {
        update([&] { ++paused; });
    }
    void onResumed(std::int64_t) override
    {
        update([&] { ++resumed; });
    }
    void onFinished(std::int64_t step) override
    {
        update([&] { finished = step; });
    }
    void onStopped(std::int64_t step) override
    {
        update([&] { stopped = step; });
    }
    void onFailed(const std::string& message) override
    {
        update([&] { failed = message; });
    }

    bool waitFor(const std::function<bool()>& ready, int seconds = 60)
    {
        std::unique_lock lock(m_mutex);
        return m_cv.wait_for(lock, std::chrono::seconds(seconds), ready);
    }
    std::int64_t lastStep()
    {
        std::lock_guard lock(m_mutex);
        return steps.empty() ? 0 : steps.back().step;
    }

    std::vector<StepMetrics> steps;
    std::vector<EvalResult> evals;
    std::vector<std::string> logs;
    std::vector<std::pair<fs::path, std::int64_t>> checkpoints;
    int paused = 0, resumed = 0;
    std::int64_t finished = -1, stopped = -1;
    std::string failed;

private:
    template <class F> void update(F&& f)
    {
        {
            std::lock_guard lock(m_mutex);
            f();
        }
        m_cv.notify_all();
    }
    std::mutex m_mutex;
    std::condition_variable m_cv;
};

// Towers on stand-in GPUs (fake_device.h) with the stand-in for NCCL: they issue steps ahead of
// their results, as GPU towers do (TowerSet::pipelines), computing what host towers compute
// (the reference backend, bitwise).
std::function<void(TowerSetOptions&)> onStandInGpus()
{
    return [](TowerSetOptions& o) {
        o.makeOps = [](int t) { return makeFakeDeviceOps("reference", t % 2); };
        o.makeCommunicator = [](int n) { return makeStagingCommunicator(n); };
    };
}

// 10 steps on the reference backend (the stand-in GPUs' and the host's compute alike, bitwise),
// no replica check after every step (the towers' state would be read after each), every
// checkpoint kept.
TrainConfig stepsAheadConfig()
{
    TrainConfig c = baseConfig();
    c.backend = "reference";
    c.steps = 10;
    c.verifyEvery = 0;
    c.keepCheckpoints = 10;
    return c;
}

// Every tensor of two checkpoints, bitwise.
void expectSameCheckpoint(const fs::path& a, const fs::path& b)
{
    const Checkpoint ca = readCheckpoint(a), cb = readCheckpoint(b);
    QCOMPARE(cb.info.step, ca.info.step);
    for (const auto& [x, y] : {std::pair{&ca.weights, &cb.weights}, std::pair{&ca.ema, &cb.ema},
                               std::pair{&ca.optimizer, &cb.optimizer}}) {
        QVERIFY(x->size() == y->size() && !x->empty());
        for (std::size_t i = 0; i < x->size(); ++i) {
            QCOMPARE((*y)[i].first, (*x)[i].first);
            QVERIFY2(sameBytes((*x)[i].second, (*y)[i].second), (*x)[i].first.c_str());
        }
    }
}

std::vector<nlohmann::json> jsonLines(const fs::path& file)
{
    std::vector<nlohmann::json> out;
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
    return out;
}

} // namespace

class TestTrainer : public QObject
{
    Q_OBJECT
private slots:
    // One tower's evaluation gives the mean cross-entropy that two towers' give for the same
    // weights (it was divided by the example count twice: its part finished itself before the
    // merge finished it again), and a plausible one: a fresh network's is near ln(10).
    void oneTowerEvaluationEqualsTwo()
    {
        QTemporaryDir dirA, dirB;
        TrainConfig one = smallTrainConfig();
        one.towers = 1;
        TrainConfig two = smallTrainConfig();
        auto srcA = syntheticBatchesFor(one);
        auto srcB = syntheticBatchesFor(two);
        Trainer a(one, srcA, dirA.path().toStdString());
        Trainer b(two, srcB, dirB.path().toStdString());
        const EvalResult ea = a.evaluate(40, srcA.evaluationBatches());
        const EvalResult eb = b.evaluate(40, srcB.evaluationBatches());
        QCOMPARE(ea.examples, std::int64_t(40));
        QCOMPARE(ea.correct, eb.correct);
        QVERIFY2(std::abs(ea.meanCrossEntropy - eb.meanCrossEntropy) <= 1e-12 * eb.meanCrossEntropy,
                 qPrintable(
                     QStringLiteral("%1 != %2").arg(ea.meanCrossEntropy).arg(eb.meanCrossEntropy)));
        QVERIFY2(ea.meanCrossEntropy > 1 && ea.meanCrossEntropy < 5,
                 qPrintable(QString::number(ea.meanCrossEntropy)));
        // Finishing again changes nothing.
        EvalResult again = ea;
        again.finish();
        QCOMPARE(again.meanCrossEntropy, ea.meanCrossEntropy);
    }

    // More compute threads than cores is said at the start (each step waits on threads the cores
    // cannot run), and trains; threads the cores can run are not.
    void moreThreadsThanCoresIsSaid()
    {
        const int cores = cpu::usableCores();
        for (const int threads : {1, cores + 1}) {
            TrainConfig c = baseConfig();
            c.towers = 1;
            c.steps = 1;
            c.threadsPerTower = threads;
            QTemporaryDir dir;
            auto src = syntheticBatchesFor(c);
            Recorder rec;
            Trainer t(c, src, dir.path().toStdString(), {}, &rec);
            QCOMPARE(t.run(), Trainer::Outcome::Finished);
            const std::string expected = "note: " + std::to_string(threads) +
                                         " compute threads (1 tower x " + std::to_string(threads) +
                                         " per tower) on " + std::to_string(cores) + " cores";
            const bool said = std::any_of(rec.logs.begin(), rec.logs.end(),
                                          [&](const auto& l) { return l.rfind(expected, 0) == 0; });
            QCOMPARE(said, threads > cores);
        }
    }

    // Train 6 steps with a checkpoint at 3; a fresh trainer resumes from step 3 and runs to 6.
    // Every tensor of the final state is bitwise the same (augmentation-free data, dropout on),
    // with every optimizer, and with the gradients clipped by their norm.
    void resumeEqualsUninterrupted_data()
    {
        QTest::addColumn<QString>("optimizer");
        QTest::addColumn<double>("clip"); // the gradients' largest norm (0: none)
        QTest::newRow("momentum") << "momentum" << 0.0;
        QTest::newRow("adam") << "adam" << 0.0;
        QTest::newRow("adamw") << "adamw" << 0.0;
        QTest::newRow("nesterov, gradients clipped") << "nesterov" << 0.05;
    }
    void resumeEqualsUninterrupted()
    {
        QFETCH(QString, optimizer);
        QFETCH(double, clip);
        TrainConfig c = baseConfig();
        c.optimizer.kind = optimizer.toStdString();
        c.clipGradNorm = clip;
        if (optimizer == QLatin1String("adamw")) c.weightDecay = 0.05; // decayed by the update
        c.schedule.kind = LrSchedule::Kind::Cosine; // the LR position must come back too
        c.schedule.warmupEpochs = 0.02;
        QTemporaryDir dirA, dirB;
        const fs::path rootA = dirA.path().toStdString(), rootB = dirB.path().toStdString();
        auto srcA = syntheticBatchesFor(c);
        Trainer a(c, srcA, rootA);
        QCOMPARE(a.run(), Trainer::Outcome::Finished);
        QCOMPARE(a.step(), std::int64_t(6));
        RunDirectory runA(rootA);
        QCOMPARE(runA.checkpoints().size(), std::size_t(2)); // steps 3 and 6

        RunDirectory runB(rootB);
        fs::copy_file(runA.checkpointPath(3), runB.checkpointPath(3));
        // A newer checkpoint that does not load (a damaged copy): skipped by the resume, and
        // removed as part of the abandoned future when the run starts.
        std::ofstream(runB.checkpointPath(5)) << "damaged";
        auto srcB = syntheticBatchesFor(c);
        Recorder rec;
        Trainer b(c, srcB, rootB, {}, &rec);
        QCOMPARE(b.resumeFromNewest(), std::optional<std::int64_t>(3));
        QVERIFY(!rec.logs.empty() && rec.logs.front().find("skipping a checkpoint: ") == 0);
        QCOMPARE(b.run(), Trainer::Outcome::Finished);
        QCOMPARE(runB.checkpoints().size(), std::size_t(2)); // 3 and 6; the damaged 5 is gone
        QCOMPARE(srcB.calls(), std::int64_t(3)); // steps 3, 4, 5 only: the source was positioned
        QCOMPARE(rec.steps.front().step, std::int64_t(4));
        QCOMPARE(rec.steps.front().lr, c.schedule.at(3, srcB.stepsPerEpoch(), 6));
        for (const StepMetrics& m : rec.steps) // the norm before clipping, measured in every run
            QVERIFY2(clip > 0 ? m.gradNorm > clip : std::isfinite(m.gradNorm) && m.gradNorm > 0,
                     qPrintable(QString::number(m.gradNorm)));

        const Checkpoint ca = readCheckpoint(runA.checkpointPath(6));
        const Checkpoint cb = readCheckpoint(runB.checkpointPath(6));
        QCOMPARE(cb.info.step, std::int64_t(6));
        auto compareAll = [](const NamedTensors& x, const NamedTensors& y, const char* what) {
            QVERIFY2(x.size() == y.size() && !x.empty(), what);
            for (std::size_t i = 0; i < x.size(); ++i) {
                QCOMPARE(x[i].first, y[i].first);
                QVERIFY2(
                    sameBytes(x[i].second, y[i].second),
                    qPrintable(QString::fromStdString(x[i].first) + QStringLiteral(" differs")));
            }
        };
        compareAll(ca.weights, cb.weights, "weights");
        compareAll(ca.ema, cb.ema, "moving averages");
        compareAll(ca.optimizer, cb.optimizer, "optimizer state");
        // And the live replicas, which the checkpoints were written from.
        const auto& pa = a.towers().model(1).parameters();
        const auto& pb = b.towers().model(1).parameters();
        for (std::size_t i = 0; i < pa.size(); ++i) QVERIFY(sameBytes(pa[i]->value, pb[i]->value));
        // The weights did change over the last three steps.
        const Checkpoint c3 = readCheckpoint(runA.checkpointPath(3));
        QVERIFY(!sameBytes(*c3.weight("fc1.weight"), *ca.weight("fc1.weight")));
    }

    // A resume makes the evaluation at its starting step that a stop cut short (the run's
    // checkpoint at that step is written before it), with the numbers the uninterrupted run
    // had; a finished run resumed makes no evaluation again.
    void resumeMakesTheEvaluationAStopCutShort()
    {
        TrainConfig c = baseConfig();
        c.evalEvery = 3;
        c.keepCheckpoints = 10;
        QTemporaryDir dirA, dirB;
        const fs::path rootA = dirA.path().toStdString(), rootB = dirB.path().toStdString();
        auto srcA = syntheticBatchesFor(c);
        {
            Trainer a(c, srcA, rootA);
            a.setEvaluator(20, srcA.evaluationBatches());
            QCOMPARE(a.run(), Trainer::Outcome::Finished);
        }
        RunDirectory runA(rootA), runB(rootB);
        const auto evalsA = jsonLines(runA.evalPath());
        QCOMPARE(evalsA.size(), std::size_t(2)); // steps 3 and 6

        // Run B stopped during its evaluation at step 3: the checkpoint, no record.
        fs::copy_file(runA.checkpointPath(3), runB.checkpointPath(3));
        auto srcB = syntheticBatchesFor(c);
        {
            Recorder rec;
            Trainer b(c, srcB, rootB, {}, &rec);
            b.setEvaluator(20, srcB.evaluationBatches());
            QCOMPARE(b.resumeFromNewest(), std::optional<std::int64_t>(3));
            QCOMPARE(b.run(), Trainer::Outcome::Finished);
            QCOMPARE(rec.evals.size(), std::size_t(2));
            QCOMPARE(rec.evals[0].step, std::int64_t(3));
            QCOMPARE(rec.evals[1].step, std::int64_t(6));
            bool said = false;
            for (const auto& l : rec.logs)
                said = said || l.find("no evaluation is recorded at step 3, where the run "
                                      "continues") != std::string::npos;
            QVERIFY(said);
        }
        const auto evalsB = jsonLines(runB.evalPath());
        QCOMPARE(evalsB.size(), std::size_t(2));
        for (std::size_t i = 0; i < 2; ++i) {
            QCOMPARE(evalsB[i]["step"], evalsA[i]["step"]);
            QCOMPARE(evalsB[i]["precisionAt1"], evalsA[i]["precisionAt1"]);
        }

        // The finished run A resumed: nothing to train, and its last evaluation is not repeated.
        auto srcA2 = syntheticBatchesFor(c);
        Recorder rec;
        Trainer again(c, srcA2, rootA, {}, &rec);
        again.setEvaluator(20, srcA2.evaluationBatches());
        QCOMPARE(again.resumeFromNewest(), std::optional<std::int64_t>(6));
        QCOMPARE(again.run(), Trainer::Outcome::Finished);
        QVERIFY(rec.evals.empty());
        QCOMPARE(jsonLines(runA.evalPath()).size(), std::size_t(2));
    }

    // A NaN in the batch of step 5: DivergedError naming the step, no checkpoint of the
    // diverged state, the last good one (step 4) intact.
    void divergedStopsWithError()
    {
        TrainConfig c = baseConfig();
        c.steps = 10;
        c.checkpointEvery = 2;
        QTemporaryDir dir;
        auto src = syntheticBatchesFor(c);
        src.injectNanAt(4); // the batch of global step 4, i.e. the 5th step
        Recorder rec;
        auto t =
            std::make_unique<Trainer>(c, src, dir.path().toStdString(), DataDescription{}, &rec);
        QString message;
        try {
            t->run();
            QFAIL("a NaN did not stop training");
        } catch (const DivergedError& e) {
            message = QString::fromUtf8(e.what());
        }
        // ReLU maps a NaN activation to 0 in our backends, so the loss may stay finite while the
        // batch-norm statistics and gradients do not: either way the step is named.
        QVERIFY2(message.startsWith(QLatin1String("model diverged")) &&
                     message.contains(QLatin1String("at step 5")),
                 qPrintable(message));
        // How large the gradients had grown before: the norm of the step before.
        QVERIFY2(
            QRegularExpression(QStringLiteral("; the gradients' norm was [0-9.e+-]+ at step 4$"))
                .match(message)
                .hasMatch(),
            qPrintable(message));
        QCOMPARE(QString::fromStdString(rec.failed), message);
        QCOMPARE(t->step(), std::int64_t(4));
        // The update of step 5 was skipped: the live replicas still hold finite weights.
        for (const auto* p : t->towers().model(1).parameters())
            for (std::int64_t i = 0; i < p->value.numel(); ++i)
                QVERIFY(std::isfinite(p->value.at(i)));
        QCOMPARE(rec.finished, std::int64_t(-1));
        RunDirectory run(dir.path().toStdString());
        const auto files = run.checkpoints();
        QCOMPARE(files.size(), std::size_t(2));
        QCOMPARE(files.back().step, std::int64_t(4));
        auto model = buildModel("fashion-fast");
        const auto good = run.newestGoodCheckpoint(model.get());
        QVERIFY(good);
        QCOMPARE(good->step, std::int64_t(4));
        loadCheckpoint(good->path, *model);
        for (const auto* p : model->parameters())
            for (std::int64_t i = 0; i < p->value.numel(); ++i)
                QVERIFY(std::isfinite(p->value.at(i)));
        // The run says how it ended (failure.json: the last step done and the error) until it
        // trains again.
        std::ifstream in(run.failurePath());
        const auto failure = nlohmann::json::parse(in);
        QCOMPARE(failure.at("step").get<std::int64_t>(), std::int64_t(4));
        QCOMPARE(QString::fromStdString(failure.at("error").get<std::string>()), message);
        t.reset(); // its lock
        {
            auto clean = syntheticBatchesFor(c);
            TrainConfig longer = c;
            longer.runId = TrainConfig::fromJson(*run.readConfig()).runId;
            Trainer again(longer, clean, dir.path().toStdString());
            QCOMPARE(again.resumeFromNewest(), std::optional<std::int64_t>(4));
            QCOMPARE(again.run(), Trainer::Outcome::Finished);
        }
        QVERIFY(!fs::exists(run.failurePath()));
    }

    // Out of memory during a step: run() ends with an Error that says so in words (not
    // std::bad_alloc's own text), naming the step, and the run records it as its failure.
    void outOfMemoryIsSaid()
    {
        TrainConfig c = baseConfig();
        c.steps = 10;
        QTemporaryDir dir;
        auto inner = syntheticBatchesFor(c);
        OutOfMemoryAt src(inner, 3);
        Recorder rec;
        Trainer t(c, src, dir.path().toStdString(), DataDescription{}, &rec);
        QString message;
        try {
            t.run();
            QFAIL("running out of memory did not end the run");
        } catch (const std::bad_alloc&) {
            QFAIL("std::bad_alloc reached the caller as it is");
        } catch (const Error& e) {
            message = QString::fromUtf8(e.what());
        }
        QCOMPARE(message, QStringLiteral("out of memory at step 3: fewer towers or a smaller batch "
                                         "would take less"));
        QCOMPARE(QString::fromStdString(rec.failed), message);
        RunDirectory run(dir.path().toStdString());
        std::ifstream in(run.failurePath());
        const auto failure = nlohmann::json::parse(in);
        QCOMPARE(failure.at("step").get<std::int64_t>(), std::int64_t(3));
        QCOMPARE(QString::fromStdString(failure.at("error").get<std::string>()), message);
    }

    // An absurd learning rate: training stops with DivergedError, and every checkpoint on disk
    // holds finite weights.
    void absurdLearningRate()
    {
        TrainConfig c = baseConfig();
        c.optimizer.kind = "sgd";
        c.schedule.lr = 1e30;
        c.steps = 20;
        c.checkpointEvery = 1;
        c.keepCheckpoints = 20;
        QTemporaryDir dir;
        auto src = syntheticBatchesFor(c);
        Trainer t(c, src, dir.path().toStdString());
        try {
            t.run();
            QFAIL("an absurd learning rate did not stop training");
        } catch (const DivergedError& e) {
            QVERIFY2(QString::fromUtf8(e.what()).startsWith(QLatin1String("model diverged")),
                     e.what());
            QVERIFY2(QString::fromUtf8(e.what()).contains(
                         QStringLiteral("at step %1").arg(t.step() + 1)),
                     e.what());
        }
        QVERIFY(t.step() < 20);
        RunDirectory run(dir.path().toStdString());
        auto model = buildModel("fashion-fast");
        for (const auto& f : run.checkpoints()) {
            loadCheckpoint(f.path, *model);
            for (const auto* p : model->parameters())
                for (std::int64_t i = 0; i < p->value.numel(); ++i)
                    QVERIFY(std::isfinite(p->value.at(i)));
        }
    }

    // requestStop() from another thread: run() returns Stopped within one step, with a
    // checkpoint of the step it stopped at. The same through a std::stop_token.
    void stopFromAnotherThread_data()
    {
        QTest::addColumn<bool>("token");
        QTest::newRow("requestStop") << false;
        QTest::newRow("stop_token") << true;
    }
    void stopFromAnotherThread()
    {
        QFETCH(bool, token);
        TrainConfig c = baseConfig();
        c.steps = 1000000;
        c.checkpointEvery = 0;
        c.verifyEvery = 0;
        QTemporaryDir dir;
        auto src = syntheticBatchesFor(c);
        Recorder rec;
        Trainer t(c, src, dir.path().toStdString(), {}, &rec);
        Trainer::Outcome outcome = Trainer::Outcome::Finished;
        std::jthread worker(
            [&](std::stop_token st) { outcome = t.run(token ? st : std::stop_token{}); });
        QVERIFY(rec.waitFor([&] { return rec.steps.size() >= 3; }));
        if (token)
            worker.request_stop();
        else
            t.requestStop();
        const std::int64_t atRequest =
            t.step(); // at most the step in progress completes after this
        worker.join();
        QCOMPARE(outcome, Trainer::Outcome::Stopped);
        QVERIFY2(
            t.step() <= atRequest + 1,
            qPrintable(QStringLiteral("%1 steps after the request").arg(t.step() - atRequest)));
        QCOMPARE(rec.stopped, t.step());
        RunDirectory run(dir.path().toStdString());
        QCOMPARE(run.checkpoints().size(), std::size_t(1));
        QCOMPARE(run.checkpoints().back().step, t.step());
        QCOMPARE(readCheckpoint(run.checkpointPath(t.step())).info.step, t.step());
    }

    void pauseAndResume()
    {
        TrainConfig c = baseConfig();
        c.steps = 1000000;
        c.checkpointEvery = 0;
        c.verifyEvery = 0;
        QTemporaryDir dir;
        auto src = syntheticBatchesFor(c);
        Recorder rec;
        Trainer t(c, src, dir.path().toStdString(), {}, &rec);
        std::jthread worker([&] { t.run(); });
        QVERIFY(rec.waitFor([&] { return rec.steps.size() >= 2; }));
        t.pause();
        QVERIFY(t.isPaused());
        QVERIFY(rec.waitFor([&] { return rec.paused == 1; }));
        const std::int64_t s = t.step();
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        QCOMPARE(t.step(), s); // nothing moves while paused
        t.resume();
        QVERIFY(rec.waitFor([&] {
            return rec.resumed == 1 && !rec.steps.empty() && rec.steps.back().step >= s + 2;
        }));
        // A stop while paused ends the run at once.
        t.pause();
        QVERIFY(rec.waitFor([&] { return rec.paused == 2; }));
        t.requestStop();
        worker.join();
        QCOMPARE(rec.stopped, t.step());
        QCOMPARE(rec.resumed, 1);
    }

    // A learnable task: the loss falls and the moving-average weights classify well; periodic
    // evaluations, metrics and log lines land in the run directory.
    void evaluationMetricsAndLogs()
    {
        TrainConfig c = baseConfig();
        c.batchPerTower = 8;
        c.steps = 30;
        c.schedule.lr = 0.01;
        c.emaDecay = 0.9;
        c.evalEvery = 15;
        c.logEvery = 5;
        c.checkpointEvery = 0;
        c.verifyEvery = 10;
        c.dataset = "synthetic";
        QTemporaryDir dir;
        auto src = syntheticBatchesFor(c);
        Recorder rec;
        Trainer t(c, src, dir.path().toStdString(),
                  {{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}, "{}", {}}, &rec);
        t.setEvaluator(45, src.evaluationBatches());
        QCOMPARE(t.run(), Trainer::Outcome::Finished);
        QCOMPARE(rec.finished, std::int64_t(30));

        QCOMPARE(rec.steps.size(), std::size_t(6));
        for (std::size_t i = 0; i < rec.steps.size(); ++i) {
            const StepMetrics& m = rec.steps[i];
            QCOMPARE(m.step, std::int64_t(5 * (i + 1)));
            QCOMPARE(m.towerComputeMs.size(), std::size_t(2));
            QVERIFY(m.examplesPerSec > 0 && m.stepMs > 0 && m.computeMs > 0 && m.secPerBatch > 0);
            QVERIFY(std::fabs(m.secPerBatch - m.stepMs / 1000.0 / 2) < 1e-12);
            QVERIFY(std::fabs(m.examplesPerSec - 16 * 1000.0 / m.stepMs) < 1e-6 * m.examplesPerSec);
            QVERIFY(m.loss >= m.crossEntropy);
            QCOMPARE(m.epoch, double(m.step) / double(src.stepsPerEpoch()));
            QCOMPARE(m.totalSteps, std::int64_t(30));
            QVERIFY(m.elapsedSeconds > 0 && m.etaSeconds >= 0);
            if (i + 1 < rec.steps.size()) QVERIFY(m.etaSeconds > 0);
        }
        QCOMPARE(rec.steps.back().etaSeconds, 0.0);
        QVERIFY2(rec.steps.back().crossEntropy < 0.5 * rec.steps.front().crossEntropy,
                 qPrintable(QStringLiteral("%1 -> %2")
                                .arg(rec.steps.front().crossEntropy)
                                .arg(rec.steps.back().crossEntropy)));

        QCOMPARE(rec.evals.size(), std::size_t(2));
        QCOMPARE(rec.evals[0].step, std::int64_t(15));
        QCOMPARE(rec.evals[1].step, std::int64_t(30));
        QCOMPARE(rec.evals[1].examples, std::int64_t(45));
        QVERIFY(rec.evals[1].ema);
        QVERIFY2(rec.evals[1].precisionAt1 > 0.6,
                 qPrintable(QString::number(rec.evals[1].precisionAt1)));

        RunDirectory run(dir.path().toStdString());
        const auto metrics = jsonLines(run.metricsPath());
        QCOMPARE(metrics.size(), std::size_t(6));
        QCOMPARE(metrics[2]["step"].get<std::int64_t>(), std::int64_t(15));
        for (const char* key :
             {"epoch", "loss", "crossEntropy", "lr", "examplesPerSec", "secPerBatch", "dataWaitMs",
              "computeMs", "allReduceMs", "updateMs", "towerComputeMs", "towerTimes"})
            QVERIFY2(metrics[2].contains(key), key);
        // Where each tower's step went: four parts, none negative, together within the step.
        const auto& split = metrics[2]["towerTimes"];
        QCOMPARE(split.size(), std::size_t(c.towers));
        for (const auto& tower : split) {
            double sum = 0;
            for (const char* part : {"computeMs", "commMs", "dataMs", "updateMs"}) {
                QVERIFY2(tower.contains(part), part);
                QVERIFY2(tower[part].get<double>() >= 0, part);
                sum += tower[part].get<double>();
            }
            QVERIFY2(sum <= metrics[2]["stepMs"].get<double>() * 1.05 + 0.5, tower.dump().c_str());
        }
        const auto evals = jsonLines(run.evalPath());
        QCOMPARE(evals.size(), std::size_t(2));
        QCOMPARE(evals[1]["confusion"].size(), std::size_t(10));
        QCOMPARE(evals[1]["precisionAt1"].get<double>(), rec.evals[1].precisionAt1);
        // The run's configuration, with the run id it got when it started (32 hex digits).
        const TrainConfig saved = TrainConfig::fromJson(*run.readConfig());
        QVERIFY2(QRegularExpression(QStringLiteral("^[0-9a-f]{32}$"))
                     .match(QString::fromStdString(saved.runId))
                     .hasMatch(),
                 saved.runId.c_str());
        c.runId = saved.runId;
        QCOMPARE(saved.toJson(), c.toJson());
        // The final checkpoint carries the data description and the configuration.
        const Checkpoint last = readCheckpoint(run.checkpointPath(30));
        QCOMPARE(last.info.dataset, std::string("synthetic"));
        QCOMPARE(last.info.classNames.size(), std::size_t(10));
        QCOMPARE(last.info.config, c.toJson());
        QVERIFY(!last.ema.empty());

        // The tutorial's log line, then where the run stands (step 10 of 30), then where the
        // slowest tower's step went, then the gradients' norm.
        const QRegularExpression line(QStringLiteral(
            R"(^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}: step 10, loss = \d+\.\d\d \(\d+\.\d examples/sec; \d+\.\d{3} sec/batch\) \[33%, epoch \d+\.\d\d, ETA \d+m\d\ds\] compute \d+\.\d ms, communication \d+\.\d ms, data \d+\.\d ms, update \d+\.\d ms, gradient norm [0-9.e+-]+$)"));
        bool found = false;
        for (const auto& l : rec.logs)
            found = found || line.match(QString::fromStdString(l)).hasMatch();
        QVERIFY2(found, rec.logs.size() > 2 ? rec.logs[2].c_str() : "no log");
    }

    // Towers that hold the training set where they compute (on GPUs in a real run; here on the
    // host, whose towers may hold it too) train on the draws the loader sends exactly as on its
    // images; the run's first line says where the set is, and TensorBoard's grid of the first
    // batch is the loader's images, made again on the host.
    void heldTrainingSetTrainsAsImages()
    {
        TrainConfig c = baseConfig();
        c.steps = 3;
        ImageSet set;
        set.count = 64;
        set.height = set.width = 28;
        set.channels = 1;
        set.pixels.resize(std::size_t(set.count * set.imageBytes()));
        set.labels.resize(std::size_t(set.count));
        Rng rng(21);
        for (auto& b : set.pixels) b = std::uint8_t(rng.below(256));
        for (std::size_t i = 0; i < set.labels.size(); ++i) set.labels[i] = std::int32_t(i % 10);
        Preprocessing recipe = translateAndNormalize(set, 2);
        recipe.flip = true;
        LoaderOptions lo;
        lo.towers = c.towers;
        lo.batchPerTower = c.batchPerTower;
        lo.workers = 1;
        BatchLoader images(set, recipe, lo);
        lo.drawsOnly = true;
        BatchLoader draws(set, recipe, lo);
        QTemporaryDir dirA, dirB;
        const fs::path rootA = dirA.path().toStdString(), rootB = dirB.path().toStdString();
        Trainer a(c, images, rootA);
        QCOMPARE(a.run(), Trainer::Outcome::Finished);
        Recorder rec;
        Trainer b(c, draws, rootB, {}, &rec);
        b.holdTrainingSet(set, recipe);
        QCOMPARE(b.run(), Trainer::Outcome::Finished);
        const Checkpoint ca = readCheckpoint(RunDirectory(rootA).checkpointPath(3));
        const Checkpoint cb = readCheckpoint(RunDirectory(rootB).checkpointPath(3));
        QCOMPARE(cb.weights.size(), ca.weights.size());
        for (std::size_t i = 0; i < ca.weights.size(); ++i)
            QVERIFY2(sameBytes(ca.weights[i].second, cb.weights[i].second),
                     ca.weights[i].first.c_str());
        bool said = false;
        for (const auto& l : rec.logs)
            said = said ||
                   (l.find("training fashion-fast") != std::string::npos &&
                    l.find("the training set held on host (0.1 MB as bytes)") != std::string::npos);
        QVERIFY(said);
        const auto grid = [](const fs::path& file) {
            std::ifstream in(file, std::ios::binary);
            const std::string bytes{std::istreambuf_iterator<char>(in), {}};
            const auto at = bytes.find("input/training_images");
            return at == std::string::npos ? std::string() : bytes.substr(at, 2000);
        };
        QVERIFY(!grid(a.eventsFile()).empty());
        QCOMPARE(grid(b.eventsFile()), grid(a.eventsFile()));
    }

    // GPU towers take the next step while the GPUs still compute this one, their results one
    // step late (here on stand-in GPUs): the run is bitwise the host towers' (every step's loss,
    // the checkpoints, the evaluations), with a step in flight at every report but those after
    // which the towers' state is read (a checkpoint, an evaluation, the last step).
    void gpuTowersIssueStepsAhead()
    {
        FakeDeviceScope scope;
        TrainConfig c = stepsAheadConfig();
        c.checkpointEvery = 4;
        c.evalEvery = 5;
        QTemporaryDir dirA, dirB;
        const fs::path rootA = dirA.path().toStdString(), rootB = dirB.path().toStdString();
        auto srcA = syntheticBatchesFor(c), srcB = syntheticBatchesFor(c);
        Trainer a(c, srcA, rootA);
        a.setEvaluator(16, srcA.evaluationBatches());
        QCOMPARE(a.run(), Trainer::Outcome::Finished);

        struct InFlight : Recorder
        {
            Trainer* trainer = nullptr;
            std::vector<std::size_t> atReport;
            void onStep(const StepMetrics& m) override
            {
                atReport.push_back(trainer->towers().inFlight());
                Recorder::onStep(m);
            }
        } rec;
        Trainer b(c, srcB, rootB, {}, &rec, nullptr, onStandInGpus());
        rec.trainer = &b;
        QVERIFY(b.towers().pipelines());
        QVERIFY(!a.towers().pipelines());
        b.setEvaluator(16, srcB.evaluationBatches());
        QCOMPARE(b.run(), Trainer::Outcome::Finished);
        QCOMPARE(b.towers().inFlight(), std::size_t(0));
        QCOMPARE(srcB.calls(), std::int64_t(10)); // each batch read once

        const auto ma = jsonLines(rootA / "metrics.jsonl"), mb = jsonLines(rootB / "metrics.jsonl");
        QCOMPARE(mb.size(), std::size_t(10));
        QCOMPARE(ma.size(), mb.size());
        for (std::size_t i = 0; i < ma.size(); ++i) {
            QCOMPARE(mb[i]["step"], ma[i]["step"]);
            QCOMPARE(mb[i]["loss"].get<double>(), ma[i]["loss"].get<double>());
        }
        // In flight at each report: none after steps 4, 5, 8 and 10 (a checkpoint, an
        // evaluation, the last step), the next step after the others.
        const std::vector<std::size_t> expected{1, 1, 1, 0, 0, 1, 1, 0, 1, 0};
        QCOMPARE(rec.atReport, expected);
        for (std::int64_t step : {4, 8, 10})
            expectSameCheckpoint(RunDirectory(rootA).checkpointPath(step),
                                 RunDirectory(rootB).checkpointPath(step));
        const auto ea = jsonLines(rootA / "eval.jsonl"), eb = jsonLines(rootB / "eval.jsonl");
        QCOMPARE(eb.size(), std::size_t(2));
        QCOMPARE(ea.size(), eb.size());
        for (std::size_t i = 0; i < ea.size(); ++i) {
            QCOMPARE(eb[i]["step"], ea[i]["step"]);
            QCOMPARE(eb[i]["meanCrossEntropy"].get<double>(),
                     ea[i]["meanCrossEntropy"].get<double>());
            QCOMPARE(eb[i]["confusion"], ea[i]["confusion"]);
        }
        QCOMPARE(scope.memory().livePinned() > 0, true); // the loss and flags' page-locked copies
    }

    // With a step in flight: a NaN step stops the run at that step (the step issued behind it
    // is discarded, never checkpointed), and a stop waits for the step in flight, checkpoints
    // it, and the run resumed from there ends bitwise where an uninterrupted one does.
    void gpuTowersStepsAheadStopAndDiverge()
    {
        FakeDeviceScope scope;
        TrainConfig c = stepsAheadConfig();
        c.checkpointEvery = 2;
        {
            QTemporaryDir dir;
            auto src = syntheticBatchesFor(c);
            src.injectNanAt(4);
            Trainer t(c, src, dir.path().toStdString(), {}, nullptr, nullptr, onStandInGpus());
            const std::string message = messageOf([&] { t.run(); });
            QVERIFY2(message.find("at step 5") != std::string::npos, message.c_str());
            QCOMPARE(t.step(), std::int64_t(4));
            QCOMPARE(t.towers().inFlight(), std::size_t(0)); // step 6 was discarded with it
            QCOMPARE(t.towers().optimizer().stepCount(), std::int64_t(4));
            QCOMPARE(RunDirectory(dir.path().toStdString()).checkpoints().back().step,
                     std::int64_t(4));
        }
        c.checkpointEvery = 0;
        QTemporaryDir dirA, dirB;
        const fs::path rootA = dirA.path().toStdString(), rootB = dirB.path().toStdString();
        auto srcA = syntheticBatchesFor(c), srcB = syntheticBatchesFor(c);
        Trainer a(c, srcA, rootA, {}, nullptr, nullptr, onStandInGpus());
        QCOMPARE(a.run(), Trainer::Outcome::Finished);
        std::int64_t stoppedAt = 0;
        {
            struct StopAt5 : Recorder
            {
                Trainer* trainer = nullptr;
                void onStep(const StepMetrics& m) override
                {
                    if (m.step == 5) trainer->requestStop(); // step 6 is in flight
                    Recorder::onStep(m);
                }
            } rec;
            Trainer b(c, srcB, rootB, {}, &rec, nullptr, onStandInGpus());
            rec.trainer = &b;
            QCOMPARE(b.run(), Trainer::Outcome::Stopped);
            stoppedAt = b.step();
            QCOMPARE(stoppedAt, std::int64_t(6));
            QCOMPARE(rec.stopped, stoppedAt);
            QCOMPARE(rec.steps.back().step, stoppedAt); // reported before the checkpoint
        }
        auto srcC = syntheticBatchesFor(c);
        Trainer b(c, srcC, rootB, {}, nullptr, nullptr, onStandInGpus());
        QCOMPARE(b.resumeFromNewest(), std::optional<std::int64_t>(stoppedAt));
        QCOMPARE(b.run(), Trainer::Outcome::Finished);
        expectSameCheckpoint(RunDirectory(rootA).checkpointPath(10),
                             RunDirectory(rootB).checkpointPath(10));
    }

    void refusals()
    {
        TrainConfig c = baseConfig();
        QTemporaryDir dir;
        // A source split for another number of towers.
        SyntheticBatches three({28, 28, 1}, 10, 3, 4, 400, 1);
        {
            Recorder rec;
            Trainer t(c, three, dir.path().toStdString(), {}, &rec);
            QVERIFY_THROWS_EXCEPTION(InvalidArgument, t.run());
            QVERIFY(rec.failed.find("split for 3 towers") != std::string::npos);
            QVERIFY_THROWS_EXCEPTION(InvalidArgument, t.run()); // once only
        }

        // Another model's checkpoint.
        TrainConfig tc = baseConfig();
        tc.model = "cifar10-tutorial";
        tc.towers = 1;
        tc.steps = 1;
        QTemporaryDir other;
        SyntheticBatches cifar({24, 24, 3}, 10, 1, 4, 40, 1);
        Trainer tutorial(tc, cifar, other.path().toStdString());
        tutorial.run();
        auto src = syntheticBatchesFor(c);
        Trainer fresh(c, src, dir.path().toStdString());
        try {
            fresh.restore(RunDirectory(other.path().toStdString()).checkpointPath(1));
            QFAIL("restored another model's checkpoint");
        } catch (const InvalidArgument& e) {
            QVERIFY2(
                QString::fromUtf8(e.what()).contains(QLatin1String("ckpt-00000001.safetensors")),
                e.what());
            QVERIFY2(QString::fromUtf8(e.what()).contains(QLatin1String("cifar10-tutorial")),
                     e.what());
        }
        // Class names that do not fit the model.
        QTemporaryDir namesDir; // `fresh` holds dir
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, Trainer(c, src, namesDir.path().toStdString(),
                                                          {{"cat", "dog"}, "{}", {}}));
        // A bad configuration never reaches the disk.
        TrainConfig bad = baseConfig();
        bad.batchPerTower = 0;
        QTemporaryDir badDir;
        const fs::path target = fs::path(badDir.path().toStdString()) / "never";
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, Trainer(bad, src, target));
        QVERIFY(!fs::exists(target));
    }
};

QTEST_APPLESS_MAIN(TestTrainer)
#include "tst_trainer.moc"
