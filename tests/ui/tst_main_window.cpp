// MainWindow: every page reachable from the sidebar and by Ctrl+<n>, errors in the banner and
// the log, the last page and the geometry remembered.
#include <QListWidget>
#include <QPlainTextEdit>
#include <QTemporaryDir>
#include <QTest>

#include "app/settings/app_settings.h"
#include "ui/main_window.h"
#include "ui/widgets/error_banner.h"
#include "ui_test_support.h"

using towers::ui::MainWindow;

class TestMainWindow : public QObject
{
    Q_OBJECT
    QTemporaryDir m_home;

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
            QVERIFY2(!image.isNull(), "the icon does not render: is Qt's SVG icon engine (libqt6svg6) installed?");
            QCOMPARE(image.width(), size);
            QVERIFY(qAlpha(image.pixel(size / 2, size - size / 8)) > 0); // the tile, not a transparent pixmap
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
            w.close();
        }
        towers::app::AppSettings settings(file);
        MainWindow again(settings);
        QCOMPARE(again.currentPage(), int(MainWindow::Devices));
        QCOMPARE(again.size(), QSize(1240, 760));
    }
};

QTEST_MAIN(TestMainWindow)
#include "tst_main_window.moc"
