// StackedBarChart: segments stacked in order, labelled bars and numeric columns, values inside the
// segments where they fit, totals clear of the axis' end, outlined highlights, tooltips, and
// colours that follow the palette.
#include <QApplication>
#include <QHelpEvent>
#include <QTest>
#include <QToolTip>
#include <qcustomplot.h>

#include "ui/plots/plot_theme.h"
#include "ui/plots/stacked_bar_chart.h"

using towers::ui::StackedBarChart;

namespace {
QStringList names()
{
    return {QStringLiteral("a"), QStringLiteral("b"), QStringLiteral("c")};
}
} // namespace

class TestStackedBarChart : public QObject
{
    Q_OBJECT
private slots:
    void labelledBars()
    {
        StackedBarChart chart(QStringLiteral("step"), Qt::Horizontal);
        chart.setSegments(names(), {0, 1, 2});
        chart.setUnit(QStringLiteral("ms"));
        chart.setValueTextsVisible(true);
        chart.setBars({QStringLiteral("tower 0"), QStringLiteral("tower 1")},
                      {{1, 40, 2}, {1, -0.5, 30}}, {false, true});
        QCOMPARE(chart.barCount(), 2);
        QCOMPARE(chart.label(1), QStringLiteral("tower 1"));
        QCOMPARE(chart.value(0, 1), 40.0);
        QCOMPARE(chart.total(0), 43.0);
        QCOMPARE(chart.total(1), 31.0); // a negative part counts as nothing
        QVERIFY(chart.isHighlighted(1));
        QVERIFY(!chart.isHighlighted(0));
        auto* plot = chart.customPlot();
        QCOMPARE(plot->plottableCount(), 3);
        QCOMPARE(chart.segmentBars(2)->barBelow(), chart.segmentBars(1));
        QCOMPARE(chart.segmentBars(1)->barBelow(), chart.segmentBars(0));
        QCOMPARE(chart.segmentBars(1)->data()->at(1)->value, 0.0);
        QCOMPARE(chart.segmentBars(2)->data()->at(1)->key, 2.0);
        QVERIFY(plot->yAxis->rangeReversed()); // the first bar on top
        // A red outline around the highlighted bar only.
        int outlines = 0;
        for (int i = 0; i < plot->itemCount(); ++i)
            if (auto* rect = qobject_cast<QCPItemRect*>(plot->item(i))) {
                ++outlines;
                QCOMPARE(rect->bottomRight->coords().x(), 31.0);
                QCOMPARE(rect->pen().color(), towers::ui::seriesColor(3, chart.palette()));
            }
        QCOMPARE(outlines, 1);
        const QString tip = chart.toolTip(0).replace(QStringLiteral("&nbsp;"), QStringLiteral(" "));
        QVERIFY2(tip.contains(QStringLiteral("43.0 ms")) &&
                     tip.contains(QStringLiteral("40.0 ms")) &&
                     tip.contains(QStringLiteral("93 %")),
                 qPrintable(tip));
        chart.clear();
        QCOMPARE(chart.barCount(), 0);
        QCOMPARE(chart.segmentBars(0)->data()->size(), 0);
        QCOMPARE(plot->itemCount(), 0);
    }

    // Drawn: a value inside a segment only where it fits, the totals inside the plot.
    void textsWhereTheyFit()
    {
        StackedBarChart chart(QStringLiteral("step"), Qt::Horizontal);
        chart.setSegments(names(), {0, 1, 2});
        chart.setUnit(QStringLiteral("ms"));
        chart.setValueTextsVisible(true);
        chart.setBars({QStringLiteral("tower 0"), QStringLiteral("tower 1")},
                      {{0.2, 40, 2}, {0.2, 20, 22}});
        chart.resize(500, 300);
        chart.show();
        QVERIFY(QTest::qWaitForWindowExposed(&chart));
        chart.replotNow();
        auto* plot = chart.customPlot();
        QStringList shown, hidden;
        for (int i = 0; i < plot->itemCount(); ++i) {
            auto* text = qobject_cast<QCPItemText*>(plot->item(i));
            if (!text || text->clipToAxisRect() == false) continue; // the totals
            (text->visible() ? shown : hidden) << text->text();
        }
        shown.sort();
        hidden.sort();
        QCOMPARE(shown, (QStringList{QStringLiteral("20.0"), QStringLiteral("22.0"),
                                     QStringLiteral("40.0")}));
        QCOMPARE(hidden, (QStringList{QStringLiteral("0.2"), QStringLiteral("0.2"),
                                      QStringLiteral("2.0")}));
        // The longest bar's total ends inside the axis rect.
        for (int i = 0; i < plot->itemCount(); ++i)
            if (auto* text = qobject_cast<QCPItemText*>(plot->item(i));
                text && text->text() == QStringLiteral("42.2 ms")) {
                const QFontMetrics fm(text->font());
                const double end =
                    plot->xAxis->coordToPixel(42.2) + fm.horizontalAdvance(text->text());
                QVERIFY2(
                    end < plot->axisRect()->right(),
                    qPrintable(QStringLiteral("%1 vs %2").arg(end).arg(plot->axisRect()->right())));
            }
        // The bar under the mouse.
        const int y1 = int(plot->yAxis->coordToPixel(2));
        QCOMPARE(chart.barAt(QPoint(int(plot->xAxis->coordToPixel(10)), y1)), 1);
        QCOMPARE(chart.barAt(
                     QPoint(int(plot->xAxis->coordToPixel(10)), int(plot->yAxis->coordToPixel(1)))),
                 0);
        QCOMPARE(chart.barAt(QPoint(2, y1)), -1); // outside the axis rect
        // Hovering a bar shows its values; elsewhere the chart's own tooltip is left to show.
        const QPoint over(int(plot->xAxis->coordToPixel(10)), y1);
        QHelpEvent help(QEvent::ToolTip, over, plot->mapToGlobal(over));
        QVERIFY(QApplication::sendEvent(plot, &help));
        QVERIFY2(QToolTip::text().contains(QStringLiteral("tower 1")) &&
                     QToolTip::text().contains(QStringLiteral("42.2")),
                 qPrintable(QToolTip::text()));
        QToolTip::hideText();
        QTRY_VERIFY(!QToolTip::isVisible());
        QHelpEvent outside(QEvent::ToolTip, QPoint(2, y1), plot->mapToGlobal(QPoint(2, y1)));
        QApplication::sendEvent(plot, &outside);
        QVERIFY(!QToolTip::isVisible());
    }

    void columnsOverSteps()
    {
        StackedBarChart chart(QStringLiteral("timeline"), Qt::Vertical);
        chart.setSegments(names(), {4, 0, 1});
        chart.setKeyLabel(QStringLiteral("step"));
        chart.setColumns({10, 20, 30}, {{1, 2, 3}, {1, 2, 4}, {1, 3, 3}});
        QCOMPARE(chart.barCount(), 3);
        QCOMPARE(chart.key(2), 30.0);
        QCOMPARE(chart.label(2), QStringLiteral("step 30"));
        QCOMPARE(chart.total(1), 7.0);
        QCOMPARE(chart.segmentBars(0)->width(), 8.0); // 0.8 of the spacing
        auto* plot = chart.customPlot();
        QVERIFY(plot->xAxis->range().lower < 10 - 4 && plot->xAxis->range().upper > 30 + 4);
        QCOMPARE(plot->yAxis->range().lower, 0.0);
        QVERIFY(plot->yAxis->range().upper > 7.0);
        QCOMPARE(plot->itemCount(), 0); // no texts on columns
        // The key axis is numeric, not labelled.
        QVERIFY(!plot->xAxis->ticker().dynamicCast<QCPAxisTickerText>());
        // Back to labelled bars: labels again.
        chart.setBars({QStringLiteral("x")}, {{1, 1, 1}});
        QVERIFY(plot->xAxis->ticker().dynamicCast<QCPAxisTickerText>());
    }

    void followsThePalette()
    {
        StackedBarChart chart(QStringLiteral("step"), Qt::Horizontal);
        chart.setSegments(names(), {0, 1, 2});
        const QColor light = chart.segmentBars(0)->brush().color();
        chart.setPalette(towers::ui::darkPalette());
        const QColor dark = chart.segmentBars(0)->brush().color();
        QVERIFY(light != dark);
        QCOMPARE(dark, towers::ui::seriesColor(0, towers::ui::darkPalette()));
        QCOMPARE(chart.customPlot()->axisRect()->axis(QCPAxis::atBottom)->basePen().color(),
                 towers::ui::darkPalette().color(QPalette::WindowText));
    }
};

QTEST_MAIN(TestStackedBarChart)
#include "tst_stacked_bar_chart.moc"
