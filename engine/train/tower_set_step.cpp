// TowerSet's step (tower_set.h): issue() and collect(), each tower's share of a step from its
// slice of the batch to its update, and the CUDA graphs that capture it. The rest of TowerSet is in
// tower_set.cpp and tower_set_state.cpp.
#include "engine/train/tower_set.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "engine/dist/byte_message.h"
#include "engine/errors.h"
#include "engine/ops/op_checks.h"
#include "engine/train/tower_set_parts.h"

namespace towers::engine {

namespace {

using Clock = StepClock;

// Whether the part-th of `parts` equal ranges of the tensors' concatenated elements is finite.
bool finiteShare(std::span<const Tensor> tensors, int part, int parts)
{
    std::int64_t total = 0;
    for (const auto& t : tensors) total += t.numel();
    const std::int64_t begin = total * part / parts, end = total * (part + 1) / parts;
    std::int64_t offset = 0;
    bool finite = true;
    for (const auto& t : tensors) {
        const std::int64_t n = t.numel();
        const std::int64_t b = std::clamp(begin - offset, std::int64_t(0), n);
        const std::int64_t e = std::clamp(end - offset, std::int64_t(0), n);
        offset += n;
        if (b >= e) continue;
        if (t.dtype() == DType::Float32) {
            const float* p = t.data<float>();
            // x * 0 is 0 for every finite x and NaN for a NaN or an infinity, so the sum is
            // finite exactly when every element is (and cannot overflow).
            float sum = 0;
#pragma omp parallel for simd reduction(+ : sum) schedule(static) if (e - b > (1 << 16))
            for (std::int64_t i = b; i < e; ++i) sum += p[i] * 0.0f;
            finite = finite && std::isfinite(sum);
        } else {
            const double* p = t.data<double>();
            double sum = 0;
#pragma omp parallel for simd reduction(+ : sum) schedule(static) if (e - b > (1 << 16))
            for (std::int64_t i = b; i < e; ++i) sum += p[i] * 0.0;
            finite = finite && std::isfinite(sum);
        }
    }
    return finite;
}

// The tensors of a replica that the towers average (averagedTensor), in parameter order, into
// `out`.
void collectAveraged(const std::vector<Parameter*>& params, std::vector<Tensor>& out)
{
    out.clear();
    for (auto* p : params)
        if (Tensor v = averagedTensor(*p); !v.empty()) out.push_back(std::move(v));
}

} // namespace

void TowerSet::dropGraphs()
{
    for (auto& tw : m_towers) dropGraphs(*tw);
}

void TowerSet::dropGraphs(Tower& tw)
{
    for (StepSlot& sl : tw.slots) {
        sl.graph.reset();
        sl.warm = false;
    }
    tw.graphKey.clear();
}

bool TowerSet::issueCaptured(Tower& tw, StepSlot& sl, const std::string& key,
                             const std::function<void(bool marks)>& work)
{
    if (!m_graphs) {
        work(true);
        return false;
    }
    // A step of other shapes remakes tensors that the captures write: they are stale then.
    if (key != tw.graphKey) {
        dropGraphs(tw);
        tw.graphKey = key;
    }
    if (sl.graph) {
        sl.graph->replay();
        ++tw.replayed;
        return true;
    }
    if (!sl.warm) { // everything the step uses is made now, outside any capture
        work(true);
        sl.warm = true;
        return false;
    }
    Ops& ops = *tw.ops;
    try {
        ops.beginCapture();
        try {
            work(false);
        } catch (...) {
            ops.abandonCapture();
            throw;
        }
        sl.graph = ops.endCapture();
        // Its first run. A graph launched at once that CUDA refuses to launch (having made and
        // uploaded it) has run nothing either: the same fallback. A capture in parts has run
        // work by the time a later part fails: that failure is the step's, as any other.
        if (sl.graph->launchesAtOnce()) {
            try {
                sl.graph->replay();
            } catch (const Error& e) {
                throw Error(std::string("its first launch: ") + e.what());
            }
            ++tw.replayed;
            return true;
        }
    } catch (const Error& e) {
        // Nothing of the capture has run: the step goes op by op, as every later one of every
        // tower (issue() stops the others' captures). The collectives are the same either way, in
        // the same order. (A fault that is not the capture's shows again there, and is thrown
        // from there.)
        tw.graphFailure = e.what();
        dropGraphs(tw);
        work(true);
        return false;
    }
    sl.graph->replay(); // its first run, in parts
    ++tw.replayed;
    return true;
}

namespace {

// `dst` as a page-locked copy of host tensor `src` (made, or remade for another shape).
void stagePinned(const Tensor& src, Tensor& dst)
{
    if (dst.empty() || dst.shape() != src.shape() || dst.dtype() != src.dtype())
        dst = Tensor::pinned(src.shape(), src.dtype());
    dst.copyFrom(src);
}

} // namespace

TowerStepResult TowerSet::step(const Batch& batch, std::int64_t globalStep, double lr)
{
    requireIdle("step");
    issue(batch, globalStep, lr);
    return collect();
}

// One tower's share of a step as issue() prepares it on the tower's thread: the tower, the slot
// the step takes, its ops and context, and its slice of the batch where the ops read it.
struct TowerSet::TowerStep
{
    int t = 0;
    Tower& tw;
    StepSlot& sl;
    int slot = 0;
    Ops& ops;
    ExecContext ctx;
    std::int64_t globalStep = 0;
    double lr = 0;
    bool drawn = false;        // the tower makes its images from the batch's draws
    bool behind = false;       // a gated step issued before this one is in flight
    Tensor images{}, labels{}; // placed by placeSlice

    // Forward, the loss and backward, each gradient bucket's average started as soon as this
    // tower's backward has produced it, the buckets counted from none ready (so that a step
    // issued again op by op after a capture that failed midway starts every bucket once). With
    // accumulation (`parts` > 1), part by part: the parts before the last keep their gradients'
    // sum in the model and their losses in the slot, and the buckets start in the last part.
    void forwardBackward(int parts)
    {
        const std::int64_t n = labels.dim(0) / parts;
        sl.partLosses.resize(std::size_t(parts - 1));
        for (int part = 0; part < parts; ++part) {
            ExecContext c = ctx;
            c.replica = ctx.replica * std::uint64_t(parts) + std::uint64_t(part);
            const bool whole = parts == 1;
            tw.model->forward(c, whole ? images : images.slice(part * n, (part + 1) * n));
            tw.model->computeLoss(c, whole ? labels : labels.slice(part * n, (part + 1) * n));
            if (part < parts - 1) {
                tw.model->copyLoss(ops, sl.partLosses[std::size_t(part)]);
                tw.model->backwardPart(c, part, parts);
            } else if (tw.buckets) {
                tw.buckets->begin();
                tw.model->backwardPart(c, part, parts, [&](Parameter& p) { tw.buckets->ready(p); });
            } else {
                tw.model->backwardPart(c, part, parts);
            }
        }
    }
};

void TowerSet::issue(const Batch& batch, std::int64_t globalStep, double lr)
{
    const Shape& in = model().inputShape();
    if (m_flight.size() >= kMaxInFlight)
        throw InvalidArgument("issue: " + std::to_string(m_flight.size()) +
                              " steps are in flight already; collect() the oldest first");
    if (batch.towers != size())
        throw InvalidArgument("the batch is split for " + std::to_string(batch.towers) +
                              " towers, the trainer has " + std::to_string(size()));
    const std::int64_t slices = std::int64_t(size()) * m_opt.accumulate;
    if (batch.labels.rank() != 1 || batch.labels.dim(0) < slices ||
        batch.labels.dim(0) % slices != 0)
        throw ShapeError("batch labels " + batch.labels.shape().str() + " do not split into " +
                         std::to_string(size()) + " equal tower slices" +
                         (m_opt.accumulate > 1
                              ? " of " + std::to_string(m_opt.accumulate) + " equal parts"
                              : std::string()));
    const bool drawn = !batch.draws.empty(); // the towers preprocess their held set
    if (drawn) {
        if (m_towers.front()->source.empty())
            throw InvalidArgument("the batch carries draws (LoaderOptions::drawsOnly) but the "
                                  "towers hold no training set (holdTrainingSet)");
        requireShape(batch.draws, Shape{batch.labels.dim(0), preprocess::kDrawColumns},
                     "batch draws");
    } else {
        requireShape(batch.images, Shape{batch.labels.dim(0), in[0], in[1], in[2]}, "batch images");
    }

    Issued issued;
    issued.step = globalStep;
    issued.slot = m_nextSlot;
    m_nextSlot ^= 1;
    // A step issued after one that was not finite is not taken: where that is known already (the
    // host checked), it does not run; where it is not (gated), its flag starts as the one before
    // it, so that its updates are skipped on the device as well (collect() says so).
    if (!m_flight.empty() && !m_gated && (m_flight.back().nonFinite || m_flight.back().discarded)) {
        issued.discarded = true;
        m_flight.push_back(issued);
        return;
    }
    const bool behind = !m_flight.empty(); // a gated step issued before this one is in flight
    m_nonFinite = false;
    runOnAll([&](int t) {
        Tower& tw = *m_towers[std::size_t(t)];
        Ops& ops = *tw.ops;
        TowerStep s{
            t,
            tw,
            tw.slots[issued.slot],
            issued.slot,
            ops,
            ExecContext{ops, true, std::uint64_t(globalStep), std::uint64_t(m_firstTower + t)},
            globalStep,
            lr,
            drawn,
            behind};
        issueOnTower(s, batch);
    });
    // A tower whose capture failed issued its step op by op: from the next step, every tower does.
    for (std::size_t t = 0; t < m_towers.size(); ++t) {
        std::string why = std::exchange(m_towers[t]->graphFailure, {});
        if (why.empty() || !m_graphs) continue;
        m_graphs = false;
        m_graphText =
            "issued op by op: capturing " +
            (m_globalTowers > 1 ? "tower " + std::to_string(m_firstTower + int(t)) + "'s step"
                                : std::string("a step")) +
            " failed (" + why + ")";
        dropGraphs();
    }
    if (!m_gated) {
        issued.nonFinite = m_nonFinite;
        // A tower that finished first waited for the others until the last one was done.
        auto last = m_towers.front()->finished;
        for (const auto& tw : m_towers) last = std::max(last, tw->finished);
        for (auto& tw : m_towers)
            tw->slots[issued.slot].times.commMs += msBetween(tw->finished, last);
    }
    m_flight.push_back(issued);
}

void TowerSet::issueOnTower(TowerStep& s, const Batch& batch)
{
    Tower& tw = s.tw;
    StepSlot& sl = s.sl;
    Ops& ops = s.ops;
    if (!s.behind) ops.clearMarks();
    // Forward updates the buffers (batch-norm statistics); keep them to undo a diverged step
    // (copied where they live, among the tower's ops).
    const auto& params = tw.model->parameters();
    sl.savedBuffers.resize(params.size());
    for (std::size_t i = 0; i < params.size(); ++i) {
        const Tensor& v = params[i]->value;
        if (params[i]->trainable) continue;
        if (v.device() == ops.device()) {
            ops.copy(v, sl.savedBuffers[i]);
        } else { // host bookkeeping of a GPU replica
            Tensor::ensure(sl.savedBuffers[i], v.shape(), v.dtype(), v.device());
            sl.savedBuffers[i].copyFrom(v);
        }
    }
    // The step's split, in device time (events on a GPU's stream; the host's clock for CPU
    // towers), read once the step is done.
    sl.dataMark = ops.mark();
    placeSlice(s, batch);
    if (m_gated)
        issueGated(s);
    else
        issueSynchronised(s);
}

void TowerSet::placeSlice(TowerStep& s, const Batch& batch)
{
    Tower& tw = s.tw;
    StepSlot& sl = s.sl;
    Ops& ops = s.ops;
    const int t = s.t;
    const bool drawn = s.drawn;
    Tensor& images = s.images;
    Tensor& labels = s.labels;
    images = drawn ? Tensor() : batch.towerImages(t);
    labels = batch.towerLabels(t);
    if (!drawn && tw.model->dtype() != images.dtype()) images = images.to(tw.model->dtype());
    const bool onDevice = !tw.device.isHost();
    // A gated step's copies to the device may run after the caller has moved on to the next
    // batch, whose memory may be this one's: they go from the tower's own page-locked copy.
    const auto ownCopy = [&](Tensor& view, Tensor& own) {
        if (!m_gated) return;
        stagePinned(view, own);
        view = own;
    };
    // On the device, a gated step's slice goes to its slot's own buffers, copied beside the
    // step in flight before it (Ops::prefetch: the slot's previous step is done); another
    // step's to the tower's, on its stream.
    const auto toDevice = [&](const Tensor& host, Tensor& slotBuffer, Tensor& towerBuffer) {
        if (m_gated) {
            ops.prefetch(host, slotBuffer);
            return slotBuffer;
        }
        ops.upload(host, towerBuffer);
        return towerBuffer;
    };
    if (onDevice) { // the slice goes to the tower's GPU
        // Checked here: the GPU's loss does not stop to look (a bad label would make it NaN).
        checks::labelsInRange(labels, tw.model->numClasses());
        ownCopy(labels, sl.labels);
        if (!drawn) {
            ownCopy(images, sl.images);
            images = toDevice(images, sl.deviceImages, tw.images);
        }
        labels = toDevice(labels, sl.deviceLabels, tw.labels);
    }
    // A gated step's scalars (learning rate, bias corrections, the moving average's keep,
    // dropout's step) go beside its slice, and its ops read them on the device.
    if (m_gated) {
        StepScalars values;
        tw.optimizer->fillScalars(values, s.lr);
        if (m_ema) m_ema->fillScalars(values, s.globalStep + 1);
        values.values[StepScalars::DropoutStep] = double(s.globalStep);
        if (sl.scalars.empty()) sl.scalars = Tensor::pinned({StepScalars::kCount}, DType::Float64);
        std::memcpy(sl.scalars.raw(), values.values, sizeof values.values);
        ops.prefetch(sl.scalars, sl.deviceScalars);
        s.ctx.scalars = &sl.deviceScalars;
    }
    if (drawn) { // the slice's images made where the tower holds the set, from its draws
        Tensor draws = batch.towerDraws(t);
        if (onDevice) {
            ownCopy(draws, sl.draws);
            draws = toDevice(draws, sl.deviceDraws, tw.draws);
        }
        ops.preprocessImages(m_heldRecipe, tw.source, draws, tw.images);
        images = tw.images;
    }
}

void TowerSet::issueGated(TowerStep& s)
{
    Tower& tw = s.tw;
    StepSlot& sl = s.sl;
    Ops& ops = s.ops;
    const int t = s.t;
    const bool behind = s.behind, drawn = s.drawn;
    const std::int64_t globalStep = s.globalStep;
    const double lr = s.lr;
    const Tensor& images = s.images;
    const Tensor& labels = s.labels;
    // A gated step's flag starts clear, or as the one of the step in flight before it
    // (sticky: a skipped step before this one skips this one too).
    const auto resetFlag = [&] {
        if (behind) {
            ops.copy(tw.slots[s.slot ^ 1].flag, sl.flag);
            return;
        }
        if (tw.flagZero.empty()) {
            tw.flagZero = Tensor::pinned({1}, tw.model->dtype());
            std::memset(tw.flagZero.raw(), 0, tw.flagZero.bytes());
        }
        ops.upload(tw.flagZero, sl.flag);
    };
    // A gated step's update, after its averages: the flag set where any of them is not
    // finite, the updates gated by it, the flag and the loss on their way to the host.
    const auto gatedUpdate = [&](const std::vector<Tensor>& averaged, bool marks) {
        for (const Tensor& v : averaged) ops.flagNonFinite(v, sl.flag);
        if (marks) sl.commMark = ops.mark();
        tw.optimizer->step(ops, tw.model->parameters(), lr, sl.flag, sl.deviceScalars);
        if (t == 0) sl.copyGradSumSquares(ops, *tw.optimizer); // the same on every tower
        if (m_ema && t == 0) // on tower 0's device, by its ops (no copy to the host)
            m_ema->update(ops, tw.model->parameters(), globalStep + 1, sl.flag, sl.deviceScalars);
        if (marks) sl.updateMark = ops.mark();
        if (sl.flagHost.empty()) sl.flagHost = Tensor::pinned({1}, sl.flag.dtype());
        ops.download(sl.flag, sl.flagHost);
        tw.model->copyLoss(ops, sl.lossCopy);
    };
    // The averages stay where the towers compute: every tower flags all of them on its
    // GPU (they are bitwise the same on every tower, so every tower's flag is too) and its
    // update kernels read the flag, so a step is skipped there without the host waiting
    // (collect() reads the flag). One tower has nothing to average: its gradients and
    // statistics are the means. From its forward to its update, a tower's step is the
    // same work every step (its values that change come in the slot's tensors): a
    // capture replays it (graphs), with the collectives launched between its parts.
    resetFlag();
    sl.startedMs = 0;
    sl.computeMark = ops.mark();
    // A replay runs the buckets' collectives, timed from here.
    if (tw.buckets) tw.buckets->begin();
    // The key of a capture: what the step's work depends on besides the slot's values,
    // which input buffer included (the images preprocessed from draws are the tower's,
    // a batch's images the slot's: a capture bakes one address or the other).
    const std::string shapes =
        images.describe() + " " + labels.describe() + (drawn ? " preprocessed here" : " as given");
    const bool captured = issueCaptured(tw, sl, shapes, [&](bool marks) {
        s.forwardBackward(m_opt.accumulate);
        if (marks) sl.backwardMark = ops.mark();
        const std::vector<Tensor>* averaged = &tw.reduce;
        if (tw.buckets) {
            if (marks) sl.startedMs = tw.buckets->collectiveMs(); // during backward
            averaged = &tw.buckets->finish();
        } else {
            collectAveraged(tw.model->parameters(), tw.reduce);
            if (m_globalTowers > 1) // device collectives (gated without buckets)
                ops.outsideCapture(
                    [this, t, &tower = tw] { m_comm->allReduceMean(t, tower.reduce); });
        }
        gatedUpdate(*averaged, marks);
    });
    // A replayed step's split cannot look inside it: all of it is compute, but the time
    // in the communicator's calls between its parts.
    if (captured) {
        sl.backwardMark = sl.commMark = sl.updateMark = ops.mark();
        if (tw.buckets) sl.startedMs = tw.buckets->collectiveMs();
    }
    sl.endMark = ops.mark(); // collect() waits for it
}

void TowerSet::issueSynchronised(TowerStep& s)
{
    Tower& tw = s.tw;
    StepSlot& sl = s.sl;
    Ops& ops = s.ops;
    const int t = s.t;
    const std::int64_t globalStep = s.globalStep;
    const double lr = s.lr;
    const bool onDevice = !tw.device.isHost();
    const auto& params = tw.model->parameters();
    sl.computeMark = ops.mark();
    s.forwardBackward(m_opt.accumulate); // the loss read where the host waits anyway
    sl.backwardMark = ops.mark();
    if (!onDevice) sl.loss = sl.lossOfParts(tw.model->readLoss());
    // The synchronisation point: average the gradients, and the batch-norm running
    // statistics (each tower saw its own slice) so that the replicas stay identical.
    const std::vector<Tensor>* averaged = &tw.reduce;
    sl.startedMs = 0; // of the buckets started during backward
    if (tw.buckets) {
        sl.startedMs = tw.buckets->collectiveMs();
        averaged = &tw.buckets->finish();
    } else {
        collectAveraged(tw.model->parameters(), tw.reduce);
    }
    // Divergence is caught before the update: each tower checks its share of the averages
    // (and its own loss), then all agree through a barrier and skip the update together.
    bool finite = true;
    if (m_globalTowers > 1 && !tw.buckets) {
        if (m_deviceCollectives) {
            m_comm->allReduceMean(t, tw.reduce);
        } else {
            collective(t, tw.reduce, [&](std::span<Tensor> values) {
                m_comm->allReduceMean(t, values);
                finite = finiteShare(values, t, size()); // on the host copies
            });
        }
    }
    if (m_deviceCollectives || tw.buckets || m_globalTowers == 1)
        finite = finiteShare(*averaged, t, size());
    if (onDevice) {                                    // the host has waited for the GPU
        if (!sl.partLosses.empty()) ops.synchronize(); // the parts' copies
        sl.loss = sl.lossOfParts(tw.model->readLoss());
    }
    if (!std::isfinite(sl.loss.total()) || !finite) m_nonFinite = true;
    m_comm->barrier(t);
    sl.commMark = ops.mark();
    if (!m_nonFinite) {
        tw.optimizer->step(ops, tw.model->parameters(), lr);
        if (t == 0) sl.copyGradSumSquares(ops, *tw.optimizer); // the same on every tower
        if (m_ema && m_ema->onHost())                          // CPU towers share the work
            m_ema->update(tw.model->parameters(), globalStep + 1, t, size());
        else if (m_ema && t == 0)
            m_ema->update(ops, tw.model->parameters(), globalStep + 1);
    }
    sl.updateMark = ops.mark();
    ops.synchronize();
    if (m_nonFinite) sl.restoreBuffers(params);
    sl.times = sl.timesFrom(ops);
    tw.finished = Clock::now();
}

TowerStepResult TowerSet::collect()
{
    if (m_flight.empty()) throw InvalidArgument("collect: no step is in flight (issue() one)");
    const Issued issued = m_flight.front();
    if (issued.discarded) // only ever behind a step that was not finite, collected with it
        throw Error("collect: a discarded step at the head of the steps in flight");
    bool nonFinite = issued.nonFinite;
    if (m_gated) {
        const bool behind = m_flight.size() > 1; // a later step, issued with this one's flag
        const bool acrossProcesses =
            m_deviceCollectives && m_opt.processes && m_opt.processes->size() > 1;
        m_nonFinite = false;
        runOnAll([&](int t) {
            Tower& tw = *m_towers[std::size_t(t)];
            StepSlot& sl = tw.slots[issued.slot];
            Ops& ops = *tw.ops;
            // The tower's one wait for its step. Across processes, the step's collectives wait
            // for every process; one that failed leaves them waiting for ever, so the wait
            // watches for its failure (announced to the group), which ends it.
            if (acrossProcesses)
                waitWatching(ops, sl.endMark, [this] { m_opt.processes->throwIfFailed(); });
            else
                ops.waitFor(sl.endMark);
            sl.loss = sl.lossOfParts(sl.lossCopy.value());
            sl.times = sl.timesFrom(ops);
            const bool skipped = sl.flagHost.at(0) != 0; // the updates left everything as it was
            if (skipped) {
                tw.optimizer->skipped();
                if (behind) { // so did the later step's, by the same flag: let it finish
                    ops.synchronize();
                    tw.optimizer->skipped();
                }
                sl.restoreBuffers(tw.model->parameters());
            }
            // A loss that is not finite with finite gradients (which no finite logits make) is
            // reported, but the update has been made, alike on every tower.
            if (skipped || !std::isfinite(sl.loss.total())) m_nonFinite = true;
        });
        nonFinite = m_nonFinite;
        // Whether the later step was skipped is what this one's flag said: the same everywhere.
        if (behind && m_towers.front()->slots[issued.slot].flagHost.at(0) != 0)
            m_flight[1].discarded = true;
    }
    m_flight.pop_front();
    TowerStepResult r;
    while (!m_flight.empty() && m_flight.front().discarded) {
        m_flight.pop_front();
        ++r.discarded;
    }

    // Every global tower's loss and times, in global order (the same sums as one process of
    // every tower computes).
    std::vector<std::string> shares;
    std::string mine;
    for (const auto& tw : m_towers) {
        const StepSlot& sl = tw->slots[issued.slot];
        putBytes(mine, sl.loss.total());
        putBytes(mine, sl.loss.crossEntropy);
        putBytes(mine, sl.times);
    }
    if (m_opt.processes && m_opt.processes->size() > 1) {
        std::string all(mine.size() * std::size_t(m_opt.processes->size()), '\0');
        m_opt.processes->allGather(mine.data(), mine.size(), all.data()); // one exchange
        for (int p = 0; p < m_opt.processes->size(); ++p)
            shares.push_back(all.substr(std::size_t(p) * mine.size(), mine.size()));
    } else {
        shares.push_back(std::move(mine));
    }
    for (const std::string& share : shares) {
        ByteReader reader(share, "a process's losses and step times");
        for (int t = 0; t < size(); ++t) {
            r.loss += reader.take<double>();
            r.crossEntropy += reader.take<double>();
            r.towers.push_back(reader.take<TowerTimes>());
        }
    }
    r.step = issued.step;
    r.loss /= m_globalTowers;
    r.crossEntropy /= m_globalTowers;
    r.finite = !nonFinite;
    if (r.finite && m_towers.front()->optimizer->measuresGradNorm())
        r.gradNorm = std::sqrt(m_towers.front()->slots[issued.slot].gradSumSquares.at(0));
    return r;
}

} // namespace towers::engine
