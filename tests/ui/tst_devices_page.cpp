// DevicesPage: telemetry curves added per device as samples arrive (a second device is data, not
// a widget), tower setup, precision, GPU towers' data, averaging and CUDA graphs, the gradient
// buckets, and where each tower's step goes: the stacked bars of the latest step, the timeline of
// the last reports, the verdict in words, the slow towers outlined.
#include <QAbstractSpinBox>
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QLocale>
#include <QSet>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QTest>
#include <QWheelEvent>
#include <qcustomplot.h>

#include "app/devices/telemetry.h"
#include "engine/cpu/onednn_ops.h"
#include "engine/train/train_config.h"
#include "ui/models/device_model.h"
#include "ui/models/telemetry_history.h"
#include "ui/pages/devices_page.h"
#include "ui/plots/plot_widget.h"
#include "ui/plots/stacked_bar_chart.h"
#include "ui_test_support.h"

using towers::engine::Precision;
using towers::engine::TowerTimes;
using towers::engine::TrainConfig;
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

TowerTimes split(double computeMs, double commMs, double dataMs, double updateMs)
{
    TowerTimes t;
    t.computeMs = computeMs;
    t.commMs = commMs;
    t.dataMs = dataMs;
    t.updateMs = updateMs;
    return t;
}

// The CPU and `gpus` stand-in GPUs (checked: GPU towers), as DeviceModel lists them.
std::vector<towers::app::DeviceDescription> machineWith(int gpus)
{
    std::vector<towers::app::DeviceDescription> devices(1);
    devices[0].id = QStringLiteral("cpu");
    devices[0].logicalCores = 4;
    for (int g = 0; g < gpus; ++g) {
        towers::app::DeviceDescription gpu;
        gpu.kind = towers::app::DeviceDescription::Kind::Gpu;
        gpu.id = QStringLiteral("gpu%1").arg(g);
        gpu.name = QStringLiteral("NVIDIA H100");
        gpu.cudaNumber = g;
        devices.push_back(gpu);
    }
    return devices;
}

// Only compute differs between the towers (each waits 1 ms for data, 2 ms to average, 3 ms to
// update).
std::vector<TowerTimes> computeOnly(const std::vector<double>& ms)
{
    std::vector<TowerTimes> towers;
    for (double c : ms) towers.push_back(split(c, 2, 1, 3));
    return towers;
}
} // namespace

class TestDevicesPage : public QObject
{
    Q_OBJECT
private slots:
    // The counts read as English writes them ("1 tower", "tower 0 waits", "towers 0 and 1
    // wait"), as in towers.
    void initTestCase() { QVERIFY(towers::test::installPluralForms()); }

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

    // The wheel over the page's boxes (towers, threads, bucket size, the choices) scrolls the page:
    // a box that does not have the focus is left as it is.
    void wheelLeavesUnfocusedBoxes()
    {
        DevicesPage page;
        page.setTowers(3);
        QList<QWidget*> boxes;
        for (auto* b : page.findChildren<QAbstractSpinBox*>()) boxes << b;
        for (auto* b : page.findChildren<QComboBox*>()) boxes << b;
        QVERIFY(boxes.size() >= 4);
        for (QWidget* w : boxes) {
            QCOMPARE(w->focusPolicy(), Qt::StrongFocus);
            const QPointF at(5, 5);
            QWheelEvent e(at, w->mapToGlobal(at), QPoint(), QPoint(0, -120), Qt::NoButton,
                          Qt::NoModifier, Qt::NoScrollPhase, false);
            QApplication::sendEvent(w, &e);
            QVERIFY2(!e.isAccepted(), w->metaObject()->className());
        }
        QCOMPARE(page.towers(), 3);
    }

    // Every label's Alt shortcut on the page is its own, and leads to a control.
    void shortcutsAreDistinct()
    {
        DevicesPage page;
        QSet<QChar> keys;
        int labels = 0;
        for (const QLabel* label : page.findChildren<QLabel*>()) {
            const QString text = label->text();
            const qsizetype at = text.indexOf(QLatin1Char('&'));
            if (at < 0 || at + 1 >= text.size() || text[at + 1] == QLatin1Char('&')) continue;
            const QChar key = text[at + 1].toLower();
            QVERIFY2(!keys.contains(key),
                     qPrintable(QStringLiteral("Alt+%1 twice: %2").arg(key.toUpper(), text)));
            QVERIFY2(label->buddy(), qPrintable(text));
            keys.insert(key);
            ++labels;
        }
        QVERIFY(labels >= 7);
        // Check boxes carry their own shortcut.
        int boxes = 0;
        for (const QCheckBox* box : page.findChildren<QCheckBox*>()) {
            const QString text = box->text();
            const qsizetype at = text.indexOf(QLatin1Char('&'));
            QVERIFY2(at >= 0 && at + 1 < text.size(), qPrintable(text));
            const QChar key = text[at + 1].toLower();
            QVERIFY2(!keys.contains(key),
                     qPrintable(QStringLiteral("Alt+%1 twice: %2").arg(key.toUpper(), text)));
            keys.insert(key);
            ++boxes;
        }
        QVERIFY(boxes >= 1);
    }

    // CUDA_VISIBLE_DEVICES=2,1: CUDA numbers the GPUs it lets through, NVML all of them. Each of
    // NVML's GPUs gets CUDA's number for it by PCI bus id (what the towers take), and shows both
    // where they differ; one CUDA does not see cannot be checked, and says why. Where NVML cannot
    // look bus ids up, CUDA's order is NVML's.
    void cudaNumbersFollowBusIds()
    {
        auto devices = machineWith(3); // NVML's GPUs 0, 1, 2 at buses 41, 42, 43
        for (auto& d : devices) d.cudaNumber = -1;
        const std::vector<std::string> cudaBus{"0000:43:00.0", "0000:42:00.0"};
        const auto nvmlIndexOf = [](const std::string& bus) {
            for (int n = 0; n < 3; ++n)
                if (bus == QStringLiteral("0000:%1:00.0").arg(0x41 + n, 0, 16).toStdString())
                    return n;
            return -1;
        };
        towers::app::assignCudaNumbers(
            devices, 2, true, [&](int c) { return cudaBus[std::size_t(c)]; }, nvmlIndexOf);
        QCOMPARE(devices[1].cudaNumber, -1);
        QVERIFY(!devices[1].trainable);
        QVERIFY2(devices[1].notTrainable.startsWith(QStringLiteral("CUDA does not see this GPU")),
                 qPrintable(devices[1].notTrainable));
        QCOMPARE(devices[2].cudaNumber, 1);
        QCOMPARE(devices[3].cudaNumber, 0);
        QVERIFY(devices[2].trainable && devices[3].trainable);

        DevicesPage page;
        auto* model = page.deviceModel();
        model->setDevices(devices);
        QCOMPARE(page.selectedGpus(), (std::vector<int>{1, 0})); // rows NVML 1 and 2
        const auto use = [&](int row, int role) {
            return model->data(model->index(row, towers::ui::DeviceModel::Use), role).toString();
        };
        QCOMPARE(use(2, Qt::DisplayRole), QStringLiteral("GPU 1"));
        QCOMPARE(use(3, Qt::DisplayRole), QStringLiteral("GPU 2 (CUDA 0)"));
        QCOMPARE(use(1, Qt::ToolTipRole), devices[1].notTrainable);
        QVERIFY(!model->setData(model->index(1, towers::ui::DeviceModel::Use), Qt::Checked,
                                Qt::CheckStateRole));

        QVERIFY(!devices[2].cudaByOrder && !devices[3].cudaByOrder);

        // NVML cannot look bus ids up: CUDA's order, said so.
        auto plain = machineWith(3);
        for (auto& d : plain) d.cudaNumber = -1;
        towers::app::assignCudaNumbers(
            plain, 2, false, [](int) { return std::string(); },
            [](const std::string&) { return -1; });
        QCOMPARE(plain[1].cudaNumber, 0);
        QCOMPARE(plain[2].cudaNumber, 1);
        QCOMPARE(plain[3].cudaNumber, -1);
        QVERIFY(plain[1].cudaByOrder);

        // NVML looks them up and finds none of CUDA's GPUs: none is taken for another.
        auto lost = machineWith(2);
        for (auto& d : lost) d.cudaNumber = -1;
        towers::app::assignCudaNumbers(
            lost, 2, true, [&](int c) { return cudaBus[std::size_t(c)]; },
            [](const std::string&) { return -1; });
        QCOMPARE(lost[1].cudaNumber, -1);
        QCOMPARE(lost[2].cudaNumber, -1);
        QVERIFY(!lost[1].trainable && !lost[2].trainable);

        // Two CUDA devices on one GPU (MIG instances share its bus id): the first is the GPU's.
        auto mig = machineWith(1);
        mig[1].cudaNumber = -1;
        towers::app::assignCudaNumbers(
            mig, 2, true, [](int) { return std::string("0000:41:00.0"); }, nvmlIndexOf);
        QCOMPARE(mig[1].cudaNumber, 0);
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
            gpu.cudaNumber = g;
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

    // The precision: float32 by default; bfloat16 where CPU towers can run it (else its entry is
    // disabled, with the reason as its tooltip, and a run set to it gets float32); never for GPU
    // towers; fixed while a run is going.
    void precisionChoice()
    {
        DevicesPage page;
        auto* combo = page.precisionChoice();
        auto* items = qobject_cast<QStandardItemModel*>(combo->model());
        QVERIFY(items);
        QCOMPARE(combo->count(), 2);
        QVERIFY(page.precision() == Precision::Float32);
        const QString cpuWhy = QString::fromStdString(towers::engine::cpu::bf16Unavailable());
        QCOMPARE(page.bf16Unavailable(), cpuWhy);
        QCOMPARE(items->item(1)->isEnabled(), cpuWhy.isEmpty());
        if (!cpuWhy.isEmpty()) QCOMPARE(items->item(1)->toolTip(), cpuWhy);
        QSignalSpy changed(&page, &DevicesPage::precisionChanged);
        page.setPrecision(Precision::BFloat16);
        QVERIFY(page.precision() == (cpuWhy.isEmpty() ? Precision::BFloat16 : Precision::Float32));
        QCOMPARE(changed.count(), cpuWhy.isEmpty() ? 1 : 0);

        std::vector<towers::app::DeviceDescription> devices(2);
        devices[0].id = QStringLiteral("cpu");
        devices[0].logicalCores = 4;
        devices[1].kind = towers::app::DeviceDescription::Kind::Gpu;
        devices[1].id = QStringLiteral("gpu0");
        devices[1].name = QStringLiteral("NVIDIA H100");
        devices[1].cudaNumber = 0;
        page.deviceModel()->setDevices(devices); // the GPU checked: a GPU tower
        QCOMPARE(page.selectedGpus(), std::vector<int>{0});
        // This machine's GPUs, not the list's: without one of compute capability 8.0, why not.
        const QString gpuWhy =
            QString::fromStdString(TrainConfig::precisionUnavailable("cuda", Precision::BFloat16));
        QCOMPARE(page.bf16Unavailable(), gpuWhy);
        if (!gpuWhy.isEmpty()) { // else a machine with such a GPU: nothing refused
            QVERIFY2(gpuWhy.startsWith(QStringLiteral("--precision bf16 ")), qPrintable(gpuWhy));
            QVERIFY(!items->item(1)->isEnabled());
            QCOMPARE(items->item(1)->toolTip(), page.bf16Unavailable());
            QVERIFY2(combo->toolTip().contains(gpuWhy.toHtmlEscaped()),
                     qPrintable(combo->toolTip()));
            QVERIFY(page.precision() == Precision::Float32);
            page.setPrecision(Precision::BFloat16);
            QVERIFY(page.precision() == Precision::Float32);
        }

        page.setTowerSetupEnabled(false);
        QVERIFY(!combo->isEnabled());
        page.setTowerSetupEnabled(true);
        QVERIFY(combo->isEnabled());
    }

    // The GPU towers' training data, their averaging and the bucket size start at TrainConfig's
    // defaults, with every value the config takes, each explained in its tooltip.
    void towerOptionsDefaults()
    {
        DevicesPage page;
        const TrainConfig defaults;
        QCOMPARE(page.gpuData(), defaults.gpuData);
        QCOMPARE(page.allreduce(), defaults.allreduce);
        QCOMPARE(page.cudaGraphs(), defaults.cudaGraphs);
        QVERIFY(page.cudaGraphs()); // on by default
        QCOMPARE(page.tf32(), defaults.allowTf32);
        QCOMPARE(page.cudnnBenchmark(), defaults.cudnnBenchmark);
        QVERIFY(!page.tf32() && !page.cudnnBenchmark()); // exact float32, runs that repeat
        QCOMPARE(page.bucketMb(), defaults.bucketMb);
        auto values = [](QComboBox* combo) {
            QStringList v;
            for (int i = 0; i < combo->count(); ++i) v << combo->itemData(i).toString();
            return v;
        };
        QCOMPARE(values(page.gpuDataChoice()), (QStringList{"auto", "off"}));
        QCOMPARE(values(page.allreduceChoice()), (QStringList{"auto", "host"}));
        // Each value passes TrainConfig's validation.
        TrainConfig c;
        c.steps = 1;
        for (const QString& v : values(page.gpuDataChoice())) {
            c.gpuData = v.toStdString();
            c.validate();
        }
        for (const QString& v : values(page.allreduceChoice())) {
            c.allreduce = v.toStdString();
            c.validate();
        }
        auto* bucket = page.bucketSize();
        QCOMPARE(bucket->minimum(), 0.0);
        QCOMPARE(bucket->maximum(), TrainConfig::kMaxBucketMb);
        QVERIFY(!bucket->specialValueText().isEmpty());
        QCOMPARE(bucket->text(), QLocale().toString(25) + QStringLiteral(" MiB")); // not 25.00
        for (QWidget* w : std::initializer_list<QWidget*>{
                 page.gpuDataChoice(), page.allreduceChoice(), page.cudaGraphsCheck(),
                 page.tf32Check(), page.cudnnBenchmarkCheck(), bucket})
            QVERIFY(!w->toolTip().isEmpty());
        QVERIFY(page.tf32Check()->toolTip().contains(QStringLiteral("TF32")));
        QVERIFY(page.cudnnBenchmarkCheck()->toolTip().contains(QStringLiteral("cudnn.benchmark")));
        QVERIFY(page.cudnnBenchmarkCheck()->toolTip().contains(QStringLiteral("bitwise")));
        QVERIFY(page.gpuDataChoice()->toolTip().contains(QStringLiteral("GPU")));
        QVERIFY(page.allreduceChoice()->toolTip().contains(QStringLiteral("host")));
        QCOMPARE(page.cudaGraphsCheck()->text(), QStringLiteral("CUDA &graphs"));
        const QString graphsTip = page.cudaGraphsCheck()->toolTip();
        QVERIFY(graphsTip.contains(QStringLiteral("CUDA graph")));
        QVERIFY(graphsTip.contains(QStringLiteral("bitwise the same")));
        QVERIFY(graphsTip.contains(QStringLiteral("For GPU towers")));
    }

    void towerOptionsRoundTrip()
    {
        DevicesPage page;
        QSignalSpy changed(&page, &DevicesPage::towerOptionsChanged);
        page.setGpuData("off");
        QCOMPARE(page.gpuData(), std::string("off"));
        QCOMPARE(page.gpuDataChoice()->currentText(), QStringLiteral("batches from the host"));
        page.setAllreduce("host");
        QCOMPARE(page.allreduce(), std::string("host"));
        QCOMPARE(page.allreduceChoice()->currentText(), QStringLiteral("through the host"));
        page.setBucketMb(2.5);
        QCOMPARE(page.bucketMb(), 2.5);
        QCOMPARE(page.bucketSize()->text(), QLocale().toString(2.5) + QStringLiteral(" MiB"));
        QCOMPARE(changed.count(), 3);
        page.setBucketMb(0); // one collective after backward
        QCOMPARE(page.bucketMb(), 0.0);
        QCOMPARE(page.bucketSize()->text(), page.bucketSize()->specialValueText());
        page.setBucketMb(1e9); // clamped to what the config takes
        QCOMPARE(page.bucketMb(), TrainConfig::kMaxBucketMb);
        QCOMPARE(changed.count(), 5);
        page.setGpuData("auto");
        page.setAllreduce("auto");
        QCOMPARE(page.gpuData(), std::string("auto"));
        QCOMPARE(page.allreduce(), std::string("auto"));
        QCOMPARE(changed.count(), 7);
        // A value this version does not know (a config from another one) gives the default.
        page.setGpuData("off");
        page.setGpuData("sometimes");
        QCOMPARE(page.gpuData(), std::string("auto"));
        page.setAllreduce("host");
        page.setAllreduce("mpi");
        QCOMPARE(page.allreduce(), std::string("auto"));
        // Typed in, as a user does.
        page.bucketSize()->selectAll();
        QTest::keyClicks(page.bucketSize(), QStringLiteral("50"));
        QTest::keyClick(page.bucketSize(), Qt::Key_Enter);
        QCOMPARE(page.bucketMb(), 50.0);
        // CUDA graphs: off and on again, a signal for each change and none for the same value.
        changed.clear();
        page.setCudaGraphs(false);
        QVERIFY(!page.cudaGraphs());
        QVERIFY(!page.cudaGraphsCheck()->isChecked());
        QCOMPARE(changed.count(), 1);
        page.setCudaGraphs(false);
        QCOMPARE(changed.count(), 1);
        page.setCudaGraphs(true);
        QVERIFY(page.cudaGraphs());
        QCOMPARE(changed.count(), 2);
        page.setTf32(true);
        QVERIFY(page.tf32() && page.tf32Check()->isChecked());
        page.setCudnnBenchmark(true);
        QVERIFY(page.cudnnBenchmark() && page.cudnnBenchmarkCheck()->isChecked());
        QCOMPARE(changed.count(), 4);
    }

    // The data and averaging settings apply to GPU towers only (as the threads to CPU towers
    // only); the buckets to both. All are fixed while a run is going.
    void towerOptionsFollowTheTowers()
    {
        DevicesPage page;
        auto* model = page.deviceModel();
        auto* threads = page.findChildren<QSpinBox*>().at(1);
        QCOMPARE(threads->specialValueText(), QStringLiteral("share the cores"));
        auto* data = page.gpuDataChoice();
        auto* averaging = page.allreduceChoice();
        auto* graphs = page.cudaGraphsCheck();
        auto* bucket = page.bucketSize();
        auto expect = [&](bool gpuOn, bool cpuOn, bool bothOn) {
            QCOMPARE(data->isEnabled(), gpuOn);
            QCOMPARE(averaging->isEnabled(), gpuOn);
            QCOMPARE(graphs->isEnabled(), gpuOn);
            QCOMPARE(page.tf32Check()->isEnabled(), gpuOn);
            QCOMPARE(page.cudnnBenchmarkCheck()->isEnabled(), gpuOn);
            QCOMPARE(threads->isEnabled(), cpuOn);
            QCOMPARE(bucket->isEnabled(), bothOn);
            QCOMPARE(page.precisionChoice()->isEnabled(), bothOn);
        };
        model->setDevices(machineWith(0)); // CPU towers
        QVERIFY(page.selectedGpus().empty());
        expect(false, true, true);
        model->setDevices(machineWith(2)); // two GPU towers
        QCOMPARE(page.selectedGpus(), (std::vector<int>{0, 1}));
        expect(true, false, true);
        page.setTowerSetupEnabled(false); // a run is going
        expect(false, false, false);
        page.setTowerSetupEnabled(true); // the GPU towers still: the threads stay off
        expect(true, false, true);
        for (int row : {1, 2})
            QVERIFY(model->setData(model->index(row, towers::ui::DeviceModel::Use), Qt::Unchecked,
                                   Qt::CheckStateRole));
        QVERIFY(page.selectedGpus().empty()); // back to CPU towers
        expect(false, true, true);
        page.setTowerSetupEnabled(false);
        expect(false, false, false);
        page.setTowerSetupEnabled(true);
        expect(false, true, true);
        // Disabled controls keep their values, and a page set up before GPUs are checked has
        // them when they are.
        page.setGpuData("off");
        page.setAllreduce("host");
        page.setCudaGraphs(false);
        model->setDevices(machineWith(1));
        expect(true, false, true);
        QCOMPARE(page.gpuData(), std::string("off"));
        QCOMPARE(page.allreduce(), std::string("host"));
        QVERIFY(!page.cudaGraphs());
        // A user's click (the control is enabled with a GPU tower).
        QTest::mouseClick(graphs, Qt::LeftButton, {}, QPoint(4, graphs->height() / 2));
        QVERIFY(page.cudaGraphs());
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
        // On the page, the flag follows each tower's mean compute time.
        DevicesPage page;
        page.showTowerTimes(10, computeOnly({20, 21, 40}));
        page.showTowerTimes(20, computeOnly({20, 22, 41}));
        auto* chart = page.towerChart();
        QCOMPARE(chart->barCount(), 3);
        QVERIFY(!chart->isHighlighted(0));
        QVERIFY(chart->isHighlighted(2));
        QCOMPARE(chart->value(2, DevicesPage::ComputePart), 41.0);
        // One slow step among steady ones does not flag a tower: the flag follows recent means.
        for (int s = 3; s <= 12; ++s) page.showTowerTimes(10 * s, computeOnly({20, 20, 20}));
        page.showTowerTimes(130, computeOnly({20, 60, 20}));
        QCOMPARE(chart->value(1, DevicesPage::ComputePart), 60.0);
        QVERIFY(!chart->isHighlighted(1));
    }

    // Each tower's four parts reach its stacked bar, in the order a step runs them; the timeline
    // has a column per report, of the towers' mean or of one tower.
    void splitPerTower()
    {
        DevicesPage page;
        auto* chart = page.towerChart();
        QCOMPARE(chart->segmentCount(), int(DevicesPage::TowerPartCount));
        QCOMPARE(chart->segmentName(DevicesPage::DataPart), QStringLiteral("data wait"));
        QCOMPARE(chart->segmentName(DevicesPage::ComputePart), QStringLiteral("compute"));
        QCOMPARE(chart->segmentName(DevicesPage::CommunicationPart),
                 QStringLiteral("communication"));
        QCOMPARE(chart->segmentName(DevicesPage::UpdatePart), QStringLiteral("update"));
        page.showTowerTimes(100, {split(30, 2, 1, 3), split(25, 7.5, 1.5, 3.25)});
        QCOMPARE(chart->barCount(), 2);
        QCOMPARE(chart->label(1), QStringLiteral("tower 1"));
        QCOMPARE(chart->value(1, DevicesPage::DataPart), 1.5);
        QCOMPARE(chart->value(1, DevicesPage::ComputePart), 25.0);
        QCOMPARE(chart->value(1, DevicesPage::CommunicationPart), 7.5);
        QCOMPARE(chart->value(1, DevicesPage::UpdatePart), 3.25);
        QCOMPARE(chart->total(0), 36.0);
        QCOMPARE(chart->total(1), 37.25);
        // What is drawn: one QCPBars per part, stacked on the previous part, a point per tower.
        auto* comm = chart->segmentBars(DevicesPage::CommunicationPart);
        QCOMPARE(comm->barBelow(), chart->segmentBars(DevicesPage::ComputePart));
        QCOMPARE(chart->segmentBars(DevicesPage::DataPart)->barBelow(), nullptr);
        QCOMPARE(comm->data()->size(), 2);
        QCOMPARE(comm->data()->at(0)->value, 2.0);
        QCOMPARE(comm->data()->at(1)->value, 7.5);
        // Distinct colours, and the legend names the parts.
        QSet<QRgb> colors;
        for (int s = 0; s < chart->segmentCount(); ++s)
            colors.insert(chart->segmentBars(s)->brush().color().rgb());
        QCOMPARE(colors.size(), chart->segmentCount());
        QVERIFY(chart->customPlot()->legend->visible());
        QCOMPARE(chart->customPlot()->legend->itemCount(), 4);
        // The tooltip says each part in ms and as a share of the step.
        const QString tip =
            chart->toolTip(1).replace(QStringLiteral("&nbsp;"), QStringLiteral(" "));
        QVERIFY2(tip.contains(QStringLiteral("tower 1")) &&
                     tip.contains(QStringLiteral("37.3 ms")) &&
                     tip.contains(QStringLiteral("7.5 ms")) && tip.contains(QStringLiteral("20 %")),
                 qPrintable(tip));

        page.showTowerTimes(110, {split(32, 2, 1, 3), split(27, 8, 1, 3)});
        auto* timeline = page.towerTimeline();
        QCOMPARE(page.timelineTower(), -1); // the towers' mean
        QCOMPARE(timeline->barCount(), 2);
        QCOMPARE(timeline->key(0), 100.0);
        QCOMPARE(timeline->key(1), 110.0);
        QCOMPARE(timeline->value(0, DevicesPage::ComputePart), 27.5);
        QCOMPARE(timeline->value(1, DevicesPage::CommunicationPart), 5.0);
        QCOMPARE(timeline->label(1), QStringLiteral("step 110"));
        auto* choice = page.timelineChoice();
        QVERIFY(choice);
        QCOMPARE(choice->count(), 3); // mean, tower 0, tower 1
        choice->setCurrentIndex(2);
        QCOMPARE(page.timelineTower(), 1);
        QCOMPARE(timeline->value(0, DevicesPage::ComputePart), 25.0);
        QCOMPARE(timeline->value(1, DevicesPage::CommunicationPart), 8.0);
        // Bounded to the last kTimelineReports reports.
        for (int s = 12; s < 12 + DevicesPage::kTimelineReports; ++s)
            page.showTowerTimes(10 * s, {split(30, 2, 1, 3), split(s, 2, 1, 3)});
        QCOMPARE(timeline->barCount(), DevicesPage::kTimelineReports);
        QCOMPARE(timeline->key(0), 120.0);
        QCOMPARE(timeline->value(0, DevicesPage::ComputePart), 12.0); // still tower 1
        QCOMPARE(page.timelineTower(), 1);
    }

    // The verdict names only what the numbers show.
    void verdicts_data()
    {
        QTest::addColumn<std::vector<TowerTimes>>("towers");
        QTest::addColumn<QStringList>("says");
        QTest::addColumn<QStringList>("doesNotSay");
        const QString balanced = QStringLiteral("Balanced"),
                      data = QStringLiteral("Waiting on the data"),
                      others = QStringLiteral("Waiting on the others"),
                      comm = QStringLiteral("Communication-bound"),
                      unbalanced = QStringLiteral("Unbalanced");
        // Compute 92 and 94 % of the steps (93 % on average); the slowest tower 41 ms, the
        // fastest 40.
        QTest::newRow("balanced") << std::vector{split(40, 1.5, 1, 1), split(41, 0.5, 1, 1)}
                                  << QStringList{balanced, QStringLiteral("93 %"),
                                                 QStringLiteral("41.0 ms"),
                                                 QStringLiteral("40.0 ms")}
                                  << QStringList{data, others, comm, unbalanced};
        // 12 ms of a 45 ms step spent waiting for the batch: 27 %.
        QTest::newRow("data-bound")
            << std::vector{split(30, 1, 12, 2), split(30, 1, 12, 2)}
            << QStringList{data,
                           QStringLiteral("the towers wait for their batch 27 % of the step: the "
                                          "input pipeline")}
            << QStringList{balanced, others, comm, unbalanced};
        // One tower: 12 ms of its 44 ms step, 27 %.
        QTest::newRow("one tower, data-bound")
            << std::vector{split(30, 0, 12, 2)}
            << QStringList{data,
                           QStringLiteral("the tower waits for its batch 27 % of its step: the "
                                          "input pipeline")}
            << QStringList{balanced, others, comm, unbalanced};
        // Tower 0 finishes backward 14 ms early and waits for tower 1: 14 of its 38 ms, 37 %.
        QTest::newRow("waits on the others")
            << std::vector{split(20, 15, 1, 2), split(34, 1, 1, 2)}
            << QStringList{others, QStringLiteral("Tower 0 waits on the others 37 % of its step"),
                           QStringLiteral("tower 1 computes 70 % longer")}
            << QStringList{balanced, data, comm, QStringLiteral("Tower 1 waits")};
        // Towers 0 and 1 both wait for tower 2: 14 of their 38 ms.
        QTest::newRow("two wait on the others")
            << std::vector{split(20, 15, 1, 2), split(20, 15, 1, 2), split(34, 1, 1, 2)}
            << QStringList{others,
                           QStringLiteral("Towers 0 and 1 wait on the others 37 % of their step"),
                           QStringLiteral("tower 2 computes 70 % longer")}
            << QStringList{balanced, data, comm, QStringLiteral("Tower 2 waits")};
        // Both towers balanced but 20 of 53 ms averaging gradients: the averaging itself.
        QTest::newRow("communication-bound")
            << std::vector{split(30, 20, 1, 2), split(30, 20, 1, 2)}
            << QStringList{comm, QStringLiteral("38 %")}
            << QStringList{balanced, data, others, unbalanced};
        // Tower 0: 6 ms averaging (tower 1 spends as much) and 4 ms waiting for tower 1, neither
        // 20 % of the 32 ms step alone, but 31 % together.
        QTest::newRow("averaging and waiting")
            << std::vector{split(20, 10, 1, 1), split(24, 6, 1, 1)}
            << QStringList{QStringLiteral("Waiting on communication"),
                           QStringLiteral("Tower 0 spends 31 % of its step")}
            << QStringList{balanced, data, others, comm, unbalanced};
        // The same with two towers like tower 0: each 10 of its 32 ms step averaging and waiting.
        QTest::newRow("two averaging and waiting")
            << std::vector{split(20, 10, 1, 1), split(20, 10, 1, 1), split(24, 6, 1, 1)}
            << QStringList{QStringLiteral("Waiting on communication"),
                           QStringLiteral("Towers 0 and 1 spend up to 31 % of their step")}
            << QStringList{balanced, data, others, comm, unbalanced};
        // A tower 40 % slower, but the data wait hides most of it: both are said.
        QTest::newRow("unbalanced and data-bound")
            << std::vector{split(10, 4.5, 30, 1), split(14, 0.5, 30, 1)}
            << QStringList{unbalanced, QStringLiteral("Tower 1 computes more than 25 %"), data}
            << QStringList{balanced, others, comm};
        // Two towers 40 % slower than the other two.
        QTest::newRow("two unbalanced")
            << computeOnly({10, 10, 14, 14})
            << QStringList{unbalanced, QStringLiteral("Towers 2 and 3 compute more than 25 %")}
            << QStringList{balanced, data, others, comm};
        QTest::newRow("one tower")
            << std::vector{split(45, 0, 2.5, 2.5)}
            << QStringList{QStringLiteral("One tower"), QStringLiteral("compute 90 %")}
            << QStringList{balanced, data, others, comm, unbalanced};
    }

    void verdicts()
    {
        QFETCH(std::vector<TowerTimes>, towers);
        QFETCH(QStringList, says);
        QFETCH(QStringList, doesNotSay);
        // The page judges each tower's mean over the recent reports; steady reports give the
        // same verdict as the static function.
        DevicesPage page;
        for (int s = 1; s <= 3; ++s) page.showTowerTimes(10 * s, towers);
        const QString verdict = page.verdict();
        QCOMPARE(verdict, DevicesPage::verdictFor(towers));
        for (const QString& text : says)
            QVERIFY2(verdict.contains(text),
                     qPrintable(verdict + QStringLiteral(" lacks ") + text));
        for (const QString& text : doesNotSay)
            QVERIFY2(!verdict.contains(text), qPrintable(verdict + QStringLiteral(" has ") + text));
    }

    // A verdict follows the recent mean: one step waiting on the data does not change it.
    void verdictFollowsTheRecentMean()
    {
        DevicesPage page;
        for (int s = 1; s <= 10; ++s)
            page.showTowerTimes(s, {split(40, 1, 1, 1), split(40, 1, 1, 1)});
        page.showTowerTimes(11, {split(40, 1, 40, 1), split(40, 1, 40, 1)});
        QVERIFY2(page.verdict().contains(QStringLiteral("Balanced")), qPrintable(page.verdict()));
        for (int s = 12; s <= 20; ++s)
            page.showTowerTimes(s, {split(40, 1, 40, 1), split(40, 1, 40, 1)});
        QVERIFY2(page.verdict().contains(QStringLiteral("Waiting on the data")),
                 qPrintable(page.verdict()));
    }

    void clearing()
    {
        DevicesPage page;
        const QString idle = page.verdict();
        QVERIFY(idle.contains(QStringLiteral("Start a run")));
        for (int s = 1; s <= 3; ++s)
            page.showTowerTimes(s, {split(20, 15, 1, 2), split(34, 1, 1, 2), split(20, 15, 1, 2)});
        page.setTimelineTower(2);
        QCOMPARE(page.timelineTower(), 2);
        QVERIFY(page.verdict() != idle);
        page.clearTowerTimes();
        QCOMPARE(page.towerChart()->barCount(), 0);
        QCOMPARE(page.towerTimeline()->barCount(), 0);
        QCOMPARE(page.towerChart()->segmentBars(DevicesPage::ComputePart)->data()->size(), 0);
        QCOMPARE(page.timelineTower(), -1);
        QCOMPARE(page.timelineChoice()->count(), 1);
        QCOMPARE(page.verdict(), idle);
        // A new run of two towers starts afresh: nothing of the three-tower run is left.
        page.showTowerTimes(1, {split(30, 1, 1, 1), split(30, 1, 1, 1)});
        QCOMPARE(page.towerChart()->barCount(), 2);
        QCOMPARE(page.towerTimeline()->barCount(), 1);
        QCOMPARE(page.timelineChoice()->count(), 3);
        QVERIFY(page.verdict().contains(QStringLiteral("Balanced")));
    }
};

QTEST_MAIN(TestDevicesPage)
#include "tst_devices_page.moc"
