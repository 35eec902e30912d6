#pragma once
// A small deterministic in-memory BatchSource for the training tests: labelled images whose class
// is learnable (a per-class pattern plus noise). Obeys the contract of engine/data/batch_source.h:
// the batch of a step is a pure function of (seed, step), each epoch is a fresh shuffle, seek()
// positions the stream, and the global batch does not depend on how it is split into towers.
#include <cstdint>
#include <vector>

#include "engine/data/batch_source.h"
#include "engine/train/evaluation.h"
#include "engine/train/train_config.h"

namespace towers::test {

class SyntheticBatches final : public engine::BatchSource
{
public:
    // `examples` training examples of shape imageShape ([H, W, C]) in `classes` classes.
    SyntheticBatches(engine::Shape imageShape, int classes, int towers, int batchPerTower,
                     std::int64_t examples, std::uint64_t seed);

    std::int64_t stepsPerEpoch() const override;
    void seek(std::int64_t step) override { m_next = step; }
    const engine::Batch& next() override;
    double lastWaitMs() const override { return 0; }

    // Puts a NaN into the images of global step `step` (-1: never).
    void injectNanAt(std::int64_t step) { m_nanStep = step; }
    // How many times next() was called (to check that a resumed run re-reads nothing).
    std::int64_t calls() const { return m_calls; }

    // Example `id` of the set (ids >= examples() are a disjoint "test" set): its image and label.
    void example(std::int64_t id, float* image, std::int32_t& label) const;
    std::int64_t examples() const { return m_examples; }
    // An evaluation callback over test examples [examples(), examples() + count).
    engine::EvalBatchFn evaluationBatches() const;

private:
    const std::vector<std::int64_t>& permutation(std::int64_t epoch);
    engine::Shape m_shape;
    int m_classes, m_towers, m_perTower;
    std::int64_t m_examples;
    std::uint64_t m_seed;
    std::vector<float> m_prototypes; // classes x H*W*C
    std::int64_t m_next = 0, m_nanStep = -1, m_calls = 0;
    std::int64_t m_permEpoch = -1;
    std::vector<std::int64_t> m_perm;
    engine::Batch m_batch;
};

// The training tests' usual run: fashion-fast on 2 towers x 4 images, 1 thread each, momentum at
// lr 0.01, 6 steps, seed 3; each test sets on top what it checks.
engine::TrainConfig smallTrainConfig();
// 400 synthetic 28x28 examples in 10 classes, split into c's towers and batches.
SyntheticBatches syntheticBatchesFor(const engine::TrainConfig& c, std::uint64_t seed = 11);

} // namespace towers::test
