// BarChart: labels and values in order, highlighted bars drawn by the second bar set, value
// texts, and the value axis.
#include <QTest>
#include <qcustomplot.h>

#include "ui/plots/bar_chart.h"

using towers::ui::BarChart;

class TestBarChart : public QObject
{
    Q_OBJECT
private slots:
    void barsAndHighlights()
    {
        BarChart chart(QStringLiteral("towers"), Qt::Vertical);
        chart.setBars(
            {QStringLiteral("tower 0"), QStringLiteral("tower 1"), QStringLiteral("tower 2")},
            {10, 11, 20}, {false, false, true});
        QCOMPARE(chart.barCount(), 3);
        QCOMPARE(chart.label(2), QStringLiteral("tower 2"));
        QCOMPARE(chart.value(1), 11.0);
        QVERIFY(!chart.isHighlighted(0));
        QVERIFY(chart.isHighlighted(2));
        // Two bar sets: the normal one holds keys 1 and 2, the highlighted one key 3.
        auto* plot = chart.customPlot();
        QCOMPARE(plot->plottableCount(), 2);
        auto* normal = qobject_cast<QCPBars*>(plot->plottable(0));
        auto* high = qobject_cast<QCPBars*>(plot->plottable(1));
        QCOMPARE(normal->data()->size(), 2);
        QCOMPARE(high->data()->size(), 1);
        QCOMPARE(high->data()->at(0)->key, 3.0);
        QCOMPARE(high->data()->at(0)->value, 20.0);
        QVERIFY(normal->brush().color() != high->brush().color());
        // The value axis starts at 0 and leaves room above the tallest bar.
        QCOMPARE(plot->yAxis->range().lower, 0.0);
        QVERIFY(plot->yAxis->range().upper > 20.0);
    }

    void horizontalWithTexts()
    {
        BarChart chart(QStringLiteral("top 5"), Qt::Horizontal);
        chart.setValueRange(0, 1.2);
        chart.setValueText(QStringLiteral("%1 %"), 100, 1);
        chart.setBars({QStringLiteral("cat"), QStringLiteral("dog")}, {0.75, 0.125});
        auto* plot = chart.customPlot();
        QCOMPARE(plot->xAxis->range().upper, 1.2);
        QCOMPARE(plot->itemCount(), 2);
        QCOMPARE(qobject_cast<QCPItemText*>(plot->item(0))->text(), QStringLiteral("75.0 %"));
        QCOMPARE(qobject_cast<QCPItemText*>(plot->item(1))->text(), QStringLiteral("12.5 %"));
        QVERIFY(plot->yAxis->rangeReversed()); // the first (most likely) class on top
        chart.clear();
        QCOMPARE(chart.barCount(), 0);
        QCOMPARE(plot->itemCount(), 0);
    }
};

QTEST_MAIN(TestBarChart)
#include "tst_bar_chart.moc"
