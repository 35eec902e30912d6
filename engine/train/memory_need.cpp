#include "engine/train/memory_need.h"

#include "engine/cpu/host_memory.h"
#include "engine/dist/process_group.h"
#include "engine/errors.h"
#include "engine/models/registry.h"
#include "engine/train/train_config.h"

namespace towers::engine {

namespace {

// Optimizer state per trainable weight: a momentum buffer, Adam's two moments.
int optimizerSlots(const std::string& optimizer)
{
    if (optimizer == "momentum" || optimizer == "nesterov") return 1;
    if (optimizer == "adam") return 2;
    return 0;
}

} // namespace

std::string MemoryNeed::parts() const
{
    std::string s = "weights and gradients of " + std::to_string(towers) + " tower(s) " +
                    cpu::byteText(replicas);
    if (optimizer) s += ", optimizer state " + cpu::byteText(optimizer);
    if (average) s += ", moving average " + cpu::byteText(average);
    if (exchange) s += ", gradients exchanged with the other processes " + cpu::byteText(exchange);
    return s + ", layer outputs of " + std::to_string(batchPerTower) + " examples per tower " +
           cpu::byteText(outputs);
}

MemoryNeed hostMemoryNeed(const Model& model, int towers, std::int64_t batchPerTower,
                          const std::string& optimizer, bool average, int processes)
{
    std::int64_t weights = 0, trainable = 0;
    for (const Parameter* p : model.parameters()) {
        weights += std::int64_t(p->value.bytes());
        if (p->trainable) trainable += std::int64_t(p->value.bytes());
    }
    std::int64_t outputs = 0; // float32 elements per example
    const std::vector<LayerRow> rows = model.layerTable();
    for (const ShownLayerRow& r : shownLayerRows(rows)) outputs += r.row->outputShape.numel();

    MemoryNeed n;
    n.towers = towers;
    n.batchPerTower = batchPerTower;
    const int slots = optimizerSlots(optimizer);
    n.replicas = std::int64_t(towers) * (weights + trainable);
    n.optimizer = std::int64_t(towers) * slots * trainable;
    n.average = average ? weights : 0;
    n.checkpoint = weights + slots * trainable + n.average;
    n.exchange = processes > 1 ? std::int64_t(towers) * trainable : 0;
    n.outputs = std::int64_t(towers) * outputs * batchPerTower * std::int64_t(sizeof(float));
    return n;
}

std::string checkHostMemory(const TrainConfig& c, ProcessGroup* group)
{
    std::string refusal, note;
    if (const std::optional<cpu::HostMemory> room = cpu::availableHostMemory()) {
        const auto model = buildModel(resolveModel(c.model, c.modelDefinition), c.classes);
        const MemoryNeed need = hostMemoryNeed(*model, c.towers, c.batchPerTower, c.optimizer.kind,
                                               c.emaDecay > 0, group ? group->size() : 1);
        const int here = group ? std::max(1, group->localSize()) : 1;
        const std::string who =
            here > 1 ? "its " + std::to_string(here) + " processes on this machine need"
                     : "it needs";
        const std::string each = here > 1 ? "each: " : "";
        const std::string may = "this process may take " + cpu::byteText(room->bytes) + " more (" +
                                room->limitedBy + ")";
        if (need.floor() * here > room->bytes)
            refusal = "not enough memory for this run: " + who + " at least " +
                      cpu::byteText(need.floor() * here) + " (" + each + need.parts() + "), and " +
                      may + ". Fewer towers, a smaller batch or a smaller network would fit";
        else if (need.total() * here > room->bytes)
            note = "this run needs at least " + cpu::byteText(need.floor() * here) + " (" + each +
                   need.parts() + ") and " + cpu::byteText(need.total() * here) +
                   " while it writes a checkpoint, and " + may +
                   ": the system may end it for lack of memory (fewer towers or a smaller batch "
                   "would take less)";
    }
    if (group && group->size() > 1) {
        const std::vector<std::string> all = group->allGatherStrings(refusal);
        if (!refusal.empty()) throw Error(refusal);
        for (std::size_t r = 0; r < all.size(); ++r)
            if (!all[r].empty())
                throw Error("rank " + std::to_string(r) + " refused the run: " + all[r]);
    } else if (!refusal.empty()) {
        throw Error(refusal);
    }
    return note;
}

} // namespace towers::engine
