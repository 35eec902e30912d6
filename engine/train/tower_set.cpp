#include "engine/train/tower_set.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include "engine/cpu/onednn_ops.h"
#include "engine/dist/byte_message.h"
#include "engine/dist/stop_vote.h"
#include "engine/errors.h"
#include "engine/gpu/gpu_backend.h"
#include "engine/models/registry.h"
#include "engine/ops/backends.h"
#include "engine/ops/op_checks.h"
#include "engine/train/host_communicator.h"
#include "engine/train/process_communicator.h"
#include "engine/train/tower_thread.h"

namespace towers::engine {

namespace {

using Clock = StepClock;

bool isFloat(DType t)
{
    return t == DType::Float32 || t == DType::Float64;
}

// "" when a and b hold the same bytes, else where they first differ.
std::string firstDifference(const Tensor& deviceA, const Tensor& deviceB)
{
    // GPU towers are compared through host copies (a check, not a hot path).
    const Tensor a = deviceA.onHost(), b = deviceB.onHost();
    if (a.shape() != b.shape() || a.dtype() != b.dtype())
        return "is " + a.describe() + " instead of " + b.describe();
    if (a.bytes() == 0 || std::memcmp(a.raw(), b.raw(), a.bytes()) == 0) return {};
    const std::size_t size = dtypeSize(a.dtype());
    const auto* pa = static_cast<const unsigned char*>(a.raw());
    const auto* pb = static_cast<const unsigned char*>(b.raw());
    std::int64_t i = 0;
    while (std::memcmp(pa + std::size_t(i) * size, pb + std::size_t(i) * size, size) == 0) ++i;
    std::string what = "differs at element " + std::to_string(i);
    if (isFloat(a.dtype()) || a.dtype() == DType::BFloat16)
        what += " (" + std::to_string(a.at(i)) + " instead of " + std::to_string(b.at(i)) + ")";
    return what;
}

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

std::string packEval(const EvalResult& r)
{
    std::string out;
    putBytes(out, std::int64_t(r.numClasses));
    putBytes(out, r.examples);
    putBytes(out, r.correct);
    putBytes(out, r.crossEntropySum);
    putBytes(out, r.seconds);
    putBytes(out, std::int64_t(r.complete));
    for (auto c : r.classCounts) putBytes(out, c);
    for (auto c : r.confusion) putBytes(out, c);
    return out;
}

EvalResult unpackEval(ByteReader& in)
{
    EvalResult r(int(in.take<std::int64_t>()));
    r.examples = in.take<std::int64_t>();
    r.correct = in.take<std::int64_t>();
    r.crossEntropySum = in.take<double>();
    r.seconds = in.take<double>();
    r.complete = in.take<std::int64_t>() != 0;
    for (auto& c : r.classCounts) c = in.take<std::int64_t>();
    for (auto& c : r.confusion) c = in.take<std::int64_t>();
    return r;
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

// What one issued step keeps on a tower until collect(): two, so that a step can be issued while
// the one before it still runs (they alternate).
struct StepSlot
{
    std::vector<Tensor> savedBuffers; // the buffers before the step's forward (batch-norm stats)
    Tensor flag;                      // gated: the step's finiteness flag where the tower computes
    Tensor flagHost;                  // gated: its page-locked copy
    LossCopy lossCopy;                // gated: the loss on its way to the host
    Tensor images, labels, draws;     // gated: page-locked copies of the tower's slice
    Tensor deviceImages, deviceLabels, deviceDraws; // gated: the slice where the tower computes
    Tensor scalars, deviceScalars; // gated: the step's StepScalars, page-locked and on the device
    // A GPU tower's step captured (TowerSetOptions::graphs), replayed while the shapes stay;
    // `warm`: the slot has run a step op by op with them since the captures were last dropped.
    std::unique_ptr<CapturedWork> graph;
    bool warm = false;
    int dataMark = 0, computeMark = 0, backwardMark = 0, commMark = 0, updateMark = 0, endMark = 0;
    double startedMs = 0; // in the buckets' collectives during backward
    // Known once the step is done (at once for a step that is not gated).
    LossValue loss;
    TowerTimes times;

    // The step's split from its marks, once `ops` has finished them.
    TowerTimes timesFrom(Ops& ops) const
    {
        return {ops.millisecondsBetween(computeMark, backwardMark) - startedMs,
                ops.millisecondsBetween(backwardMark, commMark) + startedMs,
                ops.millisecondsBetween(dataMark, computeMark),
                ops.millisecondsBetween(commMark, updateMark)};
    }
    // Puts back the buffers of `params` (a replica's parameters()) saved before the step.
    void restoreBuffers(const std::vector<Parameter*>& params) const
    {
        for (std::size_t i = 0; i < params.size(); ++i)
            if (!params[i]->trainable) params[i]->value.copyFrom(savedBuffers[i]);
    }
};

struct TowerSet::Tower
{
    std::unique_ptr<Ops> ops;
    std::unique_ptr<Model> model;
    std::unique_ptr<Optimizer> optimizer;
    Device device;               // where the replica lives
    std::vector<Tensor> reduce;  // this step's gradients and float buffers (views)
    std::vector<Tensor> staging; // host copies of `reduce` for a GPU tower's collectives
    Tensor images, labels;       // a GPU tower's slice of the batch
    Tensor source, draws;        // the held training set (shared on a device), the step's draws
    Tensor flagZero;             // a GPU tower's page-locked 0 to reset a step's flag
    // A step slot per step in flight: a slot's buffers (its pinned copies, its device inputs) are
    // written again only once its previous step was collected, which holds while no more steps
    // are in flight than there are slots (and resetFlag's "the step before is slot ^ 1").
    StepSlot slots[2];
    static_assert(TowerSet::kMaxInFlight == 2, "one step slot per step in flight, two of them");
    std::unique_ptr<TowerBuckets> buckets;          // null with one tower or bucketMb = 0
    std::string graphKey;                           // the inputs of its captured steps
    std::string graphFailure;                       // why its last capture failed, for issue()
    std::int64_t replayed = 0;                      // its steps replayed from a capture
    std::chrono::steady_clock::time_point finished; // when its part of the step ended
    EvalResult eval;
    TowerThread thread; // declared last: joined before the model and ops it uses are destroyed
};

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
    std::vector<int> gpuOf;
    if (!host && !m_opt.makeOps) {
        std::string why;
        gpu = cudaBackend(&why);
        if (!gpu) throw Unsupported("GPU towers: " + why);
        if (gpu->deviceCount() == 0) throw Unsupported("GPU towers: " + gpu->unavailableReason());
        if (!m_opt.gpus.empty() && int(m_opt.gpus.size()) != m_opt.towers)
            throw InvalidArgument("gpus: " + std::to_string(m_opt.gpus.size()) +
                                  " GPUs given for " + std::to_string(m_opt.towers) + " towers");
        for (int t = 0; t < m_opt.towers; ++t) {
            const int g = gpuOfTower(m_opt.gpus, m_opt.towers, group ? group->localRank() : 0, t,
                                     gpu->deviceCount());
            if (g < 0 || g >= gpu->deviceCount())
                throw InvalidArgument("gpus: there is no GPU " + std::to_string(g) +
                                      " (this machine has " + std::to_string(gpu->deviceCount()) +
                                      ")");
            gpuOf.push_back(g);
        }
    }
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
        if (m_opt.dtype != DType::Float32) tw.model->convertTo(m_opt.dtype);
        // Initialised on the host (the same draws as a CPU run), then moved to the tower's device.
        if (!tw.device.isHost()) tw.model->moveTo(tw.device);
        tw.optimizer = makeOptimizer(m_opt.optimizer);
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

namespace {

// `dst` as a page-locked copy of host tensor `src` (made, or remade for another shape).
void stagePinned(const Tensor& src, Tensor& dst)
{
    if (dst.empty() || dst.shape() != src.shape() || dst.dtype() != src.dtype())
        dst = Tensor::pinned(src.shape(), src.dtype());
    dst.copyFrom(src);
}

} // namespace

void TowerSet::requireIdle(const char* what) const
{
    if (!m_flight.empty())
        throw InvalidArgument(std::string(what) + ": " + counted(m_flight.size(), "step", "steps") +
                              " issued and not collected; collect() them first");
}

TowerStepResult TowerSet::step(const Batch& batch, std::int64_t globalStep, double lr)
{
    requireIdle("step");
    issue(batch, globalStep, lr);
    return collect();
}

void TowerSet::issue(const Batch& batch, std::int64_t globalStep, double lr)
{
    const Shape& in = model().inputShape();
    if (m_flight.size() >= kMaxInFlight)
        throw InvalidArgument("issue: " + std::to_string(m_flight.size()) +
                              " steps are in flight already; collect() the oldest first");
    if (batch.towers != size())
        throw InvalidArgument("the batch is split for " + std::to_string(batch.towers) +
                              " towers, the trainer has " + std::to_string(size()));
    if (batch.labels.rank() != 1 || batch.labels.dim(0) < size() ||
        batch.labels.dim(0) % size() != 0)
        throw ShapeError("batch labels " + batch.labels.shape().str() + " do not split into " +
                         std::to_string(size()) + " equal tower slices");
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
        StepSlot& sl = tw.slots[issued.slot];
        Ops& ops = *tw.ops;
        ExecContext ctx{ops, true, std::uint64_t(globalStep), std::uint64_t(m_firstTower + t)};
        if (!behind) ops.clearMarks();
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
        Tensor images = drawn ? Tensor() : batch.towerImages(t);
        Tensor labels = batch.towerLabels(t);
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
            tw.optimizer->fillScalars(values, lr);
            if (m_ema) m_ema->fillScalars(values, globalStep + 1);
            values.values[StepScalars::DropoutStep] = double(globalStep);
            if (sl.scalars.empty())
                sl.scalars = Tensor::pinned({StepScalars::kCount}, DType::Float64);
            std::memcpy(sl.scalars.raw(), values.values, sizeof values.values);
            ops.prefetch(sl.scalars, sl.deviceScalars);
            ctx.scalars = &sl.deviceScalars;
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
        // Forward, the loss and backward, each gradient bucket's average started as soon as this
        // tower's backward has produced it, the buckets counted from none ready (so that a step
        // issued again op by op after a capture that failed midway starts every bucket once).
        const auto forwardBackward = [&] {
            tw.model->forward(ctx, images);
            tw.model->computeLoss(ctx, labels);
            if (tw.buckets) {
                tw.buckets->begin();
                tw.model->backward(ctx, [&](Parameter& p) { tw.buckets->ready(p); });
            } else {
                tw.model->backward(ctx);
            }
        };
        // A gated step's flag starts clear, or as the one of the step in flight before it
        // (sticky: a skipped step before this one skips this one too).
        const auto resetFlag = [&] {
            if (behind) {
                ops.copy(tw.slots[issued.slot ^ 1].flag, sl.flag);
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
            if (m_ema && t == 0) // on tower 0's device, by its ops (no copy to the host)
                m_ema->update(ops, tw.model->parameters(), globalStep + 1, sl.flag,
                              sl.deviceScalars);
            if (marks) sl.updateMark = ops.mark();
            if (sl.flagHost.empty()) sl.flagHost = Tensor::pinned({1}, sl.flag.dtype());
            ops.download(sl.flag, sl.flagHost);
            tw.model->copyLoss(ops, sl.lossCopy);
        };
        if (m_gated) {
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
            const std::string shapes = images.describe() + " " + labels.describe() +
                                       (drawn ? " preprocessed here" : " as given");
            const bool captured = issueCaptured(tw, sl, shapes, [&](bool marks) {
                forwardBackward();
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
            return;
        }
        sl.computeMark = ops.mark();
        forwardBackward(); // the loss read where the host waits anyway
        sl.backwardMark = ops.mark();
        if (!onDevice) sl.loss = tw.model->readLoss();
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
        if (onDevice) sl.loss = tw.model->readLoss(); // the host has waited for the GPU
        if (!std::isfinite(sl.loss.total()) || !finite) m_nonFinite = true;
        m_comm->barrier(t);
        sl.commMark = ops.mark();
        if (!m_nonFinite) {
            tw.optimizer->step(ops, tw.model->parameters(), lr);
            if (m_ema && m_ema->onHost()) // CPU towers share the work
                m_ema->update(tw.model->parameters(), globalStep + 1, t, size());
            else if (m_ema && t == 0)
                m_ema->update(ops, tw.model->parameters(), globalStep + 1);
        }
        sl.updateMark = ops.mark();
        ops.synchronize();
        if (m_nonFinite) sl.restoreBuffers(params);
        sl.times = sl.timesFrom(ops);
        tw.finished = Clock::now();
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
            sl.loss = sl.lossCopy.value();
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
    return r;
}

EvalResult TowerSet::evaluate(std::int64_t count, int batchSize, const EvalBatchFn& batches,
                              bool useEma, const CancelFn& cancelled)
{
    requireIdle("evaluate");
    dropGraphs(); // what follows may remake tensors the captures use
    if (useEma && !m_ema)
        throw InvalidArgument(
            "evaluation with the moving averages, but the run keeps none (emaDecay = 0)");
    if (count < 1) throw InvalidArgument("evaluation needs at least one example");
    const auto evaluateOn = [&](int t, const CancelFn& cancel) {
        Tower& tw = *m_towers[std::size_t(t)];
        std::unique_ptr<EmaSwap> swap;
        if (useEma) swap = std::make_unique<EmaSwap>(*m_ema, tw.model->parameters());
        tw.eval = engine::evaluate(*tw.model, *tw.ops, count, batchSize, batches, m_firstTower + t,
                                   m_globalTowers, cancel);
    };
    if (cancelled && m_opt.processes && m_opt.processes->size() > 1) {
        // The towers ask only this process; this thread votes with the others meanwhile.
        StopVote vote(*m_opt.processes, cancelled, size());
        const CancelFn cancel = [&] { return vote.stopped() || cancelled(); };
        runOnAll(
            [&](int t) {
                try {
                    evaluateOn(t, cancel);
                } catch (...) {
                    vote.workerDone(true);
                    throw;
                }
                vote.workerDone(false);
            },
            [&] { vote.run(); });
    } else {
        runOnAll([&](int t) { evaluateOn(t, cancelled); });
    }
    EvalResult r(model().numClasses());
    double seconds = 0;
    const auto mergeIn = [&](const EvalResult& part) {
        r.merge(part);
        seconds = std::max(seconds, part.seconds);
    };
    if (m_opt.processes && m_opt.processes->size() > 1) {
        // Every process merges every tower's part in global order: the same sums everywhere.
        std::string mine;
        for (const auto& tw : m_towers) mine += packEval(tw->eval);
        for (const std::string& share : m_opt.processes->allGatherStrings(mine)) {
            ByteReader reader(share, "a process's evaluation counts");
            for (int t = 0; t < size(); ++t) mergeIn(unpackEval(reader));
        }
    } else {
        for (const auto& tw : m_towers) mergeIn(tw->eval);
    }
    r.finish();
    r.seconds = seconds;
    r.ema = useEma;
    return r;
}

std::string TowerSet::compareReplicas()
{
    requireIdle("compareReplicas");
    auto& ref = *m_towers.front();
    const auto refState = ref.optimizer->state(ref.model->parameters());
    for (int t = 1; t < size(); ++t) {
        auto& tw = *m_towers[std::size_t(t)];
        const auto& a = tw.model->parameters();
        const auto& b = ref.model->parameters();
        for (std::size_t i = 0; i < a.size(); ++i) {
            const std::string d = firstDifference(a[i]->value, b[i]->value);
            if (!d.empty())
                return "tower " + std::to_string(t) + "'s '" + a[i]->name + "' " + d +
                       " (tower 0's value)";
        }
        const auto state = tw.optimizer->state(tw.model->parameters());
        if (state.size() != refState.size())
            return "tower " + std::to_string(t) + "'s optimizer state has another size";
        for (std::size_t i = 0; i < state.size(); ++i) {
            const std::string d = firstDifference(state[i].second, refState[i].second);
            if (!d.empty())
                return "tower " + std::to_string(t) + "'s '" + state[i].first + "' " + d +
                       " (tower 0's value)";
        }
    }
    return {};
}

void TowerSet::verifyReplicas()
{
    const std::string d = compareReplicas();
    if (!d.empty()) throw Error("the tower replicas are no longer identical: " + d);
}

void TowerSet::loadState(const NamedTensors& weights, const NamedTensors& optimizerState,
                         const NamedTensors& emaState)
{
    requireIdle("loadState");
    std::vector<std::pair<std::string, const Tensor*>> all;
    for (const auto& [name, t] : weights) {
        if (name.rfind("optim.", 0) == 0 || name.rfind("ema.", 0) == 0)
            model().parameter(name); // UnknownName: not a weight
        all.emplace_back(name, &t);
    }
    for (const auto& [name, t] : optimizerState)
        if (name.rfind("optim.", 0) == 0) all.emplace_back(name, &t);
    for (const auto& [name, t] : emaState)
        if (name.rfind("ema.", 0) == 0) all.emplace_back(name, &t);
    StateSource state;
    for (const auto& [name, t] : all) {
        state.tensors.push_back({name, t->dtype(), t->shape()});
        // (Its value is at hand here: refused before anything changes.)
        if (name == Optimizer::kStepName && t->dtype() == DType::Int64 && t->numel() == 1 &&
            t->onHost().data<std::int64_t>()[0] < 0)
            throw InvalidArgument("optimizer state: 'optim.step' is negative");
    }
    state.read = [&all](const SafeTensorFn& take) {
        for (const auto& [name, t] : all) {
            Tensor view = *t; // the caller's tensor, unchanged: take() copies it
            take(name, view);
        }
    };
    loadState(state);
}

void TowerSet::loadState(const StateSource& state)
{
    requireIdle("loadState");
    dropGraphs(); // what follows may remake tensors the captures use
    const auto& params = model().parameters();

    // Check the names, dtypes and shapes before changing anything.
    std::map<std::string, const SafeTensorEntry*> weights;
    bool averages = false;
    for (const SafeTensorEntry& t : state.tensors) {
        if (t.name.rfind("optim.", 0) == 0) continue;
        if (t.name.rfind("ema.", 0) == 0)
            averages = true;
        else
            weights[t.name] = &t;
    }
    for (auto* p : params) {
        const auto it = weights.find(p->name);
        if (it == weights.end())
            throw InvalidArgument("state: tensor '" + p->name + "' is missing");
        if (it->second->shape != p->value.shape() || it->second->dtype != p->value.dtype())
            throw InvalidArgument("state: tensor '" + p->name + "' is " + it->second->describe() +
                                  ", the model's is " + p->value.describe());
    }
    if (weights.size() != params.size())
        for (const auto& [name, t] : weights)
            model().parameter(name); // UnknownName for the extra one
    m_towers.front()->optimizer->checkState(state.tensors, params);
    if (m_ema && averages) Ema::checkState(state.tensors, params);

    // Where each tensor goes: every tower's weight, every tower's optimizer slot, the average's
    // (views of the live state: nothing is made beside it).
    std::map<std::string, std::vector<Tensor>> into;
    for (auto& tw : m_towers) {
        for (auto* p : tw->model->parameters()) into[p->name].push_back(p->value);
        for (auto& [name, t] : tw->optimizer->state(tw->model->parameters()))
            if (name != Optimizer::kStepName) into[name].push_back(t);
    }
    if (m_ema && averages)
        for (auto& [name, t] : m_ema->state()) into[name].push_back(t);
    std::int64_t steps = -1;
    std::set<std::string> given;
    state.read([&](const std::string& name, Tensor& t) {
        if (name == Optimizer::kStepName) {
            if (t.dtype() != DType::Int64 || t.numel() != 1)
                throw InvalidArgument("optimizer state: 'optim.step' must be one int64, got " +
                                      t.describe());
            steps = t.onHost().data<std::int64_t>()[0]; // refused below when negative
            given.insert(name);
            return;
        }
        const auto it = into.find(name);
        if (it == into.end()) return; // an average this run does not keep
        for (Tensor& to : it->second) to.copyFrom(t);
        given.insert(name);
    });
    for (const auto& [name, to] : into)
        if (!given.count(name)) throw InvalidArgument("state: tensor '" + name + "' was not given");
    if (!given.count(Optimizer::kStepName))
        throw InvalidArgument("state: tensor 'optim.step' was not given");
    for (auto& tw : m_towers) tw->optimizer->setStepCount(steps);
    if (m_ema && !averages) m_ema->reset(params); // none saved: they start from these weights
}

} // namespace towers::engine
