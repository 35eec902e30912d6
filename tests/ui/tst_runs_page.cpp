// RunsPage over run folders written like a training run writes them: lists them, shows the
// selected run's configuration, curves and checkpoints (newest first), and asks to resume the run
// or classify with a checkpoint; resuming is refused while another run trains. A run that another
// process trains (its folder's lock held) is followed live, read-only: curves, checkpoints and each
// global tower's step times are read again on a timer until the lock is released. The left plot
// shows the loss or, as chosen over it, the learning rate and the gradients' norm.
#include <QAbstractButton>
#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QGuiApplication>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPushButton>
#include <QRegularExpression>
#include <QScrollBar>
#include <QSet>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>
#include <QTreeWidget>
#include <QUrl>

#include "engine/models/model_file.h"
#include "model_files.h"

#include "app/settings/app_settings.h"
#include "engine/train/run_directory.h"
#include "engine/train/run_lock.h"
#include "ui/models/checkpoint_list_model.h"
#include "ui/models/run_list_model.h"
#include "ui/pages/run_follower.h"
#include "ui/pages/runs_page.h"
#include "ui/plots/empty_message.h"
#include "ui/plots/plot_widget.h"
#include "ui/plots/stacked_bar_chart.h"
#include "ui/widgets/config_tree.h"
#include "ui/widgets/open_folder.h"
#include "ui_test_support.h"

#include <optional>
#include <qcustomplot.h>

#include <unistd.h>

using towers::ui::RunFollower;
using towers::ui::RunsPage;
namespace eng = towers::engine;

namespace {
// A run trained (and evaluated) to `steps` of `length` (0: `steps`, a finished run).
void makeRun(const QString& folder, std::int64_t steps,
             eng::Precision precision = eng::Precision::Float32, double accuracy = 0.5,
             const std::string& model = "fashion-fast", std::int64_t length = 0)
{
    const eng::RunDirectory dir(folder.toStdString());
    eng::TrainConfig c;
    c.model = model;
    c.dataset = "mnist";
    c.steps = length > 0 ? length : steps;
    c.precision = precision;
    dir.writeConfig(c.toJson());
    for (std::int64_t s = 1; s <= steps; ++s)
        dir.appendMetrics("{\"step\":" + std::to_string(s) +
                          ",\"loss\":" + std::to_string(1.0 / double(s)) + "}");
    dir.appendEval("{\"step\":" + std::to_string(steps) +
                   ",\"precisionAt1\":" + std::to_string(accuracy) + "}");
    for (std::int64_t s : {steps / 2, steps}) {
        QFile f(QString::fromStdString(dir.checkpointPath(s).string()));
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("x");
    }
}

// A run of `processes` x `towers` global towers, as its first process writes config.json.
eng::RunDirectory makeClusterRun(const QString& folder, int processes, int towers)
{
    eng::RunDirectory dir(folder.toStdString());
    eng::TrainConfig c;
    c.model = "fashion-fast";
    c.dataset = "fashion-mnist";
    c.steps = 100;
    c.processes = processes;
    c.towers = towers;
    dir.writeConfig(c.toJson());
    return dir;
}

// A metrics.jsonl line as Trainer::report writes it, with one "towerTimes" entry per global tower.
std::string metricsLine(std::int64_t step, int globalTowers)
{
    std::string line = "{\"step\":" + std::to_string(step) +
                       ",\"totalSteps\":100,\"loss\":" + std::to_string(2.0 / double(step)) +
                       ",\"examplesPerSec\":1234.5,\"stepMs\":40,\"towerTimes\":[";
    for (int t = 0; t < globalTowers; ++t)
        line += std::string(t ? "," : "") + "{\"computeMs\":" + std::to_string(30 + t) +
                ",\"commMs\":" + std::to_string(step) + ",\"dataMs\":1,\"updateMs\":2}";
    return line + "]}";
}

// What the run of makeRateRun logged at a step: its learning rate, and its gradients' norm.
double rateAt(int step)
{
    return 0.1 / step;
}
double normAt(int step)
{
    return 0.25 * step;
}
// Every digit, so that the log reads back the same double.
std::string number(double v)
{
    return QString::number(v, 'g', 17).toStdString();
}
// A metrics.jsonl line with the step's rate and, unless `norm` is false (a run from before the norm
// was logged), its norm; step 3's norm was not finite, so not written.
std::string rateLine(int step, bool norm)
{
    std::string line = "{\"step\":" + std::to_string(step) +
                       ",\"totalSteps\":100,\"loss\":" + number(2.0 / step) +
                       ",\"lr\":" + number(rateAt(step));
    if (norm && step != 3) line += ",\"gradNorm\":" + number(normAt(step));
    return line + "}";
}
// A run of `steps` logged steps (rateLine's) that clips its gradients to `clip` (0: does not).
eng::RunDirectory makeRateRun(const QString& folder, int steps, double clip, bool norm = true)
{
    eng::RunDirectory dir(folder.toStdString());
    eng::TrainConfig c;
    c.model = "fashion-fast";
    c.dataset = "mnist";
    c.steps = 100;
    c.clipGradNorm = clip;
    dir.writeConfig(c.toJson());
    for (int s = 1; s <= steps; ++s) dir.appendMetrics(rateLine(s, norm));
    dir.appendEval("{\"step\":" + std::to_string(steps) + ",\"precisionAt1\":0.5}");
    return dir;
}
// The points of a plot's series, in order.
QVector<QPointF> pointsOf(towers::ui::PlotWidget* plot, int series)
{
    QVector<QPointF> out;
    const auto data = plot->customPlot()->graph(series)->data();
    for (auto p = data->constBegin(); p != data->constEnd(); ++p) out << QPointF(p->key, p->value);
    return out;
}
// The rates (or the norms) makeRateRun's run logged up to `steps`.
QVector<QPointF> loggedRates(int steps)
{
    QVector<QPointF> out;
    for (int s = 1; s <= steps; ++s) out << QPointF(s, rateAt(s));
    return out;
}
QVector<QPointF> loggedNorms(int steps)
{
    QVector<QPointF> out;
    for (int s = 1; s <= steps; ++s)
        if (s != 3) out << QPointF(s, normAt(s));
    return out;
}
QLabel* labelSaying(RunsPage& page, const QString& text)
{
    for (auto* l : page.findChildren<QLabel*>())
        if (l->text().contains(text)) return l;
    return nullptr;
}

// The value the configuration tree shows for a setting ("optimizer/kind" for one in a branch).
QString configValue(RunsPage& page, const QString& path)
{
    auto* tree = page.findChild<QTreeWidget*>();
    if (!tree) return QStringLiteral("(no configuration tree)");
    const QStringList names = path.split(QLatin1Char('/'));
    QTreeWidgetItem* item = tree->invisibleRootItem();
    for (const QString& name : names) {
        QTreeWidgetItem* next = nullptr;
        for (int i = 0; i < item->childCount() && !next; ++i)
            if (item->child(i)->text(0) == name) next = item->child(i);
        if (!next) return QStringLiteral("(no %1)").arg(path);
        item = next;
    }
    return item->text(1);
}

QPushButton* button(RunsPage& page, const QString& text)
{
    for (auto* b : page.findChildren<QPushButton*>())
        if (b->text().remove(QLatin1Char('&')) == text) return b;
    return nullptr;
}
} // namespace

class TestRunsPage : public QObject
{
    Q_OBJECT
private slots:
    // The counts read as English writes them ("1 tower", "2 checkpoints"), as in towers.
    void initTestCase() { QVERIFY(towers::test::installPluralForms()); }

    // A runs folder that cannot be listed is said so, naming it and why: it read "No runs in ...
    // yet: start one on the Train page."
    void saysWhyTheRunsCannotBeListed()
    {
        QTemporaryDir root;
        QFile file(root.filePath(QStringLiteral("afile")));
        QVERIFY(file.open(QIODevice::WriteOnly));
        file.close();
        towers::app::AppSettings settings(towers::test::settingsFile(root.path()));
        settings.setRunsDir(root.filePath(QStringLiteral("afile")));
        RunsPage page(settings);
        page.show();
        QSignalSpy refreshed(&page, &RunsPage::refreshed);
        QVERIFY(refreshed.wait(10000));
        QVERIFY(!labelSaying(page, QStringLiteral("No runs in")));
        QVERIFY(labelSaying(page, QStringLiteral("The runs cannot be listed: %1 is not a folder.")
                                      .arg(root.filePath(QStringLiteral("afile")))));
    }

    // A run that logged precision @ 5 (more than 10 classes) shows it beside precision @ 1; one
    // that did not, nothing of it (no empty legend entry).
    void topFiveOfARunThatLoggedIt()
    {
        QTemporaryDir root;
        makeRun(root.filePath(QStringLiteral("runs/ten")), 10);
        const QString many = root.filePath(QStringLiteral("runs/many"));
        makeRun(many, 20);
        const eng::RunDirectory dir(many.toStdString());
        dir.appendEval(R"({"step":20,"precisionAt1":0.25,"precisionAt5":0.625,"correctTop5":5,)"
                       R"("classCounts":[1,1,1,1,1,1,1,1,1,1,1,1]})");
        towers::app::AppSettings settings(towers::test::settingsFile(root.path()));
        settings.setRunsDir(root.filePath(QStringLiteral("runs")));
        RunsPage page(settings);
        page.show();
        QSignalSpy refreshed(&page, &RunsPage::refreshed);
        QVERIFY(refreshed.wait(10000));
        page.selectRun(many);
        QTRY_COMPARE(page.accuracyPlot()->pointCount(1), 1);
        QVERIFY(page.accuracyPlot()->customPlot()->graph(1)->visible());
        QCOMPARE(page.accuracyPlot()->lastValue(1), 0.625);
        QCOMPARE(page.accuracyPlot()->seriesName(1), QStringLiteral("precision @ 5"));
        QCOMPARE(page.accuracyPlot()->customPlot()->graph(1)->pen().style(), Qt::DashLine);
        QCOMPARE(page.accuracyPlot()->customPlot()->legend->itemCount(), 2);
        page.selectRun(root.filePath(QStringLiteral("runs/ten")));
        QTRY_COMPARE(page.lossPlot()->pointCount(0), 10);
        QCOMPARE(page.accuracyPlot()->pointCount(0), 1);
        QVERIFY(!page.accuracyPlot()->customPlot()->graph(1)->visible());
        QCOMPARE(page.accuracyPlot()->customPlot()->legend->itemCount(), 1);
    }

    void listsAndActs()
    {
        QTemporaryDir root;
        makeRun(root.filePath(QStringLiteral("runs/one")), 20, eng::Precision::Float32, 0.5,
                "fashion-fast", 30); // stopped at step 20 of 30
        makeRun(root.filePath(QStringLiteral("runs/two")), 40);
        towers::app::AppSettings settings(towers::test::settingsFile(root.path()));
        settings.setRunsDir(root.filePath(QStringLiteral("runs")));
        RunsPage page(settings);
        page.show();
        QSignalSpy refreshed(&page, &RunsPage::refreshed);
        QVERIFY(refreshed.wait(10000));
        QCOMPARE(page.runModel()->rowCount(), 2);
        page.selectRun(root.filePath(QStringLiteral("runs/two")));
        QCOMPARE(page.selectedRun(), root.filePath(QStringLiteral("runs/two")));
        QCOMPARE(page.checkpointModel()->rowCount(), 2);
        QVERIFY(page.selectedCheckpoint().endsWith(QStringLiteral("ckpt-00000040.safetensors")));
        // config.json as settings and values, a nested object (the optimizer's) as a branch.
        QCOMPARE(configValue(page, QStringLiteral("steps")), QStringLiteral("40"));
        QCOMPARE(configValue(page, QStringLiteral("model")), QStringLiteral("fashion-fast"));
        QCOMPARE(configValue(page, QStringLiteral("optimizer/momentum")), QStringLiteral("0.9"));
        QTRY_COMPARE(page.lossPlot()->pointCount(0), 40);
        QCOMPARE(page.accuracyPlot()->pointCount(0), 1);
        // The evaluation's cross-entropy beside the training loss, at its step.
        QCOMPARE(page.lossPlot()->pointCount(1), 1);
        QCOMPARE(page.lossPlot()->seriesName(1), QStringLiteral("test cross-entropy"));

        QSignalSpy resume(&page, &RunsPage::resumeRequested);
        QSignalSpy classify(&page, &RunsPage::classifyRequested);
        // A finished run has nothing to resume (it ended again at once); a stopped one resumes.
        QPushButton* resumeButton = button(page, QStringLiteral("Resume this run"));
        QVERIFY(!resumeButton->isEnabled());
        QVERIFY2(resumeButton->toolTip().startsWith(QStringLiteral("It finished at step 40")),
                 qPrintable(resumeButton->toolTip()));
        page.selectRun(root.filePath(QStringLiteral("runs/one")));
        QVERIFY(resumeButton->isEnabled());
        QTest::mouseClick(resumeButton, Qt::LeftButton);
        QCOMPARE(resume.count(), 1);
        QCOMPARE(resume.at(0).at(0).toString(), root.filePath(QStringLiteral("runs/one")));
        page.selectRun(root.filePath(QStringLiteral("runs/two")));
        QTest::mouseClick(button(page, QStringLiteral("Classify with this checkpoint")),
                          Qt::LeftButton);
        QCOMPARE(classify.count(), 1);
        QVERIFY(
            classify.at(0).at(0).toString().endsWith(QStringLiteral("ckpt-00000040.safetensors")));

        // The checkpoint's context menu: classify, and a new run from it with its run's model.
        QSignalSpy fineTune(&page, &RunsPage::fineTuneRequested);
        QAction* start = nullptr;
        for (auto* view : page.findChildren<QTableView*>())
            for (auto* a : view->actions())
                if (a->text().startsWith(QStringLiteral("Start a new run from this checkpoint")))
                    start = a;
        QVERIFY(start);
        start->trigger();
        QCOMPARE(fineTune.count(), 1);
        QVERIFY(
            fineTune.at(0).at(0).toString().endsWith(QStringLiteral("ckpt-00000040.safetensors")));
        QCOMPARE(fineTune.at(0).at(1).toString(), QStringLiteral("fashion-fast"));
        // The run's context menu: a new run like it.
        QSignalSpy like(&page, &RunsPage::newRunLikeRequested);
        QAction* likeAction = nullptr;
        for (auto* view : page.findChildren<QTableView*>())
            for (auto* a : view->actions())
                if (a->text() == QStringLiteral("New run like this…")) likeAction = a;
        QVERIFY(likeAction);
        likeAction->trigger();
        QCOMPARE(like.count(), 1);
        QCOMPARE(like.at(0).at(0).toString(), root.filePath(QStringLiteral("runs/two")));

        page.setResumeAllowed(false);
        QVERIFY(!button(page, QStringLiteral("Resume this run"))->isEnabled());

        // A new run appears on refresh, the selection stays.
        makeRun(root.filePath(QStringLiteral("runs/three")), 10);
        page.refresh();
        QVERIFY(refreshed.wait(10000));
        QCOMPARE(page.runModel()->rowCount(), 3);
        QCOMPARE(page.selectedRun(), root.filePath(QStringLiteral("runs/two")));

        // Open folder with no file manager to open it: the window says so, naming the folder,
        // whose path is on the clipboard.
        QSignalSpy errors(&page, &RunsPage::errorOccurred);
        QList<QUrl> asked;
        towers::ui::setFolderOpenerForTests([&asked](const QUrl& url) {
            asked << url;
            return false;
        });
        QTest::mouseClick(button(page, QStringLiteral("Open folder")), Qt::LeftButton);
        QCOMPARE(asked, QList<QUrl>{QUrl::fromLocalFile(page.selectedRun())});
        QCOMPARE(errors.count(), 1);
        QVERIFY2(errors.at(0).at(0).toString().contains(
                     QDir::toNativeSeparators(root.filePath(QStringLiteral("runs/two")))),
                 qPrintable(errors.at(0).at(0).toString()));
        QCOMPARE(QGuiApplication::clipboard()->text(), root.filePath(QStringLiteral("runs/two")));
        // A file manager that opens it: nothing to say.
        towers::ui::setFolderOpenerForTests([](const QUrl&) { return true; });
        QTest::mouseClick(button(page, QStringLiteral("Open folder")), Qt::LeftButton);
        QCOMPARE(errors.count(), 1);
        towers::ui::setFolderOpenerForTests({});
    }

    // The table fits its pane (the run's name elided, never a sideways scroll), hides Model,
    // Dataset and Checkpoints at first, remembers the columns chosen in its header's menu, sorts
    // by a clicked column and filters by typed words, the selection always the run it shows.
    void tableSortsFiltersAndFits()
    {
        QTemporaryDir root;
        const QString runs = root.filePath(QStringLiteral("runs"));
        makeRun(runs + QStringLiteral("/fashion-mnist-fashion-fast-20261128-033037-long-name-a"),
                20, eng::Precision::Float32, 0.91);
        makeRun(runs + QStringLiteral("/b"), 30, eng::Precision::Float32, 0.75, "mnist-convnet");
        makeRun(runs + QStringLiteral("/c"), 10, eng::Precision::Float32, 0.83);
        towers::app::AppSettings settings(towers::test::settingsFile(root.path()));
        settings.setRunsDir(runs);
        {
            RunsPage page(settings);
            page.resize(900, 600);
            page.show();
            QSignalSpy refreshed(&page, &RunsPage::refreshed);
            QVERIFY(refreshed.wait(10000));
            QTableView* table = page.runTable();
            using towers::ui::RunListModel;
            for (int c : {RunListModel::Model, RunListModel::Dataset, RunListModel::Top5,
                          RunListModel::Checkpoints})
                QVERIFY(table->isColumnHidden(c));
            for (int c : {RunListModel::Run, RunListModel::Steps, RunListModel::Accuracy,
                          RunListModel::Modified})
                QVERIFY(!table->isColumnHidden(c));
            QTRY_VERIFY(table->horizontalHeader()->length() <= table->viewport()->width());
            QVERIFY(!table->horizontalScrollBar()->isVisible());

            // Sorted by test accuracy, best first: the rows and the selection follow.
            table->sortByColumn(RunListModel::Accuracy, Qt::DescendingOrder);
            const auto folderAt = [&](int row) {
                return page.shownRuns()
                    ->index(row, 0)
                    .data(RunListModel::FolderRole)
                    .toString()
                    .section(QLatin1Char('/'), -1);
            };
            QCOMPARE(folderAt(0),
                     QStringLiteral("fashion-mnist-fashion-fast-20261128-033037-long-name-a"));
            QCOMPARE(folderAt(1), QStringLiteral("c"));
            QCOMPARE(folderAt(2), QStringLiteral("b"));
            page.selectRun(runs + QStringLiteral("/c"));
            QCOMPARE(table->currentIndex().row(), 1);
            QCOMPARE(page.selectedRun(), runs + QStringLiteral("/c"));
            QTRY_COMPARE(page.lossPlot()->pointCount(0), 10);
            table->setCurrentIndex(page.shownRuns()->index(2, 0));
            QCOMPARE(page.selectedRun(), runs + QStringLiteral("/b"));
            QVERIFY(labelSaying(page, QStringLiteral("mnist-convnet on mnist")));

            // Filtered by model: only b; a run filtered out and then selected is shown again.
            page.runFilter()->setText(QStringLiteral("CONVNET"));
            QCOMPARE(page.shownRuns()->rowCount(), 1);
            QCOMPARE(page.selectedRun(), runs + QStringLiteral("/b"));
            page.runFilter()->setText(QStringLiteral("no such run"));
            QCOMPARE(page.shownRuns()->rowCount(), 0);
            QVERIFY(page.selectedRun().isEmpty());
            QVERIFY(labelSaying(page, QStringLiteral("Select a run.")));
            page.selectRun(runs + QStringLiteral("/c"));
            QVERIFY(page.runFilter()->text().isEmpty());
            QCOMPARE(page.selectedRun(), runs + QStringLiteral("/c"));

            // The header's menu shows a column; the choice is remembered.
            const QList<QAction*> actions = page.columnActions();
            QCOMPARE(actions.size(), RunListModel::ColumnCount - 1); // all but the run's name
            for (QAction* a : actions)
                if (a->text() == QStringLiteral("Model")) {
                    QVERIFY(!a->isChecked());
                    a->setChecked(true);
                }
            qDeleteAll(actions);
            QVERIFY(!table->isColumnHidden(RunListModel::Model));
        }
        RunsPage again(settings);
        QVERIFY(!again.runTable()->isColumnHidden(towers::ui::RunListModel::Model));
        QVERIFY(again.runTable()->isColumnHidden(towers::ui::RunListModel::Dataset));
    }

    // Runs selected together: one curve per run on both plots, named by the run; back to one
    // run, its own loss and accuracy again.
    void comparesSelectedRuns()
    {
        QTemporaryDir root;
        const QString runs = root.filePath(QStringLiteral("runs"));
        makeRun(runs + QStringLiteral("/one"), 20, eng::Precision::Float32, 0.7);
        makeRun(runs + QStringLiteral("/two"), 40, eng::Precision::Float32, 0.8);
        makeRun(runs + QStringLiteral("/three"), 30);
        towers::app::AppSettings settings(towers::test::settingsFile(root.path()));
        settings.setRunsDir(runs);
        RunsPage page(settings);
        page.show();
        QSignalSpy refreshed(&page, &RunsPage::refreshed);
        QSignalSpy compared(&page, &RunsPage::comparisonShown);
        QVERIFY(refreshed.wait(10000));
        page.selectRun(runs + QStringLiteral("/one"));
        QTRY_COMPARE(page.lossPlot()->pointCount(0), 20);
        QCOMPARE(page.lossPlot()->seriesCount(), 2); // the loss, the evaluations' cross-entropy

        // Ctrl-click "two": both compared; the details stay the current run's.
        const QModelIndex two = page.shownRuns()->index(
            page.shownRuns()
                ->mapFromSource(page.runModel()->index(
                    page.runModel()->rowOf(runs + QStringLiteral("/two")), 0))
                .row(),
            0);
        page.runTable()->selectionModel()->select(two, QItemSelectionModel::Select |
                                                           QItemSelectionModel::Rows);
        QVERIFY(compared.wait(10000));
        QCOMPARE(page.comparedRuns().size(), 2);
        QCOMPARE(page.lossPlot()->seriesCount(), 2);
        QCOMPARE(page.accuracyPlot()->seriesCount(), 2);
        QMap<QString, int> points;
        for (int i = 0; i < 2; ++i) {
            points[page.lossPlot()->seriesName(i)] = page.lossPlot()->pointCount(i);
            QCOMPARE(page.accuracyPlot()->pointCount(i), 1);
            QCOMPARE(page.accuracyPlot()->seriesName(i), page.lossPlot()->seriesName(i));
        }
        QCOMPARE(points,
                 (QMap<QString, int>{{QStringLiteral("one"), 20}, {QStringLiteral("two"), 40}}));
        QCOMPARE(page.selectedRun(), runs + QStringLiteral("/one"));
        QVERIFY(
            page.checkpointModel()->path(0).endsWith(QStringLiteral("ckpt-00000020.safetensors")));
        // The configuration pane: what differs between the two, a column each (their steps).
        auto* tree = page.findChild<QTreeWidget*>();
        QVERIFY(tree);
        QCOMPARE(tree->columnCount(), 3);
        QCOMPARE(tree->topLevelItemCount(), 1);
        const QTreeWidgetItem* steps = tree->topLevelItem(0);
        QCOMPARE(steps->text(0), QStringLiteral("steps"));
        const int oneColumn = tree->headerItem()->text(1) == QLatin1String("one") ? 1 : 2;
        QCOMPARE(tree->headerItem()->text(3 - oneColumn), QStringLiteral("two"));
        QCOMPARE(steps->text(oneColumn), QStringLiteral("20"));
        QCOMPARE(steps->text(3 - oneColumn), QStringLiteral("40"));

        // A plain click on "three": its own curves.
        page.selectRun(runs + QStringLiteral("/three"));
        QVERIFY(page.comparedRuns().isEmpty());
        QCOMPARE(page.lossPlot()->seriesCount(), 2);
        QTRY_COMPARE(page.lossPlot()->pointCount(0), 30);
        QCOMPARE(page.lossPlot()->seriesName(0), QStringLiteral("loss"));
        QCOMPARE(tree->columnCount(), 2); // its whole configuration again
        QCOMPARE(configValue(page, QStringLiteral("steps")), QStringLiteral("30"));
    }

    // Runs with the tool's long names compared: the legend sits under each plot, never over the
    // curves; the names there and over the configuration's columns are shortened in the middle,
    // keeping the end where they differ, and given in full in the tooltips.
    void comparesLongNamedRuns()
    {
        QTemporaryDir root;
        const QString runs = root.filePath(QStringLiteral("runs"));
        const QString a = QStringLiteral("fashion-mnist-fashion-fast-20261130-101500");
        const QString b = QStringLiteral("fashion-mnist-fashion-fast-20261130-114233");
        makeRun(runs + QLatin1Char('/') + a, 20, eng::Precision::Float32, 0.7);
        makeRun(runs + QLatin1Char('/') + b, 40, eng::Precision::Float32, 0.8);
        towers::app::AppSettings settings(towers::test::settingsFile(root.path()));
        settings.setRunsDir(runs);
        RunsPage page(settings);
        page.resize(1200, 800);
        page.show();
        QSignalSpy refreshed(&page, &RunsPage::refreshed);
        QSignalSpy compared(&page, &RunsPage::comparisonShown);
        QVERIFY(refreshed.wait(10000));
        page.selectRun(runs + QLatin1Char('/') + a);
        page.runTable()->selectAll();
        QVERIFY(compared.wait(10000));
        QCOMPARE(page.lossPlot()->seriesCount(), 2);
        QStringList shown;
        for (int i = 0; i < 2; ++i) {
            const QString name = page.lossPlot()->seriesName(i);
            const QString full = page.lossPlot()->seriesToolTip(i);
            QVERIFY2(name.size() < full.size() && name.contains(QStringLiteral("…")),
                     qPrintable(name));
            QVERIFY2(full == a || full == b, qPrintable(full));
            QVERIFY2(name.endsWith(full.right(6)), qPrintable(name)); // the time of day
            shown << name;
        }
        QVERIFY(shown[0] != shown[1]);
        for (towers::ui::PlotWidget* plot : {page.lossPlot(), page.accuracyPlot()}) {
            QVERIFY(plot->isLegendBelow());
            plot->replotNow();
            QCustomPlot* cp = plot->customPlot();
            QVERIFY(cp->legend->visible());
            QVERIFY2(!cp->legend->outerRect().intersects(cp->axisRect()->rect()),
                     qPrintable(plot->title()));
        }
        auto* tree = page.findChild<QTreeWidget*>();
        QCOMPARE(tree->columnCount(), 3);
        const QString h1 = tree->headerItem()->text(1), h2 = tree->headerItem()->text(2);
        QVERIFY2(h1 != h2 && h1.size() < a.size(), qPrintable(h1 + QLatin1Char(' ') + h2));
        QCOMPARE(QSet<QString>({tree->headerItem()->toolTip(1), tree->headerItem()->toolTip(2)}),
                 QSet<QString>({a, b}));
    }

    // The choice over the left plot, by keyboard (its label's mnemonic, then the arrow keys):
    // the run's learning rate on the left axis and its gradients' norm on the right, as its
    // metrics.jsonl has them, with the bound dashed for a run that clips and none for one that
    // does not; back to its loss and evaluations.
    void leftPlotShowsTheRateAndTheGradientNorm()
    {
        QTemporaryDir root;
        const QString runs = root.filePath(QStringLiteral("runs"));
        makeRateRun(runs + QStringLiteral("/clipping"), 8, 0.75);
        makeRateRun(runs + QStringLiteral("/plain"), 6, 0);
        towers::app::AppSettings settings(towers::test::settingsFile(root.path()));
        settings.setRunsDir(runs);
        RunsPage page(settings);
        page.resize(1100, 700);
        QSignalSpy refreshed(&page, &RunsPage::refreshed);
        page.show();
        QVERIFY(refreshed.wait(10000));
        page.selectRun(runs + QStringLiteral("/clipping"));
        towers::ui::PlotWidget* plot = page.lossPlot();
        QTRY_COMPARE(plot->pointCount(0), 8);
        QCOMPARE(page.leftPlot(), RunsPage::LeftPlot::Loss);
        QCOMPARE(plot->title(), QStringLiteral("Loss"));

        page.activateWindow();
        QVERIFY(QTest::qWaitForWindowActive(&page));
        QTest::keyClick(&page, Qt::Key_P, Qt::AltModifier);
        QCOMPARE(QApplication::focusWidget(), page.leftPlotChoice());
        QTest::keyClick(page.leftPlotChoice(), Qt::Key_Down);
        QCOMPARE(page.leftPlot(), RunsPage::LeftPlot::Rates);
        QCOMPARE(plot->title(), QStringLiteral("Rate and gradient norm"));
        QCOMPARE(plot->seriesCount(), 3);
        QCOMPARE(plot->seriesName(0), QStringLiteral("learning rate"));
        QCOMPARE(plot->seriesName(1), QStringLiteral("gradient norm"));
        QCOMPARE(plot->seriesName(2), QStringLiteral("clipped to 0.75"));
        QCOMPARE(pointsOf(plot, 0), loggedRates(8));
        QCOMPARE(pointsOf(plot, 1), loggedNorms(8)); // step 3's was not finite
        QCOMPARE(pointsOf(plot, 2), (QVector<QPointF>{{1, 0.75}, {8, 0.75}}));
        plot->replotNow();
        QVERIFY(plot->rightAxisShown());
        QCOMPARE(page.accuracyPlot()->pointCount(0), 1); // the other plot as it was

        // A run that does not clip: no bound.
        page.selectRun(runs + QStringLiteral("/plain"));
        QTRY_COMPARE(plot->pointCount(0), 6);
        QCOMPARE(plot->seriesCount(), 2);
        QCOMPARE(pointsOf(plot, 0), loggedRates(6));
        QCOMPARE(pointsOf(plot, 1), loggedNorms(6));
        plot->replotNow();
        QVERIFY(plot->rightAxisShown());

        QTest::keyClick(page.leftPlotChoice(), Qt::Key_Up);
        QCOMPARE(page.leftPlot(), RunsPage::LeftPlot::Loss);
        QCOMPARE(plot->title(), QStringLiteral("Loss"));
        QCOMPARE(plot->seriesCount(), 2);
        QCOMPARE(plot->seriesName(0), QStringLiteral("loss"));
        QCOMPARE(plot->seriesName(1), QStringLiteral("test cross-entropy"));
        QCOMPARE(plot->pointCount(0), 6);
        QCOMPARE(plot->pointCount(1), 1);
        plot->replotNow();
        QVERIFY(!plot->rightAxisShown());
    }

    // Every mnemonic of the page is its own: the choice's does not take another's key.
    void mnemonicsAreDistinct()
    {
        QTemporaryDir root;
        towers::app::AppSettings settings(towers::test::settingsFile(root.path()));
        settings.setRunsDir(root.filePath(QStringLiteral("runs")));
        RunsPage page(settings);
        QMap<QChar, QString> keys;
        QStringList clashes;
        const auto take = [&](const QString& text) {
            const qsizetype at = text.indexOf(QRegularExpression(QStringLiteral("&[^&]")));
            if (at < 0) return;
            const QChar key = text.at(at + 1).toLower();
            if (keys.contains(key)) clashes << keys.value(key) + QStringLiteral(" and ") + text;
            keys.insert(key, text);
        };
        for (auto* b : page.findChildren<QAbstractButton*>()) take(b->text());
        for (auto* l : page.findChildren<QLabel*>())
            if (l->buddy()) take(l->text());
        QVERIFY2(clashes.isEmpty(), qPrintable(clashes.join(QStringLiteral("; "))));
        QCOMPARE(keys.value(QLatin1Char('p')), QStringLiteral("Left &plot:"));
        QVERIFY(!keys.contains(QLatin1Char('l'))); // the window's Log
    }

    // A run from before the norm was logged: its rate alone, and the plot says the norm was not
    // logged; no right axis, no legend naming a curve that is not there, no "nothing logged".
    void anOlderRunShowsItsRateAlone()
    {
        QTemporaryDir root;
        const QString runs = root.filePath(QStringLiteral("runs"));
        makeRateRun(runs + QStringLiteral("/older"), 5, 0.75, false);
        towers::app::AppSettings settings(towers::test::settingsFile(root.path()));
        settings.setRunsDir(runs);
        RunsPage page(settings);
        page.resize(1100, 700);
        page.show();
        page.setLeftPlot(RunsPage::LeftPlot::Rates);
        towers::ui::PlotWidget* plot = page.lossPlot();
        QTRY_COMPARE(page.selectedRun(), runs + QStringLiteral("/older"));
        QTRY_COMPARE(plot->pointCount(0), 5);
        QCOMPARE(plot->seriesCount(), 1);
        QCOMPARE(pointsOf(plot, 0), loggedRates(5));
        QCOMPARE(plot->title(), QStringLiteral("Rate (norm not logged)"));
        QVERIFY(plot->toolTip().contains(QStringLiteral("no gradient norm")));
        plot->replotNow();
        QVERIFY(!plot->rightAxisShown());
        QVERIFY(!plot->customPlot()->legend->visible());
        QVERIFY(!plot->findChild<towers::ui::EmptyMessage*>()->isVisible());
    }

    // Runs compared: the norm of each, a curve per run named as their loss curves are (a run that
    // logged none says so in its name), the title saying what they are; back to the loss of each,
    // and to one run's rate and norm.
    void comparesGradientNorms()
    {
        QTemporaryDir root;
        const QString runs = root.filePath(QStringLiteral("runs"));
        makeRateRun(runs + QStringLiteral("/one"), 4, 0.75);
        makeRateRun(runs + QStringLiteral("/two"), 7, 0);
        makeRateRun(runs + QStringLiteral("/three"), 5, 0, false);
        towers::app::AppSettings settings(towers::test::settingsFile(root.path()));
        settings.setRunsDir(runs);
        RunsPage page(settings);
        page.resize(1100, 700);
        page.show();
        QSignalSpy refreshed(&page, &RunsPage::refreshed);
        QSignalSpy compared(&page, &RunsPage::comparisonShown);
        QVERIFY(refreshed.wait(10000));
        page.setLeftPlot(RunsPage::LeftPlot::Rates);
        page.selectRun(runs + QStringLiteral("/one"));
        page.runTable()->selectAll();
        QVERIFY(compared.wait(10000));
        towers::ui::PlotWidget* plot = page.lossPlot();
        QCOMPARE(plot->title(), QStringLiteral("Gradient norm of 3 runs"));
        QCOMPARE(page.leftPlotChoice()->currentText(), QStringLiteral("Gradient norm"));
        QCOMPARE(plot->seriesCount(), 3);
        QMap<QString, QVector<QPointF>> norms;
        for (int i = 0; i < 3; ++i) {
            norms[plot->seriesName(i)] = pointsOf(plot, i);
            QCOMPARE(plot->seriesToolTip(i), plot->seriesName(i).section(QLatin1Char(' '), 0, 0));
        }
        QCOMPARE(norms,
                 (QMap<QString, QVector<QPointF>>{{QStringLiteral("one"), loggedNorms(4)},
                                                  {QStringLiteral("two"), loggedNorms(7)},
                                                  {QStringLiteral("three (not logged)"), {}}}));
        plot->replotNow();
        QVERIFY(!plot->rightAxisShown()); // the norms on the left axis, the rates not shown

        // Their loss, named alike.
        page.setLeftPlot(RunsPage::LeftPlot::Loss);
        QCOMPARE(plot->title(), QStringLiteral("Loss of 3 runs"));
        QMap<QString, int> losses;
        for (int i = 0; i < 3; ++i) losses[plot->seriesName(i)] = plot->pointCount(i);
        QCOMPARE(losses, (QMap<QString, int>{{QStringLiteral("one"), 4},
                                             {QStringLiteral("two"), 7},
                                             {QStringLiteral("three"), 5}}));
        page.setLeftPlot(RunsPage::LeftPlot::Rates);
        QCOMPARE(plot->title(), QStringLiteral("Gradient norm of 3 runs"));

        // One run again: its rate and norm.
        page.selectRun(runs + QStringLiteral("/one"));
        QVERIFY(page.comparedRuns().isEmpty());
        QTRY_COMPARE(plot->seriesCount(), 3);
        QCOMPARE(plot->title(), QStringLiteral("Rate and gradient norm"));
        QCOMPARE(page.leftPlotChoice()->currentText(),
                 QStringLiteral("Learning rate and gradient norm"));
        QCOMPARE(pointsOf(plot, 0), loggedRates(4));
        QCOMPARE(pointsOf(plot, 1), loggedNorms(4));
    }

    // A run that another process trains: its rate and norm grow as its log does, and a run
    // resumed by a version that logs the norm gets its norm curve (and its bound) from then on.
    void followedRunUpdatesItsRates()
    {
        QTemporaryDir root;
        const QString folder = root.filePath(QStringLiteral("runs/live"));
        const eng::RunDirectory dir = makeRateRun(folder, 3, 0.75, false);
        std::optional<eng::RunLock> lock =
            eng::RunLock::acquire(folder.toStdString(), "towers-cli train");
        towers::app::AppSettings settings(towers::test::settingsFile(root.path()));
        settings.setRunsDir(root.filePath(QStringLiteral("runs")));
        RunsPage page(settings);
        page.follower()->setInterval(100);
        page.setLeftPlot(RunsPage::LeftPlot::Rates);
        page.resize(1100, 700);
        page.show();
        QTRY_COMPARE(page.follower()->state(), RunFollower::State::Live);
        towers::ui::PlotWidget* plot = page.lossPlot();
        QTRY_COMPARE(plot->pointCount(0), 3);
        QCOMPARE(plot->seriesCount(), 1);
        for (int s = 4; s <= 6; ++s) dir.appendMetrics(rateLine(s, true));
        QTRY_COMPARE(plot->pointCount(0), 6);
        QCOMPARE(pointsOf(plot, 0), loggedRates(6));
        QCOMPARE(plot->seriesCount(), 3);
        QCOMPARE(pointsOf(plot, 1), (QVector<QPointF>{{4, 1.0}, {5, 1.25}, {6, 1.5}}));
        QCOMPARE(pointsOf(plot, 2), (QVector<QPointF>{{4, 0.75}, {6, 0.75}}));
        QCOMPARE(plot->title(), QStringLiteral("Rate and gradient norm"));
        dir.appendMetrics(rateLine(7, true));
        QTRY_COMPARE(plot->pointCount(1), 4);
        QCOMPARE(plot->lastValue(1), normAt(7));
        QCOMPARE(plot->lastValue(0), rateAt(7));
        lock.reset();
        QTRY_COMPARE(page.follower()->state(), RunFollower::State::Ended);
    }

    // The left plot's choice is remembered: the next page (the next session) starts with it.
    void leftPlotChoiceIsRemembered()
    {
        QTemporaryDir root;
        towers::app::AppSettings settings(towers::test::settingsFile(root.path()));
        settings.setRunsDir(root.filePath(QStringLiteral("runs")));
        {
            RunsPage page(settings);
            QCOMPARE(page.leftPlot(), RunsPage::LeftPlot::Loss); // at first
            page.setLeftPlot(RunsPage::LeftPlot::Rates);
        }
        settings.sync();
        towers::app::AppSettings again(towers::test::settingsFile(root.path()));
        RunsPage page(again);
        QCOMPARE(page.leftPlot(), RunsPage::LeftPlot::Rates);
        QCOMPARE(page.lossPlot()->title(), QStringLiteral("Rate and gradient norm"));
        page.setLeftPlot(RunsPage::LeftPlot::Loss);
        again.sync();
        QCOMPARE(towers::app::AppSettings(towers::test::settingsFile(root.path())).runsLeftPlot(),
                 QStringLiteral("loss"));
    }

    // "Move to trash…": asked first, the folder goes to the desktop's trash (restorable, nothing
    // deleted) and the list forgets it; a run that this window or another process trains is
    // refused, with the action disabled and saying why, and so is a folder that holds no run.
    void movesARunToTheTrash()
    {
        QTemporaryDir root;
        // The trash of the test's own "home", on the runs' file system.
        qputenv("XDG_DATA_HOME", root.filePath(QStringLiteral("xdg")).toUtf8());
        const QString runs = root.filePath(QStringLiteral("runs"));
        makeRun(runs + QStringLiteral("/one"), 10);
        QVERIFY(QFile::remove(runs + QStringLiteral("/one/checkpoints/ckpt-00000005.safetensors")));
        makeRun(runs + QStringLiteral("/two"), 20);
        makeRun(runs + QStringLiteral("/busy"), 5);
        towers::app::AppSettings settings(towers::test::settingsFile(root.path()));
        settings.setRunsDir(runs);
        RunsPage page(settings);
        page.show();
        QSignalSpy refreshed(&page, &RunsPage::refreshed);
        QSignalSpy trashed(&page, &RunsPage::runTrashed);
        QSignalSpy errors(&page, &RunsPage::errorOccurred);
        QVERIFY(refreshed.wait(10000));

        // Cancel first: nothing moves. The question counts the run's checkpoints.
        page.selectRun(runs + QStringLiteral("/one"));
        QMessageBox* box = page.askToTrashSelectedRun();
        QVERIFY(box);
        QVERIFY2(box->text().contains(QStringLiteral("one (fashion-fast on mnist, step 10, 1 "
                                                     "checkpoint) to the trash?")),
                 qPrintable(box->text()));
        box->button(QMessageBox::Cancel)->click();
        page.selectRun(runs + QStringLiteral("/two"));
        QVERIFY(page.trashAction()->isEnabled());
        box = page.askToTrashSelectedRun();
        QVERIFY(box);
        QVERIFY2(box->text().contains(QStringLiteral("two (fashion-fast on mnist, step 20, 2 "
                                                     "checkpoints) to the trash?")),
                 qPrintable(box->text()));
        box->button(QMessageBox::Cancel)->click();
        QVERIFY(QFileInfo::exists(runs + QStringLiteral("/two/config.json")));
        QCOMPARE(trashed.count(), 0);

        // Confirmed: in the trash with everything in it, out of the list.
        box = page.askToTrashSelectedRun();
        QVERIFY(box);
        QAbstractButton* yes = nullptr;
        for (QAbstractButton* b : box->buttons())
            if (b->text() == QStringLiteral("Move to trash")) yes = b;
        QVERIFY(yes);
        yes->click();
        QCOMPARE(trashed.count(), 1);
        QCOMPARE(trashed.at(0).at(0).toString(), runs + QStringLiteral("/two"));
        const QString there = trashed.at(0).at(1).toString();
        QVERIFY2(there.startsWith(root.filePath(QStringLiteral("xdg/Trash/files/"))),
                 qPrintable(there));
        QVERIFY(
            QFileInfo::exists(there + QStringLiteral("/checkpoints/ckpt-00000020.safetensors")));
        QVERIFY(QFileInfo::exists(there + QStringLiteral("/metrics.jsonl")));
        QVERIFY(!QFileInfo::exists(runs + QStringLiteral("/two")));
        QVERIFY(refreshed.wait(10000));
        QCOMPARE(page.runModel()->rowCount(), 2);
        QVERIFY(errors.isEmpty());

        // Trained by another process (a lock held): refused, and it stays.
        std::optional<eng::RunLock> lock = eng::RunLock::acquire(
            (runs + QStringLiteral("/busy")).toStdString(), "towers-cli train");
        page.refresh();
        QVERIFY(refreshed.wait(10000));
        page.selectRun(runs + QStringLiteral("/busy"));
        QTRY_VERIFY(!page.trashAction()->isEnabled());
        QVERIFY(page.trashAction()->toolTip().contains(QStringLiteral("Another process")));
        QVERIFY(!page.askToTrashSelectedRun());
        QVERIFY(!page.trashRun(runs + QStringLiteral("/busy")));
        QCOMPARE(errors.count(), 1);
        QVERIFY2(errors.at(0).at(0).toString().contains(QStringLiteral("is being trained by")) &&
                     errors.at(0).at(0).toString().contains(QStringLiteral("towers-cli train")),
                 qPrintable(errors.at(0).at(0).toString()));
        QVERIFY(QFileInfo::exists(runs + QStringLiteral("/busy/config.json")));
        lock.reset();

        // This window's own run: disabled while it trains.
        page.selectRun(runs + QStringLiteral("/one"));
        page.setOwnRunFolder(runs + QStringLiteral("/one"));
        QVERIFY(!page.trashAction()->isEnabled());
        QVERIFY(page.trashAction()->toolTip().contains(QStringLiteral("This window trains")));
        page.setOwnRunFolder(QString());
        QVERIFY(page.trashAction()->isEnabled());

        // A folder that holds no run, and one that is not there.
        QVERIFY(QDir().mkpath(root.filePath(QStringLiteral("plain"))));
        QVERIFY(!page.trashRun(root.filePath(QStringLiteral("plain"))));
        QVERIFY(errors.last().at(0).toString().contains(QStringLiteral("is not a run folder")));
        QVERIFY(QFileInfo::exists(root.filePath(QStringLiteral("plain"))));
        QVERIFY(!page.trashRun(root.filePath(QStringLiteral("gone"))));
        QVERIFY(errors.last().at(0).toString().contains(QStringLiteral("no such folder")));
        qunsetenv("XDG_DATA_HOME");
    }

    // The run's title says its precision when it is not float32; its config.json shows it too.
    // A model file's network in config.json: one folded branch that names it and counts its layers.
    void modelFileNetworkIsFolded()
    {
        QTemporaryDir root;
        const QString folder = root.filePath(QStringLiteral("runs/mine"));
        const eng::RunDirectory dir(folder.toStdString());
        eng::TrainConfig c;
        c.model = "mine";
        c.modelDefinition =
            eng::canonicalModelDefinition(towers::test::fashionFastDefinition("mine"), "test");
        c.dataset = "mnist";
        c.steps = 10;
        dir.writeConfig(c.toJson());
        towers::app::AppSettings settings(towers::test::settingsFile(root.path()));
        settings.setRunsDir(root.filePath(QStringLiteral("runs")));
        RunsPage page(settings);
        page.show();
        QSignalSpy refreshed(&page, &RunsPage::refreshed);
        QVERIFY(refreshed.wait(10000));
        page.selectRun(folder);
        QCOMPARE(configValue(page, QStringLiteral("modelDefinition")),
                 QStringLiteral("mine: 10 layers, from a model file"));
        QCOMPARE(configValue(page, QStringLiteral("modelDefinition/name")), QStringLiteral("mine"));
        auto* tree = page.findChild<QTreeWidget*>();
        const auto found = tree->findItems(QStringLiteral("modelDefinition"), Qt::MatchExactly);
        QCOMPARE(found.size(), 1);
        QVERIFY(!found.first()->isExpanded());
        QVERIFY(
            tree->findItems(QStringLiteral("optimizer"), Qt::MatchExactly).first()->isExpanded());
    }

    // The folded network's layer count: "1 layer", "2 layers".
    void configTreeCountsTheLayers()
    {
        towers::ui::ConfigTree tree;
        const auto network = [&tree](int layers) {
            QStringList list;
            for (int i = 0; i < layers; ++i) list << QStringLiteral(R"({"type": "flatten"})");
            tree.showConfig(
                QStringLiteral(R"({"modelDefinition": {"name": "net", "layers": [%1]}})")
                    .arg(list.join(QStringLiteral(", "))));
            return tree.topLevelItemCount() == 1 ? tree.topLevelItem(0)->text(1) : QString();
        };
        QCOMPARE(network(1), QStringLiteral("net: 1 layer, from a model file"));
        QCOMPARE(network(2), QStringLiteral("net: 2 layers, from a model file"));
    }

    void titleSaysThePrecision()
    {
        QTemporaryDir root;
        makeRun(root.filePath(QStringLiteral("runs/fp32")), 10);
        makeRun(root.filePath(QStringLiteral("runs/bf16")), 10, eng::Precision::BFloat16);
        towers::app::AppSettings settings(towers::test::settingsFile(root.path()));
        settings.setRunsDir(root.filePath(QStringLiteral("runs")));
        RunsPage page(settings);
        QSignalSpy refreshed(&page, &RunsPage::refreshed);
        QVERIFY(refreshed.wait(10000));
        page.selectRun(root.filePath(QStringLiteral("runs/bf16")));
        QVERIFY(labelSaying(page, QStringLiteral("fashion-fast on mnist, 1 tower, bf16, step 10")));
        QCOMPARE(configValue(page, QStringLiteral("precision")), QStringLiteral("bf16"));
        page.selectRun(root.filePath(QStringLiteral("runs/fp32")));
        QVERIFY(labelSaying(page, QStringLiteral("fashion-fast on mnist, 1 tower, step 10")));
    }

    // A run whose training failed (failure.json) says so in its row and its title, with the error
    // (escaped: the title is rich text, the error may hold '<' or '&').
    void aFailedRunSaysSo()
    {
        QTemporaryDir root;
        const QString run = root.filePath(QStringLiteral("runs/div"));
        makeRun(run, 10);
        QFile failure(run + QStringLiteral("/failure.json"));
        QVERIFY(failure.open(QIODevice::WriteOnly));
        failure.write(R"({"step": 10, "error": "model diverged at step 11: <loss> & more"})");
        failure.close();
        towers::app::AppSettings settings(towers::test::settingsFile(root.path()));
        settings.setRunsDir(root.filePath(QStringLiteral("runs")));
        RunsPage page(settings);
        QSignalSpy refreshed(&page, &RunsPage::refreshed);
        QVERIFY(refreshed.wait(10000));
        page.selectRun(run);
        QLabel* title = labelSaying(page, QStringLiteral("failed after step 10"));
        QVERIFY(title);
        QVERIFY2(title->text().contains(QStringLiteral("&lt;loss&gt; &amp; more")),
                 qPrintable(title->text()));
        const QAbstractItemModel* model = page.runTable()->model();
        bool listed = false;
        for (int r = 0; r < model->rowCount(); ++r)
            listed = listed || model->index(r, towers::ui::RunListModel::Steps)
                                   .data()
                                   .toString()
                                   .endsWith(QStringLiteral(", failed"));
        QVERIFY(listed);
    }

    void emptyFolder()
    {
        QTemporaryDir root;
        towers::app::AppSettings settings(towers::test::settingsFile(root.path()));
        settings.setRunsDir(root.filePath(QStringLiteral("none-yet")));
        RunsPage page(settings);
        QSignalSpy refreshed(&page, &RunsPage::refreshed);
        QVERIFY(refreshed.wait(10000));
        QCOMPARE(page.runModel()->rowCount(), 0);
        QVERIFY(page.selectedRun().isEmpty());
        QVERIFY(!button(page, QStringLiteral("Classify with this checkpoint"))->isEnabled());
    }

    void followsARunTrainedElsewhere()
    {
        QTemporaryDir root;
        const QString folder = root.filePath(QStringLiteral("runs/cluster"));
        const eng::RunDirectory dir = makeClusterRun(folder, 2, 2);
        for (int s = 1; s <= 3; ++s) dir.appendMetrics(metricsLine(s, 4));
        // The trainer's lock (this process's, from another open file: RunLock::holder sees it).
        std::optional<eng::RunLock> lock =
            eng::RunLock::acquire(folder.toStdString(), "towers-cli train");
        towers::app::AppSettings settings(towers::test::settingsFile(root.path()));
        settings.setRunsDir(root.filePath(QStringLiteral("runs")));
        RunsPage page(settings);
        page.follower()->setInterval(100);
        page.resize(1100, 700);
        page.show();
        QTRY_COMPARE(page.selectedRun(), folder);
        QCOMPARE(page.runModel()->run(0)->trainingBy.has_value(), true);

        QTRY_COMPARE(page.follower()->state(), RunFollower::State::Live);
        QVERIFY(page.follower()->isPolling());
        QVERIFY2(page.followStatus().contains(
                     QStringLiteral("Training in progress in another process (process %1 on")
                         .arg(getpid())),
                 qPrintable(page.followStatus()));
        QVERIFY(page.followStatus().contains(QStringLiteral("following live, read-only")));
        QVERIFY(page.followStatus().contains(QStringLiteral("step 3 of 100")));
        QLabel* status = labelSaying(page, QStringLiteral("following live"));
        QVERIFY(status && status->isVisible());
        QVERIFY(labelSaying(page, QStringLiteral("2 processes × 2 towers = 4 towers")));
        QTRY_COMPARE(page.lossPlot()->pointCount(0), 3);
        QVERIFY(!button(page, QStringLiteral("Resume this run"))->isEnabled());

        // Each global tower of the latest step, rank by rank.
        auto* chart = page.towerChart();
        QVERIFY(chart->isVisible());
        QCOMPARE(chart->barCount(), 4);
        QCOMPARE(chart->label(0), QStringLiteral("rank 0 · tower 0"));
        QCOMPARE(chart->label(3), QStringLiteral("rank 1 · tower 1"));
        QCOMPARE(chart->value(3, 1), 33.0); // compute of global tower 3
        QCOMPARE(chart->value(3, 2), 3.0);  // communication of step 3

        // The trainer appends while the page follows; its unfinished line waits for its end.
        QSignalSpy updated(page.follower(), &RunFollower::updated);
        dir.appendMetrics(metricsLine(4, 4));
        const std::string fifth = metricsLine(5, 4);
        QFile metrics(folder + QStringLiteral("/metrics.jsonl"));
        QVERIFY(metrics.open(QIODevice::Append | QIODevice::Unbuffered));
        metrics.write(fifth.substr(0, 25).c_str());
        QTRY_COMPARE(page.lossPlot()->pointCount(0), 4);
        QTRY_VERIFY(updated.count() >= 3); // read again, the half line still skipped
        QCOMPARE(page.lossPlot()->pointCount(0), 4);
        metrics.write((fifth.substr(25) + "\n").c_str());
        metrics.close();
        QTRY_COMPARE(page.lossPlot()->pointCount(0), 5);
        QTRY_COMPARE(chart->value(0, 2), 5.0);
        QVERIFY(chart->title().contains(QStringLiteral("5")));
        QVERIFY(page.followStatus().contains(QStringLiteral("step 5 of 100")));
        dir.appendEval("{\"step\":5,\"precisionAt1\":0.25}");
        QTRY_COMPARE(page.accuracyPlot()->pointCount(0), 1);
        QFile checkpoint(QString::fromStdString(dir.checkpointPath(5).string()));
        QVERIFY(checkpoint.open(QIODevice::WriteOnly));
        checkpoint.close();
        QTRY_COMPARE(page.checkpointModel()->rowCount(), 1);
        QVERIFY(!button(page, QStringLiteral("Resume this run"))->isEnabled());

        // The last line and its evaluation, then the trainer lets the run go: one last read,
        // then no more.
        dir.appendMetrics(metricsLine(100, 4));
        dir.appendEval("{\"step\":100,\"precisionAt1\":0.5}");
        lock.reset();
        QTRY_COMPARE(page.follower()->state(), RunFollower::State::Ended);
        QVERIFY(!page.follower()->isPolling());
        QCOMPARE(page.lossPlot()->pointCount(0), 6);
        QVERIFY2(page.followStatus().contains(QStringLiteral("Training finished in the other")),
                 qPrintable(page.followStatus()));
        QVERIFY(labelSaying(page, QStringLiteral("No longer following")));
        QTRY_VERIFY(!page.runModel()->run(0)->trainingBy); // the list was read again
        // Let go at its last step, evaluated: finished, nothing to resume.
        QTRY_VERIFY(button(page, QStringLiteral("Resume this run"))
                        ->toolTip()
                        .startsWith(QStringLiteral("It finished at step 100")));
        QVERIFY(!button(page, QStringLiteral("Resume this run"))->isEnabled());
        QTest::qWait(300);
        updated.clear();
        dir.appendMetrics(metricsLine(101, 4));
        QTest::qWait(500);
        QCOMPARE(updated.count(), 0); // not followed any more
        QCOMPARE(page.lossPlot()->pointCount(0), 6);
    }

    // A run stopped before its end says so; a hidden page does not read; the run this window
    // trains itself is not "another process".
    void followsOnlyWhenShownAndNotOurOwn()
    {
        QTemporaryDir root;
        const QString folder = root.filePath(QStringLiteral("runs/one"));
        const eng::RunDirectory dir = makeClusterRun(folder, 1, 3);
        dir.appendMetrics(metricsLine(1, 3));
        std::optional<eng::RunLock> lock = eng::RunLock::acquire(folder.toStdString());
        towers::app::AppSettings settings(towers::test::settingsFile(root.path()));
        settings.setRunsDir(root.filePath(QStringLiteral("runs")));
        RunsPage page(settings);
        page.follower()->setInterval(100);
        page.show();
        QTRY_COMPARE(page.follower()->state(), RunFollower::State::Live);
        QVERIFY(labelSaying(page, QStringLiteral("fashion-fast on fashion-mnist, 3 towers")));
        QTRY_COMPARE(page.towerChart()->barCount(), 3);
        QCOMPARE(page.towerChart()->label(2), QStringLiteral("tower 2"));

        page.hide();
        QVERIFY(!page.follower()->isPolling());
        QTest::qWait(300); // a read under way when it was hidden still arrives
        QSignalSpy updated(page.follower(), &RunFollower::updated);
        dir.appendMetrics(metricsLine(2, 3));
        QTest::qWait(400);
        QCOMPARE(updated.count(), 0);
        page.show(); // reads at once, and follows again
        QTRY_COMPARE(page.lossPlot()->pointCount(0), 2);
        QVERIFY(page.follower()->isPolling());

        // This window trains it: nothing to follow, Resume as setResumeAllowed says.
        page.setOwnRunFolder(folder);
        page.setResumeAllowed(false);
        QTRY_COMPARE(page.follower()->state(), RunFollower::State::Still);
        QVERIFY(!page.follower()->isPolling());
        QVERIFY(page.followStatus().isEmpty());
        page.setOwnRunFolder(QString());
        page.setResumeAllowed(true);
        QTRY_COMPARE(page.follower()->state(), RunFollower::State::Live);
        QVERIFY(!button(page, QStringLiteral("Resume this run"))->isEnabled());

        lock.reset(); // stopped at step 2 of 100
        QTRY_COMPARE(page.follower()->state(), RunFollower::State::Ended);
        QVERIFY2(page.followStatus().contains(QStringLiteral("Training stopped in the other "
                                                             "process")) &&
                     page.followStatus().contains(QStringLiteral("step 2 of 100")),
                 qPrintable(page.followStatus()));
        QTRY_VERIFY(button(page, QStringLiteral("Resume this run"))->isEnabled());
    }
};

QTEST_MAIN(TestRunsPage)
#include "tst_runs_page.moc"
