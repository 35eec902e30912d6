#include "checkpoint_files.h"

#include "engine/models/registry.h"
#include "engine/train/checkpoint.h"
#include "engine/train/recipe.h"

namespace towers::test {

void writeFreshCheckpoint(const std::string& model, const engine::Dataset& data,
                          const std::filesystem::path& file, std::uint64_t seed, std::int64_t step,
                          const std::string& config)
{
    // The classifier has the dataset's classes, as a run on it trains (CIFAR-100's 100).
    auto m = engine::createModel(model, seed, int(data.classNames.size()));
    engine::CheckpointInfo info;
    info.model = model;
    info.dataset = data.name;
    info.classNames = data.classNames;
    info.inputShape = m->inputShape();
    info.preprocessing = engine::preprocessingFor(engine::findModel(model), data).toJson();
    info.step = step;
    info.config = config; // the run's TrainConfig as JSON; empty: none recorded
    engine::writeCheckpoint(file, engine::makeCheckpoint(*m, info));
}

} // namespace towers::test
