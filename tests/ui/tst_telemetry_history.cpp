// TelemetryHistory: devices appear with their first sample, NaN fields add no point, the history
// keeps the last `capacity` samples, memory is shown in GiB.
#include <QSignalSpy>
#include <QTest>

#include "ui/models/telemetry_history.h"

using towers::app::DeviceSample;
using towers::ui::TelemetryHistory;

namespace {
DeviceSample sample(const QString& id, double t, double util, double memBytes = DeviceSample::kNone)
{
    DeviceSample s;
    s.deviceId = id;
    s.time = t;
    s.utilisation = util;
    s.memoryUsedBytes = memBytes;
    return s;
}
} // namespace

class TestTelemetryHistory : public QObject
{
    Q_OBJECT
private slots:
    void devicesAppearAsData()
    {
        TelemetryHistory h(5);
        QSignalSpy added(&h, &TelemetryHistory::deviceAdded);
        QSignalSpy sampled(&h, &TelemetryHistory::sampled);
        h.add({sample(QStringLiteral("cpu"), 0, 10, 2.0 * (1LL << 30))});
        h.add({sample(QStringLiteral("cpu"), 1, 20), sample(QStringLiteral("gpu0"), 1, 90)});
        QCOMPARE(added.count(), 2);
        QCOMPARE(added.at(1), (QList<QVariant>{QStringLiteral("gpu0"), 1}));
        QCOMPARE(sampled.count(), 2);
        QCOMPARE(h.deviceIds(), (QStringList{QStringLiteral("cpu"), QStringLiteral("gpu0")}));
        QCOMPARE(h.values(0, TelemetryHistory::Utilisation), (QVector<double>{10, 20}));
        QCOMPARE(h.times(1, TelemetryHistory::Utilisation), (QVector<double>{1}));
        // The second CPU sample had no memory reading: one point only, in GiB.
        QCOMPARE(h.values(0, TelemetryHistory::MemoryGiB), (QVector<double>{2.0}));
        QVERIFY(h.hasData(TelemetryHistory::Utilisation));
        QVERIFY(!h.hasData(TelemetryHistory::TemperatureC));
    }

    void keepsTheLastSamples()
    {
        TelemetryHistory h(5);
        for (int t = 0; t < 12; ++t) h.add({sample(QStringLiteral("cpu"), t, t * 2)});
        QCOMPARE(h.times(0, TelemetryHistory::Utilisation), (QVector<double>{7, 8, 9, 10, 11}));
        QCOMPARE(h.values(0, TelemetryHistory::Utilisation), (QVector<double>{14, 16, 18, 20, 22}));
        h.clear();
        QVERIFY(h.deviceIds().isEmpty());
        QVERIFY(!h.hasData(TelemetryHistory::Utilisation));
    }

    void titles()
    {
        for (int m = 0; m < TelemetryHistory::MetricCount; ++m) {
            QVERIFY(!TelemetryHistory::title(TelemetryHistory::Metric(m)).isEmpty());
            QVERIFY(!TelemetryHistory::unit(TelemetryHistory::Metric(m)).isEmpty());
        }
    }
};

QTEST_MAIN(TestTelemetryHistory)
#include "tst_telemetry_history.moc"
