// Checkpoints and the run directory: a round trip of every tensor and metadata field; refusal,
// with a message naming the file and the tensor, of truncated and corrupted files, of another
// model's checkpoint, of a wrong dtype or shape, of missing and extra tensors; the fallback to the
// newest good file; and a training process killed with SIGKILL at random moments while it writes
// checkpoints, after which every checkpoint loads and the run resumes where it stopped.
#include <QProcess>
#include <QRandomGenerator>
#include <QTemporaryDir>
#include <QtTest>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sys/stat.h>
#include <thread>

#include "engine/cpu/onednn_ops.h"
#include "engine/models/model_file.h"
#include "engine/models/registry.h"
#include "engine/optim/ema.h"
#include "engine/optim/sgd.h"
#include "engine/train/checkpoint.h"
#include "engine/train/run_directory.h"
#include "gradcheck.h"
#include "resident_memory.h"

using namespace towers::engine;
using namespace towers::test;
namespace fs = std::filesystem;

namespace {

// A checkpoint of a fashion-fast model after one momentum step, with moving averages.
Checkpoint sampleCheckpoint(Model& m, std::int64_t step = 7)
{
    auto ops = makeReferenceOps();
    Rng rng(3);
    for (auto* p : m.parameters())
        if (p->trainable) p->grad = randomTensor(p->value.shape(), p->value.dtype(), rng);
    Sgd sgd({0.9, 0, false});
    Ema ema(0.99);
    ema.reset(m.parameters());
    sgd.step(*ops, m.parameters(), 0.1);
    ema.update(m.parameters(), 1);
    CheckpointInfo info;
    info.dataset = "fashion-mnist";
    info.classNames = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                       "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
    info.preprocessing = R"({"height":28,"width":28,"channels":1,"normalization":"mean_std"})";
    info.step = step;
    info.epoch = 0.25;
    info.optimizer = sgd.name();
    info.config = R"({"model": "fashion-fast"})";
    NamedTensors state;
    for (const auto& [n, t] : sgd.state(m.parameters())) state.emplace_back(n, t.clone());
    NamedTensors averages;
    for (const auto& [n, t] : ema.state()) averages.emplace_back(n, t.clone());
    return makeCheckpoint(m, info, averages, state);
}

std::vector<char> readBytes(const fs::path& p)
{
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void writeBytes(const fs::path& p, const std::vector<char>& bytes, std::size_t n)
{
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(n));
}

std::uint64_t headerLength(const std::vector<char>& bytes)
{
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[std::size_t(i)]);
    return n;
}

// Expects `f` to throw E whose message contains every one of `words`.
template <class E, class F> void expectError(F&& f, const QStringList& words)
{
    try {
        f();
        QFAIL(qPrintable(QStringLiteral("no error; expected one saying: ") +
                         words.join(QStringLiteral(", "))));
    } catch (const E& e) {
        const QString what = QString::fromUtf8(e.what());
        for (const auto& w : words)
            QVERIFY2(what.contains(w),
                     qPrintable(what + QStringLiteral(" (wanted: ") + w + QLatin1Char(')')));
    }
}

} // namespace

class TestCheckpoint : public QObject
{
    Q_OBJECT
private slots:
    void roundTrip()
    {
        QTemporaryDir dir;
        const fs::path file = dir.filePath(QStringLiteral("c.safetensors")).toStdString();
        auto m = createModel("fashion-fast", 2);
        const Checkpoint c = sampleCheckpoint(*m);
        writeCheckpoint(file, c);
        const Checkpoint r = readCheckpoint(file);
        QCOMPARE(r.info.model, std::string("fashion-fast"));
        QCOMPARE(r.info.dataset, std::string("fashion-mnist"));
        QCOMPARE(r.info.classNames, c.info.classNames);
        QCOMPARE(r.info.inputShape, Shape({28, 28, 1}));
        QCOMPARE(r.info.preprocessing, c.info.preprocessing);
        QCOMPARE(r.info.step, std::int64_t(7));
        QCOMPARE(r.info.epoch, 0.25);
        QCOMPARE(r.info.optimizer, std::string("momentum"));
        QCOMPARE(r.info.config, c.info.config);
        QCOMPARE(r.info.formatVersion, kCheckpointFormatVersion);
        QCOMPARE(r.info.imageFit, ImageFit::Crop); // not recorded: cropped, as before --fit
        // The header alone says the same.
        const CheckpointInfo header = readCheckpointInfo(file);
        QCOMPARE(header.model, r.info.model);
        QCOMPARE(header.classNames, r.info.classNames);
        QCOMPARE(header.step, r.info.step);
        QCOMPARE(header.config, r.info.config);
        // So does the file read one tensor at a time, checked against the model.
        const CheckpointInfo verified = verifyCheckpoint(file, m.get());
        QCOMPARE(verified.model, r.info.model);
        QCOMPARE(verified.classNames, r.info.classNames);
        QCOMPARE(verified.step, r.info.step);
        QCOMPARE(verified.config, r.info.config);
        QCOMPARE(verifyCheckpoint(file).step, r.info.step);
        QCOMPARE(r.weights.size(), m->parameters().size());
        QCOMPARE(r.ema.size(), c.ema.size());
        QCOMPARE(r.optimizer.size(), c.optimizer.size());
        for (const auto* p : m->parameters())
            QCOMPARE(maxAbsDiff(*r.weight(p->name), p->value), 0.0);
        for (std::size_t i = 0; i < c.optimizer.size(); ++i) {
            QCOMPARE(r.optimizer[i].first, c.optimizer[i].first);
            QCOMPARE(maxAbsDiff(r.optimizer[i].second.to(DType::Float64),
                                c.optimizer[i].second.to(DType::Float64)),
                     0.0);
        }
        // Weights are stored under the model's (PyTorch state_dict) names, in its order.
        QCOMPARE(r.weights.front().first, std::string("conv1.weight"));
        QCOMPARE(r.ema.front().first, std::string("ema.conv1.weight"));

        // Loading into a fresh model: the weights, or the averages in place of trainable weights.
        auto fresh = createModel("fashion-fast", 99);
        loadCheckpoint(file, *fresh);
        QCOMPARE(maxAbsDiff(fresh->parameter("fc1.weight").value, m->parameter("fc1.weight").value),
                 0.0);
        loadCheckpoint(file, *fresh, true);
        QCOMPARE(maxAbsDiff(fresh->parameter("fc1.weight").value, *r.weight("fc1.weight", true)),
                 0.0);
        QVERIFY(maxAbsDiff(fresh->parameter("fc1.weight").value, m->parameter("fc1.weight").value) >
                0);
        QCOMPARE(maxAbsDiff(fresh->parameter("bn1.running_var").value,
                            m->parameter("bn1.running_var").value),
                 0.0);
    }

    // How image files are brought to the images' size (a dataset imported with --fit): recorded,
    // read back from the file and from its header; an unknown one refused naming it.
    void imageFitRoundTrip()
    {
        QTemporaryDir dir;
        const fs::path file = dir.filePath(QStringLiteral("fit.safetensors")).toStdString();
        auto m = createModel("fashion-fast", 2);
        for (const ImageFit fit : {ImageFit::Squash, ImageFit::Fill}) {
            Checkpoint c = sampleCheckpoint(*m);
            c.info.imageFit = fit;
            writeCheckpoint(file, c);
            QCOMPARE(readCheckpoint(file).info.imageFit, fit);
            QCOMPARE(readCheckpointInfo(file).imageFit, fit);
        }
        SafeTensors raw = readSafeTensors(file);
        QCOMPARE(raw.metadata.at("image_fit"), std::string("fill"));
        raw.metadata["image_fit"] = "stretch";
        const fs::path bad = dir.filePath(QStringLiteral("stretch.safetensors")).toStdString();
        writeSafeTensors(bad, raw.tensors, raw.metadata);
        try {
            (void)readCheckpointInfo(bad);
            QFAIL("an unknown image fit was accepted");
        } catch (const IoError& e) {
            QVERIFY2(QString(e.what()).contains(QStringLiteral("image_fit")), e.what());
            QVERIFY2(QString(e.what()).contains(QStringLiteral("stretch")), e.what());
        }
    }

    void truncated()
    {
        QTemporaryDir dir;
        const fs::path good = dir.filePath(QStringLiteral("good.safetensors")).toStdString();
        const fs::path bad = dir.filePath(QStringLiteral("bad.safetensors")).toStdString();
        auto m = createModel("fashion-fast", 2);
        writeCheckpoint(good, sampleCheckpoint(*m));
        const auto bytes = readBytes(good);
        const std::size_t header = 8 + headerLength(bytes);
        for (std::size_t cut :
             {std::size_t(0), std::size_t(5), std::size_t(8), std::size_t(100), header - 1, header,
              header + 1000, bytes.size() / 2, bytes.size() - 1}) {
            writeBytes(bad, bytes, cut);
            expectError<IoError>([&] { readCheckpoint(bad); }, {QStringLiteral("bad.safetensors")});
            expectError<IoError>([&] { verifyCheckpoint(bad, m.get()); },
                                 {QStringLiteral("bad.safetensors")});
        }
    }

    // Any byte of the JSON header flipped: a parse error, a structure error or, when the JSON
    // still parses, a checksum mismatch. A flipped data byte too.
    void corrupted()
    {
        QTemporaryDir dir;
        const fs::path good = dir.filePath(QStringLiteral("good.safetensors")).toStdString();
        const fs::path bad = dir.filePath(QStringLiteral("flipped.safetensors")).toStdString();
        auto m = createModel("fashion-fast", 2);
        writeCheckpoint(good, sampleCheckpoint(*m));
        const auto bytes = readBytes(good);
        const std::size_t header = 8 + headerLength(bytes);
        int checksumCaught = 0;
        for (std::size_t at = 8; at < 2 * header - 8; at += 37) {
            // Every bit of a byte (not valid UTF-8 any more), or its lowest bit (still text).
            auto copy = bytes;
            const std::size_t where = at < header ? at : at - header + 8;
            copy[where] = at < header ? char(~copy[where]) : char(copy[where] ^ 0x01);
            writeBytes(bad, copy, copy.size());
            try {
                readCheckpoint(bad);
                QFAIL(qPrintable(
                    QStringLiteral("a flipped header byte at %1 was accepted").arg(where)));
            } catch (const IoError& e) {
                QVERIFY2(QString::fromUtf8(e.what()).contains(QLatin1String("flipped.safetensors")),
                         e.what());
                checksumCaught += QString::fromUtf8(e.what()).contains(QLatin1String("checksum"));
                // Read one tensor at a time, the same error.
                try {
                    verifyCheckpoint(bad, m.get());
                    QFAIL(
                        qPrintable(QStringLiteral("verifyCheckpoint accepted a flipped byte at %1")
                                       .arg(where)));
                } catch (const IoError& v) {
                    QCOMPARE(QString::fromUtf8(v.what()), QString::fromUtf8(e.what()));
                }
            }
        }
        QVERIFY(checksumCaught > 0); // some flips leave valid JSON: only the checksum sees them
        auto copy = bytes;
        copy[header + 4321] = char(copy[header + 4321] ^ 0x10);
        writeBytes(bad, copy, copy.size());
        expectError<IoError>([&] { readCheckpoint(bad); },
                             {QStringLiteral("flipped.safetensors"), QStringLiteral("damaged")});
        expectError<IoError>([&] { verifyCheckpoint(bad, m.get()); },
                             {QStringLiteral("flipped.safetensors"), QStringLiteral("damaged")});
        // A weight made NaN by the damage: damaged, said before what the values say.
        copy = bytes;
        const char nan[4] = {0, 0, char(0xc0), 0x7f};
        std::copy(nan, nan + 4, copy.begin() + std::ptrdiff_t(header + 4320));
        writeBytes(bad, copy, copy.size());
        expectError<IoError>([&] { verifyCheckpoint(bad, m.get()); },
                             {QStringLiteral("flipped.safetensors"), QStringLiteral("damaged")});
    }

    void otherModelRefused()
    {
        QTemporaryDir dir;
        const fs::path file = dir.filePath(QStringLiteral("tutorial.safetensors")).toStdString();
        auto tutorial = createModel("cifar10-tutorial", 1);
        CheckpointInfo info;
        info.step = 1;
        writeCheckpoint(file, makeCheckpoint(*tutorial, info));
        auto fashion = createModel("fashion-fast", 1);
        expectError<InvalidArgument>(
            [&] { loadCheckpoint(file, *fashion); },
            {QStringLiteral("tutorial.safetensors"),
             QStringLiteral("is of model 'cifar10-tutorial', not 'fashion-fast'")});
        expectError<InvalidArgument>(
            [&] { verifyCheckpoint(file, fashion.get()); },
            {QStringLiteral("tutorial.safetensors"),
             QStringLiteral("is of model 'cifar10-tutorial', not 'fashion-fast'")});
    }

    // Files that are intact but do not fit the model: each refused naming the file and tensor.
    void mismatchRefused_data()
    {
        QTest::addColumn<QString>("edit");
        QTest::addColumn<QString>("words");
        QTest::newRow("wrong dtype") << "dtype"
                                     << "tensor 'fc1.weight' is float64, the model's is float32";
        QTest::newRow("wrong shape")
            << "shape"
            << "tensor 'fc1.weight' has shape [10, 10], the model's is [128, 3136]";
        QTest::newRow("missing") << "missing"
                                 << "tensor 'fc2.bias' of the model is missing";
        QTest::newRow("extra") << "extra"
                               << "tensor 'fc3.weight' is not part of model 'fashion-fast'";
        QTest::newRow("ema incomplete") << "ema"
                                        << "tensor 'ema.fc2.bias' is missing";
        QTest::newRow("ema of a buffer")
            << "emaBuffer"
            << "'ema.bn1.running_mean' averages no trainable parameter";
        QTest::newRow("optimizer shape") << "optim"
                                         << "'optim.fc1.weight.momentum_buffer' is float32 [3]";
        // Values no run writes: a forged or damaged file whose checksum was made again.
        QTest::newRow("NaN weight") << "nan"
                                    << "tensor 'fc1.weight' holds a value that is not finite";
        QTest::newRow("infinite average")
            << "emaInf"
            << "tensor 'ema.conv1.weight' holds a value that is not finite";
        QTest::newRow("negative variance") << "variance"
                                           << "tensor 'bn1.running_var' holds a negative variance";
        QTest::newRow("negative step") << "step"
                                       << "its optimizer's step count 'optim.step' is negative";
    }
    void mismatchRefused()
    {
        QFETCH(QString, edit);
        QFETCH(QString, words);
        QTemporaryDir dir;
        const fs::path file = dir.filePath(QStringLiteral("edited.safetensors")).toStdString();
        auto m = createModel("fashion-fast", 2);
        Checkpoint c = sampleCheckpoint(*m);
        auto find = [](NamedTensors& ts, const std::string& name) -> Tensor& {
            for (auto& [n, t] : ts)
                if (n == name) return t;
            throw Error("no " + name);
        };
        if (edit == "dtype")
            find(c.weights, "fc1.weight") = find(c.weights, "fc1.weight").to(DType::Float64);
        if (edit == "shape")
            find(c.weights, "fc1.weight") = Tensor::zeros({10, 10}, DType::Float32);
        if (edit == "missing") c.weights.pop_back();
        if (edit == "extra")
            c.weights.emplace_back("fc3.weight", Tensor::zeros({2}, DType::Float32));
        if (edit == "ema") c.ema.pop_back();
        if (edit == "emaBuffer")
            c.ema.emplace_back("ema.bn1.running_mean", Tensor::zeros({32}, DType::Float32));
        if (edit == "optim")
            find(c.optimizer, "optim.fc1.weight.momentum_buffer") =
                Tensor::zeros({3}, DType::Float32);
        if (edit == "nan") find(c.weights, "fc1.weight").span<float>()[7] = std::nanf("");
        if (edit == "emaInf")
            find(c.ema, "ema.conv1.weight").span<float>()[0] =
                std::numeric_limits<float>::infinity();
        if (edit == "variance")
            for (float& v : find(c.weights, "bn1.running_var").span<float>()) v = -1;
        if (edit == "step") find(c.optimizer, "optim.step").data<std::int64_t>()[0] = -3;
        writeCheckpoint(file, c); // a well-formed file with a valid checksum
        const Checkpoint r = readCheckpoint(file);
        expectError<InvalidArgument>([&] { validateCheckpoint(r, *m, file); },
                                     {QStringLiteral("edited.safetensors"), words});
        expectError<InvalidArgument>([&] { loadCheckpoint(file, *m); }, {words});
        expectError<InvalidArgument>([&] { verifyCheckpoint(file, m.get()); },
                                     {QStringLiteral("edited.safetensors"), words});
        (void)verifyCheckpoint(file); // without a model: an intact checkpoint
    }

    // A checkpoint checked (verifyCheckpoint), then read again a tensor at a time (a resume):
    // the same tensors in the same order; another intact checkpoint put in its place (by rename,
    // as checkpoints are written) is refused before a tensor is handed over, and bytes changed in
    // place once every tensor was read.
    void rereadHoldsTheFileToWhatWasChecked()
    {
        QTemporaryDir dir;
        const fs::path file = dir.filePath(QStringLiteral("c.safetensors")).toStdString();
        auto m = createModel("fashion-fast", 2);
        const Checkpoint c = sampleCheckpoint(*m);
        writeCheckpoint(file, c);
        VerifiedCheckpoint verified;
        QCOMPARE(verifyCheckpoint(file, m.get(), &verified).step, std::int64_t(7));
        QCOMPARE(verified.info.step, std::int64_t(7));
        QCOMPARE(verified.tensors.size(), c.weights.size() + c.ema.size() + c.optimizer.size());
        const Checkpoint whole = readCheckpoint(file);
        std::vector<std::string> names;
        rereadCheckpoint(file, verified, [&](const std::string& name, Tensor& t) {
            names.push_back(name);
            const Tensor* expected = name.rfind("optim.", 0) == 0 ? nullptr : whole.weight(name);
            if (name.rfind("ema.", 0) == 0) expected = whole.weight(name.substr(4), true);
            if (expected) QCOMPARE(maxAbsDiff(t, *expected), 0.0);
        });
        QCOMPARE(names.size(), verified.tensors.size());
        for (std::size_t i = 0; i < names.size(); ++i) QCOMPARE(names[i], verified.tensors[i].name);

        const fs::path kept = file.string() + ".kept";
        fs::copy_file(file, kept);
        writeCheckpoint(file, sampleCheckpoint(*m, 8)); // another step's, intact
        int handed = 0;
        expectError<IoError>(
            [&] {
                rereadCheckpoint(file, verified, [&](const std::string&, Tensor&) { ++handed; });
            },
            {QStringLiteral("c.safetensors"), QStringLiteral("changed since it was checked"),
             QStringLiteral("another file is in its place")});
        QCOMPARE(handed, 0);

        fs::copy_file(kept, file, fs::copy_options::overwrite_existing);
        {
            std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
            f.seekp(-8, std::ios::end);
            f.put('\x55');
        }
        expectError<IoError>(
            [&] {
                rereadCheckpoint(file, verified, [&](const std::string&, Tensor&) { ++handed; });
            },
            {QStringLiteral("changed since it was checked"),
             QStringLiteral("no longer matches its checksum")});
        QCOMPARE(std::size_t(handed), verified.tensors.size());
    }

    void notATowersCheckpoint()
    {
        QTemporaryDir dir;
        const fs::path file = dir.filePath(QStringLiteral("plain.safetensors")).toStdString();
        writeSafeTensors(file, {{"x", Tensor::zeros({2}, DType::Float32)}}, {{"format", "pt"}});
        expectError<IoError>([&] { readCheckpoint(file); },
                             {QStringLiteral("plain.safetensors"), QStringLiteral("crc32")});
        expectError<IoError>([&] { verifyCheckpoint(file); },
                             {QStringLiteral("plain.safetensors"), QStringLiteral("crc32")});
    }

    // verifyCheckpoint holds one tensor at a time (a training run reads back every checkpoint it
    // writes, and looks at the older ones before it deletes any), and so does loading the weights
    // into a model (classify, eval, export): 8 layers of 16 to 32 MiB, with their momentum, read
    // whole by readCheckpoint and one after another by the others.
    void verifyingTakesOneTensorsMemory()
    {
        QTemporaryDir dir;
        const fs::path file = dir.filePath(QStringLiteral("wide.safetensors")).toStdString();
        std::string layers = R"({"type": "flatten"})";
        for (int i = 0; i < 8; ++i) layers += R"(, {"type": "linear", "units": 2048})";
        const ModelInfo& wide = keepModel(
            modelFromDefinition(R"({"name": "wide-checkpoint", "input": [32, 32, 4], "layers": [)" +
                                    layers + R"(, {"type": "linear", "units": "classes"}]})",
                                "wide.json"));
        auto m = buildModel(wide, 10);
        std::int64_t largest = 0;
        for (const auto* p : m->parameters())
            largest = std::max(largest, std::int64_t(p->value.bytes()));
        QCOMPARE(largest, 4096 * 2048 * 4); // the first layer's, of 32 x 32 x 4 inputs
        CheckpointInfo info;
        info.step = 1;
        NamedTensors momentum;
        for (const auto* p : m->parameters())
            momentum.emplace_back("optim." + p->name + ".momentum_buffer",
                                  Tensor::zeros(p->value.shape(), DType::Float32));
        writeCheckpoint(file, makeCheckpoint(*m, info, {}, momentum));
        momentum.clear();
        QVERIFY(std::int64_t(fs::file_size(file)) > 8 * largest);

        // The most this process held above what it held before `f`, from a thread that looks
        // every millisecond.
        const auto peakGrowth = [](const std::function<void()>& f) {
            const std::int64_t before = residentBytes();
            std::atomic<bool> done{false};
            std::atomic<std::int64_t> peak{before};
            std::thread watch([&] {
                while (!done.load()) {
                    peak.store(std::max(peak.load(), residentBytes()));
                    std::this_thread::sleep_for(std::chrono::milliseconds(1));
                }
            });
            f();
            peak.store(std::max(peak.load(), residentBytes()));
            done.store(true);
            watch.join();
            return peak.load() - before;
        };
        const std::int64_t verified = peakGrowth([&] { (void)verifyCheckpoint(file, m.get()); });
        // What classification, evaluation and export do: the weights into a model that is there
        // (its pages written first, so that only what the load takes beside it is seen), before
        // a whole read, whose freed pages malloc may keep.
        for (auto* p : m->parameters()) p->value.fill(1.0);
        const std::int64_t loaded = peakGrowth([&] {
            VerifiedCheckpoint v;
            (void)verifyCheckpoint(file, nullptr, &v);
            QVERIFY(!loadCheckpointWeights(file, v, *m, true)); // no averages in it
        });
        const std::int64_t whole = peakGrowth([&] { (void)readCheckpoint(file); });
        const QString figures = QStringLiteral("verifyCheckpoint held %1 MiB at most, "
                                               "loadCheckpointWeights %2 MiB, readCheckpoint "
                                               "%3 MiB, of a %4 MiB file")
                                    .arg(verified >> 20)
                                    .arg(loaded >> 20)
                                    .arg(whole >> 20)
                                    .arg(std::int64_t(fs::file_size(file)) >> 20);
        qInfo("%s", qPrintable(figures));
        QVERIFY2(whole > 6 * largest, qPrintable(figures)); // the look sees a whole read
        QVERIFY2(verified < 2 * largest, qPrintable(figures));
        QVERIFY2(loaded < 2 * largest, qPrintable(figures));
    }

    void newestGoodCheckpointFallsBack()
    {
        QTemporaryDir dir;
        RunDirectory run(dir.path().toStdString());
        auto m = createModel("fashion-fast", 2);
        for (std::int64_t s : {10, 20, 30})
            writeCheckpoint(run.checkpointPath(s), sampleCheckpoint(*m, s));
        // ckpt 30 truncated: the newest good one is 20.
        const auto bytes = readBytes(run.checkpointPath(30));
        writeBytes(run.checkpointPath(30), bytes, bytes.size() / 3);
        std::vector<std::string> skipped;
        auto found = run.newestGoodCheckpoint(m.get(), &skipped);
        QVERIFY(found);
        QCOMPARE(found->step, std::int64_t(20));
        QCOMPARE(skipped.size(), std::size_t(1));
        QVERIFY2(skipped[0].find("ckpt-00000030.safetensors") != std::string::npos,
                 skipped[0].c_str());
        // ckpt 20 of another model: with the model given it is skipped too.
        auto tutorial = createModel("cifar10-tutorial", 1);
        CheckpointInfo info;
        info.step = 20;
        writeCheckpoint(run.checkpointPath(20), makeCheckpoint(*tutorial, info));
        found = run.newestGoodCheckpoint(m.get());
        QVERIFY(found);
        QCOMPARE(found->step, std::int64_t(10));
        QCOMPARE(run.newestGoodCheckpoint()->step,
                 std::int64_t(20)); // intact, just not this model's
        fs::remove(run.checkpointPath(10));
        fs::remove(run.checkpointPath(20));
        QVERIFY(!run.newestGoodCheckpoint(m.get()));
    }

    void runDirectory()
    {
        QTemporaryDir dir;
        const fs::path root = fs::path(dir.path().toStdString()) / "runs" / "a";
        RunDirectory run(root);
        QVERIFY(fs::is_directory(root / "checkpoints"));
        QCOMPARE(run.checkpointPath(1234).filename().string(),
                 std::string("ckpt-00001234.safetensors"));
        QCOMPARE(run.checkpointPath(123456789).filename().string(),
                 std::string("ckpt-123456789.safetensors"));
        QVERIFY(!run.readConfig());
        run.writeConfig(R"({"model": "x"})");
        QCOMPARE(*run.readConfig(), std::string("{\"model\": \"x\"}\n"));

        auto m = createModel("fashion-fast", 2);
        const Checkpoint c = sampleCheckpoint(*m);
        for (std::int64_t s : {5, 100, 20, 3}) writeCheckpoint(run.checkpointPath(s), c);
        std::ofstream(run.checkpointDir() / "notes.txt") << "not a checkpoint";
        std::ofstream(run.checkpointDir() / ".ckpt-00000200.safetensors.tmp-123-0") << "partial";
        auto all = run.checkpoints();
        QCOMPARE(all.size(), std::size_t(4));
        QCOMPARE(all.front().step, std::int64_t(3));
        QCOMPARE(all.back().step, std::int64_t(100)); // by number, not by name
        QCOMPARE(run.runContents(),
                 (std::vector<std::string>{"config.json", "4 checkpoints, steps 3 to 100"}));
        run.removeCheckpoint(all.front().path);
        all = run.checkpoints();
        QCOMPARE(all.size(), std::size_t(3));
        QCOMPARE(all.front().step, std::int64_t(5));
        run.removeStaleTemporaries();
        QVERIFY(!fs::exists(run.checkpointDir() / ".ckpt-00000200.safetensors.tmp-123-0"));
        QVERIFY(fs::exists(run.checkpointDir() / "notes.txt"));

        // Logs: records after a resumed step and a partial last line are dropped; a line that is
        // not a record (a user's note) stays where it was.
        for (int s = 1; s <= 5; ++s) {
            run.appendMetrics("{\"step\":" + std::to_string(s) + ",\"loss\":1.5}");
            if (s == 2) std::ofstream(run.metricsPath(), std::ios::app) << "# my note\n";
        }
        run.appendEval(R"({"step":2,"precisionAt1":0.5})");
        run.appendEval(R"({"step":4,"precisionAt1":0.6})");
        std::ofstream(run.metricsPath(), std::ios::app) << "{\"step\":6,\"lo";
        run.truncateLogs(3);
        std::ifstream metrics(run.metricsPath());
        std::string line;
        std::vector<std::string> lines;
        while (std::getline(metrics, line)) lines.push_back(line);
        QCOMPARE(lines,
                 (std::vector<std::string>{R"({"step":1,"loss":1.5})", R"({"step":2,"loss":1.5})",
                                           "# my note", R"({"step":3,"loss":1.5})"}));
        std::ifstream eval(run.evalPath());
        std::getline(eval, line);
        QCOMPARE(line, std::string(R"({"step":2,"precisionAt1":0.5})"));
        QVERIFY(!std::getline(eval, line));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, run.appendMetrics("{\n}"));
        // A log or configuration that is not a plain file (a FIFO, which would block its reader or
        // writer for good; a device) is refused, named, at once.
        {
            QTemporaryDir other;
            const RunDirectory odd(fs::path(other.path().toStdString()));
            QCOMPARE(::mkfifo(odd.metricsPath().c_str(), 0600), 0);
            QCOMPARE(::mkfifo(odd.configPath().c_str(), 0600), 0);
            fs::create_symlink("/dev/zero", odd.evalPath());
            expectError<IoError>(
                [&] { odd.truncateLogs(3); },
                {QString::fromStdString(odd.metricsPath().string()), QStringLiteral("a FIFO")});
            expectError<IoError>([&] { odd.appendMetrics("{}"); }, {QStringLiteral("a FIFO")});
            expectError<IoError>([&] { (void)odd.readConfig(); },
                                 {QString::fromStdString(odd.configPath().string())});
            expectError<IoError>([&] { odd.appendEval("{}"); }, {QStringLiteral("a device")});
            QVERIFY(readEvaluations(odd.evalPath()).empty());
        }
        // Set aside: the run's files move, byte for byte, and the folder holds no run any more.
        const std::string config = *run.readConfig();
        const fs::path aside = run.setAside();
        QCOMPARE(aside.parent_path(), root / "set-aside");
        QVERIFY(!run.holdsRun());
        QVERIFY(fs::is_directory(run.checkpointDir()));
        QCOMPARE(RunDirectory(aside).checkpoints().size(), std::size_t(3));
        QVERIFY(fs::exists(aside / "checkpoints" / "notes.txt"));
        QVERIFY(fs::exists(aside / "metrics.jsonl") && fs::exists(aside / "eval.jsonl"));
        QCOMPARE(*RunDirectory(aside).readConfig(), config);
        QVERIFY(run.setAside() != aside); // a second one gets its own folder
        expectError<IoError>([&] { RunDirectory("/proc/towers-cannot-create"); },
                             {QStringLiteral("/proc/towers-cannot-create")});
    }

    // A training process (train_kill_helper: a checkpoint after every step) is killed with
    // SIGKILL at random moments, restarted, killed again: after each kill every checkpoint loads,
    // and each restart resumes at the newest one (nothing lost beyond the step in progress).
    void killedWhileWriting()
    {
        QTemporaryDir dir;
        const QString runDir = dir.filePath(QStringLiteral("run"));
        RunDirectory run(runDir.toStdString());
        auto model = createModel("fashion-fast", 1);
        QRandomGenerator random(20261122);
        std::int64_t newest = 0;
        int killsDuringWrite = 0;
        for (int round = 0; round < 16; ++round) {
            QProcess helper;
            helper.start(QStringLiteral(TOWERS_KILL_HELPER), {runDir});
            QVERIFY2(helper.waitForStarted(10000), "the helper did not start");
            QVERIFY2(helper.waitForReadyRead(60000),
                     qPrintable(QString::fromUtf8(helper.readAllStandardError())));
            const QString started = QString::fromUtf8(helper.readLine()).trimmed();
            // It resumed from the newest checkpoint left by the previous kill.
            QCOMPARE(started, QStringLiteral("started %1").arg(newest));
            QThread::msleep(random.bounded(20, 400));
            helper.kill(); // SIGKILL
            QVERIFY(helper.waitForFinished(10000));
            QCOMPARE(helper.exitStatus(), QProcess::CrashExit);

            const auto files = run.checkpoints();
            QVERIFY2(!files.empty() || newest == 0, "checkpoints vanished");
            for (const auto& f : files) {
                try {
                    validateCheckpoint(readCheckpoint(f.path), *model, f.path);
                } catch (const Error& e) {
                    QFAIL(qPrintable(QStringLiteral("round %1: %2")
                                         .arg(round)
                                         .arg(QString::fromUtf8(e.what()))));
                }
            }
            if (!files.empty()) {
                QVERIFY(files.back().step >= newest);
                newest = files.back().step;
            }
            for (const auto& e : fs::directory_iterator(run.checkpointDir()))
                killsDuringWrite += e.path().filename().string().find(".tmp-") != std::string::npos;
        }
        qInfo("newest step after 16 kills: %lld; kills that left a partial temporary file: %d",
              static_cast<long long>(newest), killsDuringWrite);
        QVERIFY2(newest > 0, "the helper never wrote a checkpoint");
        run.removeStaleTemporaries();
        for (const auto& e : fs::directory_iterator(run.checkpointDir()))
            QVERIFY(e.path().filename().string().find(".tmp-") == std::string::npos);
    }
};

QTEST_APPLESS_MAIN(TestCheckpoint)
#include "tst_checkpoint.moc"
