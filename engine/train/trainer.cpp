// Trainer (trainer.h): its construction, the run loop, evaluation, metrics and the reports, pause
// and stop. Where a run starts (new, resumed, restored) and the checkpoints it writes are in
// trainer_checkpoints.cpp.
#include "engine/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <deque>
#include <limits>
#include <new>
#include <thread>

#include <nlohmann/json.hpp>

#include "engine/backends.h"
#include "engine/cpu/cores.h"
#include "engine/data/batch_loader.h"
#include "engine/dist/process_state.h"
#include "engine/errors.h"
#include "engine/gpu/gpu_backend.h"
#include "engine/train/checkpoint.h"
#include "engine/train/tensorboard_writer.h"
#include "engine/train/trainer_parts.h"

namespace towers::engine {

namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

double msSince(Clock::time_point t)
{
    return msBetween(t, Clock::now());
}

// "2024-05-01 12:00:00.123" (local time), the tutorial's datetime.now() prefix.
std::string timestamp()
{
    const auto now = std::chrono::system_clock::now();
    const std::time_t t = std::chrono::system_clock::to_time_t(now);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() %
        1000;
    std::tm tm{};
    ::localtime_r(&t, &tm);
    char buf[48];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02d %02d:%02d:%02d.%03d", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, int(ms));
    return buf;
}

std::string lossText(double loss)
{
    if (std::isnan(loss)) return "NaN";
    return loss > 0 ? "inf" : "-inf";
}

Json evalJson(const EvalResult& r)
{
    Json confusion = Json::array();
    for (int t = 0; t < r.numClasses; ++t) {
        Json row = Json::array();
        for (int p = 0; p < r.numClasses; ++p) row.push_back(r.confusionAt(t, p));
        confusion.push_back(row);
    }
    Json o = {{"step", r.step},
              {"set", r.set},
              {"examples", r.examples},
              {"correct", r.correct},
              {"precisionAt1", r.precisionAt1},
              {"meanCrossEntropy", r.meanCrossEntropy},
              {"ema", r.ema},
              {"seconds", r.seconds},
              {"classCounts", r.classCounts},
              {"perClassAccuracy", r.perClassAccuracy},
              {"confusion", confusion}};
    if (r.hasTop5()) {
        o["correctTop5"] = r.correctTop5;
        o["precisionAt5"] = r.precisionAt5;
        o["classTop5"] = r.classTop5;
    }
    return o;
}

// Validates before the run directory is created.
TrainConfig validated(TrainConfig c, const ProcessGroup* group)
{
    c.validate();
    c.checkThreadBudget();
    const int processes = group ? group->size() : 1;
    if (c.processes != processes)
        throw InvalidArgument(
            "processes: the configuration says " + std::to_string(c.processes) + ", but " +
            std::to_string(processes) + (processes == 1 ? " process runs" : " processes run") +
            (processes == 1
                 ? " (start it with mpirun -np " + std::to_string(c.processes) + " or srun)"
                 : ""));
    return c;
}

// Rank 0 (or the only process) holds the lock; the other ranks write nothing.
std::optional<RunLock> lockFor(const std::filesystem::path& root, const ProcessGroup* group)
{
    if (group && group->rank() != 0) return std::nullopt;
    return RunLock::acquire(root);
}

// What every process of a run must agree on: the build, and the configuration (less the run id,
// which rank 0 makes or reads, the data folder, which is each machine's own: the session
// compares the datasets' contents, and whether steps are captured as CUDA graphs, which changes
// no result and no collective: each process issues its own steps).
std::string runIdentity(TrainConfig c)
{
    c.runId.clear();
    c.dataDir.clear();
    static const TrainConfig defaults; // (a temporary here: GCC 12 warns of its strings)
    c.cudaGraphs = defaults.cudaGraphs;
    return std::string(gpuBackendBuildId()) + "\n" + c.toJson();
}

} // namespace

TowerSetOptions towerSetOptionsFor(const TrainConfig& c, ProcessGroup* processes,
                                   int processesSharingCores)
{
    TowerSetOptions o;
    o.model = c.model;
    o.modelDefinition = c.modelDefinition;
    o.numClasses = c.classes;
    o.backend = c.backend;
    o.towers = c.towers;
    o.gpus = c.gpus;
    o.allowTf32 = c.allowTf32;
    o.cudnnBenchmark = c.cudnnBenchmark;
    o.precision = c.precision;
    o.allreduce = c.allreduce;
    o.bucketMb = c.bucketMb;
    o.graphs = c.cudaGraphs;
    o.threadsPerTower = c.resolvedThreadsPerTower(processesSharingCores);
    o.accumulate = c.accumulate;
    o.optimizer = c.optimizer;
    o.weightDecay = c.weightDecay;
    o.dropout = c.dropout;
    o.emaDecay = c.emaDecay;
    o.labelSmoothing = c.labelSmoothing;
    o.clipGradNorm = c.clipGradNorm;
    o.seed = c.seed;
    o.processes = processes;
    return o;
}

Trainer::Trainer(TrainConfig config, BatchSource& source, std::filesystem::path runDirectory,
                 DataDescription data, TrainerObserver* observer, ProcessGroup* processes,
                 const std::function<void(TowerSetOptions&)>& towerOptions)
    : m_config(validated(std::move(config), processes)), m_source(source), m_group(processes),
      m_lock(lockFor(runDirectory, processes)), m_data(std::move(data)), m_observer(observer)
{
    if (m_lock) m_dir.emplace(std::move(runDirectory));
    if (m_group) requireSameEverywhere(*m_group, runIdentity(m_config), "build or configuration");
    m_stepsPerEpoch = m_source.stepsPerEpoch();
    if (m_stepsPerEpoch < 1)
        throw InvalidArgument("the data source has no complete global batch per epoch");
    m_total = m_config.totalSteps(m_stepsPerEpoch);
    if (m_group && m_group->size() > 1) {
        // Which of the run's processes compute on this one's cores (every process asks: a
        // collective). A launcher that binds each process to cores of its own (mpirun's
        // default binding, srun's cpusets) leaves each its cores; unbound ones share them.
        const std::string mine = cpu::coreSetDescription(m_group->hostName());
        m_coreSharers = cpu::processesSharingCores(mine, m_group->allGatherStrings(mine));
    }
    TowerSetOptions o = towerSetOptionsFor(m_config, m_group, m_coreSharers);
    if (towerOptions) towerOptions(o);
    m_towers = std::make_unique<TowerSet>(o);
    const int classes = m_towers->model().numClasses();
    if (!m_data.classNames.empty() && int(m_data.classNames.size()) != classes)
        throw InvalidArgument(std::to_string(m_data.classNames.size()) +
                              " class names for model '" + m_config.model + "', which has " +
                              std::to_string(classes) + " classes");
}

Trainer::~Trainer() = default;

RunDirectory& Trainer::runDirectory()
{
    if (!m_dir)
        throw InvalidArgument("rank " + std::to_string(m_group ? m_group->rank() : 0) +
                              " does not write the run directory (rank 0 does)");
    return *m_dir;
}

bool Trainer::stopVote(const std::stop_token& stop)
{
    const bool mine = stopRequested(stop);
    if (!m_group || m_group->size() == 1) return mine;
    return m_group->any(mine, "the stop vote");
}

std::filesystem::path Trainer::eventsFile() const
{
    return m_events ? m_events->path() : std::filesystem::path();
}

void Trainer::setEvaluator(std::int64_t count, EvalBatchFn batches, std::string set)
{
    if (count < 1) throw InvalidArgument("the " + set + " set is empty");
    if (!batches) throw InvalidArgument("the evaluator needs a batch callback");
    m_evalCount = count;
    m_evalBatches = std::move(batches);
    m_evalSet = std::move(set);
}

void Trainer::holdTrainingSet(const ImageSet& set, const Preprocessing& recipe)
{
    if (m_ran) throw InvalidArgument("holdTrainingSet() must come before run()");
    m_dataNote = m_towers->holdTrainingSet(set, recipe);
    m_heldSet = &set;
    m_heldRecipe = recipe;
}

void Trainer::log(const std::string& line)
{
    if (m_observer) m_observer->onLog(line);
}

void Trainer::pause()
{
    m_pauseRequested = true;
}

void Trainer::resume()
{
    {
        std::lock_guard lock(m_mutex);
        m_pauseRequested = false;
    }
    m_cv.notify_all();
}

void Trainer::requestStop()
{
    {
        std::lock_guard lock(m_mutex);
        m_stopRequested = true;
    }
    m_cv.notify_all();
}

bool Trainer::stopRequested(const std::stop_token& stop) const
{
    return m_stopRequested.load() || stop.stop_requested();
}

bool Trainer::waitWhilePaused(const std::stop_token& stop)
{
    if (!m_pauseRequested.load()) return true;
    const std::int64_t s = m_step.load();
    if (m_observer) m_observer->onPaused(s);
    log("paused at step " + std::to_string(s));
    const auto pausedAt = Clock::now();
    {
        std::unique_lock lock(m_mutex);
        m_cv.wait(lock, [&] { return !m_pauseRequested.load() || stopRequested(stop); });
    }
    m_pausedSeconds += msSince(pausedAt) / 1000.0;
    if (stopRequested(stop)) return false;
    if (m_observer) m_observer->onResumed(s);
    log("resumed at step " + std::to_string(s));
    return true;
}

EvalResult Trainer::evaluate(std::int64_t count, const EvalBatchFn& batches,
                             std::optional<bool> useEma)
{
    const bool ema = useEma.value_or(m_towers->ema() != nullptr);
    const int batch = m_config.evalBatchSize > 0 ? m_config.evalBatchSize : m_config.batchPerTower;
    EvalResult r = m_towers->evaluate(count, batch, batches, ema);
    r.step = m_step.load();
    return r;
}

bool Trainer::runEvaluation(const std::stop_token& stop)
{
    const bool ema = m_towers->ema() != nullptr;
    const int batch = m_config.evalBatchSize > 0 ? m_config.evalBatchSize : m_config.batchPerTower;
    EvalResult r = m_towers->evaluate(m_evalCount, batch, m_evalBatches, ema,
                                      [&] { return stopRequested(stop); });
    r.step = m_step.load();
    r.set = m_evalSet;
    if (!r.complete) {
        log("evaluation at step " + std::to_string(r.step) + " stopped part-way");
        return false;
    }
    m_lastEvalStep = r.step;
    const std::optional<EvaluationMark> best = bestEvaluationSoFar(); // before this one
    if (m_dir) m_dir->appendEval(evalJson(r).dump());
    if (m_events) m_events->evaluation(r);
    char top5[32] = "";
    if (r.hasTop5()) std::snprintf(top5, sizeof top5, ", @ 5 = %.3f", r.precisionAt5);
    char buf[200];
    std::snprintf(
        buf, sizeof buf, "%s: step %lld, %s precision @ 1 = %.3f%s (%lld examples%s, %.1f s)",
        timestamp().c_str(), static_cast<long long>(r.step), r.set.c_str(), r.precisionAt1, top5,
        static_cast<long long>(r.examples), r.ema ? ", moving averages" : "", r.seconds);
    log(buf);
    if (m_observer) m_observer->onEvaluation(r);
    // The best evaluation so far keeps its weights: rotation spares its checkpoint, written now
    // when the step has none (an evaluation between checkpoints); the former best's goes when
    // it is beyond keepCheckpoints.
    if (m_dir && (!best || r.precisionAt1 > best->precisionAt1)) {
        m_best = EvaluationMark{r.step, r.precisionAt1};
        if (m_lastCheckpointStep != r.step)
            writeCheckpoint();
        else
            rotateCheckpoints(r.step);
    }
    if (m_dir) m_patience.add(r.precisionAt1, m_config.minDelta);
    if (m_config.patience > 0) {
        std::string why;
        // (Asked on every process alike; at the last step the run simply finishes.)
        if (patienceRanOut(why) && r.step < m_total) {
            m_stopEarly = true;
            log("stopping early at step " + std::to_string(r.step) + ": " + why);
        }
    }
    return true;
}

bool Trainer::patienceRanOut(std::string& why)
{
    if (m_config.patience <= 0) return false;
    bool out = false;
    if (m_dir) {
        const auto& best = bestEvaluationSoFar();
        const int since = m_patience.since;
        out = best && m_patience.best && since >= m_config.patience;
        if (out) {
            char text[240];
            if (m_config.minDelta > 0)
                std::snprintf(text, sizeof text,
                              "the last %d evaluations did not beat %s precision @ 1 = %.4f by "
                              "more than %g (min delta; the best: step %lld's %.4f; patience %d)",
                              since, m_evalSet.c_str(), *m_patience.best, m_config.minDelta,
                              static_cast<long long>(best->step), best->precisionAt1,
                              m_config.patience);
            else
                std::snprintf(text, sizeof text,
                              "the last %d evaluations were no better than step %lld's (%s "
                              "precision @ 1 = %.3f; patience %d)",
                              since, static_cast<long long>(best->step), m_evalSet.c_str(),
                              best->precisionAt1, m_config.patience);
            why = text;
        }
    }
    if (m_group && m_group->size() > 1) out = m_group->any(out, "the patience check");
    if (out && why.empty()) why = "rank 0's evaluations ran out of patience";
    return out;
}

StepMetrics Trainer::metricsOf(std::int64_t done, const TowerStepResult& r, double lr,
                               double stepMs, double waitMs) const
{
    const int towers = m_towers->globalTowers();
    StepMetrics m;
    m.step = done;
    m.epoch = double(done) / double(m_stepsPerEpoch);
    m.loss = r.loss;
    m.crossEntropy = r.crossEntropy;
    m.gradNorm = r.gradNorm;
    m.lr = lr;
    m.stepMs = stepMs;
    m.examplesPerSec = double(towers) * double(m_config.examplesPerTowerStep()) * 1000.0 / stepMs;
    m.secPerBatch = stepMs / 1000.0 / towers;
    m.dataWaitMs = waitMs;
    // The slowest tower is the critical path; its averaging time is the least waiting-inflated.
    std::size_t slowest = 0;
    for (std::size_t t = 0; t < r.towers.size(); ++t) {
        m.towerComputeMs.push_back(r.towers[t].computeMs);
        TowerTimes times = r.towers[t];
        times.dataMs += waitMs; // every tower waited for the batch
        m.towerTimes.push_back(times);
        if (r.towers[t].computeMs > r.towers[slowest].computeMs) slowest = t;
    }
    m.computeMs = r.towers[slowest].computeMs;
    m.allReduceMs = r.towers[slowest].commMs;
    m.updateMs = r.towers[slowest].updateMs;
    m.totalSteps = m_total;
    m.elapsedSeconds = std::max(0.0, msSince(m_runStart) / 1000.0 - m_pausedSeconds);
    const std::int64_t doneHere = done - m_runStartStep;
    if (doneHere > 0) m.etaSeconds = m.elapsedSeconds / double(doneHere) * double(m_total - done);
    return m;
}

void Trainer::report(const StepMetrics& m)
{
    Json j{{"step", m.step},
           {"totalSteps", m.totalSteps},
           {"elapsedSeconds", m.elapsedSeconds},
           {"epoch", m.epoch},
           {"loss", m.loss},
           {"crossEntropy", m.crossEntropy},
           {"lr", m.lr},
           {"examplesPerSec", m.examplesPerSec},
           {"secPerBatch", m.secPerBatch},
           {"stepMs", m.stepMs},
           {"dataWaitMs", m.dataWaitMs},
           {"computeMs", m.computeMs},
           {"allReduceMs", m.allReduceMs},
           {"updateMs", m.updateMs},
           {"towerComputeMs", m.towerComputeMs}};
    Json split = Json::array();
    for (const auto& t : m.towerTimes)
        split.push_back({{"computeMs", t.computeMs},
                         {"commMs", t.commMs},
                         {"dataMs", t.dataMs},
                         {"updateMs", t.updateMs}});
    j["towerTimes"] = split;
    if (std::isfinite(m.gradNorm)) j["gradNorm"] = m.gradNorm;
    if (m_dir) m_dir->appendMetrics(j.dump());
    if (m_events) m_events->stepMetrics(m, m_config.examplesPerTowerStep());
    // The tutorial's line: "%s: step %d, loss = %.2f (%.1f examples/sec; %.3f sec/batch)".
    // Then where the run stands: "[12%, epoch 1.20, ETA 2m05s]", and where the slowest tower's
    // step went: "compute 41.0 ms, communication 2.1 ms, data 0.3 ms, update 1.2 ms".
    TowerTimes slow;
    for (const auto& t : m.towerTimes)
        if (t.computeMs >= slow.computeMs) slow = t;
    char buf[384];
    const long long eta = std::llround(m.etaSeconds);
    std::snprintf(buf, sizeof buf,
                  "%s: step %lld, loss = %.2f (%.1f examples/sec; %.3f sec/batch) [%d%%, epoch "
                  "%.2f, ETA %lldm%02llds] compute %.1f ms, communication %.1f ms, data %.1f ms, "
                  "update %.1f ms",
                  timestamp().c_str(), static_cast<long long>(m.step), m.loss, m.examplesPerSec,
                  m.secPerBatch, int(100 * m.step / std::max<std::int64_t>(1, m.totalSteps)),
                  m.epoch, eta / 60, eta % 60, slow.computeMs, slow.commMs, slow.dataMs,
                  slow.updateMs);
    std::string line = buf;
    if (std::isfinite(m.gradNorm)) { // the norm before any clipping, and whether it clipped
        if (m_config.clipGradNorm > 0 && m.gradNorm > m_config.clipGradNorm)
            std::snprintf(buf, sizeof buf, ", gradient norm %.3g (clipped to %g)", m.gradNorm,
                          m_config.clipGradNorm);
        else
            std::snprintf(buf, sizeof buf, ", gradient norm %.3g", m.gradNorm);
        line += buf;
    }
    log(line);
    if (m_observer) m_observer->onStep(m);
}

void Trainer::prepareRunFolder(std::int64_t from)
{
    RunDirectory& dir = *m_dir;
    dir.removeStaleTemporaries();
    dir.writeConfig(m_config.toJson());
    dir.clearFailure(); // it trains again
    // What lies beyond the starting step belongs to an abandoned future (a run resumed
    // from an older checkpoint because the newer ones did not load): a later resume must
    // not pick it up, nor the logs show it twice. The checkpoints are moved aside, never
    // deleted.
    dir.truncateLogs(from);
    m_bestRead = false; // the best of what is left
    std::vector<std::filesystem::path> beyond;
    for (const auto& c : dir.checkpoints())
        if (c.step > from) beyond.push_back(c.path);
    if (!beyond.empty())
        log("moved " + counted(beyond.size(), "checkpoint", "checkpoints") + " beyond step " +
            std::to_string(from) + ", the step this run continues from, to " +
            dir.setAsideCheckpoints(beyond).string());
}

void Trainer::startEvents(std::int64_t from, std::int64_t eventsStart)
{
    RunDirectory& dir = *m_dir;
    // TensorBoard: a new events file for this run(). A resumed run continues the curves
    // after its checkpoint's step S: what earlier files hold beyond S goes, as from the
    // logs above (and the restart marker at S + 1 tells TensorBoard so); a run from step 0
    // replaces all.
    EventFileWriter::dropEventsAfter(dir.root(), eventsStart - 1);
    m_events = std::make_unique<TensorBoardWriter>(dir.root());
    m_events->start(eventsStart, m_config, dir.checkpointDir());
    if (from == 0 && m_config.histogramEvery > 0) // the initial weights
        m_events->parameters(0, m_towers->model(), false);
    log("TensorBoard events in " + m_events->path().string());
}

void Trainer::logStart()
{
    const int towers = m_towers->globalTowers();
    const std::int64_t global = std::int64_t(towers) * m_config.examplesPerTowerStep();
    const std::string across = m_group && m_group->size() > 1
                                   ? " (" + std::to_string(m_group->size()) + " processes x " +
                                         std::to_string(m_towers->size()) + ")"
                                   : "";
    log("training " + m_config.model + " on " + counted(towers, "tower", "towers") + across +
        " x " + std::to_string(m_config.batchPerTower) + " examples" +
        (m_config.accumulate > 1
             ? " x " + std::to_string(m_config.accumulate) + " accumulated batches"
             : std::string()) +
        " (global batch " + std::to_string(global) + "), " +
        (m_config.sampling == "balanced" ? std::string("the classes sampled equally, ")
                                         : std::string()) +
        (!isHostBackend(m_config.backend)
             ? std::string("on GPUs")
             : counted(m_towers->options().threadsPerTower, "thread", "threads") + " per tower") +
        (m_config.precision == Precision::Float32
             ? std::string()
             : ", " + std::string(precisionName(m_config.precision)) +
                   " convolutions and matrix products (float32 weights)") +
        (m_dataNote.empty() ? std::string() : ", " + m_dataNote) + ", " +
        m_towers->averagingDescription() + ", steps " + std::to_string(m_step.load()) + " to " +
        std::to_string(m_total));
    // More compute threads than cores: each step waits on threads the cores cannot run
    // (OpenMP's teams meet at every op), many times slower. Said, not refused: the user may
    // know better (cores this process cannot see, say).
    if (isHostBackend(m_config.backend)) {
        const int here = m_coreSharers;
        const std::string note = cpu::threadsBeyondCores(
            long(m_towers->size()) * m_towers->options().threadsPerTower * here,
            (here > 1 ? std::to_string(here) + " processes x " : std::string()) +
                counted(m_towers->size(), "tower", "towers") + " x " +
                std::to_string(m_towers->options().threadsPerTower) + " per tower",
            m_config.threadsPerTower > 0 ? "--threads-per-tower 0 shares the cores out"
                                         : "fewer towers or processes would use them better");
        if (!note.empty()) log("note: " + note);
    }
}

bool Trainer::evaluateAtResume(std::int64_t from, const std::stop_token& stop)
{
    if (!m_evalBatches || from == 0) return true;
    bool recorded = false;
    if (m_dir)
        for (const EvaluationMark& mark : readEvaluations(m_dir->evalPath()))
            recorded = recorded || mark.step == from;
    if (m_group && m_group->size() > 1)
        recorded = m_group->any(recorded, "the check for an evaluation at the resumed step");
    if (recorded) {
        m_lastEvalStep = from;
    } else if (m_config.evalEvery > 0 && from % m_config.evalEvery == 0 && from < m_total &&
               !m_stopEarly) {
        log("no evaluation is recorded at step " + std::to_string(from) +
            ", where the run continues (one a stop cut short, or a new --eval-every): it "
            "is made now");
        return runEvaluation(stop);
    }
    return true;
}

Trainer::Outcome Trainer::stopped()
{
    const std::int64_t s = m_step.load();
    if (m_lastCheckpointStep != s) writeCheckpoint();
    if (m_observer) m_observer->onStopped(s);
    return Outcome::Stopped;
}

Trainer::Outcome Trainer::ended(Outcome outcome)
{
    if (m_events) m_events->end(true);
    if (m_observer) m_observer->onFinished(m_step.load());
    return outcome;
}

Trainer::Outcome Trainer::trainSteps(const std::stop_token& stop, std::int64_t eventsStart,
                                     std::string graphs)
{
    bool imagesWritten = false;
    // Steps are issued ahead of their results where the towers allow it (TowerSet::
    // pipelines(): GPU towers, whose host prepares and issues step s + 1 while the GPUs still
    // compute step s); the results come one step late. A step after which the towers' state
    // is read (a checkpoint, an evaluation, histograms, the replica check, the last step),
    // a stop and a pause wait until every issued step is done.
    struct Issued
    {
        std::int64_t step = 0;
        double lr = 0, waitMs = 0;
        Clock::time_point started;
    };
    std::deque<Issued> flight;
    const std::size_t ahead = m_towers->pipelines() ? TowerSet::kMaxInFlight - 1 : 0;
    // What follows step `done` besides its report: each reads the towers' state.
    struct AfterStep
    {
        bool verify = false, histograms = false, checkpoint = false, evaluate = false;
        bool readsState() const { return verify || histograms || checkpoint || evaluate; }
    };
    const auto after = [&](std::int64_t done) {
        const auto at = [done](std::int64_t period) { return period > 0 && done % period == 0; };
        const bool last = done == m_total;
        AfterStep a;
        a.verify = at(m_config.verifyEvery);
        // Histograms of the weights and of this step's averaged gradients.
        a.histograms =
            m_events && m_config.histogramEvery > 0 && (at(m_config.histogramEvery) || last);
        a.checkpoint = at(m_config.checkpointEvery) || last;
        a.evaluate = m_evalBatches && at(m_config.evalEvery);
        return a;
    };
    Clock::time_point lastDone = m_runStart;
    // The gradients' norm of the latest step taken, for a divergence's message: how large they
    // had grown.
    double lastNorm = std::numeric_limits<double>::quiet_NaN();
    std::int64_t lastNormStep = 0;
    const auto normBefore = [&]() -> std::string {
        if (!std::isfinite(lastNorm)) return {};
        char b[96];
        std::snprintf(b, sizeof b, "; the gradients' norm was %.3g at step %lld", lastNorm,
                      static_cast<long long>(lastNormStep));
        return b;
    };
    // Collects the oldest issued step and does what follows it; false when a stop ended its
    // evaluation.
    const auto finishOldest = [&]() -> bool {
        const Issued issued = flight.front();
        flight.pop_front();
        const TowerStepResult r = m_towers->collect();
        const auto now = Clock::now();
        if (std::string g = m_towers->graphDescription(); g != graphs) {
            graphs = std::move(g);
            if (!graphs.empty()) log("steps: " + graphs);
        }
        // From its start, or from the end of the step before it when that came later.
        const double stepMs = msBetween(std::max(issued.started, lastDone), now);
        lastDone = now;
        const std::int64_t s = issued.step;
        if (!std::isfinite(r.loss))
            throw DivergedError("model diverged with loss = " + lossText(r.loss) + " at step " +
                                std::to_string(s + 1) + normBefore());
        if (!r.finite) {
            char loss[32];
            std::snprintf(loss, sizeof loss, "%.4g", r.loss);
            throw DivergedError("model diverged at step " + std::to_string(s + 1) +
                                ": its gradients are NaN or infinite (loss = " + loss + ")" +
                                normBefore());
        }
        if (std::isfinite(r.gradNorm)) {
            lastNorm = r.gradNorm;
            lastNormStep = s + 1;
        }
        m_step = s + 1;
        const std::int64_t done = s + 1;
        const AfterStep then = after(done);
        if (then.verify) m_towers->verifyReplicas();
        if (done % m_config.logEvery == 0 || done == m_total)
            report(metricsOf(done, r, issued.lr, stepMs, issued.waitMs));
        if (then.histograms) m_events->parameters(done, m_towers->model(), true);
        // The checkpoint first: a stop during the evaluation then has nothing left to save.
        if (then.checkpoint) writeCheckpoint();
        return !then.evaluate || runEvaluation(stop);
    };
    while (m_step.load() < m_total && !m_stopEarly) {
        const std::int64_t s = m_step.load() + std::int64_t(flight.size()); // to issue next
        if (s >= m_total) { // every step issued: what is left in flight
            if (!finishOldest()) return stopped();
            continue;
        }
        const bool halt = stopVote(stop);
        // Read once: a pause asked for after this waits for the next turn, so that the run
        // never pauses (nor, stopped while paused, checkpoints) with a step in flight, whose
        // state the towers already hold and whose step the checkpoint would not count.
        const bool pausing = m_pauseRequested.load();
        if (halt || pausing) { // the towers' state as of the last step issued
            while (!flight.empty())
                if (!finishOldest()) return stopped();
            if (m_step.load() >= m_total) break;
        }
        if (halt || (pausing && !waitWhilePaused(stop))) return stopped();
        const auto t0 = Clock::now();
        const Batch& batch = m_source.next();
        const double waitMs = m_source.lastWaitMs();
        if (batch.step != s)
            throw Error("the data source delivered the batch of step " +
                        std::to_string(batch.step) + " for step " + std::to_string(s));
        if (batch.perTower() != m_config.examplesPerTowerStep())
            throw InvalidArgument("the data source delivers " + std::to_string(batch.perTower()) +
                                  " examples per tower, the configuration says " +
                                  std::to_string(m_config.examplesPerTowerStep()));
        if (!imagesWritten && m_events) { // the first batch this run trains on, as seen
            constexpr int kShown = 64;
            if (!batch.draws.empty() && m_heldSet) { // made where the towers are: again here
                Batch shown = batch;
                imagesOfDraws(*m_heldSet, m_heldRecipe, batch.draws,
                              std::min<std::int64_t>(batch.draws.dim(0), kShown), shown.images);
                m_events->trainingImages(eventsStart, shown, kShown);
            } else {
                m_events->trainingImages(eventsStart, batch, kShown);
            }
            imagesWritten = true;
        }
        const double lr = m_config.schedule.at(s, m_stepsPerEpoch, m_total);
        m_towers->issue(batch, s, lr);
        flight.push_back({s, lr, waitMs, t0});
        const std::size_t keep = after(s + 1).readsState() ? 0 : ahead;
        while (flight.size() > keep)
            if (!finishOldest()) return stopped();
    }
    // After an evaluation every issued step is done (it reads the towers' state), so an early
    // stop leaves nothing in flight.
    if (m_lastCheckpointStep != m_step.load()) writeCheckpoint();
    if (m_stopEarly) return ended(Outcome::StoppedEarly);
    if (m_evalBatches && m_lastEvalStep != m_step.load() && !runEvaluation(stop)) return stopped();
    return ended(Outcome::Finished);
}

void Trainer::failed(const std::exception& e)
{
    // std::bad_alloc's own text ("std::bad_alloc") says nothing to a user.
    const bool memory = dynamic_cast<const std::bad_alloc*>(&e) != nullptr;
    const std::string error = memory ? "out of memory at step " + std::to_string(m_step.load()) +
                                           ": fewer towers or a smaller batch would take less"
                                     : std::string(e.what());
    if (m_events) {
        try {
            m_events->end(false);
        } catch (const std::exception&) {
            // the events file failing too (a full disk): the first error is the one to say
        }
    }
    if (m_dir && m_start != Start::Unset) {
        try {
            m_dir->writeFailure(m_step.load(), error); // runs shows it failed, and why
        } catch (const std::exception&) {
            // a full disk: the error itself is said
        }
    }
    if (m_observer) m_observer->onFailed(error);
    if (memory) throw Error(error);
    throw;
}

Trainer::Outcome Trainer::run(std::stop_token stop)
{
    if (m_ran)
        throw InvalidArgument(
            "Trainer::run() can be called once; build a new trainer to train again");
    m_ran = true;
    try {
        std::stop_callback wake(stop, [this] {
            {
                std::lock_guard lock(m_mutex);
            } // a waiter between its check and its sleep still wakes
            m_cv.notify_all();
        });
        if (m_start == Start::Unset) // startNew(false)
            startFresh(false);
        if (m_config.runId.empty()) m_config.runId = newRunId(); // a run from before run ids
        const std::int64_t from = m_step.load();
        const std::int64_t eventsStart = from == 0 ? 0 : from + 1;
        if (m_dir) prepareRunFolder(from);
        // A run that stopped early stays stopped: a resume of it has nothing to do (and writes
        // no events file), unless the patience grew.
        if (std::string why; from > 0 && from < m_total && patienceRanOut(why)) {
            if (m_lastCheckpointStep != from) writeCheckpoint();
            log("the run stopped early at step " + std::to_string(from) + ": " + why +
                "; give a larger patience to train it on");
            if (m_observer) m_observer->onFinished(from);
            return Outcome::StoppedEarly;
        }
        if (m_dir) startEvents(from, eventsStart);
        logStart();
        // How the GPU towers' steps are issued (nothing for host towers), and again when that
        // changes after a step (a capture failed: op by op from then on).
        std::string graphs = m_towers->graphDescription();
        if (!graphs.empty()) log("steps: " + graphs);
        m_source.seek(m_step.load());
        m_runStart = Clock::now();
        m_runStartStep = m_step.load();
        m_pausedSeconds = 0;
        if (!evaluateAtResume(from, stop)) return stopped();
        return trainSteps(stop, eventsStart, std::move(graphs));
    } catch (const std::exception& e) {
        failed(e);
    }
}

} // namespace towers::engine
