// DataPage on generated datasets and a local HTTP server: discovery (counts, shape, classes), the
// grid and its class filter, bad files reported with their name, the distortion toggle, and the
// download button: a verified download that makes the dataset appear, a checksum mismatch that
// is reported, and a cancel that is not an error; the hint under the images per class where some
// classes have less than half the largest's.
#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include "app/settings/app_settings.h"
#include "dataset_files.h"
#include "engine/data/dataset_manifest.h"
#include "http_test_server.h"
#include "test_files.h"
#include "ui/models/sample_image_model.h"
#include "ui/pages/data_page.h"
#include "ui/plots/stacked_bar_chart.h"
#include "ui_test_support.h"

using towers::ui::DataPage;
using towers::ui::SampleImageModel;
namespace tt = towers::test;

namespace {
// Labels of the class combo box, "All classes" first.
QStringList comboTexts(QComboBox* box)
{
    QStringList t;
    for (int i = 0; i < box->count(); ++i) t << box->itemText(i);
    return t;
}

QComboBox* classCombo(DataPage& page)
{
    for (auto* box : page.findChildren<QComboBox*>())
        if (box->count() > 0 && box->itemData(0).toInt() == -1) return box;
    return nullptr;
}
} // namespace

namespace {
// A small MNIST in `dir`, the data folder of `settings`.
void useMnistIn(const QTemporaryDir& dir, towers::app::AppSettings& settings)
{
    tt::writeIdxDataset(tt::fsPath(dir.filePath(QStringLiteral("mnist"))), 30, 10, 28, 28, true, 2);
    settings.setDataDir(dir.path());
}
} // namespace

class TestDataPage : public QObject
{
    Q_OBJECT
    QTemporaryDir m_home;

private slots:
    void initTestCase()
    {
        // Nothing from the real user's folders: the search path is the page's folder, an empty
        // XDG folder and /usr/share/datasets.
        qputenv("XDG_DATA_HOME", m_home.filePath(QStringLiteral("xdg")).toUtf8());
        qunsetenv("TOWERS_DATA");
        qunsetenv("TOWERS_DOWNLOAD_BASE_URL");
    }

    void findsAndShowsCifar10()
    {
        QTemporaryDir dir;
        tt::writeCifar10(tt::fsPath(dir.filePath(QStringLiteral("cifar10"))), 20, 30, 3);
        towers::app::AppSettings settings(tt::settingsFile(m_home.path()));
        settings.setDatasetName(QStringLiteral("cifar10"));
        settings.setDataDir(dir.path());
        DataPage page(settings);
        page.show();
        QSignalSpy loaded(&page, &DataPage::datasetLoaded);
        QVERIFY(loaded.wait(10000));
        QVERIFY(page.found().has_value());
        QCOMPARE(page.found()->trainCount, 100);
        QCOMPARE(page.found()->testCount, 30);
        QCOMPARE(page.found()->imageShape, (towers::engine::Shape{32, 32, 3}));
        QCOMPARE(page.loadedDataset()->test.count, 30);
        auto* model = page.sampleModel();
        QCOMPARE(model->matchCount(), 30); // the test split first
        QVERIFY(model->rowCount() > 0);

        // Images per class: a bar per class, training and test counted.
        auto* chart = page.classChart();
        QCOMPARE(chart->barCount(), 10);
        double trainTotal = 0, testTotal = 0;
        for (int c = 0; c < 10; ++c) {
            QCOMPARE(chart->label(c),
                     QString::fromStdString(page.loadedDataset()->classNames[std::size_t(c)]));
            trainTotal += chart->value(c, 0);
            testTotal += chart->value(c, 1);
        }
        QCOMPARE(trainTotal, 100.0);
        QCOMPARE(testTotal, 30.0);
        QVERIFY(!page.classSummary().isEmpty());

        QComboBox* classes = classCombo(page);
        QVERIFY(classes);
        QCOMPARE(classes->count(), 11);
        QCOMPARE(comboTexts(classes).at(1),
                 QString::fromStdString(page.loadedDataset()->classNames[0]));
        const int label = page.loadedDataset()->test.labels[0];
        classes->setCurrentIndex(label + 1);
        QCOMPARE(model->classFilter(), label);
        for (int r = 0; r < model->rowCount(); ++r)
            QCOMPARE(model->data(model->index(r), SampleImageModel::LabelRole).toInt(), label);

        // The "found" text names the location and counts.
        bool named = false;
        for (auto* l : page.findChildren<QLabel*>())
            named = named || (l->text().contains(QStringLiteral("100")) &&
                              l->text().contains(QStringLiteral("cifar10")));
        QVERIFY(named);
    }

    // Images per class: under the summary, where some classes have less than half the largest's
    // training images, how many and the remedy (sampling the classes equally); a class without
    // any is not counted (sampling cannot help it). Nothing for a set whose classes are even, nor
    // for one uneven with no class under half the largest.
    void balanceHintOnlyForAnImbalancedSet_data()
    {
        QTest::addColumn<QVector<int>>("perClass"); // training images of classes 0 to 9
        QTest::addColumn<QString>("hint");
        const QString remedy =
            QStringLiteral(": training can sample the classes equally (Sample the classes "
                           "equally on the Model & hyperparameters page, towers-cli train "
                           "--sampling balanced).");
        QTest::newRow("even") << QVector<int>{10, 10, 10, 10, 10, 10, 10, 10, 10, 10} << QString();
        QTest::newRow("none under half")
            << QVector<int>{12, 12, 12, 12, 12, 8, 8, 8, 8, 8} << QString();
        QTest::newRow("two under half, one empty")
            << QVector<int>{13, 13, 13, 13, 13, 13, 13, 5, 4, 0}
            << QStringLiteral("2 classes have less than half the largest's images") + remedy;
        QTest::newRow("one under half")
            << QVector<int>{11, 11, 11, 11, 11, 11, 11, 11, 11, 1}
            << QStringLiteral("1 class has less than half the largest's images") + remedy;
    }

    void balanceHintOnlyForAnImbalancedSet()
    {
        QFETCH(QVector<int>, perClass);
        QFETCH(QString, hint);
        QTemporaryDir dir;
        const auto folder = tt::fsPath(dir.filePath(QStringLiteral("mnist")));
        std::vector<int> labels;
        for (int c = 0; c < perClass.size(); ++c) labels.insert(labels.end(), perClass[c], c);
        tt::writeIdxDataset(folder, std::int64_t(labels.size()), 10, 28, 28, false, 4);
        tt::writeFile(folder / "train-labels-idx1-ubyte", tt::idxLabels(labels));
        towers::app::AppSettings settings(tt::settingsFile(dir.path()));
        settings.setDatasetName(QStringLiteral("mnist"));
        settings.setDataDir(dir.path());
        DataPage page(settings);
        page.show();
        QSignalSpy loaded(&page, &DataPage::datasetLoaded);
        QVERIFY(loaded.wait(10000));
        for (int c = 0; c < perClass.size(); ++c)
            QCOMPARE(page.classChart()->value(c, 0), double(perClass[c]));
        QVERIFY(!page.classSummary().isEmpty());
        QCOMPARE(page.classBalanceHint(), hint);
        auto* label = page.findChild<QLabel*>(QStringLiteral("balanceHint"));
        QVERIFY(label);
        QCOMPARE(label->isHidden(), hint.isEmpty());
    }

    // An imported dataset whose image files were squashed to size (import --fit squash) says so
    // beside its image size; one cropped, as the table's datasets, says nothing of it.
    void anImportedSetSaysItsFit()
    {
        QTemporaryDir dir;
        const auto folder = tt::fsPath(dir.filePath(QStringLiteral("birds")));
        tt::writeIdxDataset(folder, 20, 10, 28, 28, false, 4);
        std::vector<std::string> classes;
        for (int c = 0; c < 10; ++c) classes.push_back("bird " + std::to_string(c));
        tt::writeText(
            folder / towers::engine::kDatasetManifest,
            towers::engine::datasetManifestJson(
                towers::engine::importedDatasetSpec("birds", {28, 28, 1}, classes, true, "mine",
                                                    towers::engine::ImageFit::Squash),
                {}));
        towers::app::AppSettings settings(tt::settingsFile(dir.path()));
        settings.setDatasetName(QStringLiteral("birds"));
        settings.setDataDir(dir.path());
        DataPage page(settings);
        page.show();
        QSignalSpy loaded(&page, &DataPage::datasetLoaded);
        QVERIFY(loaded.wait(10000));
        const auto saying = [&](const QString& text) {
            for (auto* l : page.findChildren<QLabel*>())
                if (l->text().contains(text)) return true;
            return false;
        };
        QVERIFY(saying(QStringLiteral("(H × W × C), each image file squashed to it, 10 classes")));
    }

    void firstStartShowsADatasetThatIsThere()
    {
        QTemporaryDir dir;
        towers::app::AppSettings settings(tt::settingsFile(dir.path())); // no dataset chosen yet
        useMnistIn(dir, settings);
        DataPage page(settings);
        QSignalSpy loaded(&page, &DataPage::datasetLoaded);
        QVERIFY(loaded.wait(10000));
        QCOMPARE(page.datasetName(), QStringLiteral("mnist")); // the first known dataset found
        QCOMPARE(settings.datasetName(), QStringLiteral("mnist"));
        QCOMPARE(page.found()->trainCount, 30);
    }

    // A saved dataset that is not in the list (an imported one since deleted) is a first start:
    // the first dataset found, not CIFAR-10 (the list's first entry, which is not there), and
    // the log says what became of the saved name. No scan of the list's first entry meanwhile.
    // The saved name stays saved (its data folder may be on a disk not mounted today) until the
    // user chooses a dataset.
    void unknownSavedDatasetGivesWayToOneThatIsThere()
    {
        QTemporaryDir dir;
        towers::app::AppSettings settings(tt::settingsFile(dir.path()));
        useMnistIn(dir, settings);
        settings.setDatasetName(QStringLiteral("nosuch"));
        DataPage page(settings);
        QSignalSpy log(&page, &DataPage::logMessage);
        QSignalSpy scanned(&page, &DataPage::scanFinished);
        QSignalSpy loaded(&page, &DataPage::datasetLoaded);
        QVERIFY(loaded.wait(10000));
        QCOMPARE(page.datasetName(), QStringLiteral("mnist"));
        QCOMPARE(settings.datasetName(), QStringLiteral("nosuch"));
        QCOMPARE(page.missingSavedDataset(), QStringLiteral("nosuch"));
        QCOMPARE(scanned.count(), 1);
        QCOMPARE(scanned.at(0).at(0).toBool(), true);
        QVERIFY(!log.isEmpty());
        const QString said = log.at(0).at(0).toString();
        QVERIFY2(said.contains(QStringLiteral("nosuch")) &&
                     said.contains(QStringLiteral("not found")),
                 qPrintable(said));
        page.setDatasetName(QStringLiteral("cifar10")); // the user's choice
        QCOMPARE(settings.datasetName(), QStringLiteral("cifar10"));
        QVERIFY(page.missingSavedDataset().isEmpty());
    }

    // A data folder chosen while a first start still looks for the first dataset found: it looks
    // again, in that folder (it chose from the old folder's).
    void dataFolderChosenDuringTheFirstLookIsLookedIn()
    {
        QTemporaryDir first, second;
        tt::writeIdxDataset(tt::fsPath(first.filePath(QStringLiteral("mnist"))), 30, 10, 28, 28,
                            true, 2);
        tt::writeCifar10(tt::fsPath(second.filePath(QStringLiteral("cifar10"))), 10, 10, 3);
        towers::app::AppSettings settings(tt::settingsFile(first.path()));
        settings.setDataDir(first.path());
        DataPage page(settings);
        page.setDataDir(second.path()); // before the first look has answered
        QSignalSpy loaded(&page, &DataPage::datasetLoaded);
        QVERIFY(loaded.wait(10000));
        QCOMPARE(page.datasetName(), QStringLiteral("cifar10"));
        QCOMPARE(page.found()->location, tt::fsPath(second.filePath(QStringLiteral("cifar10"))));
    }

    // A dataset chosen while the page still looks for the first dataset found (--dataset at a
    // first start) stays chosen, even when it is the entry shown meanwhile.
    void datasetChosenDuringTheFirstLookStays()
    {
        QTemporaryDir dir;
        towers::app::AppSettings settings(tt::settingsFile(dir.path())); // no dataset chosen yet
        useMnistIn(dir, settings);
        DataPage page(settings);
        QSignalSpy scanned(&page, &DataPage::scanFinished);
        page.setDatasetName(QStringLiteral("cifar10"));
        QVERIFY(scanned.wait(10000));
        QTest::qWait(300); // what the first look found would come by now
        QCOMPARE(page.datasetName(), QStringLiteral("cifar10"));
        QCOMPARE(settings.datasetName(), QStringLiteral("cifar10"));
    }

    // A dataset not found says where it was looked for, on the page and in the one answer that
    // --train waits for (datasetUnavailable; a bad file: badFileIsReportedByName).
    void missingDatasetSaysWhereItLooked()
    {
        QTemporaryDir dir;
        towers::app::AppSettings settings(tt::settingsFile(dir.path()));
        settings.setDatasetName(QStringLiteral("cifar100"));
        settings.setDataDir(dir.path());
        DataPage page(settings);
        QSignalSpy scanned(&page, &DataPage::scanFinished);
        QSignalSpy unavailable(&page, &DataPage::datasetUnavailable);
        QVERIFY(scanned.wait(10000));
        QCOMPARE(scanned.at(0).at(0).toBool(), false);
        QVERIFY(!page.found());
        bool explained = false;
        for (auto* l : page.findChildren<QLabel*>())
            explained = explained || (l->text().contains(QStringLiteral("not found")) &&
                                      l->text().contains(dir.path()));
        QVERIFY(explained);
        QCOMPARE(unavailable.count(), 1);
        const QString why = unavailable.at(0).at(0).toString();
        QVERIFY2(why.contains(QStringLiteral("cifar100 was not found")) && why.contains(dir.path()),
                 qPrintable(why));
    }

    void badFileIsReportedByName()
    {
        QTemporaryDir dir;
        const auto folder = tt::fsPath(dir.filePath(QStringLiteral("cifar10")));
        tt::writeCifar10(folder, 10, 10, 3);
        auto bytes = tt::readFile(folder / "data_batch_3.bin");
        bytes[3073] = 11; // the second record's label: out of range
        tt::writeFile(folder / "data_batch_3.bin", bytes);
        towers::app::AppSettings settings(tt::settingsFile(dir.path()));
        settings.setDatasetName(QStringLiteral("cifar10"));
        settings.setDataDir(dir.path());
        DataPage page(settings);
        QSignalSpy errors(&page, &DataPage::errorOccurred);
        QSignalSpy unavailable(&page, &DataPage::datasetUnavailable);
        QSignalSpy loaded(&page, &DataPage::datasetLoaded);
        // Found by its headers, refused when the records are read (or by the scan, whichever
        // validates the labels): either way one message naming the file and the bad label.
        QVERIFY(errors.wait(10000));
        QCOMPARE(errors.count(), 1);
        const QString message = errors.at(0).at(0).toString();
        QVERIFY2(message.contains(QStringLiteral("data_batch_3.bin")), qPrintable(message));
        QVERIFY2(message.contains(QStringLiteral("11")), qPrintable(message));
        // What --train waits for: one answer, saying why.
        QTRY_COMPARE(unavailable.count(), 1);
        QCOMPARE(loaded.count(), 0);
        const QString why = unavailable.at(0).at(0).toString();
        QVERIFY2(why.contains(QStringLiteral("cifar10")) &&
                     why.contains(QStringLiteral("data_batch_3.bin")),
                 qPrintable(why));
    }

    void badCopyInTheDataFolderIsNotPassedOver()
    {
        // A damaged copy in the data folder and a good one elsewhere on the search path: training
        // would use the data folder's, so the page reports it rather than showing the other.
        QTemporaryDir dir, elsewhere;
        tt::writeCifar10(tt::fsPath(elsewhere.filePath(QStringLiteral("cifar10"))), 10, 10, 3);
        const auto bad = tt::fsPath(dir.filePath(QStringLiteral("cifar10")));
        tt::writeCifar10(bad, 10, 10, 3);
        std::filesystem::resize_file(bad / "test_batch.bin", 100); // not whole records
        qputenv("TOWERS_DATA", elsewhere.path().toUtf8());
        towers::app::AppSettings settings(tt::settingsFile(dir.path()));
        settings.setDatasetName(QStringLiteral("cifar10"));
        settings.setDataDir(dir.path());
        DataPage page(settings);
        QSignalSpy errors(&page, &DataPage::errorOccurred);
        QSignalSpy scanned(&page, &DataPage::scanFinished);
        QVERIFY(scanned.wait(10000));
        qunsetenv("TOWERS_DATA");
        QCOMPARE(scanned.at(0).at(0).toBool(), false);
        QCOMPARE(errors.count(), 1);
        QVERIFY2(errors.at(0).at(0).toString().contains(QStringLiteral("test_batch.bin")),
                 qPrintable(errors.at(0).at(0).toString()));
    }

    void distortionToggle()
    {
        QTemporaryDir dir;
        tt::writeCifar10(tt::fsPath(dir.filePath(QStringLiteral("cifar10"))), 10, 10, 3);
        towers::app::AppSettings settings(tt::settingsFile(dir.path()));
        settings.setDatasetName(QStringLiteral("cifar10"));
        settings.setDataDir(dir.path());
        DataPage page(settings);
        page.show();
        QSignalSpy loaded(&page, &DataPage::datasetLoaded);
        QVERIFY(loaded.wait(10000));
        auto* toggle = page.findChild<QCheckBox*>();
        QVERIFY(toggle);
        QVERIFY(!toggle->isEnabled()); // no recipe yet
        page.setRecipeProvider(
            [](const towers::engine::Dataset&) { return towers::engine::cifarDistortions(24); });
        QVERIFY(toggle->isEnabled());
        toggle->setChecked(true);
        QVERIFY(page.sampleModel()->isDistorted());
        const QImage tile = page.sampleModel()
                                ->data(page.sampleModel()->index(0), SampleImageModel::ImageRole)
                                .value<QImage>();
        QCOMPARE(tile.size(), QSize(24, 24));
        // A recipe for another shape: refused, the toggle goes off and says why.
        page.setRecipeProvider([](const towers::engine::Dataset&) {
            towers::engine::Preprocessing p;
            p.height = p.width = 28;
            p.channels = 1;
            return std::optional<towers::engine::Preprocessing>(p);
        });
        QVERIFY(!toggle->isEnabled());
        QVERIFY(!toggle->isChecked());
        QVERIFY(!page.sampleModel()->isDistorted());
        QVERIFY(!toggle->toolTip().isEmpty());
    }

    void downloadMakesTheDatasetAppear()
    {
        tt::HttpTestServer server;
        QVERIFY(server.listen());
        towers::app::DatasetSpec spec;
        spec.name = QStringLiteral("mnist");
        spec.description = QStringLiteral("test MNIST");
        const std::pair<const char*, tt::Bytes> files[] = {
            {"train-images-idx3-ubyte.gz", tt::gzip(tt::idxImages(40, 28, 28, 9))},
            {"train-labels-idx1-ubyte.gz", tt::gzip(tt::idxLabels(tt::labelsFor(40, 10, 9)))},
            {"t10k-images-idx3-ubyte.gz", tt::gzip(tt::idxImages(12, 28, 28, 10))},
            {"t10k-labels-idx1-ubyte.gz", tt::gzip(tt::idxLabels(tt::labelsFor(12, 10, 10)))},
        };
        for (const auto& [name, bytes] : files) {
            const QByteArray content(reinterpret_cast<const char*>(bytes.data()),
                                     qsizetype(bytes.size()));
            server.setFile(name, content);
            spec.files.append({QString::fromLatin1(name),
                               QUrl(QStringLiteral("http://unused.invalid/") + QLatin1String(name)),
                               tt::md5Hex(content), content.size()});
            spec.requiredFiles << QString::fromLatin1(name);
        }

        QTemporaryDir dir;
        towers::app::AppSettings settings(tt::settingsFile(dir.path()));
        settings.setDatasetName(QStringLiteral("mnist"));
        settings.setDataDir(dir.filePath(QStringLiteral("data")));
        DataPage page(settings);
        QSignalSpy firstScan(&page, &DataPage::scanFinished);
        QVERIFY(firstScan.wait(10000));
        QVERIFY(!page.found());
        // The download button says whether the dataset is there already.
        const auto downloadButton = [&page]() -> QPushButton* {
            for (auto* b : page.findChildren<QPushButton*>())
                if (b->text().startsWith(QStringLiteral("Do&wnload"))) return b;
            return nullptr;
        };
        QVERIFY(downloadButton());
        QCOMPARE(downloadButton()->text(), QStringLiteral("Do&wnload"));
        page.setDownloadCatalog({spec});
        page.setDownloadBaseUrl(server.baseUrl("ok"));

        QSignalSpy finished(&page, &DataPage::downloadFinished);
        QSignalSpy loaded(&page, &DataPage::datasetLoaded);
        QSignalSpy errors(&page, &DataPage::errorOccurred);
        page.startDownload();
        QVERIFY(page.isDownloading());
        QVERIFY(finished.wait(20000));
        QCOMPARE(finished.at(0).at(0).toBool(), true);
        QVERIFY(!page.isDownloading());
        QVERIFY(loaded.wait(10000));
        QVERIFY(page.found());
        QCOMPARE(page.found()->name, std::string("mnist"));
        QCOMPARE(page.found()->trainCount, 40);
        QCOMPARE(page.found()->testCount, 12);
        QCOMPARE(downloadButton()->text(), QStringLiteral("Do&wnload again"));
        QVERIFY2(downloadButton()->toolTip().contains(
                     QString::fromStdString(page.found()->location.string())),
                 qPrintable(downloadButton()->toolTip()));
        QCOMPARE(errors.count(), 0);
        QCOMPARE(page.findChild<QProgressBar*>()->value(), 1000);

        // The same files with one checksum wrong: the download fails and says so.
        spec.name = QStringLiteral("fashion-mnist");
        spec.files[1].md5 = QByteArray(32, '0');
        page.setDownloadCatalog({spec});
        page.setDatasetName(QStringLiteral("fashion-mnist"));
        finished.clear();
        page.startDownload();
        QVERIFY(finished.wait(20000));
        QCOMPARE(finished.at(0).at(0).toBool(), false);
        QCOMPARE(errors.count(), 1);
        const QString message = errors.at(0).at(0).toString();
        QVERIFY2(message.contains(QStringLiteral("train-labels-idx1-ubyte.gz")),
                 qPrintable(message));
        QVERIFY2(message.contains(QStringLiteral("MD5"), Qt::CaseInsensitive), qPrintable(message));
    }

    void cancelIsNotAnError()
    {
        tt::HttpTestServer server;
        QVERIFY(server.listen());
        server.stallAfter = 10;
        const QByteArray content = tt::randomBytes(100000, 4);
        server.setFile("train-images-idx3-ubyte.gz", content);
        towers::app::DatasetSpec spec;
        spec.name = QStringLiteral("mnist");
        spec.files.append({QStringLiteral("train-images-idx3-ubyte.gz"),
                           QUrl(QStringLiteral("http://unused.invalid/x")), tt::md5Hex(content),
                           content.size()});
        spec.requiredFiles << QStringLiteral("train-images-idx3-ubyte.gz");
        QTemporaryDir dir;
        towers::app::AppSettings settings(tt::settingsFile(dir.path()));
        settings.setDatasetName(QStringLiteral("mnist"));
        settings.setDataDir(dir.filePath(QStringLiteral("data")));
        DataPage page(settings);
        page.setDownloadCatalog({spec});
        page.setDownloadBaseUrl(server.baseUrl("stall"));
        QSignalSpy finished(&page, &DataPage::downloadFinished);
        QSignalSpy errors(&page, &DataPage::errorOccurred);
        QSignalSpy requests(&server, &tt::HttpTestServer::requestReceived);
        page.startDownload();
        QVERIFY(requests.wait(10000));
        page.cancelDownload();
        QVERIFY(finished.wait(10000));
        QCOMPARE(finished.at(0).at(0).toBool(), false);
        QCOMPARE(errors.count(), 0);
        QVERIFY(!page.isDownloading());
    }
};

QTEST_MAIN(TestDataPage)
#include "tst_data_page.moc"
