// Where a Trainer's run starts (trainer.h): a new run, a resume from the run's newest checkpoint
// that loads, a checkpoint restored, the weights a run starts from (initFrom), the state rank 0
// shares with the other processes; and the checkpoints it writes and rotates. The run loop is in
// trainer.cpp.
#include "engine/train/trainer.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <new>

#include <nlohmann/json.hpp>

#include "engine/cpu/host_memory.h"
#include "engine/dist/process_state.h"
#include "engine/errors.h"
#include "engine/train/checkpoint.h"
#include "engine/train/trainer_parts.h"

namespace towers::engine {

namespace {

// Weights that are not finite must never reach a checkpoint (they would be the "last good" one).
void requireFiniteWeights(const Model& model, std::int64_t step)
{
    for (const auto* p : model.parameters())
        if (!allFinite(p->value.onHost()))
            throw DivergedError("model diverged: weight '" + p->name + "' is not finite at step " +
                                std::to_string(step));
}

// Out of memory reading the checkpoint a run starts from, in words (std::bad_alloc's own text
// says nothing to a user): `how` it is read beside the towers, `whatWouldFit`: what to change.
Error outOfMemoryReading(const std::filesystem::path& file, const char* how,
                         const char* whatWouldFit)
{
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(file, ec);
    return Error("out of memory reading " + quotedPath(file) +
                 (ec ? std::string() : " (" + cpu::byteText(std::int64_t(bytes)) + ")") + how +
                 ": " + whatWouldFit);
}

} // namespace

void Trainer::shareStart()
{
    if (!m_group || m_group->size() == 1) return;
    // How the run starts, then the state rank 0 restored (when it restored one): its names, dtypes
    // and shapes, then a tensor at a time (no process holds a copy of it all).
    nlohmann::json start;
    NamedTensors state;
    if (m_group->rank() == 0) {
        start = {{"runId", m_config.runId},
                 {"step", m_step.load()},
                 {"restored", m_lastCheckpointStep >= 0},
                 {"initialised", m_initialised},
                 {"resumed", m_start == Start::Resumed}};
        if (m_lastCheckpointStep >= 0 || m_initialised) {
            for (const auto* p : m_towers->model().parameters())
                state.emplace_back(p->name, p->value);
            for (auto& t : m_towers->optimizer().state(m_towers->model().parameters()))
                state.push_back(std::move(t));
            if (const Ema* ema = m_towers->ema())
                for (auto& t : ema->state()) state.push_back(std::move(t));
        }
    }
    start = nlohmann::json::parse(m_group->broadcastString(start.dump(), 0));
    const std::string entries = m_group->broadcastString(packTensorEntries(state), 0);
    if (m_group->rank() == 0) {
        for (const auto& [name, t] : state) {
            Tensor h = t.onHost(); // the live tensor itself on host towers
            if (h.bytes()) m_group->broadcast(h.raw(), h.bytes(), 0);
        }
        return;
    }
    m_config.runId = start.at("runId").get<std::string>();
    m_start = start.at("resumed").get<bool>() ? Start::Resumed : Start::New;
    const bool restored = start.at("restored").get<bool>();
    if (!restored && !start.at("initialised").get<bool>()) return;
    TowerSet::StateSource source;
    source.tensors = unpackTensorEntries(entries);
    source.read = [this, &source](const SafeTensorFn& take) {
        for (const SafeTensorEntry& e : source.tensors) {
            Tensor t(e.shape, e.dtype);
            if (t.bytes()) m_group->broadcast(t.raw(), t.bytes(), 0);
            take(e.name, t);
        }
    };
    m_towers->loadState(source);
    if (!restored) {
        log("took the initial weights from rank 0 (" + m_config.initFrom + ")");
        return;
    }
    m_step = start.at("step").get<std::int64_t>();
    m_lastCheckpointStep = m_step.load();
    log("took the state of step " + std::to_string(m_step.load()) + " from rank 0");
}

std::int64_t Trainer::restore(const std::filesystem::path& file, const VerifiedCheckpoint* verified)
{
    // A resume keeps the run's towers and batch.
    constexpr const char* fits = "more free memory would have room for it, or a new run started "
                                 "from it (--init-from) with fewer towers";
    constexpr const char* how = " into the towers, a tensor at a time";
    try {
        return restoreFrom(file, verified);
    } catch (const std::bad_alloc&) {
        throw outOfMemoryReading(file, how, fits);
    } catch (const FileOutOfMemory&) {
        throw outOfMemoryReading(file, how, fits);
    }
}

std::int64_t Trainer::restoreFrom(const std::filesystem::path& file,
                                  const VerifiedCheckpoint* verified)
{
    if (m_ran) throw InvalidArgument("restore() must come before run()");
    // Checked whole first, then read again into the towers: one tensor at a time both times, so
    // that a resume needs no more memory than the run it continues.
    VerifiedCheckpoint checked;
    if (!verified) {
        (void)verifyCheckpoint(file, &m_towers->model(), &checked);
        verified = &checked;
    }
    const CheckpointInfo& info = verified->info;
    TowerSet::StateSource state;
    state.tensors = verified->tensors;
    if (info.step > m_total)
        throw InvalidArgument("checkpoint '" + file.string() + "' is at step " +
                              std::to_string(info.step) + ", beyond this run's " +
                              std::to_string(m_total) + " steps");
    state.read = [&](const SafeTensorFn& take) { rereadCheckpoint(file, *verified, take); };
    try {
        m_towers->loadState(state);
    } catch (const InvalidArgument& e) {
        throw InvalidArgument("checkpoint '" + file.string() + "': " + e.what());
    }
    m_step = info.step;
    m_lastCheckpointStep = info.step;
    log("restored " + file.string() + " at step " + std::to_string(info.step));
    // Checkpoints are float32 whatever the precision they were trained in: a run may change it.
    const std::string before = trainedPrecision(info), now(precisionName(m_config.precision));
    if (before != now)
        log("precision: " + now + " from step " + std::to_string(info.step) +
            " on (the run so far: " + before + ")");
    return info.step;
}

void Trainer::startNew(bool setAsideExisting)
{
    if (m_ran) throw InvalidArgument("startNew() must come before run()");
    if (m_start != Start::Unset) throw InvalidArgument("the trainer's start is already decided");
    startFresh(setAsideExisting);
}

void Trainer::startFresh(bool setAsideExisting)
{
    // The weights first: a checkpoint that does not fit refuses the run before anything in the
    // folder is moved, and one in the folder's own checkpoints/ is read before it is set aside.
    if ((!m_group || m_group->rank() == 0) && !m_config.initFrom.empty())
        initialiseFrom(m_config.initFrom);
    if (m_dir) beginNewRun(setAsideExisting);
    shareStart();
}

namespace {

// Said where the weights a run starts from (TrainConfig::initFrom) run out of memory.
constexpr const char* kInitFromHow = ", whose weights are held beside the towers";
constexpr const char* kInitFromFits = "fewer towers or more free memory would have room for them";

StartingWeights readStartingWeights(const std::filesystem::path& file, const Model& model,
                                    const std::vector<std::string>& classNames,
                                    const Shape& imageShape)
{
    // Checked, then only the weights taken read again: one tensor at a time both times.
    VerifiedCheckpoint verified;
    const CheckpointInfo info = verifyCheckpoint(file, nullptr, &verified);
    const std::vector<SafeTensorEntry>& entries = verified.tensors;
    const std::string from = "cannot start from '" + file.string() + "': ";
    if (info.model != model.name())
        throw InvalidArgument(from + "it is a checkpoint of " +
                              (info.model.empty() ? "an unnamed model" : info.model) +
                              ", this run trains " + model.name());
    std::map<std::string, const SafeTensorEntry*> inFile;
    for (const SafeTensorEntry& e : entries) inFile[e.name] = &e;
    const bool sameClasses = info.classNames == classNames;
    std::vector<Parameter*> head =
        sameClasses ? std::vector<Parameter*>{} : model.classifierParameters();
    const auto isHead = [&](const Parameter* p) {
        return std::find(head.begin(), head.end(), p) != head.end();
    };
    // The tensor of the file each parameter starts from: its average where there is one.
    bool averages = false;
    std::map<std::string, std::string> taken; // the file's name -> the parameter's
    for (Parameter* p : model.parameters()) {
        if (isHead(p)) continue;
        const bool averaged = inFile.count("ema." + p->name) > 0;
        const std::string name = averaged ? "ema." + p->name : p->name;
        const auto it = inFile.find(name);
        if (it == inFile.end()) throw InvalidArgument(from + "it has no tensor '" + p->name + "'");
        const SafeTensorEntry& t = *it->second;
        if (t.shape != p->value.shape() || t.dtype != p->value.dtype()) {
            std::string images;
            if (info.imageShape.rank() > 0 && info.imageShape != imageShape)
                images = " (it was trained on images of " + info.imageShape.str() +
                         ", this dataset's are " + imageShape.str() + ")";
            throw InvalidArgument(from + "its tensor '" + p->name + "' is " + t.describe() +
                                  ", this run's model has " + p->value.describe() + images);
        }
        averages = averages || averaged;
        taken[name] = p->name;
    }
    std::map<std::string, Tensor> read; // the parameter's name -> its starting value
    rereadCheckpoint(file, verified, [&](const std::string& name, Tensor& t) {
        if (const auto it = taken.find(name); it != taken.end()) read[it->second] = t;
    });
    StartingWeights out;
    for (Parameter* p : model.parameters()) {
        if (isHead(p)) { // this run's own draw (the seed's)
            out.weights.emplace_back(p->name, p->value.copyTo(Device::host()));
            continue;
        }
        // (Every tensor taken was read: rereadCheckpoint refuses a file that changed.)
        out.weights.emplace_back(p->name, read.at(p->name));
    }
    std::string headNote;
    if (!head.empty()) {
        headNote = "; the classifier (";
        for (std::size_t i = 0; i < head.size(); ++i) headNote += (i ? ", " : "") + head[i]->name;
        headNote += ") starts from this run's own draw, for " + std::to_string(classNames.size()) +
                    " classes instead of " + std::to_string(info.classNames.size());
    }
    out.note = "weights from " + file.string() + " (" + info.model + " at step " +
               std::to_string(info.step) + " on " +
               (info.dataset.empty() ? std::string("an unnamed dataset") : info.dataset) + ", " +
               (averages ? "its moving averages" : "its weights") + ")" + headNote;
    return out;
}

} // namespace

StartingWeights startingWeights(const std::filesystem::path& file, const Model& model,
                                const std::vector<std::string>& classNames, const Shape& imageShape)
{
    try {
        return readStartingWeights(file, model, classNames, imageShape);
    } catch (const std::bad_alloc&) {
        throw outOfMemoryReading(file, kInitFromHow, kInitFromFits);
    } catch (const FileOutOfMemory&) {
        throw outOfMemoryReading(file, kInitFromHow, kInitFromFits);
    }
}

void Trainer::initialiseFrom(const std::filesystem::path& file)
{
    Model& model = m_towers->model();
    std::string note;
    try {
        const StartingWeights start =
            startingWeights(file, model, m_data.classNames, m_data.imageShape);
        m_towers->loadState(start.weights, m_towers->optimizer().state(model.parameters()), {});
        note = start.note;
    } catch (const std::bad_alloc&) { // the towers taking them
        throw outOfMemoryReading(file, kInitFromHow, kInitFromFits);
    }
    log(note);
    m_initialised = true;
}

void Trainer::beginNewRun(bool setAsideExisting)
{
    RunDirectory& dir = runDirectory();
    if (dir.holdsRun()) {
        if (!setAsideExisting) {
            std::string what;
            for (const auto& w : dir.runContents()) what += (what.empty() ? "" : ", ") + w;
            throw RunFolderHoldsRun("the folder '" + dir.root().string() +
                                    "' already holds a run (" + what + "); nothing was changed");
        }
        log("moved the earlier run's files to " + setAsideRun().string());
    }
    m_config.runId = newRunId();
    m_start = Start::New;
}

std::filesystem::path Trainer::setAsideRun()
{
    RunDirectory& dir = runDirectory();
    // A start (initFrom) from the earlier run's own checkpoints is recorded where it goes.
    const std::filesystem::path init(m_config.initFrom);
    bool initInside = false;
    if (!m_config.initFrom.empty()) {
        std::error_code a, b;
        const auto from = std::filesystem::weakly_canonical(init.parent_path(), a);
        const auto here = std::filesystem::weakly_canonical(dir.checkpointDir(), b);
        initInside = !a && !b && from == here;
    }
    const auto folder = dir.setAside();
    if (initInside) m_config.initFrom = (folder / "checkpoints" / init.filename()).string();
    return folder;
}

std::optional<std::int64_t> Trainer::resumeFromNewest(bool setAsideUnloadable)
{
    if (m_ran) throw InvalidArgument("resumeFromNewest() must come before run()");
    if (m_start != Start::Unset) throw InvalidArgument("the trainer's start is already decided");
    if (!m_dir) { // rank 0 decides
        shareStart();
        if (m_lastCheckpointStep >= 0) return m_step.load();
        return std::nullopt;
    }
    const auto step = resumeHere(setAsideUnloadable);
    shareStart();
    return step;
}

std::optional<std::int64_t> Trainer::resumeHere(bool setAsideUnloadable)
{
    RunDirectory& dir = *m_dir;
    std::vector<std::string> skipped;
    VerifiedCheckpoint verified;
    const auto found =
        dir.newestGoodCheckpoint(&m_towers->model(), &skipped, m_config.runId, &verified);
    for (const auto& s : skipped) log("skipping a checkpoint: " + s);
    if (found) {
        m_start = Start::Resumed;
        return restore(found->path, &verified);
    }
    // With no checkpoint of its own, the run starts at step 0 from the weights it started from
    // (a run killed before its first checkpoint), when it started from a file: that file again.
    const auto startAgain = [this] {
        if (m_config.initFrom.empty()) return;
        const std::string why = "this run started from " + quotedPath(m_config.initFrom) +
                                " (--init-from) and has no checkpoint of its own, so it starts "
                                "from that file again, which ";
        const std::string instead = "; nothing in the run's folder was changed (a new run, "
                                    "--overwrite, may start from another file)";
        try {
            initialiseFrom(m_config.initFrom);
        } catch (const IoError& e) {
            throw IoError(why + "cannot be read: " + e.what() + instead);
        } catch (const InvalidArgument& e) {
            throw InvalidArgument(why + "no longer fits: " + e.what() + instead);
        }
    };
    if (skipped.empty()) {
        startAgain();
        m_start = Start::Resumed;
        return std::nullopt;
    }
    if (!setAsideUnloadable) {
        std::string list;
        for (const auto& s : skipped) list += "\n  " + s;
        throw NoCheckpointLoads("no checkpoint in '" + dir.checkpointDir().string() +
                                "' loads, so the run cannot " +
                                "continue; nothing was changed or deleted:" + list);
    }
    // The weights it started from first: a file that does not fit refuses the run before
    // anything in the folder is moved.
    startAgain();
    const auto folder = setAsideRun();
    log("no checkpoint loads: the run's files were moved to " + folder.string() +
        "; starting over at step 0");
    m_config.runId = newRunId();
    m_start = Start::New;
    return std::nullopt;
}

std::filesystem::path Trainer::writeCheckpoint()
{
    const std::int64_t s = m_step.load();
    if (!m_dir) { // rank 0 writes it
        m_lastCheckpointStep = s;
        return {};
    }
    requireFiniteWeights(m_towers->model(), s);
    CheckpointInfo info;
    info.dataset = m_config.dataset;
    info.classNames = m_data.classNames;
    info.preprocessing = m_data.preprocessing;
    info.imageShape = m_data.imageShape;
    info.imageFit = m_data.imageFit;
    info.step = s;
    info.epoch = double(s) / double(m_stepsPerEpoch);
    info.optimizer = m_towers->optimizer().name();
    info.config = m_config.toJson();
    const Ema* ema = m_towers->ema();
    const auto path = m_dir->checkpointPath(s);
    {
        // GPU towers' tensors are copied to the host for it: gone before the read-back.
        const Checkpoint c =
            makeCheckpoint(m_towers->model(), std::move(info), ema ? ema->state() : NamedTensors{},
                           m_towers->optimizer().state(m_towers->model().parameters()));
        engine::writeCheckpoint(path, c);
    }
    // Read back before anything older may go: rotation never leaves the run without a checkpoint
    // that loads. One tensor at a time: no second copy of the run's state.
    try {
        (void)verifyCheckpoint(path, &m_towers->model());
    } catch (const Error& e) {
        throw IoError(
            std::string(
                "the checkpoint just written could not be read back to check it (the older ones "
                "are kept, and a resume checks it again): ") +
            e.what());
    }
    m_rotatable[path] = !m_config.runId.empty();
    m_lastCheckpointStep = s;
    rotateCheckpoints(s);
    if (m_observer) m_observer->onCheckpoint(path, s);
    const auto& best = bestEvaluationSoFar();
    if (best && best->step == s) {
        char accuracy[64];
        std::snprintf(accuracy, sizeof accuracy, "%.3f", best->precisionAt1);
        log("wrote checkpoint " + path.string() + ", kept as the run's best (" + m_evalSet +
            " precision @ 1 = " + accuracy + ")");
    } else {
        log("wrote checkpoint " + path.string());
    }
    return path;
}

bool Trainer::rotatable(const std::filesystem::path& file)
{
    if (const auto it = m_rotatable.find(file); it != m_rotatable.end()) return it->second;
    bool ours = false;
    try {
        // The run id its configuration records, "" for none.
        const std::string id = checkpointConfigField(verifyCheckpoint(file), "runId", "");
        ours = !id.empty() && id == m_config.runId;
    } catch (const Error&) {
        ours = false; // a file that does not read is never deleted
    }
    m_rotatable[file] = ours;
    return ours;
}

const std::optional<EvaluationMark>& Trainer::bestEvaluationSoFar()
{
    if (!m_bestRead && m_dir) {
        const auto marks = readEvaluations(m_dir->evalPath());
        m_best = bestEvaluation(marks);
        m_patience = patienceCount(marks, m_config.minDelta);
        m_bestRead = true;
    }
    return m_best;
}

void Trainer::rotateCheckpoints(std::int64_t newest)
{
    if (m_config.keepCheckpoints < 1) throw InvalidArgument("keepCheckpoints: must be at least 1");
    // The newest keepCheckpoints (this one among them), and the best's besides where it is older:
    // a best among the newest takes its place in their count.
    const auto& best = bestEvaluationSoFar();
    std::vector<CheckpointFile> ours;
    for (const auto& c : m_dir->checkpoints())
        if (c.step < newest && rotatable(c.path)) ours.push_back(c);
    const std::size_t keepOlder = std::size_t(m_config.keepCheckpoints - 1);
    for (std::size_t i = 0; i + keepOlder < ours.size(); ++i) {
        if (best && best->step == ours[i].step) continue;
        m_dir->removeCheckpoint(ours[i].path);
        m_rotatable.erase(ours[i].path);
    }
}
} // namespace towers::engine
