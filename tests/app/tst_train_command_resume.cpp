// towers-cli train continuing and starting from runs, as processes on the small generated dataset
// of train_command_support.h: a finished run says how to use its checkpoint, and a run starts from
// it; --like; a run extended, its schedule laid out again; a validation set and early stop (kept on
// resume); resume through the CLI equal to an uninterrupted run (the data loader seeks too); a bf16
// run resumed in fp32; a run already in the folder, a damaged config.json and checkpoints that do
// not load, none of them deleted. The rest of towers-cli train is in tst_train_command.cpp.
#include <QDir>
#include <QDirIterator>
#include <QFileInfo>
#include <QImage>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMap>
#include <QTest>

#include "engine/cpu/onednn_ops.h"
#include "engine/train/checkpoint.h"
#include "engine/train/train_config.h"
#include "train_command_support.h"

using namespace towers;

class TestTrainCommandResume : public test::TrainCommandTest
{
    Q_OBJECT

private slots:
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
                     "2 (or srun -n 2), or here with --accumulate 2 (its batches one after the "
                     "other on these towers)\n")),
                 qPrintable(r.err));
        // Accumulating its batches, one process takes that run's global batch: nothing to say.
        const QString accumulating = path(QStringLiteral("runs/like-data-4"));
        r = run({QStringLiteral("train"), QStringLiteral("--like"), first,
                 QStringLiteral("--accumulate"), QStringLiteral("2"), QStringLiteral("--run-dir"),
                 accumulating});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        QVERIFY2(!r.err.contains(QStringLiteral("note: the run trained on")), qPrintable(r.err));
        QCOMPARE(engine::TrainConfig::fromJson(
                     readFile(accumulating + QStringLiteral("/config.json")).toStdString())
                     .accumulate,
                 2);
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
};

QTEST_GUILESS_MAIN(TestTrainCommandResume)
#include "tst_train_command_resume.moc"
