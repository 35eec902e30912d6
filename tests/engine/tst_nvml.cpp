// The NVML loader against a stand-in library (fake_nvml.cpp) with today's symbol names and with
// only the old ones, and against every way NVML fails: no library, a library without NVML, an
// init that fails (driver not loaded), a query a GPU does not support, no GPUs. Nothing throws;
// what cannot be read is NaN, and the reason is kept.
#include <QtTest>

#include <cmath>

#include "engine/monitor/nvml.h"

using towers::engine::monitor::Nvml;

class TestNvml : public QObject
{
    Q_OBJECT

private slots:
    void init()
    {
        for (const char* v : {"FAKE_NVML_GPUS", "FAKE_NVML_INIT", "FAKE_NVML_UNSUPPORTED",
                              "FAKE_NVML_HIDDEN", "TOWERS_NVML_LIBRARY"})
            qunsetenv(v);
    }

    void missingLibrary()
    {
        Nvml nvml("/nonexistent/libnvidia-ml.so.1");
        QVERIFY(!nvml.available());
        QVERIFY2(QString::fromStdString(nvml.unavailableReason())
                     .contains(QStringLiteral("/nonexistent/libnvidia-ml.so.1")),
                 nvml.unavailableReason().c_str());
        QVERIFY(nvml.gpus().empty());
        QVERIFY(std::isnan(nvml.read(0).utilisation));
        QCOMPARE(nvml.driverVersion(), std::string());
    }

    // CUDA numbers its GPUs as CUDA_VISIBLE_DEVICES says, NVML all of them: a GPU is found by the
    // PCI bus id CUDA gives ("0000:42:00.0"), in each of NVML's forms, with today's names and the
    // old ones; a bus id of no GPU, or none, finds nothing.
    void gpuByPciBusId_data()
    {
        QTest::addColumn<QString>("library");
        QTest::newRow("current names") << QStringLiteral(FAKE_NVML);
        QTest::newRow("old names") << QStringLiteral(FAKE_NVML_OLD);
    }

    void gpuByPciBusId()
    {
        QFETCH(QString, library);
        qputenv("FAKE_NVML_GPUS", "3");
        Nvml nvml(library.toStdString());
        QVERIFY2(nvml.available(), nvml.unavailableReason().c_str());
        QVERIFY(nvml.findsByPciBusId());
        QCOMPARE(nvml.indexOfPciBusId("0000:41:00.0"), 0);
        QCOMPARE(nvml.indexOfPciBusId("0000:43:00.0"), 2);
        QCOMPARE(nvml.indexOfPciBusId("00000000:42:00.0"), 1);
        QCOMPARE(nvml.indexOfPciBusId("42:00.0"), 1);
        QCOMPARE(nvml.indexOfPciBusId("0000:44:00.0"), -1); // no fourth GPU
        QCOMPARE(nvml.indexOfPciBusId(""), -1);
        Nvml none("/nonexistent/libnvidia-ml.so.1");
        QVERIFY(!none.findsByPciBusId());
        QCOMPARE(none.indexOfPciBusId("0000:41:00.0"), -1);
    }

    // A GPU this user may not use (its handle refused) is left out, and its index leaves a gap:
    // GPU 2 is still GPU 2, read and found by bus id as such; the hidden one is found nowhere.
    void aHiddenGpuLeavesAGap()
    {
        qputenv("FAKE_NVML_GPUS", "3");
        qputenv("FAKE_NVML_HIDDEN", "1");
        Nvml nvml(FAKE_NVML);
        QVERIFY2(nvml.available(), nvml.unavailableReason().c_str());
        QCOMPARE(nvml.gpus().size(), std::size_t(2));
        QCOMPARE(nvml.gpus()[1].index, 2);
        QCOMPARE(nvml.gpus()[1].name, std::string("Fake GPU 2"));
        QCOMPARE(nvml.read(2).utilisation, 39.0); // GPU 2's, not the next in the list
        QVERIFY(std::isnan(nvml.read(1).utilisation));
        QCOMPARE(nvml.processMemory(2), double(3ull * (256ull << 20)));
        QVERIFY(std::isnan(nvml.processMemory(1)));
        QCOMPARE(nvml.indexOfPciBusId("0000:43:00.0"), 2);
        QCOMPARE(nvml.indexOfPciBusId("0000:42:00.0"), -1);
    }

    void libraryWithoutNvml()
    {
        Nvml nvml("libz.so.1");
        QVERIFY(!nvml.available());
        QVERIFY2(nvml.unavailableReason().find("lacks nvmlInit") != std::string::npos,
                 nvml.unavailableReason().c_str());
    }

    void currentNames()
    {
        qputenv("TOWERS_NVML_LIBRARY", FAKE_NVML);
        Nvml nvml; // the environment names the library, as for towers-cli devices
        QVERIFY2(nvml.available(), nvml.unavailableReason().c_str());
        QCOMPARE(nvml.driverVersion(), std::string("580.65.06"));
        QCOMPARE(nvml.gpus().size(), std::size_t(2));
        const auto& g = nvml.gpus()[1];
        QCOMPARE(g.index, 1);
        QCOMPARE(g.name, std::string("Fake GPU 1"));
        QCOMPARE(g.memoryTotal, std::int64_t(80) << 30);
        QCOMPARE(g.computeCapability(), std::string("9.0"));
        const auto r = nvml.read(1);
        QCOMPARE(r.utilisation, 38.0);
        QCOMPARE(r.memoryUsed, double(2ull << 30));
        QCOMPARE(r.memoryTotal, double(80ull << 30));
        QCOMPARE(r.temperatureC, 51.0);
        QCOMPARE(r.powerW, 123.456);
        QCOMPARE(r.powerLimitW, 700.0);
        QCOMPARE(r.smClockMHz, 1980.0);
        QCOMPARE(r.pcieTxBytesPerS, 1000.0 * 1024);
        QCOMPARE(r.pcieRxBytesPerS, 2000.0 * 1024);
        QCOMPARE(nvml.processMemory(1), double(512ull << 20));  // this process's entry, not pid 1's
        QCOMPARE(nvml.processMemory(0, 1), double(1ull << 30)); // another process by pid
        QVERIFY(std::isnan(nvml.read(2).utilisation));          // no such GPU
        QVERIFY(std::isnan(nvml.read(-1).powerW));
        QVERIFY(std::isnan(nvml.processMemory(2)));
    }

    void oldNamesOnly()
    {
        Nvml nvml(FAKE_NVML_OLD);
        QVERIFY2(nvml.available(), nvml.unavailableReason().c_str());
        QCOMPARE(nvml.gpus().size(), std::size_t(2));
        const auto r = nvml.read(0);
        QCOMPARE(r.powerLimitW, 300.0);                        // nvmlDeviceGetPowerManagementLimit
        QCOMPARE(nvml.processMemory(0), double(256ull << 20)); // v1 process entries
        QCOMPARE(nvml.driverVersion(), std::string());         // no nvmlSystemGetDriverVersion
    }

    void initFails()
    {
        qputenv("FAKE_NVML_INIT", "fail");
        Nvml nvml(FAKE_NVML);
        QVERIFY(!nvml.available());
        QCOMPARE(nvml.unavailableReason(), std::string("nvmlInit failed: Driver Not Loaded"));
        QVERIFY(nvml.gpus().empty());
    }

    void unsupportedQuery_data()
    {
        QTest::addColumn<QByteArray>("query");
        for (const char* q :
             {"temperature", "power", "utilization", "processes", "clock", "pcie", "memory"})
            QTest::newRow(q) << QByteArray(q);
    }
    void unsupportedQuery()
    {
        QFETCH(QByteArray, query);
        qputenv("FAKE_NVML_UNSUPPORTED", query);
        Nvml nvml(FAKE_NVML);
        QVERIFY(nvml.available());
        const auto r = nvml.read(0);
        const std::pair<const char*, double> figures[] = {
            {"temperature", r.temperatureC}, {"power", r.powerW},
            {"utilization", r.utilisation},  {"processes", nvml.processMemory(0)},
            {"clock", r.smClockMHz},         {"pcie", r.pcieTxBytesPerS},
            {"memory", r.memoryUsed}};
        for (const auto& [name, value] : figures)
            QVERIFY2(std::isnan(value) == (query == name), name);
    }

    // The real driver, where there is one (the GPU machines): every GPU has a name, memory and a
    // compute capability, and a reading has its memory figures.
    void realDriver()
    {
        Nvml nvml("libnvidia-ml.so.1");
        if (!nvml.available())
            QSKIP(("no NVIDIA driver here: " + nvml.unavailableReason()).c_str());
        if (nvml.gpus().empty()) QSKIP("the NVIDIA driver sees no GPU");
        for (const auto& g : nvml.gpus()) {
            qInfo("GPU %d: %s, %.1f GiB, compute capability %s", g.index, g.name.c_str(),
                  double(g.memoryTotal) / double(1ll << 30), g.computeCapability().c_str());
            QVERIFY(!g.name.empty());
            QVERIFY(g.memoryTotal > 0);
            QVERIFY(g.ccMajor >= 3);
            const auto r = nvml.read(g.index);
            QVERIFY(r.memoryTotal > 0 && r.memoryUsed >= 0);
        }
    }

    void noGpus()
    {
        qputenv("FAKE_NVML_GPUS", "0");
        Nvml nvml(FAKE_NVML);
        QVERIFY(nvml.available());
        QVERIFY(nvml.gpus().empty());
    }
};

QTEST_APPLESS_MAIN(TestNvml)
#include "tst_nvml.moc"
