// TensorBoard's side of a run, read back with the same messages (io/tensorboard/*.proto): the
// histograms as TensorFlow buckets them, PNG images that decode, every kind of event record,
// files that sort in the order written, and a Trainer's run and resume: the restart marker, the
// configuration, the image grid, the scalars of metrics.jsonl and eval.jsonl at their steps, the
// histograms every histogramEvery steps (none with 0), and histogramEvery in the configuration.
// (tests/tensorboard/ reads the same files with TensorBoard itself.)
#include <QTemporaryDir>
#include <QtTest>

#include <cfloat>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <set>

#include <nlohmann/json.hpp>
#include <zlib.h>

#include "engine/io/event_file_writer.h"
#include "engine/io/png_writer.h"
#include "engine/io/tfrecord.h"
#include "engine/train/checkpoint.h"
#include "engine/train/tensorboard_writer.h"
#include "engine/train/trainer.h"
#include "error_message.h"
#include "io/tensorboard/event.pb.h"
#include "io/tensorboard/hparams.pb.h"
#include "synthetic_batches.h"

using namespace towers::engine;
using towers::test::messageOf;
using towers::test::smallTrainConfig;
using towers::test::SyntheticBatches;
using towers::test::syntheticBatchesFor;
namespace fs = std::filesystem;
namespace tb = towers::tensorboard;

namespace {

std::string readAll(const fs::path& p)
{
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<tb::Event> eventsOf(const fs::path& file)
{
    bool complete = false;
    std::vector<tb::Event> out;
    for (const auto& r : readTfRecords(readAll(file), &complete, file.string())) {
        tb::Event e;
        if (!e.ParseFromString(r)) throw std::runtime_error("a record is not an Event");
        out.push_back(e);
    }
    if (!complete) throw std::runtime_error("the file ends in a partial record");
    return out;
}

// The event files of a folder, in name order (TensorBoard's reading order).
std::vector<fs::path> eventFiles(const fs::path& folder)
{
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(folder))
        if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0)
            files.push_back(e.path());
    std::sort(files.begin(), files.end());
    return files;
}

std::uint32_t be32(const std::string& s, std::size_t at)
{
    return std::uint32_t(std::uint8_t(s[at])) << 24 | std::uint32_t(std::uint8_t(s[at + 1])) << 16 |
           std::uint32_t(std::uint8_t(s[at + 2])) << 8 | std::uint32_t(std::uint8_t(s[at + 3]));
}

struct DecodedPng
{
    int width = 0, height = 0, colorType = -1;
    std::string raw; // inflated IDAT: a filter byte and the samples of each row
};

// Walks the chunks (each CRC checked) and inflates the image data.
DecodedPng decodePng(const std::string& png)
{
    if (png.substr(0, 8) != std::string("\x89PNG\r\n\x1a\n", 8))
        throw std::runtime_error("no PNG signature");
    DecodedPng d;
    std::string idat;
    for (std::size_t at = 8; at < png.size();) {
        const std::uint32_t n = be32(png, at);
        const std::string type = png.substr(at + 4, 4), data = png.substr(at + 8, n);
        const uLong crc = ::crc32(::crc32(0L, Z_NULL, 0),
                                  reinterpret_cast<const Bytef*>(png.data() + at + 4), n + 4);
        if (be32(png, at + 8 + n) != crc) throw std::runtime_error("bad CRC in chunk " + type);
        if (type == "IHDR") {
            d.width = int(be32(data, 0));
            d.height = int(be32(data, 4));
            d.colorType = std::uint8_t(data[9]);
        } else if (type == "IDAT") {
            idat += data;
        }
        at += 12 + n;
    }
    d.raw.resize(std::size_t(d.width) * std::size_t(d.height) * 4 + std::size_t(d.height));
    uLongf size = uLongf(d.raw.size());
    if (::uncompress(reinterpret_cast<Bytef*>(d.raw.data()), &size,
                     reinterpret_cast<const Bytef*>(idat.data()), uLong(idat.size())) != Z_OK)
        throw std::runtime_error("IDAT does not inflate");
    d.raw.resize(size);
    return d;
}

TrainConfig smallConfig()
{
    TrainConfig c = smallTrainConfig();
    c.checkpointEvery = 3;
    c.logEvery = 2;
    c.histogramEvery = 3;
    c.evalEvery = 3;
    c.emaDecay = 0.9;
    return c;
}

std::vector<nlohmann::json> jsonLines(const fs::path& file)
{
    std::vector<nlohmann::json> out;
    std::ifstream in(file);
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
}

// step -> tag -> value, for the summaries of `events` of kind simple_value.
std::map<std::int64_t, std::map<std::string, float>> scalarsOf(const std::vector<tb::Event>& events)
{
    std::map<std::int64_t, std::map<std::string, float>> out;
    for (const auto& e : events)
        for (const auto& v : e.summary().value())
            if (v.has_simple_value()) out[e.step()][v.tag()] = v.simple_value();
    return out;
}

// step -> histogram tags.
std::map<std::int64_t, std::set<std::string>> histogramTagsOf(const std::vector<tb::Event>& events)
{
    std::map<std::int64_t, std::set<std::string>> out;
    for (const auto& e : events)
        for (const auto& v : e.summary().value())
            if (v.has_histo()) out[e.step()].insert(v.tag());
    return out;
}

} // namespace

class TestTensorBoardWriter : public QObject
{
    Q_OBJECT
private slots:
    void histogramBucketsAsTensorFlow()
    {
        const auto& limits = Histogram::defaultLimits();
        QVERIFY(std::is_sorted(limits.begin(), limits.end()));
        QCOMPARE(limits.front(), -DBL_MAX);
        QCOMPARE(limits.back(), DBL_MAX);
        QCOMPARE(limits[limits.size() / 2], 0.0);
        QCOMPARE(limits[limits.size() / 2 + 1], 1e-12);
        QCOMPARE(limits.size(),
                 std::size_t(1551)); // 774 growing by 10% from 1e-12 to 1e20, DBL_MAX, mirrored, 0

        const std::vector<float> values{0.0f, 0.5f, -0.5f, 1.0f, 2.0f, 2.0f, NAN, INFINITY};
        const Histogram h = Histogram::of(values);
        QCOMPARE(h.num, 6.0); // non-finite values have no bucket
        QCOMPARE(h.min, -0.5);
        QCOMPARE(h.max, 2.0);
        QCOMPARE(h.sum, 5.0);
        QCOMPARE(h.sumSquares, 0.25 + 0.25 + 1 + 4 + 4);
        QCOMPARE(h.bucket.size(), h.bucketLimit.size());
        QCOMPARE(std::accumulate(h.bucket.begin(), h.bucket.end(), 0.0), 6.0);
        QVERIFY(std::is_sorted(h.bucketLimit.begin(), h.bucketLimit.end()));
        QCOMPARE(h.bucketLimit.back(), DBL_MAX);
        // Each value lies in [previous limit, its bucket's limit); no two empty buckets in a row.
        for (const float v : {0.0f, 0.5f, -0.5f, 1.0f, 2.0f}) {
            const auto b = std::size_t(
                std::upper_bound(h.bucketLimit.begin(), h.bucketLimit.end(), double(v)) -
                h.bucketLimit.begin());
            QVERIFY2(h.bucket[b] > 0, qPrintable(QString::number(double(v))));
        }
        for (std::size_t i = 1; i < h.bucket.size(); ++i)
            QVERIFY(h.bucket[i] > 0 || h.bucket[i - 1] > 0);
        // The bucket of 2.0 holds both.
        const auto two =
            std::size_t(std::upper_bound(h.bucketLimit.begin(), h.bucketLimit.end(), 2.0) -
                        h.bucketLimit.begin());
        QCOMPARE(h.bucket[two], 2.0);
        QVERIFY(h.bucketLimit[two - 1] <= 2.0 && 2.0 < h.bucketLimit[two] &&
                h.bucketLimit[two] <= 2.0 * 1.1 + 1e-12);
        // Nothing at all: one empty bucket.
        const Histogram none = Histogram::of(std::span<const double>());
        QCOMPARE(none.num, 0.0);
        QCOMPARE(none.bucket, std::vector<double>{0.0});
    }

    void pngDecodes()
    {
        // 2 rows of 3 RGB pixels.
        const std::vector<std::uint8_t> rgb{255, 0, 0, 0, 255, 0, 0, 0, 255,
                                            1,   2, 3, 4, 5,   6, 7, 8, 9};
        const DecodedPng d = decodePng(encodePng(rgb, 2, 3, 3));
        QCOMPARE(d.width, 3);
        QCOMPARE(d.height, 2);
        QCOMPARE(d.colorType, 2);
        std::string expected;
        for (int y = 0; y < 2; ++y) {
            expected.push_back('\0');
            expected.append(reinterpret_cast<const char*>(rgb.data()) + y * 9, 9);
        }
        QCOMPARE(d.raw, expected);
        QCOMPARE(decodePng(encodePng(std::vector<std::uint8_t>(20, 7), 4, 5, 1)).colorType, 0);
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, encodePng(rgb, 2, 2, 3));
    }

    void eventFileRecords()
    {
        QTemporaryDir dir;
        const fs::path folder = dir.path().toStdString();
        fs::path path;
        {
            EventFileWriter w(folder);
            path = w.path();
            w.sessionStart(7);
            w.scalars(8, {{"train/loss", 2.25}, {"train/lr", 0.1}});
            w.histograms(8, {{"conv1/weight", Histogram::of(std::vector<double>{1, 2, 3})}});
            w.image(8, "input/images", encodePng(std::vector<std::uint8_t>(6, 9), 2, 3, 1), 2, 3,
                    1);
            w.text(8, "config", "    {\"model\": \"x\"}");
        }
        const std::string name = path.filename().string();
        QVERIFY2(name.rfind("events.out.tfevents.", 0) == 0, name.c_str());
        QVERIFY(std::abs(EventFileWriter::secondsOf(name) - std::int64_t(std::time(nullptr))) <
                100);
        const auto events = eventsOf(path);
        QCOMPARE(events.size(), std::size_t(6));
        QCOMPARE(events[0].file_version(), std::string("brain.Event:2"));
        QVERIFY(events[0].wall_time() > 1.6e9);
        QCOMPARE(events[1].session_log().status(), tb::SessionLog::START);
        QCOMPARE(events[1].step(), std::int64_t(7));
        QCOMPARE(events[2].step(), std::int64_t(8));
        QCOMPARE(events[2].summary().value_size(), 2);
        QCOMPARE(events[2].summary().value(0).tag(), std::string("train/loss"));
        QCOMPARE(events[2].summary().value(0).simple_value(), 2.25f);
        QCOMPARE(events[2].summary().value(1).simple_value(), 0.1f);
        const auto& h = events[3].summary().value(0).histo();
        QCOMPARE(h.num(), 3.0);
        QCOMPARE(h.sum(), 6.0);
        QCOMPARE(h.sum_squares(), 14.0);
        QCOMPARE(h.bucket_limit_size(), h.bucket_size());
        const auto& image = events[4].summary().value(0).image();
        QCOMPARE(image.width(), 3);
        QCOMPARE(image.height(), 2);
        QCOMPARE(image.colorspace(), 1);
        QCOMPARE(decodePng(image.encoded_image_string()).width, 3);
        const auto& text = events[5].summary().value(0);
        QCOMPARE(text.metadata().plugin_data().plugin_name(), std::string("text"));
        QCOMPARE(text.metadata().data_class(), tb::DATA_CLASS_TENSOR);
        QCOMPARE(text.tensor().dtype(), tb::DT_STRING);
        QCOMPARE(text.tensor().tensor_shape().dim_size(), 0);
        QCOMPARE(text.tensor().string_val(0), std::string("    {\"model\": \"x\"}"));
    }

    // A new file sorts after every event file already in the folder, even one stamped in the future
    // (another host's clock), so TensorBoard reads them in the order they were written.
    void newFilesSortLast()
    {
        QTemporaryDir dir;
        const fs::path folder = dir.path().toStdString();
        const std::int64_t later = std::int64_t(std::time(nullptr)) + 1000;
        std::ofstream(folder / EventFileWriter::fileName(later, "elsewhere"));
        const EventFileWriter a(folder);
        QCOMPARE(EventFileWriter::secondsOf(a.path().filename().string()), later + 1);
        const EventFileWriter b(folder);
        QCOMPARE(EventFileWriter::secondsOf(b.path().filename().string()), later + 2);
        QCOMPARE(eventFiles(folder).back(), b.path());
        QCOMPARE(EventFileWriter::secondsOf("events.out.tfevents.x"), std::int64_t(-1));
        QCOMPARE(EventFileWriter::secondsOf("metrics.jsonl"), std::int64_t(-1));
        QCOMPARE(EventFileWriter::fileName(42, "h"),
                 std::string("events.out.tfevents.0000000042.h"));
    }

    void imageGridTiles()
    {
        SyntheticBatches src({5, 4, 3}, 3, 1, 7, 50, 2);
        src.seek(0);
        const Batch& batch = src.next();
        int height = 0, width = 0, channels = 0;
        const auto grid = imageGrid(batch, 64, height, width, channels);
        // 7 images: 3 columns, 3 rows, 2 pixels around each.
        QCOMPARE(width, 3 * 4 + 4 * 2);
        QCOMPARE(height, 3 * 5 + 4 * 2);
        QCOMPARE(channels, 3);
        QCOMPARE(grid.size(), std::size_t(height * width * channels));
        // Each tile spans 0..255 (rescaled by its own range); the padding is black.
        const auto at = [&](int y, int x, int c) {
            return grid[(std::size_t(y) * std::size_t(width) + std::size_t(x)) * 3 +
                        std::size_t(c)];
        };
        std::uint8_t lo = 255, hi = 0;
        for (int y = 2; y < 7; ++y)
            for (int x = 2; x < 6; ++x)
                for (int c = 0; c < 3; ++c) {
                    lo = std::min(lo, at(y, x, c));
                    hi = std::max(hi, at(y, x, c));
                }
        QCOMPARE(int(lo), 0);
        QCOMPARE(int(hi), 255);
        QCOMPARE(int(at(0, 0, 0)), 0);
        QCOMPARE(int(at(height - 1, width - 1, 2)), 0);
        imageGrid(batch, 4, height, width, channels);
        QCOMPARE(width, 2 * 4 + 3 * 2);
    }

    void configField()
    {
        TrainConfig c;
        c.steps = 5;
        QCOMPARE(c.histogramEvery, std::int64_t(100));
        c.histogramEvery = 0;
        QCOMPARE(TrainConfig::fromJson(c.toJson()).histogramEvery, std::int64_t(0));
        c.histogramEvery = 250;
        QCOMPARE(TrainConfig::fromJson(c.toJson()).histogramEvery, std::int64_t(250));
        QCOMPARE(TrainConfig::fromJson(R"({"steps": 1})").histogramEvery,
                 std::int64_t(100)); // an older config.json
        const std::string m =
            messageOf([] { TrainConfig::fromJson(R"({"steps": 1, "histogramEvery": -1})"); });
        QVERIFY2(m.find("histogramEvery: must be >= 0") != std::string::npos, m.c_str());
        const std::string t =
            messageOf([] { TrainConfig::fromJson(R"({"steps": 1, "histogramEvery": 1.5})"); });
        QVERIFY2(t.find("histogramEvery: expected an integer") != std::string::npos, t.c_str());
    }

    // Precision @ 5 beside precision @ 1 for more than 10 classes (CIFAR-100), not for 10.
    void topFiveForManyClasses()
    {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        {
            TensorBoardWriter w(root);
            EvalResult many(100);
            many.step = 7;
            many.precisionAt1 = 0.5;
            many.precisionAt5 = 0.75;
            w.evaluation(many);
            EvalResult ten(10);
            ten.step = 8;
            ten.ema = true;
            ten.precisionAt1 = 0.25;
            ten.precisionAt5 = 0.5;
            w.evaluation(ten);
        }
        const auto scalars = scalarsOf(eventsOf(eventFiles(root).front()));
        QCOMPARE(scalars.at(7).at("test/precision_at_1"), 0.5f);
        QCOMPARE(scalars.at(7).at("test/precision_at_5"), 0.75f);
        QCOMPARE(scalars.at(8).at("test/precision_at_1_ema"), 0.25f);
        QVERIFY(!scalars.at(8).count("test/precision_at_5_ema"));

        // A run of 12 classes: eval.jsonl's precisionAt5, as TensorBoard has it.
        QTemporaryDir runDir;
        const fs::path run = runDir.path().toStdString();
        TrainConfig c = smallConfig();
        c.classes = 12;
        {
            towers::test::SyntheticBatches src({28, 28, 1}, 12, c.towers, c.batchPerTower, 400, 11);
            Trainer t(c, src, run);
            t.setEvaluator(40, src.evaluationBatches());
            QCOMPARE(t.run(), Trainer::Outcome::Finished);
        }
        const auto evals = jsonLines(run / "eval.jsonl");
        QVERIFY(!evals.empty());
        const auto runScalars = scalarsOf(eventsOf(eventFiles(run).front()));
        for (const auto& e : evals) {
            const double at5 = e["precisionAt5"].get<double>();
            QVERIFY2(at5 >= e["precisionAt1"].get<double>(), e.dump().c_str());
            QCOMPARE(e["correctTop5"].get<std::int64_t>(),
                     std::int64_t(std::llround(at5 * e["examples"].get<double>())));
            // Class by class, summing to them: none counted beyond its class's examples.
            const auto perClass = e["classTop5"].get<std::vector<std::int64_t>>();
            const auto counts = e["classCounts"].get<std::vector<std::int64_t>>();
            QCOMPARE(perClass.size(), std::size_t(12));
            std::int64_t sum = 0;
            for (std::size_t k = 0; k < perClass.size(); ++k) {
                QVERIFY(perClass[k] >= 0 && perClass[k] <= counts[k]);
                sum += perClass[k];
            }
            QCOMPARE(sum, e["correctTop5"].get<std::int64_t>());
            QCOMPARE(runScalars.at(e["step"].get<std::int64_t>()).at("test/precision_at_5_ema"),
                     float(at5));
        }
    }

    // A run that clips its gradients: train/grad_norm at the logged steps, metrics.jsonl's
    // gradNorm, above the bound it clipped to; the hyperparameter with it.
    void clippingRunHasItsGradientNorm()
    {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        TrainConfig c = smallConfig();
        c.clipGradNorm = 0.01;
        {
            auto src = syntheticBatchesFor(c);
            Trainer t(c, src, root);
            QCOMPARE(t.run(), Trainer::Outcome::Finished);
        }
        const auto events = eventsOf(eventFiles(root).front());
        const auto scalars = scalarsOf(events);
        const auto metrics = jsonLines(root / "metrics.jsonl");
        QVERIFY(!metrics.empty());
        for (const auto& m : metrics) {
            const double norm = m["gradNorm"].get<double>();
            QVERIFY2(norm > 0.01, m.dump().c_str());
            QCOMPARE(scalars.at(m["step"].get<std::int64_t>()).at("train/grad_norm"), float(norm));
        }
        bool hparam = false;
        for (const auto& e : events)
            for (const auto& v : e.summary().value())
                if (v.tag() == "_hparams_/session_start_info") {
                    tb::HParamsPluginData data;
                    QVERIFY(data.ParseFromString(v.metadata().plugin_data().content()));
                    QCOMPARE(
                        data.session_start_info().hparams().at("clip_grad_norm").number_value(),
                        0.01);
                    hparam = true;
                }
        QVERIFY(hparam);
    }

    // A run and its resume, as TensorBoard will read them.
    void trainerRunAndResume()
    {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        const TrainConfig c = smallConfig();
        {
            auto src = syntheticBatchesFor(c);
            Trainer t(c, src, root);
            t.setEvaluator(40, src.evaluationBatches());
            QCOMPARE(t.run(), Trainer::Outcome::Finished);
            QCOMPARE(t.eventsFile().parent_path(), root);
        }
        auto files = eventFiles(root);
        QCOMPARE(files.size(), std::size_t(1));
        auto events = eventsOf(files[0]);
        QCOMPARE(events[0].file_version(), std::string("brain.Event:2"));
        QCOMPARE(events[1].session_log().status(), tb::SessionLog::START);
        QCOMPARE(events[1].step(), std::int64_t(0));
        // The configuration, as config.json has it.
        const auto& text = events[2].summary().value(0);
        QCOMPARE(text.tag(), std::string("config"));
        const std::string config = *RunDirectory(root).readConfig();
        const std::string runId = TrainConfig::fromJson(config).runId;
        QVERIFY(!runId.empty());
        QVERIFY2(text.tensor().string_val(0).find(runId) != std::string::npos,
                 text.tensor().string_val(0).c_str());
        // The hyperparameters, for the HParams dashboard: as TensorBoard's hparams summary writes
        // them (its tag, plugin name and data version, an empty float tensor of shape [0]).
        const auto& session = events[3].summary().value(0);
        QCOMPARE(session.tag(), std::string("_hparams_/session_start_info"));
        QCOMPARE(session.metadata().plugin_data().plugin_name(), std::string("hparams"));
        QCOMPARE(session.tensor().dtype(), tb::DT_FLOAT);
        QCOMPARE(session.tensor().tensor_shape().dim_size(), 1);
        QCOMPARE(session.tensor().tensor_shape().dim(0).size(), std::int64_t(0));
        tb::HParamsPluginData data;
        QVERIFY(data.ParseFromString(session.metadata().plugin_data().content()));
        QCOMPARE(data.version(), 0);
        QVERIFY(data.has_session_start_info());
        const auto& hparams = data.session_start_info().hparams();
        QCOMPARE(hparams.at("model").string_value(), c.model);
        QCOMPARE(hparams.at("lr").number_value(), c.schedule.lr);
        QCOMPARE(hparams.at("towers").number_value(), double(c.towers));
        QCOMPARE(hparams.at("global_batch").number_value(),
                 double(c.towers * c.examplesPerTowerStep()));
        QCOMPARE(hparams.at("accumulate").number_value(), double(c.accumulate));
        QCOMPARE(hparams.at("seed").number_value(), double(c.seed));
        QCOMPARE(hparams.at("precision").string_value(), std::string("fp32"));
        QCOMPARE(hparams.at("dropout").bool_value(), c.dropout);
        QCOMPARE(hparams.at("device").string_value(), std::string("cpu"));
        QVERIFY(!hparams.contains("init_from")); // from the seed's weights
        QCOMPARE(hparams.size(), hparamsOf(c).size());
        QCOMPARE(data.session_start_info().model_uri(), (root / "checkpoints").string());
        // The run's end, last: it reached its end.
        const auto& last = events.back().summary().value(0);
        QCOMPARE(last.tag(), std::string("_hparams_/session_end_info"));
        tb::HParamsPluginData end;
        QVERIFY(end.ParseFromString(last.metadata().plugin_data().content()));
        QCOMPARE(end.session_end_info().status(), tb::STATUS_SUCCESS);
        // The image grid of the first batch: 8 images of 28x28x1.
        bool image = false;
        for (const auto& e : events)
            for (const auto& v : e.summary().value())
                if (v.has_image()) {
                    QCOMPARE(v.tag(), std::string("input/training_images"));
                    QCOMPARE(e.step(), std::int64_t(0));
                    QCOMPARE(v.image().width(), 3 * 28 + 4 * 2);
                    QCOMPARE(v.image().height(), 3 * 28 + 4 * 2);
                    const DecodedPng png = decodePng(v.image().encoded_image_string());
                    QCOMPARE(png.width, v.image().width());
                    QCOMPARE(png.raw.size(), std::size_t(png.height * (png.width + 1)));
                    image = true;
                }
        QVERIFY(image);
        // Scalars at the logged steps, with metrics.jsonl's values.
        const auto scalars = scalarsOf(events);
        const auto metrics = jsonLines(root / "metrics.jsonl");
        QCOMPARE(metrics.size(), std::size_t(3));
        for (const auto& m : metrics) {
            const auto& s = scalars.at(m["step"].get<std::int64_t>());
            QCOMPARE(s.at("train/loss"), m["loss"].get<float>());
            QCOMPARE(s.at("train/cross_entropy"), m["crossEntropy"].get<float>());
            QCOMPARE(s.at("train/learning_rate"), m["lr"].get<float>());
            QCOMPARE(s.at("throughput/examples_per_sec"), m["examplesPerSec"].get<float>());
            QCOMPARE(s.at("time/allreduce_ms"), m["allReduceMs"].get<float>());
            // The gradients' norm, measured in a run that does not clip them.
            QVERIFY2(m["gradNorm"].get<double>() > 0, m.dump().c_str());
            QCOMPARE(s.at("train/grad_norm"), m["gradNorm"].get<float>());
            for (int tower = 0; tower < 2; ++tower) {
                const double ms = m["towerComputeMs"][std::size_t(tower)].get<double>();
                const std::string name = "tower_" + std::to_string(tower);
                QCOMPARE(s.at("time/" + name + "/compute_ms"), float(ms));
                QCOMPARE(s.at("throughput/" + name + "/examples_per_sec"), float(4 * 1000.0 / ms));
                const auto& split = m["towerTimes"][std::size_t(tower)];
                for (const char* part : {"comm", "data", "update"})
                    QCOMPARE(s.at("time/" + name + "/" + part + "_ms"),
                             split[std::string(part) + "Ms"].get<float>());
            }
        }
        // Evaluations (with the moving averages) at 3 and 6.
        const auto evals = jsonLines(root / "eval.jsonl");
        QCOMPARE(evals.size(), std::size_t(2));
        for (const auto& e : evals)
            QCOMPARE(scalars.at(e["step"].get<std::int64_t>()).at("test/precision_at_1_ema"),
                     e["precisionAt1"].get<float>());
        // Histograms: the initial weights, then weights and gradients every 3 steps.
        const auto histograms = histogramTagsOf(events);
        QCOMPARE(histograms.size(), std::size_t(3));
        QVERIFY(histograms.at(0).count("conv1/weight") &&
                !histograms.at(0).count("conv1/weight/gradients"));
        for (std::int64_t step : {3, 6}) {
            QVERIFY(histograms.at(step).count("conv1/weight") &&
                    histograms.at(step).count("conv1/weight/gradients"));
            QCOMPARE(histograms.at(step).size(), 2 * histograms.at(0).size());
        }
        // The histogram of a weight at step 6 has the values of step 6's checkpoint.
        const Checkpoint six = readCheckpoint(RunDirectory(root).checkpointPath(6));
        const auto weights = six.weight("conv1.weight")->span<float>();
        int seen = 0;
        for (const auto& e : events)
            for (const auto& v : e.summary().value())
                if (e.step() == 6 && v.tag() == "conv1/weight") {
                    QCOMPARE(v.histo().num(), double(weights.size()));
                    QCOMPARE(v.histo().min(),
                             double(*std::min_element(weights.begin(), weights.end())));
                    QCOMPARE(v.histo().max(),
                             double(*std::max_element(weights.begin(), weights.end())));
                    ++seen;
                }
        QCOMPARE(seen, 1);

        // Checkpoint 6 gone (as if killed after logging step 6, before the checkpoint): resumed
        // from 3 and extended to 8 steps. The first file keeps steps 0 to 3; a second file, later
        // in name order, restarts at 4.
        fs::rename(RunDirectory(root).checkpointPath(6), root / "ckpt-6");
        TrainConfig longer = c;
        longer.steps = 8;
        {
            auto src = syntheticBatchesFor(longer);
            Trainer t(longer, src, root);
            t.setEvaluator(40, src.evaluationBatches());
            QCOMPARE(t.resumeFromNewest(), std::optional<std::int64_t>(3));
            QCOMPARE(t.run(), Trainer::Outcome::Finished);
        }
        QCOMPARE(eventFiles(root).size(), std::size_t(2));
        QCOMPARE(eventFiles(root)[0], files[0]);
        const auto before = eventsOf(files[0]);
        QVERIFY(std::all_of(before.begin(), before.end(),
                            [](const tb::Event& e) { return e.step() <= 3; }));
        QCOMPARE(scalarsOf(before).rbegin()->first, std::int64_t(3));
        events = eventsOf(eventFiles(root)[1]);
        QCOMPARE(events[1].session_log().status(), tb::SessionLog::START);
        QCOMPARE(events[1].step(), std::int64_t(4));
        auto merged = scalarsOf(before);
        for (const auto& [step, values] : scalarsOf(events)) {
            QVERIFY(!merged.count(step)); // the steps continue, none twice
            merged[step] = values;
        }
        const auto all = jsonLines(root / "metrics.jsonl");
        QCOMPARE(all.size(), std::size_t(4));
        for (const auto& m : all)
            QCOMPARE(merged.at(m["step"].get<std::int64_t>()).at("train/loss"),
                     m["loss"].get<float>());
        for (const auto& e : jsonLines(root / "eval.jsonl"))
            QCOMPARE(merged.at(e["step"].get<std::int64_t>()).at("test/precision_at_1_ema"),
                     e["precisionAt1"].get<float>());
        const auto resumedHistograms = histogramTagsOf(events);
        QCOMPARE(resumedHistograms.size(), std::size_t(2)); // 6 and the last step, 8
        QVERIFY(resumedHistograms.count(6) && resumedHistograms.count(8));
    }

    // What a resume drops from the earlier files: records after its step (not the file version),
    // and a partial record a kill left; a file that does not read is left alone.
    void dropEventsAfter()
    {
        QTemporaryDir dir;
        const fs::path folder = dir.path().toStdString();
        fs::path path;
        {
            EventFileWriter w(folder);
            path = w.path();
            w.sessionStart(0);
            for (int step = 1; step <= 9; ++step) w.scalars(step, {{"x", double(step)}});
        }
        const std::string whole = readAll(path);
        std::ofstream(folder / ".towers-events-rewrite-1") << "a killed rewrite's"; // removed
        std::ofstream(path, std::ios::app) << std::string("\x20\0\0\0\0\0", 6); // killed mid-record
        QCOMPARE(EventFileWriter::dropEventsAfter(folder, 9), 1); // only the partial record goes
        QCOMPARE(readAll(path), whole);
        QCOMPARE(EventFileWriter::dropEventsAfter(folder, 9), 0); // nothing to drop: untouched
        QCOMPARE(EventFileWriter::dropEventsAfter(folder, 4), 1);
        auto events = eventsOf(path);
        QCOMPARE(events.size(), std::size_t(2 + 4));
        QCOMPARE(scalarsOf(events).rbegin()->first, std::int64_t(4));
        QCOMPARE(EventFileWriter::dropEventsAfter(folder, -1),
                 1); // a restart at 0: only the file version stays
        events = eventsOf(path);
        QCOMPARE(events.size(), std::size_t(1));
        QCOMPARE(events[0].file_version(), std::string("brain.Event:2"));
        // A damaged file is not rewritten.
        {
            EventFileWriter w(folder);
            w.scalars(5, {{"x", 5.0}});
            path = w.path();
        }
        std::string damaged = readAll(path);
        damaged[damaged.size() - 1] = char(damaged[damaged.size() - 1] ^ 1);
        std::ofstream(path, std::ios::binary | std::ios::trunc) << damaged;
        QCOMPARE(EventFileWriter::dropEventsAfter(folder, 0), 0);
        QCOMPARE(readAll(path), damaged);
        for (const auto& e : fs::directory_iterator(folder)) // no temporary file left
            QVERIFY2(e.path().filename().string().rfind("events.out.tfevents.", 0) == 0,
                     e.path().c_str());
    }

    void noHistogramsWhenOff()
    {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        TrainConfig c = smallConfig();
        c.histogramEvery = 0;
        auto src = syntheticBatchesFor(c);
        Trainer t(c, src, root);
        QCOMPARE(t.run(), Trainer::Outcome::Finished);
        QVERIFY(histogramTagsOf(eventsOf(t.eventsFile())).empty());
        QVERIFY(!scalarsOf(eventsOf(t.eventsFile())).empty());
    }
};

QTEST_APPLESS_MAIN(TestTensorBoardWriter)
#include "tst_tensorboard_writer.moc"
