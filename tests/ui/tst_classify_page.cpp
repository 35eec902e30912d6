// ClassifyPage with a checkpoint of fashion-fast on a generated MNIST-style set: a test image's
// top 5 match the engine's own probabilities; the same image saved as a PNG and opened as a file
// gives the same answer; a file that is not an image and a file that is not a checkpoint are
// reported by name; the whole test set gives the matrix, per-class results and the images of a
// clicked cell.
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include "app/inference/image_files.h"
#include "dataset_files.h"
#include "engine/models/registry.h"
#include "engine/train/checkpoint.h"
#include "engine/train/recipe.h"
#include "ui/models/sample_image_model.h"
#include "ui/pages/classify_page.h"
#include "ui/plots/bar_chart.h"
#include "ui/plots/heat_map.h"
#include <qcustomplot.h>

using towers::ui::ClassifyPage;
using namespace towers;

class TestClassifyPage : public QObject
{
    Q_OBJECT
    QTemporaryDir m_dir;
    QString m_checkpoint;
    std::shared_ptr<const engine::Dataset> m_data;

private slots:
    void initTestCase()
    {
        const std::filesystem::path root = m_dir.path().toStdString();
        test::writeIdxDataset(root / "mnist", 100, 120, 28, 28, false, 5);
        m_data = std::make_shared<engine::Dataset>(engine::loadDataset("mnist", root / "mnist"));
        auto model = engine::createModel("fashion-fast", 3);
        engine::CheckpointInfo info;
        info.model = "fashion-fast";
        info.dataset = "mnist";
        info.classNames = m_data->classNames;
        info.inputShape = model->inputShape();
        info.preprocessing = engine::preprocessingFor("fashion-fast", *m_data).toJson();
        info.step = 42;
        m_checkpoint = m_dir.filePath(QStringLiteral("ckpt-00000042.safetensors"));
        engine::writeCheckpoint(m_checkpoint.toStdString(), engine::makeCheckpoint(*model, info));
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

        page.classifyTestImage(17);
        QVERIFY(answered.wait(20000));
        const auto top = page.topClasses();
        QCOMPARE(top.size(), std::size_t(5));
        for (std::size_t i = 1; i < top.size(); ++i) QVERIFY(top[i - 1].second >= top[i].second);
        // The oracle: the engine's classifier on the same image.
        engine::Classifier oracle(m_checkpoint.toStdString());
        engine::ImageSet one;
        one.count = 1;
        one.height = one.width = 28;
        one.channels = 1;
        one.pixels.assign(m_data->test.image(17), m_data->test.image(17) + 28 * 28);
        one.labels = {0};
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
    }

    void wholeTestSet()
    {
        ClassifyPage page;
        page.resize(1100, 800);
        page.show();
        QVERIFY(QTest::qWaitForWindowExposed(&page));
        page.setDatasetProvider([this](const std::string&) {
            return ClassifyPage::DatasetSource{m_data, {}};
        });
        QSignalSpy loaded(&page, &ClassifyPage::checkpointLoaded);
        page.openCheckpoint(m_checkpoint);
        QVERIFY(loaded.wait(20000));
        QSignalSpy done(&page, &ClassifyPage::testSetClassified);
        page.classifyTestSet();
        QVERIFY(done.wait(30000));
        QCOMPARE(done.at(0).at(0).toBool(), true);
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
    }
};

QTEST_MAIN(TestClassifyPage)
#include "tst_classify_page.moc"
