// DevicesPage: telemetry curves added per device as samples arrive (a second device is data, not
// a widget), tower setup, and per-tower step times with the slow towers highlighted.
#include <QSignalSpy>
#include <QSpinBox>
#include <QTest>

#include "app/devices/telemetry.h"
#include "ui/models/device_model.h"
#include "ui/models/telemetry_history.h"
#include "ui/pages/devices_page.h"
#include "ui/plots/bar_chart.h"
#include "ui/plots/plot_widget.h"

using towers::ui::DevicesPage;
using towers::ui::TelemetryHistory;

namespace {
// Two devices, one with every sensor and one with utilisation only.
class FakeSource : public towers::app::TelemetrySource
{
public:
    std::vector<towers::app::DeviceSample> sample(double now) override
    {
        towers::app::DeviceSample cpu, gpu;
        cpu.deviceId = QStringLiteral("cpu");
        cpu.time = gpu.time = now;
        cpu.utilisation = 50;
        cpu.memoryUsedBytes = 4.0 * (1LL << 30);
        gpu.deviceId = QStringLiteral("gpu0");
        gpu.utilisation = 90;
        gpu.memoryUsedBytes = 70.0 * (1LL << 30);
        gpu.temperatureC = 64;
        gpu.powerW = 550;
        return {cpu, gpu};
    }
};
} // namespace

class TestDevicesPage : public QObject
{
    Q_OBJECT
private slots:
    void telemetryCurvesPerDevice()
    {
        DevicesPage page;
        page.setTelemetrySource(std::make_unique<FakeSource>());
        page.setSamplingInterval(60000); // only the samples taken here
        page.sampleNow();
        page.sampleNow();
        page.sampleNow();
        QCOMPARE(page.history()->deviceIds(),
                 (QStringList{QStringLiteral("cpu"), QStringLiteral("gpu0")}));
        for (int m = 0; m < TelemetryHistory::MetricCount; ++m)
            QCOMPARE(page.telemetryPlot(m)->seriesCount(), 2);
        auto* util = page.telemetryPlot(TelemetryHistory::Utilisation);
        QCOMPARE(util->pointCount(0), 3);
        QCOMPARE(util->lastValue(1), 90.0);
        auto* temp = page.telemetryPlot(TelemetryHistory::TemperatureC);
        QCOMPARE(temp->pointCount(0), 0); // the CPU has no sensor here
        QCOMPARE(temp->pointCount(1), 3);
        QCOMPARE(page.telemetryPlot(TelemetryHistory::MemoryGiB)->lastValue(1), 70.0);
    }

    void realCpuTelemetry()
    {
        DevicesPage page; // the default source reads /proc
        QCOMPARE(page.history()->deviceIds(), QStringList{QStringLiteral("cpu")});
        QVERIFY(page.deviceModel()->rowCount() >= 1);
    }

    void towerSetup()
    {
        DevicesPage page;
        QSignalSpy changed(&page, &DevicesPage::towerSetupChanged);
        page.setTowers(3);
        page.setThreadsPerTower(2);
        QCOMPARE(page.towers(), 3);
        QCOMPARE(page.threadsPerTower(), 2);
        QCOMPARE(changed.count(), 2);
        QCOMPARE(changed.last(), (QList<QVariant>{3, 2}));
        page.setTowerSetupEnabled(false);
        for (auto* spin : page.findChildren<QSpinBox*>()) QVERIFY(!spin->isEnabled());
    }

    // Checked GPUs (a GPU backend is there) make the towers: one per GPU, the CPU spin boxes
    // off; unchecking them gives the CPU towers back.
    void gpuTowers()
    {
        DevicesPage page;
        std::vector<towers::app::DeviceDescription> devices(1);
        devices[0].id = QStringLiteral("cpu");
        devices[0].logicalCores = 4;
        for (int g = 0; g < 3; ++g) {
            towers::app::DeviceDescription gpu;
            gpu.kind = towers::app::DeviceDescription::Kind::Gpu;
            gpu.id = QStringLiteral("gpu%1").arg(g);
            gpu.name = QStringLiteral("NVIDIA H100");
            devices.push_back(gpu);
        }
        auto* model = page.deviceModel();
        model->setDevices(devices);
        page.setTowers(2);
        QCOMPARE(page.selectedGpus(), (std::vector<int>{0, 1, 2}));
        QCOMPARE(page.towers(), 3);
        QVERIFY(model->setData(model->index(2, towers::ui::DeviceModel::Use), Qt::Unchecked,
                               Qt::CheckStateRole));
        QCOMPARE(page.selectedGpus(), (std::vector<int>{0, 2}));
        QCOMPARE(page.towers(), 2);
        for (auto* spin : page.findChildren<QSpinBox*>()) QVERIFY(!spin->isEnabled());
        for (int row : {1, 3})
            QVERIFY(model->setData(model->index(row, towers::ui::DeviceModel::Use), Qt::Unchecked,
                                   Qt::CheckStateRole));
        QVERIFY(page.selectedGpus().empty());
        QCOMPARE(page.towers(), 2); // the CPU towers again
        for (auto* spin : page.findChildren<QSpinBox*>()) QVERIFY(spin->isEnabled());
    }

    void slowTowersStandOut()
    {
        QCOMPARE(DevicesPage::slowTowers({10}), std::vector<bool>{false});
        QCOMPARE(DevicesPage::slowTowers({10, 10, 10, 13}),
                 (std::vector<bool>{false, false, false, true}));
        QCOMPARE(DevicesPage::slowTowers({10, 12, 11, 12.4}),
                 (std::vector<bool>{false, false, false, false}));
        // Two towers: against the other one.
        QCOMPARE(DevicesPage::slowTowers({72.5, 112.9}), (std::vector<bool>{false, true}));
        QCOMPARE(DevicesPage::slowTowers({100, 110}), (std::vector<bool>{false, false}));
        DevicesPage page;
        page.showTowerTimes(10, {20, 21, 40});
        page.showTowerTimes(20, {20, 22, 41});
        auto* chart = page.towerChart();
        QCOMPARE(chart->barCount(), 3);
        QVERIFY(!chart->isHighlighted(0));
        QVERIFY(chart->isHighlighted(2));
        QCOMPARE(chart->value(2), 41.0);
        QCOMPARE(page.towerHistoryPlot()->seriesCount(), 3);
        QCOMPARE(page.towerHistoryPlot()->pointCount(2), 2);
        // One slow step among steady ones does not flag a tower: the flag follows recent means.
        for (int s = 3; s <= 12; ++s) page.showTowerTimes(10 * s, {20, 20, 20});
        page.showTowerTimes(130, {20, 60, 20});
        QCOMPARE(chart->value(1), 60.0);
        QVERIFY(!chart->isHighlighted(1));
        page.clearTowerTimes();
        QCOMPARE(chart->barCount(), 0);
        QCOMPARE(page.towerHistoryPlot()->seriesCount(), 0);
    }
};

QTEST_MAIN(TestDevicesPage)
#include "tst_devices_page.moc"
