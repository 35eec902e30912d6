// The data of GPU towers on the stand-in GPU (fake_device.h): batches in page-locked memory, and
// the training set held on the device (issue 17's data that never waits), preprocessed there from
// each example's draws into the loader's images bit for bit, training as towers fed images, keying
// a step's capture by its input, and what it refuses. The rest of the GPU towers' path is in
// tst_device_towers.cpp.
#include <QtTest>

#include <cstring>

#include "device_towers_support.h"
#include "engine/backends.h"
#include "engine/data/batch_loader.h"
#include "engine/train/tower_set.h"
#include "fake_device.h"
#include "replication.h"

using namespace towers::engine;
using namespace towers::test;

namespace {

// A set of fashion-fast's 28x28 grayscale images, larger than the input (a crop is drawn), and a
// recipe that draws every distortion: crop, translation, flip, brightness, contrast and per-image
// standardisation.
ImageSet heldSet(std::int64_t count)
{
    ImageSet set;
    set.count = count;
    set.height = 30;
    set.width = 31;
    set.channels = 1;
    set.pixels.resize(std::size_t(count * set.imageBytes()));
    set.labels.resize(std::size_t(count));
    Rng rng(11);
    for (auto& b : set.pixels) b = std::uint8_t(rng.below(256));
    for (std::size_t i = 0; i < set.labels.size(); ++i) set.labels[i] = std::int32_t(i % 10);
    return set;
}

Preprocessing heldRecipe()
{
    Preprocessing p;
    p.height = p.width = 28;
    p.channels = 1;
    p.translate = 3;
    p.flip = true;
    p.brightnessDelta = 40;
    p.contrastLower = 0.3;
    p.contrastUpper = 1.7;
    p.normalization = Preprocessing::Normalization::PerImage;
    return p;
}

LoaderOptions heldLoader(bool drawsOnly)
{
    LoaderOptions o;
    o.towers = 2;
    o.batchPerTower = 8;
    o.seed = 5;
    o.workers = 0;
    o.drawsOnly = drawsOnly;
    return o;
}

} // namespace

class TestDeviceTowersData : public QObject
{
    Q_OBJECT
private slots:
    // Batches for GPU towers live in page-locked memory from the backend (plain memory without
    // one), with the same contents.
    void pinnedBatches()
    {
        ImageSet set;
        set.count = 40;
        set.height = 4;
        set.width = 4;
        set.channels = 1;
        set.pixels.resize(40 * 16);
        set.labels.resize(40);
        for (std::size_t i = 0; i < set.pixels.size(); ++i) set.pixels[i] = std::uint8_t(i * 7);
        for (std::size_t i = 0; i < set.labels.size(); ++i) set.labels[i] = std::int32_t(i % 3);
        Preprocessing recipe;
        recipe.height = recipe.width = 4;
        recipe.channels = 1;
        LoaderOptions o;
        o.towers = 2;
        o.batchPerTower = 4;
        o.augment = false;
        BatchLoader plain(set, recipe, o);
        const Batch want = plain.next();
        const Tensor wantImages = want.images.clone();
        FakeDeviceScope scope;
        {
            o.pinned = true;
            BatchLoader loader(set, recipe, o);
            const Batch& b = loader.next();
            QVERIFY(scope.memory().livePinned() >= 2);
            QVERIFY(sameBytes(b.images, wantImages));
        }
        QCOMPARE(scope.memory().livePinned(), 0);
    }

    // Issue 17's data that never waits: the towers hold the training set where they compute and
    // the loader sends only each example's draws; the images the device makes are the loader's,
    // bit for bit, so the training is too.
    void heldSetMakesTheLoadersImages()
    {
        FakeDeviceScope scope;
        const ImageSet set = heldSet(40);
        const Preprocessing recipe = heldRecipe();
        BatchLoader images(set, recipe, heldLoader(false)), draws(set, recipe, heldLoader(true));
        Tensor source({set.count, set.height, set.width, set.channels}, DType::UInt8);
        std::memcpy(source.raw(), set.pixels.data(), set.pixels.size());
        for (const char* backend : {"reference", "onednn"}) {
            auto ops = makeFakeDeviceOps(backend);
            Tensor deviceSource, deviceDraws, made;
            ops->upload(source, deviceSource);
            images.seek(3);
            draws.seek(3);
            for (int s = 0; s < 4; ++s) {
                const Batch& want = images.next();
                const Batch& got = draws.next();
                QVERIFY(got.images.empty());
                QCOMPARE(got.draws.shape(), (Shape{16, preprocess::kDrawColumns}));
                QVERIFY(sameBytes(got.labels, want.labels));
                ops->upload(got.draws, deviceDraws);
                ops->preprocessImages(preprocessDesc(recipe), deviceSource, deviceDraws, made);
                QCOMPARE(made.device(), kGpu0);
                QVERIFY2(sameBytes(made, want.images), backend);
                // And on the host, for what shows a batch (TensorBoard's grid).
                Tensor shown;
                imagesOfDraws(set, recipe, got.draws, 16, shown);
                QVERIFY(sameBytes(shown, want.images));
            }
        }
        QCOMPARE(scope.memory().liveAllocations(), 0);
    }

    void heldSetTrainsAsLoaderBatches_data()
    {
        QTest::addColumn<bool>("oneGpu");
        QTest::newRow("a tower per GPU") << false;
        QTest::newRow("two towers sharing a GPU (one copy of the set)") << true;
    }

    void heldSetTrainsAsLoaderBatches()
    {
        QFETCH(bool, oneGpu);
        FakeDeviceScope scope;
        {
            const ImageSet set = heldSet(64);
            const Preprocessing recipe = heldRecipe();
            BatchLoader images(set, recipe, heldLoader(false)),
                draws(set, recipe, heldLoader(true));
            TowerSetOptions onDevice = options(2, true);
            if (oneGpu) onDevice.makeOps = [](int) { return makeFakeDeviceOps("reference", 0); };
            TowerSet host(options(2, false)), dev(onDevice);
            const std::int64_t before = scope.memory().liveAllocations();
            const std::string where = dev.holdTrainingSet(set, recipe);
            QVERIFY2(where.find(oneGpu ? "cuda:0 (" : "cuda:0, cuda:1") != std::string::npos,
                     where.c_str());
            // One copy per device holding towers.
            QCOMPARE(scope.memory().liveAllocations() - before, std::int64_t(oneGpu ? 1 : 2));
            // Towers on the host may hold it too (one copy for all).
            TowerSet hostHeld(options(2, false));
            QVERIFY(hostHeld.holdTrainingSet(set, recipe).find("host") != std::string::npos);
            for (int s = 0; s < 3; ++s) {
                const Batch& a = images.next();
                const Batch& b = draws.next();
                const auto ra = host.step(a, s, 0.05);
                const auto rb = dev.step(b, s, 0.05);
                const auto rc = hostHeld.step(b, s, 0.05);
                QCOMPARE(rb.loss, ra.loss);
                QCOMPARE(rc.loss, ra.loss);
                QVERIFY(rb.finite);
                QVERIFY(rb.towers[0].dataMs >= 0);
            }
            QCOMPARE(QString::fromStdString(dev.compareReplicas()), QString());
            const auto& hp = host.model().parameters();
            for (std::size_t i = 0; i < hp.size(); ++i) {
                QVERIFY2(sameBytes(dev.model().parameters()[i]->value, hp[i]->value),
                         hp[i]->name.c_str());
                QVERIFY2(sameBytes(hostHeld.model().parameters()[i]->value, hp[i]->value),
                         hp[i]->name.c_str());
            }
        }
        QCOMPARE(scope.memory().liveAllocations(), 0);
    }

    // A captured step bakes the address of its input: the images the towers preprocess from a
    // batch's draws (theirs) or a batch's own images (the slot's). Batches of draws, then of
    // images, then of draws again: each change captures anew, and the steps are bitwise those
    // issued op by op (a replay of the draws' capture would read the last draws' images).
    void aCaptureIsKeyedByItsInput()
    {
        FakeDeviceScope scope;
        {
            const ImageSet set = heldSet(64);
            const Preprocessing recipe = heldRecipe();
            TowerSetOptions plain = options(2, true, 0, true), graphed = plain;
            graphed.makeOps = [](int t) { return makeFakeDeviceOps("reference", t, true); };
            plain.graphs = false;
            TowerSet one(plain), two(graphed);
            one.holdTrainingSet(set, recipe);
            two.holdTrainingSet(set, recipe);
            BatchLoader images(set, recipe, heldLoader(false)),
                draws(set, recipe, heldLoader(true));
            for (int s = 0; s < 12; ++s) {
                BatchLoader& from = s >= 4 && s < 8 ? images : draws;
                from.seek(s);
                const Batch& b = from.next();
                const auto a = one.step(b, s, 0.05);
                const auto c = two.step(b, s, 0.05);
                QVERIFY(a.finite);
                QCOMPARE(c.loss, a.loss);
            }
            QVERIFY2(two.replayedSteps() >= 4, std::to_string(two.replayedSteps()).c_str());
            expectSameState(one, two);
        }
        QCOMPARE(scope.memory().liveAllocations(), 0);
    }

    void heldSetRefusals()
    {
        FakeDeviceScope scope;
        const ImageSet set = heldSet(40);
        Preprocessing recipe = heldRecipe();
        BatchLoader draws(set, recipe, heldLoader(true));
        TowerSet dev(options(2, true));
        // Draws for towers that hold nothing.
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, dev.step(draws.next(), 0, 0.05));
        // A recipe that does not make the model's input, or does not fit the set.
        Preprocessing small = recipe;
        small.height = small.width = 24;
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, dev.holdTrainingSet(set, small));
        ImageSet tiny = heldSet(4);
        tiny.height = tiny.width = 20;
        tiny.pixels.resize(std::size_t(tiny.count * tiny.imageBytes()));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, dev.holdTrainingSet(tiny, recipe));
        // Float64 towers.
        TowerSetOptions f64 = options(1, false);
        f64.dtype = DType::Float64;
        TowerSet exact(f64);
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, exact.holdTrainingSet(set, recipe));
        // A GPU without room for it says so.
        scope.memory().setAllocationLimit(std::size_t(set.pixels.size() - 1));
        QVERIFY_THROWS_EXCEPTION(DeviceOutOfMemory, dev.holdTrainingSet(set, recipe));
        scope.memory().setAllocationLimit(0);
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, dev.step(draws.next(), 1, 0.05)); // none held
        // A draw row outside the set, in host memory: refused, naming the row.
        Tensor bad = draws.next().draws.clone();
        bad.data<double>()[3 * preprocess::kDrawColumns + preprocess::kDrawIndex] = 40;
        Tensor source({set.count, set.height, set.width, 1}, DType::UInt8), hostOut;
        try {
            auto host = makeBackendOps("reference");
            host->preprocessImages(preprocessDesc(recipe), source, bad, hostOut);
            QFAIL("a row outside the set was taken");
        } catch (const InvalidArgument& e) {
            QVERIFY2(std::string(e.what()).find("row 3") != std::string::npos, e.what());
        }
    }
};

QTEST_APPLESS_MAIN(TestDeviceTowersData)
#include "tst_device_towers_data.moc"
