// A training run that tst_checkpoint kills with SIGKILL at random moments: fashion-fast on
// synthetic data, a checkpoint after every step (so that most of the time is spent writing
// them), resuming from the newest good checkpoint of the run directory at each start.
//   train_kill_helper RUN_DIR
// Prints "started <step>" once training is about to begin.
#include <cstdio>
#include <exception>

#include "engine/train/trainer.h"
#include "synthetic_batches.h"

using namespace towers::engine;

int main(int argc, char** argv)
{
    if (argc != 2) {
        std::fprintf(stderr, "usage: train_kill_helper RUN_DIR\n");
        return 2;
    }
    try {
        TrainConfig c;
        c.model = "fashion-fast";
        c.towers = 2;
        c.threadsPerTower = 1;
        c.batchPerTower = 4;
        c.steps = 1000000;
        c.optimizer.kind = "momentum";
        c.schedule.lr = 0.01;
        c.emaDecay = 0.99;
        c.checkpointEvery = 1;
        c.keepCheckpoints = 3;
        c.logEvery = 1;
        c.dataset = "synthetic";
        towers::test::SyntheticBatches source({28, 28, 1}, 10, c.towers, c.batchPerTower, 4000, 7);
        Trainer trainer(c, source, argv[1],
                        {{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}, "{}", {}});
        const auto resumed = trainer.resumeFromNewest();
        std::printf("started %lld\n", static_cast<long long>(resumed.value_or(0)));
        std::fflush(stdout);
        trainer.run();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "train_kill_helper: %s\n", e.what());
        return 1;
    }
    return 0;
}
