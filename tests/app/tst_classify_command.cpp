// towers-cli classify, run as a process as a user would, on hostile files made here: a
// 3,300,000 x 1 BMP (it crashed the command), a 2,000,000 x 1 BMP (6.6 GB, 21 s), a 1,000,000 x 1
// PNG (2.3 GB), a 128-megapixel PNG, a FIFO named x.png (it hung for ever), a directory named y.png
// and a character device. Each must end the command with exit code 1 (not a signal), the reason
// naming the file (and the image's size), within seconds, in an address space capped at 1.5 GB
// (RLIMIT_AS, so a regression fails instead of eating the machine's memory) and with a peak
// resident size that stays small. A normal image, and a 40-megapixel one, classify under the same
// address-space cap.
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QImage>
#include <QImageReader>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>

#include <sys/resource.h>

#include "checkpoint_files.h"
#include "cli_process.h"
#include "dataset_files.h"
#include "engine/data/dataset.h"
#include "engine/models/registry.h"
#include "engine/train/checkpoint.h"
#include "engine/train/recipe.h"
#include "engine/train/train_config.h"
#include "hostile_images.h"

using namespace towers;

namespace {

// The address space towers-cli gets: far more than classifying needs (it runs in under 100 MB),
// far less than the reported files took before they were refused (2.3 GB and 6.6 GB).
constexpr rlim_t kAddressSpace = rlim_t(1536) << 20;
// The peak resident size a refused file (or a small image) may take: about 30 MB are the program
// and the model.
constexpr double kMaxRssMb = 128;

struct Run
{
    bool crashed = true; // a signal, or killed after the time limit
    int exitCode = -1;
    QString out, err;
    qint64 ms = 0;
};

// The largest peak resident size of any child process waited for so far, in MB.
double childrenPeakRssMb()
{
    rusage u{};
    getrusage(RUSAGE_CHILDREN, &u);
    return double(u.ru_maxrss) / 1024.0;
}

} // namespace

class TestClassifyCommand : public QObject
{
    Q_OBJECT
    QTemporaryDir m_dir;
    QString m_checkpoint;

    QString path(const char* name) const { return m_dir.filePath(QLatin1String(name)); }

    Run classify(const QStringList& images)
    {
        return cli(
            QStringList{QStringLiteral("classify"), QStringLiteral("--checkpoint"), m_checkpoint} +
            images);
    }

    // towers-cli with `args`, in the address space above; `isa`, when given, holds oneDNN to
    // that instruction set (ONEDNN_MAX_CPU_ISA).
    Run cli(const QStringList& args, const QString& isa = {})
    {
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("OMP_NUM_THREADS"), QStringLiteral("1"));
        env.insert(QStringLiteral("TOWERS_CUDA_PLUGIN"),
                   QStringLiteral("/nonexistent/libtowers-cuda.so"));
        if (!isa.isEmpty()) env.insert(QStringLiteral("ONEDNN_MAX_CPU_ISA"), isa);
        p.setProcessEnvironment(env);
        p.setChildProcessModifier([] {
            const rlimit limit{kAddressSpace, kAddressSpace};
            ::setrlimit(RLIMIT_AS, &limit);
        });
        QElapsedTimer clock;
        clock.start();
        p.start(QStringLiteral(TOWERS_CLI), args);
        Run r;
        if (!p.waitForStarted(10000)) return r;
        if (!p.waitForFinished(30000)) {
            p.kill();
            p.waitForFinished();
        } else {
            r.crashed = p.exitStatus() != QProcess::NormalExit;
            r.exitCode = r.crashed ? -1 : p.exitCode();
        }
        r.ms = clock.elapsed();
        r.out = QString::fromUtf8(p.readAllStandardOutput());
        r.err = QString::fromUtf8(p.readAllStandardError());
        return r;
    }

    // A 28x28 grey ramp saved as `name` in the folder; its path.
    QString rampImage(const char* name)
    {
        QImage image(28, 28, QImage::Format_Grayscale8);
        for (int y = 0; y < 28; ++y)
            for (int x = 0; x < 28; ++x) image.setPixel(x, y, qRgb(9 * x, 9 * y, 5 * (x + y)));
        if (!image.save(path(name))) qFatal("cannot write %s", name);
        return path(name);
    }
    // classify of `image` and eval of the test set, with the checkpoint above, printing JSON.
    QStringList classifyJson(const QString& image) const
    {
        return {QStringLiteral("classify"), QStringLiteral("--checkpoint"), m_checkpoint,
                QStringLiteral("--json"), image};
    }
    QStringList evalJson() const
    {
        return {QStringLiteral("eval"), QStringLiteral("--checkpoint"),
                m_checkpoint,           QStringLiteral("--data-dir"),
                m_dir.path(),           QStringLiteral("--json")};
    }

private slots:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        const std::filesystem::path root = m_dir.path().toStdString();
        test::writeIdxDataset(root / "mnist", 50, 20, 28, 28, false, 5);
        const engine::Dataset data = engine::loadDataset("mnist", root / "mnist");
        m_checkpoint = path("ckpt-00000001.safetensors");
        test::writeFreshCheckpoint("fashion-fast", data, m_checkpoint.toStdString());
    }

    // The limits above leave room for the real work.
    void normalImageClassifies()
    {
        QImage image(40, 30, QImage::Format_RGB32);
        image.fill(Qt::white);
        QVERIFY(image.save(path("shirt.png")));
        const Run r = classify({path("shirt.png")});
        QVERIFY2(!r.crashed && r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains(QStringLiteral("shirt.png")) && r.out.contains(QLatin1Char('%')),
                 qPrintable(r.out));
        const double peak = childrenPeakRssMb();
        QVERIFY2(peak < kMaxRssMb,
                 qPrintable(QStringLiteral("peak resident size %1 MB").arg(peak)));
    }

    // --layers: each image's layers with their figures, as text and as JSON.
    void layersOfEachImage()
    {
        QImage image(28, 28, QImage::Format_Grayscale8);
        for (int y = 0; y < 28; ++y)
            for (int x = 0; x < 28; ++x) image.setPixel(x, y, qRgb(x * 9, x * 9, x * 9));
        QVERIFY(image.save(path("ramp.png")));
        const Run text = classify({path("ramp.png"), QStringLiteral("--layers")});
        QVERIFY2(text.exitCode == 0, qPrintable(text.err));
        QVERIFY2(text.out.contains(QRegularExpression(
                     QStringLiteral("\\n  layer +output +mean +std +min +max +zeros\\n"
                                    "  input +28x28x1 .*\\n  conv1 +28x28x32 .*%\\n"))) &&
                     text.out.contains(QRegularExpression(QStringLiteral("\\n  fc2 +10 "))),
                 qPrintable(text.out));
        const Run json =
            classify({path("ramp.png"), QStringLiteral("--layers"), QStringLiteral("--json")});
        QVERIFY2(json.exitCode == 0, qPrintable(json.err));
        const QJsonArray layers = QJsonDocument::fromJson(json.out.toUtf8())
                                      .object()
                                      .value(QStringLiteral("results"))
                                      .toArray()
                                      .at(0)
                                      .toObject()
                                      .value(QStringLiteral("layers"))
                                      .toArray();
        QCOMPARE(layers.size(), 11); // the input and fashion-fast's 10 layers
        const QJsonObject bn1 = layers.at(2).toObject();
        QCOMPARE(bn1.value(QStringLiteral("layer")).toString(), QStringLiteral("bn1"));
        QCOMPARE(bn1.value(QStringLiteral("shape")).toArray(), (QJsonArray{28, 28, 32}));
        QCOMPARE(bn1.value(QStringLiteral("min")).toDouble(), 0.0); // after its ReLU
        const double zeros = bn1.value(QStringLiteral("zero_fraction")).toDouble();
        QVERIFY(zeros > 0 && zeros < 1);
        QVERIFY(bn1.value(QStringLiteral("max")).toDouble() >
                bn1.value(QStringLiteral("mean")).toDouble());
    }

    void hostileFilesAreRefused_data()
    {
        QTest::addColumn<QString>("file");
        QTest::addColumn<QStringList>("says");
        test::writeBlackBmp(path("wide.bmp"), 3'300'000, 1);
        test::writeBlackBmp(path("wide2m.bmp"), 2'000'000, 1);
        test::writeBlackPng(path("wide.png"), 1'000'000, 1);
        test::writeBlackPng(path("huge.png"), 16'000, 8'000);
        QVERIFY(test::makeFifo(path("x.png")));
        QVERIFY(QDir(m_dir.path()).mkdir(QStringLiteral("y.png")));
        QTest::newRow("3,300,000 x 1 BMP")
            << path("wide.bmp") << QStringList{"3300000 x 1 pixels", "100:1"};
        QTest::newRow("2,000,000 x 1 BMP")
            << path("wide2m.bmp") << QStringList{"2000000 x 1 pixels", "100:1"};
        QTest::newRow("1,000,000 x 1 PNG")
            << path("wide.png") << QStringList{"1000000 x 1 pixels", "100:1"};
        QTest::newRow("128 MP PNG")
            << path("huge.png") << QStringList{"16000 x 8000 pixels", "128,000,000 pixels"};
        QFile svg(path("label.svg"));
        QVERIFY(svg.open(QIODevice::WriteOnly));
        svg.write(test::kSvgWithText);
        svg.close();
        QTest::newRow("SVG with text")
            << path("label.svg")
            << QStringList{QImageReader::supportedImageFormats().contains("svg")
                               ? QStringLiteral("an SVG drawing, which towers-cli does not render")
                               : QStringLiteral("cannot read the image")};
        QTest::newRow("FIFO") << path("x.png") << QStringList{"FIFO"};
        QTest::newRow("directory") << path("y.png") << QStringList{"directory"};
        QTest::newRow("device") << QStringLiteral("/dev/zero") << QStringList{"device"};
    }

    void hostileFilesAreRefused()
    {
        QFETCH(QString, file);
        QFETCH(QStringList, says);
        std::optional<test::FifoWatch> watch;
        if (QFileInfo(file).fileName() == QLatin1String("x.png")) watch.emplace(file);
        const Run r = classify({file});
        if (watch) QVERIFY2(!watch->readerSeen(), "the FIFO was opened for reading");
        QVERIFY2(
            !r.crashed,
            qPrintable(
                QStringLiteral("killed by a signal or hung (%1 ms): %2").arg(r.ms).arg(r.err)));
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(QStringLiteral("towers-cli classify: error: ") + file + ": "),
                 qPrintable(r.err));
        for (const QString& s : says) QVERIFY2(r.err.contains(s), qPrintable(r.err));
        QVERIFY2(r.ms < 10000, qPrintable(QStringLiteral("%1 ms").arg(r.ms)));
        const double peak = childrenPeakRssMb();
        QVERIFY2(peak < kMaxRssMb,
                 qPrintable(QStringLiteral("peak resident size %1 MB").arg(peak)));
    }

    // One bad file among good ones: the command names it, answers the others, and fails.
    void badFileAmongGoodOnes()
    {
        QImage image(28, 28, QImage::Format_Grayscale8);
        image.fill(128);
        QVERIFY(image.save(path("good.png")));
        if (!QFileInfo::exists(path("x.png"))) QVERIFY(test::makeFifo(path("x.png")));
        const Run r = classify({path("good.png"), path("x.png"), path("good.png")});
        QVERIFY(!r.crashed);
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(path("x.png")) && r.err.contains(QStringLiteral("FIFO")),
                 qPrintable(r.err));
        // The readable ones are answered all the same; the end says how many were not.
        QCOMPARE(r.out.count(path("good.png") + QLatin1Char('\n')), 2);
        QVERIFY2(r.err.contains(QStringLiteral("1 of 3 files could not be classified")),
                 qPrintable(r.err));
    }

    // --precision bf16: eval and classify run their forward pass in bfloat16 where the CPU has
    // AVX512_BF16 or AMX, and say so; the logits move by what bfloat16's rounding gives and no
    // more. Where it cannot (held to AVX2 here), both end with exit code 1 and the reason; a
    // precision that does not exist is a usage error. Without --precision, a checkpoint is
    // measured in the precision it was trained in where the CPU runs it.
    void bf16EvalAndClassify()
    {
        const QStringList classify = classifyJson(rampImage("ramp.png")), eval = evalJson();
        const QStringList bf16{QStringLiteral("--precision"), QStringLiteral("bf16")};

        for (const QStringList& args : {classify, eval}) {
            const Run bad =
                cli(args + QStringList{QStringLiteral("--precision"), QStringLiteral("fp16")});
            QVERIFY(!bad.crashed);
            QCOMPARE(bad.exitCode, 2);
            QVERIFY2(bad.err.contains(QStringLiteral("--precision: unknown precision 'fp16' "
                                                     "(known: fp32, bf16)")),
                     qPrintable(bad.err));
            const Run held = cli(args + bf16, QStringLiteral("AVX2"));
            QVERIFY(!held.crashed);
            QCOMPARE(held.exitCode, 1);
            QVERIFY2(held.err.contains(QStringLiteral("error: --precision bf16 needs a CPU with "
                                                      "AVX512_BF16 or AMX")),
                     qPrintable(held.err));
            QVERIFY2(held.out.isEmpty(), qPrintable(held.out));
        }

        const auto json = [](const Run& r) {
            return QJsonDocument::fromJson(r.out.toUtf8()).object();
        };
        const Run fp32 = cli(classify);
        QVERIFY2(!fp32.crashed && fp32.exitCode == 0, qPrintable(fp32.err));
        QCOMPARE(json(fp32).value(QStringLiteral("precision")).toString(), QStringLiteral("fp32"));
        const Run fp32Eval = cli(eval);
        QVERIFY2(!fp32Eval.crashed && fp32Eval.exitCode == 0, qPrintable(fp32Eval.err));
        QCOMPARE(json(fp32Eval).value(QStringLiteral("precision")).toString(),
                 QStringLiteral("fp32"));

        // A checkpoint of a run trained in bf16 is measured in bf16 by default, as its run
        // measured itself, where the CPU runs it; elsewhere (held to AVX2 here) in float32, with a
        // line on standard error saying so; --precision fp32 chooses float32 without a word.
        engine::TrainConfig config;
        config.precision = engine::Precision::BFloat16;
        const std::filesystem::path root = m_dir.path().toStdString();
        const QString trained = path("trained-in-bf16.safetensors");
        test::writeFreshCheckpoint("fashion-fast", engine::loadDataset("mnist", root / "mnist"),
                                   trained.toStdString(), 3, 1, config.toJson());
        const QStringList evalTrained{QStringLiteral("eval"),
                                      QStringLiteral("--checkpoint"),
                                      trained,
                                      QStringLiteral("--data-dir"),
                                      m_dir.path(),
                                      QStringLiteral("--json")};
        const QStringList classifyTrained{QStringLiteral("classify"),
                                          QStringLiteral("--checkpoint"), trained,
                                          QStringLiteral("--json"), path("ramp.png")};
        const QString note = QStringLiteral(
            "trained in bf16, evaluated in float32 here: bf16 needs a CPU with AVX512_BF16 or AMX");
        for (const QStringList& args : {evalTrained, classifyTrained}) {
            const Run held = cli(args, QStringLiteral("AVX2"));
            QVERIFY2(!held.crashed && held.exitCode == 0, qPrintable(held.err));
            QCOMPARE(json(held).value(QStringLiteral("precision")).toString(),
                     QStringLiteral("fp32"));
            QVERIFY2(held.err.contains(note), qPrintable(held.err));
            QVERIFY2(!held.err.contains(QStringLiteral("use --precision fp32")),
                     qPrintable(held.err));
            const Run chosen =
                cli(args + QStringList{QStringLiteral("--precision"), QStringLiteral("fp32")});
            QVERIFY2(!chosen.crashed && chosen.exitCode == 0, qPrintable(chosen.err));
            QCOMPARE(json(chosen).value(QStringLiteral("precision")).toString(),
                     QStringLiteral("fp32"));
            QVERIFY2(!chosen.err.contains(QStringLiteral("trained in bf16")),
                     qPrintable(chosen.err));
            const Run native = cli(args);
            QVERIFY2(!native.crashed && native.exitCode == 0, qPrintable(native.err));
            const bool bf16Here = !native.err.contains(note);
            QCOMPARE(json(native).value(QStringLiteral("precision")).toString(),
                     bf16Here ? QStringLiteral("bf16") : QStringLiteral("fp32"));
        }
        QCOMPARE(json(cli(evalTrained, QStringLiteral("AVX2")))
                     .value(QStringLiteral("trained_precision"))
                     .toString(),
                 QStringLiteral("bf16"));
        QCOMPARE(json(fp32Eval).value(QStringLiteral("trained_precision")).toString(),
                 QStringLiteral("fp32"));

        const Run b = cli(classify + bf16);
        QVERIFY(!b.crashed);
        if (b.exitCode == 1 && b.err.contains(QStringLiteral("--precision bf16 needs")))
            QSKIP(qPrintable(QStringLiteral("bf16 does not run on this CPU (its refusal is "
                                            "checked above): ") +
                             b.err.trimmed()));
        QVERIFY2(b.exitCode == 0, qPrintable(b.err));
        QCOMPARE(json(b).value(QStringLiteral("precision")).toString(), QStringLiteral("bf16"));
        const std::vector<double> want = test::firstClassifiedLogits(fp32.out),
                                  got = test::firstClassifiedLogits(b.out);
        QCOMPARE(got.size(), want.size());
        QVERIFY(!want.empty());
        double scale = 0, error = 0;
        for (std::size_t i = 0; i < want.size(); ++i) {
            scale = std::max(scale, std::abs(want[i]));
            error = std::max(error, std::abs(got[i] - want[i]));
        }
        // bfloat16 keeps 8 bits of mantissa: each product's operands are off by up to 2^-8 of
        // themselves. The error stays within a few percent of the logits' size, and is not 0
        // (float32 arithmetic would give the same logits to the last bit).
        QVERIFY2(error > 0, "the bf16 logits equal the fp32 ones bit for bit");
        QVERIFY2(error < 0.05 * scale + 1e-3,
                 qPrintable(QStringLiteral("error %1, logits up to %2").arg(error).arg(scale)));

        const Run e = cli(eval + bf16);
        QVERIFY2(!e.crashed && e.exitCode == 0, qPrintable(e.err));
        const QJsonObject je = json(e);
        QCOMPARE(je.value(QStringLiteral("precision")).toString(), QStringLiteral("bf16"));
        QCOMPARE(je.value(QStringLiteral("examples")).toInt(),
                 json(fp32Eval).value(QStringLiteral("examples")).toInt());
        const Run text = cli(QStringList{QStringLiteral("eval"), QStringLiteral("--checkpoint"),
                                         m_checkpoint, QStringLiteral("--data-dir"), m_dir.path()} +
                             bf16);
        QVERIFY2(!text.crashed && text.exitCode == 0, qPrintable(text.err));
        QVERIFY2(text.out.contains(QStringLiteral(", bf16 convolutions and matrix products\n")),
                 qPrintable(text.out));
        QCOMPARE(je.value(QStringLiteral("trained_precision")).toString(), QStringLiteral("fp32"));
    }

    // --device cuda: where there is no GPU (the children here never load the CUDA plugin:
    // TOWERS_CUDA_PLUGIN names none), exit code 1 with why and what to do instead, --gpu alone
    // too; a device that is not one, a GPU that is not a number and --gpu with --device cpu are
    // usage errors; --device cpu is the default, and the JSON names it. tst_classifier_device
    // runs the GPU path on the stand-in device; tools/gpu-check.sh on a GPU.
    void deviceChoice()
    {
        const auto json = [](const Run& r) {
            return QJsonDocument::fromJson(r.out.toUtf8()).object();
        };
        for (const QStringList& args : {classifyJson(rampImage("device.png")), evalJson()}) {
            const QString command = QStringLiteral("towers-cli ") + args.first();
            const struct
            {
                QStringList extra;
                int exitCode;
                QString error;
            } refused[] = {
                {{QStringLiteral("--device"), QStringLiteral("tpu")},
                 2,
                 QStringLiteral("--device must be cpu or cuda, got 'tpu'")},
                {{QStringLiteral("--gpu"), QStringLiteral("first")},
                 2,
                 QStringLiteral("--gpu must be an integer from 0 to 1023, got 'first'")},
                {{QStringLiteral("--device"), QStringLiteral("cpu"), QStringLiteral("--gpu"),
                  QStringLiteral("1")},
                 2,
                 command + QStringLiteral(": --gpu is for --device cuda")},
                {{QStringLiteral("--device"), QStringLiteral("cuda")},
                 1,
                 command + QStringLiteral(": error: --device cuda: ")},
                {{QStringLiteral("--gpu"), QStringLiteral("0")},
                 1,
                 command + QStringLiteral(": error: --device cuda: ")},
            };
            for (const auto& r : refused) {
                const Run bad = cli(args + r.extra);
                QVERIFY(!bad.crashed);
                QCOMPARE(bad.exitCode, r.exitCode);
                QVERIFY2(bad.err.contains(r.error), qPrintable(bad.err));
                if (r.exitCode == 1)
                    QVERIFY2(bad.err.contains(QStringLiteral(
                                 "Leave out --device cuda and --gpu to run it on the CPU.")),
                             qPrintable(bad.err));
                QVERIFY2(bad.out.isEmpty(), qPrintable(bad.out));
            }
            const Run onCpu = cli(args);
            QVERIFY2(!onCpu.crashed && onCpu.exitCode == 0, qPrintable(onCpu.err));
            QCOMPARE(json(onCpu).value(QStringLiteral("device")).toString(), QStringLiteral("cpu"));
            const Run chosenCpu =
                cli(args + QStringList{QStringLiteral("--device"), QStringLiteral("cpu")});
            QVERIFY2(!chosenCpu.crashed && chosenCpu.exitCode == 0, qPrintable(chosenCpu.err));
            QCOMPARE(chosenCpu.out, onCpu.out);
        }
    }

    // --tta mirror: each image's logits averaged with its mirror image's, where the checkpoint's
    // run trained on mirror images; refused, saying why, where it did not (digits).
    void mirrorTestTimeAugmentation()
    {
        const auto json = [](const Run& r) {
            return QJsonDocument::fromJson(r.out.toUtf8()).object();
        };
        const QStringList mirror{QStringLiteral("--tta"), QStringLiteral("mirror")};
        for (const QStringList& args : {classifyJson(rampImage("tta.png")), evalJson()}) {
            const Run unknown =
                cli(args + QStringList{QStringLiteral("--tta"), QStringLiteral("flip")});
            QVERIFY(!unknown.crashed);
            QCOMPARE(unknown.exitCode, 2);
            QVERIFY2(
                unknown.err.contains(QStringLiteral("--tta must be none or mirror, got 'flip'")),
                qPrintable(unknown.err));
            const Run digits = cli(args + mirror);
            QVERIFY(!digits.crashed);
            QCOMPARE(digits.exitCode, 2);
            QVERIFY2(
                digits.err.contains(QStringLiteral(
                    "--tta mirror: mirror test-time augmentation: fashion-fast of mnist never "
                    "learnt from mirror images: its recipe does not mirror its training images")),
                qPrintable(digits.err));
            QVERIFY2(digits.out.isEmpty(), qPrintable(digits.out));
            const Run none =
                cli(args + QStringList{QStringLiteral("--tta"), QStringLiteral("none")});
            QVERIFY2(!none.crashed && none.exitCode == 0, qPrintable(none.err));
            QCOMPARE(json(none).value(QStringLiteral("tta")).toString(), QStringLiteral("none"));
        }

        // Fashion-MNIST's classes survive a mirror: its recipe flips.
        const std::filesystem::path root = m_dir.path().toStdString();
        test::writeIdxDataset(root / "fashion-mnist", 50, 20, 28, 28, false, 6);
        const QString fashion = path("fashion.safetensors");
        test::writeFreshCheckpoint("fashion-fast",
                                   engine::loadDataset("fashion-mnist", root / "fashion-mnist"),
                                   fashion.toStdString(), 4);
        const QString ramp = rampImage("tta.png");
        QImage image(ramp);
        QVERIFY(image.mirrored(true, false).save(path("tta-mirror.png")));
        const auto logitsOf = [&](const QString& file, const QStringList& extra) {
            const Run r =
                cli(QStringList{QStringLiteral("classify"), QStringLiteral("--checkpoint"), fashion,
                                QStringLiteral("--json"), file} +
                    extra);
            std::vector<double> l;
            if (r.crashed || r.exitCode != 0) {
                qWarning("%s", qPrintable(r.err));
                return l;
            }
            const QJsonObject o = json(r);
            if (o.value(QStringLiteral("tta")).toString() !=
                (extra.isEmpty() ? QStringLiteral("none") : QStringLiteral("mirror")))
                return l;
            return test::firstClassifiedLogits(r.out);
        };
        const auto own = logitsOf(ramp, {}), ofMirror = logitsOf(path("tta-mirror.png"), {});
        const auto averaged = logitsOf(ramp, mirror);
        QCOMPARE(own.size(), std::size_t(10));
        QCOMPARE(ofMirror.size(), own.size());
        QCOMPARE(averaged.size(), own.size());
        double apart = 0;
        for (std::size_t j = 0; j < own.size(); ++j) {
            apart = std::max(apart, std::abs(own[j] - ofMirror[j]));
            QVERIFY2(std::abs(averaged[j] - 0.5 * (own[j] + ofMirror[j])) < 1e-5,
                     qPrintable(QStringLiteral("logit %1: %2 against %3 and %4")
                                    .arg(j)
                                    .arg(averaged[j])
                                    .arg(own[j])
                                    .arg(ofMirror[j])));
        }
        QVERIFY(apart > 1e-3); // the mirror changed the network's answer

        const QStringList eval{QStringLiteral("eval"), QStringLiteral("--checkpoint"), fashion,
                               QStringLiteral("--data-dir"), m_dir.path()};
        const Run text = cli(eval + mirror);
        QVERIFY2(!text.crashed && text.exitCode == 0, qPrintable(text.err));
        QVERIFY2(text.out.section(QLatin1Char('\n'), 0, 0)
                     .endsWith(QStringLiteral(", each image averaged with its mirror image")),
                 qPrintable(text.out));
        const Run asJson = cli(eval + mirror + QStringList{QStringLiteral("--json")});
        QVERIFY2(!asJson.crashed && asJson.exitCode == 0, qPrintable(asJson.err));
        QCOMPARE(json(asJson).value(QStringLiteral("tta")).toString(), QStringLiteral("mirror"));
        QCOMPARE(json(asJson).value(QStringLiteral("examples")).toInt(), 20);
        // Precision @ 5 is in the JSON whatever the classes (the text shows it beyond 10).
        const double at1 = json(asJson).value(QStringLiteral("precision_at_1")).toDouble();
        const double at5 = json(asJson).value(QStringLiteral("precision_at_5")).toDouble(-1);
        QVERIFY2(at5 >= at1 && at5 <= 1, qPrintable(asJson.out));
        QVERIFY(!text.out.contains(QStringLiteral("precision @ 5")));
    }

    // eval of a checkpoint of more than 10 classes: precision @ 5, and each class's top 5 in a
    // column beside its accuracy and in the JSON, adding up to precision @ 5.
    void topFiveClassByClass()
    {
        const std::filesystem::path root = m_dir.path().toStdString();
        test::writeCifar100(root / "cifar100", 30, 60, 4);
        const engine::Dataset data = engine::loadDataset("cifar100", root / "cifar100");
        const QString checkpoint = path("cifar100.safetensors");
        test::writeFreshCheckpoint("cifar10-tutorial", data, checkpoint.toStdString(), 5, 3);
        const QStringList eval{QStringLiteral("eval"), QStringLiteral("--checkpoint"), checkpoint,
                               QStringLiteral("--data-dir"), m_dir.path()};
        const Run text = cli(eval);
        QVERIFY2(!text.crashed && text.exitCode == 0, qPrintable(text.err));
        QVERIFY2(text.out.contains(QStringLiteral("precision @ 5 = ")), qPrintable(text.out));
        QVERIFY2(text.out.contains(QStringLiteral("  accuracy     top 5  precision      F1  "
                                                  "examples\n")),
                 qPrintable(text.out));
        const Run asJson = cli(eval + QStringList{QStringLiteral("--json")});
        QVERIFY2(!asJson.crashed && asJson.exitCode == 0, qPrintable(asJson.err));
        const QJsonObject o = QJsonDocument::fromJson(asJson.out.toUtf8()).object();
        const QJsonArray top5 = o.value(QStringLiteral("per_class_top5")).toArray();
        const QJsonArray counts = o.value(QStringLiteral("per_class_examples")).toArray();
        const QJsonArray names = o.value(QStringLiteral("classes")).toArray();
        QCOMPARE(top5.size(), 100);
        double found = 0;
        for (qsizetype c = 0; c < top5.size(); ++c) {
            const double share = top5.at(c).toDouble(-1);
            QVERIFY(share >= 0 && share <= 1);
            found += share * counts.at(c).toDouble();
            // The text's row of that class says the same share, after its accuracy.
            if (counts.at(c).toInt() == 0) continue;
            const double accuracy =
                o.value(QStringLiteral("per_class_accuracy")).toArray().at(c).toDouble();
            const QString figures =
                QString::number(100 * accuracy, 'f', 2).rightJustified(7) + QStringLiteral("%  ") +
                QString::number(100 * share, 'f', 2).rightJustified(7) + QLatin1Char('%');
            bool shown = false;
            for (const QString& line : text.out.split(QLatin1Char('\n')))
                shown = shown || (line.startsWith(names.at(c).toString() + QLatin1Char(' ')) &&
                                  line.contains(QStringLiteral("  ") + figures));
            QVERIFY2(shown, qPrintable(names.at(c).toString() + QStringLiteral(": ") + figures));
        }
        QCOMPARE(qint64(std::llround(found)), o.value(QStringLiteral("correct_top5")).toInteger());
        QVERIFY(o.value(QStringLiteral("correct_top5")).toInteger() > 0);
    }

    // Last, as it is the one large child (the peak resident size of children is the largest
    // one's): 40 megapixels, within the budget, is decoded, reduced and classified. A grey PNG is
    // decoded whole (40 MB), then Qt's smooth reduction works on a 32-bit copy (160 MB).
    void imageWithinTheBudgetClassifies()
    {
        test::writeBlackPng(path("forty.png"), 8000, 5000);
        const Run r = classify({path("forty.png")});
        QVERIFY2(!r.crashed && r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains(QStringLiteral("forty.png")), qPrintable(r.out));
        const double peak = childrenPeakRssMb();
        QVERIFY2(peak < 512, qPrintable(QStringLiteral("peak resident size %1 MB").arg(peak)));
    }
};

QTEST_GUILESS_MAIN(TestClassifyCommand)
#include "tst_classify_command.moc"
