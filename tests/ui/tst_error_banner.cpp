// ErrorBanner: shows the latest message, counts them, keeps the earlier ones a click away, is
// dismissable (the earlier ones with it), and its tint follows the palette (dark stays dark,
// light stays light).
#include <QLabel>
#include <QTest>
#include <QToolButton>

#include "ui/widgets/error_banner.h"
#include "ui_test_support.h"

using towers::ui::ErrorBanner;

namespace {
QString shownText(const ErrorBanner& banner)
{
    return banner.findChild<QLabel*>(QStringLiteral("text"))->text();
}
QToolButton* earlierButton(const ErrorBanner& banner)
{
    return banner.findChild<QToolButton*>(QStringLiteral("earlier"));
}
} // namespace

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
        QTest::mouseClick(banner->findChild<QToolButton*>(QStringLiteral("dismiss")),
                          Qt::LeftButton);
        QVERIFY(!banner->isVisible());
    }

    // A warning said at start-up ("Nothing you change will be kept: …") is not lost under a later
    // error: the banner shows the latest and says how many came before; a click shows them all;
    // dismissing clears them, so the next message stands alone.
    void earlierMessagesStayReachable()
    {
        QWidget parent;
        auto* banner = new ErrorBanner(&parent);
        parent.show();
        QVERIFY(QTest::qWaitForWindowExposed(&parent));
        const QString first =
            QStringLiteral("Nothing you change will be kept: the settings could not be saved");
        banner->showMessage(first);
        QVERIFY(!earlierButton(*banner)->isVisible()); // one message: nothing earlier
        QCOMPARE(shownText(*banner), first);
        banner->showMessage(QStringLiteral("Cannot start: <no dataset>"));
        banner->showMessage(QStringLiteral("Training failed: model diverged"));
        QCOMPARE(banner->message(), QStringLiteral("Training failed: model diverged"));
        QCOMPARE(shownText(*banner), QStringLiteral("Training failed: model diverged"));
        QVERIFY(earlierButton(*banner)->isVisible());
        QCOMPARE(earlierButton(*banner)->text(), QStringLiteral("+2 earlier"));
        QCOMPARE(banner->messages().size(), 2 + 1);
        QCOMPARE(banner->messages().first(), first);

        QTest::mouseClick(earlierButton(*banner), Qt::LeftButton);
        QVERIFY(banner->isExpanded());
        const QString all = shownText(*banner);
        QVERIFY2(all.contains(first) &&
                     all.contains(QStringLiteral("Cannot start: <no dataset>")) &&
                     all.indexOf(QStringLiteral("Training failed")) < all.indexOf(first),
                 qPrintable(all)); // the latest on top, a message's '<' as written
        QTest::mouseClick(earlierButton(*banner), Qt::LeftButton);
        QVERIFY(!banner->isExpanded());
        QCOMPARE(shownText(*banner), QStringLiteral("Training failed: model diverged"));

        QTest::mouseClick(banner->findChild<QToolButton*>(QStringLiteral("dismiss")),
                          Qt::LeftButton);
        QVERIFY(!banner->isVisible());
        QVERIFY(banner->messages().isEmpty());
        banner->showMessage(QStringLiteral("a new error"));
        QCOMPARE(shownText(*banner), QStringLiteral("a new error"));
        QVERIFY(!earlierButton(*banner)->isVisible());
        QCOMPARE(banner->messageCount(), 4);
    }

    // It keeps the latest kMaxKept messages (the log has them all).
    void keepsTheLatestFew()
    {
        ErrorBanner banner;
        for (int i = 1; i <= ErrorBanner::kMaxKept + 2; ++i)
            banner.showMessage(QStringLiteral("error %1").arg(i));
        QCOMPARE(banner.messages().size(), ErrorBanner::kMaxKept);
        QCOMPARE(banner.messages().first(), QStringLiteral("error 3"));
        QCOMPARE(earlierButton(banner)->text(),
                 QStringLiteral("+%1 earlier").arg(ErrorBanner::kMaxKept - 1));
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
