// ClassifyPage with a checkpoint of fashion-fast on a generated MNIST-style set: a test image's
// top 5 match the engine's own probabilities; the same image saved as a PNG and opened as a file
// gives the same answer; a file that is not an image and a file that is not a checkpoint are
// reported by name; the whole test set gives the matrix, per-class results and the images of a
// clicked cell. Hostile files (a 3,300,000 x 1 BMP, a 1,000,000 x 1 PNG, a FIFO and a folder named
// like images), dropped or opened, are refused at once with the reason on the page, the FIFO never
// opened, and the page goes on working.
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QMimeData>
#include <QPushButton>
#include <QSignalSpy>
#include <QStandardItemModel>
#include <QTableView>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QUrl>

#include "app/data/image_folder_import.h"
#include "app/inference/image_files.h"
#include "checkpoint_files.h"
#include "dataset_files.h"
#include "engine/cpu/onednn_ops.h"
#include "engine/data/validation_split.h"
#include "engine/errors.h"
#include "engine/models/registry.h"
#include "engine/ops/staged_ops.h"
#include "engine/train/checkpoint.h"
#include "engine/train/recipe.h"
#include "engine/train/train_config.h"
#include "fake_device.h"
#include "hostile_images.h"
#include "ui/models/class_accuracy_model.h"
#include "ui/models/sample_image_model.h"
#include "ui/pages/classify_many_dialog.h"
#include "ui/pages/classify_page.h"
#include "ui/pages/layers_dialog.h"
#include "ui/plots/bar_chart.h"
#include "ui/plots/heat_map.h"
#include "ui/widgets/image_drop_area.h"
#include "ui/widgets/layer_mosaic.h"
#include "ui_test_support.h"
#include <qcustomplot.h>

using towers::ui::ClassifyPage;
using namespace towers;

class TestClassifyPage : public QObject
{
    Q_OBJECT
    QTemporaryDir m_dir;
    QString m_checkpoint;
    std::shared_ptr<const engine::Dataset> m_data;

    // `page` shown at a size where its matrix is drawn, with `data` (by default the generated set)
    // as its dataset.
    bool showWithTheData(ClassifyPage& page, std::shared_ptr<const engine::Dataset> data = {})
    {
        page.resize(1100, 800);
        page.show();
        page.setDatasetProvider([data = data ? data : m_data](const std::string&) {
            return ClassifyPage::DatasetSource{data, {}};
        });
        return QTest::qWaitForWindowExposed(&page);
    }

    // Opens `checkpoint` on `page` and classifies the whole chosen set: true once both went well.
    static bool openAndClassifyWholeSet(ClassifyPage& page, const QString& checkpoint)
    {
        QSignalSpy loaded(&page, &ClassifyPage::checkpointLoaded);
        page.openCheckpoint(checkpoint);
        if (!loaded.wait(20000) || !loaded.at(0).at(0).toBool()) return false;
        QSignalSpy done(&page, &ClassifyPage::wholeSetClassified);
        page.classifyWholeSet();
        return done.wait(30000) && done.at(0).at(0).toBool();
    }

    // Test image `index` of the generated set alone, as Classifier::probabilities takes it.
    engine::ImageSet testImage(std::int64_t index) const
    {
        engine::ImageSet one;
        one.count = 1;
        one.height = one.width = 28;
        one.channels = 1;
        one.pixels.assign(m_data->test.image(index), m_data->test.image(index) + 28 * 28);
        one.labels = {0};
        return one;
    }

private slots:
    void initTestCase()
    {
        const std::filesystem::path root = m_dir.path().toStdString();
        test::writeIdxDataset(root / "mnist", 100, 120, 28, 28, false, 5);
        m_data = std::make_shared<engine::Dataset>(engine::loadDataset("mnist", root / "mnist"));
        // The record of image files an import keeps (towers-files.json), as if it were one: the
        // surest mistakes name their files.
        QJsonArray train, test;
        for (std::int64_t i = 0; i < m_data->train.count; ++i)
            train.append(QStringLiteral("/images/train/img%1.png").arg(i));
        for (std::int64_t i = 0; i < m_data->test.count; ++i)
            test.append(QStringLiteral("/images/test/img%1.png").arg(i));
        QFile list(QString::fromStdString((root / "mnist").string()) + QLatin1Char('/') +
                   QLatin1String(app::kImportedFilesName));
        QVERIFY(list.open(QIODevice::WriteOnly));
        list.write(QJsonDocument(QJsonObject{{QStringLiteral("train"), train},
                                             {QStringLiteral("test"), test}})
                       .toJson());
        list.close();
        m_checkpoint = m_dir.filePath(QStringLiteral("ckpt-00000042.safetensors"));
        test::writeFreshCheckpoint("fashion-fast", *m_data, m_checkpoint.toStdString(), 3, 42);
        // The counts read as English writes them ("1 image classified"), as in towers.
        QVERIFY(test::installPluralForms());
    }

    void classifiesImages()
    {
        ClassifyPage page;
        page.setDatasetProvider([this](const std::string&) {
            return ClassifyPage::DatasetSource{m_data, {}};
        });
        QSignalSpy loaded(&page, &ClassifyPage::checkpointLoaded);
        QSignalSpy answered(&page, &ClassifyPage::imageClassified);
        QSignalSpy errors(&page, &ClassifyPage::errorOccurred);
        page.openCheckpoint(m_checkpoint);
        QVERIFY(loaded.wait(20000));
        QCOMPARE(loaded.at(0).at(0).toBool(), true);
        QVERIFY(page.hasClassifier());
        QCOMPARE(page.classNames().size(), 10);

        page.classifySetImage(17);
        QVERIFY(answered.wait(20000));
        const auto top = page.topClasses();
        QCOMPARE(top.size(), std::size_t(5));
        for (std::size_t i = 1; i < top.size(); ++i) QVERIFY(top[i - 1].second >= top[i].second);
        // The oracle: the engine's classifier on the same image.
        engine::Classifier oracle(m_checkpoint.toStdString());
        const engine::ImageSet one = testImage(17);
        const auto probs = oracle.probabilities(one).at(0);
        const auto best = engine::Classifier::topK(probs, 5);
        for (int i = 0; i < 5; ++i) {
            QCOMPARE(top[std::size_t(i)].first,
                     QString::fromStdString(
                         m_data->classNames[std::size_t(best[std::size_t(i)].label)]));
            QCOMPARE(top[std::size_t(i)].second, best[std::size_t(i)].probability);
        }
        QCOMPARE(page.topChart()->barCount(), 5);
        QCOMPARE(page.topChart()->value(0), best[0].probability);

        // Layers…: every layer's output for this image, as the engine gives it; the first
        // convolution shown first, its output or its filters.
        QPushButton* layersButton = nullptr;
        for (auto* b : page.findChildren<QPushButton*>())
            if (b->text() == QStringLiteral("&Layers…")) layersButton = b;
        QVERIFY(layersButton && layersButton->isEnabled());
        ui::LayersDialog* layers = page.openLayers();
        QVERIFY(layers && layers->isVisible());
        const auto expected = oracle.layerOutputs(one, 0);
        QCOMPARE(layers->table()->rowCount(), int(expected.size()));
        QCOMPARE(layers->table()->item(0, 0)->text(), QStringLiteral("input"));
        QCOMPARE(layers->table()->item(1, 0)->text(), QStringLiteral("conv1"));
        QCOMPARE(layers->table()->item(1, 1)->text(), QStringLiteral("28 × 28 × 32"));
        QCOMPARE(layers->shownLayer(), 1);
        QVERIFY(layers->canShowFilters());
        QCOMPARE(layers->picture(), ui::activationMosaic(expected[1]));
        QVERIFY(layers->detailText().contains(QStringLiteral("32 channels of 28 × 28")));
        layers->setShowFilters(true);
        QCOMPARE(layers->picture(), ui::filterMosaic(oracle.convolutionFilters().at(0)));
        QVERIFY(layers->detailText().contains(QStringLiteral("32 filters of 3x3 over 1 channel")));
        const QString picture = m_dir.filePath(QStringLiteral("conv1-filters.png"));
        QVERIFY(layers->savePicture(picture, 4));
        QCOMPARE(QImage(picture).size(), layers->picture().size() * 4);
        QString error;
        QVERIFY(!layers->savePicture(m_dir.filePath(QStringLiteral("no/such/x.png")), 4, &error));
        QVERIFY2(error.contains(QStringLiteral("no/such/x.png")), qPrintable(error));
        layers->showLayer(3); // pool1: no filters, its output
        QVERIFY(!layers->canShowFilters() && !layers->showsFilters());
        QCOMPARE(layers->picture(), ui::activationMosaic(expected[3]));
        QCOMPARE(layers->histogramChart()->barCount(), 20);
        double share = 0;
        for (int i = 0; i < 20; ++i) share += layers->histogramChart()->value(i);
        QVERIFY(std::abs(share - 1) < 1e-9);
        // Dead channels: counted over the first 1000 test images (here all 120) off the UI
        // thread, as the engine counts them.
        QTRY_VERIFY_WITH_TIMEOUT(layers->deadChannels(1) >= 0, 20000);
        const auto activity = oracle.layerActivity(m_data->test, 1000, 100);
        QCOMPARE(layers->deadChannels(0), std::int64_t(-1)); // the input
        for (std::size_t i = 0; i < activity.size(); ++i) {
            QCOMPARE(layers->deadChannels(int(i) + 1),
                     std::int64_t(activity[i].deadChannels().size()));
            QCOMPARE(layers->table()->item(int(i) + 1, 7)->text(),
                     QStringLiteral("%1 of %2")
                         .arg(QLocale().toString(qint64(activity[i].deadChannels().size())),
                              QLocale().toString(qint64(activity[i].channels()))));
        }
        QVERIFY(layers->table()->item(1, 7)->toolTip().contains(QStringLiteral("120 test images")));
        layers->close();
        // Counted once per checkpoint: a second window has them at once.
        ui::LayersDialog* again = page.openLayers();
        QCOMPARE(again->deadChannels(1), std::int64_t(activity[0].deadChannels().size()));
        again->close();

        // The same image as a PNG file: the same pixels, the same answer.
        const QString png = m_dir.filePath(QStringLiteral("seventeen.png"));
        QVERIFY(app::toQImage(m_data->test, 17).save(png));
        answered.clear();
        page.classifyFile(png);
        QVERIFY(answered.wait(20000));
        QCOMPARE(page.topClasses(), top);

        // Not an image: reported with the file's name.
        const QString text = m_dir.filePath(QStringLiteral("notes.png"));
        QFile f(text);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("hello");
        f.close();
        page.classifyFile(text);
        QCOMPARE(errors.count(), 1);
        QVERIFY(errors.at(0).at(0).toString().contains(QStringLiteral("notes.png")));
        QVERIFY(!layersButton->isEnabled()); // no image, no layers
        QVERIFY(!page.openLayers());
    }

    // A checkpoint whose dataset was imported with --fit squash: an image file of another shape is
    // squashed to the dataset's images, as towers-cli classify does, not cropped.
    void fileFittedAsItsDatasetWas()
    {
        engine::Checkpoint c = engine::readCheckpoint(m_checkpoint.toStdString());
        c.info.imageFit = engine::ImageFit::Squash;
        const QString squashed = m_dir.filePath(QStringLiteral("squashed.safetensors"));
        engine::writeCheckpoint(squashed.toStdString(), c);
        QImage wide(84, 28, QImage::Format_Grayscale8);
        for (int y = 0; y < 28; ++y)
            for (int x = 0; x < 84; ++x) wide.setPixel(x, y, qRgb(3 * x, 3 * x, 3 * x));
        const QString png = m_dir.filePath(QStringLiteral("wide.png"));
        QVERIFY(wide.save(png));
        ClassifyPage page;
        QSignalSpy loaded(&page, &ClassifyPage::checkpointLoaded);
        QSignalSpy answered(&page, &ClassifyPage::imageClassified);
        page.openCheckpoint(squashed);
        QVERIFY(loaded.wait(20000));
        QVERIFY2(page.checkpointText().contains(
                     QStringLiteral("images of 28 × 28 × 1, each image file squashed to it")),
                 qPrintable(page.checkpointText()));
        page.classifyFile(png);
        QVERIFY(answered.wait(20000));
        engine::Classifier oracle(squashed.toStdString());
        const auto top = [&](engine::ImageFit fit) {
            engine::ImageSet one;
            app::appendImage(app::readImageFile(png, oracle.sourceShape()), oracle.sourceShape(),
                             one, fit);
            return engine::Classifier::topK(oracle.probabilities(one).at(0), 5);
        };
        const auto want = top(engine::ImageFit::Squash);
        QCOMPARE(page.topClasses().size(), want.size());
        for (std::size_t i = 0; i < want.size(); ++i)
            QCOMPARE(page.topClasses()[i].second, want[i].probability);
        QVERIFY(top(engine::ImageFit::Crop).front().probability != want.front().probability);
    }

    // Test-set actions while the test set loads wait for the same load, none drops another's:
    // the Layers window's dead channels, counted over the test set, still arrive when a test
    // image is asked for during the load (each used to start a load that superseded the other).
    void actionsWhileTheTestSetLoads()
    {
        ClassifyPage page;
        const std::filesystem::path root = m_dir.path().toStdString();
        page.setDatasetProvider([root](const std::string&) {
            return ClassifyPage::DatasetSource{nullptr, {root}}; // loaded from disk, off the UI
        });
        QSignalSpy loaded(&page, &ClassifyPage::checkpointLoaded);
        QSignalSpy answered(&page, &ClassifyPage::imageClassified);
        QSignalSpy errors(&page, &ClassifyPage::errorOccurred);
        page.openCheckpoint(m_checkpoint);
        QVERIFY(loaded.wait(20000));
        const QString png = m_dir.filePath(QStringLiteral("seventeen-again.png"));
        QVERIFY(app::toQImage(m_data->test, 17).save(png));
        page.classifyFile(png); // an image, so that Layers… opens; no test set needed
        QVERIFY(answered.wait(20000));
        answered.clear();
        ui::LayersDialog* layers = page.openLayers(); // starts loading the test set
        QVERIFY(layers);
        page.classifySetImage(5); // during that load
        QVERIFY(answered.wait(20000));
        QTRY_VERIFY_WITH_TIMEOUT(layers->deadChannels(1) >= 0, 20000);
        const auto activity =
            engine::Classifier(m_checkpoint.toStdString()).layerActivity(m_data->test, 1000, 100);
        QCOMPARE(layers->deadChannels(1), std::int64_t(activity[0].deadChannels().size()));
        QVERIFY(page.captionText().contains(QStringLiteral("test image 5")));
        QCOMPARE(errors.count(), 0);
        layers->close();
    }

    // Without the checkpoint's test set the Layers window says why it has no dead channels, and
    // no error banner interrupts.
    void layersWithoutTheTestSet()
    {
        engine::Dataset elsewhere = *m_data;
        elsewhere.name = "no-such-set";
        const QString file = m_dir.filePath(QStringLiteral("elsewhere.safetensors"));
        test::writeFreshCheckpoint("fashion-fast", elsewhere, file.toStdString(), 3, 1);
        ClassifyPage page;
        QSignalSpy loaded(&page, &ClassifyPage::checkpointLoaded);
        QSignalSpy answered(&page, &ClassifyPage::imageClassified);
        QSignalSpy errors(&page, &ClassifyPage::errorOccurred);
        page.openCheckpoint(file);
        QVERIFY(loaded.wait(20000));
        const QString png = m_dir.filePath(QStringLiteral("three.png"));
        QVERIFY(app::toQImage(m_data->test, 3).save(png));
        page.classifyFile(png);
        QVERIFY(answered.wait(20000));
        ui::LayersDialog* layers = page.openLayers();
        QVERIFY(layers);
        QTRY_COMPARE_WITH_TIMEOUT(layers->table()->item(1, 7)->text(), QStringLiteral("–"), 20000);
        QVERIFY2(layers->table()->item(1, 7)->toolTip().contains(QStringLiteral("no-such-set")),
                 qPrintable(layers->table()->item(1, 7)->toolTip()));
        QCOMPARE(layers->deadChannels(1), std::int64_t(-1));
        QCOMPARE(errors.count(), 0);
        layers->close();
    }

    // The "Classify many" summary counts the images classified: "1 image", "2 images".
    void classifyManySummaryCounts()
    {
        ui::ClassifyManyDialog dialog({"cat", "dog"}, 2);
        const auto answer = [](const char* file, int label) {
            app::FileAnswer a;
            a.file = QString::fromLatin1(file);
            a.top = {{label, 0.75}, {1 - label, 0.25}};
            a.logits = {0, 0};
            return a;
        };
        app::FileAnswer unread;
        unread.file = QStringLiteral("b.png");
        unread.error = QStringLiteral("b.png: not an image");
        dialog.setAnswers({answer("a.png", 1), unread}, false);
        QCOMPARE(dialog.summaryText(),
                 QStringLiteral("1 image classified: dog (1); 1 could not be read."));
        dialog.setAnswers({answer("a.png", 1), answer("c.png", 0)}, false);
        QCOMPARE(dialog.summaryText(), QStringLiteral("2 images classified: cat (1), dog (1)."));
    }

    // Several files dropped at once: "Classify many", a row each (thumbnail, class, probability,
    // runner-up, or why it was not read), a summary, the CSV, and a row shown on the page.
    void classifiesMany()
    {
        ClassifyPage page;
        QSignalSpy loaded(&page, &ClassifyPage::checkpointLoaded);
        QSignalSpy answered(&page, &ClassifyPage::imageClassified);
        QSignalSpy logged(&page, &ClassifyPage::logMessage);
        page.openCheckpoint(m_checkpoint);
        QVERIFY(loaded.wait(20000));
        QStringList files;
        for (int i : {3, 4, 5}) {
            files << m_dir.filePath(QStringLiteral("many-%1.png").arg(i));
            QVERIFY(app::toQImage(m_data->test, i).save(files.back()));
        }
        files.insert(1, m_dir.filePath(QStringLiteral("many-missing.png")));
        auto* dropArea = page.findChild<ui::ImageDropArea*>();
        QMimeData mime;
        QList<QUrl> urls;
        for (const QString& f : files) urls << QUrl::fromLocalFile(f);
        mime.setUrls(urls);
        QDragEnterEvent enter(QPoint(10, 10), Qt::CopyAction, &mime, Qt::LeftButton,
                              Qt::NoModifier);
        QCoreApplication::sendEvent(dropArea, &enter);
        QDropEvent drop(QPointF(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QCoreApplication::sendEvent(dropArea, &drop);
        auto* many = page.findChild<ui::ClassifyManyDialog*>();
        QVERIFY(many && many->isVisible());
        QTRY_VERIFY_WITH_TIMEOUT(!many->isRunning(), 20000);
        QCOMPARE(many->table()->rowCount(), 4);
        QCOMPARE(many->table()->item(0, 1)->text(), QStringLiteral("many-3.png"));
        QVERIFY(many->table()->item(1, 2)->text().startsWith(QStringLiteral("⚠ ")));
        QVERIFY(many->table()->item(1, 2)->toolTip().contains(QStringLiteral("many-missing.png")));
        QVERIFY(!many->table()->item(0, 0)->icon().isNull());
        QVERIFY(many->table()->item(0, 3)->text().endsWith(QStringLiteral(" %")));
        QVERIFY2(many->summaryText().startsWith(QStringLiteral("3 images classified: ")) &&
                     many->summaryText().endsWith(QStringLiteral("; 1 could not be read.")),
                 qPrintable(many->summaryText()));
        // The log counts only the files classified, and names the unreadable apart.
        QStringList lines;
        for (const auto& args : logged) lines << args.at(0).toString();
        QVERIFY2(lines.contains(QStringLiteral("Classified 3 of 4 files; 1 could not be read")),
                 qPrintable(lines.join(QLatin1Char('\n'))));
        // The same answers as one file at a time on the page.
        page.classifyFile(files[0]);
        QVERIFY(answered.wait(20000));
        QCOMPARE(many->table()->item(0, 2)->text(), page.topClasses().front().first);

        const QString csv = m_dir.filePath(QStringLiteral("many.csv"));
        QVERIFY(many->saveCsv(csv));
        QFile f(csv);
        QVERIFY(f.open(QIODevice::ReadOnly));
        QCOMPARE(f.readAll().count('\n'), 5);
        QString error;
        QVERIFY(!many->saveCsv(m_dir.filePath(QStringLiteral("no/such/folder/x.csv")), &error));
        QVERIFY2(error.contains(QStringLiteral("no/such/folder/x.csv")), qPrintable(error));
        // Saved again over itself (the file dialog asked), but never over a checkpoint.
        QVERIFY(many->saveCsv(csv));
        const QString weights = m_dir.filePath(QStringLiteral("weights.csv"));
        QVERIFY(QFile::copy(m_checkpoint, weights));
        QVERIFY(!many->saveCsv(weights, &error));
        QVERIFY2(error.contains(QStringLiteral("checkpoint")), qPrintable(error));
        QFile kept(weights), original(m_checkpoint);
        QVERIFY(kept.open(QIODevice::ReadOnly) && original.open(QIODevice::ReadOnly));
        QVERIFY(kept.readAll() == original.readAll());

        // Sorted by probability, least first: the unreadable file, then the answers rising.
        many->table()->sortByColumn(3, Qt::AscendingOrder);
        QVERIFY(many->table()->item(0, 2)->text().startsWith(QStringLiteral("⚠ ")));
        for (int r = 2; r < 4; ++r)
            QVERIFY(QLocale().toDouble(many->table()->item(r - 1, 3)->text().chopped(2)) <=
                    QLocale().toDouble(many->table()->item(r, 3)->text().chopped(2)));
        many->table()->sortByColumn(1, Qt::AscendingOrder); // by name: many-3, -4, -5, -missing
        QCOMPARE(many->table()->item(1, 1)->text(), QStringLiteral("many-4.png"));
        answered.clear();
        emit many->table()->cellDoubleClicked(3, 1); // the unreadable one: nothing to show
        QVERIFY(!answered.wait(300));

        // A double-click shows that image on the page.
        answered.clear();
        emit many->table()->cellDoubleClicked(1, 1);
        QVERIFY(answered.wait(20000));
        QVERIFY(page.captionText().contains(QStringLiteral("many-4.png")));
        many->close();
    }

    void wholeTestSet()
    {
        ClassifyPage page;
        QVERIFY(showWithTheData(page));
        QVERIFY(openAndClassifyWholeSet(page, m_checkpoint));
        const auto& p = *page.predictions();
        QCOMPARE(p.examples(), m_data->test.count);
        QCOMPARE(page.heatMap()->size(), 10);
        QVERIFY(page.summaryText().contains(QString::number(p.correct)));
        // The engine's evaluation agrees.
        engine::Classifier oracle(m_checkpoint.toStdString());
        QCOMPARE(p.correct, oracle.evaluate(m_data->test).correct);

        // Click the fullest cell: its images appear.
        int bestT = 0, bestP = 0;
        for (int t = 0; t < 10; ++t)
            for (int q = 0; q < 10; ++q)
                if (p.confusion[std::size_t(t * 10 + q)] >
                    p.confusion[std::size_t(bestT * 10 + bestP)]) {
                    bestT = t;
                    bestP = q;
                }
        auto* map = page.heatMap();
        map->customPlot()->replot();
        QTest::mouseClick(map->customPlot(), Qt::LeftButton, {},
                          map->customPlot()->mapFrom(map, map->cellCenter(bestT, bestP)));
        auto* cells = page.cellImages();
        QCOMPARE(cells->matchCount(), p.confusion[std::size_t(bestT * 10 + bestP)]);
        for (int r = 0; r < cells->rowCount(); ++r) {
            const auto i =
                cells->data(cells->index(r), towers::ui::SampleImageModel::DatasetIndexRole)
                    .toLongLong();
            QCOMPARE(m_data->test.labels[std::size_t(i)], bestT);
            QCOMPARE(p.predicted[std::size_t(i)], bestP);
        }

        // Surest mistakes: the wrong answers, the surest first, each saying what it was taken for.
        QPushButton* mistakes = nullptr;
        for (auto* b : page.findChildren<QPushButton*>())
            if (b->text() == QStringLiteral("Surest &mistakes")) mistakes = b;
        QVERIFY(mistakes && mistakes->isEnabled());
        mistakes->click();
        const std::int64_t wrong = p.examples() - p.correct;
        QCOMPARE(cells->matchCount(),
                 std::min<std::int64_t>(wrong, std::int64_t(ClassifyPage::kSurestMistakes)));
        QVERIFY(wrong > 0); // a fresh network on 120 images
        float before = 2;
        for (int r = 0; r < cells->rowCount(); ++r) {
            const auto i =
                cells->data(cells->index(r), towers::ui::SampleImageModel::DatasetIndexRole)
                    .toLongLong();
            QVERIFY(p.predicted[std::size_t(i)] != m_data->test.labels[std::size_t(i)]);
            QVERIFY(p.confidence[std::size_t(i)] <= before);
            before = p.confidence[std::size_t(i)];
            const QString tip = cells->data(cells->index(r), Qt::ToolTipRole).toString();
            QVERIFY(tip.contains(QStringLiteral("predicted %1 with ")
                                     .arg(page.classNames().value(p.predicted[std::size_t(i)]))));
            QVERIFY2(tip.endsWith(QStringLiteral("\n/images/test/img%1.png").arg(i)),
                     qPrintable(tip));
        }
    }

    // A checkpoint whose run held a validation set out: the page classifies that set (drawn again
    // as the run drew it, as towers-cli eval --set validation), one image or all of it, its
    // texts saying so; a checkpoint without one offers only the test set, and says why.
    void validationSet()
    {
        engine::TrainConfig config;
        config.model = "fashion-fast";
        config.dataset = "mnist";
        config.validation = 0.25;
        config.steps = 10;
        const QString file = m_dir.filePath(QStringLiteral("validation.safetensors"));
        test::writeFreshCheckpoint("fashion-fast", *m_data, file.toStdString(), 3, 42,
                                   config.toJson());
        const auto split = engine::splitValidation(m_data->train, 10, 0.25);
        // The oracle's draw: a quarter of each class of the 100 training images, rounded.
        QVERIFY(split.validation.count >= 20 && split.validation.count <= 30);

        ClassifyPage page;
        QVERIFY(showWithTheData(page));
        QSignalSpy loaded(&page, &ClassifyPage::checkpointLoaded);
        QSignalSpy answered(&page, &ClassifyPage::imageClassified);
        QSignalSpy done(&page, &ClassifyPage::wholeSetClassified);
        QSignalSpy errors(&page, &ClassifyPage::errorOccurred);
        page.openCheckpoint(file);
        QVERIFY(loaded.wait(20000));
        QVERIFY2(page.validationShare() == 0.25,
                 qPrintable(page.findChild<QComboBox*>(QStringLiteral("evalSet"))->toolTip()));
        auto* choice = page.findChild<QComboBox*>(QStringLiteral("evalSet"));
        QVERIFY(choice && choice->isEnabled());
        QCOMPARE(page.evalSet(), ClassifyPage::EvalSet::Test); // as eval without --set
        choice->setCurrentIndex(choice->findText(QStringLiteral("Validation set")));
        emit choice->activated(choice->currentIndex());
        QCOMPARE(page.evalSet(), ClassifyPage::EvalSet::Validation);
        QPushButton* whole = nullptr;
        for (auto* b : page.findChildren<QPushButton*>())
            if (b->text().contains(QStringLiteral("whole"))) whole = b;
        QVERIFY(whole);
        QCOMPARE(whole->text(), QStringLiteral("Classify the &whole validation set"));

        whole->click();
        QVERIFY(done.wait(30000));
        QCOMPARE(done.at(0).at(0).toBool(), true);
        const auto& p = *page.predictions();
        QCOMPARE(p.examples(), split.validation.count);
        engine::Classifier oracle(file.toStdString());
        QCOMPARE(p.correct, oracle.evaluate(split.validation).correct);
        QVERIFY2(page.summaryText().contains(QStringLiteral("%1 of %2 validation images right")
                                                 .arg(p.correct)
                                                 .arg(split.validation.count)),
                 qPrintable(page.summaryText()));

        // The surest mistakes are validation images, each named so.
        QPushButton* mistakes = nullptr;
        for (auto* b : page.findChildren<QPushButton*>())
            if (b->text() == QStringLiteral("Surest &mistakes")) mistakes = b;
        QVERIFY(mistakes && mistakes->isEnabled());
        mistakes->click();
        auto* cells = page.cellImages();
        QVERIFY(cells->rowCount() > 0); // a fresh network gets some of them wrong
        for (int r = 0; r < cells->rowCount(); ++r) {
            const auto i =
                cells->data(cells->index(r), towers::ui::SampleImageModel::DatasetIndexRole)
                    .toLongLong();
            QVERIFY(p.predicted[std::size_t(i)] != split.validation.labels[std::size_t(i)]);
            const QString tip = cells->data(cells->index(r), Qt::ToolTipRole).toString();
            QVERIFY(tip.startsWith(QStringLiteral("Validation image %1: ").arg(i)));
            // Its file: the training image it is, traced back through the split.
            QVERIFY2(tip.endsWith(QStringLiteral("\n/images/train/img%1.png")
                                      .arg(split.validationIndex[std::size_t(i)])),
                     qPrintable(tip));
            QCOMPARE(cells->data(cells->index(r), towers::ui::SampleImageModel::ImageRole)
                         .value<QImage>(),
                     app::toQImage(split.validation, i));
        }

        // One image of the set: its caption names it and its true class.
        page.classifySetImage(7);
        QVERIFY(answered.wait(20000));
        const QString truly = page.classNames().value(split.validation.labels[7]);
        QVERIFY2(
            page.captionText().contains(QStringLiteral("validation image 7, truly %1").arg(truly)),
            qPrintable(page.captionText()));
        // The engine's answer for that image (in a batch of the whole set: float rounding apart).
        const auto best =
            engine::Classifier::topK(oracle.probabilities(split.validation).at(7), 1).front();
        QCOMPARE(page.topClasses().front().first, page.classNames().value(best.label));
        QVERIFY(std::abs(page.topClasses().front().second - best.probability) < 1e-6);

        // Back to the test set: the validation results are gone, the texts the test set's.
        choice->setCurrentIndex(choice->findText(QStringLiteral("Test set")));
        emit choice->activated(choice->currentIndex());
        QVERIFY(!page.predictions().has_value());
        QCOMPARE(whole->text(), QStringLiteral("Classify the &whole test set"));

        // The training set: its images undistorted, as towers-cli eval --set train measures them.
        choice->setCurrentIndex(choice->findText(QStringLiteral("Training set")));
        emit choice->activated(choice->currentIndex());
        QCOMPARE(page.evalSet(), ClassifyPage::EvalSet::Train);
        QCOMPARE(whole->text(), QStringLiteral("Classify the &whole training set"));
        whole->click();
        QVERIFY(done.wait(30000));
        QCOMPARE(done.last().at(0).toBool(), true);
        QCOMPARE(page.predictions()->examples(), m_data->train.count);
        QCOMPARE(page.predictions()->correct, oracle.evaluate(m_data->train).correct);
        QVERIFY2(page.summaryText().contains(
                     QStringLiteral("of %1 training images right").arg(m_data->train.count)),
                 qPrintable(page.summaryText()));
        mistakes->click();
        QVERIFY(cells->rowCount() > 0);
        const auto first =
            cells->data(cells->index(0), towers::ui::SampleImageModel::DatasetIndexRole)
                .toLongLong();
        QCOMPARE(
            cells->data(cells->index(0), towers::ui::SampleImageModel::ImageRole).value<QImage>(),
            app::toQImage(m_data->train, first));

        // A checkpoint whose run held out nothing (this one records no configuration): no
        // validation set, and the reason on the choice; the test and training sets stay.
        page.setEvalSet(ClassifyPage::EvalSet::Validation);
        page.openCheckpoint(m_checkpoint);
        QVERIFY(loaded.wait(20000));
        QCOMPARE(page.validationShare(), 0.0);
        QCOMPARE(page.evalSet(), ClassifyPage::EvalSet::Test);
        QVERIFY(choice->isEnabled());
        const auto* items = qobject_cast<QStandardItemModel*>(choice->model());
        QVERIFY(items &&
                !items->item(choice->findText(QStringLiteral("Validation set")))->isEnabled());
        QVERIFY(items->item(choice->findText(QStringLiteral("Training set")))->isEnabled());
        QVERIFY2(choice->toolTip().contains(QStringLiteral("configuration")),
                 qPrintable(choice->toolTip()));
        page.setEvalSet(ClassifyPage::EvalSet::Validation); // refused: stays on the test set
        QCOMPARE(page.evalSet(), ClassifyPage::EvalSet::Test);
        QCOMPARE(errors.count(), 0);
    }

    // What the user may drop or open: refused with the reason on the page, never a hang or a crash.
    void hostileFiles()
    {
        ClassifyPage page;
        page.resize(900, 700);
        page.show();
        QVERIFY(QTest::qWaitForWindowExposed(&page));
        QSignalSpy loaded(&page, &ClassifyPage::checkpointLoaded);
        QSignalSpy answered(&page, &ClassifyPage::imageClassified);
        QSignalSpy errors(&page, &ClassifyPage::errorOccurred);
        page.openCheckpoint(m_checkpoint);
        QVERIFY(loaded.wait(20000));
        QVERIFY(page.hasClassifier());
        auto* dropArea = page.findChild<towers::ui::ImageDropArea*>();
        QVERIFY(dropArea);

        QTemporaryDir dir;
        const auto at = [&](const char* name) { return dir.filePath(QLatin1String(name)); };
        test::writeBlackBmp(at("wide.bmp"), 3'300'000, 1);
        test::writeBlackPng(at("wide.png"), 1'000'000, 1);
        QVERIFY(test::makeFifo(at("x.png")));
        QVERIFY(QDir(dir.path()).mkdir(QStringLiteral("y.png")));
        const QString good = at("good.png");
        QVERIFY(app::toQImage(m_data->test, 3).save(good));

        // What dropping a file does (what opening one does after its dialog is classifyFile).
        const auto drop = [&](const QString& file) {
            QMimeData mime;
            mime.setUrls({QUrl::fromLocalFile(file)});
            QDragEnterEvent enter(QPoint(10, 10), Qt::CopyAction, &mime, Qt::LeftButton,
                                  Qt::NoModifier);
            QCoreApplication::sendEvent(dropArea, &enter);
            QVERIFY(enter.isAccepted());
            QDropEvent event(QPointF(10, 10), Qt::CopyAction, &mime, Qt::LeftButton,
                             Qt::NoModifier);
            QCoreApplication::sendEvent(dropArea, &event);
        };
        struct Case
        {
            const char* name;
            const char* says;
        };
        const Case cases[] = {{"wide.bmp", "3300000 x 1 pixels"},
                              {"wide.png", "1000000 x 1 pixels"},
                              {"x.png", "FIFO"},
                              {"y.png", "directory"}};
        for (const bool dropped : {true, false}) {
            for (const Case& c : cases) {
                // A good image first: its answer must not stay on the page after the refusal.
                answered.clear();
                page.classifyFile(good);
                QVERIFY(answered.wait(20000));
                QVERIFY(!page.topClasses().empty());

                const QString file = at(c.name);
                const qsizetype before = errors.count();
                test::FifoWatch watch(at("x.png"));
                QElapsedTimer clock;
                clock.start();
                if (dropped)
                    drop(file);
                else
                    page.classifyFile(file);
                const qint64 ms = clock.elapsed();
                QVERIFY2(!watch.readerSeen(), "the FIFO was opened for reading");
                QVERIFY2(ms < 2000, qPrintable(QStringLiteral("%1 ms").arg(ms)));
                QCOMPARE(errors.count(), before + 1);
                const QString message = errors.last().at(0).toString();
                QVERIFY2(message.contains(file) && message.contains(QLatin1String(c.says)),
                         qPrintable(message));
                QVERIFY2(page.captionText().contains(QStringLiteral("Cannot classify")) &&
                             page.captionText().contains(QLatin1String(c.name)) &&
                             page.captionText().contains(QLatin1String(c.says)),
                         qPrintable(page.captionText()));
                QVERIFY(page.topClasses().empty());
                QCOMPARE(page.topChart()->barCount(), 0);
                QVERIFY(dropArea->image().isNull());
            }
        }
        // And the page goes on: the good image, dropped this time.
        answered.clear();
        drop(good);
        QVERIFY(answered.wait(20000));
        QCOMPARE(page.topClasses().size(), std::size_t(5));
    }

    // A checkpoint of a run trained in bf16 is evaluated in bf16, as its run evaluated itself,
    // where the CPU runs it (the page's answers are the engine's default classifier's, to the
    // double), and the page says so; elsewhere in float32, saying why.
    void bf16CheckpointAsTrained()
    {
        engine::TrainConfig config;
        config.precision = engine::Precision::BFloat16;
        const QString file = m_dir.filePath(QStringLiteral("bf16-00000042.safetensors"));
        test::writeFreshCheckpoint("fashion-fast", *m_data, file.toStdString(), 3, 42,
                                   config.toJson());
        ClassifyPage page;
        page.setDatasetProvider([this](const std::string&) {
            return ClassifyPage::DatasetSource{m_data, {}};
        });
        QSignalSpy loaded(&page, &ClassifyPage::checkpointLoaded);
        QSignalSpy answered(&page, &ClassifyPage::imageClassified);
        page.openCheckpoint(file);
        QVERIFY(loaded.wait(20000));
        QCOMPARE(loaded.at(0).at(0).toBool(), true);
        engine::Classifier oracle(file.toStdString());
        if (engine::cpu::bf16Unavailable().empty()) {
            QCOMPARE(oracle.precision(), engine::Precision::BFloat16);
            QVERIFY2(page.checkpointText().contains(
                         QStringLiteral("; evaluated in bf16, as its run was")),
                     qPrintable(page.checkpointText()));
        } else {
            QCOMPARE(oracle.precision(), engine::Precision::Float32);
            QVERIFY2(page.checkpointText().contains(
                         QStringLiteral("; trained in bf16, evaluated in float32 (this CPU does "
                                        "not run bf16)")),
                     qPrintable(page.checkpointText()));
            QCOMPARE(page.checkpointToolTip(), QString::fromStdString(oracle.precisionNote()));
            QVERIFY(page.checkpointToolTip().contains(QStringLiteral("needs a CPU with")));
        }
        page.classifySetImage(3);
        QVERIFY(answered.wait(20000));
        const auto best = engine::Classifier::topK(oracle.probabilities(testImage(3)).at(0), 5);
        QCOMPARE(page.topClasses().front().second, best.front().probability);
        // A float32 checkpoint's line says nothing of precision.
        page.openCheckpoint(m_checkpoint);
        QVERIFY(loaded.wait(20000));
        QVERIFY2(!page.checkpointText().contains(QStringLiteral("bf16")),
                 qPrintable(page.checkpointText()));
        QVERIFY(page.checkpointToolTip().isEmpty());
    }

    // "Run on" a GPU this build can run on (here a stand-in, whose tensors the host cannot read):
    // chosen, the open checkpoint is loaded again there and the line says where; one image and
    // the whole test set are answered as on the CPU; back on the CPU, the GPU's memory is given
    // back. With the CPU alone, "Run on" is not shown.
    void runsOnAGpu()
    {
        ClassifyPage page; // it lists the GPUs, which may load the CUDA plugin, before:
        test::FakeDeviceScope device;
        QVERIFY(showWithTheData(page));
        engine::InferenceDevice standIn;
        standIn.backend = "cuda";
        standIn.makeOps = [](engine::Precision p, int gpu) {
            return engine::makeStagedOps(engine::cpu::makeOneDnnOps(p),
                                         engine::Device{engine::DeviceKind::Cuda, gpu});
        };
        engine::InferenceDevice broken = standIn;
        broken.gpu = 1;
        broken.makeOps = [](engine::Precision, int) -> std::unique_ptr<engine::Ops> {
            throw engine::DeviceOutOfMemory("cuda:1 is out of memory (a stand-in)");
        };
        page.setRunOnChoices({{QStringLiteral("CPU"), {}},
                              {QStringLiteral("GPU 0, a stand-in"), standIn},
                              {QStringLiteral("GPU 1, full"), broken}});
        QVERIFY(page.runOnChoice()->isVisibleTo(&page));
        QCOMPARE(page.runOnChoice()->count(), 3);
        QSignalSpy loaded(&page, &ClassifyPage::checkpointLoaded);
        QSignalSpy answered(&page, &ClassifyPage::imageClassified);
        QSignalSpy done(&page, &ClassifyPage::wholeSetClassified);
        QSignalSpy errors(&page, &ClassifyPage::errorOccurred);
        page.openCheckpoint(m_checkpoint);
        QVERIFY(loaded.wait(20000));
        QVERIFY2(!page.checkpointText().contains(QStringLiteral("; on ")),
                 qPrintable(page.checkpointText()));
        QCOMPARE(device.memory().liveAllocations(), std::int64_t(0));

        emit page.runOnChoice()->activated(1); // as the user chooses it
        QVERIFY(loaded.wait(20000));
        QCOMPARE(loaded.last().at(0).toBool(), true);
        QCOMPARE(page.runOn(), 1);
        QVERIFY2(page.checkpointText().endsWith(QStringLiteral("; on GPU 0, a stand-in")),
                 qPrintable(page.checkpointText()));
        QVERIFY(device.memory().liveAllocations() > 0); // the weights are there

        engine::Classifier oracle(m_checkpoint.toStdString());
        page.classifySetImage(3);
        QVERIFY(answered.wait(20000));
        const auto best = engine::Classifier::topK(oracle.probabilities(testImage(3)).at(0), 5);
        QCOMPARE(page.topClasses().size(), best.size());
        for (std::size_t i = 0; i < best.size(); ++i)
            QCOMPARE(page.topClasses()[i].second, best[i].probability);
        page.classifyWholeSet();
        QVERIFY(done.wait(30000));
        QCOMPARE(done.at(0).at(0).toBool(), true);
        const engine::EvalResult e = oracle.evaluate(m_data->test);
        QCOMPARE(page.predictions()->correct, e.correct);
        QCOMPARE(page.predictions()->confusion, e.confusion);

        page.setRunOn(0);
        QVERIFY(loaded.wait(20000));
        QVERIFY(!page.checkpointText().contains(QStringLiteral("; on ")));
        // The GPU classifier goes with the last job that held it (on a pool thread).
        QTRY_COMPARE(device.memory().liveAllocations(), std::int64_t(0));
        QCOMPARE(errors.count(), 0);

        // A GPU that fails: said, with where; the page goes on on the CPU, and says so.
        emit page.runOnChoice()->activated(2);
        QVERIFY(loaded.wait(20000));
        QCOMPARE(loaded.last().at(0).toBool(), false);
        QCOMPARE(errors.count(), 1);
        QVERIFY2(errors.at(0).at(0).toString().contains(
                     QStringLiteral("Cannot load the checkpoint on GPU 1, full: cuda:1 is out "
                                    "of memory (a stand-in)")),
                 qPrintable(errors.at(0).at(0).toString()));
        QCOMPARE(page.runOn(), 0);
        QCOMPARE(page.runOnChoice()->currentIndex(), 0);
        QVERIFY(page.hasClassifier());
        page.classifySetImage(3);
        QVERIFY(answered.wait(20000));
        QCOMPARE(page.topClasses().front().second, best.front().probability);

        page.setRunOnChoices({{QStringLiteral("CPU"), {}}});
        QVERIFY(!page.runOnChoice()->isVisibleTo(&page));
        QVERIFY(loaded.wait(20000)); // the checkpoint again, on the one choice
        QCOMPARE(loaded.last().at(0).toBool(), true);
    }

    // "Average with the mirror image": off and disabled, saying why, for digits; for a set whose
    // classes survive a mirror, the image shown is classified again with it, its answer the
    // engine's with Mirror, and the whole set's results are the engine's evaluation with it.
    void averageWithTheMirrorImage()
    {
        ClassifyPage page;
        QVERIFY(showWithTheData(page));
        QCheckBox* mirror = page.mirrorChoice();
        QVERIFY(mirror && !mirror->isEnabled());
        QSignalSpy loaded(&page, &ClassifyPage::checkpointLoaded);
        page.openCheckpoint(m_checkpoint);
        QVERIFY(loaded.wait(20000));
        QVERIFY(!mirror->isEnabled());
        QVERIFY2(mirror->toolTip().contains(
                     QStringLiteral("Not for this checkpoint: its recipe does not mirror its "
                                    "training images")),
                 qPrintable(mirror->toolTip()));
        QVERIFY(!page.averagesMirror());

        const std::filesystem::path root = m_dir.path().toStdString();
        test::writeIdxDataset(root / "fashion-mnist", 60, 80, 28, 28, false, 8);
        const auto fashion = std::make_shared<engine::Dataset>(
            engine::loadDataset("fashion-mnist", root / "fashion-mnist"));
        const QString checkpoint = m_dir.filePath(QStringLiteral("fashion.safetensors"));
        test::writeFreshCheckpoint("fashion-fast", *fashion, checkpoint.toStdString(), 9, 5);
        page.setDatasetProvider([fashion](const std::string&) {
            return ClassifyPage::DatasetSource{fashion, {}};
        });
        page.openCheckpoint(checkpoint);
        QVERIFY(loaded.wait(20000));
        QVERIFY(mirror->isEnabled() && !mirror->isChecked());
        QVERIFY(!mirror->toolTip().contains(QStringLiteral("Not for this checkpoint")));

        QSignalSpy answered(&page, &ClassifyPage::imageClassified);
        page.classifySetImage(3);
        QVERIFY(answered.wait(20000));
        engine::ImageSet one;
        one.count = 1;
        one.height = one.width = 28;
        one.channels = 1;
        one.pixels.assign(fashion->test.image(3), fashion->test.image(3) + 28 * 28);
        one.labels = {0};
        engine::Classifier plain(checkpoint.toStdString()), averaged(checkpoint.toStdString());
        averaged.setTestTimeAugmentation(engine::TestTimeAugmentation::Mirror);
        const auto plainTop = engine::Classifier::topK(plain.probabilities(one).at(0), 5);
        const auto averagedTop = engine::Classifier::topK(averaged.probabilities(one).at(0), 5);
        QCOMPARE(page.topClasses().front().second, plainTop.front().probability);
        QVERIFY(plainTop.front().probability != averagedTop.front().probability);

        // Chosen: the image shown is answered again, the engine's Mirror answer.
        answered.clear();
        mirror->click();
        QVERIFY(page.averagesMirror());
        QVERIFY(answered.wait(20000));
        QCOMPARE(page.topClasses().front().second, averagedTop.front().probability);

        QSignalSpy done(&page, &ClassifyPage::wholeSetClassified);
        page.classifyWholeSet();
        QVERIFY(done.wait(30000));
        QCOMPARE(done.at(0).at(0).toBool(), true);
        const engine::EvalResult r = averaged.evaluate(fashion->test);
        QCOMPARE(page.predictions()->correct, r.correct);
        QCOMPARE(page.predictions()->confusion, r.confusion);
        QVERIFY2(page.summaryText().contains(
                     QStringLiteral("Each image averaged with its mirror image.")),
                 qPrintable(page.summaryText()));
        QVERIFY(!page.summaryText().contains(QStringLiteral("Top 5"))); // ten classes

        // Off again: the set's results were the mirror's, and go; the image is answered plainly.
        answered.clear();
        mirror->click();
        QVERIFY(!page.predictions());
        QVERIFY(answered.wait(20000));
        QCOMPARE(page.topClasses().front().second, plainTop.front().probability);
    }

    // A set of more than 10 classes: the whole set's summary has the top 5 too, as eval counts it.
    void topFiveOfManyClasses()
    {
        const std::filesystem::path root = m_dir.path().toStdString();
        test::writeCifar100(root / "cifar100", 30, 60, 4);
        const auto data =
            std::make_shared<engine::Dataset>(engine::loadDataset("cifar100", root / "cifar100"));
        const QString checkpoint = m_dir.filePath(QStringLiteral("cifar100.safetensors"));
        test::writeFreshCheckpoint("cifar10-tutorial", *data, checkpoint.toStdString(), 5, 3);
        ClassifyPage page;
        QVERIFY(showWithTheData(page, data));
        QVERIFY(openAndClassifyWholeSet(page, checkpoint));
        const auto& p = *page.predictions();
        QVERIFY(p.hasTop5());
        engine::Classifier oracle(checkpoint.toStdString());
        const engine::EvalResult evaluated = oracle.evaluate(data->test);
        QCOMPARE(p.correctTop5, evaluated.correctTop5);
        const QString top5 =
            QStringLiteral(" Top 5: %1 %.").arg(QLocale().toString(p.accuracyTop5() * 100, 'f', 2));
        QVERIFY2(page.summaryText().contains(top5), qPrintable(page.summaryText()));
        // Class by class, a Top 5 column beside the accuracy: eval's per-class top 5.
        QTableView* table = page.classTable();
        QVERIFY(!table->isColumnHidden(ui::ClassAccuracyModel::Top5));
        QAbstractItemModel* classes = table->model();
        QCOMPARE(classes->rowCount(), 100);
        int withTop5 = 0;
        for (int c = 0; c < 100; ++c) {
            const QVariant share =
                classes->index(c, ui::ClassAccuracyModel::Top5).data(Qt::EditRole);
            QCOMPARE(share.toDouble(), evaluated.perClassTop5[std::size_t(c)]);
            withTop5 += share.toDouble() > 0;
        }
        QVERIFY(withTop5 > 0);
        // Ten classes (the generated set's): no Top 5 column.
        QVERIFY(showWithTheData(page));
        QVERIFY(openAndClassifyWholeSet(page, m_checkpoint));
        QVERIFY(!page.predictions()->hasTop5());
        QVERIFY(table->isColumnHidden(ui::ClassAccuracyModel::Top5));
    }

    void badCheckpoint()
    {
        const QString bad = m_dir.filePath(QStringLiteral("broken.safetensors"));
        QFile f(bad);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(QByteArray(100, 'z'));
        f.close();
        ClassifyPage page;
        QSignalSpy loaded(&page, &ClassifyPage::checkpointLoaded);
        QSignalSpy errors(&page, &ClassifyPage::errorOccurred);
        page.openCheckpoint(bad);
        QVERIFY(loaded.wait(20000));
        QCOMPARE(loaded.at(0).at(0).toBool(), false);
        QVERIFY(!page.hasClassifier());
        QCOMPARE(errors.count(), 1);
        QVERIFY(errors.at(0).at(0).toString().contains(QStringLiteral("broken.safetensors")));

        // With a checkpoint loaded, the page goes on with it: the header names it, and why the
        // new one failed.
        page.openCheckpoint(m_checkpoint);
        QVERIFY(loaded.wait(20000));
        QVERIFY(page.hasClassifier());
        page.openCheckpoint(bad);
        QVERIFY(loaded.wait(20000));
        QCOMPARE(loaded.last().at(0).toBool(), false);
        QVERIFY(page.hasClassifier());
        QCOMPARE(page.checkpointPath(), m_checkpoint);
        QString header;
        for (auto* l : page.findChildren<QLabel*>())
            if (l->text().contains(QStringLiteral("Still using"))) header = l->text();
        QVERIFY2(header.startsWith(QStringLiteral("<b>Still using ckpt-00000042.safetensors</b>")),
                 qPrintable(header));
        QVERIFY2(header.contains(QStringLiteral("cannot use %1: ").arg(bad)), qPrintable(header));
    }
};

QTEST_MAIN(TestClassifyPage)
#include "tst_classify_page.moc"
