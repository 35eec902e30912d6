// towers-cli train / eval / classify, run as processes on a small generated Fashion-MNIST-format
// dataset: usage errors (exit 2), a real run and its run folder, resume through the CLI equal to
// an uninterrupted run (the data loader seeks too), divergence (exit 1, last good checkpoint
// kept), Ctrl-C (exit 130, checkpoint written), a damaged data file, evaluation and
// classification of the checkpoint, --precision bf16 (refused where it cannot run, a run resumed
// in fp32).
#include <QDir>
#include <QDirIterator>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QImage>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMap>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>
#include <csignal>
#include <filesystem>

#include "cli_process.h"
#include "dataset_files.h"
#include "engine/cpu/onednn_ops.h"
#include "engine/models/registry.h"
#include "engine/train/checkpoint.h"
#include "engine/train/run_lock.h"
#include "engine/train/train_config.h"

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

    // The test's folders, plus `extra` ("NAME=value").
    QProcessEnvironment environment(const QStringList& extra = {}) const
    {
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("HOME"), path(QStringLiteral("home")));
        env.insert(QStringLiteral("XDG_DATA_HOME"), path(QStringLiteral("xdg")));
        env.insert(QStringLiteral("TOWERS_DATA"), path(QStringLiteral("data")));
        env.insert(QStringLiteral("TOWERS_RUNS"), path(QStringLiteral("runs")));
        env.insert(QStringLiteral("OMP_NUM_THREADS"), QStringLiteral("1"));
        // These runs are the CPU's, on any machine: no GPU backend (tst_gpu_backend has the GPU's).
        env.insert(QStringLiteral("TOWERS_CUDA_PLUGIN"),
                   QStringLiteral("/nonexistent/libtowers-cuda.so"));
        for (const QString& e : extra)
            env.insert(e.section(QLatin1Char('='), 0, 0), e.section(QLatin1Char('='), 1));
        return env;
    }

    CliRun run(const QStringList& args, int timeoutMs = 120000,
               const std::function<void(QProcess&)>& during = {}, const QStringList& env = {})
    {
        QProcess p;
        p.setProgram(QStringLiteral(TOWERS_CLI));
        p.setArguments(args);
        p.setProcessEnvironment(environment(env));
        test::withDefaultSignals(p);
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
        return {QStringLiteral("train"),
                QStringLiteral("--dataset"),
                QStringLiteral("fashion-mnist"),
                QStringLiteral("--batch-size"),
                QStringLiteral("16"),
                QStringLiteral("--towers"),
                QStringLiteral("2"),
                QStringLiteral("--augment"),
                QStringLiteral("none"),
                QStringLiteral("--log-every"),
                QStringLiteral("2"),
                QStringLiteral("--run-dir"),
                runDir,
                QStringLiteral("--json")};
    }

    static QByteArray readFile(const QString& file)
    {
        QFile f(file);
        return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
    }

    // Whether a --json run logged a line containing `text`.
    static bool logged(const CliRun& r, const QString& text)
    {
        for (const auto& e : r.events)
            if (e.value(QStringLiteral("event")).toString() == QLatin1String("log") &&
                e.value(QStringLiteral("message")).toString().contains(text))
                return true;
        return false;
    }

    static engine::Checkpoint checkpointAt(const QString& runDir, int step)
    {
        return engine::readCheckpoint(
            fs::path(runDir.toStdString()) / "checkpoints" /
            QStringLiteral("ckpt-%1.safetensors").arg(step, 8, 10, QLatin1Char('0')).toStdString());
    }

private slots:
    void initTestCase()
    {
        QVERIFY(m_tmp.isValid());
        // 256 training and 64 test images of 28x28 in the real (gzip'ed IDX) format.
        test::writeIdxDataset(path(QStringLiteral("data/fashion-mnist")).toStdString(), 256, 64, 28,
                              28, true, 7);
    }

    void usageErrors_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<int>("exitCode");
        QTest::addColumn<QString>("message");
        QTest::newRow("towers 0") << QStringList{"train", "--towers", "0"} << 2 << "--towers";
        // The shared option checks name the command, as the commands' own messages do.
        QTest::newRow("lr not a number")
            << QStringList{"train", "--lr", "nan"} << 2
            << "towers-cli train: --lr must be a number from 1e-12 to 1e+06, got 'nan'";
        QTest::newRow("eval: batch 0") << QStringList{"eval", "--batch-size", "0"} << 2
                                       << "towers-cli eval: --batch-size must be an integer";
        QTest::newRow("batch not a number")
            << QStringList{"train", "--batch-size", "many"} << 2 << "--batch-size";
        QTest::newRow("steps and epochs")
            << QStringList{"train", "--steps", "5", "--epochs", "1"} << 2 << "not both";
        QTest::newRow("unknown dataset")
            << QStringList{"train", "--dataset", "imagenet"} << 2 << "fashion-mnist";
        QTest::newRow("unknown model")
            << QStringList{"train", "--model", "vgg"} << 2 << "cifar10-tutorial";
        QTest::newRow("unknown option") << QStringList{"train", "--frobnicate"} << 2
                                        << "towers-cli train: Unknown option 'frobnicate'.";
        QTest::newRow("bad augment") << QStringList{"train", "--augment", "lots"} << 2
                                     << "--augment must be default, tutorial or none, got 'lots'";
        QTest::newRow("bad device") << QStringList{"train", "--device", "tpu"} << 2
                                    << "towers-cli train: --device must be cpu or cuda, got 'tpu'";
        QTest::newRow("bad allreduce") << QStringList{"train", "--allreduce", "ring"} << 2
                                       << "--allreduce must be auto or host, got 'ring'";
        QTest::newRow("bad gpu data") << QStringList{"train", "--gpu-data", "always"} << 2
                                      << "--gpu-data must be auto or off, got 'always'";
        QTest::newRow("bad selftest device") << QStringList{"selftest", "--device", "tpu"} << 2
                                             << "--device must be cpu or cuda, got 'tpu'";
        QTest::newRow("bad schedule")
            << QStringList{"train", "--lr-schedule", "zigzag"} << 2 << "zigzag";
        QTest::newRow("model does not fit")
            << QStringList{"train", "--model", "cifar10-tutorial", "--steps", "1"} << 2
            << "24x24x3";
        QTest::newRow("no cuda") << QStringList{"train", "--device", "cuda"} << 1 << "CUDA backend";
        QTest::newRow("no cuda for --gpus")
            << QStringList{"train", "--gpus", "0,1"} << 1 << "--device cpu";
        QTest::newRow("bad gpus") << QStringList{"train", "--gpus", "0,x"} << 2 << "--gpus";
        // --gpus all: every GPU CUDA sees; none here, which training says.
        QTest::newRow("no cuda for --gpus all")
            << QStringList{"train", "--gpus", "all"} << 1 << "--device cpu";
        QTest::newRow("all gpus on the cpu")
            << QStringList{"train", "--device", "cpu", "--gpus", "all"} << 2
            << "--gpus is for --device cuda";
        QTest::newRow("gpus on the cpu")
            << QStringList{"train", "--device", "cpu", "--gpus", "0"} << 2 << "--gpus";
        // lr-find takes the same device options.
        QTest::newRow("lr-find: bad device") << QStringList{"lr-find", "--device", "tpu"} << 2
                                             << "--device must be cpu or cuda, got 'tpu'";
        QTest::newRow("lr-find: no cuda") << QStringList{"lr-find", "--gpus", "0"} << 1
                                          << "towers-cli lr-find: error: --device cuda: ";
        QTest::newRow("lr-find: bad gpus")
            << QStringList{"lr-find", "--gpus", "1,,2"} << 2
            << "towers-cli lr-find: --gpus takes GPU numbers separated by commas";
        QTest::newRow("lr-find: gpus on the cpu")
            << QStringList{"lr-find", "--device", "cpu", "--gpus", "0"} << 2
            << "towers-cli lr-find: --gpus is for --device cuda";
        QTest::newRow("tf32 on the cpu") << QStringList{"train", "--tf32"} << 2 << "--tf32";
        QTest::newRow("cudnn benchmark on the cpu")
            << QStringList{"train", "--cudnn-benchmark", "on"} << 2
            << "--cudnn-benchmark is for --device cuda";
        QTest::newRow("bad cudnn benchmark")
            << QStringList{"train", "--device", "cuda", "--cudnn-benchmark", "yes"} << 2
            << "--cudnn-benchmark must be on or off, got 'yes'";
        QTest::newRow("bad cuda graphs") << QStringList{"train", "--cuda-graphs", "maybe"} << 2
                                         << "--cuda-graphs must be on or off, got 'maybe'";
        QTest::newRow("bad precision")
            << QStringList{"train", "--precision", "bogus"} << 2
            << "--precision: unknown precision 'bogus' (known: fp32, bf16)";
        QTest::newRow("resume with no run")
            << QStringList{"train", "--resume", "--lr", "0.5"} << 2 << "no run to resume";
        QTest::newRow("restart without resume")
            << QStringList{"train", "--restart"} << 2 << "--restart is for --resume";
        QTest::newRow("overwrite with resume")
            << QStringList{"train", "--resume", "--overwrite"} << 2 << "--overwrite";
        QTest::newRow("too many threads")
            << QStringList{"train", "--towers", "256", "--threads-per-tower", "1024"} << 2
            << "256 towers x 1024 threads per tower";
        QTest::newRow("data dir without the dataset")
            << QStringList{"train", "--data-dir", m_tmp.path()} << 2 << "holds no fashion-mnist";
        QTest::newRow("eval without checkpoint") << QStringList{"eval"} << 2 << "--checkpoint";
        QTest::newRow("classify without images")
            << QStringList{"classify", "--checkpoint", "x"} << 2 << "image";
        QTest::newRow("dataset to download")
            << QStringList{"train", "--dataset", "cifar10"} << 1
            << "Get it with 'towers-cli download cifar10' (170 MB)";
        QTest::newRow("init from no checkpoint")
            << QStringList{"train", "--init-from", "/nonexistent/x.safetensors"} << 1
            << "cannot read safetensors file '/nonexistent/x.safetensors'";
        QTest::newRow("init from a folder without checkpoints")
            << QStringList{"train", "--init-from", "/"} << 1
            << "--init-from: / is a folder, not a checkpoint, nor a run folder";
        QTest::newRow("missing data dir")
            << QStringList{"train", "--data-dir", "/nonexistent/towers"} << 2 << "not a folder";
        QTest::newRow("validation share too large")
            << QStringList{"train", "--validation", "0.6"} << 2
            << "--validation: expected a share of the training images from 0 to 0.5";
        QTest::newRow("validation percentage too large")
            << QStringList{"train", "--validation", "60%"} << 2 << "got '60%'";
        QTest::newRow("validation not a share")
            << QStringList{"train", "--validation", "some"} << 2 << "--validation";
        QTest::newRow("patience without evaluations")
            << QStringList{"train", "--patience", "3", "--eval-every", "0", "--steps", "5"} << 2
            << "patience: counts evaluations, and evalEvery is 0";
        QTest::newRow("validation leaves less than a batch")
            << QStringList{"train", "--validation", "0.5", "--batch-size", "200", "--towers",
                           "1",     "--steps",      "1"}
            << 2 << "were held out for validation";
        QTest::newRow("eval: bad set") << QStringList{"eval", "--set", "every"} << 2
                                       << "--set must be test, validation, train or all, got "
                                          "'every'";
        QTest::newRow("best without init-from")
            << QStringList{"train", "--best"} << 2 << "--best picks a run's best checkpoint";
        QTest::newRow("lr-find best without init-from")
            << QStringList{"lr-find", "--best"} << 2 << "give --init-from RUN too";
        QTest::newRow("like no run")
            << QStringList{"train", "--like", "no-such-run"} << 2 << "--like: no run 'no-such-run'";
        QTest::newRow("like and resume")
            << QStringList{"train", "--like", "x", "--resume"} << 2 << "--like is for a new run";
        QTest::newRow("min delta not a share")
            << QStringList{"train", "--min-delta", "abc"} << 2 << "--min-delta: expected a gain";
        QTest::newRow("min delta above half")
            << QStringList{"train", "--min-delta", "60%"} << 2 << "got '60%'";
        QTest::newRow("patience negative")
            << QStringList{"train", "--patience", "-1"} << 2 << "--patience";
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

    // Without --json, a finished run ends with its accuracy, its checkpoint and how to use it.
    void textEndSaysHowToUseTheCheckpoint()
    {
        const QString dir = path(QStringLiteral("runs/text"));
        QStringList args = small(dir);
        args.removeAll(QStringLiteral("--json"));
        const CliRun r = run(args + QStringList{"--steps", "2"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        const QString ckpt = dir + QStringLiteral("/checkpoints/ckpt-00000002.safetensors");
        QVERIFY2(r.out.contains(QStringLiteral("finished at step 2 of 2, test precision @ 1 = ")),
                 qPrintable(r.out));
        QVERIFY2(r.out.contains(QStringLiteral("\ncheckpoint ") + ckpt + QLatin1Char('\n')),
                 qPrintable(r.out));
        QVERIFY2(r.out.contains(QStringLiteral("use it: towers-cli classify --checkpoint ") + ckpt +
                                QStringLiteral(" IMAGE...")),
                 qPrintable(r.out));

        // A run started from it prints its header first, then what the construction logged.
        const QString tuned = path(QStringLiteral("runs/text-tuned"));
        QStringList again = small(tuned);
        again.removeAll(QStringLiteral("--json"));
        const CliRun t = run(again + QStringList{"--steps", "1", "--init-from", dir});
        QVERIFY2(t.exitCode == 0, qPrintable(t.err + t.out));
        const qsizetype header = t.out.indexOf(QStringLiteral("run folder ") + tuned);
        const qsizetype weights = t.out.indexOf(QStringLiteral("weights from ") + ckpt);
        QVERIFY2(header == 0 && weights > header, qPrintable(t.out));
    }

    // --like RUN: a new run with the run's configuration (run by name, as runs lists it), the
    // options given changing it; the earlier run stays as it was.
    void newRunLike()
    {
        const QString first = path(QStringLiteral("runs/like-me"));
        CliRun r = run(small(first) + QStringList{"--steps", "4", "--lr", "0.0123", "--validation",
                                                  "20%", "--eval-every", "2", "--patience", "3"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        const QByteArray before = readFile(first + QStringLiteral("/config.json"));
        const QString second = path(QStringLiteral("runs/like-it"));
        r = run({QStringLiteral("train"), QStringLiteral("--like"), QStringLiteral("like-me"),
                 QStringLiteral("--seed"), QStringLiteral("5"), QStringLiteral("--run-dir"), second,
                 QStringLiteral("--json")});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        QVERIFY2(r.err.contains(QStringLiteral("a new run like %1").arg(first)), qPrintable(r.err));
        QCOMPARE(readFile(first + QStringLiteral("/config.json")), before);
        const auto a = engine::TrainConfig::fromJson(before.toStdString());
        auto b = engine::TrainConfig::fromJson(
            readFile(second + QStringLiteral("/config.json")).toStdString());
        QCOMPARE(b.seed, std::uint64_t(5));
        QVERIFY(!b.runId.empty() && b.runId != a.runId);
        QCOMPARE(b.towers, 2);
        QCOMPARE(b.batchPerTower, 16);
        QCOMPARE(b.schedule.lr, 0.0123);
        QCOMPARE(b.validation, 0.2);
        QCOMPARE(b.augmentation, std::string("none"));
        // Everything else is the first run's.
        b.seed = a.seed;
        b.runId = a.runId;
        QCOMPARE(QString::fromStdString(b.toJson()), QString::fromStdString(a.toJson()));
    }

    // --like finds the run's own dataset where that run found it (an imported one, in a folder off
    // the search path: "unknown dataset" before), and says when the run trained on another number
    // of processes, whose global batch this one does not have.
    void likeFindsTheRunsDataAndSaysItsProcesses()
    {
        const QString images = path(QStringLiteral("like-images"));
        for (const char* cls : {"dark", "light"})
            for (int i = 0; i < 8; ++i) {
                QImage image(8, 8, QImage::Format_Grayscale8);
                image.fill(QString::fromLatin1(cls) == QLatin1String("dark") ? 20 + i : 200 + i);
                QVERIFY(QDir().mkpath(images + QLatin1Char('/') + QLatin1String(cls)));
                QVERIFY(image.save(QStringLiteral("%1/%2/%3.png").arg(images).arg(cls).arg(i)));
            }
        const QString mine = path(QStringLiteral("like-data"));
        CliRun r = run({QStringLiteral("import"), images, QStringLiteral("--name"),
                        QStringLiteral("likeds"), QStringLiteral("--data-dir"), mine});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        const QString first = path(QStringLiteral("runs/like-data-1"));
        r = run({QStringLiteral("train"), QStringLiteral("--dataset"), QStringLiteral("likeds"),
                 QStringLiteral("--data-dir"), mine, QStringLiteral("--steps"), QStringLiteral("2"),
                 QStringLiteral("--batch-size"), QStringLiteral("4"), QStringLiteral("--run-dir"),
                 first});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        const QString second = path(QStringLiteral("runs/like-data-2"));
        r = run({QStringLiteral("train"), QStringLiteral("--like"), first,
                 QStringLiteral("--run-dir"), second});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        const auto b = engine::TrainConfig::fromJson(
            readFile(second + QStringLiteral("/config.json")).toStdString());
        QCOMPARE(QDir(QString::fromStdString(b.dataDir)).canonicalPath(),
                 QDir(mine).canonicalPath());
        QVERIFY2(!r.err.contains(QStringLiteral("note: the run trained on")), qPrintable(r.err));
        // A run of two processes, copied by one.
        auto two = engine::TrainConfig::fromJson(
            readFile(first + QStringLiteral("/config.json")).toStdString());
        two.processes = 2;
        QFile f(first + QStringLiteral("/config.json"));
        QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
        f.write(QByteArray::fromStdString(two.toJson()));
        f.close();
        r = run({QStringLiteral("train"), QStringLiteral("--like"), first,
                 QStringLiteral("--run-dir"), path(QStringLiteral("runs/like-data-3"))});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        QVERIFY2(r.err.contains(QStringLiteral(
                     "note: the run trained on 2 processes (a global batch of 8), this is 1 "
                     "process (a global batch of 4); to train as it did, start it with mpirun -np "
                     "2")),
                 qPrintable(r.err));
    }

    // Extending a run whose schedule is laid over its whole length (one-cycle, cosine) lays it out
    // again: said, with the rate where it was and where it goes on; a constant one says nothing.
    void extendingARunSaysWhatItsScheduleDoes()
    {
        const QString dir = path(QStringLiteral("runs/extend-onecycle"));
        CliRun r = run(small(dir) + QStringList{"--steps", "4", "--lr-schedule", "onecycle"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        r = run({QStringLiteral("train"), QStringLiteral("--resume"), QStringLiteral("--run-dir"),
                 dir, QStringLiteral("--steps"), QStringLiteral("8"), QStringLiteral("--json")});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        QVERIFY2(r.err.contains(QStringLiteral("note: the onecycle learning-rate schedule is laid "
                                               "out again for 8 steps (it was for 4): step 4 "
                                               "trained at ")),
                 qPrintable(r.err));
        const QString constant = path(QStringLiteral("runs/extend-constant"));
        r = run(small(constant) + QStringList{"--steps", "2", "--lr-schedule", "constant"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        r = run({QStringLiteral("train"), QStringLiteral("--resume"), QStringLiteral("--run-dir"),
                 constant, QStringLiteral("--steps"), QStringLiteral("4"),
                 QStringLiteral("--json")});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        QVERIFY2(!r.err.contains(QStringLiteral("laid out again")), qPrintable(r.err));
    }

    // The commands Towers suggests are ready to paste: a path with a space is quoted for the shell.
    void suggestedCommandsQuoteTheirPaths()
    {
        const QString dir = path(QStringLiteral("runs/my run"));
        QStringList args = small(dir) + QStringList{"--steps", "1"};
        args.removeAll(QStringLiteral("--json"));
        const CliRun r = run(args);
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        const QString said = r.out + r.err;
        QVERIFY2(
            said.contains(QStringLiteral("use it: towers-cli classify --checkpoint '%1/").arg(dir)),
            qPrintable(said));
    }

    // --validation holds a share of each class out of the training images: the run evaluates on
    // it (the log, eval.jsonl and the events say so) and keeps the checkpoint best on it, which
    // eval --best then measures on the untouched test set. --patience stops the run early; a
    // resume of it stays stopped; the share cannot change on resume; runs shows it all.
    void validationSetAndEarlyStop()
    {
        const QString dir = path(QStringLiteral("runs/validation"));
        const QStringList options =
            small(dir) +
            QStringList{"--steps",    "60", "--eval-every",       "2", "--validation", "25%",
                        "--patience", "2",  "--keep-checkpoints", "1"};
        const CliRun r = run(options);
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        // 25 % of each class of the 256 images: 64 held out.
        QVERIFY2(logged(r, QStringLiteral("holding out 64 of 256 training images as the "
                                          "validation set (25 % of each class)")),
                 qPrintable(r.out));
        QList<QJsonObject> evals;
        for (const auto& e : r.events)
            if (e.value(QStringLiteral("event")).toString() == QLatin1String("eval")) evals << e;
        QVERIFY(evals.size() >= 3);
        for (const auto& e : evals) {
            QCOMPARE(e.value(QStringLiteral("set")).toString(), QStringLiteral("validation"));
            QCOMPARE(e.value(QStringLiteral("examples")).toInteger(), qint64(64));
        }
        const QJsonObject end = r.events.last();
        QCOMPARE(end.value(QStringLiteral("event")).toString(), QStringLiteral("finished"));
        // 192 images train: with patience 2 over 30 evaluations the run stops early.
        QVERIFY2(end.value(QStringLiteral("stopped_early")).toBool(), qPrintable(r.out));
        const qint64 stoppedAt = end.value(QStringLiteral("step")).toInteger();
        QVERIFY(stoppedAt < 60);
        QCOMPARE(evals.last().value(QStringLiteral("step")).toInteger(), stoppedAt);
        QVERIFY(logged(r, QStringLiteral("stopping early at step %1: the last 2 evaluations "
                                         "were no better than step ")
                              .arg(stoppedAt)));
        // The best on the validation set is kept and named; it is the highest of eval.jsonl.
        const QString best = end.value(QStringLiteral("best_checkpoint")).toString();
        QVERIFY2(QFileInfo::exists(best), qPrintable(best));
        double highest = -1;
        qint64 highestStep = 0;
        for (const QByteArray& line : readFile(dir + QStringLiteral("/eval.jsonl")).split('\n')) {
            if (line.isEmpty()) continue;
            const QJsonObject e = QJsonDocument::fromJson(line).object();
            QCOMPARE(e.value(QStringLiteral("set")).toString(), QStringLiteral("validation"));
            if (e.value(QStringLiteral("precisionAt1")).toDouble() > highest) {
                highest = e.value(QStringLiteral("precisionAt1")).toDouble();
                highestStep = e.value(QStringLiteral("step")).toInteger();
            }
        }
        QCOMPARE(end.value(QStringLiteral("best_precision_at_1")).toDouble(), highest);
        QVERIFY2(
            best.endsWith(
                QStringLiteral("ckpt-%1.safetensors").arg(highestStep, 8, 10, QLatin1Char('0'))),
            qPrintable(best));
        QCOMPARE(highestStep, stoppedAt - 4); // patience 2 of evaluations every 2 steps

        // Resumed: nothing to do; the logs stay as they are.
        const QByteArray metrics = readFile(dir + QStringLiteral("/metrics.jsonl"));
        QStringList again = options;
        again.removeAll(QStringLiteral("--json"));
        const CliRun resumed = run(again + QStringList{"--resume"});
        QVERIFY2(resumed.exitCode == 0, qPrintable(resumed.err + resumed.out));
        QVERIFY2(
            resumed.out.contains(QStringLiteral("the run stopped early at step %1").arg(stoppedAt)),
            qPrintable(resumed.out));
        QVERIFY2(
            resumed.out.contains(QStringLiteral("stopped early at step %1 of 60").arg(stoppedAt)),
            qPrintable(resumed.out));
        // The checkpoint it ends with is the one it restored (it wrote none).
        QVERIFY2(
            resumed.out.contains(QStringLiteral("checkpoint %1/checkpoints/ckpt-%2.safetensors")
                                     .arg(dir)
                                     .arg(stoppedAt, 8, 10, QLatin1Char('0'))),
            qPrintable(resumed.out));
        QVERIFY2(resumed.out.contains(
                     QStringLiteral("best on the validation set: step %1").arg(highestStep)),
                 qPrintable(resumed.out));
        QVERIFY2(
            resumed.out.contains(QStringLiteral("towers-cli eval --checkpoint %1 --best").arg(dir)),
            qPrintable(resumed.out));
        QCOMPARE(readFile(dir + QStringLiteral("/metrics.jsonl")), metrics);
        // Another share would train on other images.
        const CliRun changed =
            run({QStringLiteral("train"), QStringLiteral("--resume"), QStringLiteral("--run-dir"),
                 dir, QStringLiteral("--validation"), QStringLiteral("0.1")});
        QCOMPARE(changed.exitCode, 2);
        QVERIFY2(changed.err.contains(QStringLiteral("--validation cannot change when resuming: "
                                                     "the run has 0.25")),
                 qPrintable(changed.err));

        // runs: the state, the set and its accuracy.
        const CliRun listed = run({QStringLiteral("runs"), dir, QStringLiteral("--json")});
        QCOMPARE(listed.exitCode, 0);
        const QJsonObject o = QJsonDocument::fromJson(listed.out.toUtf8()).object();
        QCOMPARE(o.value(QStringLiteral("state")).toString(), QStringLiteral("stopped early"));
        QCOMPARE(o.value(QStringLiteral("evaluated_on")).toString(), QStringLiteral("validation"));
        QCOMPARE(o.value(QStringLiteral("validation_share")).toDouble(), 0.25);
        QCOMPARE(o.value(QStringLiteral("best_checkpoint"))
                     .toObject()
                     .value(QStringLiteral("validation_accuracy"))
                     .toDouble(),
                 highest);
        QVERIFY(!o.contains(QStringLiteral("test_accuracy")));

        // eval --best measures the kept checkpoint on the test set (64 images).
        const CliRun measured = run({QStringLiteral("eval"), QStringLiteral("--checkpoint"), dir,
                                     QStringLiteral("--best"), QStringLiteral("--json")});
        QVERIFY2(measured.exitCode == 0, qPrintable(measured.err + measured.out));
        QVERIFY2(
            measured.err.contains(QStringLiteral("step %1, validation accuracy ").arg(highestStep)),
            qPrintable(measured.err));
        QCOMPARE(QJsonDocument::fromJson(measured.out.toUtf8())
                     .object()
                     .value(QStringLiteral("examples"))
                     .toInteger(),
                 qint64(64));
        // Fine-tuning from the run's best rather than its newest: --init-from RUN --best.
        const QString tuned = path(QStringLiteral("runs/from-best"));
        const CliRun fromBest = run({QStringLiteral("train"), QStringLiteral("--init-from"), dir,
                                     QStringLiteral("--best"), QStringLiteral("--steps"),
                                     QStringLiteral("1"), QStringLiteral("--batch-size"),
                                     QStringLiteral("16"), QStringLiteral("--run-dir"), tuned});
        QVERIFY2(fromBest.exitCode == 0, qPrintable(fromBest.err + fromBest.out));
        QCOMPARE(QJsonDocument::fromJson(readFile(tuned + QStringLiteral("/config.json")))
                     .object()
                     .value(QStringLiteral("initFrom"))
                     .toString(),
                 QStringLiteral("%1/checkpoints/ckpt-%2.safetensors")
                     .arg(dir)
                     .arg(highestStep, 8, 10, QLatin1Char('0')));
        // --set validation: the run's own validation images again, the run's own answer.
        const CliRun again2 = run({QStringLiteral("eval"), QStringLiteral("--checkpoint"), dir,
                                   QStringLiteral("--best"), QStringLiteral("--set"),
                                   QStringLiteral("validation"), QStringLiteral("--json")});
        QVERIFY2(again2.exitCode == 0, qPrintable(again2.err + again2.out));
        const QJsonObject v = QJsonDocument::fromJson(again2.out.toUtf8()).object();
        QCOMPARE(v.value(QStringLiteral("set")).toString(), QStringLiteral("validation"));
        QCOMPARE(v.value(QStringLiteral("examples")).toInteger(), qint64(64));
        QCOMPARE(v.value(QStringLiteral("precision_at_1")).toDouble(), highest);
        // A run without a validation set has none to measure.
        const CliRun none = run({QStringLiteral("eval"), QStringLiteral("--checkpoint"),
                                 path(QStringLiteral("runs/text")), QStringLiteral("--set"),
                                 QStringLiteral("validation")});
        QCOMPARE(none.exitCode, 1);
        QVERIFY2(none.err.contains(QStringLiteral("held out no validation set")),
                 qPrintable(none.err));
    }

    // lr-find: the range test on the dataset with a run's towers and batch, every step in JSON
    // with the suggestion; the text says what to train with; bad ranges are usage errors.
    void lrFind()
    {
        const CliRun json =
            run({QStringLiteral("lr-find"), QStringLiteral("--dataset"),
                 QStringLiteral("fashion-mnist"), QStringLiteral("--towers"), QStringLiteral("2"),
                 QStringLiteral("--batch-size"), QStringLiteral("16"), QStringLiteral("--steps"),
                 QStringLiteral("20"), QStringLiteral("--json")});
        QVERIFY2(json.exitCode == 0, qPrintable(json.err));
        const QJsonObject o = QJsonDocument::fromJson(json.out.toUtf8()).object();
        const QJsonArray points = o.value(QStringLiteral("points")).toArray();
        QVERIFY(points.size() >= 5 && points.size() <= 20);
        QCOMPARE(points.at(0).toObject().value(QStringLiteral("lr")).toDouble(), 1e-5);
        QCOMPARE(o.value(QStringLiteral("model")).toString(), QStringLiteral("fashion-fast"));
        QVERIFY(o.value(QStringLiteral("suggested_lr")).toDouble() > 0);
        const CliRun text =
            run({QStringLiteral("lr-find"), QStringLiteral("--dataset"),
                 QStringLiteral("fashion-mnist"), QStringLiteral("--batch-size"),
                 QStringLiteral("16"), QStringLiteral("--steps"), QStringLiteral("10")});
        QVERIFY2(text.exitCode == 0, qPrintable(text.err));
        QVERIFY2(text.out.contains(QStringLiteral("suggested learning rate: ")) &&
                     text.out.contains(QStringLiteral("use it: towers-cli train --dataset "
                                                      "fashion-mnist --model fashion-fast")),
                 qPrintable(text.out));
        // The batch the rate was measured at goes with it (a rate for batch 16 is not one for the
        // recipe's batch).
        QVERIFY2(text.out.contains(QStringLiteral(" --towers 1 --batch-size 16 --lr ")),
                 qPrintable(text.out));
        // From a run's newest checkpoint: its model, and the command to train from it.
        const QString base = path(QStringLiteral("runs/lr-base"));
        const CliRun trained = run(small(base) + QStringList{"--steps", "2"});
        QVERIFY2(trained.exitCode == 0, qPrintable(trained.err));
        const CliRun tuned = run({QStringLiteral("lr-find"), QStringLiteral("--dataset"),
                                  QStringLiteral("fashion-mnist"), QStringLiteral("--batch-size"),
                                  QStringLiteral("16"), QStringLiteral("--steps"),
                                  QStringLiteral("10"), QStringLiteral("--init-from"), base});
        QVERIFY2(tuned.exitCode == 0, qPrintable(tuned.err));
        QVERIFY2(tuned.out.contains(QStringLiteral(" --init-from ") + base +
                                    QStringLiteral("/checkpoints/ckpt-00000002.safetensors --lr ")),
                 qPrintable(tuned.out));
        // --precision as train's: said in the header and the command to train with, refused
        // with the reason where the CPU has no bf16 (held to AVX2 here).
        const QStringList bf16{QStringLiteral("lr-find"),
                               QStringLiteral("--dataset"),
                               QStringLiteral("fashion-mnist"),
                               QStringLiteral("--batch-size"),
                               QStringLiteral("16"),
                               QStringLiteral("--steps"),
                               QStringLiteral("10"),
                               QStringLiteral("--precision"),
                               QStringLiteral("bf16")};
        const CliRun held = run(bf16, 120000, {}, {QStringLiteral("ONEDNN_MAX_CPU_ISA=AVX2")});
        QCOMPARE(held.exitCode, 1);
        QVERIFY2(held.err.contains(QStringLiteral("towers-cli lr-find: error: --precision bf16 "
                                                  "needs a CPU with AVX512_BF16 or AMX")),
                 qPrintable(held.err));
        QVERIFY2(held.out.isEmpty(), qPrintable(held.out));
        QCOMPARE(
            run({QStringLiteral("lr-find"), QStringLiteral("--precision"), QStringLiteral("fp8")})
                .exitCode,
            2);
        if (engine::cpu::bf16Unavailable().empty()) {
            const CliRun mixed = run(bf16);
            QVERIFY2(mixed.exitCode == 0, qPrintable(mixed.err));
            QVERIFY2(mixed.out.contains(QStringLiteral("1 tower x 16, bf16, ")) &&
                         mixed.out.contains(QStringLiteral(" --precision bf16 --lr ")),
                     qPrintable(mixed.out));
        }
        QCOMPARE(run({QStringLiteral("lr-find"), QStringLiteral("--min-lr"), QStringLiteral("1"),
                      QStringLiteral("--max-lr"), QStringLiteral("0.5")})
                     .exitCode,
                 2);
        QCOMPARE(run({QStringLiteral("lr-find"), QStringLiteral("--steps"), QStringLiteral("3")})
                     .exitCode,
                 2);
    }

    // --checkpoint may name a run folder (or its checkpoints/ folder, or a run's name in the runs
    // folder): eval, classify and export take its newest checkpoint and say which on stderr; the
    // newest that reads whole, where the newest is damaged, saying so.
    void checkpointOfARunFolder()
    {
        const QString dir = path(QStringLiteral("runs/newest"));
        const CliRun r = run(small(dir) + QStringList{"--steps", "4", "--checkpoint-every", "2"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        const QString newest = dir + QStringLiteral("/checkpoints/ckpt-00000004.safetensors");
        const auto evalOf = [&](const QString& given) {
            return run({QStringLiteral("eval"), QStringLiteral("--checkpoint"), given,
                        QStringLiteral("--json")});
        };
        const CliRun byFile = evalOf(newest);
        QVERIFY2(byFile.exitCode == 0, qPrintable(byFile.err));
        const QByteArray expected = byFile.out.toUtf8();
        // The run folder, its checkpoints/ folder, its name ($TOWERS_RUNS is the test's runs/).
        for (const QString& given :
             {dir, dir + QStringLiteral("/checkpoints"), QStringLiteral("newest")}) {
            const CliRun e = evalOf(given);
            QVERIFY2(e.exitCode == 0, qPrintable(given + ": " + e.err));
            QCOMPARE(e.out.toUtf8(), expected); // the same checkpoint, so the same JSON
            QVERIFY2(e.err.contains(QStringLiteral("the newest checkpoint of ")) &&
                         e.err.contains(QStringLiteral("step 4, ") + newest),
                     qPrintable(e.err));
        }
        // The newest damaged (cut short, as by a full disk when something else wrote it): passed
        // over for the one before, by name too; every one damaged: exit 1, naming each.
        {
            QFile f(newest);
            QVERIFY(f.resize(f.size() - 100));
        }
        const QString before = dir + QStringLiteral("/checkpoints/ckpt-00000002.safetensors");
        const CliRun passed = evalOf(QStringLiteral("newest"));
        QVERIFY2(passed.exitCode == 0, qPrintable(passed.err));
        QVERIFY2(
            passed.err.contains(QStringLiteral("towers-cli eval: note: passing over the "
                                               "checkpoint at step 4, which does not read: ")) &&
                passed.err.contains(newest + QStringLiteral("': tensor ")) &&
                passed.err.contains(QStringLiteral("the file is truncated")),
            qPrintable(passed.err));
        QVERIFY2(passed.err.contains(QStringLiteral(" that reads: step 2, ") + before),
                 qPrintable(passed.err));
        QCOMPARE(QJsonDocument::fromJson(passed.out.toUtf8())
                     .object()
                     .value(QStringLiteral("checkpoint"))
                     .toString(),
                 before);
        {
            QFile f(before);
            QVERIFY(f.resize(f.size() - 100));
        }
        const CliRun noneReads = evalOf(dir);
        QCOMPARE(noneReads.exitCode, 1);
        QVERIFY2(noneReads.err.contains(QStringLiteral("at step 2, which does not read")) &&
                     noneReads.err.contains(QStringLiteral("--checkpoint: none of the 2 "
                                                           "checkpoints of the run ")),
                 qPrintable(noneReads.err));
        // A folder that is no run, and a run without a checkpoint: exit 1, saying so.
        const CliRun notRun = evalOf(path(QStringLiteral("runs")));
        QCOMPARE(notRun.exitCode, 1);
        QVERIFY2(notRun.err.contains(QStringLiteral("nor a run folder (it has no checkpoints/)")),
                 qPrintable(notRun.err));
        QVERIFY(QDir().mkpath(path(QStringLiteral("runs/empty/checkpoints"))));
        const CliRun empty = evalOf(path(QStringLiteral("runs/empty")));
        QCOMPARE(empty.exitCode, 1);
        QVERIFY2(empty.err.contains(QStringLiteral("has no checkpoint yet")),
                 qPrintable(empty.err));
        const CliRun none = run({QStringLiteral("classify"), path(QStringLiteral("x.png"))});
        QCOMPARE(none.exitCode, 2);
        QVERIFY2(none.err.contains(QStringLiteral("--checkpoint FILE is required")),
                 qPrintable(none.err));
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
                const QJsonArray split = e.value(QStringLiteral("tower_times")).toArray();
                QCOMPARE(split.size(), 2);
                for (const auto& tower : split)
                    for (const char* part : {"compute_ms", "comm_ms", "data_ms", "update_ms"})
                        QVERIFY2(tower.toObject().value(QLatin1String(part)).toDouble(-1) >= 0,
                                 part);
                QVERIFY(e.value(QStringLiteral("examples_per_sec")).toDouble() > 0);
            }
            if (kind == QLatin1String("eval"))
                QCOMPARE(e.value(QStringLiteral("examples")).toInt(), 64);
        }
        QCOMPARE(steps, 3);
        QCOMPARE(evals, 2);
        QVERIFY(checkpoints >= 1);
        QCOMPARE(r.events.last().value(QStringLiteral("event")).toString(),
                 QStringLiteral("finished"));
        // --help's --json line names every event a run prints (the end's included).
        const CliRun help = run({QStringLiteral("train"), QStringLiteral("--help")});
        const QString helpText = help.out.simplified();
        const qsizetype json = helpText.indexOf(QStringLiteral("--json"));
        QVERIFY2(json >= 0, qPrintable(helpText));
        const QString jsonHelp = helpText.mid(json, 160);
        for (const auto& e : r.events) {
            const QString kind = e.value(QStringLiteral("event")).toString();
            QVERIFY2(jsonHelp.contains(QRegularExpression(QStringLiteral("\\b%1\\b").arg(kind))),
                     qPrintable(kind + QStringLiteral(" not in: ") + jsonHelp));
        }
        for (const char* f : {"config.json", "metrics.jsonl", "eval.jsonl",
                              "checkpoints/ckpt-00000006.safetensors"})
            QVERIFY2(QFile::exists(dir + QLatin1Char('/') + QLatin1String(f)), f);
        const auto c = checkpointAt(dir, 6);
        QCOMPARE(QString::fromStdString(c.info.model), QStringLiteral("fashion-fast"));
        QCOMPARE(QString::fromStdString(c.info.dataset), QStringLiteral("fashion-mnist"));
        QCOMPARE(c.info.classNames.size(), std::size_t(10));
        QVERIFY(!c.info.preprocessing.empty());

        const QString ckpt = dir + QStringLiteral("/checkpoints/ckpt-00000006.safetensors");
        const CliRun e = run({QStringLiteral("eval"), QStringLiteral("--checkpoint"), ckpt,
                              QStringLiteral("--json")});
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
        const CliRun c3 =
            run({QStringLiteral("classify"), QStringLiteral("--checkpoint"), ckpt, png,
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

        const CliRun bad = run(
            {QStringLiteral("classify"), QStringLiteral("--checkpoint"), ckpt, path("none.png")});
        QCOMPARE(bad.exitCode, 1);
        QVERIFY2(bad.err.contains(QStringLiteral("none.png")), qPrintable(bad.err));
        const CliRun notCkpt = run({QStringLiteral("eval"), QStringLiteral("--checkpoint"), png});
        QCOMPARE(notCkpt.exitCode, 1);
        QVERIFY2(notCkpt.err.contains(QStringLiteral("shirt.png")), qPrintable(notCkpt.err));
    }

    // A run refused once its data is known (a global batch larger than the training set) says
    // which batch size fits and leaves no folder behind where it made one; a folder that was there
    // stays.
    // srun -n 2 without --mpi=pmix (faked by Slurm's variables, no MPI here): each task would
    // train alone in the same folder. Every task refuses (exit 2) with the srun option that
    // works, marked with its rank as a run's other messages are, and no folder is made.
    void srunWithoutPmiIsRefused()
    {
        const QString dir = path(QStringLiteral("runs/srun-no-pmi"));
        for (const int rank : {0, 1}) {
            const CliRun r = run(
                small(dir) + QStringList{"--steps", "2"}, 120000, {},
                {QStringLiteral("SLURM_STEP_NUM_TASKS=2"), QStringLiteral("SLURM_NTASKS=2"),
                 QStringLiteral("SLURM_STEP_ID=0"), QStringLiteral("SLURM_PROCID=%1").arg(rank)});
            QVERIFY2(r.exitCode == 2, qPrintable(r.err));
            QVERIFY2(r.err.startsWith(rank == 0 ? QStringLiteral("towers-cli train: error: srun "
                                                                 "started 2 tasks")
                                                : QStringLiteral("[rank 1] towers-cli train: "
                                                                 "error: srun started 2 tasks")),
                     qPrintable(r.err));
            QVERIFY2(r.err.contains(QStringLiteral("srun --mpi=pmix")), qPrintable(r.err));
            QVERIFY(r.out.isEmpty());
            QVERIFY(!QFileInfo::exists(dir));
        }
        // A batch script's own shell (SLURM_NTASKS, SLURM_PROCID, no step of srun's) trains.
        const CliRun batch =
            run(small(dir) + QStringList{"--steps", "1"}, 120000, {},
                {QStringLiteral("SLURM_NTASKS=2"), QStringLiteral("SLURM_PROCID=0")});
        QVERIFY2(batch.exitCode == 0, qPrintable(batch.err));
    }

    // lr-find under a launcher (faked: Open MPI's variables, which lr-find reads without starting
    // MPI) would run the whole test on every process: refused (exit 2), said once, by rank 0,
    // with the one-process command for the run's towers; the other ranks leave quietly.
    void lrFindUnderALauncherIsRefused()
    {
        const QStringList args{QStringLiteral("lr-find"),
                               QStringLiteral("--dataset"),
                               QStringLiteral("fashion-mnist"),
                               QStringLiteral("--towers"),
                               QStringLiteral("3"),
                               QStringLiteral("--steps"),
                               QStringLiteral("10")};
        for (const int rank : {0, 1}) {
            const CliRun r = run(args, 120000, {},
                                 {QStringLiteral("OMPI_COMM_WORLD_SIZE=2"),
                                  QStringLiteral("OMPI_COMM_WORLD_RANK=%1").arg(rank)});
            // Rank 0 refuses (2, what the launcher reports); the others leave quietly with 0, so
            // that the launcher does not kill rank 0 before it has said why.
            QCOMPARE(r.exitCode, rank == 0 ? 2 : 0);
            QVERIFY2(r.out.isEmpty(), qPrintable(r.out));
            if (rank == 1) {
                QVERIFY2(r.err.isEmpty(), qPrintable(r.err));
                continue;
            }
            QVERIFY2(r.err.startsWith(QStringLiteral("towers-cli lr-find: error: the range test "
                                                     "runs in one process, but Open MPI started "
                                                     "2")),
                     qPrintable(r.err));
            QVERIFY2(r.err.contains(QStringLiteral("towers-cli lr-find --towers 6 ...")),
                     qPrintable(r.err));
        }
    }

    // With --json, a run that cannot start (its folder held by another trainer) ends with a
    // "failed" event giving the reason, as one that fails while training does.
    void aRunThatCannotStartEndsFailedInJson()
    {
        const QString dir = path(QStringLiteral("runs/held"));
        const engine::RunLock held = engine::RunLock::acquire(dir.toStdString(), "a test");
        const CliRun r = run(small(dir) + QStringList{"--steps", "2"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(!r.events.isEmpty(), qPrintable(r.out + r.err));
        const QJsonObject end = r.events.last();
        QCOMPARE(end.value(QStringLiteral("event")).toString(), QStringLiteral("failed"));
        QVERIFY2(end.value(QStringLiteral("message")).toString().contains(QStringLiteral("a test")),
                 qPrintable(r.out));
    }

    void refusedRunLeavesNoFolder()
    {
        const QString dir = path(QStringLiteral("runs/too-big"));
        QStringList args = small(dir);
        args[args.indexOf(QStringLiteral("--batch-size")) + 1] = QStringLiteral("200");
        const CliRun r = run(args);
        QVERIFY2(r.exitCode == 2, qPrintable(r.err)); // bad usage
        QVERIFY2(r.err.contains(QStringLiteral("a batch size of at most 128 per tower fits")),
                 qPrintable(r.err));
        QVERIFY(!QFileInfo::exists(dir));

        QVERIFY(QDir().mkpath(dir));
        QCOMPARE(run(args).exitCode, 2);
        QVERIFY(QFileInfo(dir).isDir());
    }

    // A run trained on a dataset in a folder named by --data-dir is evaluated on that folder's test
    // set without naming it again, even where the default folders hold the same dataset; a copy of
    // the checkpoint outside the run looks only along the search path.
    void evalFindsTheRunsDataFolder()
    {
        const QString elsewhere = path(QStringLiteral("elsewhere"));
        test::writeIdxDataset((elsewhere + QStringLiteral("/fashion-mnist")).toStdString(), 64, 48,
                              28, 28, true, 11);
        const QString dir = path(QStringLiteral("runs/elsewhere"));
        const CliRun r = run(
            small(dir) + QStringList{"--steps", "2", "--eval-every", "0", "--data-dir", elsewhere});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        const QString ckpt = dir + QStringLiteral("/checkpoints/ckpt-00000002.safetensors");
        const CliRun e = run({QStringLiteral("eval"), QStringLiteral("--checkpoint"), dir,
                              QStringLiteral("--json")});
        QVERIFY2(e.exitCode == 0, qPrintable(e.err));
        const QJsonObject j = QJsonDocument::fromJson(e.out.toUtf8()).object();
        QCOMPARE(j.value(QStringLiteral("examples")).toInt(), 48);
        QCOMPARE(QDir(j.value(QStringLiteral("data_folder")).toString()).canonicalPath(),
                 QDir(elsewhere + QStringLiteral("/fashion-mnist")).canonicalPath());
        QVERIFY(!j.contains(QStringLiteral("layers")));
        // --set train: the 64 training images, as the network saw them undistorted.
        const CliRun t =
            run({QStringLiteral("eval"), QStringLiteral("--checkpoint"), dir,
                 QStringLiteral("--set"), QStringLiteral("train"), QStringLiteral("--json")});
        QVERIFY2(t.exitCode == 0, qPrintable(t.err));
        const QJsonObject tj = QJsonDocument::fromJson(t.out.toUtf8()).object();
        QCOMPARE(tj.value(QStringLiteral("examples")).toInt(), 64);
        QCOMPARE(tj.value(QStringLiteral("set")).toString(), QStringLiteral("train"));
        // --layers: every layer of the model's table over the 48 test images, dead channels
        // listed (tst_layer_outputs checks the counts).
        const CliRun l = run({QStringLiteral("eval"), QStringLiteral("--checkpoint"), dir,
                              QStringLiteral("--layers"), QStringLiteral("--json")});
        QVERIFY2(l.exitCode == 0, qPrintable(l.err));
        const QJsonArray layers = QJsonDocument::fromJson(l.out.toUtf8())
                                      .object()
                                      .value(QStringLiteral("layers"))
                                      .toArray();
        const auto table = engine::createModel(QJsonDocument::fromJson(l.out.toUtf8())
                                                   .object()
                                                   .value(QStringLiteral("model"))
                                                   .toString()
                                                   .toStdString(),
                                               1)
                               ->layerTable();
        QCOMPARE(qsizetype(layers.size()), qsizetype(table.size()));
        for (qsizetype i = 0; i < layers.size(); ++i) {
            const QJsonObject layer = layers[i].toObject();
            QCOMPARE(layer.value(QStringLiteral("name")).toString().toStdString(),
                     table[std::size_t(i)].name);
            QCOMPARE(layer.value(QStringLiteral("images")).toInt(), 48);
            QVERIFY(layer.value(QStringLiteral("channels")).toInt() > 0);
            QVERIFY(layer.value(QStringLiteral("dead_channels")).isArray());
        }
        // --mistakes: the surest wrong answers, the surest first.
        const CliRun m =
            run({QStringLiteral("eval"), QStringLiteral("--checkpoint"), dir,
                 QStringLiteral("--mistakes"), QStringLiteral("5"), QStringLiteral("--json")});
        QVERIFY2(m.exitCode == 0, qPrintable(m.err));
        const QJsonObject mj = QJsonDocument::fromJson(m.out.toUtf8()).object();
        const QJsonArray wrong = mj.value(QStringLiteral("mistakes")).toArray();
        QCOMPARE(wrong.size(),
                 std::min<qsizetype>(5, 48 - mj.value(QStringLiteral("correct")).toInt()));
        QVERIFY(!wrong.isEmpty()); // two steps of training on random images
        double before = 2;
        for (const QJsonValue& w : wrong) {
            const QJsonObject o = w.toObject();
            QVERIFY(o.value(QStringLiteral("truth")) != o.value(QStringLiteral("predicted")));
            const double probability = o.value(QStringLiteral("probability")).toDouble();
            QVERIFY(probability > 0 && probability <= before);
            before = probability;
            QVERIFY(o.value(QStringLiteral("index")).toInt() < 48);
        }
        // A bad option is named alone: the run given for the checkpoint is not resolved first.
        const CliRun bad = run({QStringLiteral("eval"), QStringLiteral("--checkpoint"), dir,
                                QStringLiteral("--mistakes"), QStringLiteral("0")});
        QCOMPARE(bad.exitCode, 2);
        QVERIFY2(bad.err.contains(QStringLiteral("--mistakes")) &&
                     !bad.err.contains(QStringLiteral("checkpoint of")),
                 qPrintable(bad.err));
        const CliRun text = run({QStringLiteral("eval"), QStringLiteral("--checkpoint"), dir,
                                 QStringLiteral("--layers")});
        QVERIFY2(text.out.contains(QStringLiteral("layers over the 48 test images")),
                 qPrintable(text.out));

        const QString copy = path(QStringLiteral("copied.safetensors"));
        QVERIFY(QFile::copy(ckpt, copy));
        const CliRun c = run({QStringLiteral("eval"), QStringLiteral("--checkpoint"), copy,
                              QStringLiteral("--json")});
        QVERIFY2(c.exitCode == 0, qPrintable(c.err));
        QVERIFY(QJsonDocument::fromJson(c.out.toUtf8()).object().value("examples").toInt() != 48);
    }

    // 4 steps, then --resume to 8, equals 8 steps in one go, bitwise (the loader seeks to step 4).
    // A constant learning rate: one-cycle's depends on the run's length, which the resume extends.
    void resumeEqualsUninterrupted()
    {
        const QString a = path(QStringLiteral("runs/whole")),
                      b = path(QStringLiteral("runs/halves"));
        const QStringList constant{QStringLiteral("--lr-schedule"), QStringLiteral("constant"),
                                   QStringLiteral("--lr"), QStringLiteral("0.05")};
        QCOMPARE(run(small(a) + constant + QStringList{"--steps", "8"}).exitCode, 0);
        // CUDA graphs change no result (nor anything on CPU towers, which have none); a resume
        // without the option keeps the run's own setting.
        QCOMPARE(
            run(small(b) + constant + QStringList{"--steps", "4", "--cuda-graphs", "off"}).exitCode,
            0);
        QVERIFY(readFile(b + QStringLiteral("/config.json")).contains("\"cudaGraphs\": false"));
        {
            // As a GPU run with TF32 and measured algorithms has them, resumed on the CPU below
            // (where they do nothing): only the options themselves are refused on the CPU.
            QByteArray config = readFile(b + QStringLiteral("/config.json"));
            QVERIFY(config.contains("\"allowTf32\": false"));
            QVERIFY(config.contains("\"cudnnBenchmark\": false"));
            config.replace("\"allowTf32\": false", "\"allowTf32\": true");
            config.replace("\"cudnnBenchmark\": false", "\"cudnnBenchmark\": true");
            QFile f(b + QStringLiteral("/config.json"));
            QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
            QCOMPARE(f.write(config), qint64(config.size()));
        }
        // A run-defining option with another value is refused, naming both values...
        const CliRun changed =
            run(small(b) + QStringList{"--lr", "0.5", "--steps", "8", "--resume"});
        QCOMPARE(changed.exitCode, 2);
        QVERIFY2(changed.err.contains(QStringLiteral("--lr cannot change")) &&
                     changed.err.contains(QStringLiteral("0.05")) &&
                     changed.err.contains(QStringLiteral("0.5")),
                 qPrintable(changed.err));
        // ...the same command line plus --resume (a requeued job script) is accepted.
        const CliRun r = run(small(b) + constant + QStringList{"--steps", "8", "--resume"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY(readFile(b + QStringLiteral("/config.json")).contains("\"cudaGraphs\": false"));
        QVERIFY(!logged(r, QStringLiteral("steps: "))); // host towers: nothing to capture
        const auto x = checkpointAt(a, 8), y = checkpointAt(b, 8);
        QCOMPARE(x.weights.size(), y.weights.size());
        for (std::size_t i = 0; i < x.weights.size(); ++i) {
            const auto& [name, t] = x.weights[i];
            QCOMPARE(y.weights[i].first, name);
            QVERIFY2(std::memcmp(t.raw(), y.weights[i].second.raw(), t.bytes()) == 0, name.c_str());
        }
        QCOMPARE(x.optimizer.size(), y.optimizer.size());
        for (std::size_t i = 0; i < x.optimizer.size(); ++i)
            QVERIFY(std::memcmp(x.optimizer[i].second.raw(), y.optimizer[i].second.raw(),
                                x.optimizer[i].second.bytes()) == 0);
    }

    // --precision bf16 where oneDNN cannot run it (held to AVX-512 without bf16): refused before
    // anything is made (no run folder, named or default), exit 1, with the reason and the way out.
    void bf16RefusedWhereItCannotRun()
    {
        const QStringList noBf16{QStringLiteral("ONEDNN_MAX_CPU_ISA=AVX512_CORE"),
                                 QStringLiteral("TOWERS_RUNS=") + path(QStringLiteral("no-bf16"))};
        const QString dir = path(QStringLiteral("runs/no-bf16"));
        for (const QStringList& args :
             {small(dir) + QStringList{"--precision", "bf16", "--steps", "2"},
              QStringList{"train", "--dataset", "fashion-mnist", "--precision", "bf16", "--steps",
                          "2"}}) {
            const CliRun r = run(args, 120000, {}, noBf16);
            QCOMPARE(r.exitCode, 1);
            QVERIFY2(r.err.startsWith(QStringLiteral("towers-cli train: error: --precision bf16 "
                                                     "needs a CPU with AVX512_BF16 or AMX")) &&
                         r.err.contains(QStringLiteral("ONEDNN_MAX_CPU_ISA")) &&
                         r.err.contains(QStringLiteral("use --precision fp32")),
                     qPrintable(r.err));
            QVERIFY2(!r.out.contains(QStringLiteral("run folder")), qPrintable(r.out));
        }
        QVERIFY(!QFileInfo::exists(dir));
        QVERIFY(!QFileInfo::exists(path(QStringLiteral("no-bf16"))));
    }

    // A real bf16 run (where the CPU has AVX512_BF16 or AMX): its configuration, log and
    // checkpoints say bf16, the checkpoints are float32. It resumes in fp32 (logged), and where
    // bf16 cannot run the resume is refused, changing nothing, until --precision fp32 is given.
    void bf16RunAndResumeInFp32()
    {
        if (const std::string why = engine::cpu::bf16Unavailable(); !why.empty())
            QSKIP(why.c_str());
        const QString dir = path(QStringLiteral("runs/bf16"));
        const CliRun r = run(small(dir) + QStringList{"--precision", "bf16", "--steps", "4"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        QVERIFY2(readFile(dir + QStringLiteral("/config.json")).contains("\"precision\": \"bf16\""),
                 "config.json");
        QVERIFY2(logged(r, QStringLiteral("bf16 convolutions and matrix products")),
                 qPrintable(r.out));
        const auto c = checkpointAt(dir, 4);
        QVERIFY(c.info.config.find(R"("precision": "bf16")") != std::string::npos);
        for (const auto& [name, t] : c.weights)
            QVERIFY2(t.dtype() != engine::DType::BFloat16, name.c_str());

        const QStringList noBf16{QStringLiteral("ONEDNN_MAX_CPU_ISA=AVX512_CORE")};
        const QStringList resume{
            QStringLiteral("train"),   QStringLiteral("--resume"), QStringLiteral("--run-dir"), dir,
            QStringLiteral("--steps"), QStringLiteral("6"),        QStringLiteral("--json")};
        const auto before = filesUnder(dir);
        const CliRun refused = run(resume, 120000, {}, noBf16);
        QCOMPARE(refused.exitCode, 1);
        QVERIFY2(refused.err.contains(QStringLiteral("use --precision fp32")),
                 qPrintable(refused.err));
        QCOMPARE(filesUnder(dir), before);

        const CliRun fp32 = run(resume + QStringList{"--precision", "fp32"}, 120000, {}, noBf16);
        QVERIFY2(fp32.exitCode == 0, qPrintable(fp32.err + fp32.out));
        QVERIFY2(
            logged(fp32, QStringLiteral("precision: fp32 from step 4 on (the run so far: bf16)")),
            qPrintable(fp32.out));
        QVERIFY(!logged(fp32, QStringLiteral("bf16 convolutions")));
        QVERIFY(readFile(dir + QStringLiteral("/config.json")).contains("\"precision\": \"fp32\""));
        QCOMPARE(checkpointAt(dir, 6).info.step, std::int64_t(6));
    }

    void divergenceStopsCleanly()
    {
        const QString dir = path(QStringLiteral("runs/diverge"));
        const CliRun r = run(
            small(dir) + QStringList{"--steps", "50", "--lr", "1e5", "--checkpoint-every", "1"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(QStringLiteral("diverged")), qPrintable(r.err));
        // Whatever checkpoints were written hold the last good (finite) state and load.
        for (const auto& f : fs::directory_iterator(fs::path(dir.toStdString()) / "checkpoints")) {
            const auto c = engine::readCheckpoint(f.path());
            for (const auto& [name, t] : c.weights)
                if (t.dtype() == engine::DType::Float32)
                    for (std::int64_t i = 0; i < t.numel(); ++i)
                        QVERIFY2(std::isfinite(t.at(i)), name.c_str());
        }
    }

    void interruptWritesCheckpoint()
    {
        const QString dir = path(QStringLiteral("runs/interrupted"));
        const CliRun r =
            run(small(dir) + QStringList{"--steps", "1000000", "--checkpoint-every", "0"}, 120000,
                [](QProcess& p) {
                    // Wait for the first step's event, then Ctrl-C.
                    QByteArray seen;
                    while (!seen.contains("\"event\":\"step\"") && p.waitForReadyRead(60000))
                        seen += p.peek(1 << 20);
                    ::kill(static_cast<pid_t>(p.processId()), SIGINT);
                });
        QCOMPARE(r.exitCode, 130);
        QCOMPARE(r.events.last().value(QStringLiteral("event")).toString(),
                 QStringLiteral("stopped"));
        const int step = r.events.last().value(QStringLiteral("step")).toInt();
        QVERIFY(step >= 2);
        QCOMPARE(checkpointAt(dir, step).info.step, std::int64_t(step));
    }

    // Waits in `p` for a --json event line containing `needle`.
    static bool waitForEvent(QProcess& p, const QByteArray& needle, int ms = 60000)
    {
        QByteArray seen;
        QElapsedTimer t;
        t.start();
        while (!seen.contains(needle) && t.elapsed() < ms) {
            if (!p.waitForReadyRead(1000) && p.state() != QProcess::Running) return false;
            seen = p.peek(1 << 24);
        }
        return seen.contains(needle);
    }

    static std::vector<std::int64_t> loggedSteps(const QString& runDir)
    {
        std::vector<std::int64_t> steps;
        QFile f(runDir + QStringLiteral("/metrics.jsonl"));
        if (!f.open(QIODevice::ReadOnly)) return steps;
        for (const QByteArray& line : f.readAll().split('\n'))
            if (!line.isEmpty())
                steps.push_back(QJsonDocument::fromJson(line)
                                    .object()
                                    .value(QStringLiteral("step"))
                                    .toInteger());
        return steps;
    }

    static QMap<QString, QByteArray> filesUnder(const QString& dir)
    {
        QMap<QString, QByteArray> out;
        QDirIterator it(dir, QDir::Files | QDir::Hidden, QDirIterator::Subdirectories);
        while (it.hasNext()) {
            const QString f = it.next();
            if (f.endsWith(QLatin1String("/towers.lock"))) continue;
            QFile file(f);
            if (file.open(QIODevice::ReadOnly))
                out.insert(QDir(dir).relativeFilePath(f), file.readAll());
        }
        return out;
    }

    // A second trainer on a folder in use is refused (a resume and a new run alike), naming the
    // folder and the first one's PID; the first finishes with its run intact (every step logged
    // once).
    void secondTrainerIsRefused()
    {
        const QString dir = path(QStringLiteral("runs/owned"));
        QString busyResume, busyNew;
        int resumeCode = -2, newCode = -2;
        qint64 firstPid = 0;
        const CliRun first =
            run(small(dir) + QStringList{"--steps", "1000000", "--checkpoint-every", "3"}, 120000,
                [&](QProcess& p) {
                    firstPid = p.processId();
                    QVERIFY(waitForEvent(p, "\"event\":\"checkpoint\""));
                    const CliRun r = run({QStringLiteral("train"), QStringLiteral("--resume"),
                                          QStringLiteral("--run-dir"), dir},
                                         60000);
                    resumeCode = r.exitCode;
                    busyResume = r.err;
                    const CliRun n = run(small(dir) + QStringList{"--steps", "3"}, 60000);
                    newCode = n.exitCode;
                    busyNew = n.err;
                    ::kill(static_cast<pid_t>(p.processId()), SIGTERM);
                });
        QCOMPARE(resumeCode, 1);
        QCOMPARE(newCode, 1);
        for (const QString& err : {busyResume, busyNew}) {
            QVERIFY2(err.contains(dir) &&
                         err.contains(QStringLiteral("in use by process %1").arg(firstPid)),
                     qPrintable(err));
            QVERIFY2(err.contains(QStringLiteral("towers-cli")), qPrintable(err));
        }
        QCOMPARE(first.exitCode, 143); // 128 + SIGTERM
        QCOMPARE(first.events.last().value(QStringLiteral("event")).toString(),
                 QStringLiteral("stopped"));
        const int step = first.events.last().value(QStringLiteral("step")).toInt();
        QCOMPARE(checkpointAt(dir, step).info.step, std::int64_t(step));
        const auto steps = loggedSteps(dir);
        QVERIFY(!steps.empty());
        for (std::size_t i = 1; i < steps.size(); ++i)
            QVERIFY2(steps[i] > steps[i - 1], "a step logged twice");
    }

    // Two runs started in the same second with default folders get two folders.
    void sameSecondDefaultFolders()
    {
        const QStringList args{QStringLiteral("train"),
                               QStringLiteral("--dataset"),
                               QStringLiteral("fashion-mnist"),
                               QStringLiteral("--batch-size"),
                               QStringLiteral("16"),
                               QStringLiteral("--steps"),
                               QStringLiteral("2"),
                               QStringLiteral("--augment"),
                               QStringLiteral("none"),
                               QStringLiteral("--json")};
        QProcess a, b;
        for (QProcess* p : {&a, &b}) {
            p->setProgram(QStringLiteral(TOWERS_CLI));
            p->setArguments(args);
            QProcessEnvironment env = environment();
            env.insert(QStringLiteral("TOWERS_RUNS"), path(QStringLiteral("same-second")));
            p->setProcessEnvironment(env);
        }
        a.start();
        b.start();
        QVERIFY(a.waitForFinished(120000) && b.waitForFinished(120000));
        QCOMPARE(a.exitCode(), 0);
        QCOMPARE(b.exitCode(), 0);
        const QString da = jsonLines(QString::fromUtf8(a.readAllStandardOutput()))
                               .last()
                               .value(QStringLiteral("run_dir"))
                               .toString();
        const QString db = jsonLines(QString::fromUtf8(b.readAllStandardOutput()))
                               .last()
                               .value(QStringLiteral("run_dir"))
                               .toString();
        QVERIFY2(da != db, qPrintable(da));
        for (const QString& d : {da, db}) {
            QCOMPARE(loggedSteps(d), (std::vector<std::int64_t>{2}));
            QCOMPARE(checkpointAt(d, 2).info.step, std::int64_t(2));
        }
    }

    // A new run into a folder that holds one is refused and changes nothing; --overwrite moves the
    // earlier run to set-aside/ and starts.
    void existingRunSurvivesANewTrain()
    {
        const QString dir = path(QStringLiteral("runs/earlier"));
        QCOMPARE(run(small(dir) + QStringList{"--steps", "2"}).exitCode, 0);
        const auto before = filesUnder(dir);
        const CliRun again = run(small(dir) + QStringList{"--steps", "2"});
        QCOMPARE(again.exitCode, 2);
        QVERIFY2(again.err.contains(QStringLiteral("already holds a run")) &&
                     again.err.contains(QStringLiteral("--overwrite")) &&
                     again.err.contains(QStringLiteral("--resume")),
                 qPrintable(again.err));
        QCOMPARE(filesUnder(dir), before);
        const CliRun over = run(small(dir) + QStringList{"--steps", "2", "--overwrite"});
        QVERIFY2(over.exitCode == 0, qPrintable(over.err));
        const QStringList sets =
            QDir(dir + QStringLiteral("/set-aside")).entryList(QDir::Dirs | QDir::NoDotAndDotDot);
        QCOMPARE(sets.size(), 1);
        const auto aside = filesUnder(dir + QStringLiteral("/set-aside/") + sets.first());
        QCOMPARE(aside, before); // every byte of the earlier run
    }

    // --resume and --like of a run whose config.json is damaged: the run's file is at fault
    // (exit 1, naming it); of a folder that is no run: the command line is (exit 2).
    void damagedConfigIsNotAUsageError()
    {
        const QString dir = path(QStringLiteral("runs/damaged-config"));
        QCOMPARE(run(small(dir) + QStringList{"--steps", "2"}).exitCode, 0);
        const QString config = dir + QStringLiteral("/config.json");
        QVERIFY(QFile::resize(config, 100));
        const CliRun resumed = run({QStringLiteral("train"), QStringLiteral("--resume"),
                                    QStringLiteral("--run-dir"), dir});
        QCOMPARE(resumed.exitCode, 1);
        QVERIFY2(resumed.err.contains(config), qPrintable(resumed.err));
        const CliRun like = run({QStringLiteral("train"), QStringLiteral("--like"), dir,
                                 QStringLiteral("--run-dir"), path(QStringLiteral("runs/like"))});
        QCOMPARE(like.exitCode, 1);
        QVERIFY2(like.err.contains(config), qPrintable(like.err));
        QVERIFY(QDir().mkpath(path(QStringLiteral("runs/no-run"))));
        const CliRun noRun =
            run({QStringLiteral("train"), QStringLiteral("--resume"), QStringLiteral("--run-dir"),
                 path(QStringLiteral("runs/no-run"))});
        QCOMPARE(noRun.exitCode, 2);
        QVERIFY2(noRun.err.contains(QStringLiteral("not a Towers run folder")),
                 qPrintable(noRun.err));
    }

    // A resume where no checkpoint loads stops, listing each file, and deletes nothing; --restart
    // moves them to set-aside/ and starts over.
    void unloadableCheckpointsSurviveAResume()
    {
        const QString dir = path(QStringLiteral("runs/damaged"));
        QCOMPARE(run(small(dir) + QStringList{"--steps", "4", "--checkpoint-every", "2"}).exitCode,
                 0);
        for (int step : {2, 4}) {
            const QString f = dir + QStringLiteral("/checkpoints/ckpt-%1.safetensors")
                                        .arg(step, 8, 10, QLatin1Char('0'));
            QVERIFY(QFile::resize(f, 200));
        }
        const auto before = filesUnder(dir);
        const CliRun r = run({QStringLiteral("train"), QStringLiteral("--resume"),
                              QStringLiteral("--run-dir"), dir});
        QCOMPARE(r.exitCode, 1);
        for (const char* f :
             {"ckpt-00000002.safetensors", "ckpt-00000004.safetensors", "--restart"})
            QVERIFY2(r.err.contains(QLatin1String(f)), qPrintable(r.err));
        QVERIFY2(!r.out.contains(QStringLiteral("starting from step 0")), qPrintable(r.out));
        QCOMPARE(filesUnder(dir), before);
        const CliRun restart = run({QStringLiteral("train"), QStringLiteral("--resume"),
                                    QStringLiteral("--restart"), QStringLiteral("--run-dir"), dir});
        QVERIFY2(restart.exitCode == 0, qPrintable(restart.err));
        const QStringList sets =
            QDir(dir + QStringLiteral("/set-aside")).entryList(QDir::Dirs | QDir::NoDotAndDotDot);
        QCOMPARE(sets.size(), 1);
        QCOMPARE(filesUnder(dir + QStringLiteral("/set-aside/") + sets.first()), before);
        QCOMPARE(checkpointAt(dir, 4).info.step, std::int64_t(4));
    }

    // SIGTERM and SIGHUP stop like Ctrl-C: a checkpoint, and 128 + the signal's number.
    void signalsStopWithTheirCode_data()
    {
        QTest::addColumn<int>("signal");
        QTest::newRow("SIGTERM") << int(SIGTERM);
        QTest::newRow("SIGHUP") << int(SIGHUP);
    }
    void signalsStopWithTheirCode()
    {
        QFETCH(int, signal);
        const QString dir = path(QStringLiteral("runs/signal-%1").arg(signal));
        const CliRun r =
            run(small(dir) + QStringList{"--steps", "1000000", "--checkpoint-every", "0"}, 120000,
                [signal](QProcess& p) {
                    QVERIFY(waitForEvent(p, "\"event\":\"step\""));
                    ::kill(static_cast<pid_t>(p.processId()), signal);
                });
        QCOMPARE(r.exitCode, 128 + signal);
        QCOMPARE(r.events.last().value(QStringLiteral("event")).toString(),
                 QStringLiteral("stopped"));
        const int step = r.events.last().value(QStringLiteral("step")).toInt();
        QCOMPARE(checkpointAt(dir, step).info.step, std::int64_t(step));
    }

    // A signal ignored when towers-cli starts stays ignored: under nohup a SIGHUP (the terminal
    // closing) leaves the run training, and SIGTERM still stops it with a checkpoint.
    void nohupKeepsTraining()
    {
        const QString dir = path(QStringLiteral("runs/nohup"));
        QProcess p;
        p.setProgram(QStringLiteral("nohup"));
        p.setArguments(QStringList{QStringLiteral(TOWERS_CLI)} + small(dir) +
                       QStringList{"--steps", "1000000", "--checkpoint-every", "0"});
        p.setProcessEnvironment(environment());
        p.start();
        QVERIFY(p.waitForStarted(10000));
        QVERIFY(waitForEvent(p, "\"event\":\"step\""));
        const pid_t pid = static_cast<pid_t>(p.processId()); // nohup runs towers-cli in its place
        ::kill(pid, SIGHUP);
        const int seen = int(p.peek(1 << 24).count("\"event\":\"step\""));
        QElapsedTimer t;
        t.start();
        while (int(p.peek(1 << 24).count("\"event\":\"step\"")) < seen + 2 && t.elapsed() < 60000)
            QVERIFY2(p.waitForReadyRead(1000) || p.state() == QProcess::Running,
                     "towers-cli stopped after a SIGHUP it was started ignoring");
        QCOMPARE(p.state(), QProcess::Running);
        ::kill(pid, SIGTERM);
        QVERIFY(p.waitForFinished(120000));
        QCOMPARE(p.exitCode(), 128 + SIGTERM);
        const auto events = jsonLines(QString::fromUtf8(p.readAllStandardOutput()));
        QCOMPARE(events.last().value(QStringLiteral("event")).toString(),
                 QStringLiteral("stopped"));
        const int step = events.last().value(QStringLiteral("step")).toInt();
        QCOMPARE(checkpointAt(dir, step).info.step, std::int64_t(step));
    }

    // A Ctrl-C the moment the run folder appears (its lock taken, while the session still starts:
    // the towers being built) stops the run as one later does: exit 130, the folder a listed run
    // with its configuration and a checkpoint, not a lock and nothing else. With the handlers set
    // only once the session had started, SIGINT killed the process there.
    void aSignalWhileStartingStopsCleanly()
    {
        const QString dir = path(QStringLiteral("runs/early-signal"));
        QProcess p;
        p.setProgram(QStringLiteral(TOWERS_CLI));
        p.setArguments(small(dir) + QStringList{"--steps", "1000000", "--checkpoint-every", "0"});
        p.setProcessEnvironment(environment());
        test::withDefaultSignals(p);
        p.start();
        QVERIFY(p.waitForStarted(10000));
        const QString lock = dir + QStringLiteral("/towers.lock");
        QElapsedTimer t;
        t.start();
        while (!QFileInfo::exists(lock) && p.state() == QProcess::Running && t.elapsed() < 60000)
            QThread::usleep(200);
        QVERIFY2(QFileInfo::exists(lock), "the run folder's lock never appeared");
        ::kill(static_cast<pid_t>(p.processId()), SIGINT);
        QVERIFY(p.waitForFinished(120000));
        QCOMPARE(p.exitStatus(), QProcess::NormalExit); // not killed by the signal
        QCOMPARE(p.exitCode(), 128 + SIGINT);
        QVERIFY(QFileInfo::exists(dir + QStringLiteral("/config.json")));
        const auto events = jsonLines(QString::fromUtf8(p.readAllStandardOutput()));
        QVERIFY(!events.isEmpty());
        QCOMPARE(events.last().value(QStringLiteral("event")).toString(),
                 QStringLiteral("stopped"));
        const int step = events.last().value(QStringLiteral("step")).toInt();
        QCOMPARE(checkpointAt(dir, step).info.step, std::int64_t(step));
    }

    // Its output's reader going away (`towers-cli train | head`) stops a run as SIGTERM does: a
    // checkpoint of the step it reached (killed by SIGPIPE, it would leave none with
    // --checkpoint-every 0), 141 = 128 + SIGPIPE, and the end on the error stream.
    void closedOutputStops()
    {
        const QString dir = path(QStringLiteral("runs/closed-output"));
        QStringList args =
            small(dir) + QStringList{"--steps", "1000000", "--checkpoint-every", "0"};
        args.removeAll(QStringLiteral("--json"));
        QProcess p;
        p.setProgram(QStringLiteral("/bin/bash"));
        // grep leaves after the second step line; the pipeline's status is towers-cli's.
        p.setArguments(QStringList{QStringLiteral("-c"),
                                   QStringLiteral("\"$0\" \"$@\" | grep -m 2 ', loss = '; "
                                                  "exit ${PIPESTATUS[0]}"),
                                   QStringLiteral(TOWERS_CLI)} +
                       args);
        p.setProcessEnvironment(environment());
        p.start();
        QVERIFY(p.waitForFinished(120000));
        const QString out = QString::fromUtf8(p.readAllStandardOutput());
        const QString err = QString::fromUtf8(p.readAllStandardError());
        QCOMPARE(p.exitCode(), 128 + SIGPIPE);
        QCOMPARE(out.count(QStringLiteral(", loss = ")), 2);
        QVERIFY2(err.contains(QStringLiteral("the output was closed")), qPrintable(err));
        const auto stopped =
            QRegularExpression(QStringLiteral("stopped at step (\\d+) of ")).match(err);
        QVERIFY2(stopped.hasMatch(), qPrintable(err));
        const int step = stopped.captured(1).toInt();
        QCOMPARE(checkpointAt(dir, step).info.step, std::int64_t(step));
        QVERIFY2(err.contains(QStringLiteral("continue with: towers-cli train --resume")),
                 qPrintable(err));
    }

    // A stop during the final evaluation ends it at once (the checkpoint is already written) and
    // exits with the signal's code; nothing of the partial evaluation is recorded.
    void stopDuringTheFinalEvaluation()
    {
        const QString data = path(QStringLiteral("big-test"));
        test::writeIdxDataset((data + QStringLiteral("/fashion-mnist")).toStdString(), 64, 40000,
                              28, 28, true, 5);
        const QString dir = path(QStringLiteral("runs/final-eval"));
        QElapsedTimer sinceSignal;
        const CliRun r = run(small(dir) + QStringList{"--steps", "2", "--data-dir", data}, 120000,
                             [&](QProcess& p) {
                                 QVERIFY(waitForEvent(p, "\"event\":\"checkpoint\""));
                                 ::kill(static_cast<pid_t>(p.processId()), SIGTERM);
                                 sinceSignal.start();
                             });
        const qint64 ms = sinceSignal.elapsed();
        QCOMPARE(r.exitCode, 143);
        for (const auto& e : r.events)
            QVERIFY(e.value(QStringLiteral("event")).toString() != QLatin1String("eval"));
        QCOMPARE(r.events.last().value(QStringLiteral("event")).toString(),
                 QStringLiteral("stopped"));
        QCOMPARE(checkpointAt(dir, 2).info.step, std::int64_t(2));
        QVERIFY(!QFile::exists(dir + QStringLiteral("/eval.jsonl")) ||
                QFileInfo(dir + QStringLiteral("/eval.jsonl")).size() == 0);
        qInfo("stopped %lld ms after SIGTERM", ms);
    }

    void damagedDataFile()
    {
        const fs::path folder = path(QStringLiteral("broken/fashion-mnist")).toStdString();
        test::writeIdxDataset(folder, 64, 16, 28, 28, false, 3);
        fs::resize_file(folder / "train-images-idx3-ubyte", 1000); // truncated
        const CliRun r = run({QStringLiteral("train"), QStringLiteral("--dataset"),
                              QStringLiteral("fashion-mnist"), QStringLiteral("--data-dir"),
                              QString::fromStdString(folder.parent_path().string()),
                              QStringLiteral("--steps"), QStringLiteral("1")});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(QStringLiteral("train-images-idx3-ubyte")), qPrintable(r.err));
    }
};

QTEST_GUILESS_MAIN(TestTrainCommand)
#include "tst_train_command.moc"
