#include "engine/bench/data_bench.h"

#include <chrono>
#include <vector>

namespace towers::engine {

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0)
{
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

} // namespace

ImageSet syntheticImageSet(std::int64_t count, int height, int width, int channels, int classes,
                           std::uint64_t seed)
{
    if (count < 1 || height < 1 || width < 1 || channels < 1 || classes < 1)
        throw InvalidArgument("syntheticImageSet: every size must be at least 1");
    ImageSet set;
    set.count = count;
    set.height = height;
    set.width = width;
    set.channels = channels;
    set.pixels.resize(static_cast<std::size_t>(count * set.imageBytes()));
    set.labels.resize(static_cast<std::size_t>(count));
    Rng rng(seed);
    for (std::size_t i = 0; i < set.pixels.size(); i += 8) {
        std::uint64_t r = rng.next();
        for (std::size_t b = i; b < std::min(i + 8, set.pixels.size()); ++b, r >>= 8)
            set.pixels[b] = static_cast<std::uint8_t>(r);
    }
    for (auto& l : set.labels)
        l = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(classes)));
    return set;
}

PreprocessBenchResult benchmarkPreprocessing(const ImageSet& set, const Preprocessing& recipe,
                                             bool augment, double seconds)
{
    recipe.validateFor(set.imageShape());
    std::vector<float> out(static_cast<std::size_t>(recipe.height) * recipe.width *
                           recipe.channels);
    Rng rng(1);
    PreprocessBenchResult r;
    const Clock::time_point t0 = Clock::now();
    std::int64_t i = 0;
    // Check the clock every 1,024 images: cheap next to the work.
    do {
        for (int n = 0; n < 1024; ++n, ++i) {
            preprocessImage(recipe, set, i % set.count, augment, rng, out.data());
            r.checksum += out[static_cast<std::size_t>(i) % out.size()];
        }
    } while (secondsSince(t0) < seconds);
    r.seconds = secondsSince(t0);
    r.images = i;
    r.imagesPerSec = static_cast<double>(i) / r.seconds;
    return r;
}

LoaderBenchResult benchmarkLoader(const ImageSet& set, const Preprocessing& recipe,
                                  const LoaderOptions& options, double seconds)
{
    BatchLoader loader(set, recipe, options);
    loader.next(); // starts the pipeline; not timed
    LoaderBenchResult r;
    double waited = 0;
    const Clock::time_point t0 = Clock::now();
    do {
        const Batch& b = loader.next();
        waited += loader.lastWaitMs();
        r.images += b.labels.dim(0);
        ++r.batches;
    } while (secondsSince(t0) < seconds);
    r.seconds = secondsSince(t0);
    r.imagesPerSec = static_cast<double>(r.images) / r.seconds;
    r.meanWaitMs = waited / static_cast<double>(r.batches);
    return r;
}

} // namespace towers::engine
