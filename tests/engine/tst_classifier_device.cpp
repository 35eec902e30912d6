// A Classifier on a GPU (`towers-cli eval --device cuda`, `classify --device cuda`), run on the
// stand-in device (fake_device.h), whose tensors the host cannot read: its weights go there once,
// each batch is copied there and its logits back, and it answers bitwise as the same Classifier on
// the CPU (the stand-in computes with the same oneDNN kernels), in evaluation, logits, the look
// inside (every layer's output, channel activity) and the filters (in bfloat16, as the same ops
// on the host: a GPU's evaluation keeps float32 images between the layers). A precision the device
// refuses is left for float32 with the device's reason when the checkpoint asked for it, an error
// when the user did. On a real GPU, tools/gpu-check.sh compares `eval --device cuda` with the
// CPU's.
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "checkpoint_files.h"
#include "dataset_files.h"
#include "engine/cpu/cpu_info.h"
#include "engine/cpu/onednn_ops.h"
#include "engine/data/dataset.h"
#include "engine/errors.h"
#include "engine/ops/staged_ops.h"
#include "engine/train/classifier.h"
#include "engine/train/evaluation.h"
#include "engine/train/train_config.h"
#include "fake_device.h"

using namespace towers;
namespace fs = std::filesystem;

namespace {

// Stand-in GPU `gpu`'s ops in the precision asked for: oneDNN's, computing on copies of the
// device's tensors, on the GPU the classifier asks for.
engine::InferenceDevice standInGpu(int gpu = 0)
{
    engine::InferenceDevice d;
    d.backend = "cuda";
    d.gpu = gpu;
    d.makeOps = [](engine::Precision p, int g) {
        return engine::makeStagedOps(engine::cpu::makeOneDnnOps(p),
                                     engine::Device{engine::DeviceKind::Cuda, g});
    };
    return d;
}

// The same ops on the host. In bfloat16 this is the CPU's arithmetic of a GPU's evaluation: the
// oneDNN backend's own evaluation keeps its images bfloat16 between the layers
// (Ops::bf16Activations), a GPU's keeps them float32, as its training's evaluations do.
engine::InferenceDevice stagedOnTheHost()
{
    engine::InferenceDevice d;
    d.makeOps = [](engine::Precision p, int) {
        return engine::makeStagedOps(engine::cpu::makeOneDnnOps(p), engine::Device::host());
    };
    return d;
}

// A device that runs float32 only, and says so for bfloat16.
engine::InferenceDevice float32OnlyGpu()
{
    engine::InferenceDevice d = standInGpu();
    d.makeOps = [](engine::Precision p, int) -> std::unique_ptr<engine::Ops> {
        if (p != engine::Precision::Float32)
            throw engine::Unsupported("--precision bf16 on GPUs: GPU 0 (a stand-in) cannot");
        return engine::makeStagedOps(engine::cpu::makeOneDnnOps(p),
                                     engine::Device{engine::DeviceKind::Cuda, 0});
    };
    return d;
}

void expectSameViews(const std::vector<engine::LayerView>& a,
                     const std::vector<engine::LayerView>& b)
{
    QCOMPARE(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        QCOMPARE(a[i].name, b[i].name);
        QCOMPARE(a[i].shape, b[i].shape);
        QVERIFY2(a[i].values == b[i].values, a[i].name.c_str());
    }
}

// `set` with every image mirrored left-right (8-bit HWC).
engine::ImageSet mirroredSet(const engine::ImageSet& set)
{
    engine::ImageSet m = set;
    const std::int64_t h = set.height, w = set.width, c = set.channels;
    for (std::int64_t i = 0; i < set.count; ++i)
        for (std::int64_t y = 0; y < h; ++y)
            for (std::int64_t x = 0; x < w; ++x)
                for (std::int64_t k = 0; k < c; ++k)
                    m.pixels[std::size_t(((i * h + y) * w + x) * c + k)] =
                        set.pixels[std::size_t(((i * h + y) * w + (w - 1 - x)) * c + k)];
    return m;
}

double largestDifference(const std::vector<std::vector<double>>& a,
                         const std::vector<std::vector<double>>& b)
{
    double d = 0;
    for (std::size_t i = 0; i < a.size(); ++i)
        for (std::size_t j = 0; j < a[i].size(); ++j) d = std::max(d, std::abs(a[i][j] - b[i][j]));
    return d;
}

} // namespace

class TestClassifierDevice : public QObject
{
    Q_OBJECT
    QTemporaryDir m_dir;
    test::FakeDeviceScope m_device;

    struct Case
    {
        engine::Dataset data;
        fs::path checkpoint;
    };
    Case m_mnist, m_cifar;

    const Case& caseOf(const QString& model) const
    {
        return model == QLatin1String("fashion-fast") ? m_mnist : m_cifar;
    }

private slots:
    void initTestCase()
    {
        const fs::path root = m_dir.path().toStdString();
        test::writeIdxDataset(root / "mnist", 100, 300, 28, 28, false, 3);
        m_mnist.data = engine::loadDataset("mnist", root / "mnist");
        m_mnist.checkpoint = root / "fashion-fast.safetensors";
        // Batch norms (folded for evaluation), 28x28 scaled to 0..1.
        test::writeFreshCheckpoint("fashion-fast", m_mnist.data, m_mnist.checkpoint, 7);
        test::writeCifar10(root / "cifar10", 20, 300, 5);
        m_cifar.data = engine::loadDataset("cifar10", root / "cifar10");
        m_cifar.checkpoint = root / "cifar10-tutorial.safetensors";
        // LRN, the central 24x24 of 32x32 images standardised per image.
        test::writeFreshCheckpoint("cifar10-tutorial", m_cifar.data, m_cifar.checkpoint, 11);
    }

    void answersAsOnTheCpu_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<bool>("bf16");
        QTest::addColumn<int>("gpu");
        QTest::newRow("fashion-fast") << QStringLiteral("fashion-fast") << false << 0;
        QTest::newRow("cifar10-tutorial, GPU 1")
            << QStringLiteral("cifar10-tutorial") << false << 1;
        QTest::newRow("cifar10-tutorial bf16") << QStringLiteral("cifar10-tutorial") << true << 0;
    }

    void answersAsOnTheCpu()
    {
        QFETCH(QString, model);
        QFETCH(bool, bf16);
        QFETCH(int, gpu);
        if (bf16)
            if (const std::string no = engine::cpu::bf16Unavailable(); !no.empty())
                QSKIP(no.c_str());
        const Case& c = caseOf(model);
        const auto precision = bf16 ? engine::Precision::BFloat16 : engine::Precision::Float32;
        engine::Classifier cpu(c.checkpoint, true, 0, precision,
                               bf16 ? stagedOnTheHost() : engine::InferenceDevice{});
        const std::int64_t copiesBefore = m_device.memory().copies();
        engine::Classifier onGpu(c.checkpoint, true, 0, precision, standInGpu(gpu));
        QVERIFY(cpu.device().isHost());
        QCOMPARE(onGpu.device().str(), "cuda:" + std::to_string(gpu));
        QCOMPARE(onGpu.precision(), precision);
        QVERIFY(onGpu.precisionNote().empty());
        // The weights went to the device: the host cannot read them there.
        QVERIFY(m_device.memory().copies() > copiesBefore);
        QVERIFY(m_device.memory().liveAllocations() > 0);

        const engine::ImageSet& set = c.data.test;
        // A last partial batch (300 = 2 x 128 + 44; the logits go in batches of 256).
        const auto expected = cpu.logits(set);
        const auto got = onGpu.logits(set);
        QCOMPARE(got.size(), std::size_t(set.count));
        QVERIFY(got == expected);

        const engine::EvalResult a = cpu.evaluate(set, 128), b = onGpu.evaluate(set, 128);
        QCOMPARE(b.examples, set.count);
        QCOMPARE(b.correct, a.correct);
        QCOMPARE(b.confusion, a.confusion);
        QCOMPARE(b.meanCrossEntropy, a.meanCrossEntropy);

        expectSameViews(onGpu.layerOutputs(set, 17), cpu.layerOutputs(set, 17));
        expectSameViews(onGpu.convolutionFilters(), cpu.convolutionFilters());
        const auto activityCpu = cpu.layerActivity(set, 250, 64);
        const auto activityGpu = onGpu.layerActivity(set, 250, 64);
        QCOMPARE(activityGpu.size(), activityCpu.size());
        for (std::size_t i = 0; i < activityCpu.size(); ++i) {
            QCOMPARE(activityGpu[i].images, std::int64_t(250));
            QCOMPARE(activityGpu[i].activeIn, activityCpu[i].activeIn);
        }
    }

    // A checkpoint trained in bf16, on a device that cannot run it: float32, and why.
    void aPrecisionTheDeviceRefusesIsExplained()
    {
        const fs::path root = m_dir.path().toStdString();
        engine::TrainConfig config;
        config.model = "fashion-fast";
        config.dataset = "mnist";
        config.precision = engine::Precision::BFloat16;
        const fs::path file = root / "trained-in-bf16.safetensors";
        test::writeFreshCheckpoint("fashion-fast", m_mnist.data, file, 7, 1, config.toJson());

        engine::Classifier left(file, true, 0, std::nullopt, float32OnlyGpu());
        QCOMPARE(left.precision(), engine::Precision::Float32);
        QCOMPARE(left.precisionNote(), std::string("trained in bf16, evaluated in float32 here: "
                                                   "--precision bf16 on GPUs: GPU 0 (a "
                                                   "stand-in) cannot"));
        engine::Classifier cpu(file, true, 0, engine::Precision::Float32);
        QVERIFY(left.logits(m_mnist.data.test) == cpu.logits(m_mnist.data.test));

        // Asked for by the user, it is an error with the device's reason.
        try {
            engine::Classifier asked(file, true, 0, engine::Precision::BFloat16, float32OnlyGpu());
            QFAIL("bf16 on a float32-only device was accepted");
        } catch (const engine::Unsupported& e) {
            QVERIFY2(std::string(e.what()).find("GPU 0 (a stand-in) cannot") != std::string::npos,
                     e.what());
        }

        // Where the device runs bf16, the checkpoint's precision, as on the CPU.
        if (engine::cpu::bf16Unavailable().empty()) {
            engine::Classifier own(file, true, 0, std::nullopt, standInGpu());
            QCOMPARE(own.precision(), engine::Precision::BFloat16);
            QVERIFY(own.precisionNote().empty());
        }
    }

    // The pieces of test-time augmentation: the mirror of a batch, the mean of two logits, and
    // the cross-entropy of logits on the host against the op's.
    void mirrorAndTheHostsLoss()
    {
        engine::Tensor images(engine::Shape{2, 2, 3, 2}, engine::DType::Float64);
        for (std::int64_t i = 0; i < images.numel(); ++i) images.setAt(i, double(i));
        engine::Tensor mirrored;
        engine::mirrorImages(images, mirrored);
        QCOMPARE(mirrored.shape(), images.shape());
        QCOMPARE(mirrored.dtype(), engine::DType::Float64);
        // Row (n, y) is pixels x = 0, 1, 2 of 2 channels: its mirror is pixels 2, 1, 0.
        const std::vector<double> row0{4, 5, 2, 3, 0, 1}, row3{22, 23, 20, 21, 18, 19};
        for (int k = 0; k < 6; ++k) {
            QCOMPARE(mirrored.at(k), row0[std::size_t(k)]);
            QCOMPARE(mirrored.at(18 + k), row3[std::size_t(k)]);
        }
        engine::Tensor back;
        engine::mirrorImages(mirrored, back);
        for (std::int64_t i = 0; i < images.numel(); ++i) QCOMPARE(back.at(i), images.at(i));

        engine::Tensor a(engine::Shape{3, 4}, engine::DType::Float32), b = a.clone(), mean;
        for (std::int64_t i = 0; i < 12; ++i) {
            a.setAt(i, 0.25 * double(i) - 1);
            b.setAt(i, std::sin(double(i)) * 3);
        }
        engine::meanOfLogits(a, b, mean);
        for (std::int64_t i = 0; i < 12; ++i)
            QCOMPARE(mean.at(i), double(float(0.5 * (a.at(i) + b.at(i)))));

        engine::Tensor labels(engine::Shape{3}, engine::DType::Int32);
        labels.data<std::int32_t>()[0] = 3;
        labels.data<std::int32_t>()[1] = 0;
        labels.data<std::int32_t>()[2] = 2;
        auto ops = engine::cpu::makeOneDnnOps(engine::Precision::Float32);
        engine::Tensor probs, loss;
        ops->softmaxCrossEntropyForward(b, labels, 0.0, probs, loss);
        const double summed = engine::summedCrossEntropy(b, labels);
        QVERIFY2(std::abs(summed - 3 * loss.at(0)) < 1e-5, qPrintable(QString::number(summed)));
        labels.data<std::int32_t>()[1] = 4;
        QVERIFY_THROWS_EXCEPTION(engine::InvalidArgument, engine::summedCrossEntropy(b, labels));
    }

    // --tta mirror: each image's logits are the mean of its own and its mirror image's, so a set
    // and its mirror image get the same answers; on the stand-in device as on the CPU, bitwise.
    void mirrorTestTimeAugmentation()
    {
        const engine::ImageSet& set = m_cifar.data.test;
        const engine::ImageSet mirror = mirroredSet(set);
        engine::Classifier plain(m_cifar.checkpoint, true, 0, engine::Precision::Float32);
        QVERIFY(plain.mirrorUnseen().empty());
        engine::Classifier averaged(m_cifar.checkpoint, true, 0, engine::Precision::Float32);
        averaged.setTestTimeAugmentation(engine::TestTimeAugmentation::Mirror);
        QCOMPARE(averaged.testTimeAugmentation(), engine::TestTimeAugmentation::Mirror);

        const auto own = plain.logits(set), ofMirror = plain.logits(mirror);
        const auto tta = averaged.logits(set);
        QCOMPARE(tta.size(), own.size());
        // A network drawn at random is not symmetric: the mirror changes its answers...
        QVERIFY(largestDifference(own, ofMirror) > 1e-3);
        // ...and the mean is of the two (the 32x32 images' central 24x24 is mirrored with them;
        // per-image standardisation sums in another order: float rounding).
        std::vector<std::vector<double>> mean = own;
        for (std::size_t i = 0; i < mean.size(); ++i)
            for (std::size_t j = 0; j < mean[i].size(); ++j)
                mean[i][j] = 0.5 * (own[i][j] + ofMirror[i][j]);
        QVERIFY2(largestDifference(tta, mean) < 1e-4,
                 qPrintable(QString::number(largestDifference(tta, mean))));
        QVERIFY2(largestDifference(averaged.logits(mirror), tta) < 1e-4, "not mirror-invariant");

        // evaluate() counts the mean logits' answers and loss.
        const engine::EvalResult r = averaged.evaluate(set, 128);
        QCOMPARE(r.examples, set.count);
        std::int64_t correct = 0;
        double loss = 0;
        for (std::size_t i = 0; i < tta.size(); ++i) {
            const auto& l = tta[i];
            const int label = set.labels[i];
            correct += std::max_element(l.begin(), l.end()) - l.begin() == label;
            double top = *std::max_element(l.begin(), l.end()), sum = 0;
            for (double v : l) sum += std::exp(v - top);
            loss += top + std::log(sum) - l[std::size_t(label)];
        }
        QCOMPARE(r.correct, correct);
        QVERIFY2(std::abs(r.meanCrossEntropy - loss / double(set.count)) < 1e-5,
                 qPrintable(QString::number(r.meanCrossEntropy)));
        const engine::EvalResult p = plain.evaluate(set, 128);
        QVERIFY(p.meanCrossEntropy != r.meanCrossEntropy);

        // The device's path: its batches and their mirror images go there, the logits come back.
        engine::Classifier onGpu(m_cifar.checkpoint, true, 0, engine::Precision::Float32,
                                 standInGpu());
        onGpu.setTestTimeAugmentation(engine::TestTimeAugmentation::Mirror);
        QVERIFY(onGpu.logits(set) == tta);
        const engine::EvalResult g = onGpu.evaluate(set, 128);
        QCOMPARE(g.correct, r.correct);
        QCOMPARE(g.confusion, r.confusion);
        QCOMPARE(g.meanCrossEntropy, r.meanCrossEntropy);
    }

    // A checkpoint whose run never saw a mirror image refuses it, saying why.
    void mirrorOfANetworkThatNeverSawOne()
    {
        engine::Classifier digits(m_mnist.checkpoint, true, 0, engine::Precision::Float32);
        QVERIFY2(digits.mirrorUnseen().find("does not mirror its training images") !=
                     std::string::npos,
                 digits.mirrorUnseen().c_str());
        try {
            digits.setTestTimeAugmentation(engine::TestTimeAugmentation::Mirror);
            QFAIL("mirror accepted for digits");
        } catch (const engine::InvalidArgument& e) {
            QVERIFY2(std::string(e.what()).find("never learnt from mirror images") !=
                         std::string::npos,
                     e.what());
        }
        QCOMPARE(digits.testTimeAugmentation(), engine::TestTimeAugmentation::None);

        engine::TrainConfig config;
        config.model = "cifar10-tutorial";
        config.dataset = "cifar10";
        config.augmentation = "none";
        config.steps = 100;
        const fs::path file = fs::path(m_dir.path().toStdString()) / "undistorted.safetensors";
        test::writeFreshCheckpoint("cifar10-tutorial", m_cifar.data, file, 11, 1, config.toJson());
        engine::Classifier undistorted(file, true, 0, engine::Precision::Float32);
        QVERIFY2(undistorted.mirrorUnseen().find("--augment none") != std::string::npos,
                 undistorted.mirrorUnseen().c_str());
        QVERIFY_THROWS_EXCEPTION(
            engine::InvalidArgument,
            undistorted.setTestTimeAugmentation(engine::TestTimeAugmentation::Mirror));
        QCOMPARE(engine::testTimeAugmentationFromName("mirror"),
                 engine::TestTimeAugmentation::Mirror);
        QVERIFY_THROWS_EXCEPTION(engine::InvalidArgument,
                                 engine::testTimeAugmentationFromName("flip"));
    }

    void anUnknownBackendIsRefused()
    {
        engine::InferenceDevice d;
        d.backend = "tpu";
        try {
            engine::Classifier c(m_mnist.checkpoint, true, 0, std::nullopt, d);
            QFAIL("an unknown backend was accepted");
        } catch (const engine::UnknownName& e) {
            QVERIFY2(std::string(e.what()).find("'tpu'") != std::string::npos, e.what());
        }
    }
};

QTEST_GUILESS_MAIN(TestClassifierDevice)
#include "tst_classifier_device.moc"
