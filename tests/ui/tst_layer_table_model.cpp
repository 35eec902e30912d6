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
