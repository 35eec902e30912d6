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
