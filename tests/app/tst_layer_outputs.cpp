// Classifier::layerOutputs and convolutionFilters, the look inside a network that the Classify
// page's "Layers" window and `towers-cli classify --layers` show: the input as the model gets it,
// then every layer's output for one image, checked against the layers' own arithmetic written out
// here (a 3x3 SAME convolution, batch norm with ReLU, 2x2 max pooling) and against the logits; the
// filters are the checkpoint's (its moving averages when used); the statistics are exact.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "engine/models/registry.h"
#include "engine/tensor/rng.h"
#include "engine/train/checkpoint.h"
#include "engine/train/classifier.h"

using namespace towers;
namespace fs = std::filesystem;

namespace {

// fashion-fast with batch-norm statistics and scales far from their defaults, and moving averages
// that are the weights times 1.5, as a checkpoint with a 0..1 scaling recipe.
void writeCheckpoint(const fs::path& path, int deadChannel = -1)
{
    auto model = engine::createModel("fashion-fast", 7);
    engine::Rng rng(3);
    for (engine::Parameter* p : model->parameters()) {
        if (p->value.dtype() != engine::DType::Float32) continue;
        float* v = p->value.data<float>();
        for (std::int64_t i = 0; i < p->value.numel(); ++i) {
            if (p->name.ends_with(".running_mean")) v[i] = float(0.2 * rng.normal());
            if (p->name.ends_with(".running_var")) v[i] = float(rng.uniform(0.3, 2.5));
            if (p->name.starts_with("bn") && p->name.ends_with(".bias"))
                v[i] = float(0.3 * rng.normal());
            // A channel batch norm shifts far below zero: its ReLU lets nothing through.
            if (p->name == "bn1.bias" && i == deadChannel) v[i] = -1000.0f;
        }
    }
    engine::NamedTensors ema;
    for (const engine::Parameter* p : model->parameters()) {
        if (!p->trainable) continue;
        engine::Tensor t = p->value.clone();
        for (std::int64_t i = 0; i < t.numel(); ++i) t.setAt(i, 1.5 * t.at(i));
        ema.emplace_back("ema." + p->name, t);
    }
    engine::CheckpointInfo ci;
    ci.dataset = "fashion-mnist";
    for (int i = 0; i < 10; ++i) ci.classNames.push_back("class-" + std::to_string(i));
    engine::Preprocessing pre;
    pre.height = 28;
    pre.width = 28;
    pre.channels = 1;
    pre.normalization = engine::Preprocessing::Normalization::Scale;
    ci.preprocessing = pre.toJson();
    engine::writeCheckpoint(path, engine::makeCheckpoint(*model, ci, std::move(ema)));
}

engine::ImageSet images(int count)
{
    engine::ImageSet set;
    set.count = count;
    set.height = 28;
    set.width = 28;
    set.channels = 1;
    engine::Rng rng(5);
    for (std::int64_t i = 0; i < count * 28 * 28; ++i)
        set.pixels.push_back(std::uint8_t(rng.uniform(0, 256)));
    set.labels.assign(std::size_t(count), 0);
    return set;
}

const engine::LayerView& named(const std::vector<engine::LayerView>& views, const char* name)
{
    for (const auto& v : views)
        if (v.name == name) return v;
    throw std::runtime_error(std::string("no layer ") + name);
}

} // namespace

class TestLayerOutputs : public QObject
{
    Q_OBJECT

    QTemporaryDir m_dir;
    fs::path m_checkpoint;

private slots:
    void initTestCase()
    {
        m_checkpoint = fs::path(m_dir.path().toStdString()) / "ckpt.safetensors";
        writeCheckpoint(m_checkpoint);
    }

    void statistics()
    {
        engine::LayerView v;
        v.values = {0, 1, 2, 3, 0};
        engine::computeStatistics(v);
        QCOMPARE(v.mean, 1.2);
        QCOMPARE(v.min, 0.0);
        QCOMPARE(v.max, 3.0);
        QCOMPARE(v.zeroFraction, 0.4);
        QVERIFY(std::abs(v.stddev - std::sqrt(6.8 / 5)) < 1e-12);
    }

    void everyLayerOfOneImage()
    {
        engine::Classifier classifier(m_checkpoint, true, 1);
        const engine::ImageSet set = images(3);
        const auto views = classifier.layerOutputs(set, 1);
        const auto rows = engine::createModel("fashion-fast", 1)->layerTable();
        QCOMPARE(views.size(), rows.size() + 1);
        QCOMPARE(views.front().name, std::string("input"));
        for (std::size_t i = 0; i < rows.size(); ++i) {
            QCOMPARE(views[i + 1].name, rows[i].name);
            QCOMPARE(views[i + 1].description, rows[i].description);
        }

        // The input: image 1, scaled to 0..1, [28, 28, 1].
        const auto& input = views.front();
        QCOMPARE(input.shape, engine::Shape({28, 28, 1}));
        for (int i = 0; i < 28 * 28; ++i)
            QCOMPARE(input.values[std::size_t(i)], float(set.image(1)[i] / 255.0));

        // conv1: 3x3, SAME, no bias, with the moving-average weights, channels last.
        const engine::Checkpoint c = engine::readCheckpoint(m_checkpoint);
        const engine::Tensor& w = *c.weight("conv1.weight", true);
        const auto& conv = named(views, "conv1");
        QCOMPARE(conv.shape, engine::Shape({28, 28, 32}));
        double worst = 0;
        for (int y = 0; y < 28; ++y)
            for (int x = 0; x < 28; ++x)
                for (int o = 0; o < 32; ++o) {
                    double sum = 0;
                    for (int dy = -1; dy <= 1; ++dy)
                        for (int dx = -1; dx <= 1; ++dx) {
                            if (y + dy < 0 || y + dy >= 28 || x + dx < 0 || x + dx >= 28) continue;
                            sum += w.at(o * 9 + (dy + 1) * 3 + (dx + 1)) *
                                   input.values[std::size_t((y + dy) * 28 + x + dx)];
                        }
                    worst = std::max(
                        worst, std::abs(sum - conv.values[std::size_t((y * 28 + x) * 32 + o)]));
                }
        QVERIFY2(worst < 1e-5, qPrintable(QString::number(worst)));

        // bn1 with its ReLU: the running statistics, the moving-average scale and shift.
        const auto& bn = named(views, "bn1");
        const engine::Tensor &mean = *c.weight("bn1.running_mean", true),
                             &var = *c.weight("bn1.running_var", true),
                             &gamma = *c.weight("bn1.weight", true),
                             &beta = *c.weight("bn1.bias", true);
        worst = 0;
        for (std::size_t i = 0; i < conv.values.size(); ++i) {
            const std::int64_t ch = std::int64_t(i % 32);
            const double z =
                (conv.values[i] - mean.at(ch)) / std::sqrt(var.at(ch) + 1e-5) * gamma.at(ch) +
                beta.at(ch);
            worst = std::max(worst, std::abs(std::max(z, 0.0) - bn.values[i]));
        }
        QVERIFY2(worst < 1e-5, qPrintable(QString::number(worst)));
        QCOMPARE(bn.min, 0.0);
        QVERIFY(bn.zeroFraction > 0.05 && bn.zeroFraction < 0.95);

        // pool1: each output the largest of its 2x2 window.
        const auto& pool = named(views, "pool1");
        QCOMPARE(pool.shape, engine::Shape({14, 14, 32}));
        for (int y = 0; y < 14; ++y)
            for (int x = 0; x < 14; ++x)
                for (int ch = 0; ch < 32; ++ch) {
                    float top = -INFINITY;
                    for (int dy = 0; dy < 2; ++dy)
                        for (int dx = 0; dx < 2; ++dx)
                            top = std::max(
                                top,
                                bn.values[std::size_t(((2 * y + dy) * 28 + 2 * x + dx) * 32 + ch)]);
                    QCOMPARE(pool.values[std::size_t((y * 14 + x) * 32 + ch)], top);
                }

        // The last layer's output is the logits.
        const auto logits = classifier.logits(set)[1];
        const auto& last = views.back();
        QCOMPARE(last.shape, engine::Shape({10}));
        for (std::size_t j = 0; j < 10; ++j) QVERIFY(std::abs(logits[j] - last.values[j]) < 1e-5);
        QCOMPARE(named(views, "flatten").shape, engine::Shape({3136}));

        QVERIFY_THROWS_EXCEPTION(engine::InvalidArgument, classifier.layerOutputs(set, 3));
    }

    // layerActivity counts, per layer and channel, the images where the channel is non-zero
    // somewhere: the same counts as each image's layerOutputs give, in batches that do not divide
    // the images; a channel switched off for good is dead on bn1 and on what follows from it.
    void activityOverManyImages()
    {
        const fs::path file = fs::path(m_dir.path().toStdString()) / "dead.safetensors";
        writeCheckpoint(file, 5);
        engine::Classifier classifier(file, true, 1);
        const engine::ImageSet set = images(23);
        const auto activity = classifier.layerActivity(set, 0, 7);
        const auto rows = engine::createModel("fashion-fast", 1)->layerTable();
        QCOMPARE(activity.size(), rows.size());
        std::vector<std::vector<std::int64_t>> expected(rows.size());
        for (std::int64_t k = 0; k < set.count; ++k) {
            const auto views = classifier.layerOutputs(set, k);
            for (std::size_t i = 0; i < rows.size(); ++i) {
                const engine::LayerView& v = views[i + 1]; // after the input
                const std::int64_t channels = v.shape[v.shape.rank() - 1];
                expected[i].resize(std::size_t(channels));
                std::vector<bool> active(static_cast<std::size_t>(channels));
                for (std::size_t j = 0; j < v.values.size(); ++j)
                    if (v.values[j] != 0.0f) active[j % std::size_t(channels)] = true;
                for (std::int64_t c = 0; c < channels; ++c)
                    expected[i][std::size_t(c)] += active[std::size_t(c)];
            }
        }
        for (std::size_t i = 0; i < rows.size(); ++i) {
            QCOMPARE(activity[i].name, rows[i].name);
            QCOMPARE(activity[i].images, std::int64_t(23));
            QCOMPARE(activity[i].activeIn, expected[i]);
        }
        const auto layer = [&](const char* name) {
            for (const auto& a : activity)
                if (a.name == name) return a;
            throw std::runtime_error(name);
        };
        QCOMPARE(layer("conv1").deadChannels(), std::vector<std::int64_t>{}); // before batch norm
        // The same checkpoint without the shifted channel: its dead channels (this random draw
        // has some of its own), and channel 5 besides.
        engine::Classifier plain(m_checkpoint, true, 1);
        std::vector<std::int64_t> dead;
        for (const auto& a : plain.layerActivity(set, 0, 7))
            if (a.name == "bn1") dead = a.deadChannels();
        QVERIFY(std::find(dead.begin(), dead.end(), 5) == dead.end());
        dead.insert(std::upper_bound(dead.begin(), dead.end(), 5), 5);
        QCOMPARE(layer("bn1").deadChannels(), dead);
        QCOMPARE(layer("pool1").deadChannels(), dead);
        QCOMPARE(layer("bn1").channels(), std::int64_t(32));
        // The first images only, and a stop between batches.
        QCOMPARE(classifier.layerActivity(set, 10, 4)[0].images, std::int64_t(10));
        int asked = 0;
        const auto stopped = classifier.layerActivity(set, 0, 4, [&] { return ++asked > 2; });
        QCOMPARE(stopped[0].images, std::int64_t(8));
        QVERIFY_THROWS_EXCEPTION(engine::InvalidArgument, classifier.layerActivity(set, 0, 0));
    }

    void filtersAreTheCheckpoints()
    {
        const engine::Checkpoint c = engine::readCheckpoint(m_checkpoint);
        for (const bool ema : {true, false}) {
            engine::Classifier classifier(m_checkpoint, ema, 1);
            const auto filters = classifier.convolutionFilters();
            QCOMPARE(filters.size(), std::size_t(2));
            QCOMPARE(filters[0].name, std::string("conv1.weight"));
            QCOMPARE(filters[0].shape, engine::Shape({32, 1, 3, 3}));
            QCOMPARE(filters[0].description, std::string("32 filters of 3x3 over 1 channel"));
            QCOMPARE(filters[1].name, std::string("conv2.weight"));
            QCOMPARE(filters[1].shape, engine::Shape({64, 32, 3, 3}));
            for (const auto& f : filters) {
                const engine::Tensor& t = *c.weight(f.name, ema);
                for (std::int64_t i = 0; i < t.numel(); ++i)
                    QCOMPARE(f.values[std::size_t(i)], float(t.at(i)));
            }
        }
    }
};

QTEST_GUILESS_MAIN(TestLayerOutputs)
#include "tst_layer_outputs.moc"
