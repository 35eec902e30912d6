// The item models of the Runs and Classify pages (run list, checkpoints, per-class accuracy):
// consistent as item models, and showing what their data says.
#include <QAbstractItemModelTester>
#include <QApplication>
#include <QFile>
#include <QFileInfo>
#include <QFont>
#include <QIcon>
#include <QImage>
#include <QTemporaryDir>
#include <QTest>

#include "checkpoint_files.h"
#include "engine/data/dataset.h"
#include "engine/train/checkpoint.h"
#include "ui/models/checkpoint_list_model.h"
#include "ui/models/class_accuracy_model.h"
#include "ui/models/run_list_model.h"
#include "ui_test_support.h"

using namespace towers;

class TestRunModels : public QObject
{
    Q_OBJECT
private slots:
    void runList()
    {
        ui::RunListModel model;
        QAbstractItemModelTester tester(&model,
                                        QAbstractItemModelTester::FailureReportingMode::QtTest);
        std::vector<app::RunSummary> runs(2);
        runs[0].folder = QStringLiteral("/r/a");
        runs[0].name = QStringLiteral("a");
        runs[0].config = engine::TrainConfig{};
        runs[0].config->model = "fashion-fast";
        runs[0].config->dataset = "mnist";
        runs[0].config->steps = 500;
        runs[0].lastStep = 250;
        runs[0].accuracy = 0.9123;
        runs[0].accuracyStep = 250;
        runs[0].checkpoints = {{100, "/r/a/checkpoints/ckpt-00000100.safetensors"}};
        runs[0].best = engine::BestCheckpoint{runs[0].checkpoints[0], 0.925};
        runs[1].folder = QStringLiteral("/r/b");
        runs[1].name = QStringLiteral("b");
        runs[1].problem = QStringLiteral("config.json: bad");
        model.setRuns(runs);
        QCOMPARE(model.rowCount(), 2);
        QCOMPARE(model.data(model.index(0, ui::RunListModel::Model)).toString(),
                 QStringLiteral("fashion-fast"));
        QCOMPARE(model.data(model.index(0, ui::RunListModel::Steps)).toString(),
                 QStringLiteral("250 / 500"));
        QCOMPARE(model.data(model.index(0, ui::RunListModel::Accuracy)).toString(),
                 QStringLiteral("91.23 %"));
        QCOMPARE(model.data(model.index(0, ui::RunListModel::Checkpoints), Qt::EditRole).toInt(),
                 1);
        QCOMPARE(model.data(model.index(1, ui::RunListModel::Accuracy)).toString(),
                 QStringLiteral("–"));
        // Precision @ 5, for a run that logged it; a dash for one that did not.
        QCOMPARE(model.data(model.index(0, ui::RunListModel::Top5)).toString(),
                 QStringLiteral("–"));
        QVERIFY(model.data(model.index(0, ui::RunListModel::Top5), Qt::EditRole).isNull());
        QCOMPARE(model.headerData(ui::RunListModel::Top5, Qt::Horizontal).toString(),
                 QStringLiteral("Top 5"));
        QCOMPARE(model.data(model.index(0, ui::RunListModel::Accuracy), Qt::ToolTipRole).toString(),
                 QStringLiteral("Test accuracy 91.23 % at step 250, the latest evaluation\n"
                                "Best checkpoint: 92.50 % at step 100"));
        QCOMPARE(model.data(model.index(1, ui::RunListModel::Run), Qt::ToolTipRole).toString(),
                 QStringLiteral("config.json: bad"));
        QVERIFY(model.data(model.index(0, ui::RunListModel::Run), Qt::DecorationRole).isNull());
        // A followed run's progress; trained now: an icon, and by whom.
        app::RunSummary progressed = *model.run(0);
        progressed.lastStep = 300;
        progressed.trainingBy = QStringLiteral("process 7 on node1");
        model.updateRun(0, progressed);
        model.updateRun(7, progressed); // no such row: nothing
        QCOMPARE(model.data(model.index(0, ui::RunListModel::Steps)).toString(),
                 QStringLiteral("300 / 500"));
        QVERIFY(model.data(model.index(0, ui::RunListModel::Run), Qt::ToolTipRole)
                    .toString()
                    .contains(QStringLiteral("Training now: process 7 on node1")));
        QVERIFY(!model.data(model.index(0, ui::RunListModel::Run), Qt::DecorationRole).isNull());
        // On a dark palette the marker is drawn in the palette's text colour: the style's glyph
        // is black, dark on dark.
        const QPalette light = QApplication::palette();
        QApplication::setPalette(towers::test::darkPalette());
        const QImage marker = model.data(model.index(0, ui::RunListModel::Run), Qt::DecorationRole)
                                  .value<QIcon>()
                                  .pixmap(32, 32)
                                  .toImage()
                                  .convertToFormat(QImage::Format_ARGB32);
        QApplication::setPalette(light);
        qint64 lightness = 0, opaque = 0;
        for (int y = 0; y < marker.height(); ++y)
            for (int x = 0; x < marker.width(); ++x)
                if (marker.pixelColor(x, y).alpha() >= 128) {
                    lightness += marker.pixelColor(x, y).lightness();
                    ++opaque;
                }
        QVERIFY(opaque > 0);
        QVERIFY2(lightness / opaque > 160, qPrintable(QString::number(lightness / opaque)));
        // A run evaluated on its validation set says so; one whose patience ran out, that it
        // stopped early.
        app::RunSummary validated = *model.run(0);
        validated.config->validation = 0.1;
        validated.config->patience = 1;
        validated.evaluations = {{100, 0.95}, {250, 0.9123}}; // one no better, before step 500
        model.updateRun(0, validated);
        QCOMPARE(model.data(model.index(0, ui::RunListModel::Accuracy)).toString(),
                 QStringLiteral("91.23 % val"));
        QVERIFY(model.data(model.index(0, ui::RunListModel::Accuracy), Qt::ToolTipRole)
                    .toString()
                    .startsWith(QStringLiteral("Validation accuracy 91.23 % at step 250")));
        QCOMPARE(model.data(model.index(0, ui::RunListModel::Steps)).toString(),
                 QStringLiteral("300 / 500, stopped early"));
        QCOMPARE(model.headerData(ui::RunListModel::Accuracy, Qt::Horizontal).toString(),
                 QStringLiteral("Accuracy"));
        app::RunSummary hundred = *model.run(0);
        hundred.accuracyTop5 = 0.6875;
        model.updateRun(0, hundred);
        QCOMPARE(model.data(model.index(0, ui::RunListModel::Top5)).toString(),
                 QStringLiteral("68.75 %"));
        QCOMPARE(model.data(model.index(0, ui::RunListModel::Top5), Qt::EditRole).toDouble(),
                 0.6875);
        QCOMPARE(model.rowOf(QStringLiteral("/r/b/")), 1);
        QCOMPARE(model.rowOf(QStringLiteral("/r/c")), -1);
        QCOMPARE(model.run(5), nullptr);
        model.setRuns({});
        QCOMPARE(model.rowCount(), 0);
    }

    // "Last change" reads as short as it can: the time today, then yesterday, the day this year,
    // else the date; its tooltip has the whole date and time.
    void changedText()
    {
        QLocale::setDefault(QLocale::c());
        const QDateTime now(QDate(2026, 11, 28), QTime(9, 30));
        const QString time = QLocale().toString(QTime(8, 5), QLocale::ShortFormat);
        QCOMPARE(ui::RunListModel::changedText(QDateTime(QDate(2026, 11, 28), QTime(8, 5)), now),
                 time);
        QCOMPARE(ui::RunListModel::changedText(QDateTime(QDate(2026, 11, 27), QTime(8, 5)), now),
                 QStringLiteral("yesterday ") + time);
        QCOMPARE(ui::RunListModel::changedText(QDateTime(QDate(2026, 3, 4), QTime(8, 5)), now),
                 QStringLiteral("4 Mar ") + time);
        QCOMPARE(ui::RunListModel::changedText(QDateTime(QDate(2025, 12, 31), QTime(8, 5)), now),
                 QLocale().toString(QDate(2025, 12, 31), QLocale::ShortFormat));
        QCOMPARE(ui::RunListModel::changedText(QDateTime(), now), QStringLiteral("–"));
        QLocale::setDefault(QLocale::system());
    }

    void checkpoints()
    {
        QTemporaryDir dir;
        std::vector<engine::CheckpointFile> files;
        engine::Dataset data; // what a checkpoint names: 28x28 grey images of 10 classes
        data.name = "fashion-mnist";
        for (int c = 0; c < 10; ++c) data.classNames.push_back("class " + std::to_string(c));
        for (engine::ImageSet* set : {&data.train, &data.test}) {
            set->count = 1;
            set->height = set->width = 28;
            set->channels = 1;
            set->pixels.assign(28 * 28, 7);
            set->labels = {0};
        }
        for (int s : {100, 200, 300}) {
            const QString p =
                dir.filePath(QStringLiteral("ckpt-%1.safetensors").arg(s, 8, 10, QLatin1Char('0')));
            test::writeFreshCheckpoint("fashion-fast", data, p.toStdString(), 3, s);
            files.push_back({s, p.toStdString()});
        }
        ui::CheckpointListModel model;
        QAbstractItemModelTester tester(&model,
                                        QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setCheckpoints(files);
        QCOMPARE(model.rowCount(), 3);
        QCOMPARE(
            model.data(model.index(0, ui::CheckpointListModel::Step), Qt::EditRole).toLongLong(),
            300); // newest first
        QCOMPARE(
            model.data(model.index(2, ui::CheckpointListModel::Size), Qt::EditRole).toLongLong(),
            QFileInfo(QString::fromStdString(files[0].path.string())).size());
        QCOMPARE(model.path(1), QString::fromStdString(files[1].path.string()));
        QCOMPARE(model.data(model.index(0, ui::CheckpointListModel::File)).toString(),
                 QStringLiteral("ckpt-00000300.safetensors"));
        QVERIFY(model.path(3).isEmpty());

        // Evaluations: each checkpoint's accuracy at its step, the best one marked (an
        // evaluation at a step without a checkpoint does not count).
        QCOMPARE(model.bestRow(), -1);
        QVERIFY(model.data(model.index(0, ui::CheckpointListModel::Accuracy)).toString().isEmpty());
        model.setEvaluations({{100, 0.8}, {150, 0.99}, {200, 0.875}, {300, 0.85}});
        QCOMPARE(model.bestRow(), 1); // step 200
        QCOMPARE(model.data(model.index(1, ui::CheckpointListModel::Accuracy)).toString(),
                 QStringLiteral("87.50 % best"));
        QCOMPARE(model.data(model.index(0, ui::CheckpointListModel::Accuracy)).toString(),
                 QStringLiteral("85.00 %"));
        QVERIFY(model.data(model.index(1, 0), ui::CheckpointListModel::BestRole).toBool());
        QVERIFY(!model.data(model.index(0, 0), ui::CheckpointListModel::BestRole).toBool());
        QVERIFY(model.data(model.index(1, ui::CheckpointListModel::Accuracy), Qt::FontRole)
                    .value<QFont>()
                    .bold());
        QCOMPARE(
            model.data(model.index(2, ui::CheckpointListModel::Accuracy), Qt::EditRole).toDouble(),
            0.8);
        // A later evaluation may make the newest the best.
        model.setEvaluations({{100, 0.8}, {200, 0.875}, {300, 0.9}});
        QCOMPARE(model.bestRow(), 0);
        model.setCheckpoints(files); // without evaluations
        QCOMPARE(model.bestRow(), -1);
        // The evaluations of a run that holds a validation set out are on it.
        QCOMPARE(model.headerData(ui::CheckpointListModel::Accuracy, Qt::Horizontal).toString(),
                 QStringLiteral("Test accuracy"));
        model.setValidation(true);
        QCOMPARE(model.headerData(ui::CheckpointListModel::Accuracy, Qt::Horizontal).toString(),
                 QStringLiteral("Validation accuracy"));

        // A checkpoint cut short (a full disk, an interrupted copy) is marked damaged, the best
        // one too: it still is the run's best by its evaluation, but it does not load.
        for (int row = 0; row < 3; ++row)
            QVERIFY(model.data(model.index(row, 0), ui::CheckpointListModel::DamagedRole)
                        .toString()
                        .isEmpty());
        QVERIFY(QFile::resize(QString::fromStdString(files[1].path.string()), 4000));
        model.setCheckpoints(files, {{100, 0.8}, {200, 0.875}, {300, 0.85}});
        QCOMPARE(model.bestRow(), 1);
        const QString why =
            model.data(model.index(1, 0), ui::CheckpointListModel::DamagedRole).toString();
        QVERIFY2(why.contains(QStringLiteral("truncated")), qPrintable(why));
        QCOMPARE(model.data(model.index(1, ui::CheckpointListModel::Accuracy)).toString(),
                 QStringLiteral("87.50 % best, damaged"));
        QCOMPARE(model.data(model.index(1, ui::CheckpointListModel::File)).toString(),
                 QStringLiteral("ckpt-00000200.safetensors (damaged)"));
        QVERIFY(!model.data(model.index(1, ui::CheckpointListModel::File), Qt::DecorationRole)
                     .isNull());
        QVERIFY(model.data(model.index(1, ui::CheckpointListModel::Step), Qt::ToolTipRole)
                    .toString()
                    .startsWith(QStringLiteral("This file does not read as a checkpoint: ")));
        QCOMPARE(model.data(model.index(0, ui::CheckpointListModel::File)).toString(),
                 QStringLiteral("ckpt-00000300.safetensors"));
        // One a newer Towers wrote (a later format, in a shared runs folder) is not damaged.
        engine::Checkpoint newer = engine::readCheckpoint(files[2].path);
        newer.info.formatVersion = 99;
        engine::writeCheckpoint(files[2].path, newer);
        model.setCheckpoints(files);
        QVERIFY(model.data(model.index(0, 0), ui::CheckpointListModel::DamagedRole)
                    .toString()
                    .isEmpty());
        QCOMPARE(model.data(model.index(0, ui::CheckpointListModel::File)).toString(),
                 QStringLiteral("ckpt-00000300.safetensors (a newer Towers')"));
        QVERIFY2(model.data(model.index(0, ui::CheckpointListModel::Step), Qt::ToolTipRole)
                     .toString()
                     .contains(QStringLiteral("written by a newer Towers?")),
                 qPrintable(model.data(model.index(0, 0), Qt::ToolTipRole).toString()));
    }

    void classAccuracy()
    {
        app::TestSetPredictions p;
        p.numClasses = 3;
        p.classCounts = {10, 5, 0};
        p.classCorrect = {9, 1, 0};
        p.classTop5 = {10, 4, 0};
        p.confusion = {9, 1, 0, 3, 1, 1, 0, 0, 0}; // rows: true class
        ui::ClassAccuracyModel model;
        QAbstractItemModelTester tester(&model,
                                        QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setResults({QStringLiteral("cat"), QStringLiteral("dog")},
                         p); // a name missing: its number
        QCOMPARE(model.rowCount(), 3);
        QCOMPARE(model.data(model.index(2, ui::ClassAccuracyModel::Class)).toString(),
                 QStringLiteral("2"));
        QCOMPARE(model.data(model.index(0, ui::ClassAccuracyModel::Accuracy)).toString(),
                 QStringLiteral("90.0 %"));
        QCOMPARE(
            model.data(model.index(1, ui::ClassAccuracyModel::Accuracy), Qt::EditRole).toDouble(),
            0.2);
        QCOMPARE(model.data(model.index(2, ui::ClassAccuracyModel::Accuracy)).toString(),
                 QStringLiteral("–"));
        // Precision: of the 12 answers "cat", 9 right; F1 their harmonic mean with recall.
        QCOMPARE(model.data(model.index(0, ui::ClassAccuracyModel::Precision)).toString(),
                 QStringLiteral("75.0 %"));
        QCOMPARE(model.data(model.index(0, ui::ClassAccuracyModel::F1)).toString(),
                 QStringLiteral("0.818"));
        QCOMPARE(model.data(model.index(2, ui::ClassAccuracyModel::Precision)).toString(),
                 QStringLiteral("0.0 %")); // answered once, wrongly
        QCOMPARE(model.data(model.index(1, ui::ClassAccuracyModel::F1), Qt::EditRole).toDouble(),
                 2 * 0.5 * 0.2 / 0.7);
        QCOMPARE(
            model.data(model.index(0, ui::ClassAccuracyModel::Class), Qt::ToolTipRole).toString(),
            QStringLiteral("cat: 10 test images, 9 right; answered 12 times"));
        // The top 5, each class's share; said in the tooltips for more than 10 classes only.
        QCOMPARE(model.data(model.index(1, ui::ClassAccuracyModel::Top5)).toString(),
                 QStringLiteral("80.0 %"));
        QCOMPARE(model.data(model.index(0, ui::ClassAccuracyModel::Top5), Qt::EditRole).toDouble(),
                 1.0);
        QCOMPARE(model.data(model.index(2, ui::ClassAccuracyModel::Top5)).toString(),
                 QStringLiteral("–"));
        QVERIFY(!model.hasTop5());
        app::TestSetPredictions many;
        many.numClasses = 12;
        many.classCounts.assign(12, 0);
        many.classCorrect.assign(12, 0);
        many.classTop5.assign(12, 0);
        many.confusion.assign(144, 0);
        many.classCounts[0] = 4;
        many.classCorrect[0] = 2;
        many.classTop5[0] = 3;
        many.confusion[0] = many.confusion[1] = 2;
        model.setResults({}, many);
        QVERIFY(model.hasTop5());
        QCOMPARE(model.data(model.index(0, ui::ClassAccuracyModel::Top5)).toString(),
                 QStringLiteral("75.0 %"));
        QCOMPARE(
            model.data(model.index(0, ui::ClassAccuracyModel::Class), Qt::ToolTipRole).toString(),
            QStringLiteral("0: 4 test images, 2 right; answered 2 times; 3 with their class among "
                           "the five most probable"));
        model.clear();
        QCOMPARE(model.rowCount(), 0);
        QVERIFY(!model.hasTop5());
    }
};

QTEST_MAIN(TestRunModels)
#include "tst_run_models.moc"
