// MainWindow: every page reachable from the sidebar and by Ctrl+<n>, the window fitting a small
// screen, errors in the banner and the log, the last page, the geometry and the Devices page's
// settings (precision, GPU towers' data, averaging and CUDA graphs, gradient buckets) remembered, a
// first start's model, closing with runs queued. A new run's configuration from the pages, and the
// runs started from the window, are in tst_main_window_runs.cpp (main_window_support.h: what the
// two share).
#include <QAbstractButton>
#include <QDialog>
#include <QDir>
#include <QDockWidget>
#include <QFile>
#include <QFileInfo>
#include <QLabel>
#include <QListWidget>
#include <QMap>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QRegularExpression>
#include <QScreen>
#include <QScrollArea>
#include <QScrollBar>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>
#include <QToolButton>

#include "app/settings/app_settings.h"
#include "dataset_files.h"
#include "engine/cpu/onednn_ops.h"
#include "engine/models/registry.h"
#include "engine/train/recipe.h"
#include "engine/train/run_directory.h"
#include "main_window_support.h"
#include "ui/main_window.h"
#include "ui/models/run_list_model.h"
#include "ui/pages/data_page.h"
#include "ui/pages/devices_page.h"
#include "ui/pages/model_page.h"
#include "ui/pages/runs_page.h"
#include "ui/pages/train_page.h"
#include "ui/widgets/error_banner.h"
#include "ui/widgets/hyperparameter_form.h"
#include "ui_test_support.h"

using towers::test::devicesOf;
using towers::test::useTinyMnist;
using towers::test::waitForDataset;
using towers::ui::MainWindow;

namespace {

// bf16 where this CPU runs it, else float32 (its entry cannot be chosen).
towers::engine::Precision kPrecision()
{
    return towers::engine::cpu::bf16Unavailable().empty() ? towers::engine::Precision::BFloat16
                                                          : towers::engine::Precision::Float32;
}

} // namespace

class TestMainWindow : public towers::test::MainWindowTest
{
    Q_OBJECT

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
};

QTEST_MAIN(TestMainWindow)
#include "tst_main_window.moc"
