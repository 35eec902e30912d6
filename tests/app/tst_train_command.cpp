// towers-cli train / eval / classify, run as processes on a small generated Fashion-MNIST-format
// dataset: usage errors (exit 2), a real run and its run folder, resume through the CLI equal to
// an uninterrupted run (the data loader seeks too), divergence (exit 1, last good checkpoint
// kept), Ctrl-C (exit 130, checkpoint written), a damaged data file, evaluation and
// classification of the checkpoint.
#include <QFile>
#include <QImage>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <csignal>
#include <filesystem>

#include "dataset_files.h"
#include "engine/train/checkpoint.h"

namespace fs = std::filesystem;
using namespace towers;

namespace {

struct CliRun
{
    int exitCode = -1;
    QString out, err;
    QList<QJsonObject> events; // --json lines
};

QList<QJsonObject> jsonLines(const QString& text)
{
    QList<QJsonObject> events;
    for (const QString& line : text.split(QLatin1Char('\n'), Qt::SkipEmptyParts)) {
        const auto doc = QJsonDocument::fromJson(line.toUtf8());
        if (doc.isObject()) events << doc.object();
    }
    return events;
}

} // namespace

class TestTrainCommand : public QObject
{
    Q_OBJECT

    QTemporaryDir m_tmp;

    QString path(const QString& name) const { return m_tmp.filePath(name); }

    QProcessEnvironment environment() const
    {
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("HOME"), path(QStringLiteral("home")));
        env.insert(QStringLiteral("XDG_DATA_HOME"), path(QStringLiteral("xdg")));
        env.insert(QStringLiteral("TOWERS_DATA"), path(QStringLiteral("data")));
        env.insert(QStringLiteral("TOWERS_RUNS"), path(QStringLiteral("runs")));
        env.insert(QStringLiteral("OMP_NUM_THREADS"), QStringLiteral("1"));
        // These runs are the CPU's, on any machine: no GPU backend (tst_gpu_backend has the GPU's).
        env.insert(QStringLiteral("TOWERS_CUDA_PLUGIN"), QStringLiteral("/nonexistent/libtowers-cuda.so"));
        return env;
    }

    CliRun run(const QStringList& args, int timeoutMs = 120000, const std::function<void(QProcess&)>& during = {})
    {
        QProcess p;
        p.setProgram(QStringLiteral(TOWERS_CLI));
        p.setArguments(args);
        p.setProcessEnvironment(environment());
        p.start();
        if (!p.waitForStarted(10000)) qFatal("cannot start towers-cli");
        if (during) during(p);
        if (!p.waitForFinished(timeoutMs)) {
            p.kill();
            p.waitForFinished();
            qWarning("towers-cli %s timed out", qPrintable(args.join(QLatin1Char(' '))));
        }
        CliRun r;
        r.exitCode = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
        r.out = QString::fromUtf8(p.readAllStandardOutput());
        r.err = QString::fromUtf8(p.readAllStandardError());
        r.events = jsonLines(r.out);
        return r;
    }

    // The options of a small, fast, exact run (no augmentation).
    static QStringList small(const QString& runDir)
    {
        return {QStringLiteral("train"),         QStringLiteral("--dataset"),    QStringLiteral("fashion-mnist"),
                QStringLiteral("--batch-size"),  QStringLiteral("16"),           QStringLiteral("--towers"),
                QStringLiteral("2"),             QStringLiteral("--augment"),    QStringLiteral("none"),
                QStringLiteral("--log-every"),   QStringLiteral("2"),            QStringLiteral("--run-dir"),
                runDir,                          QStringLiteral("--json")};
    }

    static engine::Checkpoint checkpointAt(const QString& runDir, int step)
    {
        return engine::readCheckpoint(fs::path(runDir.toStdString()) / "checkpoints" /
                                      QStringLiteral("ckpt-%1.safetensors").arg(step, 8, 10, QLatin1Char('0')).toStdString());
    }

private slots:
    void initTestCase()
    {
        QVERIFY(m_tmp.isValid());
        // 256 training and 64 test images of 28x28 in the real (gzip'ed IDX) format.
        test::writeIdxDataset(path(QStringLiteral("data/fashion-mnist")).toStdString(), 256, 64, 28, 28, true, 7);
    }

    void usageErrors_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<int>("exitCode");
        QTest::addColumn<QString>("message");
        QTest::newRow("towers 0") << QStringList{"train", "--towers", "0"} << 2 << "--towers";
        QTest::newRow("batch not a number") << QStringList{"train", "--batch-size", "many"} << 2 << "--batch-size";
        QTest::newRow("steps and epochs") << QStringList{"train", "--steps", "5", "--epochs", "1"} << 2 << "not both";
        QTest::newRow("unknown dataset") << QStringList{"train", "--dataset", "imagenet"} << 2 << "fashion-mnist";
        QTest::newRow("unknown model") << QStringList{"train", "--model", "vgg"} << 2 << "cifar10-tutorial";
        QTest::newRow("unknown option") << QStringList{"train", "--frobnicate"} << 2 << "frobnicate";
        QTest::newRow("bad augment") << QStringList{"train", "--augment", "lots"} << 2 << "--augment";
        QTest::newRow("bad schedule") << QStringList{"train", "--lr-schedule", "zigzag"} << 2 << "zigzag";
        QTest::newRow("model does not fit") << QStringList{"train", "--model", "cifar10-tutorial", "--steps", "1"} << 2
                                            << "24x24x3";
        QTest::newRow("no cuda") << QStringList{"train", "--device", "cuda"} << 1 << "CUDA backend";
        QTest::newRow("no cuda for --gpus") << QStringList{"train", "--gpus", "0,1"} << 1 << "--device cpu";
        QTest::newRow("bad gpus") << QStringList{"train", "--gpus", "0,x"} << 2 << "--gpus";
        QTest::newRow("gpus on the cpu") << QStringList{"train", "--device", "cpu", "--gpus", "0"} << 2 << "--gpus";
        QTest::newRow("tf32 on the cpu") << QStringList{"train", "--tf32"} << 2 << "--tf32";
        QTest::newRow("resume changes lr") << QStringList{"train", "--resume", "--lr", "0.5"} << 2 << "--lr";
        QTest::newRow("eval without checkpoint") << QStringList{"eval"} << 2 << "--checkpoint";
        QTest::newRow("classify without images") << QStringList{"classify", "--checkpoint", "x"} << 2 << "image";
        QTest::newRow("missing data dir") << QStringList{"train", "--data-dir", "/nonexistent/towers"} << 2 << "not a folder";
    }
    void usageErrors()
    {
        QFETCH(QStringList, args);
        QFETCH(int, exitCode);
        QFETCH(QString, message);
        const CliRun r = run(args);
        QCOMPARE(r.exitCode, exitCode);
        QVERIFY2(r.err.contains(message), qPrintable(r.err));
    }

    // A real run: events, the run folder, then eval and classify on its checkpoint.
    void trainEvalClassify()
    {
        const QString dir = path(QStringLiteral("runs/basic"));
        const CliRun r = run(small(dir) + QStringList{"--steps", "6", "--eval-every", "3"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        int steps = 0, evals = 0, checkpoints = 0;
        for (const auto& e : r.events) {
            const QString kind = e.value(QStringLiteral("event")).toString();
            steps += kind == QLatin1String("step");
            evals += kind == QLatin1String("eval");
            checkpoints += kind == QLatin1String("checkpoint");
            if (kind == QLatin1String("step")) {
                QCOMPARE(e.value(QStringLiteral("tower_compute_ms")).toArray().size(), 2);
                QVERIFY(e.value(QStringLiteral("examples_per_sec")).toDouble() > 0);
            }
            if (kind == QLatin1String("eval")) QCOMPARE(e.value(QStringLiteral("examples")).toInt(), 64);
        }
        QCOMPARE(steps, 3);
        QCOMPARE(evals, 2);
        QVERIFY(checkpoints >= 1);
        QCOMPARE(r.events.last().value(QStringLiteral("event")).toString(), QStringLiteral("finished"));
        for (const char* f : {"config.json", "metrics.jsonl", "eval.jsonl", "checkpoints/ckpt-00000006.safetensors"})
            QVERIFY2(QFile::exists(dir + QLatin1Char('/') + QLatin1String(f)), f);
        const auto c = checkpointAt(dir, 6);
        QCOMPARE(QString::fromStdString(c.info.model), QStringLiteral("fashion-fast"));
        QCOMPARE(QString::fromStdString(c.info.dataset), QStringLiteral("fashion-mnist"));
        QCOMPARE(c.info.classNames.size(), std::size_t(10));
        QVERIFY(!c.info.preprocessing.empty());

        const QString ckpt = dir + QStringLiteral("/checkpoints/ckpt-00000006.safetensors");
        const CliRun e = run({QStringLiteral("eval"), QStringLiteral("--checkpoint"), ckpt, QStringLiteral("--json")});
        QVERIFY2(e.exitCode == 0, qPrintable(e.err));
        const QJsonObject j = QJsonDocument::fromJson(e.out.toUtf8()).object();
        QCOMPARE(j.value(QStringLiteral("examples")).toInt(), 64);
        const double p1 = j.value(QStringLiteral("precision_at_1")).toDouble();
        QVERIFY(p1 >= 0 && p1 <= 1);
        QCOMPARE(j.value(QStringLiteral("confusion")).toArray().size(), 10);

        QImage image(40, 30, QImage::Format_RGB32); // colour and another size: converted and scaled
        image.fill(Qt::white);
        const QString png = path(QStringLiteral("shirt.png"));
        QVERIFY(image.save(png));
        const CliRun c3 = run({QStringLiteral("classify"), QStringLiteral("--checkpoint"), ckpt, png,
                               QStringLiteral("--top-k"), QStringLiteral("3"), QStringLiteral("--json")});
        QVERIFY2(c3.exitCode == 0, qPrintable(c3.err));
        const auto top = QJsonDocument::fromJson(c3.out.toUtf8())
                             .object()
                             .value(QStringLiteral("results"))
                             .toArray()
                             .first()
                             .toObject()
                             .value(QStringLiteral("top"))
                             .toArray();
        QCOMPARE(top.size(), 3);
        QVERIFY(top[0].toObject().value(QStringLiteral("probability")).toDouble() >=
                top[1].toObject().value(QStringLiteral("probability")).toDouble());

        const CliRun bad = run({QStringLiteral("classify"), QStringLiteral("--checkpoint"), ckpt, path("none.png")});
        QCOMPARE(bad.exitCode, 1);
        QVERIFY2(bad.err.contains(QStringLiteral("none.png")), qPrintable(bad.err));
        const CliRun notCkpt = run({QStringLiteral("eval"), QStringLiteral("--checkpoint"), png});
        QCOMPARE(notCkpt.exitCode, 1);
        QVERIFY2(notCkpt.err.contains(QStringLiteral("shirt.png")), qPrintable(notCkpt.err));
    }

    // 4 steps, then --resume to 8, equals 8 steps in one go, bitwise (the loader seeks to step 4).
    // A constant learning rate: one-cycle's depends on the run's length, which the resume extends.
    void resumeEqualsUninterrupted()
    {
        const QString a = path(QStringLiteral("runs/whole")), b = path(QStringLiteral("runs/halves"));
        const QStringList constant{QStringLiteral("--lr-schedule"), QStringLiteral("constant"), QStringLiteral("--lr"),
                                   QStringLiteral("0.05")};
        QCOMPARE(run(small(a) + constant + QStringList{"--steps", "8"}).exitCode, 0);
        QCOMPARE(run(small(b) + constant + QStringList{"--steps", "4"}).exitCode, 0);
        const CliRun r = run({QStringLiteral("train"), QStringLiteral("--resume"), QStringLiteral("--run-dir"), b,
                              QStringLiteral("--steps"), QStringLiteral("8"), QStringLiteral("--json")});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        const auto x = checkpointAt(a, 8), y = checkpointAt(b, 8);
        QCOMPARE(x.weights.size(), y.weights.size());
        for (std::size_t i = 0; i < x.weights.size(); ++i) {
            const auto& [name, t] = x.weights[i];
            QCOMPARE(y.weights[i].first, name);
            QVERIFY2(std::memcmp(t.raw(), y.weights[i].second.raw(), t.bytes()) == 0, name.c_str());
        }
        QCOMPARE(x.optimizer.size(), y.optimizer.size());
        for (std::size_t i = 0; i < x.optimizer.size(); ++i)
            QVERIFY(std::memcmp(x.optimizer[i].second.raw(), y.optimizer[i].second.raw(), x.optimizer[i].second.bytes()) == 0);
    }

    void divergenceStopsCleanly()
    {
        const QString dir = path(QStringLiteral("runs/diverge"));
        const CliRun r = run(small(dir) + QStringList{"--steps", "50", "--lr", "1e5", "--checkpoint-every", "1"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(QStringLiteral("diverged")), qPrintable(r.err));
        // Whatever checkpoints were written hold the last good (finite) state and load.
        for (const auto& f : fs::directory_iterator(fs::path(dir.toStdString()) / "checkpoints")) {
            const auto c = engine::readCheckpoint(f.path());
            for (const auto& [name, t] : c.weights)
                if (t.dtype() == engine::DType::Float32)
                    for (std::int64_t i = 0; i < t.numel(); ++i) QVERIFY2(std::isfinite(t.at(i)), name.c_str());
        }
    }

    void interruptWritesCheckpoint()
    {
        const QString dir = path(QStringLiteral("runs/interrupted"));
        const CliRun r = run(small(dir) + QStringList{"--steps", "1000000", "--checkpoint-every", "0"}, 120000,
                             [](QProcess& p) {
                                 // Wait for the first step's event, then Ctrl-C.
                                 QByteArray seen;
                                 while (!seen.contains("\"event\":\"step\"") && p.waitForReadyRead(60000))
                                     seen += p.peek(1 << 20);
                                 ::kill(static_cast<pid_t>(p.processId()), SIGINT);
                             });
        QCOMPARE(r.exitCode, 130);
        QCOMPARE(r.events.last().value(QStringLiteral("event")).toString(), QStringLiteral("stopped"));
        const int step = r.events.last().value(QStringLiteral("step")).toInt();
        QVERIFY(step >= 2);
        QCOMPARE(checkpointAt(dir, step).info.step, std::int64_t(step));
    }

    void damagedDataFile()
    {
        const fs::path folder = path(QStringLiteral("broken/fashion-mnist")).toStdString();
        test::writeIdxDataset(folder, 64, 16, 28, 28, false, 3);
        fs::resize_file(folder / "train-images-idx3-ubyte", 1000); // truncated
        const CliRun r = run({QStringLiteral("train"), QStringLiteral("--dataset"), QStringLiteral("fashion-mnist"),
                              QStringLiteral("--data-dir"), QString::fromStdString(folder.parent_path().string()),
                              QStringLiteral("--steps"), QStringLiteral("1")});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(QStringLiteral("train-images-idx3-ubyte")), qPrintable(r.err));
    }
};

QTEST_GUILESS_MAIN(TestTrainCommand)
#include "tst_train_command.moc"
