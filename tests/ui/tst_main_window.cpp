// MainWindow: every page reachable from the sidebar and by Ctrl+<n>, errors in the banner and
// the log, the last page, the geometry and the Devices page's settings (precision, GPU towers'
// data, averaging and CUDA graphs, gradient buckets) remembered and carried into a new run's
// configuration.
#include <QAbstractButton>
#include <QCheckBox>
#include <QComboBox>
#include <QDialog>
#include <QDir>
#include <QDockWidget>
#include <QFile>
#include <QFileInfo>
#include <QLabel>
#include <QListWidget>
#include <QMap>
#include <QPlainTextEdit>
#include <QPointer>
#include <QPushButton>
#include <QRegularExpression>
#include <QScreen>
#include <QScrollArea>
#include <QScrollBar>
#include <QSignalSpy>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>
#include <QToolButton>

#include "app/settings/app_settings.h"
#include "dataset_files.h"
#include "engine/cpu/onednn_ops.h"
#include "engine/models/model_file.h"
#include "engine/models/registry.h"
#include "engine/train/checkpoint.h"
#include "engine/train/recipe.h"
#include "engine/train/run_directory.h"
#include "engine/train/run_lock.h"
#include "model_files.h"
#include "training_fixture.h"
#include "ui/main_window.h"
#include "ui/models/device_model.h"
#include "ui/models/run_list_model.h"
#include "ui/pages/data_page.h"
#include "ui/pages/devices_page.h"
#include "ui/pages/lr_finder_dialog.h"
#include "ui/pages/model_file_editor.h"
#include "ui/pages/model_page.h"
#include "ui/pages/runs_page.h"
#include "ui/pages/train_page.h"
#include "ui/plots/plot_widget.h"
#include "ui/widgets/error_banner.h"
#include "ui/widgets/hyperparameter_form.h"
#include "ui/widgets/validated_field.h"
#include "ui_test_support.h"

using towers::ui::DevicesPage;
using towers::ui::MainWindow;

namespace {
DevicesPage* devicesOf(const MainWindow& w)
{
    return qobject_cast<DevicesPage*>(w.page(MainWindow::Devices));
}

// bf16 where this CPU runs it, else float32 (its entry cannot be chosen).
towers::engine::Precision kPrecision()
{
    return towers::engine::cpu::bf16Unavailable().empty() ? towers::engine::Precision::BFloat16
                                                          : towers::engine::Precision::Float32;
}
// A window's settings for a tiny generated MNIST in `dir`, with its runs folder there too.
void useTinyMnist(towers::app::AppSettings& settings, const QTemporaryDir& dir)
{
    towers::test::writeTinyMnist(dir.filePath(QStringLiteral("data")).toStdString());
    settings.setDatasetName(QStringLiteral("mnist"));
    settings.setDataDir(dir.filePath(QStringLiteral("data")));
    settings.setRunsDir(dir.filePath(QStringLiteral("runs")));
}
} // namespace

namespace {

// Waits for the window's Data page to load its dataset (at once where it has); whether it did.
bool waitForDataset(MainWindow& w)
{
    if (w.dataPage()->loadedDataset()) return true;
    QSignalSpy loaded(w.dataPage(), &towers::ui::DataPage::datasetLoaded);
    return loaded.wait(20000);
}

} // namespace

class TestMainWindow : public QObject
{
    Q_OBJECT
    QTemporaryDir m_home;

    // Every page, shown in turn, is as wide as its scroll area at most: no horizontal scroll bar.
    static void checkNoSidewaysScrolling(MainWindow& w)
    {
        QStringList wide;
        for (int p = 0; p < MainWindow::PageCount; ++p) {
            w.showPage(p);
            QCoreApplication::processEvents();
            auto* scroll = qobject_cast<QScrollArea*>(w.page(p)->parentWidget()->parentWidget());
            QVERIFY(scroll);
            QTRY_VERIFY(w.page(p)->isVisible());
            if (const int over = scroll->horizontalScrollBar()->maximum(); over > 0)
                wide << QStringLiteral("%1 scrolls %2 px sideways (it needs %3 px, it has %4)")
                            .arg(MainWindow::pageTitle(p))
                            .arg(over)
                            .arg(w.page(p)->minimumSizeHint().width())
                            .arg(scroll->viewport()->width());
        }
        QVERIFY2(wide.isEmpty(), qPrintable(wide.join(QStringLiteral("; "))));
    }

private slots:
    void initTestCase()
    {
        qputenv("XDG_DATA_HOME", m_home.filePath(QStringLiteral("xdg")).toUtf8());
        qunsetenv("TOWERS_DATA");
    }

    // The icon renders from the SVG built into the program (Qt's SVG icon engine, libqt6svg6, is
    // there), at any size.
    void applicationIcon()
    {
        const QIcon icon = MainWindow::applicationIcon();
        QVERIFY(!icon.isNull());
        for (int size : {16, 64, 256}) {
            const QImage image = icon.pixmap(size, size).toImage();
            QVERIFY2(!image.isNull(),
                     "the icon does not render: is Qt's SVG icon engine (libqt6svg6) installed?");
            QCOMPARE(image.width(), size);
            QVERIFY(qAlpha(image.pixel(size / 2, size - size / 8)) >
                    0); // the tile, not a transparent pixmap
        }
    }

    void pagesAndShortcuts()
    {
        QTemporaryDir dir;
        towers::app::AppSettings settings(towers::test::settingsFile(dir.path()));
        MainWindow w(settings);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        auto* sidebar = w.findChild<QListWidget*>();
        QCOMPARE(sidebar->count(), int(MainWindow::PageCount));
        for (int p = 0; p < MainWindow::PageCount; ++p) {
            QVERIFY(w.page(p));
            QVERIFY(!MainWindow::pageTitle(p).isEmpty());
        }
        for (int p = MainWindow::PageCount - 1; p >= 0; --p) {
            QTest::keyClick(&w, Qt::Key(Qt::Key_1 + p), Qt::ControlModifier);
            QCOMPARE(w.currentPage(), p);
            QCOMPARE(sidebar->currentRow(), p);
        }
        // Arrow keys in the sidebar walk the pages.
        sidebar->setFocus();
        QTest::keyClick(sidebar, Qt::Key_Down);
        QCOMPARE(w.currentPage(), 1);
        QCOMPARE(settings.lastPage(), 1);
    }

    // The window fits a small laptop screen: after every page has been shown its minimum is at
    // most 1024 x 640 (it was 1211 x 742), and at that size the pages scroll instead.
    void fitsASmallScreen()
    {
        QTemporaryDir dir;
        towers::app::AppSettings settings(towers::test::settingsFile(dir.path()));
        MainWindow w(settings);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        for (int p = 0; p < MainWindow::PageCount; ++p) {
            w.showPage(p);
            QCoreApplication::processEvents();
        }
        const QSize least = w.minimumSizeHint().expandedTo(w.minimumSize());
        QVERIFY2(least.width() <= 1024 && least.height() <= 640,
                 qPrintable(QStringLiteral("%1 x %2").arg(least.width()).arg(least.height())));
        w.resize(1024, 640);
        QTRY_COMPARE(w.size(), QSize(1024, 640));
        for (int p = 0; p < MainWindow::PageCount; ++p) QVERIFY(w.page(p)->isWindow() == false);
        checkNoSidewaysScrolling(w);
    }

    // A first start's window is no larger than the screen's room (1280 x 800 was taller than a
    // 1366 x 768 laptop's screen), but for the window's own least size.
    void firstWindowFitsTheScreen()
    {
        QTemporaryDir dir;
        towers::app::AppSettings settings(towers::test::settingsFile(dir.path()));
        MainWindow w(settings);
        const QSize room = w.screen()->availableSize();
        const QSize least = w.minimumSizeHint().expandedTo(w.minimumSize());
        QVERIFY2(w.width() <= std::max(room.width(), least.width()) &&
                     w.height() <= std::max(room.height(), least.height()),
                 qPrintable(QStringLiteral("%1 x %2 on a screen of %3 x %4")
                                .arg(w.width())
                                .arg(w.height())
                                .arg(room.width())
                                .arg(room.height())));
    }

    // At 1024 wide every page fits the window's width with a dataset loaded too (the Data page's
    // list of datasets with their long descriptions, its samples): a page may scroll down, never
    // sideways.
    void fitsASmallScreenWithADataset()
    {
        QTemporaryDir dir;
        towers::test::writeIdxDataset(
            towers::test::fsPath(dir.filePath(QStringLiteral("data/fashion-mnist"))), 64, 32, 28,
            28, /*gz=*/false, /*seed=*/5);
        towers::app::AppSettings settings(towers::test::settingsFile(dir.path()));
        settings.setDatasetName(QStringLiteral("fashion-mnist"));
        settings.setDataDir(dir.filePath(QStringLiteral("data")));
        settings.setRunsDir(dir.filePath(QStringLiteral("runs")));
        MainWindow w(settings);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QVERIFY(waitForDataset(w));
        w.resize(1024, 640);
        QTRY_COMPARE(w.size(), QSize(1024, 640));
        checkNoSidewaysScrolling(w);
    }

    // At 1024 wide the Runs page's run list shows a readable part of a run's name: the details on
    // the right (checkpoints, buttons) squeezed it to "fashi…73202".
    void runNamesReadableAt1024()
    {
        QTemporaryDir dir;
        towers::app::AppSettings settings(towers::test::settingsFile(dir.path()));
        settings.setRunsDir(dir.filePath(QStringLiteral("runs")));
        const QString name = QStringLiteral("fashion-mnist-fashion-fast-20261201-073202");
        const towers::engine::RunDirectory run(
            dir.filePath(QStringLiteral("runs/") + name).toStdString());
        towers::engine::TrainConfig c = towers::engine::defaultConfigFor("fashion-fast");
        c.dataset = "fashion-mnist";
        c.towers = 2;
        run.writeConfig(c.toJson());
        for (int s = 1; s <= 377; ++s)
            run.appendMetrics("{\"step\":" + std::to_string(s) + ",\"loss\":0.5}");
        run.appendEval("{\"step\":300,\"precisionAt1\":0.8562}");
        for (int s : {100, 200, 300, 377}) {
            QFile f(QString::fromStdString(run.checkpointPath(s).string()));
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write("x");
        }
        MainWindow w(settings);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        w.resize(1024, 720);
        QTRY_COMPARE(w.size(), QSize(1024, 720));
        w.showPage(MainWindow::Runs);
        w.runsPage()->refresh();
        QTRY_COMPARE(w.runsPage()->runModel()->rowCount(), 1);
        w.runsPage()->selectRun(w.runsPage()->runModel()->runs().front().folder);
        QCoreApplication::processEvents();
        QTableView* table = w.runsPage()->runTable();
        const int least = table->fontMetrics().horizontalAdvance(name.left(20));
        QTRY_VERIFY2(table->columnWidth(towers::ui::RunListModel::Run) >= least,
                     qPrintable(QStringLiteral("the run name's column is %1 px wide, less than %2 "
                                               "(20 characters); the page's least width %3")
                                    .arg(table->columnWidth(towers::ui::RunListModel::Run))
                                    .arg(least)
                                    .arg(w.runsPage()->minimumSizeHint().width())));
        QVERIFY(!table->horizontalScrollBar()->isVisible());
        // The details' buttons in two rows where one does not hold them (which, at 1024 pixels,
        // the fonts decide), and in one row where the window is wide.
        const auto buttonY = [&w](const QString& text) {
            for (auto* b : w.runsPage()->findChildren<QPushButton*>())
                if (b->text().remove(QLatin1Char('&')) == text) return b->mapTo(&w, QPoint()).y();
            return -1;
        };
        w.resize(1800, 900);
        QTRY_COMPARE(buttonY(QStringLiteral("Resume this run")),
                     buttonY(QStringLiteral("Open folder")));
        w.resize(1024, 720);
        checkNoSidewaysScrolling(w);
    }

    // A first start (no saved configuration) takes the model of the dataset the Data page finds,
    // without a word of switching from another (it said "cifar10-tutorial takes 24×24×3 images,
    // and fashion-mnist has 28×28×1: switching to fashion-fast"); a saved model that does not fit
    // the images is still switched, and said.
    void firstStartTakesTheDatasetsModel()
    {
        QTemporaryDir dir;
        towers::test::writeIdxDataset(
            towers::test::fsPath(dir.filePath(QStringLiteral("data/fashion-mnist"))), 64, 32, 28,
            28, /*gz=*/false, /*seed=*/5);
        towers::app::AppSettings settings(towers::test::settingsFile(dir.path()));
        settings.setDataDir(dir.filePath(QStringLiteral("data")));
        settings.setRunsDir(dir.filePath(QStringLiteral("runs")));
        {
            MainWindow w(settings);
            w.show();
            QTRY_COMPARE_WITH_TIMEOUT(w.dataPage()->datasetName(), QStringLiteral("fashion-mnist"),
                                      20000);
            QVERIFY(waitForDataset(w));
            QCOMPARE(w.modelPage()->modelName(), QStringLiteral("fashion-fast"));
            const QString log = w.log()->toPlainText();
            QVERIFY2(!log.contains(QStringLiteral("switching")), qPrintable(log));
        }
        towers::engine::TrainConfig saved = towers::engine::defaultConfigFor("cifar10-tutorial");
        saved.dataset = "fashion-mnist";
        settings.setLastConfigJson(QString::fromStdString(saved.toJson()));
        MainWindow w(settings);
        w.show();
        QVERIFY(waitForDataset(w));
        QCOMPARE(w.modelPage()->modelName(), QStringLiteral("fashion-fast"));
        const QString log = w.log()->toPlainText();
        QVERIFY2(
            log.contains(QStringLiteral("cifar10-tutorial takes 24×24×3 images, and "
                                        "fashion-mnist has 28×28×1: switching to fashion-fast")),
            qPrintable(log));
    }

    // The log's dock, closed, comes back from the button under the sidebar or Ctrl+L (there is
    // no menu bar: closed, it was gone for the session).
    void closedLogComesBack()
    {
        QTemporaryDir dir;
        towers::app::AppSettings settings(towers::test::settingsFile(dir.path()));
        MainWindow w(settings);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        auto* dock = qobject_cast<QDockWidget*>(w.log()->parentWidget());
        QVERIFY(dock);
        QVERIFY(dock->isVisible());
        QVERIFY(w.logButton()->isVisible());
        QVERIFY(w.logButton()->isChecked());
        dock->close();
        QTRY_VERIFY(!dock->isVisible());
        QVERIFY(!w.logButton()->isChecked());
        QTest::mouseClick(w.logButton(), Qt::LeftButton);
        QTRY_VERIFY(dock->isVisible());
        QTest::keyClick(&w, Qt::Key_L, Qt::ControlModifier);
        QTRY_VERIFY(!dock->isVisible());
        QTest::keyClick(&w, Qt::Key_L, Qt::ControlModifier);
        QTRY_VERIFY(dock->isVisible());
    }

    // At a first start, a hyperparameter set before the first dataset has loaded stays: the model
    // that takes its images stays with it, where it gave way to the dataset's own model and its
    // defaults (the first test: no edit, the dataset's model).
    void firstStartKeepsWhatWasSetBeforeTheDataset()
    {
        const std::string own = towers::engine::defaultModelFor("cifar100");
        if (own == "cifar10-tutorial")
            QSKIP("cifar100's own model is the first start's: no model switch to test");
        for (const bool edit : {false, true}) {
            QTemporaryDir dir;
            towers::test::writeCifar100(
                towers::test::fsPath(dir.filePath(QStringLiteral("data/cifar100"))), 40, 20, 3);
            towers::app::AppSettings settings(towers::test::settingsFile(dir.path()));
            settings.setDataDir(dir.filePath(QStringLiteral("data")));
            settings.setRunsDir(dir.filePath(QStringLiteral("runs")));
            MainWindow w(settings);
            if (edit) w.modelPage()->form()->setLearningRate(0.0123);
            w.show();
            QTRY_COMPARE_WITH_TIMEOUT(w.dataPage()->datasetName(), QStringLiteral("cifar100"),
                                      20000);
            QVERIFY(waitForDataset(w));
            QCOMPARE(w.modelPage()->modelName(),
                     edit ? QStringLiteral("cifar10-tutorial") : QString::fromStdString(own));
            if (edit) QCOMPARE(w.modelPage()->form()->config().schedule.lr, 0.0123);
        }
    }

    // Using an edited network keeps the hyperparameters (they were reset to the model's defaults,
    // a learning rate set by hand lost); choosing another model still brings its own.
    void editedNetworkKeepsTheHyperparameters()
    {
        QTemporaryDir dir;
        towers::app::AppSettings settings(towers::test::settingsFile(dir.path()));
        useTinyMnist(settings, dir);
        MainWindow w(settings);
        w.show();
        w.modelPage()->setModelName(QStringLiteral("fashion-fast"));
        w.modelPage()->form()->setLearningRate(0.0123);
        w.modelPage()->form()->field(QStringLiteral("seed"))->setText(QString()); // being typed
        towers::ui::ModelFileEditor editor(w.modelPage()->model(), w.modelPage()->modelFilePath());
        QTRY_VERIFY_WITH_TIMEOUT(!editor.isChecking(), 20000);
        QVERIFY(editor.text().contains(QStringLiteral("\"filters\": 32")));
        editor.setText(editor.text().replace(QStringLiteral("\"filters\": 32"),
                                             QStringLiteral("\"filters\": 16")));
        QTRY_VERIFY_WITH_TIMEOUT(!editor.isChecking(), 20000);
        QVERIFY(editor.network());
        w.modelPage()->useEdited(editor);
        QCOMPARE(w.modelPage()->modelName(), QStringLiteral("my-fashion-fast"));
        QCOMPARE(w.modelPage()->form()->config().schedule.lr, 0.0123);
        // Fields as typed, an empty one too (a round trip through config() wrote 0 into it).
        QCOMPARE(w.modelPage()->form()->field(QStringLiteral("seed"))->text(), QString());
        QCOMPARE(w.modelPage()->form()->config().model, std::string("my-fashion-fast"));
        QVERIFY2(w.log()->toPlainText().contains(QStringLiteral(
                     "Network my-fashion-fast, with the hyperparameters as they were")),
                 qPrintable(w.log()->toPlainText()));
        // A recipe edited in the file brings its own values (kept, they were silently dropped).
        w.modelPage()->form()->setLearningRate(0.0123);
        towers::ui::ModelFileEditor recipe(w.modelPage()->model(), w.modelPage()->modelFilePath());
        QTRY_VERIFY_WITH_TIMEOUT(!recipe.isChecking(), 20000);
        QVERIFY2(recipe.text().contains(QStringLiteral("\"lr\": 0.1,")), qPrintable(recipe.text()));
        recipe.setText(
            recipe.text().replace(QStringLiteral("\"lr\": 0.1,"), QStringLiteral("\"lr\": 0.07,")));
        QTRY_VERIFY_WITH_TIMEOUT(!recipe.isChecking(), 20000);
        QVERIFY(recipe.network());
        w.modelPage()->useEdited(recipe);
        QCOMPARE(w.modelPage()->form()->config().schedule.lr, 0.07);
        w.modelPage()->setModelName(QStringLiteral("mnist-convnet"));
        QCOMPARE(w.modelPage()->form()->config().schedule.lr,
                 towers::engine::defaultConfigFor("mnist-convnet").schedule.lr);
    }

    // On each page every Alt+letter is one field's or button's: a letter used twice only moves the
    // focus between them (Alt+F did not press Find…, which shared it with "Start from").
    void pagesHaveNoDoubledAltKeys()
    {
        QTemporaryDir dir;
        towers::app::AppSettings settings(towers::test::settingsFile(dir.path()));
        MainWindow w(settings);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QStringList doubled;
        for (int p = 0; p < MainWindow::PageCount; ++p) {
            w.showPage(p);
            QCoreApplication::processEvents();
            QMap<QChar, QStringList> owners;
            const auto add = [&owners](const QWidget* widget, const QString& text) {
                if (!widget->isVisibleTo(widget->window())) return;
                const QRegularExpressionMatch m =
                    QRegularExpression(QStringLiteral("(?<!&)&([^&])")).match(text);
                if (m.hasMatch()) owners[m.captured(1).at(0).toLower()] << text;
            };
            for (const auto* label : w.page(p)->findChildren<QLabel*>())
                if (label->buddy()) add(label, label->text());
            for (const auto* button : w.page(p)->findChildren<QAbstractButton*>())
                add(button, button->text());
            for (auto it = owners.cbegin(); it != owners.cend(); ++it)
                if (it.value().size() > 1)
                    doubled << QStringLiteral("%1: Alt+%2 for %3")
                                   .arg(MainWindow::pageTitle(p), it.key(),
                                        it.value().join(QStringLiteral(", ")));
        }
        QVERIFY2(doubled.isEmpty(), qPrintable(doubled.join(QStringLiteral("; "))));
    }

    void errorsGoToBannerAndLog()
    {
        QTemporaryDir dir;
        towers::app::AppSettings settings(towers::test::settingsFile(dir.path()));
        MainWindow w(settings);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        w.showError(QStringLiteral("model diverged with loss = NaN at step 12"));
        QVERIFY(w.banner()->isVisible());
        QCOMPARE(w.banner()->message(),
                 QStringLiteral("model diverged with loss = NaN at step 12"));
        QVERIFY(w.log()->toPlainText().contains(
            QStringLiteral("model diverged with loss = NaN at step 12")));
    }

    // A settings file that cannot be written any more during the session is said when a change is
    // written, in the banner and the log, naming the file and why; once.
    void settingsUnwritableMidSessionAreSaid()
    {
        QTemporaryDir dir;
        const QString file = towers::test::settingsFile(dir.path());
        towers::app::AppSettings settings(file);
        MainWindow w(settings);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QTRY_VERIFY(QFileInfo(file).isFile());
        QTest::qWait(2 * towers::app::AppSettings::kWriteDelayMs);
        QVERIFY(!w.banner()->isVisible());
        QVERIFY(QFile::remove(file));
        QVERIFY(QDir().mkpath(file)); // a folder in its place
        w.showPage(MainWindow::Devices);
        QTRY_VERIFY_WITH_TIMEOUT(w.banner()->isVisible(), 5000);
        const QString said = w.banner()->message();
        QVERIFY2(
            said.contains(QStringLiteral("could not be saved to %1: it is a folder").arg(file)),
            qPrintable(said));
        QVERIFY(w.log()->toPlainText().contains(said));
        w.showPage(MainWindow::Data);
        QTest::qWait(2 * towers::app::AppSettings::kWriteDelayMs + 100);
        QCOMPARE(w.banner()->messageCount(), 1);
        // The file writable again: said in the log with the next change's write.
        QVERIFY(QDir(file).removeRecursively());
        w.showPage(MainWindow::Train);
        QTRY_VERIFY_WITH_TIMEOUT(
            w.log()->toPlainText().contains(
                QStringLiteral("The settings are saved again to %1").arg(file)),
            5000);
    }

    // A start that fails at once (the run folder locked by another trainer) is said as a failure,
    // not as "Training in <folder>" before it (nor the Train page's own "New run in <folder>").
    void failedStartDoesNotSayItTrained()
    {
        QTemporaryDir dir;
        towers::app::AppSettings settings(towers::test::settingsFile(dir.path()));
        useTinyMnist(settings, dir);
        MainWindow w(settings);
        QVERIFY(waitForDataset(w));
        QString error;
        auto options = w.newRunOptions(&error);
        QVERIFY2(options, qPrintable(error));
        options->newFolder = false; // this folder, not the next free name beside it
        const auto lock = towers::engine::RunLock::acquire(options->runDirectory, "another");
        QSignalSpy finished(w.trainPage(), &towers::ui::TrainPage::runFinished);
        QVERIFY(w.trainPage()->startSession(*options));
        QVERIFY(finished.wait(30000));
        const QString log = w.log()->toPlainText();
        QVERIFY2(!log.contains(QStringLiteral("Training in")), qPrintable(log));
        const QString pageLog = w.trainPage()->logView()->toPlainText();
        QVERIFY2(!pageLog.contains(QStringLiteral("New run in")), qPrintable(pageLog));
        QVERIFY2(w.banner()->message().contains(QStringLiteral("in use by process")),
                 qPrintable(w.banner()->message()));
    }

    // Resuming a run none of whose checkpoints loads asks first; "no" changes nothing, "yes" sets
    // the run's files aside (never deleting them) and trains it from step 0.
    void resumeWithNoLoadableCheckpointAsks()
    {
        QTemporaryDir dir;
        towers::test::writeTinyMnist(dir.filePath(QStringLiteral("data")).toStdString());
        const auto folder =
            std::filesystem::path(dir.filePath(QStringLiteral("runs/r")).toStdString());
        auto options =
            towers::test::tinyRun(dir.filePath(QStringLiteral("data")).toStdString(), folder, 4, 1);
        options.config.dataDir = dir.filePath(QStringLiteral("data")).toStdString();
        {
            towers::engine::TrainingSession session(options);
            session.run();
        }
        towers::engine::RunDirectory run(folder);
        const auto files = run.checkpoints();
        QVERIFY(!files.empty());
        for (const auto& f : files) std::filesystem::resize_file(f.path, 100);

        towers::app::AppSettings settings(towers::test::settingsFile(dir.path()));
        MainWindow w(settings);
        w.setRestartQuestionAnswer(false);
        w.resumeRun(QString::fromStdString(folder.string()));
        QCOMPARE(w.restartQuestionsAsked(), 1);
        QVERIFY(!w.trainPage()->isActive());
        QCOMPARE(run.checkpoints().size(), files.size());
        QVERIFY(!std::filesystem::exists(folder / "set-aside"));

        w.setRestartQuestionAnswer(true);
        QSignalSpy finished(w.trainPage(), &towers::ui::TrainPage::runFinished);
        w.resumeRun(QString::fromStdString(folder.string()));
        QCOMPARE(w.restartQuestionsAsked(), 2);
        QVERIFY(finished.wait(60000));
        QCOMPARE(finished.at(0).at(0).value<towers::app::TrainingWorker::Outcome>(),
                 towers::app::TrainingWorker::Outcome::Finished);
        QVERIFY(std::filesystem::exists(folder / "set-aside"));
        std::size_t aside = 0;
        for (const auto& e : std::filesystem::recursive_directory_iterator(folder / "set-aside"))
            aside += e.path().extension() == ".safetensors" &&
                     std::filesystem::file_size(e.path()) == 100;
        QCOMPARE(aside, files.size());
    }

    void remembersPageAndGeometry()
    {
        QTemporaryDir dir;
        const QString file = towers::test::settingsFile(dir.path());
        {
            towers::app::AppSettings settings(file);
            MainWindow w(settings);
            w.show();
            QVERIFY(QTest::qWaitForWindowExposed(&w));
            w.showPage(MainWindow::Devices);
            w.resize(1240, 760);
            devicesOf(w)->setPrecision(kPrecision()); // bf16 where the CPU runs it
            devicesOf(w)->setGpuData("off");
            devicesOf(w)->setAllreduce("host");
            devicesOf(w)->setCudaGraphs(false);
            devicesOf(w)->setTf32(true);
            devicesOf(w)->setCudnnBenchmark(true);
            devicesOf(w)->setBucketMb(4.5);
            w.close();
        }
        towers::app::AppSettings settings(file);
        MainWindow again(settings);
        QCOMPARE(again.currentPage(), int(MainWindow::Devices));
        QCOMPARE(again.size(), QSize(1240, 760));
        // The precision is part of the run's configuration the window remembers.
        QVERIFY(devicesOf(again)->precision() == kPrecision());
        QVERIFY(settings.lastConfigJson().contains(
            QStringLiteral("\"precision\": \"%1\"")
                .arg(QString::fromStdString(
                    std::string(towers::engine::precisionName(kPrecision()))))));
        // So are the GPU towers' data, averaging and CUDA graphs and the bucket size.
        QCOMPARE(devicesOf(again)->gpuData(), std::string("off"));
        QCOMPARE(devicesOf(again)->allreduce(), std::string("host"));
        QVERIFY(!devicesOf(again)->cudaGraphs());
        QVERIFY(devicesOf(again)->tf32());
        QVERIFY(devicesOf(again)->cudnnBenchmark());
        QCOMPARE(devicesOf(again)->bucketMb(), 4.5);
        const auto saved =
            towers::engine::TrainConfig::fromJson(settings.lastConfigJson().toStdString());
        QCOMPARE(saved.gpuData, std::string("off"));
        QCOMPARE(saved.allreduce, std::string("host"));
        QVERIFY(!saved.cudaGraphs);
        QVERIFY(saved.allowTf32 && saved.cudnnBenchmark);
        QCOMPARE(saved.bucketMb, 4.5);
    }

    // A checkpoint chosen as the start of a new run (the Model page's Start from, or the Runs
    // page's context menu) brings its model, whose defaults then take the checkpoint again; the new
    // run's configuration carries it.
    void fineTuneTakesTheCheckpointsModel()
    {
        QTemporaryDir dir;
        towers::app::AppSettings settings(towers::test::settingsFile(dir.path()));
        useTinyMnist(settings, dir);
        MainWindow w(settings);
        QVERIFY(waitForDataset(w));
        QVERIFY(w.modelPage()->modelName() != QStringLiteral("fashion-wide"));
        // Checkpoints of the two models (one that cannot be read is refused by the form).
        const auto checkpointOf = [&dir](const char* model) {
            const QString file = dir.filePath(QStringLiteral("%1.safetensors").arg(model));
            towers::engine::CheckpointInfo info;
            info.dataset = "mnist";
            for (int c = 0; c < 10; ++c) info.classNames.push_back(std::to_string(c));
            info.step = 5;
            const auto net = towers::engine::createModel(model, 1, 10);
            towers::engine::writeCheckpoint(file.toStdString(),
                                            towers::engine::makeCheckpoint(*net, info));
            return file;
        };
        const QString file = checkpointOf("fashion-wide");
        const QString fast = checkpointOf("fashion-fast");
        emit w.modelPage()->form()->initFromChosen(file, QStringLiteral("fashion-wide"));
        QCOMPARE(w.modelPage()->modelName(), QStringLiteral("fashion-wide"));
        QString error;
        const auto options = w.newRunOptions(&error);
        QVERIFY2(options, qPrintable(error));
        QCOMPARE(options->config.model, std::string("fashion-wide"));
        QCOMPARE(options->config.initFrom, file.toStdString());
        emit w.runsPage()->fineTuneRequested(fast, QStringLiteral("fashion-fast"));
        QCOMPARE(w.modelPage()->modelName(), QStringLiteral("fashion-fast"));
        const auto fine = w.newRunOptions(&error);
        QVERIFY2(fine, qPrintable(error));
        QCOMPARE(fine->config.initFrom, fast.toStdString());
        // A file that cannot be read: refused before the run, naming it; the other fields' edits
        // are still kept as the last configuration meanwhile.
        w.modelPage()->form()->setInitFrom(dir.filePath(QStringLiteral("gone.safetensors")));
        QVERIFY(!w.newRunOptions(&error));
        QVERIFY2(error.contains(QStringLiteral("gone.safetensors")), qPrintable(error));
        w.modelPage()->form()->setLearningRate(0.0321);
        QCOMPARE(towers::engine::TrainConfig::fromJson(settings.lastConfigJson().toStdString())
                     .schedule.lr,
                 0.0321);
    }

    // A network from a model file: its recipe on the form, its definition in the new run's
    // configuration and in the remembered one, so the next window opens with it (the file gone).
    void modelFileRun()
    {
        QTemporaryDir dir;
        const QString file = towers::test::settingsFile(dir.path());
        const QString net = dir.filePath(QStringLiteral("net.json"));
        {
            towers::app::AppSettings settings(file);
            useTinyMnist(settings, dir);
            MainWindow w(settings);
            QVERIFY(waitForDataset(w));
            QFile out(net);
            QVERIFY(out.open(QIODevice::WriteOnly));
            out.write(towers::test::fashionFastDefinition("mine").c_str());
            out.close();
            QString error;
            QVERIFY2(w.modelPage()->openModelFile(net, &error), qPrintable(error));
            const auto options = w.newRunOptions(&error);
            QVERIFY2(options, qPrintable(error));
            QCOMPARE(options->config.model, std::string("mine"));
            QCOMPARE(options->config.modelDefinition, w.modelPage()->model().definition);
            QCOMPARE(options->config.batchPerTower, 128); // a model file's default recipe
            w.close();
        }
        QVERIFY(QFile::remove(net));
        towers::app::AppSettings settings(file);
        MainWindow again(settings);
        if (!again.dataPage()->loadedDataset()) {
            QSignalSpy loaded(again.dataPage(), &towers::ui::DataPage::datasetLoaded);
            QVERIFY(loaded.wait(20000));
        }
        QCOMPARE(again.modelPage()->modelName(), QStringLiteral("mine"));
        QString error;
        const auto options = again.newRunOptions(&error);
        QVERIFY2(options, qPrintable(error));
        QCOMPARE(options->config.model, std::string("mine"));
        QVERIFY(!options->config.modelDefinition.empty());

        // A checkpoint of another model file's network, chosen to start from, brings its network
        // (from the run's configuration it holds).
        const auto& other = towers::engine::resolveModel(
            "other", towers::engine::canonicalModelDefinition(
                         towers::test::fashionFastDefinition("other"), "test"));
        auto model = towers::engine::buildModel(other, 10);
        model->initialize(1);
        towers::engine::CheckpointInfo info;
        info.config = towers::engine::defaultConfigFor(other).toJson();
        const QString checkpoint = dir.filePath(QStringLiteral("other.safetensors"));
        towers::engine::writeCheckpoint(checkpoint.toStdString(),
                                        towers::engine::makeCheckpoint(*model, info));
        emit again.runsPage()->fineTuneRequested(checkpoint, QStringLiteral("other"));
        QCOMPARE(again.modelPage()->modelName(), QStringLiteral("other"));
        const auto tuned = again.newRunOptions(&error);
        QVERIFY2(tuned, qPrintable(error));
        QCOMPARE(tuned->config.modelDefinition, other.definition);
        QCOMPARE(tuned->config.initFrom, checkpoint.toStdString());
    }

    // "New run like this…" (the Runs page's run menu; DIGITS' Clone job): the run's dataset,
    // model, hyperparameters and towers on the pages, ready to change and start as a new run; a
    // folder that is no run is refused in the banner.
    void newRunLikeARun()
    {
        QTemporaryDir dir;
        towers::app::AppSettings settings(towers::test::settingsFile(dir.path()));
        useTinyMnist(settings, dir);
        towers::engine::TrainConfig c = towers::engine::defaultConfigFor("fashion-fast");
        c.dataset = "mnist";
        c.dataDir = dir.filePath(QStringLiteral("data")).toStdString();
        c.towers = 2;
        c.seed = 9;
        c.schedule.lr = 0.0123;
        c.steps = 50;
        c.epochs = 0;
        c.evalEvery = 10;
        c.validation = 0.2;
        c.patience = 2;
        c.minDelta = 0.001;
        c.runId = "an-earlier-run";
        const QString run = dir.filePath(QStringLiteral("runs/mnist-fashion-fast-1"));
        QVERIFY(QDir().mkpath(run));
        towers::engine::RunDirectory(run.toStdString()).writeConfig(c.toJson());

        MainWindow w(settings);
        QVERIFY(waitForDataset(w));
        w.modelPage()->setModelName(QStringLiteral("mnist-convnet"));
        emit w.runsPage()->newRunLikeRequested(run);
        QCOMPARE(w.currentPage(), int(MainWindow::Model));
        QCOMPARE(w.modelPage()->modelName(), QStringLiteral("fashion-fast"));
        QString error;
        const auto options = w.newRunOptions(&error);
        QVERIFY2(options, qPrintable(error));
        const auto& n = options->config;
        QCOMPARE(n.model, std::string("fashion-fast"));
        QCOMPARE(n.dataset, std::string("mnist"));
        QCOMPARE(n.towers, 2);
        QCOMPARE(n.seed, std::uint64_t(9));
        QCOMPARE(n.schedule.lr, 0.0123);
        QCOMPARE(n.steps, std::int64_t(50));
        QCOMPARE(n.validation, 0.2);
        QCOMPARE(n.patience, 2);
        QCOMPARE(n.minDelta, 0.001);
        QVERIFY(n.runId.empty()); // a new run, with an id of its own when it starts
        QVERIFY(options->runDirectory.string() != run.toStdString()); // in a new folder

        QVERIFY(!w.newRunLike(dir.filePath(QStringLiteral("no-run-here"))));
        QVERIFY2(w.banner()->message().contains(QStringLiteral("no-run-here")),
                 qPrintable(w.banner()->message()));

        // A run whose data folder is not here (copied from another machine) keeps the user's own:
        // it became the Data page's folder, and the dataset was then not found.
        c.dataDir = dir.filePath(QStringLiteral("elsewhere/data")).toStdString();
        const QString copied = dir.filePath(QStringLiteral("runs/copied"));
        QVERIFY(QDir().mkpath(copied));
        towers::engine::RunDirectory(copied.toStdString()).writeConfig(c.toJson());
        QVERIFY(w.newRunLike(copied));
        QCOMPARE(w.dataPage()->dataDir(), dir.filePath(QStringLiteral("data")));
        QCOMPARE(settings.dataDir(), dir.filePath(QStringLiteral("data")));
        QVERIFY2(w.log()->toPlainText().contains(
                     QStringLiteral("Its data folder %1 is not here")
                         .arg(dir.filePath(QStringLiteral("elsewhere/data")))),
                 qPrintable(w.log()->toPlainText()));
    }

    // Closing the window with runs in the queue asks first: No keeps the window and the queue.
    void closingWithQueuedRunsAsks()
    {
        QTemporaryDir dir;
        towers::app::AppSettings settings(towers::test::settingsFile(dir.path()));
        useTinyMnist(settings, dir);
        MainWindow w(settings);
        w.show();
        QVERIFY(waitForDataset(w));
        w.trainPage()->enqueue();
        QCOMPARE(w.trainPage()->queuedRuns(), 1);
        w.setCloseQuestionAnswer(false);
        QVERIFY(!w.close());
        QVERIFY(w.isVisible());
        QCOMPARE(w.trainPage()->queuedRuns(), 1);
        w.setCloseQuestionAnswer(true);
        QVERIFY(w.close());
        // SIGTERM or Ctrl-C in the terminal (closeWithoutAsking): the queue is dropped, nothing
        // asks.
        w.show();
        w.trainPage()->enqueue();
        w.setCloseQuestionAnswer(false); // would keep the window, were it asked
        w.closeWithoutAsking(QStringLiteral("SIGTERM"));
        QVERIFY(!w.isVisible());
        QCOMPARE(w.trainPage()->queuedRuns(), 0);

        // With dialogs open, a question in a dialog (the model file editor's "Drop your
        // edits?"): each is dismissed, innermost first, without asking again, so that their
        // event loops end and the application with the window.
        class Asking : public QDialog
        {
        public:
            using QDialog::QDialog;
            int asked = 0;
            void reject() override // asks, as the editor does with edits, and stays
            {
                ++asked;
                QDialog question(this);
                question.setModal(true);
                question.exec();
            }
        };
        w.show();
        int outer = -1;
        bool forced = false;
        Asking* dialog = nullptr;
        QTimer::singleShot(0, &w, [&] {
            Asking editor(&w);
            dialog = &editor;
            QTimer::singleShot(0, &editor, [&editor] { editor.reject(); });
            QTimer::singleShot(100, &w, [&w] { w.closeWithoutAsking(QStringLiteral("SIGTERM")); });
            // Were they not dismissed, the test would hang here: ended by force, and failed.
            QTimer::singleShot(10000, &editor, [&] {
                forced = true;
                while (QWidget* m = QApplication::activeModalWidget())
                    if (auto* d = qobject_cast<QDialog*>(m))
                        d->done(QDialog::Accepted);
                    else
                        break;
            });
            outer = editor.exec();
            dialog = nullptr;
        });
        QTRY_VERIFY_WITH_TIMEOUT(outer != -1, 15000);
        QVERIFY(!forced);
        QCOMPARE(outer, int(QDialog::Rejected));
        QVERIFY(!w.isVisible());
        QVERIFY(!QApplication::activeModalWidget());
    }

    // "Find…" beside the learning rate: the range test on the loaded dataset with the pages'
    // settings, drawn as it runs; its suggestion goes into the form. Without a dataset, the
    // banner says what to do.
    void findsALearningRate()
    {
        QTemporaryDir dir;
        towers::app::AppSettings settings(towers::test::settingsFile(dir.path()));
        settings.setDatasetName(QStringLiteral("mnist"));
        settings.setDataDir(dir.filePath(QStringLiteral("nothing-here")));
        {
            MainWindow w(settings);
            QVERIFY(!w.findLearningRate());
            QVERIFY2(w.banner()->message().contains(QStringLiteral("Load a dataset")),
                     qPrintable(w.banner()->message()));
        }
        useTinyMnist(settings, dir);
        MainWindow w(settings);
        QVERIFY(waitForDataset(w));
        QString error;
        const auto runOptions = w.newRunOptions(&error);
        QVERIFY2(runOptions, qPrintable(error));
        QSignalSpy clicked(w.modelPage()->form(),
                           &towers::ui::HyperparameterForm::findLearningRateRequested);
        w.modelPage()->form()->findLearningRateButton()->click();
        QCOMPARE(clicked.count(), 1);
        auto* dialog = w.findChild<towers::ui::LrFinderDialog*>();
        QVERIFY(dialog && dialog->isVisible());
        // One test at a time, and no run while it trains (they would share the cores): two
        // windows trained at once, and Start stayed enabled.
        QCOMPARE(w.findLearningRate(), dialog);
        QCOMPARE(w.findChildren<towers::ui::LrFinderDialog*>().size(), 1);
        if (dialog->isRunning()) {
            QVERIFY(!w.newRunOptions(&error));
            QVERIFY2(error.contains(QStringLiteral("range test is training")), qPrintable(error));
            // Nor any other start (Start next, a resume): every start asks.
            QVERIFY(!w.trainPage()->startSession(*runOptions));
            QVERIFY2(w.banner()->message().contains(QStringLiteral("range test is training")),
                     qPrintable(w.banner()->message()));
        }
        QTRY_VERIFY_WITH_TIMEOUT(!dialog->isRunning(), 60000);
        QVERIFY2(w.newRunOptions(&error), qPrintable(error));
        QVERIFY2(dialog->result(), qPrintable(dialog->statusText()));
        const auto& result = *dialog->result();
        QCOMPARE(dialog->plot()->pointCount(1), int(result.points.size()));
        QVERIFY2(result.suggestedLr > 0, qPrintable(dialog->statusText()));
        QVERIFY(dialog->statusText().contains(QStringLiteral("Suggested learning rate")));
        QVERIFY(dialog->useButton()->isEnabled());
        dialog->useButton()->click();
        const double lr = w.modelPage()->form()->config().schedule.lr;
        QVERIFY2(std::abs(lr / result.suggestedLr - 1) < 1e-5,
                 qPrintable(QStringLiteral("%1 %2").arg(lr).arg(result.suggestedLr)));
        QVERIFY(w.log()->toPlainText().contains(QStringLiteral("from the range test")));
        // A rate measured for another setup is not put in the form: the model changed meanwhile.
        {
            QPointer<towers::ui::LrFinderDialog> other = w.findLearningRate();
            QVERIFY(other);
            QTRY_VERIFY_WITH_TIMEOUT(!other->isRunning(), 60000);
            const QString model = w.modelPage()->modelName();
            w.modelPage()->setModelName(QStringLiteral("mnist-convnet"));
            const double kept = w.modelPage()->form()->config().schedule.lr;
            QVERIFY2(other->useButton()->isEnabled(), qPrintable(other->statusText()));
            other->useButton()->click();
            QCOMPARE(w.modelPage()->form()->config().schedule.lr, kept);
            QVERIFY2(w.banner()->message().startsWith(
                         QStringLiteral("The range test's rate was not used: the model")),
                     qPrintable(w.banner()->message()));
            w.modelPage()->setModelName(model);
            if (other) other->close();
        }
        // A finished test's open window gives way to a new test (it was raised, its figures old).
        QPointer<towers::ui::LrFinderDialog> second = w.findLearningRate();
        QVERIFY(second && second->isRunning());
        second->stop();
        QTRY_VERIFY_WITH_TIMEOUT(!second->isRunning(), 60000);
        QVERIFY(second->isVisible());
        auto* third = w.findLearningRate();
        QVERIFY(third && third->isRunning());
        QTRY_VERIFY(!second);
        third->stop();
        QTRY_VERIFY_WITH_TIMEOUT(!third->isRunning(), 60000);
    }

    // A first start shows TrainConfig's defaults; a new run's configuration carries what the
    // Devices page says, for GPU towers and CPU towers.
    void newRunCarriesTheTowerOptions()
    {
        QTemporaryDir dir;
        towers::app::AppSettings settings(towers::test::settingsFile(dir.path()));
        useTinyMnist(settings, dir);
        MainWindow w(settings);
        auto* devices = devicesOf(w);
        const towers::engine::TrainConfig defaults;
        QCOMPARE(devices->gpuData(), defaults.gpuData);
        QCOMPARE(devices->allreduce(), defaults.allreduce);
        QCOMPARE(devices->cudaGraphs(), defaults.cudaGraphs);
        QCOMPARE(devices->bucketMb(), defaults.bucketMb);
        QVERIFY(waitForDataset(w));
        QString error;
        auto options = w.newRunOptions(&error);
        QVERIFY2(options, qPrintable(error));
        QCOMPARE(options->config.gpuData, defaults.gpuData);
        QCOMPARE(options->config.allreduce, defaults.allreduce);
        QCOMPARE(options->config.cudaGraphs, defaults.cudaGraphs);
        QCOMPARE(options->config.bucketMb, defaults.bucketMb);

        // Two stand-in GPUs checked: GPU towers with the page's data, averaging and buckets.
        std::vector<towers::app::DeviceDescription> list(1);
        list[0].id = QStringLiteral("cpu");
        list[0].logicalCores = 4;
        for (int g : {0, 1}) {
            towers::app::DeviceDescription gpu;
            gpu.kind = towers::app::DeviceDescription::Kind::Gpu;
            gpu.id = QStringLiteral("gpu%1").arg(g);
            gpu.cudaNumber = g;
            list.push_back(gpu);
        }
        devices->deviceModel()->setDevices(list);
        QVERIFY(devices->gpuDataChoice()->isEnabled());
        devices->setGpuData("off");
        devices->setAllreduce("host");
        QVERIFY(devices->cudaGraphsCheck()->isEnabled());
        devices->setCudaGraphs(false);
        QVERIFY(devices->tf32Check()->isEnabled() && devices->cudnnBenchmarkCheck()->isEnabled());
        devices->setTf32(true);
        devices->setCudnnBenchmark(true);
        devices->setBucketMb(0);
        options = w.newRunOptions(&error);
        QVERIFY2(options, qPrintable(error));
        QCOMPARE(options->config.backend, std::string("cuda"));
        QVERIFY(options->config.allowTf32 && options->config.cudnnBenchmark);
        QCOMPARE(options->config.gpuData, std::string("off"));
        QCOMPARE(options->config.allreduce, std::string("host"));
        QVERIFY(!options->config.cudaGraphs);
        QCOMPARE(options->config.bucketMb, 0.0);
        // The last configuration follows every change.
        auto saved = towers::engine::TrainConfig::fromJson(settings.lastConfigJson().toStdString());
        QCOMPARE(saved.gpuData, std::string("off"));
        QCOMPARE(saved.allreduce, std::string("host"));
        QVERIFY(!saved.cudaGraphs);
        QCOMPARE(saved.bucketMb, 0.0);

        // CPU towers: the bucket size still applies.
        list.resize(1);
        devices->deviceModel()->setDevices(list);
        devices->setTowers(2);
        devices->setBucketMb(8);
        options = w.newRunOptions(&error);
        QVERIFY2(options, qPrintable(error));
        QCOMPARE(options->config.backend, std::string("onednn"));
        QCOMPARE(options->config.towers, 2);
        // The GPU options stay checked on the page, but a CPU run records neither.
        QVERIFY(devices->tf32() && devices->cudnnBenchmark());
        QVERIFY(!options->config.allowTf32 && !options->config.cudnnBenchmark);
        QCOMPARE(options->config.bucketMb, 8.0);
        saved = towers::engine::TrainConfig::fromJson(settings.lastConfigJson().toStdString());
        QCOMPARE(saved.bucketMb, 8.0);
    }
};

QTEST_MAIN(TestMainWindow)
#include "tst_main_window.moc"
