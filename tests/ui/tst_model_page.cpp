// ModelPage: the picker lists every registered model; choosing one shows its layer table and its
// parameter count (checked against the engine's own count).
#include <QComboBox>
#include <QLabel>
#include <QScrollArea>
#include <QSignalSpy>
#include <QTest>

#include "engine/models/registry.h"
#include "ui/models/layer_table_model.h"
#include "ui/pages/model_page.h"

using towers::ui::ModelPage;

class TestModelPage : public QObject
{
    Q_OBJECT
private slots:
    void pickerShowsEveryModel()
    {
        ModelPage page;
        auto* combo = page.findChild<QComboBox*>();
        QVERIFY(combo);
        QCOMPARE(combo->count(), int(towers::engine::modelRegistry().size()));
        QSignalSpy changed(&page, &ModelPage::modelChanged);
        for (const auto& info : towers::engine::modelRegistry()) {
            const QString name = QString::fromStdString(info.name);
            page.setModelName(name);
            QCOMPARE(page.modelName(), name);
            const auto model = info.build(info.numClasses);
            QCOMPARE(page.totalParameters(), qint64(model->parameterCount()));
            QCOMPARE(page.layerModel()->rowCount(), int(model->layerTable().size()));
        }
        QCOMPARE(changed.count(),
                 int(towers::engine::modelRegistry().size()) - 1); // the first was current
    }

    // The hyperparameter form is never cut off on the right (its scroll area scrolls only up and
    // down), at the window's smallest sensible size.
    void formFitsItsColumn()
    {
        ModelPage page;
        page.resize(1000, 700);
        page.show();
        QVERIFY(QTest::qWaitForWindowExposed(&page));
        auto* scroll = page.findChild<QScrollArea*>();
        QVERIFY(scroll && scroll->widget());
        QTRY_VERIFY(scroll->widget()->width() <= scroll->viewport()->width());
        QVERIFY2(scroll->widget()->width() >= scroll->widget()->minimumSizeHint().width(),
                 qPrintable(QStringLiteral("%1 < %2")
                                .arg(scroll->widget()->width())
                                .arg(scroll->widget()->minimumSizeHint().width())));
    }

    // With a dataset of 100 classes (CIFAR-100), the classifier has 100 outputs: the parameter
    // count and the description follow.
    void followsTheDatasetsClasses()
    {
        ModelPage page;
        page.setModelName(QStringLiteral("cifar10-resnet"));
        const qint64 ten = page.totalParameters();
        page.setClasses(100);
        QCOMPARE(page.totalParameters(), ten + 256 * 90); // fc: 256 inputs, no bias
        QCOMPARE(page.totalParameters(),
                 qint64(towers::engine::buildModel("cifar10-resnet", 100)->parameterCount()));
        bool said = false;
        for (auto* l : page.findChildren<QLabel*>())
            said = said || l->text().contains(QStringLiteral("100 classes"));
        QVERIFY(said);
    }
};

QTEST_MAIN(TestModelPage)
#include "tst_model_page.moc"
