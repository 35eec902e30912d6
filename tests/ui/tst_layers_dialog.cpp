// LayersDialog on a made-up layer, without a network: the histogram of the chosen layer's values,
// its bins labelled by their centres with the decimals their width needs, the one around zero
// "0" whatever side of zero its centre falls. (tst_classify_page shows the dialog on a real
// network's layers.)
#include <QRegularExpression>
#include <QTest>

#include "engine/train/classifier.h"
#include "ui/pages/layers_dialog.h"
#include "ui/plots/bar_chart.h"

using towers::ui::LayersDialog;

namespace {

// An "input" of 2 × 3 × 1 values from `min` to `max`.
towers::engine::LayerView input(float min, float max)
{
    towers::engine::LayerView v;
    v.name = "input";
    v.description = "the image";
    v.shape = towers::engine::Shape{2, 3, 1};
    v.values = {min, -0.5f, 0.0f, 0.25f, 0.5f, max};
    towers::engine::computeStatistics(v);
    return v;
}

} // namespace

class TestLayersDialog : public QObject
{
    Q_OBJECT
private slots:
    void histogramZeroReadsZero_data()
    {
        QTest::addColumn<float>("min");
        QTest::addColumn<float>("max");
        QTest::addColumn<QString>("zero");
        // Bins of 0.208: the eleventh's centre is -0.0064 (the Layers window showed "-0.0").
        QTest::newRow("just below zero") << -2.192f << 1.971f << QStringLiteral("0");
        // Its centre +0.0064: "0" too, as the one below zero.
        QTest::newRow("just above zero") << -1.971f << 2.192f << QStringLiteral("0");
        // Bins of 1.6, no decimals: a centre of -0.2 reads "0", not "-0".
        QTest::newRow("wide bins") << -17.0f << 15.0f << QStringLiteral("0");
    }

    void histogramZeroReadsZero()
    {
        QFETCH(float, min);
        QFETCH(float, max);
        QFETCH(QString, zero);
        QLocale::setDefault(QLocale::c());
        LayersDialog dialog({input(min, max)}, {}, QStringLiteral("an image"));
        dialog.showLayer(0);
        const towers::ui::BarChart* chart = dialog.histogramChart();
        QCOMPARE(chart->barCount(), 20);
        QStringList labels;
        for (int i = 0; i < chart->barCount(); ++i) labels << chart->label(i);
        const QString all = labels.join(QStringLiteral(" / "));
        // No negative zero in any form: "-0", "-0.0", "-0.00".
        static const QRegularExpression negativeZero(QStringLiteral("^-0([.,]0*)?$"));
        for (const QString& label : labels)
            QVERIFY2(!negativeZero.match(label).hasMatch(), qPrintable(all));
        QVERIFY2(labels.count(zero) == 1, qPrintable(all));
        // The others keep the decimals of their bins' width.
        const int decimals = max - min < 20 ? 1 : 0;
        for (const QString& label : labels)
            if (label != zero)
                QVERIFY2(label.section(QLatin1Char('.'), 1).size() == decimals, qPrintable(all));
    }
};

QTEST_MAIN(TestLayersDialog)
#include "tst_layers_dialog.moc"
