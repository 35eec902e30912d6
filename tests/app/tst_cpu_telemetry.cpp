// CpuTelemetry on a fake /proc and /sys tree: utilisation from the /proc/stat deltas, memory from
// /proc/meminfo, the CPU thermal zone, RAPL power; NaN where nothing is readable.
#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>

#include "app/devices/telemetry.h"

using towers::app::CpuTelemetry;

namespace {
void write(const QString& path, const QByteArray& text)
{
    QDir().mkpath(QFileInfo(path).path());
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
    f.write(text);
}
} // namespace

class TestCpuTelemetry : public QObject
{
    Q_OBJECT
private slots:
    void fromFakeTree()
    {
        QTemporaryDir root;
        const QString r = root.path() + QLatin1Char('/');
        //            user nice system idle iowait irq softirq steal guest guest_nice
        write(r + "proc/stat", "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 100 0 50 800 50 0 0 0 0 0\n");
        write(r + "proc/meminfo",
              "MemTotal:       8000000 kB\nMemFree:  1000 kB\nMemAvailable:   6000000 kB\n");
        write(r + "sys/class/thermal/thermal_zone0/type", "acpitz\n");
        write(r + "sys/class/thermal/thermal_zone0/temp", "30000\n");
        write(r + "sys/class/thermal/thermal_zone1/type", "x86_pkg_temp\n");
        write(r + "sys/class/thermal/thermal_zone1/temp", "55500\n");
        write(r + "sys/class/powercap/intel-rapl:0/energy_uj", "1000000\n");

        CpuTelemetry t(root.path());
        auto s = t.sample(10.0);
        QCOMPARE(s.size(), std::size_t(1));
        QCOMPARE(s[0].deviceId, QStringLiteral("cpu"));
        QVERIFY(std::isnan(s[0].utilisation)); // a rate needs two samples
        QVERIFY(std::isnan(s[0].powerW));
        QCOMPARE(s[0].memoryTotalBytes, 8000000.0 * 1024);
        QCOMPARE(s[0].memoryUsedBytes, 2000000.0 * 1024);
        QCOMPARE(s[0].temperatureC, 55.5); // the package zone, not the hotter-named ACPI one

        // 300 busy (200 user + 100 system) and 100 idle jiffies later: 75 % busy.
        write(r + "proc/stat", "cpu  300 0 150 850 100 0 0 0 0 0\n");
        write(r + "sys/class/powercap/intel-rapl:0/energy_uj", "31000000\n"); // 30 J in 2 s
        s = t.sample(12.0);
        QCOMPARE(s[0].utilisation, 75.0);
        QCOMPARE(s[0].powerW, 15.0);
    }

    void missingFilesGiveNaN()
    {
        QTemporaryDir root;
        CpuTelemetry t(root.path());
        t.sample(0);
        const auto s = t.sample(1);
        QCOMPARE(s.size(), std::size_t(1));
        QVERIFY(std::isnan(s[0].utilisation));
        QVERIFY(std::isnan(s[0].memoryUsedBytes));
        QVERIFY(std::isnan(s[0].temperatureC));
        QVERIFY(std::isnan(s[0].powerW));
    }

    void anyZoneWhenNoneIsTyped()
    {
        QTemporaryDir root;
        const QString r = root.path() + QLatin1Char('/');
        write(r + "sys/class/thermal/thermal_zone0/type", "acpitz\n");
        write(r + "sys/class/thermal/thermal_zone0/temp", "41000\n");
        write(r + "sys/class/thermal/thermal_zone1/type", "iwlwifi_1\n");
        write(r + "sys/class/thermal/thermal_zone1/temp", "47000\n");
        CpuTelemetry t(root.path());
        QCOMPARE(t.sample(0)[0].temperatureC, 47.0);
    }

    void realProcIsReadable()
    {
        // On Linux the real tree gives a utilisation in [0, 100] on the second sample.
        if (!QFile::exists(QStringLiteral("/proc/stat"))) QSKIP("no /proc/stat on this system");
        CpuTelemetry t;
        t.sample(0);
        QTest::qWait(50);
        const auto s = t.sample(0.05);
        if (!std::isnan(s[0].utilisation)) {
            QVERIFY(s[0].utilisation >= 0);
            QVERIFY(s[0].utilisation <= 100);
        }
        QVERIFY(s[0].memoryTotalBytes > 0);
    }
};

QTEST_GUILESS_MAIN(TestCpuTelemetry)
#include "tst_cpu_telemetry.moc"
