#include "training_fixture.h"

#include "dataset_files.h"

namespace towers::test {

void writeTinyMnist(const std::filesystem::path& root, std::int64_t train, std::int64_t test)
{
    writeIdxDataset(root / "mnist", train, test, 28, 28, /*gz=*/false, /*seed=*/11);
}

engine::SessionOptions tinyRun(const std::filesystem::path& dataRoot,
                               const std::filesystem::path& runDir, std::int64_t steps, int towers,
                               std::int64_t evalEvery)
{
    engine::SessionOptions o;
    engine::TrainConfig& c = o.config;
    c.model = "fashion-fast";
    c.dataset = "mnist";
    c.towers = towers;
    c.threadsPerTower = 1;
    c.batchPerTower = 16;
    c.steps = steps;
    c.optimizer.kind = "momentum";
    c.schedule.lr = 0.05;
    c.logEvery = 1;
    c.evalEvery = evalEvery;
    c.checkpointEvery = 0;
    c.augmentation = "default";
    o.searchPath = {dataRoot};
    o.runDirectory = runDir;
    return o;
}

} // namespace towers::test
