// HeatMap: cells hold each row's shares, counts are written in the cells, and a click on a cell
// reports that cell (row = true class, column = predicted).
#include <QSignalSpy>
#include <QTest>
#include <qcustomplot.h>

#include "ui/plots/heat_map.h"

using towers::ui::HeatMap;

class TestHeatMap : public QObject
{
    Q_OBJECT
private slots:
    void sharesAndCounts()
    {
        HeatMap map;
        // 3 classes; row 0: 8 right, 2 as class 2.
        map.setMatrix({QStringLiteral("a"), QStringLiteral("b"), QStringLiteral("c")},
                      {8, 0, 2, 1, 9, 0, 0, 0, 5});
        QCOMPARE(map.size(), 3);
        QCOMPARE(map.count(0, 2), 2);
        auto* colorMap = qobject_cast<QCPColorMap*>(map.customPlot()->plottable(0));
        QVERIFY(colorMap);
        QCOMPARE(colorMap->data()->cell(2, 0), 0.2); // key = predicted column, value = true row
        QCOMPARE(colorMap->data()->cell(0, 0), 0.8);
        QCOMPARE(colorMap->data()->cell(1, 1), 0.9);
        QCOMPARE(colorMap->data()->cell(2, 2), 1.0);
        // One text per non-zero cell.
        QCOMPARE(map.customPlot()->itemCount(), 5);
        map.setMatrix({QStringLiteral("a")}, {1, 2}); // inconsistent sizes: refused, empty
        QCOMPARE(map.size(), 0);
    }

    // No tick mark reaches into the cells: the first column's counts read "14", not "-14", and an
    // empty cell is empty, not a lone "–". Neither axis has ticks or sub-ticks of any length; on
    // the screen, the first column's left edge and the last row's bottom edge are the cells'
    // colour right up to the axis line.
    void noTickMarksOverTheCells()
    {
        HeatMap map;
        map.resize(500, 400);
        QStringList labels;
        for (int i = 0; i < 4; ++i) labels << QStringLiteral("class %1").arg(i);
        // The first column and the last row empty: their cells are the background colour.
        map.setMatrix(labels, {0, 5, 1, 1, 0, 5, 1, 1, 0, 1, 5, 1, 0, 0, 0, 0});
        map.show();
        QVERIFY(QTest::qWaitForWindowExposed(&map));
        QCustomPlot* plot = map.customPlot();
        plot->replot();
        const QImage shot = plot->toPixmap().toImage();
        const QColor base = map.palette().color(QPalette::Base);
        const QRect cells = plot->axisRect()->rect();
        for (int r = 0; r < 4; ++r) {
            const int y = int(plot->yAxis->coordToPixel(r));
            for (int x = cells.left() + 2; x < cells.left() + 8; ++x)
                QVERIFY2(QColor(shot.pixel(x, y)) == base,
                         qPrintable(QStringLiteral("row %1, x %2: %3")
                                        .arg(r)
                                        .arg(x)
                                        .arg(QColor(shot.pixel(x, y)).name())));
        }
        for (int c = 0; c < 4; ++c) {
            const int x = int(plot->xAxis->coordToPixel(c));
            for (int y = cells.bottom() - 7; y < cells.bottom() - 1; ++y)
                QVERIFY2(QColor(shot.pixel(x, y)) == base,
                         qPrintable(QStringLiteral("column %1, y %2: %3")
                                        .arg(c)
                                        .arg(y)
                                        .arg(QColor(shot.pixel(x, y)).name())));
        }
        for (QCPAxis* a : {plot->xAxis, plot->yAxis}) {
            QCOMPARE(a->tickLengthIn(), 0);
            QCOMPARE(a->tickLengthOut(), 0);
            QVERIFY(!a->subTicks() || (a->subTickLengthIn() == 0 && a->subTickLengthOut() == 0));
        }
    }

    void clickReportsTheCell()
    {
        HeatMap map;
        map.resize(500, 400);
        QStringList labels;
        QVector<std::int64_t> counts;
        for (int i = 0; i < 4; ++i) labels << QStringLiteral("class %1").arg(i);
        for (int i = 0; i < 16; ++i) counts << i;
        map.setMatrix(labels, counts);
        map.show();
        QVERIFY(QTest::qWaitForWindowExposed(&map));
        map.customPlot()->replot();
        QSignalSpy spy(&map, &HeatMap::cellClicked);
        for (int r = 0; r < 4; ++r)
            for (int c = 0; c < 4; ++c) {
                const QPoint at = map.cellCenter(r, c);
                QCOMPARE(map.cellAt(at), QPoint(r, c));
                QTest::mouseClick(map.customPlot(), Qt::LeftButton, {},
                                  map.customPlot()->mapFrom(&map, at));
                QCOMPARE(spy.count(), 1);
                QCOMPARE(spy.takeFirst(), (QList<QVariant>{r, c}));
            }
        // Outside the matrix: nothing.
        QTest::mouseClick(map.customPlot(), Qt::LeftButton, {}, QPoint(2, 2));
        QCOMPARE(spy.count(), 0);
    }
};

QTEST_MAIN(TestHeatMap)
#include "tst_heat_map.moc"
