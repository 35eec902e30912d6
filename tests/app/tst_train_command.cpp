// towers-cli train / eval / classify, run as processes on a small generated Fashion-MNIST-format
// dataset (train_command_support.h): usage errors (exit 2), a real run and its run folder,
// evaluation and classification of the checkpoint (a run folder or a run's name given for it),
// lr-find, refusals under a launcher and before a run starts, a damaged data file, --precision
// bf16 refused where it cannot run. Runs resumed, copied and started from others are in
// tst_train_command_resume.cpp; runs stopped (divergence, Ctrl-C and other signals) and folders in
// use in tst_train_command_stops.cpp.
#include <QDir>
#include <QFileInfo>
#include <QImage>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QTest>
#include <filesystem>

#include "engine/cpu/onednn_ops.h"
#include "engine/models/registry.h"
#include "engine/train/checkpoint.h"
#include "engine/train/run_lock.h"
#include "engine/train/train_config.h"
#include "train_command_support.h"

namespace fs = std::filesystem;
using namespace towers;

class TestTrainCommand : public test::TrainCommandTest
{
    Q_OBJECT

private slots:
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
        QTest::newRow("sampling unknown")
            << QStringList{"train", "--sampling", "weighted"} << 2 << "--sampling";
        QTest::newRow("accumulate zero")
            << QStringList{"train", "--accumulate", "0"} << 2 << "--accumulate";
        QTest::newRow("lr-find accumulate")
            << QStringList{"lr-find", "--accumulate", "x"} << 2 << "--accumulate";
        QTest::newRow("clip negative")
            << QStringList{"train", "--clip-grad-norm", "-1"} << 2 << "--clip-grad-norm";
        QTest::newRow("clip not a number")
            << QStringList{"lr-find", "--clip-grad-norm", "one"} << 2 << "--clip-grad-norm";
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
        // So do the optimizer, weight decay, label smoothing and clipping it was measured with (an
        // Adam rate is not a Nesterov one), in the header and the command; an optimizer it does
        // not know is a usage error.
        const CliRun adamw = run(
            {QStringLiteral("lr-find"), QStringLiteral("--dataset"),
             QStringLiteral("fashion-mnist"), QStringLiteral("--batch-size"), QStringLiteral("16"),
             QStringLiteral("--steps"), QStringLiteral("10"), QStringLiteral("--optimizer"),
             QStringLiteral("adamw"), QStringLiteral("--weight-decay"), QStringLiteral("0.05"),
             QStringLiteral("--label-smoothing"), QStringLiteral("0.1"),
             QStringLiteral("--clip-grad-norm"), QStringLiteral("2")});
        QVERIFY2(adamw.exitCode == 0, qPrintable(adamw.err));
        QVERIFY2(adamw.out.contains(QStringLiteral("1 tower x 16, adamw, weight decay 0.05, label "
                                                   "smoothing 0.1, gradients clipped to 2, 10 "
                                                   "steps")) &&
                     adamw.out.contains(QStringLiteral(" --optimizer adamw --weight-decay 0.05 "
                                                       "--label-smoothing 0.1 --clip-grad-norm 2 "
                                                       "--lr ")),
                 qPrintable(adamw.out));
        const CliRun unknown =
            run({QStringLiteral("lr-find"), QStringLiteral("--optimizer"), QStringLiteral("lion")});
        QCOMPARE(unknown.exitCode, 2);
        QVERIFY2(unknown.err.contains(QStringLiteral("unknown optimizer 'lion' (known: sgd, ")),
                 qPrintable(unknown.err));
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

    // A run that clips its gradients says their norm before clipping at every logged step: in its
    // step events, in metrics.jsonl (the same number) and at the end of its log line, with whether
    // the step clipped; a run that does not clip says the norm too.
    void clippingRunSaysTheGradientNorm()
    {
        const QString dir = path(QStringLiteral("runs/clipped"));
        const CliRun r = run(small(dir) + QStringList{"--steps", "4", "--clip-grad-norm", "0.01"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        QList<double> norms;
        for (const auto& e : r.events)
            if (e.value(QStringLiteral("event")).toString() == QLatin1String("step"))
                norms << e.value(QStringLiteral("grad_norm")).toDouble(-1);
        QCOMPARE(norms.size(), 2);
        for (double n : norms) QVERIFY2(n > 0.01, qPrintable(QString::number(n))); // clipped
        QFile metrics(dir + QStringLiteral("/metrics.jsonl"));
        QVERIFY(metrics.open(QIODevice::ReadOnly));
        const auto lines = jsonLines(QString::fromUtf8(metrics.readAll()));
        QCOMPARE(lines.size(), 2);
        for (int i = 0; i < 2; ++i)
            QCOMPARE(lines[i].value(QStringLiteral("gradNorm")).toDouble(), norms[i]);

        QStringList plain = small(path(QStringLiteral("runs/clipped-log"))) +
                            QStringList{"--steps", "2", "--clip-grad-norm", "0.01"};
        plain.removeAll(QStringLiteral("--json"));
        const CliRun log = run(plain);
        QVERIFY2(log.exitCode == 0, qPrintable(log.err + log.out));
        QVERIFY2(QRegularExpression(QStringLiteral("step 2, loss = .*, gradient norm [0-9.e+-]+ "
                                                   "\\(clipped to 0\\.01\\)\\n"))
                     .match(log.out + log.err)
                     .hasMatch(),
                 qPrintable(log.out + log.err));
        // Without clipping the line still ends with the norm, and says no clip.
        plain.replace(plain.indexOf(QStringLiteral("0.01")), QStringLiteral("0"));
        plain.replace(plain.indexOf(path(QStringLiteral("runs/clipped-log"))),
                      path(QStringLiteral("runs/unclipped-log")));
        const CliRun unclipped = run(plain);
        QVERIFY2(unclipped.exitCode == 0, qPrintable(unclipped.err + unclipped.out));
        QVERIFY2(
            QRegularExpression(QStringLiteral("step 2, loss = .*, gradient norm [0-9.e+-]+\\n"))
                .match(unclipped.out + unclipped.err)
                .hasMatch(),
            qPrintable(unclipped.out + unclipped.err));
    }

    // --accumulate: each tower runs that many batches per step, so a step takes towers x batch x
    // accumulate examples (the epoch counts them), the log says the layout, config.json keeps
    // it, a resume may not change it, and a global batch the training set cannot give is refused
    // in those terms before any folder is made.
    void accumulatingRun()
    {
        const QString dir = path(QStringLiteral("runs/accumulating"));
        const CliRun r = run(small(dir) + QStringList{"--steps", "4", "--accumulate", "2"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        bool said = false;
        for (const auto& e : r.events)
            said = said || e.value(QStringLiteral("message"))
                               .toString()
                               .contains(QStringLiteral("2 towers x 16 examples x 2 accumulated "
                                                        "batches (global batch 64)"));
        QVERIFY2(said, qPrintable(r.out));
        QFile metrics(dir + QStringLiteral("/metrics.jsonl"));
        QVERIFY(metrics.open(QIODevice::ReadOnly));
        const auto lines = jsonLines(QString::fromUtf8(metrics.readAll()));
        QCOMPARE(lines.size(), 2);
        QCOMPARE(lines[1].value(QStringLiteral("step")).toInt(), 4);
        QCOMPARE(lines[1].value(QStringLiteral("epoch")).toDouble(), 1.0); // 4 x 64 of 256
        QFile config(dir + QStringLiteral("/config.json"));
        QVERIFY(config.open(QIODevice::ReadOnly));
        QCOMPARE(QJsonDocument::fromJson(config.readAll())
                     .object()
                     .value(QStringLiteral("accumulate"))
                     .toInt(),
                 2);

        const CliRun listed = run({"runs", dir});
        QVERIFY2(listed.out.contains(QStringLiteral("2 towers x 16 x 2 accumulated (global batch "
                                                    "64) on the CPU")),
                 qPrintable(listed.out));

        const CliRun changed =
            run({"train", "--resume", "--run-dir", dir, "--accumulate", "3", "--steps", "6"});
        QCOMPARE(changed.exitCode, 2);
        QVERIFY2(changed.err.contains(QStringLiteral("--accumulate cannot change when resuming: "
                                                     "the run has 2")),
                 qPrintable(changed.err));
        const CliRun same =
            run({"train", "--resume", "--run-dir", dir, "--accumulate", "2", "--steps", "6"});
        QVERIFY2(same.exitCode == 0, qPrintable(same.err));

        const QString big = path(QStringLiteral("runs/accumulating-too-much"));
        const CliRun tooMuch = run(small(big) + QStringList{"--steps", "1", "--accumulate", "9"});
        QCOMPARE(tooMuch.exitCode, 2);
        QVERIFY2(tooMuch.err.contains(QStringLiteral("a global batch of 288 (2 towers x 16 x 9 "
                                                     "accumulated batches) is larger than the "
                                                     "256 training examples: at most 8 "
                                                     "accumulated batches fit")),
                 qPrintable(tooMuch.err));
        QVERIFY(!QFileInfo::exists(big));
    }

    // --sampling balanced: the log says the classes are sampled equally, config.json keeps it,
    // TensorBoard's hyperparameters name it, and a resume may not change it.
    void balancedRun()
    {
        const QString dir = path(QStringLiteral("runs/balanced"));
        const CliRun r = run(small(dir) + QStringList{"--steps", "2", "--sampling", "balanced"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        bool said = false;
        for (const auto& e : r.events)
            said = said || e.value(QStringLiteral("message"))
                               .toString()
                               .contains(QStringLiteral("(global batch 32), the classes sampled "
                                                        "equally, "));
        QVERIFY2(said, qPrintable(r.out));
        QCOMPARE(engine::TrainConfig::fromJson(
                     readFile(dir + QStringLiteral("/config.json")).toStdString())
                     .sampling,
                 std::string("balanced"));
        const CliRun changed =
            run({"train", "--resume", "--run-dir", dir, "--sampling", "uniform", "--steps", "4"});
        QCOMPARE(changed.exitCode, 2);
        QVERIFY2(changed.err.contains(QStringLiteral("--sampling cannot change when resuming: "
                                                     "the run has balanced")),
                 qPrintable(changed.err));
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
                // The gradients' norm, measured in a run that does not clip them.
                QVERIFY(e.value(QStringLiteral("grad_norm")).toDouble(-1) > 0);
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
