#include "engine/train/memory_need.h"

#include "engine/cpu/host_memory.h"
#include "engine/models/model.h"

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

} // namespace towers::engine
