// PlotWidget: series and points, axes that follow the data, replots coalesced to at most one per
// kMinReplotIntervalMs however fast points arrive, no replot while hidden, palette-following
// colours.
#include <QElapsedTimer>
#include <QTest>
#include <qcustomplot.h>

#include <algorithm>
#include <cmath>

#include "ui/plots/plot_theme.h"
#include "ui/plots/plot_widget.h"
#include "ui_test_support.h"

using towers::ui::PlotWidget;

class TestPlotWidget : public QObject
{
    Q_OBJECT
private slots:
    // Three entries in rows of two (a run's rate, norm and clipping bound; three runs compared):
    // the last row has an empty cell, which the fitting to the width passes over.
    void legendBelowWithARowNotFull()
    {
        PlotWidget w;
        w.resize(600, 240);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        w.setLegendBelow(2);
        for (int i = 0; i < 3; ++i)
            w.addPoint(w.addSeries(QStringLiteral("the run of a long name %1").arg(i)), 1, i);
        w.replotNow();
        const QCPLegend* legend = w.customPlot()->legend;
        QVERIFY(legend->visible());
        QCOMPARE(legend->wrap(), 2);
        QCOMPARE(legend->itemCount(), 4); // QCustomPlot counts the empty cell
        QVERIFY(!legend->item(3));
        w.resize(160, 240); // one a row
        QTRY_COMPARE(legend->wrap(), 1);
        w.resize(600, 240);
        QTRY_COMPARE(legend->wrap(), 2);
    }

    // A narrow plot (the Runs page's at 1024 pixels: about 160 wide) has fewer x ticks, so that
    // their labels keep apart ("50 100 150", not "50100150"); a wide one keeps QCustomPlot's.
    void legendBelowKeepsItsNamesWhole()
    {
        for (const int width : {160, 600}) {
            PlotWidget w;
            w.resize(width, 240);
            w.show();
            QVERIFY(QTest::qWaitForWindowExposed(&w));
            w.addSeries(QStringLiteral("loss"));
            w.addSeries(QStringLiteral("test cross-entropy"));
            w.setLegendBelow(2);
            w.addPoint(0, 1, 1.0);
            w.addPoint(1, 1, 0.9);
            w.replotNow();
            const QCPLegend* legend = w.customPlot()->legend;
            QVERIFY(legend->visible());
            for (int i = 0; i < legend->itemCount(); ++i)
                QVERIFY2(legend->item(i)->outerRect().width() >=
                             legend->item(i)->minimumOuterSizeHint().width(),
                         qPrintable(QStringLiteral("width %1: item %2 is %3 px, needs %4")
                                        .arg(width)
                                        .arg(i)
                                        .arg(legend->item(i)->outerRect().width())
                                        .arg(legend->item(i)->minimumOuterSizeHint().width())));
            // Side by side where they fit.
            QCOMPARE(legend->wrap(), width == 600 ? 2 : 1);
        }
    }

    void tickLabelsKeepApart()
    {
        for (const int width : {160, 200, 260, 800}) {
            PlotWidget w;
            w.resize(width, 240);
            w.show();
            QVERIFY(QTest::qWaitForWindowExposed(&w));
            const int s = w.addSeries(QStringLiteral("loss"));
            QVector<double> x, y;
            for (int step = 10; step <= 344; step += 10) x << step, y << 1.0 / step;
            w.addPoints(s, x, y);
            w.replotNow();
            const QCPAxis* axis = w.customPlot()->xAxis;
            const QVector<double> ticks = axis->tickVector();
            const QVector<QString> labels = axis->tickVectorLabels();
            const QFontMetrics metrics(axis->tickLabelFont());
            QVERIFY(ticks.size() >= 2);
            for (int i = 0; i + 1 < ticks.size(); ++i) {
                const double apart =
                    axis->coordToPixel(ticks[i + 1]) - axis->coordToPixel(ticks[i]);
                const double needed = (metrics.horizontalAdvance(labels[i]) +
                                       metrics.horizontalAdvance(labels[i + 1])) /
                                          2.0 +
                                      metrics.horizontalAdvance(QLatin1Char('0'));
                QVERIFY2(apart >= needed,
                         qPrintable(QStringLiteral("width %1: %2 and %3 are %4 px apart, need %5")
                                        .arg(width)
                                        .arg(labels[i], labels[i + 1])
                                        .arg(apart)
                                        .arg(needed)));
            }
            if (width == 800)
                QVERIFY2(ticks.size() >= 4, qPrintable(QString::number(ticks.size())));
        }
    }

    void seriesAndPoints()
    {
        PlotWidget w(QStringLiteral("loss"));
        QCOMPARE(w.title(), QStringLiteral("loss"));
        const int raw = w.addSeries(QStringLiteral("raw"));
        const int smooth = w.addSeries(QStringLiteral("smoothed"));
        QCOMPARE(raw, 0);
        QCOMPARE(smooth, 1);
        QCOMPARE(w.seriesCount(), 2);
        QCOMPARE(w.seriesName(1), QStringLiteral("smoothed"));
        QVERIFY(std::isnan(w.lastValue(raw)));
        w.addPoint(raw, 1, 2.5);
        w.addPoints(raw, {2, 3}, {2.0, 1.5});
        QCOMPARE(w.pointCount(raw), 3);
        QCOMPARE(w.lastValue(raw), 1.5);
        QCOMPARE(w.pointCount(smooth), 0);
        w.setData(smooth, {1, 2}, {9, 8});
        QCOMPARE(w.pointCount(smooth), 2);
        w.clearData();
        QCOMPARE(w.pointCount(raw), 0);
        QCOMPARE(w.seriesCount(), 2);
        w.clearSeries();
        QCOMPARE(w.seriesCount(), 0);
    }

    void axesFollowTheData()
    {
        PlotWidget w;
        w.resize(400, 300);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        const int s = w.addSeries(QStringLiteral("a"));
        w.addPoints(s, {10, 20, 30}, {5, 10, 7});
        w.replotNow();
        const QCPRange x = w.customPlot()->xAxis->range();
        const QCPRange y = w.customPlot()->yAxis->range();
        QVERIFY(x.lower <= 10 && x.upper >= 30);
        QVERIFY(y.lower <= 5 && y.upper >= 10);
        QVERIFY(y.upper < 12); // a margin, not an arbitrary range
        w.setYRange(0, 1);
        w.replotNow();
        QCOMPARE(w.customPlot()->yAxis->range().lower, 0.0);
        QCOMPARE(w.customPlot()->yAxis->range().upper, 1.0);
    }

    // A series on the right axis has a scale of its own: the left axis follows the left series
    // alone (a learning rate is not squashed by gradient norms a thousand times larger), the
    // right axis the right series; the x axis both. The right axis shows only while a series of
    // it has a point.
    void rightAxisHasItsOwnScale()
    {
        PlotWidget w;
        w.resize(400, 300);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        w.setRightAxisLabel(QStringLiteral("gradient norm"));
        const int left = w.addSeries(QStringLiteral("learning rate"));
        PlotWidget::SeriesStyle style;
        style.rightAxis = true;
        const int right = w.addSeries(QStringLiteral("gradient norm"), style);
        QCOMPARE(w.customPlot()->graph(right)->valueAxis(), w.customPlot()->yAxis2);
        QCOMPARE(w.customPlot()->graph(left)->valueAxis(), w.customPlot()->yAxis);
        w.addPoints(left, {10, 20, 30}, {0.001, 0.1, 0.05});
        w.replotNow();
        QVERIFY(!w.rightAxisShown()); // nothing on it yet
        w.addPoints(right, {10, 20, 30, 40}, {50, 20, 10, 5});
        w.replotNow();
        QVERIFY(w.rightAxisShown());
        QCOMPARE(w.customPlot()->yAxis2->label(), QStringLiteral("gradient norm"));
        const QCPRange y = w.customPlot()->yAxis->range(), y2 = w.customPlot()->yAxis2->range();
        QVERIFY2(y.lower <= 0.001 && y.upper >= 0.1 && y.upper < 0.2,
                 qPrintable(QStringLiteral("%1 .. %2").arg(y.lower).arg(y.upper)));
        QVERIFY2(y2.lower <= 5 && y2.upper >= 50 && y2.upper < 60,
                 qPrintable(QStringLiteral("%1 .. %2").arg(y2.lower).arg(y2.upper)));
        QVERIFY(w.customPlot()->xAxis->range().lower <= 10);
        QVERIFY(w.customPlot()->xAxis->range().upper >= 40); // the right series' last step
        w.setSeriesVisible(right, false);
        w.replotNow();
        QVERIFY(!w.rightAxisShown());
        w.setSeriesVisible(right, true);
        w.clearData();
        w.replotNow();
        QVERIFY(!w.rightAxisShown());
    }

    // An axis of steps has ticks at whole steps only: one evaluation at step 300 reads "300", not
    // 299.6 / 299.8 / 300 / 300.2 / 300.4, and so do two or three close steps and a range whose
    // readable step would be 2.5. Fractional x (the range test's log₁₀ learning rate) keeps its
    // fractional ticks.
    void stepAxesHaveWholeTicks_data()
    {
        QTest::addColumn<QVector<double>>("steps");
        QTest::newRow("one point") << QVector<double>{300};
        QTest::newRow("two steps") << QVector<double>{300, 301};
        QTest::newRow("three steps") << QVector<double>{300, 301, 302};
        QTest::newRow("step 0 and 1") << QVector<double>{0, 1};
        QTest::newRow("0 to 12") << QVector<double>{0, 4, 8, 12};
        QTest::newRow("0 to 14") << QVector<double>{0, 7, 14};
        QTest::newRow("thousands") << QVector<double>{100, 200, 300, 12000};
    }

    void stepAxesHaveWholeTicks()
    {
        QFETCH(QVector<double>, steps);
        for (const int width : {160, 400, 1600}) {
            PlotWidget w;
            w.resize(width, 300);
            w.show();
            QVERIFY(QTest::qWaitForWindowExposed(&w));
            const int s = w.addSeries(QStringLiteral("accuracy"));
            QVector<double> y;
            for (int i = 0; i < steps.size(); ++i) y << 0.5 + 0.01 * i;
            w.addPoints(s, steps, y);
            w.replotNow();
            const QCPAxis* x = w.customPlot()->xAxis;
            const QVector<double> ticks = x->tickVector();
            const QVector<QString> labels = x->tickVectorLabels();
            QVERIFY(!ticks.isEmpty());
            for (int i = 0; i < ticks.size(); ++i) {
                const QString what =
                    QStringLiteral("width %1: tick %2 at %3, ticks %4")
                        .arg(width)
                        .arg(labels.value(i))
                        .arg(ticks[i])
                        .arg(QStringList(labels.begin(), labels.end()).join(QStringLiteral(" / ")));
                QVERIFY2(ticks[i] == std::round(ticks[i]), qPrintable(what));
                QVERIFY2(!labels.value(i).contains(QLatin1Char('.')), qPrintable(what));
            }
            // Sub-ticks at whole steps too.
            QVector<double> major, minor;
            QVector<QString> unused;
            x->ticker()->generate(x->range(), QLocale::c(), QLatin1Char('g'), 6, major, &minor,
                                  &unused);
            for (const double t : minor)
                QVERIFY2(
                    std::abs(t - std::round(t)) < 1e-9,
                    qPrintable(QStringLiteral("width %1: a sub-tick at %2").arg(width).arg(t)));
            if (steps.size() == 1) QCOMPARE(labels, QVector<QString>{QStringLiteral("300")});
        }
        // A fractional axis keeps its fractional ticks.
        PlotWidget lr;
        lr.resize(400, 300);
        lr.show();
        QVERIFY(QTest::qWaitForWindowExposed(&lr));
        const int s = lr.addSeries(QStringLiteral("loss"));
        lr.addPoints(s, {-3.1, -2.9, -2.7}, {2, 1.5, 1.2});
        lr.replotNow();
        const QVector<double> ticks = lr.customPlot()->xAxis->tickVector();
        QVERIFY(
            std::any_of(ticks.begin(), ticks.end(), [](double t) { return t != std::round(t); }));
    }

    void replotsAreCoalesced()
    {
        PlotWidget w;
        w.resize(400, 300);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        const int s = w.addSeries(QStringLiteral("loss"));
        QTRY_VERIFY(w.replotCount() >= 1); // the first request redraws promptly
        const int before = w.replotCount();
        QElapsedTimer clock;
        clock.start();
        int points = 0;
        // Points as fast as they come for 600 ms, the event loop running in between.
        while (clock.elapsed() < 600) {
            for (int i = 0; i < 20; ++i, ++points) w.addPoint(s, points, std::sin(points * 0.01));
            QCoreApplication::processEvents();
        }
        const qint64 elapsed = clock.elapsed();
        QTest::qWait(2 * PlotWidget::kMinReplotIntervalMs);
        const int replots = w.replotCount() - before;
        QVERIFY2(points > 1000, qPrintable(QString::number(points)));
        QVERIFY(replots >= 1);
        // At most one redraw per interval (plus the trailing one).
        QVERIFY2(replots <= elapsed / PlotWidget::kMinReplotIntervalMs + 2,
                 qPrintable(QStringLiteral("%1 replots in %2 ms").arg(replots).arg(elapsed)));
        QCOMPARE(w.pointCount(s), points);
    }

    void noReplotWhileHidden()
    {
        PlotWidget w;
        const int s = w.addSeries(QStringLiteral("a"));
        for (int i = 0; i < 100; ++i) w.addPoint(s, i, i);
        QTest::qWait(3 * PlotWidget::kMinReplotIntervalMs);
        QCOMPARE(w.replotCount(), 0);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QTRY_COMPARE(w.replotCount(), 1);
    }

    void followsThePalette()
    {
        PlotWidget w;
        const int s = w.addSeries(QStringLiteral("a"));
        const QColor lightSeries = w.customPlot()->graph(s)->pen().color();
        QCOMPARE(w.customPlot()->xAxis->tickLabelColor(), w.palette().color(QPalette::WindowText));

        const QPalette dark = towers::test::darkPalette();
        w.setPalette(dark);
        QCOMPARE(w.customPlot()->xAxis->tickLabelColor(), dark.color(QPalette::WindowText));
        QCOMPARE(w.customPlot()->yAxis->basePen().color(), dark.color(QPalette::WindowText));
        QCOMPARE(w.customPlot()->legend->textColor(), dark.color(QPalette::Text));
        // The background is the palette's base: render and look at a corner pixel.
        w.resize(300, 200);
        const QImage shot = w.customPlot()->toPixmap(300, 200).toImage();
        QCOMPARE(QColor(shot.pixel(2, 2)), dark.color(QPalette::Base));
        // Series colours are lightened on a dark background so they keep their contrast.
        const QColor darkSeries = w.customPlot()->graph(s)->pen().color();
        QVERIFY(darkSeries.lightness() > lightSeries.lightness());
        QVERIFY(towers::ui::isDarkPalette(dark));
        QVERIFY(!towers::ui::isDarkPalette(QPalette(Qt::white)));
    }

    void emptyMessage()
    {
        PlotWidget w;
        w.resize(300, 200);
        w.setEmptyMessage(QStringLiteral("no sensor readable"));
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        auto* label = w.findChild<QLabel*>();
        QVERIFY(label);
        QVERIFY(label->isVisible());
        // The axes hide behind it: none of a plot's earlier data is shown.
        QVERIFY(!w.customPlot()->xAxis->visible() && !w.customPlot()->yAxis->visible());
        const int s = w.addSeries(QStringLiteral("a"));
        w.addPoint(s, 0, 1);
        QVERIFY(!label->isVisible());
        QVERIFY(w.customPlot()->xAxis->visible() && w.customPlot()->yAxis->visible());
        w.clearData();
        QVERIFY(label->isVisible());
        QVERIFY(!w.customPlot()->xAxis->visible());
    }

    // A long message in a plot of the smallest size: a smaller font, all of it shown, where the
    // widget's own font would run past the plot's bottom.
    void aLongEmptyMessageFits()
    {
        PlotWidget w(QStringLiteral("Learning rate"));
        const QString text = QStringLiteral(
            "No schedule while a setting is refused: the learning rate, the warm-up, the final "
            "rate, the batch or the length of the run (see what is said under the form)");
        w.setEmptyMessage(text);
        w.resize(160, 120);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        auto* label = w.findChild<QLabel*>();
        QVERIFY(label && label->isVisible());
        const QRect needed = QFontMetrics(label->font())
                                 .boundingRect(QRect(0, 0, label->width(), 10000),
                                               Qt::AlignCenter | Qt::TextWordWrap, text);
        QVERIFY2(needed.height() <= label->height(),
                 qPrintable(QStringLiteral("%1 px of text in a %2 px label")
                                .arg(needed.height())
                                .arg(label->height())));
        if (QFontMetrics(w.font())
                .boundingRect(QRect(0, 0, label->width(), 10000),
                              Qt::AlignCenter | Qt::TextWordWrap, text)
                .height() <= label->height())
            QSKIP("the widget's own font fits the text in 160 x 120 here: nothing to make smaller");
        QVERIFY(label->font().pointSizeF() < w.font().pointSizeF());
        // Wide enough: the widget's own font, and a new one it is given.
        w.resize(600, 300);
        QTRY_COMPARE(label->font().pointSizeF(), w.font().pointSizeF());
        QFont larger = w.font();
        larger.setPointSizeF(larger.pointSizeF() + 1);
        w.setFont(larger);
        QTRY_COMPARE(label->font().pointSizeF(), larger.pointSizeF());
    }
};

QTEST_MAIN(TestPlotWidget)
#include "tst_plot_widget.moc"
