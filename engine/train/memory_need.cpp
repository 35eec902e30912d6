#include "engine/train/memory_need.h"

#include <algorithm>
#include <exception>
#include <new>
#include <optional>
#include <sstream>
#include <tuple>
#include <vector>

#include "engine/backends.h"
#include "engine/cpu/host_memory.h"
#include "engine/dist/process_group.h"
#include "engine/errors.h"
#include "engine/gpu/gpu_backend.h"
#include "engine/models/registry.h"
#include "engine/optim/optimizer.h"
#include "engine/train/tower_set.h"
#include "engine/train/train_config.h"

namespace towers::engine {

std::string MemoryNeed::parts() const
{
    std::string s = "weights and gradients of " + counted(towers, "tower", "towers") + " " +
                    cpu::byteText(replicas);
    if (optimizer) s += ", optimizer state " + cpu::byteText(optimizer);
    if (average) s += ", moving average " + cpu::byteText(average);
    if (exchange) s += ", gradients exchanged with the other processes " + cpu::byteText(exchange);
    if (accumulated) s += ", gradients accumulated " + cpu::byteText(accumulated);
    if (heldSet) s += ", the training set " + cpu::byteText(heldSet);
    s += ", layer outputs of " + std::to_string(batchPerTower) + " examples per tower " +
         cpu::byteText(outputs);
    if (threads)
        s += ", address space its threads set aside (stacks, malloc's arenas) " +
             cpu::byteText(threads);
    return s;
}

NetworkBytes networkBytes(const Model& model)
{
    NetworkBytes b;
    for (const Parameter* p : model.parameters()) {
        b.weights += std::int64_t(p->value.bytes());
        b.largest = std::max(b.largest, std::int64_t(p->value.bytes()));
        if (p->trainable) b.trainable += std::int64_t(p->value.bytes());
    }
    const std::vector<LayerRow> rows = model.layerTable();
    for (const ShownLayerRow& r : shownLayerRows(rows))
        b.outputsPerExample += r.row->outputShape.numel() * std::int64_t(sizeof(float));
    return b;
}

MemoryNeed hostMemoryNeed(const NetworkBytes& network, int towers, std::int64_t batchPerTower,
                          const std::string& optimizer, bool average, int processes,
                          StartRead start)
{
    // Its state per trainable weight: a momentum buffer, Adam's two moments.
    OptimizerOptions kind;
    kind.kind = optimizer;
    const auto slots = std::int64_t(makeOptimizer(kind)->slotNames().size());
    const std::int64_t weights = network.weights, trainable = network.trainable;

    MemoryNeed n;
    n.towers = towers;
    n.batchPerTower = batchPerTower;
    n.replicas = std::int64_t(towers) * (weights + trainable);
    n.optimizer = std::int64_t(towers) * slots * trainable;
    n.average = average ? weights : 0;
    n.checkpoint = network.largest;
    if (start == StartRead::InitFrom) n.checkpoint += weights;
    n.exchange = processes > 1 ? std::int64_t(towers) * trainable : 0;
    n.outputs = std::int64_t(towers) * network.outputsPerExample * batchPerTower;
    return n;
}

void addAccumulation(MemoryNeed& need, const NetworkBytes& network, int accumulate)
{
    need.accumulated = accumulate > 1 ? std::int64_t(need.towers) * network.trainable : 0;
}

MemoryNeed hostMemoryNeed(const Model& model, int towers, std::int64_t batchPerTower,
                          const std::string& optimizer, bool average, int processes,
                          StartRead start)
{
    return hostMemoryNeed(networkBytes(model), towers, batchPerTower, optimizer, average, processes,
                          start);
}

namespace {

// A check's outcome agreed by every process of `group` (a collective): `failure` (a check that
// could not be made) thrown as it is, else this process's refusal, else another's naming its rank.
void agreeOnRefusal(ProcessGroup* group, const std::string& refusal,
                    const std::exception_ptr& failure)
{
    if (group && group->size() > 1) {
        const std::vector<std::string> all = group->allGatherStrings(refusal);
        if (failure) std::rethrow_exception(failure);
        if (!refusal.empty()) throw Error(refusal);
        for (std::size_t r = 0; r < all.size(); ++r)
            if (!all[r].empty())
                throw Error("rank " + std::to_string(r) + " refused the run: " + all[r]);
    } else if (failure) {
        std::rethrow_exception(failure);
    } else if (!refusal.empty()) {
        throw Error(refusal);
    }
}

} // namespace

std::int64_t runThreadsAddressSpace(const TrainConfig& c, int here)
{
    return cpu::threadsAddressSpace(std::max(1, c.towers) * c.resolvedThreadsPerTower(here) +
                                    kThreadsBesidesTowers);
}

std::string checkHostMemory(const TrainConfig& c, ProcessGroup* group, StartRead start)
{
    std::string refusal, note;
    std::exception_ptr failure;
    // Whatever happens here, every process reaches the collective below.
    try {
        const std::optional<cpu::HostMemory> shared = cpu::sharedHostMemory();
        const std::optional<cpu::HostMemory> own = cpu::addressSpaceRoom();
        if (shared || own) {
            const auto model = buildModel(resolveModel(c.model, c.modelDefinition), c.classes);
            const NetworkBytes network = networkBytes(*model);
            MemoryNeed inMemory =
                hostMemoryNeed(network, c.towers, c.batchPerTower, c.optimizer.kind, c.emaDecay > 0,
                               group ? group->size() : 1, start);
            addAccumulation(inMemory, network, c.accumulate);
            // The processes on this machine share its free memory and control group; the
            // address-space limit is each process's own.
            const int here = group ? std::max(1, group->localSize()) : 1;
            // Under an address-space limit, the towers' threads and a few more (the loader's,
            // the writers') set some aside too.
            MemoryNeed inAddressSpace = inMemory;
            inAddressSpace.threads = runThreadsAddressSpace(c, here);
            const auto atLeast = [&](const MemoryNeed& needed, int n) {
                return " at least " + cpu::byteText(needed.floor() * n) + " (" +
                       (n > 1 ? "each: " : "") + needed.parts() + ")";
            };
            const auto mayTake = [&](const cpu::HostMemory& room, int n) {
                return std::string(n > 1 ? "they may take " : "this process may take ") +
                       cpu::byteText(room.bytes) + " more (" + room.limitedBy + ")";
            };
            const auto processes = [&](int n) {
                return std::to_string(n) + " processes on this machine need";
            };
            for (const auto& [room, n, need] :
                 {std::tuple{shared, here, inMemory}, std::tuple{own, 1, inAddressSpace}}) {
                if (!room) continue;
                if (need.floor() * n > room->bytes) {
                    refusal = "not enough memory for this run: " +
                              (n > 1 ? "its " + processes(n) : std::string("it needs")) +
                              atLeast(need, n) + ", and " + mayTake(*room, n) +
                              ". Fewer towers, a smaller batch or a smaller network would fit";
                    break;
                }
                if (note.empty() && need.total() * n > room->bytes)
                    note = (n > 1 ? "this run's " + processes(n) : std::string("this run needs")) +
                           atLeast(need, n) + " and " + cpu::byteText(need.total() * n) +
                           (start != StartRead::Nothing
                                ? " while it reads or writes a checkpoint, and "
                                : " while it writes a checkpoint, and ") +
                           mayTake(*room, n) +
                           ": the system may end it for lack of memory (fewer towers or a smaller "
                           "batch would take less)";
            }
        }
    } catch (const std::bad_alloc&) {
        refusal = "not enough memory for this run: its network's weights alone do not fit in "
                  "what this process may take. Fewer towers, a smaller batch or a smaller network "
                  "would fit";
    } catch (const std::exception& e) {
        failure = std::current_exception(); // thrown as it is, once every process knows
        refusal = e.what();
    }
    agreeOnRefusal(group, refusal, failure);
    return note;
}

MemoryNeed gpuMemoryNeed(const NetworkBytes& network, int towers, std::int64_t batchPerTower,
                         const std::string& optimizer, int averages, std::int64_t heldSet)
{
    MemoryNeed n = hostMemoryNeed(network, towers, batchPerTower, optimizer, false);
    n.average = std::int64_t(std::max(averages, 0)) * network.weights;
    n.checkpoint = 0;
    n.heldSet = heldSet;
    return n;
}

namespace {

// What this process keeps on one GPU, as the others read it: "<key> <towers> <averages>", the key
// being the machine and the GPU's PCI bus id (each process's own otherwise).
struct GpuShare
{
    std::string key;
    int towers = 0, averages = 0;
};

std::string shareLines(const std::vector<GpuShare>& shares)
{
    std::string text;
    for (const GpuShare& s : shares)
        text += s.key + " " + std::to_string(s.towers) + " " + std::to_string(s.averages) + "\n";
    return text;
}

std::vector<GpuShare> sharesOf(const std::string& lines)
{
    std::vector<GpuShare> out;
    std::istringstream in(lines);
    GpuShare s;
    while (in >> s.key >> s.towers >> s.averages) out.push_back(s);
    return out;
}

} // namespace

void checkGpuMemory(const TrainConfig& c, ProcessGroup* group, int gpuCount,
                    const std::function<std::uint64_t(int)>& freeBytes, std::int64_t heldSet,
                    const std::function<std::string(int)>& busIdOf)
{
    std::string refusal;
    std::exception_ptr failure;
    // This process's towers and moving average on each of its GPUs (gpuOfTower). No GPU, or a
    // list the towers refuse: they say why.
    const std::size_t count = std::size_t(std::max(gpuCount, 0));
    std::vector<int> towersOn(count, 0), averagesOn(count, 0);
    std::vector<std::string> keys(count);
    try {
        const bool listed = gpuCount > 0 && (c.gpus.empty() || int(c.gpus.size()) == c.towers);
        const int localRank = group ? group->localRank() : 0;
        for (int t = 0; listed && t < c.towers; ++t) {
            const int g = gpuOfTower(c.gpus, c.towers, localRank, t, gpuCount);
            if (g < 0 || g >= gpuCount) continue; // the towers say why
            ++towersOn[std::size_t(g)];
            if (t == 0 && c.emaDecay > 0) ++averagesOn[std::size_t(g)];
        }
        // The machine's name keeps GPUs of different machines at one PCI bus id apart.
        const std::string host = group ? group->hostName() : std::string();
        for (std::size_t g = 0; g < count; ++g) {
            if (towersOn[g] == 0) continue;
            const std::string bus = busIdOf ? busIdOf(int(g)) : std::string();
            // A GPU whose bus id CUDA cannot say is counted as this process's alone.
            keys[g] = host + "/" +
                      (bus.empty() ? "rank" + std::to_string(group ? group->rank() : 0) + ":" +
                                         std::to_string(g)
                                   : bus);
        }
    } catch (const std::bad_alloc&) {
        refusal = "not enough host memory to work out this run's need on its GPUs";
    } catch (const std::exception& e) {
        failure = std::current_exception();
        refusal = e.what();
    }
    // The run's processes that share a GPU (CUDA may number it differently in each: a batch
    // scheduler's CUDA_VISIBLE_DEVICES) count together there: every process tells the others
    // what it keeps where, before any takes its memory. Reached by every process.
    std::vector<GpuShare> everyone;
    {
        std::vector<GpuShare> mine;
        for (std::size_t g = 0; g < count; ++g)
            if (!keys[g].empty()) mine.push_back({keys[g], towersOn[g], averagesOn[g]});
        if (group && group->size() > 1) {
            for (const std::string& lines : group->allGatherStrings(shareLines(mine)))
                for (const GpuShare& s : sharesOf(lines)) everyone.push_back(s);
        } else {
            everyone = mine;
        }
    }
    try {
        std::optional<NetworkBytes> network;
        for (int g = 0; g < gpuCount && refusal.empty(); ++g) {
            if (keys[std::size_t(g)].empty()) continue; // asked only of this process's GPUs
            const std::uint64_t free = freeBytes(g);
            if (free == 0) continue; // CUDA cannot say
            if (!network)
                network =
                    networkBytes(*buildModel(resolveModel(c.model, c.modelDefinition), c.classes));
            int towers = 0, averages = 0, processes = 0;
            for (const GpuShare& s : everyone)
                if (s.key == keys[std::size_t(g)]) {
                    towers += s.towers;
                    averages += s.averages;
                    ++processes;
                }
            MemoryNeed need = gpuMemoryNeed(*network, towers, c.batchPerTower, c.optimizer.kind,
                                            averages, heldSet * processes);
            addAccumulation(need, *network, c.accumulate);
            if (std::uint64_t(need.floor()) > free)
                refusal = "not enough memory on GPU " + std::to_string(g) + " for this run: " +
                          (processes > 1 ? "its " + std::to_string(processes) +
                                               " processes there need at least "
                                         : std::string("it needs at least ")) +
                          cpu::byteText(need.floor()) + " there (" + need.parts() + "), and " +
                          cpu::byteText(std::int64_t(free)) +
                          " of it is free. Fewer towers on it, a smaller batch or a smaller "
                          "network would fit" +
                          (heldSet > 0 ? std::string(", or the training images made on the "
                                                     "host (gpuData off, --gpu-data off)")
                                       : std::string());
        }
    } catch (const std::bad_alloc&) {
        refusal = "not enough host memory to work out this run's need on its GPUs";
    } catch (const std::exception& e) {
        if (!failure) {
            failure = std::current_exception(); // thrown as it is, once every process knows
            refusal = e.what();
        }
    }
    agreeOnRefusal(group, refusal, failure);
}

std::string checkMemory(const TrainConfig& c, ProcessGroup* group, std::int64_t heldSet,
                        StartRead start)
{
    if (isHostBackend(c.backend)) return checkHostMemory(c, group, start);
    GpuBackend* gpu = cudaBackend();
    const int count = gpu ? gpu->deviceCount() : 0;
    checkGpuMemory(
        c, group, count, [gpu](int g) { return gpu->freeMemory(g); }, heldSet,
        [gpu](int g) {
            try {
                return gpu->pciBusId(g);
            } catch (const std::exception&) {
                return std::string();
            }
        });
    return {};
}

} // namespace towers::engine
