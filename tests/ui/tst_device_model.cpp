// DeviceModel: consistent as an item model; the real device list (the CPU, locked in when there
// is no GPU to train on); GPUs without a backend are listed but stay out; with trainable GPU rows
// (what a GPU backend adds) every device can be toggled.
#include <QAbstractItemModelTester>
#include <QSignalSpy>
#include <QTest>

#include "engine/monitor/nvml.h"
#include "ui/models/device_model.h"

using towers::app::DeviceDescription;
using towers::ui::DeviceModel;

namespace {
std::vector<DeviceDescription> cpuAndGpus(int gpus)
{
    std::vector<DeviceDescription> d(1);
    d[0].id = QStringLiteral("cpu");
    d[0].name = QStringLiteral("Test CPU");
    d[0].logicalCores = 16;
    d[0].memoryBytes = 64LL << 30;
    d[0].isa = QStringLiteral("avx2");
    for (int g = 0; g < gpus; ++g) {
        DeviceDescription gpu;
        gpu.kind = DeviceDescription::Kind::Gpu;
        gpu.id = QStringLiteral("gpu%1").arg(g);
        gpu.name = QStringLiteral("NVIDIA H100");
        gpu.memoryBytes = 80LL << 30;
        gpu.computeCapability = QStringLiteral("9.0");
        gpu.cudaNumber = g;
        d.push_back(gpu);
    }
    return d;
}
} // namespace

class TestDeviceModel : public QObject
{
    Q_OBJECT
private slots:
    void realDevices()
    {
        DeviceModel model;
        QAbstractItemModelTester tester(&model,
                                        QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setDevices(towers::app::listDevices());
        QVERIFY(model.rowCount() >= 1);
        QCOMPARE(model.data(model.index(0, DeviceModel::Use), DeviceModel::DeviceIdRole).toString(),
                 QStringLiteral("cpu"));
        // Every GPU NVML sees is a row; without a GPU backend none is a tower.
        if (!towers::app::gpuBackendAvailable()) {
            QCOMPARE(model.gpuCount(), int(towers::app::nvml().gpus().size()));
            QCOMPARE(model.includedIds(), QStringList{QStringLiteral("cpu")});
        } else {
            QVERIFY(model.gpuCount() >= 1);
            QVERIFY(model.includedIds().contains(QStringLiteral("gpu0")));
        }
    }

    // GPUs this build cannot train on (no GPU backend): listed, unchecked, not checkable, with
    // the reason as tooltip; the CPU stays locked in.
    void monitoredOnlyGpus()
    {
        DeviceModel model;
        QAbstractItemModelTester tester(&model,
                                        QAbstractItemModelTester::FailureReportingMode::QtTest);
        auto devices = cpuAndGpus(2);
        for (auto& d : devices)
            if (d.kind == DeviceDescription::Kind::Gpu) d.trainable = false;
        model.setDevices(devices);
        QCOMPARE(model.gpuCount(), 2);
        QCOMPARE(model.includedIds(), QStringList{QStringLiteral("cpu")});
        const QModelIndex cpuUse = model.index(0, DeviceModel::Use),
                          gpuUse = model.index(1, DeviceModel::Use);
        QVERIFY(!(model.flags(cpuUse) & Qt::ItemIsUserCheckable));
        QVERIFY(!(model.flags(gpuUse) & Qt::ItemIsUserCheckable));
        QCOMPARE(model.data(gpuUse, Qt::CheckStateRole).value<Qt::CheckState>(), Qt::Unchecked);
        QVERIFY(!model.setData(gpuUse, Qt::Checked, Qt::CheckStateRole));
        QVERIFY(model.data(gpuUse, Qt::ToolTipRole)
                    .toString()
                    .contains(QStringLiteral("no GPU backend")));
        QCOMPARE(model.data(model.index(1, DeviceModel::Device)).toString(),
                 QStringLiteral("NVIDIA H100"));
    }

    void cpuIsLockedWithoutGpu()
    {
        DeviceModel model;
        QAbstractItemModelTester tester(&model,
                                        QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setDevices(cpuAndGpus(0));
        const QModelIndex use = model.index(0, DeviceModel::Use);
        QCOMPARE(model.data(use, Qt::CheckStateRole).value<Qt::CheckState>(), Qt::Checked);
        QVERIFY(!(model.flags(use) & Qt::ItemIsUserCheckable));
        QVERIFY(!model.setData(use, Qt::Unchecked, Qt::CheckStateRole));
        QVERIFY(model.isIncluded(0));
        QCOMPARE(model.data(model.index(0, DeviceModel::Memory)).toString(),
                 QStringLiteral("64.0 GiB"));
        QCOMPARE(model.data(model.index(0, DeviceModel::Cores)).toString(), QStringLiteral("16"));
    }

    void gpusAreRowsOfData()
    {
        DeviceModel model;
        QAbstractItemModelTester tester(&model,
                                        QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setDevices(cpuAndGpus(2));
        QCOMPARE(model.rowCount(), 3);
        QCOMPARE(model.gpuCount(), 2);
        QCOMPARE(model.includedIds(), (QStringList{QStringLiteral("cpu"), QStringLiteral("gpu0"),
                                                   QStringLiteral("gpu1")}));
        QCOMPARE(model.data(model.index(2, DeviceModel::Capability)).toString(),
                 QStringLiteral("compute 9.0"));
        QSignalSpy changed(&model, &DeviceModel::inclusionChanged);
        QSignalSpy data(&model, &QAbstractItemModel::dataChanged);
        const QModelIndex cpu = model.index(0, DeviceModel::Use);
        QVERIFY(model.flags(cpu) & Qt::ItemIsUserCheckable); // with GPUs the CPU can be left out
        QVERIFY(model.setData(cpu, Qt::Unchecked, Qt::CheckStateRole));
        QVERIFY(model.setData(model.index(2, DeviceModel::Use), Qt::Unchecked, Qt::CheckStateRole));
        QCOMPARE(model.includedIds(), QStringList{QStringLiteral("gpu0")});
        QCOMPARE(changed.count(), 2);
        QCOMPARE(data.count(), 2);
        // Only the check box column is editable.
        QVERIFY(
            !model.setData(model.index(1, DeviceModel::Device), QStringLiteral("x"), Qt::EditRole));
    }

    void byteLabels()
    {
        QCOMPARE(towers::ui::bytesLabel(0), QStringLiteral("–"));
        QCOMPARE(towers::ui::bytesLabel(512), QStringLiteral("512 B"));
        QCOMPARE(towers::ui::bytesLabel(1536), QStringLiteral("1.5 KiB"));
        QCOMPARE(towers::ui::bytesLabel(80.0 * (1LL << 30)), QStringLiteral("80.0 GiB"));
    }
};

QTEST_MAIN(TestDeviceModel)
#include "tst_device_model.moc"
