// towers-cli devices: the CPU always; the GPUs and NVML's figures from a stand-in NVML library
// (tests/engine/fake_nvml.cpp); "not available", never a failure, when NVML is missing or its init
// fails; --watch refreshes (a JSON object per line with --json) until --count or Ctrl-C; whether
// --precision bf16 runs on the CPU, and why not.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>

#include "cli_process.h"

class TestDevicesCommand : public QObject
{
    Q_OBJECT

    using Result = towers::test::CliResult;

    Result run(const QStringList& args, const QString& library, QStringList env = {},
               int interruptAfterMs = -1)
    {
        env << QStringLiteral("TOWERS_NVML_LIBRARY=") + library
            // No GPU backend whatever the machine: the GPUs are NVML's stand-ins.
            << QStringLiteral("TOWERS_CUDA_PLUGIN=/nonexistent/libtowers-cuda.so");
        return towers::test::runCliProcess(QStringLiteral(TOWERS_CLI),
                                           QStringList{QStringLiteral("devices")} + args, env,
                                           interruptAfterMs, 30000);
    }

private slots:
    void withoutNvml()
    {
        const Result r = run({}, QStringLiteral("/nonexistent/libnvidia-ml.so.1"));
        QCOMPARE(r.exitCode, 0);
        QVERIFY(r.out.startsWith(QStringLiteral("CPU ")));
        QVERIFY2(
            r.out.contains(QStringLiteral("GPUs  none. No NVIDIA GPU found (no NVIDIA driver")),
            qPrintable(r.out));
    }

    // Whether --precision bf16 runs on this CPU, and why not where it does not (oneDNN held to
    // AVX-512 without bf16 here).
    void bf16Availability()
    {
        const QString none = QStringLiteral("/nonexistent/libnvidia-ml.so.1");
        const Result text = run({}, none);
        QCOMPARE(text.exitCode, 0);
        QVERIFY2(text.out.contains(QStringLiteral("\n      bf16 available: --precision bf16")) ||
                     text.out.contains(QStringLiteral("\n      bf16 not available: --precision "
                                                      "bf16 needs a CPU with AVX512_BF16")),
                 qPrintable(text.out));
        const Result held = run({QStringLiteral("--json")}, none,
                                {QStringLiteral("ONEDNN_MAX_CPU_ISA=AVX512_CORE")});
        QCOMPARE(held.exitCode, 0);
        const QJsonObject cpu = QJsonDocument::fromJson(held.out.toUtf8())
                                    .object()
                                    .value(QStringLiteral("cpu"))
                                    .toObject();
        QCOMPARE(cpu.value(QStringLiteral("bf16")), QJsonValue(false));
        const QString why = cpu.value(QStringLiteral("bf16_unavailable")).toString();
        QVERIFY2(why.contains(QStringLiteral("AVX512_BF16 or AMX")) &&
                     why.contains(QStringLiteral("avx512_core")) &&
                     why.contains(QStringLiteral("use --precision fp32")),
                 qPrintable(why));
        const Result heldText = run({}, none, {QStringLiteral("ONEDNN_MAX_CPU_ISA=AVX512_CORE")});
        QVERIFY2(heldText.out.contains(QStringLiteral("bf16 not available: ") + why),
                 qPrintable(heldText.out));
    }

    void initFails()
    {
        const Result r = run({QStringLiteral("--json")}, QStringLiteral(FAKE_NVML),
                             {QStringLiteral("FAKE_NVML_INIT=fail")});
        QCOMPARE(r.exitCode, 0);
        const QJsonObject j = QJsonDocument::fromJson(r.out.toUtf8()).object();
        QCOMPARE(j.value(QStringLiteral("gpus")).toArray().size(), 0);
        QCOMPARE(j.value(QStringLiteral("nvml")).toString(),
                 QStringLiteral("nvmlInit failed: Driver Not Loaded"));
    }

    void gpusWithFigures()
    {
        const Result text = run({}, QStringLiteral(FAKE_NVML));
        QCOMPARE(text.exitCode, 0);
        QVERIFY2(text.out.contains(QStringLiteral("GPU 1 Fake GPU 1, compute capability 9.0")),
                 qPrintable(text.out));
        QVERIFY(text.out.contains(QStringLiteral("38% busy, memory 2.0 / 80.0 GiB")));
        QVERIFY(text.out.contains(QStringLiteral("2 NVIDIA GPUs found, driver 580.65.06")));

        const Result r = run({QStringLiteral("--json")}, QStringLiteral(FAKE_NVML),
                             {QStringLiteral("FAKE_NVML_UNSUPPORTED=temperature")});
        QCOMPARE(r.exitCode, 0);
        const QJsonArray gpus = QJsonDocument::fromJson(r.out.toUtf8())
                                    .object()
                                    .value(QStringLiteral("gpus"))
                                    .toArray();
        QCOMPARE(gpus.size(), 2);
        const QJsonObject g = gpus.at(0).toObject();
        QCOMPARE(g.value(QStringLiteral("name")).toString(), QStringLiteral("Fake GPU 0"));
        QCOMPARE(g.value(QStringLiteral("utilisation_percent")).toDouble(), 37.0);
        QCOMPARE(g.value(QStringLiteral("power_limit_w")).toDouble(), 700.0);
        QVERIFY(
            g.value(QStringLiteral("temperature_c")).isNull()); // not supported: null, not an error
        QCOMPARE(g.value(QStringLiteral("trainable")).toBool(), false);
    }

    void watch()
    {
        const Result r = run({QStringLiteral("--watch"), QStringLiteral("--count"),
                              QStringLiteral("2"), QStringLiteral("--json")},
                             QStringLiteral(FAKE_NVML));
        QCOMPARE(r.exitCode, 0);
        const QStringList lines = r.out.split(QLatin1Char('\n'), Qt::SkipEmptyParts);
        QCOMPARE(lines.size(), 2);
        for (const QString& l : lines)
            QCOMPARE(QJsonDocument::fromJson(l.toUtf8())
                         .object()
                         .value(QStringLiteral("gpus"))
                         .toArray()
                         .size(),
                     2);

        // Ctrl-C ends an endless --watch normally.
        const Result stopped =
            run({QStringLiteral("--watch")}, QStringLiteral(FAKE_NVML), {}, 1500);
        QCOMPARE(stopped.exitCode, 0);
        QVERIFY(stopped.out.count(QStringLiteral("--- ")) >= 1);

        QCOMPARE(run({QStringLiteral("--count"), QStringLiteral("2")}, QStringLiteral(FAKE_NVML))
                     .exitCode,
                 2);
        QCOMPARE(run({QStringLiteral("--watch"), QStringLiteral("--count"), QStringLiteral("0")},
                     QStringLiteral(FAKE_NVML))
                     .exitCode,
                 2);
    }
};

QTEST_GUILESS_MAIN(TestDevicesCommand)
#include "tst_devices_command.moc"
