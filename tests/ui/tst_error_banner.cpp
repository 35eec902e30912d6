// ErrorBanner: shows the latest message, counts them, is dismissable, and its tint follows the
// palette (dark stays dark, light stays light).
#include <QTest>
#include <QToolButton>

#include "ui/widgets/error_banner.h"
#include "ui_test_support.h"

using towers::ui::ErrorBanner;

class TestErrorBanner : public QObject
{
    Q_OBJECT
private slots:
    void showAndDismiss()
    {
        QWidget parent;
        auto* banner = new ErrorBanner(&parent);
        parent.show();
        QVERIFY(QTest::qWaitForWindowExposed(&parent));
        QVERIFY(!banner->isVisible());
        banner->showMessage(QStringLiteral("data_batch_3.bin: record 1: label 11"));
        banner->showMessage(QStringLiteral("model diverged with loss = NaN at step 12"));
        QVERIFY(banner->isVisible());
        QCOMPARE(banner->message(), QStringLiteral("model diverged with loss = NaN at step 12"));
        QCOMPARE(banner->messageCount(), 2);
        QTest::mouseClick(banner->findChild<QToolButton*>(), Qt::LeftButton);
        QVERIFY(!banner->isVisible());
    }

    void tintFollowsPalette()
    {
        ErrorBanner banner;
        banner.setPalette(QPalette(QColor(240, 240, 240)));
        const QColor light = banner.tint();
        banner.setPalette(towers::test::darkPalette());
        const QColor dark = banner.tint();
        QVERIFY(light.lightness() > 150);
        QVERIFY(dark.lightness() < 100);
        QVERIFY(light.red() > light.blue()); // reddish in both
        QVERIFY(dark.red() > dark.blue());
    }
};

QTEST_MAIN(TestErrorBanner)
#include "tst_error_banner.moc"
