#pragma once
// The contract between the input pipeline and the trainer: a stream of global batches, each the
// concatenation of one distinct slice per tower, positioned by global step.
#include <cstdint>

#include "engine/tensor/tensor.h"

namespace towers::engine {

// One global batch: towers x batchPerTower preprocessed examples, or, for towers that hold the
// training set where they compute (TowerSet::holdTrainingSet), the draws they preprocess it by.
struct Batch
{
    Tensor images; // Float32 [towers * batchPerTower, H, W, C] (NHWC); empty when `draws` is set
    Tensor labels; // Int32 [towers * batchPerTower]
    // Float64 [towers * batchPerTower, preprocess::kDrawColumns] (distortion_math.h): each
    // example's index in the training set and its distortions, for the ops' preprocessImages
    // (LoaderOptions::drawsOnly); empty when `images` holds the examples.
    Tensor draws;
    std::int64_t step = 0;  // the global step this batch is for
    std::int64_t epoch = 0; // the epoch (0-based) its examples are drawn from
    int towers = 1;

    std::int64_t perTower() const { return labels.dim(0) / towers; }
    // Tower t's slice (views, no copy).
    Tensor towerImages(int t) const { return images.slice(t * perTower(), (t + 1) * perTower()); }
    Tensor towerLabels(int t) const { return labels.slice(t * perTower(), (t + 1) * perTower()); }
    Tensor towerDraws(int t) const { return draws.slice(t * perTower(), (t + 1) * perTower()); }
};

class BatchSource
{
public:
    virtual ~BatchSource() = default;

    // Global steps in one epoch (examples per epoch / global batch, the last partial batch of an
    // epoch dropped; every epoch is a fresh shuffle).
    virtual std::int64_t stepsPerEpoch() const = 0;
    // Positions the stream so that the next call to next() returns the batch of global step
    // `step`. The batch of a step is a pure function of the source's seed and the step: the same
    // whatever the number of worker threads, and whether the stream ran from 0 or was positioned
    // (this is what makes a resumed run equal an uninterrupted one).
    virtual void seek(std::int64_t step) = 0;
    // Blocks until the batch of the next step is ready and returns it; the reference stays valid
    // until the next call to next() or seek(). Throws the error a worker hit (IoError, ...).
    virtual const Batch& next() = 0;
    // Milliseconds the latest next() spent waiting for the batch (0 when it was ready).
    virtual double lastWaitMs() const = 0;
};

} // namespace towers::engine
