// The input pipeline: batches are a pure function of (seed, step) whatever the number of workers,
// seek equals running, every epoch is a fresh permutation, the global batch splits into one
// distinct slice per tower, the prefetch queue is bounded, worker errors reach next(), and the
// destructor stops busy workers promptly.
#include <QtTest>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <thread>

#include "engine/data/batch_loader.h"

using namespace towers::engine;
using namespace std::chrono_literals;

namespace {

// 8x8 gray images whose first two pixels spell their index; label = index % classes.
ImageSet indexedSet(int n, int classes)
{
    ImageSet set;
    set.count = n;
    set.height = set.width = 8;
    set.channels = 1;
    for (int i = 0; i < n; ++i) {
        set.pixels.push_back(static_cast<std::uint8_t>(i % 256));
        set.pixels.push_back(static_cast<std::uint8_t>(i / 256));
        for (int j = 2; j < 64; ++j)
            set.pixels.push_back(static_cast<std::uint8_t>((i * 7 + j) % 256));
        set.labels.push_back(i % classes);
    }
    return set;
}

Preprocessing scaleOnly()
{
    Preprocessing p;
    p.height = p.width = 8;
    p.channels = 1;
    p.normalization = Preprocessing::Normalization::Scale;
    return p;
}

int decode(const float* image)
{
    return static_cast<int>(std::lround(image[0] * 255) + 256 * std::lround(image[1] * 255));
}

ImageSet randomCifar(int n, std::uint64_t seed)
{
    ImageSet set;
    set.count = n;
    set.height = set.width = 32;
    set.channels = 3;
    Rng rng(seed);
    set.pixels.resize(static_cast<std::size_t>(n) * 3072);
    for (auto& p : set.pixels) p = static_cast<std::uint8_t>(rng.below(256));
    for (int i = 0; i < n; ++i) set.labels.push_back(static_cast<std::int32_t>(rng.below(10)));
    return set;
}

struct Snapshot
{
    std::vector<float> images;
    std::vector<std::int32_t> labels;
    std::int64_t step, epoch;
    bool operator==(const Snapshot& o) const
    {
        return step == o.step && epoch == o.epoch && labels == o.labels &&
               images.size() == o.images.size() &&
               std::memcmp(images.data(), o.images.data(), images.size() * sizeof(float)) == 0;
    }
};

Snapshot snap(const Batch& b)
{
    const auto im = b.images.span<float>();
    const auto lb = b.labels.span<std::int32_t>();
    return {{im.begin(), im.end()}, {lb.begin(), lb.end()}, b.step, b.epoch};
}

std::vector<Snapshot> run(BatchSource& source, int steps)
{
    std::vector<Snapshot> out;
    for (int s = 0; s < steps; ++s) out.push_back(snap(source.next()));
    return out;
}

LoaderOptions options(int towers, int perTower, int workers, std::uint64_t seed = 7)
{
    LoaderOptions o;
    o.towers = towers;
    o.batchPerTower = perTower;
    o.workers = workers;
    o.seed = seed;
    return o;
}

} // namespace

class TestBatchLoader : public QObject
{
    Q_OBJECT

private slots:
    void sameBatchesWhateverTheWorkers()
    {
        const ImageSet set = randomCifar(60, 1);
        const Preprocessing recipe = cifarDistortions(24);
        BatchLoader reference(set, recipe, options(2, 4, 0));
        QCOMPARE(reference.stepsPerEpoch(), 7); // 60 / 8, the partial batch dropped
        const std::vector<Snapshot> want = run(reference, 20);
        QCOMPARE(want[19].epoch, 2);
        for (int workers : {1, 3}) {
            for (int prefetch : {0, 1}) {
                LoaderOptions o = options(2, 4, workers);
                o.prefetch = prefetch;
                BatchLoader loader(set, recipe, o);
                QVERIFY2(run(loader, 20) == want,
                         qPrintable(QString("workers %1, prefetch %2").arg(workers).arg(prefetch)));
            }
        }
        // Another seed: other batches.
        BatchLoader other(set, recipe, options(2, 4, 1, 8));
        QVERIFY(!(run(other, 1)[0] == want[0]));
    }

    // Draws instead of images (for towers that hold the set, TowerSet::holdTrainingSet): the same
    // labels, steps and epochs, and draws that make exactly the images, whatever the workers,
    // for a process's share too; no image is made.
    void drawsAreTheImages()
    {
        const ImageSet set = randomCifar(60, 2);
        const Preprocessing recipe = cifarDistortions(24);
        BatchLoader reference(set, recipe, options(4, 3, 0));
        const std::vector<Snapshot> want = run(reference, 12);
        for (int workers : {0, 2}) {
            for (int first : {0, 2}) {
                LoaderOptions o = options(2, 3, workers);
                o.globalTowers = 4;
                o.firstTower = first;
                o.drawsOnly = true;
                BatchLoader draws(set, recipe, o);
                draws.seek(2);
                for (int s = 2; s < 12; ++s) {
                    const Batch& b = draws.next();
                    QVERIFY(b.images.empty());
                    QCOMPARE(b.draws.shape(), (Shape{6, preprocess::kDrawColumns}));
                    QCOMPARE(b.step, std::int64_t(s));
                    const auto& all = want[std::size_t(s)];
                    QCOMPARE(b.epoch, all.epoch);
                    Tensor images;
                    imagesOfDraws(set, recipe, b.draws, 6, images);
                    const std::size_t per = std::size_t(images.numel()) / 6;
                    for (std::size_t i = 0; i < 6; ++i)
                        QCOMPARE(b.labels.data<std::int32_t>()[i],
                                 all.labels[std::size_t(first) * 3 + i]);
                    QVERIFY(std::memcmp(images.raw(),
                                        all.images.data() + std::size_t(first) * 3 * per,
                                        images.bytes()) == 0);
                    // Each row names its example: the label is that example's.
                    for (std::int64_t i = 0; i < 6; ++i)
                        QCOMPARE(b.labels.data<std::int32_t>()[i],
                                 set.labels[std::size_t(preprocess::drawIndex(
                                     b.draws.data<double>() + i * preprocess::kDrawColumns))]);
                }
            }
        }
        // A row that does not fit is refused, naming it.
        LoaderOptions o = options(2, 3, 0);
        o.drawsOnly = true;
        BatchLoader draws(set, recipe, o);
        Tensor bad = draws.next().draws.clone(), images;
        bad.data<double>()[preprocess::kDrawColumns + preprocess::kDrawCropX] = 9; // 32 - 24 = 8
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, imagesOfDraws(set, recipe, bad, 6, images));
    }

    // A process's share of a run across processes: towers [first, first + towers) of the global
    // batch, bitwise the slices a loader of every tower builds (the same examples, the same
    // distortions), across an epoch boundary and after a seek; shares that do not fit are refused.
    void shareOfTheGlobalBatch()
    {
        const ImageSet set = randomCifar(60, 4);
        const Preprocessing recipe = cifarDistortions(24);
        BatchLoader whole(set, recipe, options(4, 3, 0));
        const std::vector<Snapshot> want = run(whole, 12);
        for (int first : {0, 2}) {
            LoaderOptions o = options(2, 3, 1);
            o.globalTowers = 4;
            o.firstTower = first;
            BatchLoader share(set, recipe, o);
            QCOMPARE(share.stepsPerEpoch(), whole.stepsPerEpoch()); // the global batch's epoch
            share.seek(3);
            for (int s = 3; s < 12; ++s) {
                const Batch& b = share.next();
                QCOMPARE(b.towers, 2);
                QCOMPARE(b.labels.dim(0), std::int64_t(6));
                const Snapshot mine = snap(b);
                const std::size_t per = mine.images.size() / 6; // floats per example
                const auto& all = want[std::size_t(s)];
                QCOMPARE(mine.epoch, all.epoch);
                for (std::size_t i = 0; i < 6; ++i)
                    QCOMPARE(mine.labels[i], all.labels[std::size_t(first) * 3 + i]);
                QVERIFY(std::memcmp(mine.images.data(),
                                    all.images.data() + std::size_t(first) * 3 * per,
                                    mine.images.size() * sizeof(float)) == 0);
            }
        }
        LoaderOptions bad = options(2, 3, 0);
        bad.globalTowers = 4;
        bad.firstTower = 3;
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, BatchLoader(set, recipe, bad));
        bad.firstTower = -1;
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, BatchLoader(set, recipe, bad));
        bad = options(2, 8, 0);
        bad.globalTowers = 8; // 64 examples in a global batch of a set of 60
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, BatchLoader(set, recipe, bad));
    }

    void seekEqualsRunning()
    {
        const ImageSet set = randomCifar(40, 2);
        const Preprocessing recipe = cifarDistortions(24);
        BatchLoader reference(set, recipe, options(1, 8, 0));
        const std::vector<Snapshot> want = run(reference, 25);
        for (int workers : {0, 2}) {
            BatchLoader loader(set, recipe, options(1, 8, workers));
            run(loader, 3); // let the queue fill, then jump ahead: queued batches are discarded
            std::this_thread::sleep_for(20ms);
            loader.seek(13);
            QVERIFY(snap(loader.next()) == want[13]);
            QVERIFY(snap(loader.next()) == want[14]);
            loader.seek(2); // and back
            for (int s = 2; s < 9; ++s)
                QVERIFY(snap(loader.next()) == want[static_cast<std::size_t>(s)]);
            loader.seek(24);
            QVERIFY(snap(loader.next()) == want[24]);
            QVERIFY_THROWS_EXCEPTION(InvalidArgument, loader.seek(-1));
        }
    }

    void everyEpochIsAFreshShuffle()
    {
        const ImageSet set = indexedSet(53, 7);
        BatchLoader loader(set, scaleOnly(), options(2, 5, 2));
        QCOMPARE(loader.stepsPerEpoch(), 5); // 53 / 10
        std::vector<std::vector<int>> epochs(3);
        for (int s = 0; s < 15; ++s) {
            const Batch& b = loader.next();
            QCOMPARE(b.step, s);
            QCOMPARE(b.epoch, s / 5);
            for (int k = 0; k < 10; ++k) {
                const int index = decode(b.images.data<float>() + k * 64);
                QVERIFY(index >= 0 && index < 53);
                QCOMPARE(b.labels.data<std::int32_t>()[k], index % 7); // labels travel with images
                epochs[static_cast<std::size_t>(s / 5)].push_back(index);
            }
        }
        for (const std::vector<int>& e : epochs) {
            QCOMPARE(std::set<int>(e.begin(), e.end()).size(), std::size_t(50)); // no repeats
        }
        QVERIFY(epochs[0] != epochs[1] && epochs[1] != epochs[2]);
        // Not shuffled: the examples in order, every epoch the same.
        LoaderOptions o = options(2, 5, 1);
        o.shuffle = false;
        BatchLoader ordered(set, scaleOnly(), o);
        for (int s = 0; s < 10; ++s) {
            const Batch& b = ordered.next();
            for (int k = 0; k < 10; ++k)
                QCOMPARE(decode(b.images.data<float>() + k * 64), (s % 5) * 10 + k);
        }
    }

    // Balanced sampling (LoaderOptions::balanced): in every epoch each class with images comes up
    // equally often, however far apart their sizes (90, 24 and 6 images of 120); a small class's
    // images each as often as any other of it, or once more; a large class's never twice; a
    // fresh order every epoch, the same whatever the workers and after a seek. An empty class
    // takes no share.
    void balancedEpochsGiveEveryClassItsShare()
    {
        ImageSet set = indexedSet(120, 1);
        for (int i = 0; i < 120; ++i) set.labels[std::size_t(i)] = i < 90 ? 0 : i < 114 ? 2 : 3;
        LoaderOptions o = options(2, 10, 2);
        o.balanced = true;
        BatchLoader loader(set, scaleOnly(), o);
        QCOMPARE(loader.stepsPerEpoch(), 6); // the epoch is the set's length
        std::vector<std::vector<int>> epochs(3);
        for (int s = 0; s < 18; ++s) {
            const Batch& b = loader.next();
            for (int k = 0; k < 20; ++k) {
                const int index = decode(b.images.data<float>() + k * 64);
                QCOMPARE(b.labels.data<std::int32_t>()[k], set.labels[std::size_t(index)]);
                epochs[std::size_t(s / 6)].push_back(index);
            }
        }
        for (const std::vector<int>& e : epochs) {
            std::map<int, int> perClass, perImage;
            for (int index : e) {
                ++perClass[set.labels[std::size_t(index)]];
                ++perImage[index];
            }
            // 120 of 3 classes with images: 40 each (class 1 has none).
            QCOMPARE(perClass, (std::map<int, int>{{0, 40}, {2, 40}, {3, 40}}));
            for (const auto& [index, times] : perImage) {
                const int label = set.labels[std::size_t(index)];
                if (label == 0) QCOMPARE(times, 1);                              // 40 of 90
                if (label == 2) QVERIFY2(times == 1 || times == 2, "24 for 40"); // 16 twice
                if (label == 3) QVERIFY2(times == 6 || times == 7, "6 for 40");  // 4 seven times
            }
        }
        QVERIFY(epochs[0] != epochs[1] && epochs[1] != epochs[2]);
        // The large class's 40 are drawn afresh every epoch, not its first 40 each time.
        const auto largeOnes = [&](const std::vector<int>& e) {
            std::set<int> s;
            for (int index : e)
                if (set.labels[std::size_t(index)] == 0) s.insert(index);
            return s;
        };
        QVERIFY(largeOnes(epochs[0]) != largeOnes(epochs[1]));
        for (int workers : {0, 1}) {
            LoaderOptions again = o;
            again.workers = workers;
            BatchLoader other(set, scaleOnly(), again);
            other.seek(7);
            const Batch& b = other.next();
            for (int k = 0; k < 20; ++k)
                QCOMPARE(decode(b.images.data<float>() + k * 64), epochs[1][std::size_t(20 + k)]);
        }
        // Without it, the same set's epochs are permutations: the classes as they are.
        BatchLoader uniform(set, scaleOnly(), options(2, 10, 1));
        std::map<int, int> perClass;
        for (int s = 0; s < 6; ++s) {
            const Batch& b = uniform.next();
            for (int k = 0; k < 20; ++k) ++perClass[b.labels.data<std::int32_t>()[k]];
        }
        QCOMPARE(perClass, (std::map<int, int>{{0, 90}, {2, 24}, {3, 6}}));
    }

    void towerSlices()
    {
        const ImageSet set = indexedSet(40, 10);
        BatchLoader loader(set, scaleOnly(), options(3, 4, 1));
        const Batch& b = loader.next();
        QCOMPARE(b.towers, 3);
        QCOMPARE(b.perTower(), 4);
        QCOMPARE(b.images.shape(), Shape({12, 8, 8, 1}));
        QCOMPARE(b.labels.shape(), Shape({12}));
        std::set<int> seen;
        for (int t = 0; t < 3; ++t) {
            const Tensor images = b.towerImages(t);
            const Tensor labels = b.towerLabels(t);
            QCOMPARE(images.shape(), Shape({4, 8, 8, 1}));
            QCOMPARE(images.data<float>(), b.images.data<float>() + t * 4 * 64); // a view, no copy
            for (int k = 0; k < 4; ++k) {
                const int index = decode(images.data<float>() + k * 64);
                QCOMPARE(labels.data<std::int32_t>()[k], index % 10);
                seen.insert(index);
            }
        }
        QCOMPARE(seen.size(), std::size_t(12)); // distinct slices
    }

    void queueIsBounded()
    {
        const ImageSet set = indexedSet(200, 10);
        std::atomic<int> built{0};
        LoaderOptions o = options(2, 3, 3);
        o.check = [&](const Batch&) { ++built; };
        BatchLoader loader(set, scaleOnly(), o);
        loader.next();
        std::this_thread::sleep_for(300ms);
        QCOMPARE(built.load(), 1 + 2 * 2); // the held batch + the default prefetch of 2 x towers
        loader.next();
        std::this_thread::sleep_for(300ms);
        QCOMPARE(built.load(), 1 + 2 * 2 + 1);
    }

    void lastWait()
    {
        const ImageSet set = indexedSet(100, 10);
        LoaderOptions o = options(1, 4, 1);
        o.prefetch = 2;
        o.check = [](const Batch&) { std::this_thread::sleep_for(30ms); };
        BatchLoader loader(set, scaleOnly(), o);
        loader.next();
        QVERIFY2(loader.lastWaitMs() >= 20, qPrintable(QString::number(loader.lastWaitMs())));
        std::this_thread::sleep_for(500ms); // the queue fills
        loader.next();
        QCOMPARE(loader.lastWaitMs(), 0.0);
    }

    void errorsReachNext_data()
    {
        QTest::addColumn<int>("workers");
        QTest::newRow("caller's thread") << 0;
        QTest::newRow("1 worker") << 1;
        QTest::newRow("3 workers") << 3;
    }
    void errorsReachNext()
    {
        QFETCH(int, workers);
        const ImageSet set = indexedSet(100, 10);
        LoaderOptions o = options(1, 4, workers);
        o.check = [](const Batch& b) {
            if (b.step == 5) throw IoError("example file vanished at step 5");
            if (b.step == 9) throw std::runtime_error("something else");
        };
        BatchLoader loader(set, scaleOnly(), o);
        for (int s = 0; s < 5; ++s) QCOMPARE(loader.next().step, s);
        for (int again = 0; again < 2; ++again) { // the stream never skips the failed step
            try {
                loader.next();
                QFAIL("no exception");
            } catch (const IoError& e) {
                QCOMPARE(QString(e.what()), QString("example file vanished at step 5"));
            }
        }
        loader.seek(6);
        QCOMPARE(loader.next().step, 6);
        QCOMPARE(loader.next().step, 7);
        QCOMPARE(loader.next().step, 8);
        QVERIFY_THROWS_EXCEPTION(std::runtime_error, loader.next());
        loader.seek(4);
        QCOMPARE(loader.next().step, 4);
        QVERIFY_THROWS_EXCEPTION(IoError, loader.next());
    }

    void destructorStopsPromptly()
    {
        const ImageSet set = randomCifar(600, 3);
        for (int scenario = 0; scenario < 3; ++scenario) {
            LoaderOptions o = options(2, 128, 3);
            o.check = [](const Batch&) { std::this_thread::sleep_for(5ms); };
            const auto t0 = std::chrono::steady_clock::now();
            {
                BatchLoader loader(set, cifarDistortions(24), o);
                if (scenario >= 1) loader.next();
                if (scenario == 2)
                    std::this_thread::sleep_for(300ms); // workers blocked on a full queue
            }
            const double ms =
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                    .count();
            QVERIFY2(ms < 2000 + (scenario == 2 ? 300 : 0),
                     qPrintable(QString("scenario %1: %2 ms").arg(scenario).arg(ms)));
        }
    }

    void evaluationBatches()
    {
        const ImageSet set = randomCifar(30, 4);
        const Preprocessing recipe = cifarDistortions(24);
        Tensor images, labels;
        evaluationBatch(set, recipe, 5, 17, images, labels);
        QCOMPARE(images.shape(), Shape({12, 24, 24, 3}));
        QCOMPARE(labels.shape(), Shape({12}));
        std::vector<float> one(24 * 24 * 3);
        Rng rng(1);
        for (int i = 0; i < 12; ++i) {
            preprocessImage(recipe, set, 5 + i, false, rng, one.data());
            QVERIFY(std::memcmp(one.data(), images.data<float>() + i * 1728,
                                one.size() * sizeof(float)) == 0);
            QCOMPARE(labels.data<std::int32_t>()[i], set.labels[static_cast<std::size_t>(5 + i)]);
        }
        const void* buffer = images.raw();
        evaluationBatch(set, recipe, 20, 30, images, labels); // smaller: the buffer is reused
        QCOMPARE(images.raw(), buffer);
        QCOMPARE(images.dim(0), 10);
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 evaluationBatch(set, recipe, 25, 31, images, labels));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 evaluationBatch(set, recipe, 5, 4, images, labels));
    }

    void invalidOptions_data()
    {
        QTest::addColumn<int>("towers");
        QTest::addColumn<int>("perTower");
        QTest::addColumn<int>("workers");
        QTest::addColumn<QString>("expected");
        QTest::newRow("no towers") << 0 << 4 << 1 << "towers is 0";
        QTest::newRow("empty batch") << 1 << 0 << 1 << "batch per tower is 0";
        QTest::newRow("negative workers") << 1 << 4 << -1 << "workers is -1";
        QTest::newRow("batch larger than the set")
            << 3 << 4 << 1
            << "a global batch of 12 (3 towers x 4) is larger than the 10 examples: a batch size "
               "of at "
               "most 3 per tower fits";
    }
    void invalidOptions()
    {
        QFETCH(int, towers);
        QFETCH(int, perTower);
        QFETCH(int, workers);
        QFETCH(QString, expected);
        const ImageSet set = indexedSet(10, 10);
        try {
            BatchLoader loader(set, scaleOnly(), options(towers, perTower, workers));
            QFAIL("no exception");
        } catch (const InvalidArgument& e) {
            QVERIFY2(QString(e.what()).contains(expected), e.what());
        }
    }

    void invalidSetOrRecipe()
    {
        ImageSet set = indexedSet(10, 10);
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 BatchLoader(set, cifarDistortions(24), options(1, 2, 1)));
        set.labels.pop_back();
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, BatchLoader(set, scaleOnly(), options(1, 2, 1)));
        set = indexedSet(10, 10);
        set.labels[3] = -1;
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, BatchLoader(set, scaleOnly(), options(1, 2, 1)));
    }
};

QTEST_APPLESS_MAIN(TestBatchLoader)
#include "tst_batch_loader.moc"
