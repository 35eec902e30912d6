// HyperparameterForm and ValidatedField: every model's default configuration survives the form
// unchanged; typing is refused where the syntax is wrong; out-of-range values are refused at the
// field with the reason, and the form says which field; rules between fields come from the
// engine's own validation; the global batch, steps per epoch and the schedule plot follow the
// towers, the batch, the batches accumulated and the training set size less a validation share
// (the plot checked against LrSchedule::at); the patience of an early stop needs evaluations; the
// classes sampled equally or not.
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QLineEdit>
#include <QRadioButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTest>
#include <QWheelEvent>
#include <cmath>
#include <limits>

#include "engine/models/registry.h"
#include "engine/train/checkpoint.h"
#include "engine/train/recipe.h"
#include "ui/plots/plot_widget.h"
#include "ui/widgets/hyperparameter_form.h"
#include "ui/widgets/validated_field.h"
#include "ui_test_support.h"
#include <qcustomplot.h>

using towers::ui::HyperparameterForm;
using towers::ui::ValidatedField;
namespace eng = towers::engine;

namespace {
void type(ValidatedField* f, const QString& text)
{
    f->lineEdit()->selectAll();
    QTest::keyClick(f->lineEdit(), Qt::Key_Backspace);
    QTest::keyClicks(f->lineEdit(), text);
}
} // namespace

class TestHyperparameterForm : public QObject
{
    Q_OBJECT
private slots:
    void initTestCase()
    {
        QVERIFY(towers::test::installPluralForms()); // "2 towers", as in towers
    }

    void defaultsRoundTrip_data()
    {
        QTest::addColumn<QString>("model");
        for (const auto& info : eng::modelRegistry())
            QTest::newRow(info.name.c_str()) << QString::fromStdString(info.name);
    }

    void defaultsRoundTrip()
    {
        QFETCH(QString, model);
        HyperparameterForm form;
        const eng::TrainConfig c = eng::defaultConfigFor(model.toStdString());
        form.setConfig(c);
        QVERIFY2(form.isValid(), qPrintable(form.error()));
        // Everything the form shows comes back the same: the JSON forms are equal.
        QCOMPARE(QString::fromStdString(form.config().toJson()),
                 QString::fromStdString(c.toJson()));
    }

    void fieldRefusesWithReason()
    {
        ValidatedField f(ValidatedField::Syntax::Decimal,
                         ValidatedField::between(0, true, 1, false));
        f.show();
        QTest::keyClicks(f.lineEdit(), QStringLiteral("ab"));
        QCOMPARE(f.text(), QString()); // not even typed
        QVERIFY(!f.isValid());
        QCOMPARE(f.error(), QStringLiteral("a value is needed"));
        QTest::keyClicks(f.lineEdit(), QStringLiteral("1.5"));
        QCOMPARE(f.text(), QStringLiteral("1.5"));
        QCOMPARE(f.error(), QStringLiteral("must be in (0, 1]"));
        auto* message = f.findChild<QLabel*>();
        QVERIFY(message->isVisible());
        QVERIFY(message->text().contains(QStringLiteral("must be in (0, 1]")));
        type(&f, QStringLiteral("1e-3"));
        QVERIFY(f.isValid());
        QCOMPARE(f.value(), 1e-3);
        // A comma was refused alone and the digits after it kept: "0,05" became 005. Where the
        // decimal sign is the comma (German) it is the point; elsewhere it is refused, saying so
        // ("1,000" is no thousand either).
        const QLocale before;
        QLocale::setDefault(QLocale(QLocale::German, QLocale::Germany));
        type(&f, QStringLiteral("0,05"));
        QCOMPARE(f.text(), QStringLiteral("0.05"));
        QCOMPARE(f.value(), 0.05);
        QVERIFY(f.isValid());
        QLocale::setDefault(QLocale(QLocale::English, QLocale::UnitedStates));
        for (const QString& typed : {QStringLiteral("0,05"), QStringLiteral("1,000")}) {
            type(&f, typed);
            QCOMPARE(f.text(), typed);
            QVERIFY(!f.isValid());
            QVERIFY2(f.error().startsWith(QStringLiteral("a comma is no decimal point here")),
                     qPrintable(f.error()));
        }
        QLocale::setDefault(before);
        type(&f, QStringLiteral("1e-3"));
        QVERIFY(f.isValid());
        QVERIFY(!message->isVisible());
        f.setExternalError(QStringLiteral("must not exceed the learning rate"));
        QVERIFY(!f.isValid());
        f.setExternalError({});
        QVERIFY(f.isValid());

        ValidatedField list(ValidatedField::Syntax::IntegerList,
                            ValidatedField::increasingPositive());
        list.setText(QStringLiteral("30, 60,90"));
        QVERIFY(list.isValid());
        QCOMPARE(list.integers(), (QList<qint64>{30, 60, 90}));
        list.setText(QStringLiteral("30, 20"));
        QCOMPARE(list.error(), QStringLiteral("epochs must increase"));
    }

    void formSaysWhichField()
    {
        HyperparameterForm form;
        form.setConfig(eng::defaultConfigFor("fashion-fast"));
        form.show();
        type(form.field(QStringLiteral("lr")), QStringLiteral("0"));
        QVERIFY(!form.isValid());
        QVERIFY2(form.error().startsWith(QStringLiteral("learning rate: ")),
                 qPrintable(form.error()));
        type(form.field(QStringLiteral("lr")), QStringLiteral("0.05"));
        QVERIFY2(form.isValid(), qPrintable(form.error()));
        QCOMPARE(form.config().schedule.lr, 0.05);

        // Only the fields that apply count: momentum is ignored by Adam (and keeps its last good
        // value in the configuration).
        eng::TrainConfig adam = eng::defaultConfigFor("mnist-convnet");
        form.setConfig(adam);
        QVERIFY(!form.field(QStringLiteral("momentum"))->isEnabled());
        form.field(QStringLiteral("momentum"))->setText(QStringLiteral("7"));
        type(form.field(QStringLiteral("lr")), QStringLiteral("0.002"));
        QVERIFY(!form.field(QStringLiteral("momentum"))->isValid());
        QVERIFY2(form.isValid(), qPrintable(form.error()));
        QCOMPARE(form.config().optimizer.momentum, adam.optimizer.momentum);
        QCOMPARE(form.config().schedule.lr, 0.002);

        // A rule between fields: the cosine schedule's final rate above the rate.
        eng::TrainConfig cos = eng::defaultConfigFor("fashion-fast");
        cos.schedule.kind = eng::LrSchedule::Kind::Cosine;
        cos.schedule.minLr = 0.01;
        form.setConfig(cos);
        QVERIFY(form.isValid());
        type(form.field(QStringLiteral("minLr")), QStringLiteral("0.5"));
        QVERIFY(!form.isValid());
        QVERIFY(form.error().contains(QStringLiteral("final rate")));

        // Gradient clipping: 0 (none) by default, a norm typed in, a configuration's shown.
        form.setConfig(eng::defaultConfigFor("fashion-fast"));
        QCOMPARE(form.field(QStringLiteral("clipGradNorm"))->text(), QStringLiteral("0"));
        type(form.field(QStringLiteral("clipGradNorm")), QStringLiteral("2.5"));
        QVERIFY2(form.isValid(), qPrintable(form.error()));
        QCOMPARE(form.config().clipGradNorm, 2.5);
        eng::TrainConfig clipped = eng::defaultConfigFor("fashion-fast");
        clipped.clipGradNorm = 0.75;
        form.setConfig(clipped);
        QCOMPARE(form.field(QStringLiteral("clipGradNorm"))->text(), QStringLiteral("0.75"));
        QCOMPARE(QString::fromStdString(form.config().toJson()),
                 QString::fromStdString(clipped.toJson()));
    }

    // The checkpoint a new run starts from (fine-tuning): empty by default, set, and cleared
    // again by a configuration without one. Under it, what the checkpoint's header says, a model
    // that is not the page's, or why the file cannot be read.
    void startFrom()
    {
        namespace eng = towers::engine;
        QTemporaryDir dir;
        const QString file = dir.filePath(QStringLiteral("ckpt-00000007.safetensors"));
        auto model = eng::createModel("fashion-fast", 1, 3);
        eng::CheckpointInfo info;
        info.dataset = "shoes";
        info.classNames = {"boot", "sandal", "sneaker"};
        info.step = 7;
        eng::writeCheckpoint(file.toStdString(), eng::makeCheckpoint(*model, info));

        HyperparameterForm form;
        form.show();
        auto* label = form.findChild<QLabel*>(QStringLiteral("initInfo"));
        QVERIFY(label);
        form.setConfig(eng::defaultConfigFor("fashion-fast"));
        QCOMPARE(form.config().initFrom, std::string());
        QVERIFY(!label->isVisible());
        form.setInitFrom(file);
        QVERIFY(form.isValid());
        QCOMPARE(form.config().initFrom, file.toStdString());
        QVERIFY(label->isVisible());
        QCOMPARE(label->text(), QStringLiteral("fashion-fast at step 7 on shoes, 3 classes"));
        form.setConfig(eng::defaultConfigFor("fashion-wide"));
        QCOMPARE(form.config().initFrom, std::string());
        // Another model's checkpoint, or a file that cannot be read, is refused by the form: it was
        // only described, and the run (maybe queued for later) failed when it started.
        form.setInitFrom(file);
        QVERIFY2(label->text().endsWith(QStringLiteral("not this page's model (fashion-wide)")),
                 qPrintable(label->text()));
        QVERIFY(!form.isValid());
        QVERIFY2(form.error().startsWith(QStringLiteral(
                     "start from: ckpt-00000007.safetensors is a checkpoint of fashion-fast, not "
                     "of this page's model fashion-wide")),
                 qPrintable(form.error()));
        QVERIFY(form.isSavable()); // the other fields' values are still kept as the last ones
        form.setModel("fashion-fast", ""); // the checkpoint's model: checked again, accepted
        QVERIFY2(form.isValid(), qPrintable(form.error()));
        form.setModel("fashion-wide", "");
        QVERIFY(!form.isValid());
        auto* field = form.findChild<QLineEdit*>(QStringLiteral("initFrom"));
        QVERIFY(field);
        field->selectAll();
        QTest::keyClicks(field, dir.filePath(QStringLiteral("none.safetensors"))); // typed
        QVERIFY2(label->text().contains(QStringLiteral("none.safetensors")),
                 qPrintable(label->text()));
        QVERIFY(!form.isValid());
        QVERIFY2(form.error().startsWith(QStringLiteral("start from: ")), qPrintable(form.error()));
        field->clear(); // its ✕: the description goes with it
        QVERIFY(!label->isVisible());
        QVERIFY(form.isValid());
    }

    void batchEpochsAndSchedulePlot()
    {
        HyperparameterForm form;
        eng::TrainConfig c =
            eng::defaultConfigFor("fashion-fast"); // one-cycle, batch 64, c.epochs (8) epochs
        form.setConfig(c);
        form.setTowers(2);
        QCOMPARE(form.stepsPerEpoch(), 0); // the set size is unknown yet
        QCOMPARE(form.totalSteps(), 0);
        form.setTrainingSetSize(60000);
        QCOMPARE(form.stepsPerEpoch(), 60000 / 128);
        QCOMPARE(form.totalSteps(), std::int64_t(std::llround(c.epochs * (60000 / 128))));
        bool globalShown = false;
        for (auto* l : form.findChildren<QLabel*>())
            globalShown = globalShown || l->text().contains(QStringLiteral("<b>128</b>"));
        QVERIFY(globalShown);

        auto* graph = form.schedulePlot()->customPlot()->graph(0);
        QVERIFY(graph->dataCount() > 100);
        const eng::TrainConfig now = form.config();
        for (int i = 0; i < graph->dataCount(); i += 37) {
            const auto point = graph->data()->at(i);
            QCOMPARE(point->value, now.schedule.at(std::int64_t(point->key), form.stepsPerEpoch(),
                                                   form.totalSteps()));
        }
        // The peak of one-cycle is the learning rate.
        double peak = 0;
        for (int i = 0; i < graph->dataCount(); ++i)
            peak = std::max(peak, graph->data()->at(i)->value);
        QVERIFY(std::abs(peak - 0.1) < 1e-3);

        // Steps instead of epochs.
        form.findChildren<QRadioButton*>().at(0)->setChecked(true); // "steps"
        type(form.field(QStringLiteral("steps")), QStringLiteral("1234"));
        QCOMPARE(form.totalSteps(), 1234);
        QCOMPARE(form.config().steps, 1234);
        QCOMPARE(form.config().epochs, 0.0);
        auto* batch = form.findChild<QSpinBox*>(QStringLiteral("batch"));
        batch->setValue(100);
        QCOMPARE(form.config().batchPerTower, 100);
        QCOMPARE(form.stepsPerEpoch(), 60000 / 200);
    }

    // The range test's "Use <rate>" counts as an edit: changed() (what saves the settings), the
    // schedule plot's peak and the rules between fields follow the new rate.
    void setLearningRateUpdatesThePage()
    {
        HyperparameterForm form;
        eng::TrainConfig c = eng::defaultConfigFor("fashion-fast"); // one-cycle, peak = lr
        c.schedule.lr = 0.1;
        form.setConfig(c);
        form.setTrainingSetSize(60000);
        int changes = 0;
        connect(&form, &HyperparameterForm::changed, this, [&changes] { ++changes; });
        form.setLearningRate(0.00613591);
        QVERIFY(changes > 0);
        QCOMPARE(form.config().schedule.lr, 0.00613591);
        auto* graph = form.schedulePlot()->customPlot()->graph(0);
        QVERIFY(graph->dataCount() > 100);
        double peak = 0;
        for (int i = 0; i < graph->dataCount(); ++i)
            peak = std::max(peak, graph->data()->at(i)->value);
        QVERIFY2(std::abs(peak - 0.00613591) < 1e-4, qPrintable(QString::number(peak)));

        // Cosine with a final rate of 0.01: a chosen rate under it is refused at once.
        c.schedule.kind = eng::LrSchedule::Kind::Cosine;
        c.schedule.minLr = 0.01;
        form.setConfig(c);
        QVERIFY2(form.isValid(), qPrintable(form.error()));
        form.setLearningRate(0.005);
        QVERIFY(!form.isValid());
        QVERIFY2(form.error().contains(QStringLiteral("final rate")), qPrintable(form.error()));
    }

    // The wheel over a box the pointer passes while scrolling the form changes nothing (it goes on
    // to the scroll area); once the box has the focus, the wheel turns it.
    void wheelTurnsOnlyAFocusedBox()
    {
        HyperparameterForm form;
        form.setConfig(eng::defaultConfigFor("fashion-fast"));
        form.show();
        QVERIFY(QTest::qWaitForWindowActive(&form));
        auto wheel = [](QWidget* w) {
            const QPointF at(5, 5);
            QWheelEvent e(at, w->mapToGlobal(at), QPoint(), QPoint(0, 120), Qt::NoButton,
                          Qt::NoModifier, Qt::NoScrollPhase, false);
            QApplication::sendEvent(w, &e);
            return e.isAccepted();
        };
        auto* batch = form.findChild<QSpinBox*>(QStringLiteral("batch"));
        auto* validation = form.findChild<QDoubleSpinBox*>(QStringLiteral("validation"));
        auto* optimizer = form.findChild<QComboBox*>();
        QVERIFY(batch && validation && optimizer);
        for (QWidget* w : std::initializer_list<QWidget*>{batch, validation, optimizer})
            QCOMPARE(w->focusPolicy(), Qt::StrongFocus); // the wheel does not give the focus
        form.field(QStringLiteral("lr"))->setFocus();    // the focus elsewhere, in a text field
        const int before = batch->value();
        const QString optimizerBefore = optimizer->currentText();
        QVERIFY(!wheel(batch));
        QVERIFY(!wheel(validation));
        QVERIFY(!wheel(optimizer));
        QCOMPARE(batch->value(), before);
        QCOMPARE(validation->value(), 0.0);
        QCOMPARE(optimizer->currentText(), optimizerBefore);
        batch->setFocus();
        QVERIFY(batch->hasFocus());
        wheel(batch);
        QCOMPARE(batch->value(), before + 1);
    }

    // An integer beyond int64 is refused at its field with the limit (it was read as 0, and the
    // summary blamed "steps > 0"); the summary shows messages as plain text, "<" and ">" as they
    // are.
    void integerBeyondInt64()
    {
        HyperparameterForm form;
        form.setConfig(eng::defaultConfigFor("fashion-fast"));
        form.show();
        form.findChildren<QRadioButton*>().at(0)->setChecked(true); // "steps"
        auto* steps = form.field(QStringLiteral("steps"));
        type(steps, QStringLiteral("9999999999999999999"));
        QVERIFY(!steps->isValid());
        QCOMPARE(steps->error(), QStringLiteral("must be in [1, 1e+12]")); // the field's own range
        QCOMPARE(form.error(), QStringLiteral("steps: must be in [1, 1e+12]"));
        // A field without a range of its own: int64's.
        ValidatedField seed(ValidatedField::Syntax::Integer, {});
        seed.setText(QStringLiteral("9999999999999999999"));
        QCOMPARE(seed.error(), QStringLiteral("at most %1")
                                   .arg(QLocale().toString(std::numeric_limits<qint64>::max())));
        // Read whole, then refused by the configuration's limit (the schedule's plot overflowed).
        type(steps, QStringLiteral("9223372036854775807"));
        QCOMPARE(steps->integer(), std::numeric_limits<qint64>::max());
        QCOMPARE(steps->error(), QStringLiteral("must be in [1, 1e+12]"));
        type(steps, QStringLiteral("1000000000000"));
        QVERIFY2(steps->isValid(), qPrintable(steps->error()));
        QCOMPARE(steps->integer(), eng::TrainConfig::kMaxSteps);

        auto* summary = form.findChild<QLabel*>(QStringLiteral("summary"));
        QVERIFY(summary);
        QCOMPARE(summary->textFormat(), Qt::PlainText);
        type(steps, QStringLiteral("99999999999999999999")); // 20 digits: not even typed
        QVERIFY(summary->text().startsWith(QStringLiteral("⚠ ")));
        QVERIFY2(!summary->text().contains(QStringLiteral("&")), qPrintable(summary->text()));
        QCOMPARE(summary->text(), QStringLiteral("⚠ ") + form.error());
    }

    // One step reads "1 step", one example "1 example" (it said "1 steps, 1 examples in all").
    void summarySaysOneInTheSingular()
    {
        HyperparameterForm form;
        eng::TrainConfig c = eng::defaultConfigFor("fashion-fast");
        c.steps = 1;
        c.epochs = 0;
        c.batchPerTower = 1;
        form.setConfig(c);
        form.setTrainingSetSize(1);
        auto* summary = form.findChild<QLabel*>(QStringLiteral("summary"));
        QVERIFY(summary);
        QVERIFY2(summary->text().startsWith(QStringLiteral("1 step, 1 example in all, 1 step per "
                                                           "epoch")),
                 qPrintable(summary->text()));
    }

    // More epochs than the configuration allows (1e16 ran one step) are refused at the field.
    void epochsAboveTheLimit()
    {
        HyperparameterForm form;
        form.setConfig(eng::defaultConfigFor("fashion-fast")); // in epochs
        form.setTrainingSetSize(60000);
        form.show();
        auto* epochs = form.field(QStringLiteral("epochs"));
        for (const QString& text :
             {QStringLiteral("1e16"), QStringLiteral("1e300"), QStringLiteral("1000001")}) {
            type(epochs, text);
            QVERIFY2(!epochs->isValid(), qPrintable(text));
            QCOMPARE(epochs->error(), QStringLiteral("must be in (0, 1e+06]"));
            QVERIFY2(form.error().startsWith(QStringLiteral("epochs: ")), qPrintable(form.error()));
        }
        type(epochs, QStringLiteral("1e6"));
        QVERIFY2(form.isValid(), qPrintable(form.error()));
        QCOMPARE(form.config().epochs, eng::TrainConfig::kMaxEpochs);
    }

    // A global batch the training set cannot fill once is refused, saying so, not "Load the
    // dataset".
    void batchLargerThanTheTrainingSet()
    {
        HyperparameterForm form;
        form.setConfig(eng::defaultConfigFor("fashion-fast")); // in epochs
        form.setTowers(1);
        form.setTrainingSetSize(60000);
        auto* batch = form.findChild<QSpinBox*>(QStringLiteral("batch"));
        batch->setValue(65536);
        QVERIFY(!form.isValid());
        const QString expected =
            QStringLiteral("a global batch of %1 is larger than the %2 training images")
                .arg(QLocale().toString(65536), QLocale().toString(60000));
        QVERIFY2(form.error().contains(expected), qPrintable(form.error()));
        auto* summary = form.findChild<QLabel*>(QStringLiteral("summary"));
        QVERIFY2(summary->text().contains(expected), qPrintable(summary->text()));
        QVERIFY(!summary->text().contains(QStringLiteral("Load the dataset")));
        // At the batch field too, as a field refuses its value: the field to change.
        // A field's tooltip says what it is, a refused value's reason before it.
        auto* lr = form.field(QStringLiteral("lr"));
        QCOMPARE(lr->lineEdit()->toolTip(),
                 QStringLiteral("The base learning rate (the peak for one-cycle)"));
        type(lr, QStringLiteral("0"));
        QCOMPARE(lr->lineEdit()->toolTip(),
                 QStringLiteral("⚠ must be in (0, 100]\nThe base learning rate (the peak for "
                                "one-cycle)"));
        type(lr, QStringLiteral("0.1"));
        auto* message = form.findChild<QLabel*>(QStringLiteral("batchMessage"));
        QVERIFY(message);
        QVERIFY(message->isVisibleTo(&form));
        QCOMPARE(message->text(), QStringLiteral("⚠ ") + expected);
        QVERIFY(batch->toolTip().contains(expected));
        // Shown there even while another field's refusal comes first under the form.
        type(form.field(QStringLiteral("lr")), QStringLiteral("0"));
        QVERIFY2(form.error().startsWith(QStringLiteral("learning rate: ")),
                 qPrintable(form.error()));
        QVERIFY(message->isVisibleTo(&form));
        type(form.field(QStringLiteral("lr")), QStringLiteral("0.1"));
        // Two towers of 64 on 91 images: the same, in steps too.
        form.findChildren<QRadioButton*>().at(0)->setChecked(true);
        form.setTowers(2);
        batch->setValue(64);
        form.setTrainingSetSize(91);
        QVERIFY2(form.error().contains(QStringLiteral("a global batch of 128 is larger than the 91 "
                                                      "training images")),
                 qPrintable(form.error()));
        QVERIFY(message->isVisibleTo(&form));
        batch->setValue(45);
        QVERIFY2(form.isValid(), qPrintable(form.error()));
        QVERIFY(!message->isVisibleTo(&form));
        QVERIFY(!batch->toolTip().contains(QStringLiteral("larger than")));
        // Unknown set size: nothing to say yet.
        form.setTrainingSetSize(0);
        batch->setValue(65536);
        QVERIFY2(form.isValid(), qPrintable(form.error()));
        QVERIFY(!message->isVisibleTo(&form));
    }

    // Gradient accumulation: round trips through the configuration (a model's defaults bring 1),
    // multiplies the global batch as the label says, and so divides the steps per epoch; a global
    // batch the training set cannot fill once, counting it, is refused at the batch field.
    void accumulation()
    {
        HyperparameterForm form;
        eng::TrainConfig c = eng::defaultConfigFor("fashion-fast"); // in epochs
        QCOMPARE(c.accumulate, 1);
        c.batchPerTower = 32;
        c.accumulate = 4;
        form.setConfig(c);
        form.setTowers(2);
        auto* accumulate = form.findChild<QSpinBox*>(QStringLiteral("accumulate"));
        auto* batch = form.findChild<QSpinBox*>(QStringLiteral("batch"));
        QVERIFY(accumulate && batch);
        QCOMPARE(accumulate->minimum(), 1);
        QCOMPARE(accumulate->maximum(), eng::TrainConfig::kMaxAccumulate);
        QCOMPARE(accumulate->value(), 4);
        QVERIFY(accumulate->toolTip().contains(QStringLiteral("gradients summed")));
        QVERIFY2(form.isValid(), qPrintable(form.error()));
        c.towers = 2;
        QCOMPARE(QString::fromStdString(form.config().toJson()),
                 QString::fromStdString(c.toJson()));
        accumulate->setValue(3);
        QCOMPARE(form.config().accumulate, 3);
        QCOMPARE(form.config().batchPerTower, 32);

        auto* global = form.findChild<QLabel*>(QStringLiteral("globalBatch"));
        QVERIFY(global);
        QCOMPARE(global->text(),
                 QStringLiteral("2 towers × 32 × 3 accumulated = <b>192</b> examples per step"));
        accumulate->setValue(1);
        QCOMPARE(global->text(), QStringLiteral("2 towers × 32 = <b>64</b> examples per step"));
        accumulate->setValue(4);

        // 60,000 images in global batches of 2 × 32 × 4 = 256.
        form.setTrainingSetSize(60000);
        QCOMPARE(form.stepsPerEpoch(), 60000 / 256);
        auto* summary = form.findChild<QLabel*>(QStringLiteral("summary"));
        QVERIFY2(summary->text().contains(
                     QStringLiteral("%1 steps per epoch").arg(QLocale().toString(60000 / 256))),
                 qPrintable(summary->text()));

        // 200 images: a global batch of 256 cannot be filled once, though 2 × 32 could.
        form.setTrainingSetSize(200);
        QVERIFY(!form.isValid());
        const QString expected =
            QStringLiteral("a global batch of 256 is larger than the 200 training images");
        QVERIFY2(form.error().contains(expected), qPrintable(form.error()));
        auto* message = form.findChild<QLabel*>(QStringLiteral("batchMessage"));
        QVERIFY(message->isVisibleTo(&form));
        QCOMPARE(message->text(), QStringLiteral("⚠ ") + expected);
        QVERIFY(batch->toolTip().contains(expected));
        QVERIFY(accumulate->toolTip().contains(expected));
        accumulate->setValue(3); // 192
        QVERIFY2(form.isValid(), qPrintable(form.error()));
        QVERIFY(!message->isVisibleTo(&form));
        QVERIFY(!accumulate->toolTip().contains(QStringLiteral("larger than")));
        QCOMPARE(form.stepsPerEpoch(), 1);

        // Another model's defaults: no accumulation.
        form.setConfig(eng::defaultConfigFor("cifar10-tutorial"));
        QCOMPARE(accumulate->value(), 1);
        QCOMPARE(form.config().accumulate, 1);
    }

    // Class-balanced sampling: the box round-trips "balanced" and "uniform" through the
    // configuration, a click changes it, and a model's defaults bring "uniform".
    void sampling()
    {
        HyperparameterForm form;
        eng::TrainConfig c = eng::defaultConfigFor("fashion-fast");
        QCOMPARE(c.sampling, std::string("uniform"));
        auto* balanced = form.findChild<QCheckBox*>(QStringLiteral("balanced"));
        QVERIFY(balanced);
        QVERIFY(balanced->toolTip().contains(QStringLiteral("--sampling balanced")));
        c.sampling = "balanced";
        form.setConfig(c);
        QVERIFY(balanced->isChecked());
        QVERIFY2(form.isValid(), qPrintable(form.error()));
        QCOMPARE(QString::fromStdString(form.config().toJson()),
                 QString::fromStdString(c.toJson()));
        QSignalSpy changed(&form, &HyperparameterForm::changed);
        balanced->click();
        QCOMPARE(changed.count(), 1); // the settings follow
        QCOMPARE(form.config().sampling, std::string("uniform"));
        balanced->click();
        QCOMPARE(form.config().sampling, std::string("balanced"));
        c.sampling = "uniform";
        form.setConfig(c);
        QVERIFY(!balanced->isChecked());
        QCOMPARE(form.config().sampling, std::string("uniform"));

        // Another model's defaults, after a balanced configuration: uniform.
        c.sampling = "balanced";
        form.setConfig(c);
        form.setConfig(eng::defaultConfigFor("cifar10-tutorial"));
        QVERIFY(!balanced->isChecked());
        QCOMPARE(form.config().sampling, std::string("uniform"));
    }

    // The validation share and the patience: in the configuration, the steps per epoch of the
    // images left to train on (exact with the class counts, estimated without), the summary, and
    // the engine's rule that patience needs evaluations.
    void validationAndPatience()
    {
        HyperparameterForm form;
        eng::TrainConfig c = eng::defaultConfigFor("fashion-fast");
        c.evalEvery = 100;
        form.setConfig(c);
        form.setTowers(1);
        auto* validation = form.findChild<QDoubleSpinBox*>(QStringLiteral("validation"));
        auto* patience = form.findChild<QSpinBox*>(QStringLiteral("patience"));
        QVERIFY(validation && patience);
        QCOMPARE(validation->value(), 0.0);
        QCOMPARE(validation->text(), QStringLiteral("none: evaluate on the test set"));
        // Classes of 6,001 and 5,999 images: 10 % holds out 600 of each.
        form.setTrainingSetSize(12000, {6001, 5999});
        QCOMPARE(form.stepsPerEpoch(), 12000 / 64);
        validation->setValue(10);
        QCOMPARE(form.config().validation, 0.1);
        QCOMPARE(form.trainingImages(), std::int64_t(12000 - 1200));
        QCOMPARE(form.stepsPerEpoch(), (12000 - 1200) / 64);
        QString summary;
        for (auto* l : form.findChildren<QLabel*>())
            if (l->text().contains(QStringLiteral("held out"))) summary = l->text();
        QVERIFY2(summary.contains(QStringLiteral("%1 of the %2 training images held out for "
                                                 "validation")
                                      .arg(QLocale().toString(1200), QLocale().toString(12000))),
                 qPrintable(summary));
        // Without the class counts, from the size.
        form.setTrainingSetSize(1000);
        QCOMPARE(form.trainingImages(), std::int64_t(900));

        // The gain that counts as better: points of accuracy, only with a patience.
        auto* minDelta = form.findChild<QDoubleSpinBox*>(QStringLiteral("minDelta"));
        QVERIFY(minDelta);
        QVERIFY(!minDelta->isEnabled());
        QCOMPARE(minDelta->text(), QStringLiteral("any gain"));
        patience->setValue(3);
        QCOMPARE(form.config().patience, 3);
        QVERIFY(minDelta->isEnabled());
        minDelta->setValue(0.2);
        QCOMPARE(form.config().minDelta, 0.002);
        QVERIFY2(form.isValid(), qPrintable(form.error()));
        type(form.field(QStringLiteral("evalEvery")), QStringLiteral("0"));
        QVERIFY(!form.isValid());
        QVERIFY2(form.error().contains(QStringLiteral("patience")), qPrintable(form.error()));
        patience->setValue(0);
        QVERIFY2(form.isValid(), qPrintable(form.error()));

        // Back from a configuration that has them.
        c.validation = 0.2;
        c.patience = 5;
        c.minDelta = 0.005;
        form.setConfig(c);
        QCOMPARE(validation->value(), 20.0);
        QCOMPARE(patience->value(), 5);
        QCOMPARE(minDelta->value(), 0.5);
        QCOMPARE(QString::fromStdString(form.config().toJson()),
                 QString::fromStdString(c.toJson()));
    }
};

QTEST_MAIN(TestHyperparameterForm)
#include "tst_hyperparameter_form.moc"
