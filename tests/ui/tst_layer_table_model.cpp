// LayerTableModel over every registered model: consistent as an item model, one row per layer,
// totals equal to the model's own parameter count, shapes shown without the batch dimension.
#include <QAbstractItemModelTester>
#include <QTest>

#include <functional>

#include "engine/models/registry.h"
#include "ui/models/layer_table_model.h"

using towers::ui::LayerTableModel;

class TestLayerTableModel : public QObject
{
    Q_OBJECT
private slots:
    void everyModel_data()
    {
        QTest::addColumn<QString>("name");
        for (const auto& info : towers::engine::modelRegistry())
            QTest::newRow(info.name.c_str()) << QString::fromStdString(info.name);
    }

    void everyModel()
    {
        QFETCH(QString, name);
        LayerTableModel model;
        QAbstractItemModelTester tester(&model,
                                        QAbstractItemModelTester::FailureReportingMode::QtTest);
        const auto net = towers::engine::buildModel(name.toStdString());
        const auto rows = net->layerTable();
        model.setRows(rows);
        // A residual block's layers follow it, one level deeper.
        int shown = 0, deeper = 0;
        const std::function<void(const std::vector<towers::engine::LayerRow>&)> count =
            [&](const std::vector<towers::engine::LayerRow>& list) {
                for (const auto& r : list) {
                    ++shown;
                    count(r.children);
                }
            };
        count(rows);
        QCOMPARE(model.rowCount(), shown);
        for (int r = 0; r < model.rowCount(); ++r) deeper += model.depth(r) > 0;
        QCOMPARE(deeper, shown - int(rows.size()));
        QCOMPARE(deeper > 0, name == QStringLiteral("cifar10-resnet"));
        QCOMPARE(model.columnCount(), int(LayerTableModel::ColumnCount));
        // The table's total is the model's trainable parameter count, an independent sum over
        // its parameters.
        QCOMPARE(model.totalParameters(), qint64(net->parameterCount()));
        qint64 fromParams = 0;
        for (auto* p : net->parameters())
            if (p->trainable) fromParams += p->value.numel();
        QCOMPARE(model.totalParameters(), fromParams);
        qint64 column = 0; // the network's own layers: a block's count holds its layers'
        for (int r = 0; r < model.rowCount(); ++r)
            if (model.depth(r) == 0)
                column += model.data(model.index(r, LayerTableModel::Parameters), Qt::EditRole)
                              .toLongLong();
        QCOMPARE(column, fromParams);
        // Names and the last layer's output: the class count.
        QCOMPARE(model.data(model.index(0, LayerTableModel::Layer)).toString(),
                 QString::fromStdString(rows[0].name));
        QCOMPARE(
            model.data(model.index(model.rowCount() - 1, LayerTableModel::OutputShape)).toString(),
            QString::number(net->numClasses()));
        model.setRows({});
        QCOMPARE(model.rowCount(), 0);
    }

    // The MFLOP column in one format: three significant digits, never in exponent form, large ones
    // whole with the locale's thousands separator (0.00256 beside 0.450, not 0.45); "–" where
    // none are counted; its raw value (EditRole) a number, for sorting.
    void mflopColumn()
    {
        QLocale::setDefault(QLocale(QLocale::English, QLocale::UnitedStates));
        const std::pair<double, QString> cases[] = {
            {2560, QStringLiteral("0.00256")},          {450'000, QStringLiteral("0.450")},
            {9'999, QStringLiteral("0.0100")},          {1'000'000, QStringLiteral("1.00")},
            {12'345'678, QStringLiteral("12.3")},       {99'960'000, QStringLiteral("100")},
            {123'456'789, QStringLiteral("123")},       {1'234'567'890, QStringLiteral("1,235")},
            {45'600'000'000, QStringLiteral("45,600")}, {0, QStringLiteral("–")}};
        std::vector<towers::engine::LayerRow> rows;
        for (const auto& [flops, text] : cases) {
            towers::engine::LayerRow r;
            r.name = text.toStdString();
            r.kind = "conv";
            r.outputShape = towers::engine::Shape{1, 10};
            r.forwardFlops = flops;
            rows.push_back(r);
        }
        LayerTableModel model;
        model.setRows(rows);
        for (int i = 0; i < model.rowCount(); ++i) {
            const QModelIndex at = model.index(i, LayerTableModel::MFlops);
            QCOMPARE(model.data(at).toString(), cases[i].second);
            QCOMPARE(model.data(at, Qt::EditRole).metaType().id(), QMetaType::Double);
            QCOMPARE(model.data(at, Qt::EditRole).toDouble(), cases[i].first * 1e-6);
        }
        QLocale::setDefault(QLocale::c());
    }

    void shapeLabels()
    {
        QCOMPARE(towers::ui::shapeLabel(towers::engine::Shape{1, 24, 24, 64}),
                 QStringLiteral("24 × 24 × 64"));
        QCOMPARE(towers::ui::shapeLabel(towers::engine::Shape{32, 32, 3}, false),
                 QStringLiteral("32 × 32 × 3"));
        QCOMPARE(towers::ui::shapeLabel(towers::engine::Shape{1, 10}), QStringLiteral("10"));
    }
};

QTEST_MAIN(TestLayerTableModel)
#include "tst_layer_table_model.moc"
