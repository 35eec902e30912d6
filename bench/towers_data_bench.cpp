// towers-data-bench: how fast the input pipeline is.
//   towers-data-bench [--seconds S] [--batch N] [--dataset NAME]
// Times, on synthetic images (or a real dataset found along the default search path):
//   * the per-image preprocessing on one thread: the seeds' CIFAR-10 training distortions (24x24
//     crop, flip, brightness, contrast, per-image standardisation), their evaluation form, the
//     32x32 pad-and-crop recipe, and the 28x28 translate-and-normalise recipe;
//   * the whole BatchLoader (batch of N, one tower) with 0, 1 and 2 worker threads, making the
//     images, and making only their draws (LoaderOptions::drawsOnly: what the loader does when the
//     towers hold the training set on their GPUs and distort it there).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "engine/bench/data_bench.h"

using namespace towers::engine;

namespace {

void usage()
{
    std::fprintf(stderr, "usage: towers-data-bench [--seconds S] [--batch N] [--dataset NAME]\n");
}

void printPreprocess(const char* what, const PreprocessBenchResult& r)
{
    std::printf("  %-48s %10.0f images/s  (%lld images in %.2f s)\n", what, r.imagesPerSec,
                static_cast<long long>(r.images), r.seconds);
}

void printLoader(int workers, bool draws, const LoaderBenchResult& r)
{
    std::printf("  %d worker%s %-38s %10.0f images/s  (%lld batches in %.2f s, next() waited "
                "%.3f ms per batch)\n",
                workers, workers == 1 ? " " : "s",
                draws ? (workers == 0 ? "draws only, on the caller's thread" : "draws only")
                      : (workers == 0 ? "(on the caller's thread)" : ""),
                r.imagesPerSec, static_cast<long long>(r.batches), r.seconds, r.meanWaitMs);
}

} // namespace

int main(int argc, char** argv)
{
    double seconds = 2;
    int batch = 128;
    std::string dataset;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (i + 1 >= argc) {
            usage();
            return 2;
        }
        if (a == "--seconds")
            seconds = std::atof(argv[++i]);
        else if (a == "--batch")
            batch = std::atoi(argv[++i]);
        else if (a == "--dataset")
            dataset = argv[++i];
        else {
            usage();
            return 2;
        }
    }
    if (seconds <= 0 || batch < 1) {
        usage();
        return 2;
    }
    try {
        ImageSet cifar, gray;
        if (dataset.empty()) {
            cifar = syntheticImageSet(50000, 32, 32, 3, 10, 1);
            gray = syntheticImageSet(60000, 28, 28, 1, 10, 2);
            std::printf("synthetic images: 50,000 of 32x32x3 and 60,000 of 28x28x1\n");
        } else {
            Dataset d = loadDataset(dataset, defaultSearchPath());
            std::printf("%s from %s: %lld training images of %s\n", d.name.c_str(),
                        d.location.c_str(), static_cast<long long>(d.train.count),
                        d.train.imageShape().str().c_str());
            (d.train.channels == 3 ? cifar : gray) = std::move(d.train);
        }

        std::printf("preprocessing, one thread:\n");
        if (cifar.count) {
            const Preprocessing tutorial = cifarDistortions(24);
            printPreprocess("cifarDistortions(24), training distortions",
                            benchmarkPreprocessing(cifar, tutorial, true, seconds));
            printPreprocess("cifarDistortions(24), evaluation (central crop)",
                            benchmarkPreprocessing(cifar, tutorial, false, seconds));
            printPreprocess("cifarPadCrop(4), 32x32 training",
                            benchmarkPreprocessing(cifar, cifarPadCrop(cifar, 4), true, seconds));
        }
        if (gray.count)
            printPreprocess(
                "translateAndNormalize(2), 28x28 training",
                benchmarkPreprocessing(gray, translateAndNormalize(gray, 2), true, seconds));

        const ImageSet& set = cifar.count ? cifar : gray;
        const Preprocessing recipe =
            cifar.count ? cifarDistortions(24) : translateAndNormalize(gray, 2);
        std::printf("BatchLoader, batch %d, one tower, %s training distortions:\n", batch,
                    cifar.count ? "CIFAR-10" : "28x28");
        for (bool draws : {false, true})
            for (int workers : {0, 1, 2}) {
                LoaderOptions o;
                o.batchPerTower = batch;
                o.workers = workers;
                o.drawsOnly = draws;
                printLoader(workers, draws, benchmarkLoader(set, recipe, o, seconds));
            }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "towers-data-bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
