// The whole application on a tiny generated dataset: the main window finds the data, a click on
// Start trains for real on two CPU towers, points arrive on the plots and the tower balance on the
// Devices page, Stop ends the run with a checkpoint, the run shows up under Runs, its checkpoint
// opens in Classify and classifies an image file. Closing the window during a run stops the run
// first and keeps its checkpoint.
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include "app/devices/device_list.h"
#include "app/inference/image_files.h"
#include "app/runs/run_scanner.h"
#include "app/settings/app_settings.h"
#include "training_fixture.h"
#include "ui/main_window.h"
#include "ui/models/device_model.h"
#include "ui/models/run_list_model.h"
#include "ui/pages/classify_page.h"
#include "ui/pages/data_page.h"
#include "ui/pages/devices_page.h"
#include "ui/pages/runs_page.h"
#include "ui/pages/train_page.h"
#include "ui/plots/plot_widget.h"
#include "ui/plots/stacked_bar_chart.h"
#include "ui/widgets/error_banner.h"
#include "ui_test_support.h"

using towers::ui::MainWindow;
namespace tt = towers::test;

namespace {
QPushButton* button(QWidget* page, const QString& text)
{
    for (auto* b : page->findChildren<QPushButton*>())
        if (b->text().remove(QLatin1Char('&')) == text) return b;
    return nullptr;
}
} // namespace

class TestEndToEnd : public QObject
{
    Q_OBJECT
    QTemporaryDir m_root;

private slots:
    void initTestCase()
    {
        qputenv("XDG_DATA_HOME", m_root.filePath(QStringLiteral("xdg")).toUtf8());
        qunsetenv("TOWERS_DATA");
        qunsetenv("TOWERS_RUNS");
        tt::writeTinyMnist(tt::fsPath(m_root.filePath(QStringLiteral("data"))));
    }

    void trainStopClassify()
    {
        towers::app::AppSettings settings(tt::settingsFile(m_root.path()));
        settings.setDatasetName(QStringLiteral("mnist"));
        settings.setDataDir(m_root.filePath(QStringLiteral("data")));
        settings.setRunsDir(m_root.filePath(QStringLiteral("runs")));
        // The last configuration: a long run of fashion-fast on two towers, every step logged.
        auto options = tt::tinyRun({}, {}, 1000000, 2);
        settings.setLastConfigJson(QString::fromStdString(options.config.toJson()));

        MainWindow w(settings);
        w.resize(1280, 800);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QSignalSpy loaded(w.dataPage(), &towers::ui::DataPage::datasetLoaded);
        QVERIFY(loaded.wait(20000));
        QCOMPARE(w.dataPage()->found()->trainCount, 256);
        // The run trains on the images the Data page holds: one copy in memory.
        const auto runOptions = w.newRunOptions(nullptr);
        QVERIFY(runOptions && runOptions->dataset &&
                runOptions->dataset == w.dataPage()->loadedDataset());
        // A machine whose GPUs the backend can drive trains on them by default.
        const std::string defaultBackend = towers::app::gpuBackendAvailable() ? "cuda" : "onednn";
        QCOMPARE(runOptions->config.backend, defaultBackend);
        {
            // Checked GPUs on the Devices page make a run of GPU towers, one per GPU.
            auto* devices = w.devicesPage()->deviceModel();
            auto list = towers::app::listDevices();
            for (int g : {0, 1}) {
                towers::app::DeviceDescription gpu;
                gpu.kind = towers::app::DeviceDescription::Kind::Gpu;
                gpu.id = QStringLiteral("gpu%1").arg(g);
                gpu.cudaNumber = g;
                list.push_back(gpu);
            }
            devices->setDevices(list);
            const auto gpuOptions = w.newRunOptions(nullptr);
            QVERIFY(gpuOptions);
            QCOMPARE(gpuOptions->config.backend, std::string("cuda"));
            QCOMPARE(gpuOptions->config.gpus, (std::vector<int>{0, 1}));
            QCOMPARE(gpuOptions->config.towers, 2);
            devices->setDevices(towers::app::listDevices());
            QCOMPARE(w.newRunOptions(nullptr)->config.backend, defaultBackend);
        }

        w.showPage(MainWindow::Train);
        auto* start = button(w.trainPage(), QStringLiteral("Start"));
        QVERIFY2(start->isEnabled(), qPrintable(start->toolTip()));
        QTest::mouseClick(start, Qt::LeftButton);
        QVERIFY(w.trainPage()->isActive());
        QTRY_VERIFY_WITH_TIMEOUT(w.trainPage()->lossPlot()->pointCount(0) >= 5, 60000);
        QVERIFY(w.trainPage()->speedPlot()->pointCount(0) >= 5);
        // The Devices page splits each tower's step: the trainer's real times reach its charts.
        auto* towerChart = w.devicesPage()->towerChart();
        QCOMPARE(towerChart->barCount(), 2);
        for (int t = 0; t < 2; ++t)
            QVERIFY(towerChart->value(t, towers::ui::DevicesPage::ComputePart) > 0);
        QVERIFY(w.devicesPage()->towerTimeline()->barCount() >= 1);

        QSignalSpy finished(w.trainPage(), &towers::ui::TrainPage::runFinished);
        QTest::mouseClick(button(w.trainPage(), QStringLiteral("Stop")), Qt::LeftButton);
        QVERIFY(finished.wait(30000));
        const QString runDir = finished.at(0).at(2).toString();
        const auto run = towers::app::readRun(runDir);
        QVERIFY(!run.checkpoints.empty());
        QCOMPARE(run.checkpoints.back().step, w.trainPage()->history().lastStep());

        // The run is listed; its checkpoint goes to Classify.
        w.showPage(MainWindow::Runs);
        QTRY_VERIFY_WITH_TIMEOUT(w.runsPage()->runModel()->rowOf(runDir) >= 0 &&
                                     w.runsPage()->selectedRun() == runDir,
                                 10000);
        QTRY_VERIFY(!w.runsPage()->selectedCheckpoint().isEmpty());
        QSignalSpy classifierLoaded(w.classifyPage(), &towers::ui::ClassifyPage::checkpointLoaded);
        QTest::mouseClick(button(w.runsPage(), QStringLiteral("Classify with this checkpoint")),
                          Qt::LeftButton);
        QCOMPARE(w.currentPage(), int(MainWindow::Classify));
        QVERIFY(classifierLoaded.wait(20000));
        QCOMPARE(classifierLoaded.at(0).at(0).toBool(), true);

        const auto data = w.dataPage()->loadedDataset();
        const QString png = m_root.filePath(QStringLiteral("digit.png"));
        QVERIFY(towers::app::toQImage(data->test, 3).save(png));
        QSignalSpy answered(w.classifyPage(), &towers::ui::ClassifyPage::imageClassified);
        w.classifyPage()->classifyFile(png);
        QVERIFY(answered.wait(20000));
        QCOMPARE(w.classifyPage()->topClasses().size(), std::size_t(5));
        QVERIFY(!w.banner()->isVisible());
    }

    void closingDuringARunStopsItFirst()
    {
        towers::app::AppSettings settings(tt::settingsFile(m_root.path()));
        MainWindow w(settings); // the settings of the test above: mnist, two towers
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QSignalSpy loaded(w.dataPage(), &towers::ui::DataPage::datasetLoaded);
        QVERIFY(loaded.wait(20000));
        w.trainPage()->start();
        QTRY_VERIFY_WITH_TIMEOUT(w.trainPage()->history().lastStep() >= 2, 60000);
        const QString runDir = w.trainPage()->runDirectory();
        w.setCloseQuestionAnswer(false); // "No": the window stays, the run goes on
        QVERIFY(!w.close());
        QVERIFY(w.trainPage()->isActive());
        w.setCloseQuestionAnswer(true); // "Yes": stop, then close
        QVERIFY(!w.close());
        QTRY_VERIFY_WITH_TIMEOUT(!w.isVisible(), 30000);
        QVERIFY(!w.trainPage()->isActive());
        QVERIFY(!towers::app::readRun(runDir).checkpoints.empty());
    }
};

QTEST_MAIN(TestEndToEnd)
#include "tst_end_to_end.moc"
