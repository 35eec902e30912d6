#pragma once
// Times the input pipeline: the per-image preprocessing on one thread, and the whole loader
// (workers, queue, batch assembly) as the trainer sees it. The engine side of towers-data-bench.
#include <cstdint>
#include <string>

#include "engine/data/batch_loader.h"

namespace towers::engine {

// `count` random images of [height, width, channels] with labels in [0, classes), from `seed`
// (for timing: the preprocessing cost does not depend on the content).
ImageSet syntheticImageSet(std::int64_t count, int height, int width, int channels, int classes,
                           std::uint64_t seed);

struct PreprocessBenchResult
{
    std::int64_t images = 0;
    double seconds = 0;
    double imagesPerSec = 0;
    double checksum = 0; // sum of the outputs, so the work cannot be optimised away
};

// Preprocesses images of `set` in order (wrapping around) on the calling thread for at least
// `seconds` seconds, with the training distortions when `augment`.
PreprocessBenchResult benchmarkPreprocessing(const ImageSet& set, const Preprocessing& recipe,
                                             bool augment, double seconds);

struct LoaderBenchResult
{
    std::int64_t batches = 0, images = 0;
    double seconds = 0;
    double imagesPerSec = 0;
    double meanWaitMs = 0; // mean time next() blocked
};

// Pulls batches from a BatchLoader over `set` for at least `seconds` seconds (after one untimed
// batch that starts the workers) and does nothing with them: the loader's ceiling.
LoaderBenchResult benchmarkLoader(const ImageSet& set, const Preprocessing& recipe,
                                  const LoaderOptions& options, double seconds);

} // namespace towers::engine
