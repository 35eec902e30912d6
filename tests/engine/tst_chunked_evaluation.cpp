// Evaluation in chunks of the batch (ExecContext::chunkCacheBytes, Sequential::chunking): the
// forward pass of evaluation runs a model's first layers a chunk of the batch at a time, so that
// their images stay in the CPU's cache from one layer to the next, and the rest on the whole batch.
//  * The plan: which layers and how many images, from the shapes, the weights and the cache; none
//    where it would not pay (a batch that fits, fewer than three chunks, a first layer whose output
//    is the widest image of all, a cache too small), never between a convolution and the batch
//    norm folded into it, never into a nested block.
//  * The result: every registered model's logits in chunks are the whole batch's, bitwise on the
//    reference backend (each image computed alone), within float32 rounding on oneDNN (whose
//    kernels may differ with the batch), in bfloat16 activations too; a batch that chunks do not
//    divide; the chunked layers' outputs are those of the last chunk, the last one's the whole
//    batch's.
//  * Only evaluation on the host: training, a context without a cache and a device's images run
//    the whole batch through every layer.
#include <QtTest>

#include <memory>

#include "engine/cpu/onednn_ops.h"
#include "engine/models/model.h"
#include "engine/models/registry.h"
#include "engine/nn/batch_norm.h"
#include "engine/nn/conv2d.h"
#include "engine/nn/sequential.h"
#include "engine/ops/ops.h"
#include "fake_device.h"
#include "gradcheck.h"

using namespace towers::engine;
using namespace towers::test;

namespace {

constexpr std::int64_t kMiB = 1 << 20;

std::unique_ptr<Model> initialised(const std::string& name)
{
    auto model = buildModel(name);
    model->initialize(5);
    return model;
}

Tensor imagesFor(const Model& model, std::int64_t n, std::uint64_t seed = 3)
{
    Rng rng(seed);
    const Shape& in = model.inputShape();
    return randomTensor({n, in[0], in[1], in[2]}, DType::Float32, rng, -2, 2);
}

// The logits of an evaluation pass over `images`, with the layers chunked in a cache of
// `cacheBytes` (0: the whole batch throughout).
Tensor evaluate(Model& model, Ops& ops, const Tensor& images, std::int64_t cacheBytes)
{
    ExecContext ctx = ExecContext::forEvaluation(ops);
    ctx.chunkCacheBytes = cacheBytes;
    return model.forward(ctx, images).clone();
}

QString bitwiseDifference(const Tensor& got, const Tensor& want)
{
    if (got.shape() != want.shape()) return QStringLiteral("shapes differ");
    for (std::int64_t i = 0; i < want.numel(); ++i)
        if (got.at(i) != want.at(i))
            return QStringLiteral("element %1: %2 vs %3")
                .arg(i)
                .arg(got.at(i), 0, 'g', 9)
                .arg(want.at(i), 0, 'g', 9);
    return {};
}

} // namespace

class TestChunkedEvaluation : public QObject
{
    Q_OBJECT

private slots:
    void fashionFastChunksToItsFlatten()
    {
        // pool1 reads 28x28x32 and writes 14x14x32 floats: 125,440 bytes an image, 16 images in
        // 2 MiB. The outputs of conv1 to pool2 stay in the cache; flatten's, the smallest, is
        // copied; fc1's 1.6 MB of weights are not read again per chunk.
        auto model = initialised("fashion-fast");
        const Shape in = imagesFor(*model, 1).shape();
        const Sequential::Chunking c = model->net().chunking(in.withBatch(250), 2 * kMiB);
        QCOMPARE(c.layers, std::size_t(7));
        QCOMPARE(model->net().layers()[c.layers - 1]->name(), std::string("flatten"));
        QCOMPARE(c.images, std::int64_t(16)); // 16 chunks of 16 hold 250
        // Even chunks: 100 images in 7 of at most 16 -> 15 each.
        QCOMPARE(model->net().chunking(in.withBatch(100), 2 * kMiB).images, std::int64_t(15));
        // A larger cache takes larger chunks.
        QCOMPARE(model->net().chunking(in.withBatch(250), 4 * kMiB).images, std::int64_t(32));
    }

    void noChunksWhereTheyDoNotPay()
    {
        auto fast = initialised("fashion-fast");
        const Shape in = imagesFor(*fast, 1).shape();
        Sequential& net = fast->net();
        // The whole batch fits, or fewer than three chunks of 16 would hold it.
        QCOMPARE(net.chunking(in.withBatch(16), 2 * kMiB).layers, std::size_t(0));
        QCOMPARE(net.chunking(in.withBatch(32), 2 * kMiB).layers, std::size_t(0));
        QCOMPARE(net.chunking(in.withBatch(33), 2 * kMiB).layers, std::size_t(7));
        // A cache that holds fewer than kMinChunk images of the first layer, or none.
        QCOMPARE(net.chunking(in.withBatch(250), 512 << 10).layers, std::size_t(0));
        QCOMPARE(net.chunking(in.withBatch(250), 0).layers, std::size_t(0));
        // cifar10-resnet's first layer (a convolution and its batch norm) writes its widest
        // image and a residual block comes soon after: ending after it keeps nothing in the cache.
        auto resnet = initialised("cifar10-resnet");
        QCOMPARE(resnet->net().chunking(imagesFor(*resnet, 256).shape(), 2 * kMiB).layers,
                 std::size_t(0));
    }

    void neverSplitsAPairOrEntersABlock()
    {
        for (const ModelInfo& info : modelRegistry()) {
            auto model = initialised(info.name);
            const auto& layers = model->net().layers();
            for (const std::int64_t cache : {kMiB, 2 * kMiB, 4 * kMiB, 16 * kMiB, 64 * kMiB}) {
                const Sequential::Chunking c =
                    model->net().chunking(imagesFor(*model, 1).shape().withBatch(512), cache);
                if (c.layers == 0) continue;
                const QString where =
                    QString::fromStdString(info.name) + QStringLiteral(" in %1 bytes").arg(cache);
                QVERIFY2(c.images >= Sequential::kMinChunk && 512 > 2 * c.images,
                         qPrintable(where));
                const auto* conv = dynamic_cast<const Conv2d*>(layers[c.layers - 1].get());
                const auto* bn = c.layers < layers.size()
                                     ? dynamic_cast<const BatchNorm*>(layers[c.layers].get())
                                     : nullptr;
                QVERIFY2(!(conv && bn && conv->canFold(*bn)),
                         qPrintable(where + ": ends between a convolution and its batch norm"));
                for (std::size_t i = 0; i < c.layers; ++i)
                    QVERIFY2(!dynamic_cast<const Sequential*>(layers[i].get()) &&
                                 !dynamic_cast<const Residual*>(layers[i].get()) &&
                                 !dynamic_cast<const Concat*>(layers[i].get()),
                             qPrintable(where + ": chunks a nested block"));
            }
        }
    }

    void referenceChunksGiveTheSameBits()
    {
        // Each image is computed alone there, in float64 sums: a chunk cannot change a bit.
        auto ops = makeReferenceOps();
        for (const char* name : {"fashion-fast", "fashion-wide"}) {
            auto model = initialised(name);
            // Chunks of 13, 13 and 11 images (fashion-fast), 10, 10, 10 and 7 (fashion-wide).
            const Tensor images = imagesFor(*model, 37);
            const Sequential::Chunking c = model->net().chunking(images.shape(), 2 * kMiB);
            QVERIFY2(c.layers > 0 && 37 % c.images != 0, name);
            const Tensor whole = evaluate(*model, *ops, images, 0);
            const Tensor chunked = evaluate(*model, *ops, images, 2 * kMiB);
            const QString diff = bitwiseDifference(chunked, whole);
            QVERIFY2(diff.isEmpty(), qPrintable(QString::fromUtf8(name) + ": " + diff));
        }
    }

    void everyModelChunkedOnOneDnn_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<bool>("bf16");
        for (const ModelInfo& m : modelRegistry()) {
            QTest::newRow((m.name + " fp32").c_str()) << QString::fromStdString(m.name) << false;
            QTest::newRow((m.name + " bf16").c_str()) << QString::fromStdString(m.name) << true;
        }
    }
    void everyModelChunkedOnOneDnn()
    {
        QFETCH(QString, model);
        QFETCH(bool, bf16);
        if (bf16)
            if (const std::string no = cpu::bf16Unavailable(); !no.empty()) QSKIP(no.c_str());
        auto ops = cpu::makeOneDnnOps(bf16 ? Precision::BFloat16 : Precision::Float32);
        auto net = initialised(model.toStdString());
        const Tensor images = imagesFor(*net, 61);
        const std::int64_t cache = 2 * kMiB;
        const Sequential::Chunking c = net->net().chunking(images.shape(), cache);
        // The models whose first layers write wide images chunk; cifar10-resnet does not.
        QCOMPARE(c.layers > 0, model != QLatin1String("cifar10-resnet"));
        const Tensor whole = evaluate(*net, *ops, images, 0);
        const Tensor chunked = evaluate(*net, *ops, images, cache);
        QCOMPARE(chunked.shape(), whole.shape());
        QCOMPARE(chunked.dtype(), DType::Float32);
        // oneDNN may pick other kernels for a chunk's batch than for the whole one: float32's
        // rounding, or bfloat16's where the images are bfloat16.
        const double e = normalisedError(chunked, whole);
        QVERIFY2(e < (bf16 ? 1e-2 : 1e-5), qPrintable(QString::number(e)));
        // The chunked layers' outputs are the last chunk's (a convolution's own is not made where
        // a batch norm folds into it), but the last one's is the whole batch's.
        for (std::size_t i = 0; i + 1 < c.layers; ++i)
            if (!net->layerOutput(i).empty())
                QCOMPARE(net->layerOutput(i).dim(0), 61 - (60 / c.images) * c.images);
        if (c.layers > 0) QCOMPARE(net->layerOutput(c.layers - 1).dim(0), std::int64_t(61));
    }

    void onlyEvaluationOnTheHostChunks()
    {
        auto ops = cpu::makeOneDnnOps();
        auto model = initialised("fashion-fast");
        const Tensor images = imagesFor(*model, 64);
        // Training: every layer on the whole batch, whatever the context's cache.
        ExecContext training{*ops, true, 0};
        training.chunkCacheBytes = 2 * kMiB;
        model->forward(training, images);
        QCOMPARE(model->layerOutput(2).dim(0), std::int64_t(64)); // pool1
        // Evaluation: the first layers by chunks of 16.
        evaluate(*model, *ops, images, 2 * kMiB);
        QCOMPARE(model->layerOutput(2).dim(0), std::int64_t(16));
        // The CPU backend offers its level-2 caches; the reference backend none.
        QVERIFY(ops->evaluationCacheBytes() > 0);
        QCOMPARE(ExecContext::forEvaluation(*ops).chunkCacheBytes, ops->evaluationCacheBytes());
        QCOMPARE(makeReferenceOps()->evaluationCacheBytes(), std::int64_t(0));
        // A device's images (a stand-in GPU): the whole batch, even with a cache given.
        FakeDeviceScope scope;
        auto device = makeFakeDeviceOps("onednn");
        QCOMPARE(device->evaluationCacheBytes(), std::int64_t(0));
        auto onDevice = initialised("fashion-fast");
        onDevice->moveTo(device->device());
        const Tensor there = images.copyTo(device->device());
        ExecContext ctx = ExecContext::forEvaluation(*device);
        ctx.chunkCacheBytes = 2 * kMiB;
        const Tensor logits = onDevice->forward(ctx, there).onHost();
        QCOMPARE(onDevice->layerOutput(2).dim(0), std::int64_t(64));
        auto fresh = initialised("fashion-fast"); // `model`'s training pass moved its statistics
        QVERIFY(normalisedError(logits, evaluate(*fresh, *ops, images, 0)) < 1e-5);
    }
};

QTEST_GUILESS_MAIN(TestChunkedEvaluation)
#include "tst_chunked_evaluation.moc"
