#pragma once
// The input pipeline: worker threads preprocess examples of an in-memory ImageSet into global
// batches and fill a bounded prefetch queue (the seeds' queue holds 2 x towers batches).
#include <cstdint>
#include <functional>
#include <memory>

#include "engine/data/batch_source.h"
#include "engine/data/preprocessing.h"

namespace towers::engine {

struct LoaderOptions
{
    int towers = 1;
    int batchPerTower = 128;
    // Across processes: the global towers of the run (0 = `towers`) and the global index of this
    // process's first. The global batch is globalTowers x batchPerTower (the epoch's length, the
    // permutation and example slot k's distortions are the global batch's); this loader builds
    // only the slices of its towers, [firstTower, firstTower + towers), bitwise as a loader of
    // every tower would.
    int globalTowers = 0;
    int firstTower = 0;
    std::uint64_t seed = 1;
    bool shuffle = true; // a fresh permutation every epoch (derived from seed and epoch)
    // With shuffle: every epoch's order is class-balanced instead (balancedOrder, from the same
    // generator): each class with images comes up equally often, its images repeated or only some
    // of them drawn. The epoch's length stays the set's.
    bool balanced = false;
    bool augment = true; // apply the recipe's training distortions
    int workers = 1;     // preprocessing threads (0 = preprocess on the caller's thread)
    int prefetch = 0;    // batches queued ahead; 0 = 2 * towers
    bool pinned = false; // batches in page-locked memory, for GPU towers (Tensor::pinned)
    // Batches of draws, not images (Batch::draws): each example's index and distortions, the same
    // as the images' would be, for towers that preprocess the set where they hold it
    // (TowerSet::holdTrainingSet). Building one is a few microseconds: no pixel is touched here.
    bool drawsOnly = false;

    // Optional check of each finished batch, run by the thread that built it (e.g. a label-range
    // or finiteness check). What it throws reaches the caller from next() for that step, like any
    // other error in a worker.
    std::function<void(const Batch&)> check;
};

// Batches of `set` (which must outlive the loader). The distortions of example slot k of step s
// are drawn from a generator seeded by (seed, s, k), so batches do not depend on `workers`.
// next() and seek() are called from one thread (the trainer's); the workers are internal.
class BatchLoader final : public BatchSource
{
public:
    // Throws InvalidArgument when the options make no sense (batch < 1, towers < 1, a global
    // batch larger than the set, a recipe that does not fit the images).
    BatchLoader(const ImageSet& set, Preprocessing recipe, LoaderOptions options);
    ~BatchLoader() override;

    std::int64_t stepsPerEpoch() const override;
    // Discards the queued batches (and stops the ones being built) before repositioning.
    // Throws InvalidArgument for a negative step.
    void seek(std::int64_t step) override;
    // When a worker failed on this step, throws its error, and throws it again on every later
    // call until seek() (the stream never skips a step).
    const Batch& next() override;
    double lastWaitMs() const override;

private:
    struct Impl;
    std::unique_ptr<Impl> m;
};

// The evaluation form (no distortion) of examples [begin, end) of `set`, in order, into `images`
// (Float32 [end - begin, H, W, C], resized with Tensor::ensure) and `labels` (Int32). Evaluation
// walks the test set with this, counting every example exactly once.
void evaluationBatch(const ImageSet& set, const Preprocessing& recipe, std::int64_t begin,
                     std::int64_t end, Tensor& images, Tensor& labels);

// The images that the first `count` rows of `draws` (a Batch's, LoaderOptions::drawsOnly) stand
// for, made on the host as the loader would have made them: Float32 [count, H, W, C] into `images`.
// For what shows a batch (TensorBoard's grid of training images). InvalidArgument for a row that
// does not fit the set.
void imagesOfDraws(const ImageSet& set, const Preprocessing& recipe, const Tensor& draws,
                   std::int64_t count, Tensor& images);

} // namespace towers::engine
