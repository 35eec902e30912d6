#include "engine/train/training_session.h"

#include <algorithm>
#include <cstdio>

#include "engine/backends.h"
#include "engine/data/dataset_content.h"
#include "engine/data/validation_split.h"
#include "engine/dist/process_state.h"
#include "engine/gpu/gpu_backend.h"
#include "engine/models/registry.h"
#include "engine/train/memory_need.h"
#include "engine/train/recipe.h"
#include "engine/train/run_lock.h"
#include "engine/train/tower_set.h"

namespace towers::engine {

LoaderOptions loaderOptionsFor(const TrainConfig& c, ProcessGroup* processes)
{
    LoaderOptions lo;
    lo.towers = c.towers;
    if (processes) {
        lo.globalTowers = processes->size() * c.towers;
        lo.firstTower = processes->rank() * c.towers;
    }
    lo.batchPerTower = int(c.examplesPerTowerStep());
    lo.seed = c.seed;
    lo.augment = c.augmentation != "none";
    lo.balanced = c.sampling == "balanced";
    lo.pinned = !isHostBackend(c.backend);
    return lo;
}

namespace {

// Removes a folder this session made when nothing but the lock file and an empty checkpoints/
// folder is in it.
void discardIfUnused(const std::filesystem::path& folder)
{
    namespace fs = std::filesystem;
    std::error_code ec;
    for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name == RunLock::kFileName) continue;
        if (name == "checkpoints" && fs::is_empty(it->path(), ec)) continue;
        return;
    }
    if (ec) return;
    fs::remove(folder / "checkpoints", ec);
    fs::remove(folder / RunLock::kFileName, ec);
    fs::remove(folder, ec);
}

// What identifies a dataset's content, from its record (datasetContent): every process of a run
// must train on the same examples.
std::string fingerprint(const Dataset& d, const std::string& content)
{
    return "dataset " + d.name + "\n" + datasetContentLines(content);
}

// Whether GPU towers hold the training set (TrainConfig::gpuData): when it takes at most a quarter
// of the free memory of each GPU this process's towers use (only those: asking a GPU's free memory
// starts CUDA's context on it, which on a GPU of another process of the run would take its memory,
// or, in exclusive-process mode, the GPU itself). `note` says why not, when it matters.
bool holdOnGpus(const TrainConfig& c, const ProcessGroup* group, const ImageSet& train,
                std::string& note)
{
    if (isHostBackend(c.backend)) return false;
    if (c.gpuData == "off") {
        note = "the training images made on the host (gpuData off)";
        return false;
    }
    GpuBackend* gpu = cudaBackend();
    if (!gpu || gpu->deviceCount() < 1) return false;                    // the towers say why
    if (!c.gpus.empty() && int(c.gpus.size()) != c.towers) return false; // the towers say why
    const double bytes = double(train.pixels.size());
    std::vector<int> asked;
    for (int t = 0; t < c.towers; ++t) {
        const int g =
            gpuOfTower(c.gpus, c.towers, group ? group->localRank() : 0, t, gpu->deviceCount());
        if (g < 0 || g >= gpu->deviceCount()) return false; // the towers say why
        if (std::find(asked.begin(), asked.end(), g) != asked.end()) continue;
        asked.push_back(g);
        const double free = double(gpu->freeMemory(g));
        if (free <= 0) {
            note = "the training images made on the host: CUDA cannot say how much of GPU " +
                   std::to_string(g) + "'s memory is free";
            return false;
        }
        if (bytes > free / 4) {
            char text[160];
            std::snprintf(text, sizeof text,
                          "the training images made on the host: the set's %.1f MB are more than "
                          "a quarter of GPU %d's %.1f MB free",
                          bytes / 1e6, g, free / 1e6);
            note = text;
            return false;
        }
    }
    return true;
}

} // namespace

TrainingSession::TrainingSession(SessionOptions options, TrainerObserver* observer)
    : m_options(std::move(options))
{
    TrainConfig& c = m_options.config;
    c.validate();
    c.checkPrecision(); // before a folder is made: a bf16 run on a CPU without it makes none
    if (c.dataset.empty()) throw InvalidArgument("no dataset given");
    if (c.augmentation.empty()) c.augmentation = "default";
    if (c.augmentation != "default" && c.augmentation != "none")
        throw InvalidArgument("augmentation must be 'default' or 'none', got '" + c.augmentation +
                              "'");
    if (m_options.loaderWorkers < 0) throw InvalidArgument("loader workers must be >= 0");
    const bool writer = !m_options.processes || m_options.processes->rank() == 0;
    // A folder this session makes (a new one under the runs folder, or a named one that is not
    // there yet) is removed again when the run is refused before it wrote anything.
    bool made = false;
    if (m_options.newFolder && writer) {
        m_options.runDirectory = createNewFolder(m_options.runDirectory);
        made = true;
    } else if (writer) {
        std::error_code ec;
        made = !std::filesystem::exists(m_options.runDirectory, ec) && !ec;
    }
    try {
        build(observer);
    } catch (...) {
        m_trainer.reset();
        if (made) discardIfUnused(m_options.runDirectory);
        throw;
    }
}

void TrainingSession::build(TrainerObserver* observer)
{
    TrainConfig& c = m_options.config;
    // Refused at once when another process trains in the folder, before the dataset is loaded
    // (the trainer takes the lock for good below). Across processes, rank 0's folder.
    ProcessGroup* group = m_options.processes;
    if (!group || group->rank() == 0) {
        const RunLock probe = RunLock::acquire(m_options.runDirectory);
    }

    if (m_options.dataset) {
        if (m_options.dataset->name != c.dataset)
            throw InvalidArgument("the dataset given in memory is " + m_options.dataset->name +
                                  ", the configuration names " + c.dataset);
        m_dataset = m_options.dataset;
    } else {
        m_dataset = std::make_shared<const Dataset>(
            loadDatasetPreferring(c.dataset, c.dataDir, m_options.searchPath));
    }
    // One pass over the images for their checksums: what the run trains on, recorded with it.
    const std::string content = datasetContent(*m_dataset);
    // Another dataset on a process is the data's fault, not the command line's (exit 1).
    if (group) requireSameEverywhere(*group, fingerprint(*m_dataset, content), "dataset", false);
    // A resumed run goes on with the data it trained on, not another under the same name (imported
    // again, replaced on disk): its record says what that was (runs from before it have none).
    if (m_options.resume && !c.datasetContent.empty()) {
        if (const std::string change = datasetContentChange(c.datasetContent, content);
            !change.empty())
            throw Error("the dataset " + c.dataset + " (" + m_dataset->location.string() +
                        ") is not the one this run trained on: " + change +
                        ". Continue the run on the data it trained on, or start a new run on "
                        "this one (train --like the run)");
    }
    c.datasetContent = content;
    m_recipe = preprocessingFor(resolveModel(c.model, c.modelDefinition), *m_dataset);
    // The classifier has the dataset's classes (CIFAR-100's 100, an imported folder's).
    c.classes = int(m_dataset->classNames.size());
    // The images it trains on and the set it evaluates on while it trains.
    const ImageSet* train = &m_dataset->train;
    const ImageSet* evaluated = &m_dataset->test;
    if (c.validation > 0) {
        m_split = std::make_unique<ValidationSplit>(
            splitValidation(m_dataset->train, c.classes, c.validation));
        if (m_split->validation.count == 0)
            throw InvalidArgument("a validation share of " + std::to_string(c.validation) +
                                  " holds out no image of " + c.dataset +
                                  "'s training set: each class needs two images or more");
        train = &m_split->train;
        evaluated = &m_split->validation;
    }

    LoaderOptions lo = loaderOptionsFor(c, group);
    lo.workers = m_options.loaderWorkers;
    choosePinnedDevice(c.backend, c.gpus, c.towers, group ? group->localRank() : 0);
    std::string dataNote;
    lo.drawsOnly = holdOnGpus(c, group, *train, dataNote);
    // Accumulated batches the training set cannot give: said in the run's own terms (the loader
    // sees one batch of batchPerTower x accumulate per tower).
    if (const std::int64_t global =
            std::int64_t(lo.globalTowers > 0 ? lo.globalTowers : c.towers) * c.batchPerTower;
        c.accumulate > 1 && global * c.accumulate > train->count)
        throw InvalidArgument(
            "a global batch of " + std::to_string(global * c.accumulate) + " (" +
            counted(global / c.batchPerTower, "tower", "towers") + " x " +
            std::to_string(c.batchPerTower) + " x " + std::to_string(c.accumulate) +
            " accumulated batches) is larger than the " + std::to_string(train->count) +
            " training examples" +
            (global <= train->count
                 ? ": at most " + std::to_string(train->count / global) + " accumulated batches fit"
                 : std::string()));
    try {
        m_loader = std::make_unique<BatchLoader>(*train, m_recipe, lo);
    } catch (const InvalidArgument& e) {
        if (!m_split) throw;
        throw InvalidArgument(std::string(e.what()) + " (the training images left after " +
                              std::to_string(m_split->validation.count) +
                              " were held out for validation)");
    }

    const std::string memoryNote =
        checkMemory(c, group, lo.drawsOnly ? std::int64_t(train->pixels.size()) : 0,
                    // (a resume with no checkpoint reads the weights it started from)
                    !c.initFrom.empty() ? StartRead::InitFrom
                    : m_options.resume  ? StartRead::Resume
                                        : StartRead::Nothing);

    DataDescription data{m_dataset->classNames, m_recipe.toJson(), train->imageShape(),
                         m_dataset->imageFit};
    m_trainer =
        std::make_unique<Trainer>(c, *m_loader, m_options.runDirectory, data, observer, group);
    if (lo.drawsOnly)
        m_trainer->holdTrainingSet(*train, m_recipe);
    else
        m_trainer->setDataNote(dataNote);
    if (m_split && observer) {
        char share[32]; // 12.5, not rounded to 13
        std::snprintf(share, sizeof share, "%g", c.validation * 100);
        observer->onLog("holding out " + std::to_string(m_split->validation.count) + " of " +
                        std::to_string(m_dataset->train.count) +
                        " training images as the validation set (" + share +
                        " % of each class); the test set is left for after the run");
    }
    if (!memoryNote.empty() && observer) observer->onLog("note: " + memoryNote);
    const Preprocessing recipe = m_recipe;
    m_trainer->setEvaluator(
        evaluated->count,
        [evaluated, recipe](std::int64_t begin, std::int64_t end, Tensor& images, Tensor& labels) {
            evaluationBatch(*evaluated, recipe, begin, end, images, labels);
        },
        m_split ? "validation" : "test");
    if (m_options.resume) {
        if (auto step = m_trainer->resumeFromNewest(m_options.setAside))
            m_startStep = *step;
        else if (observer)
            observer->onLog("no checkpoint to continue from in " + m_options.runDirectory.string() +
                            ": starting from step 0");
    } else {
        m_trainer->startNew(m_options.setAside);
    }
}

TrainingSession::~TrainingSession() = default;

Trainer::Outcome TrainingSession::run(std::stop_token stop)
{
    return m_trainer->run(std::move(stop));
}

} // namespace towers::engine
