// LrFinderDialog on a generated MNIST-style set: a range test up to a rate that makes the loss run
// away says where, as a learning rate (not a figure that reads like a loss), and so does the lowest
// loss's rate; the suggestion is offered; the batch it says counts the batches accumulated.
// (tst_main_window_runs opens it from the Model page.)
#include <QLabel>
#include <QPushButton>
#include <QTemporaryDir>
#include <QTest>

#include <filesystem>

#include "dataset_files.h"
#include "engine/data/dataset_spec.h"
#include "engine/train/recipe.h"
#include "ui/pages/lr_finder_dialog.h"

using namespace towers;
using towers::ui::LrFinderDialog;

class TestLrFinderDialog : public QObject
{
    Q_OBJECT
    QTemporaryDir m_dir;
    std::shared_ptr<const engine::Dataset> m_data;

private slots:
    void initTestCase()
    {
        const std::filesystem::path root = m_dir.path().toStdString();
        test::writeIdxDataset(root / "mnist", 400, 20, 28, 28, false, 5);
        m_data = std::make_shared<engine::Dataset>(engine::loadDataset("mnist", root / "mnist"));
    }

    void saysTheRateWhereTheLossRanAway()
    {
        QLocale::setDefault(QLocale::c());
        engine::TrainConfig c = engine::defaultConfigFor("fashion-fast");
        c.dataset = "mnist";
        c.towers = 1;
        c.batchPerTower = 16;
        c.threadsPerTower = 1;
        engine::LrRangeOptions o;
        o.minLr = 1e-4;
        o.maxLr = 1e4;
        o.steps = 40;
        LrFinderDialog dialog(c, m_data, o);
        dialog.show();
        QTRY_VERIFY_WITH_TIMEOUT(!dialog.isRunning(), 60000);
        QVERIFY2(dialog.result(), qPrintable(dialog.statusText()));
        const engine::LrRangeResult& r = *dialog.result();
        QVERIFY(r.diverged);
        const QString status = dialog.statusText();
        const QString at = QLocale().toString(r.points.back().lr, 'g', 3);
        QVERIFY2(
            status.contains(QStringLiteral("The loss ran away at a learning rate of %1.").arg(at)),
            qPrintable(status));
        QVERIFY2(r.suggestedLr > 0, qPrintable(status));
        QVERIFY2(status.contains(QStringLiteral("the lowest loss at a learning rate of %1.")
                                     .arg(QLocale().toString(r.minimumLr, 'g', 3))),
                 qPrintable(status));
        QVERIFY(dialog.useButton()->isEnabled());
    }

    // The test's batch as the run's: the batches each tower accumulates per step with it.
    void saysTheBatchesAccumulated()
    {
        QLocale::setDefault(QLocale::c());
        engine::TrainConfig c = engine::defaultConfigFor("fashion-fast");
        c.dataset = "mnist";
        c.towers = 1;
        c.batchPerTower = 16;
        c.accumulate = 3;
        c.threadsPerTower = 1;
        engine::LrRangeOptions o;
        o.steps = 5;
        LrFinderDialog dialog(c, m_data, o);
        QString intro;
        for (const auto* label : dialog.findChildren<QLabel*>())
            if (label->text().startsWith(QStringLiteral("The range test:"))) intro = label->text();
        QVERIFY2(intro.contains(QStringLiteral(" × 16 × 3 accumulated examples per step)")),
                 qPrintable(intro));
        dialog.stop();
        QTRY_VERIFY_WITH_TIMEOUT(!dialog.isRunning(), 60000);
        // The range test trains with the accumulation (the engine's lr-find path honours it).
        QVERIFY2(dialog.result(), qPrintable(dialog.statusText()));
    }
};

QTEST_MAIN(TestLrFinderDialog)
#include "tst_lr_finder_dialog.moc"
