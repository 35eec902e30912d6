// towers-cli bench: images/s and the step's split, the CPU's instruction sets, and --per-layer:
// every top-level layer of the model with its forward and backward time and the implementations
// its primitives ran on; --precision bf16.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSet>
#include <QtTest>

#include "cli_process.h"
#include "engine/cpu/cores.h"

class TestBenchCommand : public QObject
{
    Q_OBJECT

    static towers::test::CliResult bench(const QStringList& args, const QStringList& env = {})
    {
        return towers::test::runCliProcess(
            QStringLiteral(TOWERS_CLI), QStringList{QStringLiteral("bench")} + args,
            QStringList{QStringLiteral("OMP_NUM_THREADS=1")} + env, -1, 120000);
    }

private slots:
    void perLayerJson()
    {
        const auto r =
            bench({QStringLiteral("--model"), QStringLiteral("cifar10-tutorial"),
                   QStringLiteral("--batch-size"), QStringLiteral("8"), QStringLiteral("--steps"),
                   QStringLiteral("2"), QStringLiteral("--warmup"), QStringLiteral("1"),
                   QStringLiteral("--threads"), QStringLiteral("1"), QStringLiteral("--per-layer"),
                   QStringLiteral("--json")});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        const QJsonObject j = QJsonDocument::fromJson(r.out.toUtf8()).object();
        QVERIFY(j.value(QStringLiteral("images_per_sec")).toDouble() > 0);
        QVERIFY(!j.value(QStringLiteral("isa")).toString().isEmpty());
        const QSet<QString> targets{QStringLiteral("AVX3"),    QStringLiteral("AVX3_ZEN4"),
                                    QStringLiteral("AVX3_DL"), QStringLiteral("AVX2"),
                                    QStringLiteral("SSE4"),    QStringLiteral("SSSE3"),
                                    QStringLiteral("EMU128"),  QStringLiteral("SCALAR")};
        QVERIFY2(targets.contains(j.value(QStringLiteral("simd_target")).toString()),
                 qPrintable(j.value(QStringLiteral("simd_target")).toString()));
        const QJsonArray layers = j.value(QStringLiteral("layers")).toArray();
        QStringList names;
        double forward = 0;
        for (const auto& v : layers) {
            const QJsonObject l = v.toObject();
            names << l.value(QStringLiteral("name")).toString();
            QVERIFY(l.value(QStringLiteral("forward_ms")).toDouble() >= 0);
            QVERIFY(l.value(QStringLiteral("backward_ms")).toDouble() >= 0);
            forward += l.value(QStringLiteral("forward_ms")).toDouble();
        }
        // The tutorial's network, in forward order.
        QCOMPARE(names, (QStringList{"conv1", "pool1", "norm1", "conv2", "norm2", "pool2",
                                     "flatten", "local3", "local4", "softmax_linear"}));
        QVERIFY(forward > 0);
        // Each layer's own implementations: oneDNN's for the first convolution and pooling, Towers'
        // own for LRN.
        auto implOf = [&](int i, const char* dir) {
            QStringList out;
            for (const auto& x : layers[i].toObject().value(QLatin1String(dir)).toArray())
                out << x.toString();
            return out.join(QLatin1Char(','));
        };
        QVERIFY2(!implOf(0, "forward_impl").isEmpty(), qPrintable(r.out));
        QVERIFY2(!implOf(1, "forward_impl").isEmpty(), qPrintable(r.out));
        QVERIFY2(implOf(2, "forward_impl").startsWith(QStringLiteral("towers:")),
                 qPrintable(implOf(2, "forward_impl")));
        // Every layer names what it ran, in both directions, also a layer whose geometry an
        // earlier one ran first: norm2 runs norm1's kernels on the same 12x12x64 images.
        for (int i = 0; i < layers.size(); ++i)
            for (const char* dir : {"forward_impl", "backward_impl"})
                QVERIFY2(!implOf(i, dir).isEmpty(), qPrintable(names[i] + " " + dir));
        QCOMPARE(implOf(4, "forward_impl"), implOf(2, "forward_impl"));
        QCOMPARE(implOf(4, "backward_impl"), implOf(2, "backward_impl"));
    }

    // More threads than cores are run, with a note that says what they cost (as train's log
    // says); as many as the cores, none.
    void threadsBeyondTheCoresAreSaid()
    {
        const int cores = towers::engine::cpu::usableCores();
        for (const int threads : {cores, cores + 1}) {
            const auto r =
                bench({QStringLiteral("--model"), QStringLiteral("fashion-fast"),
                       QStringLiteral("--batch-size"), QStringLiteral("4"),
                       QStringLiteral("--steps"), QStringLiteral("1"), QStringLiteral("--warmup"),
                       QStringLiteral("0"), QStringLiteral("--threads"), QString::number(threads)});
            QVERIFY2(r.exitCode == 0, qPrintable(r.err));
            const QString note = QStringLiteral("towers-cli bench: note: %1 compute threads "
                                                "(--threads %1) on %2 cores: each step waits")
                                     .arg(threads)
                                     .arg(cores);
            QVERIFY2(r.err.contains(note) == (threads > cores), qPrintable(r.err));
        }
    }

    // Out of memory (here under ulimit -v) is said with what ran out and what may fit.
    void outOfMemorySaysWhatWouldFit()
    {
        const auto r = towers::test::runCliProcess(
            QStringLiteral("/bin/sh"),
            {QStringLiteral("-c"),
             QStringLiteral("ulimit -v 3000000 && exec \"$0\" bench --model cifar10-resnet "
                            "--batch-size 65536 --steps 1 --warmup 0"),
             QStringLiteral(TOWERS_CLI)},
            {}, -1, 120000);
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(QStringLiteral("towers-cli bench: error: out of memory running "
                                               "cifar10-resnet at a batch of 65536")) &&
                     r.err.contains(QStringLiteral("a smaller --batch-size may fit")),
                 qPrintable(r.err));
    }

    void perLayerText()
    {
        const auto r =
            bench({QStringLiteral("--model"), QStringLiteral("fashion-fast"),
                   QStringLiteral("--batch-size"), QStringLiteral("8"), QStringLiteral("--steps"),
                   QStringLiteral("1"), QStringLiteral("--warmup"), QStringLiteral("1"),
                   QStringLiteral("--per-layer")});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains(QStringLiteral("per layer")) &&
                     r.out.contains(QStringLiteral("Towers' own for")),
                 qPrintable(r.out));
    }

    // --precision bf16: the JSON and the backend say it; where oneDNN cannot run it (held to
    // AVX-512 without bf16 here), exit 1 with the reason.
    void bf16()
    {
        const QStringList tiny{QStringLiteral("--model"),      QStringLiteral("fashion-fast"),
                               QStringLiteral("--batch-size"), QStringLiteral("8"),
                               QStringLiteral("--steps"),      QStringLiteral("1"),
                               QStringLiteral("--warmup"),     QStringLiteral("1"),
                               QStringLiteral("--precision"),  QStringLiteral("bf16")};
        const auto refused = bench(tiny, {QStringLiteral("ONEDNN_MAX_CPU_ISA=AVX512_CORE")});
        QCOMPARE(refused.exitCode, 1);
        QVERIFY2(refused.err.startsWith(QStringLiteral("towers-cli bench: error: --precision bf16 "
                                                       "needs a CPU with AVX512_BF16 or AMX")) &&
                     refused.err.contains(QStringLiteral("use --precision fp32")),
                 qPrintable(refused.err));

        const auto r = bench(tiny + QStringList{QStringLiteral("--json")});
        if (r.exitCode == 1 && r.err.contains(QStringLiteral("AVX512_BF16")))
            QSKIP(qPrintable(r.err.trimmed()));
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        const QJsonObject j = QJsonDocument::fromJson(r.out.toUtf8()).object();
        QCOMPARE(j.value(QStringLiteral("precision")).toString(), QStringLiteral("bf16"));
        QVERIFY2(j.value(QStringLiteral("backend")).toString().endsWith(QStringLiteral("; bf16")),
                 qPrintable(r.out));
        QVERIFY(j.value(QStringLiteral("images_per_sec")).toDouble() > 0);
        const auto text = bench(tiny);
        QVERIFY2(text.exitCode == 0, qPrintable(text.err));
        QVERIFY2(text.out.startsWith(QStringLiteral("model      fashion-fast, batch 8")) &&
                     text.out.section(QLatin1Char('\n'), 0, 0).endsWith(QStringLiteral("; bf16")),
                 qPrintable(text.out));
    }

    // --inference: the forward pass alone, in evaluation mode; every layer's backward 0, the
    // arithmetic one forward pass's, and the text says what was timed.
    void inference()
    {
        const QStringList tiny{QStringLiteral("--model"),      QStringLiteral("fashion-fast"),
                               QStringLiteral("--batch-size"), QStringLiteral("8"),
                               QStringLiteral("--steps"),      QStringLiteral("2"),
                               QStringLiteral("--warmup"),     QStringLiteral("1"),
                               QStringLiteral("--per-layer")};
        const auto r =
            bench(tiny + QStringList{QStringLiteral("--inference"), QStringLiteral("--json")});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        const QJsonObject j = QJsonDocument::fromJson(r.out.toUtf8()).object();
        QCOMPARE(j.value(QStringLiteral("mode")).toString(), QStringLiteral("inference"));
        QVERIFY(j.value(QStringLiteral("images_per_sec")).toDouble() > 0);
        QCOMPARE(j.value(QStringLiteral("step_ms")).toDouble(),
                 j.value(QStringLiteral("forward_ms")).toDouble());
        QCOMPARE(j.value(QStringLiteral("backward_ms")).toDouble(), 0.0);
        // 8 images run whole through every layer (evaluation chunks need three of at least 8).
        QVERIFY(j.contains(QStringLiteral("chunking")));
        QCOMPARE(j.value(QStringLiteral("chunking")).toString(), QString());
        const QJsonArray layers = j.value(QStringLiteral("layers")).toArray();
        QCOMPARE(layers.size(), 10);
        for (const auto& v : layers) {
            QCOMPARE(v.toObject().value(QStringLiteral("backward_ms")).toDouble(), 0.0);
            QVERIFY(v.toObject().value(QStringLiteral("backward_impl")).toArray().isEmpty());
        }
        const auto training = bench(tiny + QStringList{QStringLiteral("--json")});
        QVERIFY2(training.exitCode == 0, qPrintable(training.err));
        const QJsonObject t = QJsonDocument::fromJson(training.out.toUtf8()).object();
        QCOMPARE(t.value(QStringLiteral("mode")).toString(), QStringLiteral("training"));
        const double flops = j.value(QStringLiteral("gflop_per_image")).toDouble();
        const double trainingFlops = t.value(QStringLiteral("gflop_per_image")).toDouble();
        QVERIFY2(flops > trainingFlops / 3 && flops < trainingFlops / 2,
                 qPrintable(QStringLiteral("%1 against %2").arg(flops).arg(trainingFlops)));

        const auto text = bench(tiny + QStringList{QStringLiteral("--inference")});
        QVERIFY2(text.exitCode == 0, qPrintable(text.err));
        QVERIFY2(text.out.contains(QStringLiteral("forward in evaluation mode")) &&
                     text.out.contains(QStringLiteral("\nforward    ")) &&
                     !text.out.contains(QStringLiteral("backward")) &&
                     text.out.contains(QStringLiteral("ms per pass")) &&
                     text.out.contains(
                         QStringLiteral("\nchunks     none: every layer takes the whole batch\n")),
                 qPrintable(text.out));
    }

    void badOptions()
    {
        QCOMPARE(bench({QStringLiteral("--steps"), QStringLiteral("0")}).exitCode, 2);
        QCOMPARE(bench({QStringLiteral("--model"), QStringLiteral("vgg")}).exitCode, 2);
        const auto precision = bench({QStringLiteral("--precision"), QStringLiteral("fp16")});
        QCOMPARE(precision.exitCode, 2);
        QVERIFY2(
            precision.err.contains(QStringLiteral("unknown precision 'fp16' (known: fp32, bf16)")),
            qPrintable(precision.err));
    }

    // --device and --gpu, as training's: where and which GPU; --backend, which arithmetic, must
    // agree with them. Where there is no GPU (the children load no CUDA plugin here), exit 1
    // saying why.
    void deviceChoice()
    {
        const struct
        {
            QStringList args;
            int exitCode;
            QString error;
        } cases[] = {
            {{QStringLiteral("--device"), QStringLiteral("gpu")},
             2,
             QStringLiteral("--device must be cpu or cuda, got 'gpu'")},
            {{QStringLiteral("--gpu"), QStringLiteral("-1")},
             2,
             QStringLiteral("--gpu must be an integer from 0 to 1023, got '-1'")},
            {{QStringLiteral("--device"), QStringLiteral("cpu"), QStringLiteral("--backend"),
              QStringLiteral("cuda")},
             2,
             QStringLiteral("--backend cuda does not run on --device cpu")},
            {{QStringLiteral("--device"), QStringLiteral("cuda"), QStringLiteral("--backend"),
              QStringLiteral("reference")},
             2,
             QStringLiteral("--backend reference does not run on --device cuda")},
            {{QStringLiteral("--backend"), QStringLiteral("reference"), QStringLiteral("--gpu"),
              QStringLiteral("0")},
             2,
             QStringLiteral("--gpu is for --device cuda")},
            {{QStringLiteral("--device"), QStringLiteral("cuda")},
             1,
             QStringLiteral("error: the cuda backend: ")},
            {{QStringLiteral("--gpu"), QStringLiteral("1")},
             1,
             QStringLiteral("error: the cuda backend: ")},
        };
        const QStringList noPlugin{QStringLiteral("TOWERS_CUDA_PLUGIN=/nonexistent/plugin.so")};
        for (const auto& c : cases) {
            const auto r =
                bench(c.args + QStringList{QStringLiteral("--steps"), QStringLiteral("1"),
                                           QStringLiteral("--warmup"), QStringLiteral("0")},
                      noPlugin);
            QCOMPARE(r.exitCode, c.exitCode);
            QVERIFY2(r.err.contains(c.error), qPrintable(r.err));
        }
        const auto cpu =
            bench({QStringLiteral("--device"), QStringLiteral("cpu"), QStringLiteral("--model"),
                   QStringLiteral("fashion-fast"), QStringLiteral("--batch-size"),
                   QStringLiteral("8"), QStringLiteral("--steps"), QStringLiteral("1"),
                   QStringLiteral("--warmup"), QStringLiteral("0"), QStringLiteral("--json")});
        QCOMPARE(cpu.exitCode, 0);
        QVERIFY2(QJsonDocument::fromJson(cpu.out.toUtf8())
                     .object()
                     .value(QStringLiteral("backend"))
                     .toString()
                     .startsWith(QStringLiteral("onednn")),
                 qPrintable(cpu.out));
    }
};

QTEST_GUILESS_MAIN(TestBenchCommand)
#include "tst_bench_command.moc"
