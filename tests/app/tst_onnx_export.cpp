// ONNX export (engine/export/onnx_export.h) of every registered model, run in onnxruntime: for each
// model, a freshly initialised checkpoint and a "trained" one (batch-norm running statistics,
// scales and shifts far from their defaults, moving averages unlike the weights) are exported
// NHWC and NCHW (and without the moving averages), and onnxruntime's logits on a random batch of
// 1 and of 3 (one file: the batch is dynamic) must equal the engine's own inference forward on
// the reference backend within 1e-4 of the logits' scale. The metadata must reproduce classify:
// 8-bit images preprocessed in Python from metadata_props alone (tests/onnx/run_onnx.py, the
// recipe README.md gives) give Classifier's probabilities. Plus the refusals: an existing output
// without overwrite, a corrupt checkpoint, one of an unknown model, a bad opset. (Every model
// through towers-cli, after a short real run, on 100 real test images against `classify --json`:
// tests/onnx/check_classify.py.)
//
// onnxruntime and numpy come from PyPI in a virtual environment made once by
// tests/onnx/setup_venv.sh; where it cannot be made the onnxruntime cases are skipped with the
// reason, except with CI=true, where they fail.
#include <QColor>
#include <QDir>
#include <QFile>
#include <QImage>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include "app/inference/image_files.h"
#include "engine/data/dataset.h"
#include "engine/errors.h"
#include "engine/export/onnx_export.h"
#include "engine/models/model_file.h"
#include "engine/models/registry.h"
#include "engine/ops/ops.h"
#include "engine/tensor/rng.h"
#include "engine/train/checkpoint.h"
#include "engine/train/classifier.h"
#include "engine/train/recipe.h"
#include "model_files.h"

using namespace towers;
namespace fs = std::filesystem;

namespace {

constexpr double kRelativeTolerance = 1e-4;

// The models checked: the built-in ones, and a model file's network with every layer type.
const engine::ModelInfo& modelNamed(const std::string& name)
{
    if (name != "every-layer") return engine::findModel(name);
    return engine::resolveModel(
        name, engine::canonicalModelDefinition(test::everyLayerDefinition(name), "test"));
}

std::string datasetFor(const std::string& model)
{
    return modelNamed(model).defaultDataset;
}

// The evaluation form of a recipe like the model's own (engine/train/recipe.h), with made-up
// statistics where the recipe takes them from a training set.
engine::Preprocessing recipeFor(const engine::ModelInfo& m)
{
    if (m.augmentation.kind == engine::ModelAugmentation::Kind::DistortedInputs)
        return engine::distortedInputs(m.inputShape); // the tutorial's 24x24 crops
    engine::Preprocessing p;
    p.height = int(m.inputShape[0]);
    p.width = int(m.inputShape[1]);
    p.channels = int(m.inputShape[2]);
    p.translate = 1;
    p.normalization = engine::Preprocessing::Normalization::MeanStd;
    for (int c = 0; c < p.channels; ++c) {
        p.mean.push_back(0.3 + 0.1 * c);
        p.stddev.push_back(0.25 + 0.05 * c);
    }
    return p;
}

// Writes a checkpoint of `name`: freshly initialised, or "trained": batch-norm statistics, scales
// and shifts drawn far from their defaults, moving averages that differ from the weights, and
// convolution weights `convGain` times larger.
void writeModelCheckpoint(const std::string& name, bool trained, const fs::path& path,
                          double convGain = 4.0)
{
    const engine::ModelInfo& info = modelNamed(name);
    auto model = engine::buildModel(info);
    model->initialize(7);
    engine::Rng rng(trained ? 11 : 12);
    std::set<std::string> names;
    for (const engine::Parameter* p : model->parameters()) names.insert(p->name);
    const auto ends = [](const std::string& s, const char* tail) { return s.ends_with(tail); };
    engine::NamedTensors ema;
    if (trained) {
        for (engine::Parameter* p : model->parameters()) {
            if (p->value.dtype() != engine::DType::Float32) continue;
            const std::string stem = p->name.substr(0, p->name.rfind('.'));
            const bool bn = names.count(stem + ".running_mean") > 0;
            float* v = p->value.data<float>();
            // Convolution weights 4 times larger: activations large enough for LRN to matter.
            const double gain = p->value.rank() == 4 ? convGain : 1.0;
            for (std::int64_t i = 0; i < p->value.numel(); ++i) {
                v[i] = float(v[i] * gain);
                if (ends(p->name, ".running_mean")) v[i] = float(0.5 * rng.normal());
                if (ends(p->name, ".running_var")) v[i] = float(rng.uniform(0.3, 2.5));
                if (bn && ends(p->name, ".weight")) v[i] = float(rng.uniform(0.5, 1.5));
                if (bn && ends(p->name, ".bias")) v[i] = float(0.3 * rng.normal());
            }
        }
        for (const engine::Parameter* p : model->parameters()) {
            if (!p->trainable) continue;
            engine::Tensor t = p->value.clone();
            float* v = t.data<float>();
            for (std::int64_t i = 0; i < t.numel(); ++i)
                v[i] = float(v[i] * (1.0 + 0.3 * rng.normal()) + 0.01 * rng.normal());
            ema.emplace_back("ema." + p->name, t);
        }
    }
    engine::CheckpointInfo ci;
    if (!info.definition.empty()) { // the run's configuration carries a model file's network
        engine::TrainConfig config = engine::defaultConfigFor(info);
        ci.config = config.toJson();
    }
    ci.dataset = datasetFor(name);
    for (int i = 0; i < info.numClasses; ++i) ci.classNames.push_back("class-" + std::to_string(i));
    ci.preprocessing = recipeFor(info).toJson();
    ci.step = trained ? 1234 : 0;
    engine::writeCheckpoint(path, engine::makeCheckpoint(*model, ci, std::move(ema)));
}

struct Logits
{
    std::vector<double> values; // [n, k]
    std::int64_t k = 0;
};

// The engine's inference forward on the reference backend.
Logits engineLogits(const fs::path& checkpoint, bool useEma, const std::vector<float>& nhwc,
                    std::int64_t n)
{
    const engine::Checkpoint c = engine::readCheckpoint(checkpoint);
    auto model = engine::buildModel(engine::resolveModel(c.info.model, c.info.modelDefinition));
    engine::loadCheckpoint(checkpoint, *model, useEma);
    auto ops = engine::makeReferenceOps();
    engine::ExecContext ctx{*ops, false, 0};
    const engine::Shape& s = model->inputShape();
    engine::Tensor x({n, s[0], s[1], s[2]}, engine::DType::Float32);
    std::copy(nhwc.begin(), nhwc.begin() + x.numel(), x.data<float>());
    const engine::Tensor& y = model->forward(ctx, x);
    Logits l;
    l.k = y.dim(1);
    for (std::int64_t i = 0; i < y.numel(); ++i) l.values.push_back(y.at(i));
    return l;
}

std::vector<float> toNchw(const std::vector<float>& nhwc, std::int64_t n, const engine::Shape& hwc)
{
    const std::int64_t h = hwc[0], w = hwc[1], c = hwc[2];
    std::vector<float> out(nhwc.size());
    for (std::int64_t b = 0; b < n; ++b)
        for (std::int64_t y = 0; y < h; ++y)
            for (std::int64_t x = 0; x < w; ++x)
                for (std::int64_t k = 0; k < c; ++k)
                    out[std::size_t(((b * c + k) * h + y) * w + x)] =
                        nhwc[std::size_t(((b * h + y) * w + x) * c + k)];
    return out;
}

template <class T> void writeRaw(const QString& path, const std::vector<T>& v, std::size_t count)
{
    std::ofstream f(path.toStdString(), std::ios::binary);
    f.write(reinterpret_cast<const char*>(v.data()), std::streamsize(count * sizeof(T)));
}

std::vector<float> readFloats(const QString& path)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return {};
    const QByteArray bytes = f.readAll();
    std::vector<float> v(std::size_t(bytes.size()) / sizeof(float));
    std::memcpy(v.data(), bytes.constData(), v.size() * sizeof(float));
    return v;
}

QJsonObject readJson(const QString& path)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return {};
    return QJsonDocument::fromJson(f.readAll()).object();
}

std::vector<double> softmax(const Logits& l, std::int64_t row)
{
    std::vector<double> p(std::size_t(l.k));
    double top = -INFINITY, sum = 0;
    for (std::int64_t j = 0; j < l.k; ++j)
        top = std::max(top, l.values[std::size_t(row * l.k + j)]);
    for (std::int64_t j = 0; j < l.k; ++j)
        sum += p[std::size_t(j)] = std::exp(l.values[std::size_t(row * l.k + j)] - top);
    for (auto& v : p) v /= sum;
    return p;
}

std::string messageOf(const std::function<void()>& f)
{
    try {
        f();
    } catch (const engine::Error& e) {
        return e.what();
    }
    return {};
}

} // namespace

class TestOnnxExport : public QObject
{
    Q_OBJECT
    QTemporaryDir m_dir;
    QString m_python; // the virtual environment's python; empty when it could not be made
    QString m_why;

    QString path(const QString& name) const { return m_dir.filePath(name); }

    // Runs run_onnx.py on `cases`; false (with the output in `log`) when it failed.
    bool runOnnx(const QJsonArray& cases, const QString& tag, QString& log)
    {
        const QString manifest = path(tag + QStringLiteral(".manifest.json"));
        QFile f(manifest);
        if (!f.open(QIODevice::WriteOnly)) return false;
        f.write(QJsonDocument(cases).toJson());
        f.close();
        QProcess py;
        py.setProcessChannelMode(QProcess::MergedChannels);
        py.start(m_python, {QStringLiteral(TOWERS_ONNX_SCRIPTS "/run_onnx.py"), manifest});
        const bool done = py.waitForFinished(240000);
        log = QString::fromUtf8(py.readAll());
        return done && py.exitStatus() == QProcess::NormalExit && py.exitCode() == 0;
    }

    bool runtimeMissing()
    {
        if (!m_python.isEmpty()) return false;
        if (qEnvironmentVariable("CI") == QLatin1String("true")) {
            QTest::qFail(qPrintable(QStringLiteral("CI=true and no onnxruntime: ") + m_why),
                         __FILE__, __LINE__);
            return true;
        }
        QTest::qSkip(qPrintable(QStringLiteral("onnxruntime is not available: ") + m_why), __FILE__,
                     __LINE__);
        return true;
    }

private slots:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        const QString venv = QStringLiteral(TOWERS_ONNX_VENV);
        QProcess setup;
        setup.setProcessChannelMode(QProcess::MergedChannels);
        setup.start(QStringLiteral("/bin/bash"),
                    {QStringLiteral(TOWERS_ONNX_SCRIPTS "/setup_venv.sh"), venv});
        const bool finished = setup.waitForFinished(480000);
        const QString log = QString::fromUtf8(setup.readAll()).trimmed();
        if (finished && setup.exitStatus() == QProcess::NormalExit && setup.exitCode() == 0)
            m_python = venv + QStringLiteral("/bin/python");
        else
            m_why = QStringLiteral(
                        "tests/onnx/setup_venv.sh %1 failed (pip install onnxruntime numpy): %2")
                        .arg(venv, finished ? log.right(1500) : QStringLiteral("timed out"));
    }

    // A checkpoint of a dataset imported with --fit squash or fill: the metadata and the doc
    // string say the whole image is scaled, not its centre rectangle.
    void saysHowEachFitReadsImages()
    {
        const fs::path checkpoint = path(QStringLiteral("fit.safetensors")).toStdString();
        writeModelCheckpoint("fashion-fast", false, checkpoint);
        engine::Checkpoint c = engine::readCheckpoint(checkpoint);
        const std::pair<engine::ImageFit, const char*> fits[] = {{engine::ImageFit::Squash, "none"},
                                                                 {engine::ImageFit::Fill, "pad"}};
        for (const auto& [fit, crop] : fits) {
            c.info.imageFit = fit;
            engine::writeCheckpoint(checkpoint, c);
            const QString file =
                path(QStringLiteral("fit-%1.onnx").arg(QLatin1String(engine::imageFitName(fit))));
            engine::exportOnnx(checkpoint, file.toStdString(), {});
            const engine::OnnxFileInfo onnx = engine::readOnnxInfo(file.toStdString());
            QCOMPARE(onnx.metadata.at("towers.image_crop"), std::string(crop));
            QVERIFY(onnx.docString.find("centre rectangle") == std::string::npos);
            QVERIFY2(onnx.docString.find(fit == engine::ImageFit::Squash
                                             ? "its aspect ratio not kept"
                                             : "its aspect ratio kept, and centred on black") !=
                         std::string::npos,
                     onnx.docString.c_str());
        }
    }

    // The metadata says how classify reads an image file (app/inference/image_files.h), and
    // what it says is what classify does: an image of twice the model's size and of another
    // aspect, brought to the source shape by the metadata's recipe (the centre rectangle cut,
    // 2 x 2 area averages, gray as towers.gray), is appendImage's within two levels (Qt's smooth
    // scaling rounds down).
    void saysHowClassifyReadsImages_data()
    {
        QTest::addColumn<QString>("model");
        QTest::newRow("fashion-fast (gray)") << QStringLiteral("fashion-fast");
        QTest::newRow("cifar10-tutorial (RGB)") << QStringLiteral("cifar10-tutorial");
    }

    void saysHowClassifyReadsImages()
    {
        QFETCH(QString, model);
        const fs::path checkpoint =
            path(model + QStringLiteral("-images.safetensors")).toStdString();
        writeModelCheckpoint(model.toStdString(), false, checkpoint);
        const QString file = path(model + QStringLiteral("-images.onnx"));
        engine::exportOnnx(checkpoint, file.toStdString(), {});
        const engine::OnnxFileInfo onnx = engine::readOnnxInfo(file.toStdString());
        std::map<std::string, std::string> meta = onnx.metadata;
        for (const std::string& key : engine::kOnnxMetadataKeys)
            QVERIFY2(meta.count(key), key.c_str());
        const engine::Shape source = engine::Classifier(checkpoint, true, 1).sourceShape();
        const bool gray = source[2] == 1;
        QCOMPARE(meta["towers.image_orientation"], std::string("exif"));
        QCOMPARE(meta["towers.image_crop"], std::string("centre"));
        QCOMPARE(meta["towers.image_resize"], std::string("smooth"));
        QCOMPARE(meta["towers.image_alpha"], std::string("black"));
        QCOMPARE(meta["towers.channel_order"], std::string(gray ? "gray" : "RGB"));
        QCOMPARE(meta.count("towers.gray"), std::size_t(gray ? 1 : 0));
        QCOMPARE(meta["towers.image_decode_side"], std::to_string(app::decodedShortSide(source)));
        QVERIFY(onnx.docString.find("centre rectangle") != std::string::npos);

        // A colour image 2H high and 2W + 10 wide: its centre 2H x 2W, averaged 2 x 2.
        const int h = int(source[0]), w = int(source[1]);
        QImage image(2 * w + 10, 2 * h, QImage::Format_RGB888);
        engine::Rng rng(3);
        for (int y = 0; y < image.height(); ++y)
            for (int x = 0; x < image.width(); ++x)
                image.setPixelColor(
                    x, y,
                    QColor(int(rng.next() >> 56), int(rng.next() >> 56), int(rng.next() >> 56)));
        engine::ImageSet got;
        app::appendImage(image, source, got);
        int worst = 0;
        double total = 0;
        std::int64_t values = 0;
        for (int y = 0; y < h; ++y)
            for (int x = 0; x < w; ++x) {
                double rgb[3] = {0, 0, 0};
                for (int dy = 0; dy < 2; ++dy)
                    for (int dx = 0; dx < 2; ++dx) {
                        const QColor c = image.pixelColor(5 + 2 * x + dx, 2 * y + dy);
                        rgb[0] += c.red() / 4.0;
                        rgb[1] += c.green() / 4.0;
                        rgb[2] += c.blue() / 4.0;
                    }
                // Each average's integer part, and gray as qGray of those: (11 R + 16 G + 5 B)
                // / 32, truncated.
                std::vector<int> want{int(rgb[0]), int(rgb[1]), int(rgb[2])};
                if (gray) want = {(11 * want[0] + 16 * want[1] + 5 * want[2]) / 32};
                for (std::size_t c = 0; c < want.size(); ++c) {
                    const int v = got.pixels[(std::size_t(y) * w + x) * want.size() + c];
                    worst = std::max(worst, std::abs(v - want[c]));
                    total += std::abs(v - want[c]);
                    ++values;
                }
            }
        // Qt's fixed-point smooth scaling: a level or two below the exact average.
        const double mean = total / double(values);
        qInfo("%s: %.3f levels from the metadata's recipe on average, %d at most",
              qPrintable(model), mean, worst);
        QVERIFY2(worst <= 2 && mean <= 1.25,
                 qPrintable(QStringLiteral("%1 levels from the metadata's recipe at most, %2 on "
                                           "average")
                                .arg(worst)
                                .arg(mean)));
    }

    void matchesEngine_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<bool>("trained");
        for (const auto& m : engine::modelRegistry()) {
            QTest::addRow("%s fresh", m.name.c_str()) << QString::fromStdString(m.name) << false;
            QTest::addRow("%s trained", m.name.c_str()) << QString::fromStdString(m.name) << true;
        }
        QTest::newRow("model file fresh") << QStringLiteral("every-layer") << false;
        QTest::newRow("model file trained") << QStringLiteral("every-layer") << true;
    }

    // onnxruntime's logits equal the engine's, NHWC and NCHW, batches of 1 and 3, with and
    // without the moving averages.
    void matchesEngine()
    {
        QFETCH(QString, model);
        QFETCH(bool, trained);
        if (runtimeMissing()) return;
        const std::string name = model.toStdString();
        const QString tag =
            model + (trained ? QStringLiteral("-trained") : QStringLiteral("-fresh"));
        const fs::path checkpoint = path(tag + QStringLiteral(".safetensors")).toStdString();
        writeModelCheckpoint(name, trained, checkpoint);
        const engine::Shape hwc = modelNamed(name).inputShape;

        // A random batch of 3 (preprocessed images are about N(0, 1)); the batch of 1 is its first.
        engine::Rng rng(99);
        const std::int64_t per = hwc.numel();
        std::vector<float> batch(std::size_t(3 * per));
        for (auto& v : batch) v = float(rng.normal());
        const std::vector<float> nchw = toNchw(batch, 3, hwc);
        std::vector<float> nchw1 =
            toNchw(std::vector<float>(batch.begin(), batch.begin() + per), 1, hwc);
        writeRaw(path(tag + QStringLiteral("-nhwc.in")), batch, batch.size());
        writeRaw(path(tag + QStringLiteral("-nchw.in")), nchw, nchw.size());
        writeRaw(path(tag + QStringLiteral("-nchw1.in")), nchw1, nchw1.size());

        struct Export
        {
            QString name;
            engine::OnnxLayout layout;
            bool ema;
        };
        std::vector<Export> exports{{QStringLiteral("nhwc"), engine::OnnxLayout::Nhwc, true},
                                    {QStringLiteral("nchw"), engine::OnnxLayout::Nchw, true}};
        if (trained)
            exports.push_back({QStringLiteral("nhwc-raw"), engine::OnnxLayout::Nhwc, false});
        QJsonArray cases;
        for (const Export& e : exports) {
            engine::OnnxExportOptions o;
            o.layout = e.layout;
            o.useEma = e.ema;
            const QString file = path(tag + QLatin1Char('-') + e.name + QStringLiteral(".onnx"));
            const engine::OnnxExportSummary s =
                engine::exportOnnx(checkpoint, file.toStdString(), o);
            QCOMPARE(s.usedEma, trained && e.ema);
            QCOMPARE(s.opset, engine::onnxMaxOpset());
            for (int n : {1, 3}) {
                const bool nhwc = e.layout == engine::OnnxLayout::Nhwc;
                const QString input = path(tag + (nhwc ? QStringLiteral("-nhwc.in")
                                                       : (n == 1 ? QStringLiteral("-nchw1.in")
                                                                 : QStringLiteral("-nchw.in"))));
                QJsonArray shape{n};
                for (std::int64_t d :
                     nhwc ? hwc.dims() : std::vector<std::int64_t>{hwc[2], hwc[0], hwc[1]})
                    shape.append(qint64(d));
                if (nhwc && n == 1) {
                    // run_onnx.py reads exactly the shape's bytes: the first image of the file.
                    const QString one = path(tag + QStringLiteral("-nhwc1.in"));
                    writeRaw(one, batch, std::size_t(per));
                    cases.append(
                        QJsonObject{{QStringLiteral("model"), file},
                                    {QStringLiteral("input"), one},
                                    {QStringLiteral("shape"), shape},
                                    {QStringLiteral("output"), file + QStringLiteral(".b1")}});
                    continue;
                }
                cases.append(QJsonObject{
                    {QStringLiteral("model"), file},
                    {QStringLiteral("input"), input},
                    {QStringLiteral("shape"), shape},
                    {QStringLiteral("output"), file + QStringLiteral(".b") + QString::number(n)}});
            }
        }
        QString log;
        QVERIFY2(runOnnx(cases, tag, log), qPrintable(log));

        const Logits ema3 = engineLogits(checkpoint, true, batch, 3),
                     ema1 = engineLogits(checkpoint, true, batch, 1);
        const Logits raw3 = engineLogits(checkpoint, false, batch, 3),
                     raw1 = engineLogits(checkpoint, false, batch, 1);
        if (trained) {
            // The moving averages make a difference the comparison can see.
            double d = 0, scale = 0;
            for (std::size_t i = 0; i < ema3.values.size(); ++i) {
                d = std::max(d, std::abs(ema3.values[i] - raw3.values[i]));
                scale = std::max(scale, std::abs(raw3.values[i]));
            }
            QVERIFY2(d > 100 * kRelativeTolerance * scale,
                     "the moving averages must change the logits");
        }
        for (const Export& e : exports) {
            const QString file = path(tag + QLatin1Char('-') + e.name + QStringLiteral(".onnx"));
            const QJsonObject info = readJson(file + QStringLiteral(".b3.json"));
            const QJsonObject meta = info.value(QStringLiteral("metadata")).toObject();
            QCOMPARE(meta.value(QStringLiteral("towers.model")).toString(), model);
            QCOMPARE(meta.value(QStringLiteral("towers.weights")).toString(),
                     trained && e.ema ? QStringLiteral("ema") : QStringLiteral("raw"));
            QCOMPARE(meta.value(QStringLiteral("towers.input_layout")).toString(),
                     e.name.left(4).toUpper());
            const QJsonArray inShape = info.value(QStringLiteral("inputs"))
                                           .toArray()
                                           .at(0)
                                           .toObject()
                                           .value(QStringLiteral("shape"))
                                           .toArray();
            QCOMPARE(inShape.at(0).toString(), QStringLiteral("batch")); // dynamic
            for (int n : {1, 3}) {
                const Logits& want = (trained && e.ema) || !trained ? (n == 1 ? ema1 : ema3)
                                                                    : (n == 1 ? raw1 : raw3);
                const std::vector<float> got = readFloats(
                    file + QStringLiteral(".b") + QString::number(n) + QStringLiteral(".logits"));
                const std::vector<float> probs =
                    readFloats(file + QStringLiteral(".b") + QString::number(n) +
                               QStringLiteral(".probabilities"));
                QCOMPARE(qsizetype(got.size()), qsizetype(want.values.size()));
                QCOMPARE(qsizetype(probs.size()), qsizetype(want.values.size()));
                double maxDiff = 0, scale = 0, probDiff = 0;
                for (std::size_t i = 0; i < got.size(); ++i) {
                    maxDiff = std::max(maxDiff, std::abs(double(got[i]) - want.values[i]));
                    scale = std::max(scale, std::abs(want.values[i]));
                }
                for (std::int64_t r = 0; r < n; ++r) {
                    const std::vector<double> p = softmax(want, r);
                    for (std::int64_t j = 0; j < want.k; ++j)
                        probDiff =
                            std::max(probDiff, std::abs(double(probs[std::size_t(r * want.k + j)]) -
                                                        p[std::size_t(j)]));
                }
                qInfo("%s %s batch %d: max |onnxruntime - engine| = %.3g, logits' scale %.3g, "
                      "relative %.3g; probabilities %.3g",
                      qPrintable(tag), qPrintable(e.name), n, maxDiff, scale, maxDiff / scale,
                      probDiff);
                QVERIFY2(scale > 0, "the logits must not all be zero");
                QVERIFY2(maxDiff <= kRelativeTolerance * scale,
                         qPrintable(QStringLiteral("%1 %2 batch %3: logits differ by %4 (scale %5)")
                                        .arg(tag, e.name)
                                        .arg(n)
                                        .arg(maxDiff)
                                        .arg(scale)));
                QVERIFY2(probDiff <= 1e-5,
                         qPrintable(QStringLiteral("probabilities differ by %1").arg(probDiff)));
            }
        }
    }

    void reproducesClassify_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("layout");
        QTest::newRow("cifar10-tutorial (per-image, 32 -> 24 crop)")
            << QStringLiteral("cifar10-tutorial") << QStringLiteral("nhwc");
        QTest::newRow("cifar10-tutorial NCHW")
            << QStringLiteral("cifar10-tutorial") << QStringLiteral("nchw");
        QTest::newRow("cifar10-resnet (mean/std, 3 channels)")
            << QStringLiteral("cifar10-resnet") << QStringLiteral("nhwc");
        QTest::newRow("fashion-fast (mean/std)")
            << QStringLiteral("fashion-fast") << QStringLiteral("nchw");
    }

    // 8-bit images preprocessed from metadata_props alone, as README.md says, give classify's
    // probabilities (Classifier, with the moving averages).
    void reproducesClassify()
    {
        QFETCH(QString, model);
        QFETCH(QString, layout);
        if (runtimeMissing()) return;
        const QString tag = model + QStringLiteral("-classify-") + layout;
        const fs::path checkpoint = path(tag + QStringLiteral(".safetensors")).toStdString();
        // No extra gain: probabilities far from both uniform and one-hot.
        writeModelCheckpoint(model.toStdString(), true, checkpoint, 1.0);
        engine::OnnxExportOptions o;
        o.layout = engine::parseOnnxLayout(layout.toStdString());
        const QString file = path(tag + QStringLiteral(".onnx"));
        engine::exportOnnx(checkpoint, file.toStdString(), o);

        engine::Classifier classifier(checkpoint, true, 1);
        const engine::Shape source = classifier.sourceShape();
        engine::ImageSet images;
        images.count = 5;
        images.height = source[0];
        images.width = source[1];
        images.channels = source[2];
        images.labels.assign(5, 0);
        engine::Rng rng(5);
        for (std::int64_t i = 0; i < images.count * images.imageBytes(); ++i)
            images.pixels.push_back(std::uint8_t(rng.next() >> 56));
        const auto want = classifier.probabilities(images);
        const QString bytes = path(tag + QStringLiteral(".u8"));
        writeRaw(bytes, images.pixels, images.pixels.size());
        const QJsonArray cases{
            QJsonObject{{QStringLiteral("model"), file},
                        {QStringLiteral("images"), bytes},
                        {QStringLiteral("shape"),
                         QJsonArray{5, qint64(source[0]), qint64(source[1]), qint64(source[2])}},
                        {QStringLiteral("output"), file}}};
        QString log;
        QVERIFY2(runOnnx(cases, tag, log), qPrintable(log));
        const std::vector<float> got = readFloats(file + QStringLiteral(".probabilities"));
        const std::size_t k = want[0].size();
        QCOMPARE(got.size(), 5 * k);
        double maxDiff = 0, spread = 0, weakestTop = 1;
        for (std::size_t i = 0; i < 5; ++i) {
            double top = 0;
            for (std::size_t j = 0; j < k; ++j) {
                maxDiff = std::max(maxDiff, std::abs(double(got[i * k + j]) - want[i][j]));
                spread = std::max(spread, std::abs(want[i][j] - 1.0 / double(k)));
                top = std::max(top, want[i][j]);
            }
            weakestTop = std::min(weakestTop, top);
        }
        qInfo("%s: max |onnxruntime - classify| probability difference %.3g", qPrintable(tag),
              maxDiff);
        QVERIFY2(spread > 0.01 && weakestTop < 0.999,
                 "the probabilities must be neither uniform nor one-hot for the comparison to "
                 "mean something");
        QVERIFY2(maxDiff <= 1e-5,
                 qPrintable(QStringLiteral("probabilities differ by %1").arg(maxDiff)));
    }

    // An older opset writes a file onnxruntime runs too.
    void olderOpset()
    {
        if (runtimeMissing()) return;
        const fs::path checkpoint = path(QStringLiteral("opset.safetensors")).toStdString();
        writeModelCheckpoint("cifar10-resnet", true, checkpoint);
        engine::OnnxExportOptions o;
        o.opset = engine::kOnnxMinOpset;
        const QString file = path(QStringLiteral("opset11.onnx"));
        QCOMPARE(engine::exportOnnx(checkpoint, file.toStdString(), o).opset,
                 engine::kOnnxMinOpset);
        std::vector<float> x(32 * 32 * 3);
        engine::Rng rng(3);
        for (auto& v : x) v = float(rng.normal());
        writeRaw(path(QStringLiteral("opset11.in")), x, x.size());
        QString log;
        QVERIFY2(runOnnx(QJsonArray{QJsonObject{
                             {QStringLiteral("model"), file},
                             {QStringLiteral("input"), path(QStringLiteral("opset11.in"))},
                             {QStringLiteral("shape"), QJsonArray{1, 32, 32, 3}},
                             {QStringLiteral("output"), file}}},
                         QStringLiteral("opset11"), log),
                 qPrintable(log));
        const Logits want = engineLogits(checkpoint, true, x, 1);
        const std::vector<float> got = readFloats(file + QStringLiteral(".logits"));
        QCOMPARE(got.size(), want.values.size());
        double maxDiff = 0, scale = 0;
        for (std::size_t i = 0; i < got.size(); ++i) {
            maxDiff = std::max(maxDiff, std::abs(double(got[i]) - want.values[i]));
            scale = std::max(scale, std::abs(want.values[i]));
        }
        QVERIFY2(maxDiff <= kRelativeTolerance * scale, qPrintable(QString::number(maxDiff)));
    }

    // Every batch norm of the BN models follows a convolution, so none is left.
    void foldsEveryBatchNorm_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<int>("folded");
        QTest::newRow("cifar10-tutorial") << QStringLiteral("cifar10-tutorial") << 0;
        QTest::newRow("mnist-convnet") << QStringLiteral("mnist-convnet") << 0;
        QTest::newRow("fashion-fast") << QStringLiteral("fashion-fast") << 2;
        QTest::newRow("fashion-wide") << QStringLiteral("fashion-wide") << 4;
        QTest::newRow("cifar10-resnet") << QStringLiteral("cifar10-resnet") << 8;
    }
    void foldsEveryBatchNorm()
    {
        QFETCH(QString, model);
        QFETCH(int, folded);
        auto m = engine::createModel(model.toStdString(), 1);
        engine::CheckpointInfo info;
        engine::OnnxExportSummary s;
        const std::string bytes = engine::onnxModelBytes(*m, info, false, {}, &s);
        QCOMPARE(s.foldedBatchNorms, folded);
        QVERIFY(bytes.find("BatchNormalization") == std::string::npos);
        QVERIFY(bytes.find("Dropout") == std::string::npos);
        QCOMPARE(std::int64_t(bytes.size()), s.bytes);
        QVERIFY(!s.warnings.empty()); // no preprocessing recipe
    }

    void refusesAnExistingFile()
    {
        const fs::path checkpoint = path(QStringLiteral("exists.safetensors")).toStdString();
        writeModelCheckpoint("fashion-fast", false, checkpoint);
        const fs::path out = path(QStringLiteral("exists.onnx")).toStdString();
        {
            std::ofstream f(out);
            f << "keep me";
        }
        const std::string message = messageOf([&] { engine::exportOnnx(checkpoint, out, {}); });
        QVERIFY2(message.find(out.string()) != std::string::npos &&
                     message.find("--force") != std::string::npos,
                 message.c_str());
        QCOMPARE(QString::fromStdString(test_readText(out)), QStringLiteral("keep me"));
        engine::OnnxExportOptions o;
        o.overwrite = true;
        engine::exportOnnx(checkpoint, out, o);
        QVERIFY(fs::file_size(out) > 100000);
        // Nothing but the checkpoint and the file: no temporary file left behind.
        for (const auto& entry : fs::directory_iterator(m_dir.path().toStdString()))
            QVERIFY2(entry.path().filename().string().find(".tmp-") == std::string::npos,
                     entry.path().c_str());
    }

    void refusesBadCheckpoints()
    {
        const fs::path corrupt = path(QStringLiteral("corrupt.safetensors")).toStdString();
        writeModelCheckpoint("fashion-fast", false, corrupt);
        {
            std::fstream f(corrupt, std::ios::in | std::ios::out | std::ios::binary);
            f.seekp(-100, std::ios::end);
            f.write("garbage!", 8);
        }
        const fs::path out = path(QStringLiteral("never.onnx")).toStdString();
        std::string message;
        try {
            engine::exportOnnx(corrupt, out, {});
        } catch (const engine::IoError& e) {
            message = e.what();
        }
        QVERIFY2(message.find(corrupt.string()) != std::string::npos, message.c_str());
        QVERIFY(!fs::exists(out));

        // A checkpoint of a model this build does not know: refused as a bad file.
        auto model = engine::createModel("fashion-fast", 1);
        engine::Checkpoint c = engine::makeCheckpoint(*model, {});
        c.info.model = "no-such-model";
        const fs::path unknown = path(QStringLiteral("unknown.safetensors")).toStdString();
        engine::writeCheckpoint(unknown, c);
        message.clear();
        try {
            engine::exportOnnx(unknown, out, {});
        } catch (const engine::IoError& e) {
            message = e.what();
        }
        QVERIFY2(message.find(unknown.string()) != std::string::npos &&
                     message.find("no-such-model") != std::string::npos,
                 message.c_str());
        QVERIFY(!fs::exists(out));
    }

    void refusesBadOpsets()
    {
        const fs::path checkpoint = path(QStringLiteral("opsets.safetensors")).toStdString();
        writeModelCheckpoint("fashion-fast", false, checkpoint);
        for (int opset : {engine::kOnnxMinOpset - 1, engine::onnxMaxOpset() + 1}) {
            engine::OnnxExportOptions o;
            o.opset = opset;
            QVERIFY_THROWS_EXCEPTION(
                engine::InvalidArgument,
                engine::exportOnnx(checkpoint, path(QStringLiteral("opset.onnx")).toStdString(),
                                   o));
        }
    }

private:
    static std::string test_readText(const fs::path& p)
    {
        std::ifstream f(p);
        return std::string(std::istreambuf_iterator<char>(f), {});
    }
};

QTEST_GUILESS_MAIN(TestOnnxExport)
#include "tst_onnx_export.moc"
