// TowerSet (tower_set.h): building the towers and their communicator, tearing them down, running
// a job on every tower, the collectives through host copies and what the run's log says of them.
// The step (issue, collect, the CUDA graph captures) is in tower_set_step.cpp; evaluation, the
// replica checks and loading a state in tower_set_state.cpp; the types they share in
// tower_set_parts.h.
#include "engine/train/tower_set.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "engine/backends.h"
#include "engine/cpu/onednn_ops.h"
#include "engine/errors.h"
#include "engine/gpu/gpu_backend.h"
#include "engine/models/registry.h"
#include "engine/train/host_communicator.h"
#include "engine/train/process_communicator.h"
#include "engine/train/tower_set_parts.h"

namespace towers::engine {

int gpuOfTower(const std::vector<int>& gpus, int towers, int localRank, int t, int gpuCount)
{
    if (!gpus.empty()) return gpus[std::size_t(t)];
    return (localRank * towers + t) % gpuCount;
}

void choosePinnedDevice(const std::string& backend, const std::vector<int>& gpus, int towers,
                        int localRank)
{
    if (isHostBackend(backend) || towers < 1) return;
    GpuBackend* gpu = cudaBackend();
    if (!gpu || gpu->deviceCount() < 1) return; // the towers say why
    const int g = gpuOfTower(gpus, towers, localRank, 0, gpu->deviceCount());
    if (g >= 0 && g < gpu->deviceCount()) gpu->memory().setPinnedDevice(g);
}

TowerSet::TowerSet(const TowerSetOptions& options) : m_opt(options)
{
    if (m_opt.towers < 1)
        throw InvalidArgument("towers: must be at least 1, got " + std::to_string(m_opt.towers));
    if (m_opt.threadsPerTower < 1)
        throw InvalidArgument("threadsPerTower: must be at least 1, got " +
                              std::to_string(m_opt.threadsPerTower));
    if (m_opt.accumulate < 1)
        throw InvalidArgument("accumulate: must be at least 1, got " +
                              std::to_string(m_opt.accumulate));
    requireBackendName(m_opt.backend);
    ProcessGroup* group = m_opt.processes;
    if (group) {
        m_globalTowers = group->size() * m_opt.towers;
        m_firstTower = group->rank() * m_opt.towers;
    } else {
        m_globalTowers = m_opt.towers;
    }
    const bool host = isHostBackend(m_opt.backend);
    GpuBackend* gpu = nullptr;
    const std::vector<int> gpuOf = host || m_opt.makeOps ? std::vector<int>() : towerGpus(gpu);
    if (!(m_opt.emaDecay >= 0 && m_opt.emaDecay < 1))
        throw InvalidArgument("emaDecay: must be in [0, 1) (0 = off), got " +
                              std::to_string(m_opt.emaDecay));
    std::function<std::unique_ptr<Model>()> build = m_opt.build;
    if (!build) {
        const ModelInfo& info = resolveModel(m_opt.model, m_opt.modelDefinition);
        buildModel(info, m_opt.numClasses); // an unknown model or class count, before any tower
        build = [this, &info] { return buildModel(info, m_opt.numClasses); };
    }
    if (m_opt.dtype != DType::Float32 &&
        !(m_opt.dtype == DType::Float64 && m_opt.backend == "reference"))
        throw Unsupported("towers run in float32, or in float64 on the reference backend; not " +
                          std::string(dtypeName(m_opt.dtype)) + " on " + m_opt.backend);
    makeOptimizer(m_opt.optimizer); // validates the options before any thread starts
    if (m_opt.allreduce != "auto" && m_opt.allreduce != "host")
        throw InvalidArgument("allreduce: must be auto or host, got '" + m_opt.allreduce + "'");
    if (!(m_opt.bucketMb >= 0) || !std::isfinite(m_opt.bucketMb))
        throw InvalidArgument("bucketMb: must be a number of MiB >= 0 (0 = one collective after "
                              "backward), got " +
                              std::to_string(m_opt.bucketMb));
    if (m_opt.bucketMb > 0) BucketPlan::make({}, m_opt.bucketMb, m_opt.firstBucketMb); // checks

    makeCommunicator(gpu, gpuOf);
    buildTowers(gpu, gpuOf, build);
    planSteps();
}

std::vector<int> TowerSet::towerGpus(GpuBackend*& gpu) const
{
    ProcessGroup* group = m_opt.processes;
    std::vector<int> gpuOf;
    std::string why;
    gpu = cudaBackend(&why);
    if (!gpu) throw Unsupported("GPU towers: " + why);
    if (gpu->deviceCount() == 0) throw Unsupported("GPU towers: " + gpu->unavailableReason());
    if (!m_opt.gpus.empty() && int(m_opt.gpus.size()) != m_opt.towers)
        throw InvalidArgument("gpus: " + std::to_string(m_opt.gpus.size()) + " GPUs given for " +
                              std::to_string(m_opt.towers) + " towers");
    for (int t = 0; t < m_opt.towers; ++t) {
        const int g = gpuOfTower(m_opt.gpus, m_opt.towers, group ? group->localRank() : 0, t,
                                 gpu->deviceCount());
        if (g < 0 || g >= gpu->deviceCount())
            throw InvalidArgument("gpus: there is no GPU " + std::to_string(g) +
                                  " (this machine has " + std::to_string(gpu->deviceCount()) + ")");
        gpuOf.push_back(g);
    }
    return gpuOf;
}

void TowerSet::makeCommunicator(GpuBackend* gpu, const std::vector<int>& gpuOf)
{
    ProcessGroup* group = m_opt.processes;
    std::string hostWhy; // why GPU towers average through the host after all
    if (m_opt.makeCommunicator) {
        m_comm = m_opt.makeCommunicator(m_opt.towers);
        m_deviceCollectives = true;
        m_allReduceText = "where the towers' tensors live (a given communicator)";
    } else if (gpu && m_opt.allreduce == "auto" && group && group->size() > 1) {
        // One NCCL world over every GPU tower of every process, its id sent by rank 0. Every
        // process must have joined it, or all average through the host (MPI) instead.
        std::string why;
        GpuBackend::NcclWorld world;
        world.worldSize = m_globalTowers;
        world.firstRank = m_firstTower;
        world.shareId = [group](void* bytes, std::size_t size) {
            group->broadcast(bytes, size, 0);
        };
        world.anyRefuses = [group](bool mine) {
            return group->any(mine, "the check that NCCL starts on every process");
        };
        m_comm = gpu->makeCommunicator(gpuOf, &why, &world);
        if (group->any(!m_comm, "the check that NCCL started on every process")) {
            if (m_comm) {
                m_comm->abort("another process could not join the NCCL world");
                m_comm.reset();
                why = "NCCL did not start on every process";
            }
            hostWhy = why;
        } else {
            m_deviceCollectives = true;
            m_allReduceText =
                "with NCCL across the GPUs of " + std::to_string(group->size()) + " processes";
        }
    } else if (gpu && m_opt.allreduce == "auto" && m_opt.towers > 1) {
        std::string why;
        m_comm = gpu->makeCommunicator(gpuOf, &why);
        if (m_comm) {
            m_deviceCollectives = true;
            std::string gpus;
            for (int g : gpuOf) gpus += (gpus.empty() ? "" : ", ") + std::to_string(g);
            const bool oneGpu =
                std::all_of(gpuOf.begin(), gpuOf.end(), [&](int g) { return g == gpuOf.front(); });
            m_allReduceText = oneGpu ? "on GPU " + std::to_string(gpuOf.front())
                                     : "with NCCL across GPUs " + gpus;
        } else {
            hostWhy = why;
        }
    }
    if (!m_comm) {
        const bool across = group && group->size() > 1;
        if (across)
            m_comm = std::make_unique<ProcessCommunicator>(m_opt.towers, *group);
        else
            m_comm = std::make_unique<HostCommunicator>(m_opt.towers);
        m_allReduceText = "on the host";
        if (across)
            m_allReduceText += " across " + std::to_string(group->size()) + " processes (" +
                               group->description() + ")";
        if (!hostWhy.empty()) m_allReduceText += " (" + hostWhy + ")";
    }
}

void TowerSet::buildTowers(GpuBackend* gpu, const std::vector<int>& gpuOf,
                           const std::function<std::unique_ptr<Model>()>& build)
{
    const bool host = isHostBackend(m_opt.backend);
    for (int t = 0; t < m_opt.towers; ++t) m_towers.push_back(std::make_unique<Tower>());
    runOnAll([&](int t) {
        Tower& tw = *m_towers[std::size_t(t)];
        if (m_opt.makeOps) {
            tw.ops = m_opt.makeOps(t);
        } else {
            if (host) cpu::setCpuThreads(m_opt.threadsPerTower); // this thread's team, for life
            tw.ops =
                makeBackendOps(m_opt.backend, {gpu ? gpuOf[std::size_t(t)] : 0, m_opt.allowTf32,
                                               m_opt.precision, m_opt.cudnnBenchmark});
        }
        tw.device = tw.ops->device();
        m_comm->attach(t, *tw.ops);
        tw.model = build();
        // Every replica draws from the same seed (dropout layers take their streams from it);
        // the broadcast below is what makes the weights tower 0's, whatever the initialiser.
        tw.model->initialize(m_opt.seed);
        tw.model->overrideWeightDecay(m_opt.weightDecay);
        tw.model->setDropoutEnabled(m_opt.dropout);
        tw.model->setLabelSmoothing(m_opt.labelSmoothing);
        if (m_opt.dtype != DType::Float32) tw.model->convertTo(m_opt.dtype);
        // Initialised on the host (the same draws as a CPU run), then moved to the tower's device.
        if (!tw.device.isHost()) tw.model->moveTo(tw.device);
        tw.optimizer = makeOptimizer(m_opt.optimizer);
        tw.optimizer->setMaxGradNorm(m_opt.clipGradNorm); // of the averages: the same everywhere
        tw.optimizer->setMeasureGradNorm(t == 0 && m_opt.gradNorm); // read from tower 0 alone
        tw.model->setWeightDecayInOptimizer(tw.optimizer->decaysWeights());
        if (m_globalTowers == 1) return; // one replica: nothing to broadcast
        std::vector<Tensor> values;
        for (auto* p : tw.model->parameters())
            if (!m_deviceCollectives || p->value.device() == tw.device) values.push_back(p->value);
        if (m_deviceCollectives)
            m_comm->broadcast(t, 0, values); // what stayed on the host is copied below
        else
            collective(t, values, [&](std::span<Tensor> v) { m_comm->broadcast(t, 0, v); });
    });
    if (m_deviceCollectives) // a GPU replica's host bookkeeping (num_batches_tracked), from tower 0
        for (int t = 1; t < size(); ++t) {
            const auto& from = m_towers.front()->model->parameters();
            const auto& to = m_towers[std::size_t(t)]->model->parameters();
            for (std::size_t i = 0; i < to.size(); ++i)
                if (to[i]->value.device() != m_towers[std::size_t(t)]->device)
                    to[i]->value.copyFrom(from[i]->value);
        }
}

void TowerSet::planSteps()
{
    if (m_globalTowers > 1 && m_opt.bucketMb > 0) {
        m_buckets = BucketPlan::make(model().parameters(), m_opt.bucketMb, m_opt.firstBucketMb);
        for (int t = 0; t < size(); ++t) {
            Tower& tw = *m_towers[std::size_t(t)];
            tw.buckets = std::make_unique<TowerBuckets>(
                m_buckets, *m_comm, t, tw.model->parameters(),
                !m_deviceCollectives && !tw.device.isHost(), *tw.ops);
        }
    }
    if (m_opt.emaDecay > 0) {
        m_ema = std::make_unique<Ema>(m_opt.emaDecay);
        m_ema->reset(model().parameters());
    }
    // Gated where the averages stay where the towers compute: not through host copies after
    // backward (which the host checks on its way), and not on CPU towers (which finish each op).
    const bool hostChecks = m_globalTowers > 1 && m_buckets.buckets.empty() && !m_deviceCollectives;
    m_gated = !hostChecks && std::none_of(m_towers.begin(), m_towers.end(),
                                          [](const auto& tw) { return tw->device.isHost(); });
    // CUDA graphs: the GPU towers' steps, where their ops can capture.
    std::string noCapture;
    for (const auto& tw : m_towers)
        if (noCapture.empty()) noCapture = tw->ops->captureUnavailable();
    if (m_towers.front()->device.isHost()) {
        m_graphText.clear(); // nothing to capture: each op runs as it is called
    } else if (!m_opt.graphs) {
        m_graphText = "issued op by op (CUDA graphs off)";
    } else if (!m_gated) {
        m_graphText = "issued op by op (CUDA graphs capture steps whose averages stay on the GPUs; "
                      "this run averages through host copies after backward: --bucket-mb above 0 "
                      "or --allreduce auto would let it capture)";
    } else if (!noCapture.empty()) {
        m_graphText = "issued op by op (" + noCapture + ")";
    } else {
        m_graphs = true;
        m_graphText = "captured as CUDA graphs, each step slot's once it has run a step op by op";
        if (m_globalTowers > 1)
            m_graphText += "; each tower's step in parts, the collectives launched between them";
    }
}

TowerSet::~TowerSet()
{
    // Towers torn down with steps in flight are leaving on an error (the trainer collects every
    // step otherwise), which may be another process's failure: their collectives may then wait
    // for it for ever. Aborted first (NCCL's abort ends its kernels), they let the steps finish.
    if (!m_flight.empty() && m_deviceCollectives) {
        try {
            m_comm->abort("the towers were torn down with steps in flight");
        } catch (...) {
        }
    }
    // Work the towers queued (steps in flight, or a step whose issue failed part way on another
    // tower) writes into their page-locked memory and reads it: let it finish before that memory
    // goes (a device's error then is the one its step would have reported; it is not thrown here).
    for (auto& tw : m_towers) {
        try {
            if (tw->ops) tw->ops->synchronize();
        } catch (...) {
        }
    }
}

int TowerSet::size() const
{
    return int(m_towers.size());
}

Model& TowerSet::model()
{
    return *m_towers.front()->model;
}
Model& TowerSet::model(int tower)
{
    if (tower < 0 || tower >= size()) throw InvalidArgument("no tower " + std::to_string(tower));
    return *m_towers[std::size_t(tower)]->model;
}
Device TowerSet::device(int tower) const
{
    if (tower < 0 || tower >= size()) throw InvalidArgument("no tower " + std::to_string(tower));
    return m_towers[std::size_t(tower)]->device;
}

std::string TowerSet::holdTrainingSet(const ImageSet& set, const Preprocessing& recipe)
{
    requireIdle("holdTrainingSet");
    dropGraphs(); // what follows may remake tensors the captures use
    if (model().dtype() != DType::Float32)
        throw InvalidArgument("holdTrainingSet: the towers compute in " +
                              std::string(dtypeName(model().dtype())) +
                              "; images preprocessed where they live are float32");
    const Shape in = model().inputShape();
    if (in != Shape{recipe.height, recipe.width, recipe.channels})
        throw InvalidArgument("holdTrainingSet: the recipe makes " +
                              Shape{recipe.height, recipe.width, recipe.channels}.str() +
                              " images, the model takes " + in.str());
    recipe.validateFor(set.imageShape());
    if (set.count < 1 || set.pixels.size() != std::size_t(set.count * set.imageBytes()))
        throw InvalidArgument("holdTrainingSet: the image set is empty or inconsistent");
    // Once per device: towers sharing a GPU share its copy.
    std::vector<int> firstOnDevice(m_towers.size());
    for (std::size_t t = 0; t < m_towers.size(); ++t) {
        firstOnDevice[t] = int(t);
        for (std::size_t u = 0; u < t; ++u)
            if (m_towers[u]->device == m_towers[t]->device) {
                firstOnDevice[t] = int(u);
                break;
            }
    }
    Tensor bytes({set.count, set.height, set.width, set.channels}, DType::UInt8);
    std::memcpy(bytes.raw(), set.pixels.data(), set.pixels.size());
    try {
        runOnAll([&](int t) {
            Tower& tw = *m_towers[std::size_t(t)];
            tw.source = Tensor();
            if (firstOnDevice[std::size_t(t)] != t) return;
            if (tw.device.isHost()) {
                tw.source = bytes;
            } else {
                tw.ops->upload(bytes, tw.source);
                tw.ops->synchronize(); // `bytes` goes out of scope
            }
        });
    } catch (...) { // no tower holds a part of it
        for (auto& tw : m_towers) tw->source = Tensor();
        throw;
    }
    for (std::size_t t = 0; t < m_towers.size(); ++t)
        m_towers[t]->source = m_towers[std::size_t(firstOnDevice[t])]->source;
    m_heldRecipe = preprocessDesc(recipe);
    std::string where;
    for (std::size_t t = 0; t < m_towers.size(); ++t)
        if (firstOnDevice[t] == int(t))
            where += (where.empty() ? "" : ", ") + m_towers[t]->device.str();
    char mb[32];
    std::snprintf(mb, sizeof mb, "%.1f MB", double(set.pixels.size()) / 1e6);
    return "the training set held on " + where + " (" + mb +
           " as bytes), its distortions run there";
}

std::string TowerSet::bucketDescription() const
{
    if (m_globalTowers == 1) return "one tower: no gradients to average";
    if (m_buckets.buckets.empty()) return "one collective after backward";
    return m_buckets.describe() + " while backward runs";
}

std::string TowerSet::averagingDescription() const
{
    if (m_globalTowers == 1) return bucketDescription();
    return "gradients averaged " + m_allReduceText + " in " + bucketDescription();
}

std::string TowerSet::graphDescription() const
{
    return m_graphText;
}

std::int64_t TowerSet::replayedSteps() const
{
    return m_towers.front()->replayed;
}

Optimizer& TowerSet::optimizer()
{
    return *m_towers.front()->optimizer;
}

void TowerSet::collective(int tower, std::vector<Tensor>& tensors,
                          const std::function<void(std::span<Tensor>)>& run)
{
    Tower& tw = *m_towers[std::size_t(tower)];
    if (tw.device.isHost()) {
        run(tensors);
        return;
    }
    tw.staging.resize(tensors.size());
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        Tensor::ensure(tw.staging[i], tensors[i].shape(), tensors[i].dtype());
        tw.staging[i].copyFrom(tensors[i]);
    }
    run(tw.staging);
    for (std::size_t i = 0; i < tensors.size(); ++i) tensors[i].copyFrom(tw.staging[i]);
}
const Ema* TowerSet::ema() const
{
    return m_ema.get();
}

void TowerSet::runOnAll(const std::function<void(int)>& job, const std::function<void()>& meanwhile)
{
    if (m_comm->aborted())
        throw Error("the towers stopped after an earlier error; build a new trainer to continue");
    for (int t = 0; t < size(); ++t) {
        m_towers[std::size_t(t)]->thread.post([this, &job, t] {
            try {
                job(t);
            } catch (const CollectiveAborted&) {
                throw;
            } catch (const BackendError& e) {
                // A device's failure says which tower and device it was (out of memory: also how
                // much was asked, in e.what()), keeping its type for the caller.
                const std::string what = "tower " + std::to_string(t) + " on " +
                                         m_towers[std::size_t(t)]->device.str() + ": " + e.what();
                m_comm->abort(what);
                if (dynamic_cast<const DeviceOutOfMemory*>(&e)) throw DeviceOutOfMemory(what);
                throw BackendError(what);
            } catch (const std::exception& e) {
                m_comm->abort(std::string("tower ") + std::to_string(t) + " failed: " + e.what());
                throw;
            } catch (...) {
                m_comm->abort("tower " + std::to_string(t) + " failed");
                throw;
            }
        });
    }
    // The tower's own error matters, not the "aborted" the others got because of it.
    std::exception_ptr first, aborted, besides;
    if (meanwhile) {
        try {
            meanwhile();
        } catch (...) {
            besides = std::current_exception();
        }
    }
    for (auto& tw : m_towers) {
        try {
            tw->thread.wait();
        } catch (const CollectiveAborted&) {
            if (!aborted) aborted = std::current_exception();
        } catch (...) {
            if (!first) first = std::current_exception();
        }
    }
    if (first) std::rethrow_exception(first);
    if (besides) std::rethrow_exception(besides);
    if (aborted) std::rethrow_exception(aborted);
}

void TowerSet::requireIdle(const char* what) const
{
    if (!m_flight.empty())
        throw InvalidArgument(std::string(what) + ": " + counted(m_flight.size(), "step", "steps") +
                              " issued and not collected; collect() them first");
}

} // namespace towers::engine
