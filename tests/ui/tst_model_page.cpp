// ModelPage: the picker lists every registered model; choosing one shows its layer table and its
// parameter count (checked against the engine's own count); a model file's network joins the
// list, and a file that describes none is refused with the reason; the chosen model saves as a
// model file to start from, and edits in the Edit… window.
#include <QApplication>
#include <QComboBox>
#include <QFile>
#include <QLabel>
#include <QLocale>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTest>
#include <QThreadPool>
#include <QTimer>

#include <fstream>
#include <functional>

#include <sys/resource.h>

#include "engine/cpu/host_memory.h"
#include "engine/models/model_file.h"
#include "engine/models/registry.h"
#include "engine/train/memory_need.h"
#include "model_files.h"
#include "ui/models/layer_table_model.h"
#include "ui/pages/model_file_editor.h"
#include "ui/pages/model_page.h"
#include "ui/widgets/hyperparameter_form.h"
#include "ui_test_support.h"

using towers::ui::ModelFileEditor;
using towers::ui::ModelPage;

namespace {

// The table's rows for a layer table: every row and, under it, its children's.
int shownRows(const std::vector<towers::engine::LayerRow>& rows)
{
    int n = 0;
    for (const auto& r : rows) n += 1 + shownRows(r.children);
    return n;
}

} // namespace

namespace {
// A network whose check takes a moment (a tenth of a second: 1,000 convolutions, each made and
// sized; a few large layers no longer do, their weights taking no time until written).
QString slowNet()
{
    QString layers;
    for (int i = 0; i < 1000; ++i)
        layers += QStringLiteral(R"({"type": "conv2d", "filters": 64}, )");
    return QStringLiteral(
               R"({"name": "slow", "input": [28, 28, 1], "layers": [%1{"type": "flatten"},
 {"type": "linear", "units": 32}, {"type": "linear", "units": "classes"}]})")
        .arg(layers);
}
const QString kSlowNet = slowNet();

// Waits for the editor's check (a build runs on a thread of its own) to answer.
bool waitChecked(const towers::ui::ModelFileEditor& editor)
{
    return QTest::qWaitFor([&editor] { return !editor.isChecking(); }, 20000);
}

QPushButton* editButton(ModelPage& page)
{
    for (auto* b : page.findChildren<QPushButton*>())
        if (b->text() == QStringLiteral("Edit…")) return b;
    return nullptr;
}

// Clicks `edit` and runs `act` on the Edit… window once it is open (exec() waits in its own
// loop), then cancels it; whether the window opened.
bool actInEditor(QPushButton* edit, const std::function<void(ModelFileEditor&)>& act)
{
    bool done = false;
    QTimer::singleShot(0, [&] {
        auto* editor = qobject_cast<ModelFileEditor*>(QApplication::activeModalWidget());
        if (editor) act(*editor);
        done = editor;
        if (editor) editor->done(QDialog::Rejected);
    });
    QTest::mouseClick(edit, Qt::LeftButton);
    return done;
}

} // namespace

class TestModelPage : public QObject
{
    Q_OBJECT
private slots:
    // The counts read as English writes them ("1 tower", "2 towers"), as in towers.
    void initTestCase() { QVERIFY(towers::test::installPluralForms()); }

    // No editor's build outlives a test (nor the process's static objects).
    void cleanup() { QTRY_COMPARE_WITH_TIMEOUT(ModelFileEditor::buildsRunning(), 0, 20000); }

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
            QCOMPARE(page.layerModel()->rowCount(), shownRows(model->layerTable()));
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

    // At the page's narrowest, the form's column follows the form's own width as its texts
    // change (each schedule's constants, a large global batch refused at its field): never cut
    // off.
    void formColumnFollowsTheForm()
    {
        ModelPage page;
        page.show();
        QVERIFY(QTest::qWaitForWindowExposed(&page));
        auto* scroll = page.findChild<QScrollArea*>();
        QVERIFY(scroll && scroll->widget());
        auto fits = [&] {
            page.resize(page.minimumSizeHint().width(), 700);
            QTRY_COMPARE(page.width(), page.minimumSizeHint().width());
            QTRY_VERIFY(scroll->widget()->width() <= scroll->viewport()->width());
            QVERIFY2(scroll->widget()->width() >= scroll->widget()->minimumSizeHint().width(),
                     qPrintable(QStringLiteral("%1 < %2")
                                    .arg(scroll->widget()->width())
                                    .arg(scroll->widget()->minimumSizeHint().width())));
        };
        fits();
        auto* schedule = page.form()->findChildren<QComboBox*>().at(1);
        for (int i = 0; i < schedule->count(); ++i) {
            schedule->setCurrentIndex(i);
            fits();
        }
        page.form()->setTowers(64);
        page.form()->setTrainingSetSize(100);
        page.form()->findChild<QSpinBox*>(QStringLiteral("batch"))->setValue(65536);
        QVERIFY(!page.form()->isValid());
        fits();
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

    // The memory row follows the network, the towers, the batch and the optimizer (the engine's
    // estimate), and says in red when a run could not start; GPU towers' is a tower's on its GPU.
    void memoryRowFollowsTheRun()
    {
        ModelPage page;
        page.setModelName(QStringLiteral("fashion-fast"));
        page.form()->setTowers(2);
        page.form()->findChild<QSpinBox*>(QStringLiteral("batch"))->setValue(100);
        const auto model = towers::engine::buildModel("fashion-fast", 10);
        const auto need = towers::engine::hostMemoryNeed(
            *model, 2, 100, page.form()->config().optimizer.kind, false);
        QVERIFY2(page.memoryText().startsWith(
                     QStringLiteral("at least %1 for 2 towers × 100")
                         .arg(QString::fromStdString(towers::engine::cpu::byteText(need.floor())))),
                 qPrintable(page.memoryText()));
        page.form()->findChild<QSpinBox*>(QStringLiteral("batch"))->setValue(20000);
        QVERIFY2(page.memoryText().contains(QStringLiteral("2 towers × 20000")),
                 qPrintable(page.memoryText()));
        page.form()->setTowers(1);
        QVERIFY2(page.memoryText().contains(QStringLiteral(" for 1 tower × 20000")),
                 qPrintable(page.memoryText()));

        // 1 GiB of weights on 512 towers: more than any machine here has.
        std::optional<towers::engine::ModelInfo> read;
        try {
            read = towers::engine::modelFromDefinition(
                R"({"name": "huge-page", "input": [128, 128, 1], "layers": [{"type": "flatten"},
                {"type": "linear", "units": 16384}, {"type": "linear", "units": "classes"}]})",
                "huge.json");
        } catch (const std::bad_alloc&) {
            QSKIP("the system does not set 1 GiB aside unwritten here (no overcommit, or "
                  "ulimit -v)");
        }
        const auto& huge = towers::engine::keepModel(*read);
        page.setModel(huge);
        page.form()->setTowers(512);
        page.form()->findChild<QSpinBox*>(QStringLiteral("batch"))->setValue(16);
        QVERIFY2(page.memoryText().contains(QStringLiteral(": more than the ")) &&
                     page.memoryText().contains(QStringLiteral("fewer towers, a smaller batch or "
                                                               "a smaller network would fit")),
                 qPrintable(page.memoryText()));
        // GPU towers: a tower's part on its GPU (the run asks each GPU what is free).
        page.setGpuTowers(true);
        const auto form = page.form()->config();
        const auto gpu = towers::engine::gpuMemoryNeed(
            towers::engine::networkBytes(*towers::engine::buildModel(huge, 10)), 1, 16,
            form.optimizer.kind, 0, 0);
        QCOMPARE(page.memoryText(),
                 QStringLiteral("at least %1 on a GPU for each tower × 16")
                     .arg(QString::fromStdString(towers::engine::cpu::byteText(gpu.floor()))));
        page.setGpuTowers(false);
        QVERIFY(page.memoryText().contains(QStringLiteral("more than the ")));
    }

    // Towers that accumulate their gradients hold their sum besides (engine::addAccumulation, as
    // the run's start counts it): the row and its tooltip say so, on CPU and GPU towers.
    void memoryRowCountsAccumulatedGradients()
    {
        namespace eng = towers::engine;
        ModelPage page;
        page.setModelName(QStringLiteral("fashion-fast"));
        page.form()->setTowers(2);
        page.form()->findChild<QSpinBox*>(QStringLiteral("batch"))->setValue(1);
        auto* accumulate = page.form()->findChild<QSpinBox*>(QStringLiteral("accumulate"));
        QVERIFY(accumulate);
        const auto memoryLabel = [&page]() -> QLabel* {
            for (auto* l : page.findChildren<QLabel*>())
                if (l->text() == page.memoryText()) return l;
            return nullptr;
        };
        const auto bytes = [](std::int64_t n) {
            return QString::fromStdString(eng::cpu::byteText(n));
        };
        const QString before = page.memoryText();
        QVERIFY(!memoryLabel()->toolTip().contains(QStringLiteral("gradients accumulated")));
        accumulate->setValue(2);
        const auto config = page.form()->config();
        const eng::NetworkBytes network = eng::networkBytes(*eng::buildModel("fashion-fast", 10));
        auto need = eng::hostMemoryNeed(network, 2, 1, config.optimizer.kind, config.emaDecay > 0);
        const std::int64_t plain = need.floor();
        eng::addAccumulation(need, network, 2);
        QCOMPARE(need.floor(), plain + 2 * network.trainable); // a sum on each tower
        QVERIFY2(page.memoryText().startsWith(
                     QStringLiteral("at least %1 for 2 towers × 1").arg(bytes(need.floor()))),
                 qPrintable(page.memoryText()));
        QVERIFY2(page.memoryText() != before, qPrintable(before));
        QVERIFY2(memoryLabel()->toolTip().contains(
                     QStringLiteral("gradients accumulated %1").arg(bytes(2 * network.trainable))),
                 qPrintable(memoryLabel()->toolTip()));
        // A GPU tower's: its own sum.
        page.setGpuTowers(true);
        auto gpu = eng::gpuMemoryNeed(network, 1, 1, config.optimizer.kind, 0, 0);
        eng::addAccumulation(gpu, network, 2);
        QCOMPARE(page.memoryText(),
                 QStringLiteral("at least %1 on a GPU for each tower × 1").arg(bytes(gpu.floor())));
        QVERIFY2(memoryLabel()->toolTip().contains(
                     QStringLiteral("gradients accumulated %1").arg(bytes(network.trainable))),
                 qPrintable(memoryLabel()->toolTip()));
        accumulate->setValue(1);
        QVERIFY(!memoryLabel()->toolTip().contains(QStringLiteral("gradients accumulated")));
    }

    // Under an address-space limit (ulimit -v), the row counts what the run's threads set aside
    // (stacks, malloc's arenas) as the run's start does: a run the limit leaves room for without
    // them, but not with them, is said in red, as train would refuse it.
    void memoryRowCountsTheThreadsUnderUlimitV()
    {
        ModelPage page;
        page.setModelName(QStringLiteral("fashion-fast"));
        page.form()->setTowers(2);
        auto* batch = page.form()->findChild<QSpinBox*>(QStringLiteral("batch"));
        batch->setValue(100);
        const auto config = page.form()->config();
        const auto need =
            towers::engine::hostMemoryNeed(*towers::engine::buildModel("fashion-fast", 10), 2, 101,
                                           config.optimizer.kind, config.emaDecay > 0);
        const std::int64_t threads = towers::engine::cpu::threadsAddressSpace(
            2 * config.resolvedThreadsPerTower() + towers::engine::kThreadsBesidesTowers);
        QVERIFY(threads > 0);
        rlimit before{};
        QVERIFY(::getrlimit(RLIMIT_AS, &before) == 0);
        if (before.rlim_cur != RLIM_INFINITY)
            QSKIP("an address-space limit (ulimit -v) is set here already");
        // What is mapped now, then a limit that leaves the run's memory and half the threads'.
        rlimit wide = before;
        wide.rlim_cur = std::min(rlim_t(1) << 46, before.rlim_max);
        QVERIFY(::setrlimit(RLIMIT_AS, &wide) == 0);
        const auto room = towers::engine::cpu::addressSpaceRoom();
        QVERIFY(room);
        const std::int64_t mapped = std::int64_t(wide.rlim_cur) - room->bytes;
        rlimit tight = before;
        tight.rlim_cur = rlim_t(mapped + need.floor() + threads / 2);
        QVERIFY(::setrlimit(RLIMIT_AS, &tight) == 0);
        batch->setValue(101); // worked out again under the limit
        const QString text = page.memoryText();
        QVERIFY(::setrlimit(RLIMIT_AS, &before) == 0);
        QVERIFY2(text.contains(QStringLiteral(": more than the ")) &&
                     text.contains(QStringLiteral("ulimit -v")),
                 qPrintable(text));
        auto withThreads = need;
        withThreads.threads = threads;
        QVERIFY2(text.startsWith(QStringLiteral("at least %1 for 2 towers × 101")
                                     .arg(QString::fromStdString(
                                         towers::engine::cpu::byteText(withThreads.floor())))),
                 qPrintable(text));
        batch->setValue(100); // no limit: no red
        QVERIFY2(!page.memoryText().contains(QStringLiteral("more than the")),
                 qPrintable(page.memoryText()));
    }

    void opensAModelFile()
    {
        QTemporaryDir dir;
        const auto write = [&](const char* name, const std::string& text) {
            const QString path = dir.filePath(QLatin1String(name));
            std::ofstream(path.toStdString()) << text;
            return path;
        };
        ModelPage page;
        auto* combo = page.findChild<QComboBox*>();
        const int builtIn = combo->count();
        QSignalSpy changed(&page, &ModelPage::modelChanged);
        QString error;
        QVERIFY2(page.openModelFile(write("net.json", towers::test::everyLayerDefinition("mine")),
                                    &error),
                 qPrintable(error));
        QCOMPARE(combo->count(), builtIn + 1);
        QCOMPARE(combo->currentText(), QStringLiteral("mine (model file)"));
        QCOMPARE(page.modelName(), QStringLiteral("mine"));
        QVERIFY(!page.model().definition.empty());
        QCOMPARE(changed.count(), 1);
        const auto model = page.model().build(10);
        // The residual block's two layers under it; the concat's three branches, each with its
        // layers, under it.
        QCOMPARE(page.layerModel()->rowCount(), int(model->layerTable().size()) + 2 + 3 + 1 + 2);
        QCOMPARE(page.layerModel()->rowCount(), shownRows(model->layerTable()));
        const auto* layers = page.layerModel();
        int tower = -1;
        for (int r = 0; r < layers->rowCount(); ++r)
            if (layers->index(r, 0).data().toString().trimmed() == QStringLiteral("tower"))
                tower = r;
        QVERIFY(tower > 0);
        QCOMPARE(layers->depth(tower), 2); // concat1, branch 2, tower
        QCOMPARE(layers->index(tower - 2, 0).data().toString().trimmed(),
                 QStringLiteral("branch 2"));
        QCOMPARE(layers->index(tower, 2).data().toString(), QStringLiteral("3 × 3 × 3"));
        QCOMPARE(page.totalParameters(), qint64(model->parameterCount()));
        bool said = false;
        for (auto* l : page.findChildren<QLabel*>())
            said = said || l->text().contains(QStringLiteral("every layer type"));
        QVERIFY(said);

        // Back to a built-in model and to the file's network by name.
        page.setModelName(QStringLiteral("fashion-fast"));
        QCOMPARE(page.model().definition, std::string());
        page.setModelName(QStringLiteral("mine"));
        QCOMPARE(page.modelName(), QStringLiteral("mine"));

        // Another version of the file takes the place of the first.
        QVERIFY(page.openModelFile(write("net2.json", towers::test::fashionFastDefinition("mine")),
                                   &error));
        QCOMPARE(combo->count(), builtIn + 1);
        QCOMPARE(page.model().inputShape, (towers::engine::Shape{28, 28, 1}));
        QCOMPARE(page.layerModel()->rowCount(), 10);

        // A file that describes no network: refused, naming the file and the layer; the choice
        // stays.
        QVERIFY(!page.openModelFile(
            write("bad.json",
                  R"({"name": "bad", "input": [8, 8, 1], "layers": [{"type": "flatten"}]})"),
            &error));
        QVERIFY2(error.contains(dir.filePath(QStringLiteral("bad.json")) +
                                QStringLiteral(": layers[0] (flatten): the last layer must be")),
                 qPrintable(error));
        QVERIFY(!page.openModelFile(dir.filePath(QStringLiteral("none.json")), &error));
        QVERIFY2(error.contains(QStringLiteral("cannot read the model file")), qPrintable(error));
        QCOMPARE(page.modelName(), QStringLiteral("mine"));
        QCOMPARE(combo->count(), builtIn + 1);
    }

    // A built-in model saved as a model file becomes the chosen network, named after the file,
    // the same layers; a file that cannot be written leaves the choice as it was.
    void savesAModelFile()
    {
        QTemporaryDir dir;
        ModelPage page;
        auto* combo = page.findChild<QComboBox*>();
        const int builtIn = combo->count();
        page.setModelName(QStringLiteral("cifar10-resnet"));
        const int rows = page.layerModel()->rowCount();
        const qint64 parameters = page.totalParameters();
        QSignalSpy logged(&page, &ModelPage::logMessage);
        QString error;
        const QString path = dir.filePath(QStringLiteral("wide.json"));
        QVERIFY2(page.saveModelFile(path, &error), qPrintable(error));
        QVERIFY(QFile::exists(path));
        QCOMPARE(combo->count(), builtIn + 1);
        QCOMPARE(combo->currentText(), QStringLiteral("wide (model file)"));
        QVERIFY(!page.model().definition.empty());
        QCOMPARE(page.layerModel()->rowCount(), rows);
        QCOMPARE(page.totalParameters(), parameters);
        QCOMPARE(logged.count(), 1);
        QVERIFY2(logged.first().first().toString().contains(path),
                 qPrintable(logged.first().first().toString()));

        // Saved again from the file's network, over the file: still that network.
        QVERIFY2(page.saveModelFile(path, &error), qPrintable(error));
        QCOMPARE(combo->count(), builtIn + 1);
        QCOMPARE(page.modelName(), QStringLiteral("wide"));

        page.setModelName(QStringLiteral("fashion-fast"));
        QVERIFY(!page.saveModelFile(dir.filePath(QStringLiteral("none/x.json")), &error));
        QVERIFY2(error.contains(QStringLiteral("cannot write")), qPrintable(error));
        QCOMPARE(page.modelName(), QStringLiteral("fashion-fast"));
        QCOMPARE(logged.count(), 2);
        // The buttons are there for the user.
        bool found = false;
        for (auto* b : page.findChildren<QPushButton*>())
            found = found || b->text() == QStringLiteral("Save as model file…");
        QVERIFY(found);
    }

    // The Edit… window: a built-in model as a model file's text, checked as it is typed (the
    // mistake named, "Use" disabled), the edited network chosen; saved, its file is remembered
    // and opens again as written.
    void editsANetwork()
    {
        QTemporaryDir dir;
        ModelPage page;
        page.setModelName(QStringLiteral("fashion-fast"));
        towers::ui::ModelFileEditor editor(page.model(), page.modelFilePath());
        QVERIFY(waitChecked(editor));
        QVERIFY2(editor.status().startsWith(
                     QStringLiteral("✓ my-fashion-fast: 10 layers, %1 trainable parameters")
                         .arg(QLocale().toString(qint64(421738)))),
                 qPrintable(editor.status()));
        QVERIFY(editor.network());
        QVERIFY(!editor.isModified());
        QPushButton* use = nullptr;
        for (auto* b : editor.findChildren<QPushButton*>())
            if (b->text() == QStringLiteral("Use this network")) use = b;
        QVERIFY(use && use->isEnabled());

        const QString text = editor.text();
        QCOMPARE(text.count(QStringLiteral("\"filters\": 32")), 1);
        editor.setText(QString(text).replace(QStringLiteral("\"filters\": 32"),
                                             QStringLiteral("\"filters\": 0")));
        QVERIFY(waitChecked(editor));
        QVERIFY(!editor.network());
        QVERIFY(!use->isEnabled());
        QVERIFY2(editor.status().contains(QStringLiteral(
                     "the network: layers[0] (conv1): filters: expected an integer from 1")),
                 qPrintable(editor.status()));
        // The layer's line is marked (its fields are on one line).
        const int conv1 = int(text.left(text.indexOf(QStringLiteral("\"filters\": 32")))
                                  .count(QLatin1Char('\n'))) +
                          1;
        QCOMPARE(editor.mistakeLine(), conv1);
        QCOMPARE(editor.editor()->extraSelections().size(), 1);
        // Typing checks after a pause.
        editor.editor()->setPlainText(QStringLiteral("{\"name\": "));
        QTRY_VERIFY2(editor.status().contains(QStringLiteral("not valid JSON")),
                     qPrintable(editor.status()));
        QVERIFY(editor.isModified());
        // A JSON mistake's line is marked.
        editor.setText(QStringLiteral("{\n  \"name\": \"x\",\n  \"layers\": [,]\n}"));
        QVERIFY(waitChecked(editor));
        QCOMPARE(editor.mistakeLine(), 3);
        QCOMPARE(editor.editor()->extraSelections().size(), 1);
        QCOMPARE(editor.editor()->extraSelections().first().cursor.blockNumber(), 2);

        editor.setText(QString(text).replace(QStringLiteral("\"filters\": 32"),
                                             QStringLiteral("\"filters\": 16")));
        QVERIFY(waitChecked(editor));
        QVERIFY(use->isEnabled());
        QCOMPARE(editor.mistakeLine(), 0);
        QVERIFY(editor.editor()->extraSelections().isEmpty());
        page.useEdited(editor);
        QCOMPARE(page.model().name, std::string("my-fashion-fast"));
        QCOMPARE(page.findChild<QComboBox*>()->currentText(),
                 QStringLiteral("my-fashion-fast (model file)"));
        QCOMPARE(page.layerModel()->rowCount(), 10);
        QCOMPARE(page.model().build(10)->parameters().front()->value.shape(),
                 (towers::engine::Shape{16, 1, 3, 3}));
        QCOMPARE(page.modelFilePath(), QString()); // not saved: no file

        QString error;
        QVERIFY(!editor.saveAs(dir.filePath(QStringLiteral("no/net.json")), &error));
        QVERIFY2(error.contains(QStringLiteral("cannot write")), qPrintable(error));
        const QString path = dir.filePath(QStringLiteral("net.json"));
        QVERIFY2(editor.saveAs(path, &error), qPrintable(error));
        QVERIFY(!editor.isModified());
        QFile f(path);
        QVERIFY(f.open(QIODevice::ReadOnly));
        QCOMPARE(QString::fromUtf8(f.readAll()), editor.text());
        page.useEdited(editor);
        QCOMPARE(page.modelFilePath(), path);
        // Edited again: the file's own text, and Save writes there.
        towers::ui::ModelFileEditor again(page.model(), page.modelFilePath());
        QCOMPARE(again.text(), editor.text());
        QCOMPARE(again.path(), path);
    }

    // Save, then Cancel, in the Edit… window: the network is not chosen (Cancel: "do not use
    // it"), the log says where it was saved, and the next Edit… of that network opens the saved
    // file, its text and its path (it showed the network's old text, with no file, as if the
    // saved work were lost).
    void savedThenCancelledEditReopens()
    {
        QTemporaryDir dir;
        ModelPage page;
        page.setModelName(QStringLiteral("fashion-fast"));
        QSignalSpy log(&page, &ModelPage::logMessage);
        QSignalSpy changed(&page, &ModelPage::modelChanged);
        QPushButton* edit = editButton(page);
        QVERIFY(edit);
        const QString path = dir.filePath(QStringLiteral("mine.json"));
        const auto inEditor = [edit](const std::function<void(ModelFileEditor&)>& act) {
            return actInEditor(edit, act);
        };
        QString edited;
        QVERIFY(inEditor([&](ModelFileEditor& editor) {
            QVERIFY(waitChecked(editor));
            edited =
                QString(editor.text())
                    .replace(QStringLiteral("\"filters\": 32"), QStringLiteral("\"filters\": 16"));
            editor.setText(edited);
            QString error;
            QVERIFY2(editor.saveAs(path, &error), qPrintable(error));
            QVERIFY(waitChecked(editor));
        }));
        QCOMPARE(page.modelName(), QStringLiteral("fashion-fast")); // not chosen
        QVERIFY(changed.isEmpty());
        QCOMPARE(page.modelFilePath(), QString());
        QVERIFY(!log.isEmpty());
        const QString said = log.last().at(0).toString();
        QVERIFY2(said.contains(QStringLiteral("saved to %1 and not chosen").arg(path)),
                 qPrintable(said));

        QString reopened, reopenedPath;
        QVERIFY(inEditor([&](ModelFileEditor& editor) {
            reopened = editor.text();
            reopenedPath = editor.path();
            QVERIFY(!editor.isModified());
        }));
        QCOMPARE(reopenedPath, path);
        QCOMPARE(reopened, edited);
        QCOMPARE(page.modelName(), QStringLiteral("fashion-fast"));

        // Chosen from there ("Use this network"): the file is the chosen network's own.
        bool used = false;
        QTimer::singleShot(0, [&] {
            auto* editor = qobject_cast<ModelFileEditor*>(QApplication::activeModalWidget());
            if (!editor || !waitChecked(*editor)) return;
            for (auto* b : editor->findChildren<QPushButton*>())
                if (b->text() == QStringLiteral("Use this network")) b->click();
            used = true;
        });
        QTest::mouseClick(edit, Qt::LeftButton);
        QVERIFY(used);
        QCOMPARE(page.modelName(), QStringLiteral("my-fashion-fast"));
        QCOMPARE(page.modelFilePath(), path);
    }

    // The saved file chosen another way (Open model file…): Edit… of the first network shows its
    // own text again, not that file's.
    void savedFileOpenedElsewhereIsNoLongerReopened()
    {
        QTemporaryDir dir;
        ModelPage page;
        page.setModelName(QStringLiteral("fashion-fast"));
        QPushButton* edit = editButton(page);
        QVERIFY(edit);
        const QString path = dir.filePath(QStringLiteral("mine.json"));
        const auto inEditor = [edit](const std::function<void(ModelFileEditor&)>& act) {
            return actInEditor(edit, act);
        };
        QString builtIn;
        QVERIFY(inEditor([&](ModelFileEditor& editor) {
            QVERIFY(waitChecked(editor));
            builtIn = editor.text();
            editor.setText(QString(builtIn).replace(QStringLiteral("\"filters\": 32"),
                                                    QStringLiteral("\"filters\": 16")));
            QString error;
            QVERIFY2(editor.saveAs(path, &error), qPrintable(error));
            QVERIFY(waitChecked(editor));
        }));
        QString error;
        QVERIFY2(page.openModelFile(path, &error), qPrintable(error));
        QCOMPARE(page.modelName(), QStringLiteral("my-fashion-fast"));
        page.setModelName(QStringLiteral("fashion-fast"));
        QString text, textPath;
        QVERIFY(inEditor([&](ModelFileEditor& editor) {
            text = editor.text();
            textPath = editor.path();
        }));
        QCOMPARE(textPath, QString());
        QCOMPARE(text, builtIn);
    }

    // Typing checks off the GUI thread: a mistake in the text at once, a network's layers and
    // parameters (which take building it: seconds and gigabytes for a large one, which froze the
    // window) once the build answers, "Use" waiting for it; an answer for text changed since is
    // dropped.
    void typingBuildsTheNetworkInTheBackground()
    {
        ModelPage page;
        page.setModelName(QStringLiteral("fashion-fast"));
        towers::ui::ModelFileEditor editor(page.model(), page.modelFilePath());
        QVERIFY(waitChecked(editor));
        QPushButton* use = nullptr;
        for (auto* b : editor.findChildren<QPushButton*>())
            if (b->text() == QStringLiteral("Use this network")) use = b;
        QVERIFY(use);
        const QString text = editor.text();
        const QString sixteen = QString(text).replace(QStringLiteral("\"filters\": 32"),
                                                      QStringLiteral("\"filters\": 16"));
        editor.editor()->setPlainText(sixteen);
        editor.checkInBackground();
        QCOMPARE(editor.status(), QStringLiteral("Checking…"));
        QVERIFY(!use->isEnabled());
        QVERIFY(!editor.network());
        // Changed while the build runs: the first answer is not shown, the second is.
        const QString eight = QString(text).replace(QStringLiteral("\"filters\": 32"),
                                                    QStringLiteral("\"filters\": 8"));
        editor.editor()->setPlainText(eight);
        editor.checkInBackground();
        QTRY_VERIFY2(editor.status().startsWith(QStringLiteral("✓")), qPrintable(editor.status()));
        QVERIFY(use->isEnabled());
        QCOMPARE(editor.network()->build(10)->parameters().front()->value.shape(),
                 (towers::engine::Shape{8, 1, 3, 3}));
        QTest::qWait(400); // nothing later overwrites it
        QCOMPARE(editor.network()->build(10)->parameters().front()->value.shape(),
                 (towers::engine::Shape{8, 1, 3, 3}));
        // A mistake: named once its check answers.
        editor.editor()->setPlainText(QStringLiteral("{\"name\": "));
        editor.checkInBackground();
        QVERIFY(waitChecked(editor));
        QVERIFY2(editor.status().contains(QStringLiteral("not valid JSON")),
                 qPrintable(editor.status()));
        QVERIFY(!use->isEnabled());
        // "Use" clicked right after typing (before the pause's check): the window takes the
        // network once its check, off the GUI thread, answers.
        editor.setText(eight);
        QVERIFY(waitChecked(editor)); // checked: "Use" enabled
        QVERIFY(use->isEnabled());
        editor.editor()->setPlainText(sixteen);
        QVERIFY(use->isEnabled()); // still, until the pause's check
        QCOMPARE(editor.result(), int(QDialog::Rejected));
        use->click();
        QCOMPARE(editor.result(), int(QDialog::Rejected));
        QTRY_COMPARE(editor.result(), int(QDialog::Accepted));
        QCOMPARE(editor.network()->build(10)->parameters().front()->value.shape(),
                 (towers::engine::Shape{16, 1, 3, 3}));
    }

    // Opening a model file's network in the editor, and saving while its check runs, check it
    // off the GUI thread as typing does (a large network held the window for seconds). A text
    // with a mistake, saved, is checked again: its mistake names the file.
    void opensAndSavesWithoutBuildingOnTheGuiThread()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("slow.json"));
        {
            QFile f(path);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(kSlowNet.toUtf8());
        }
        ModelPage page;
        QString error;
        QVERIFY2(page.openModelFile(path, &error), qPrintable(error));
        ModelFileEditor editor(page.model(), page.modelFilePath());
        QCOMPARE(editor.path(), path);
        QCOMPARE(editor.text(), kSlowNet);
        // No event handled yet: only a check off the GUI thread leaves it unanswered.
        QCOMPARE(editor.status(), QStringLiteral("Checking…"));
        QVERIFY(editor.isChecking());
        QVERIFY(!editor.network());
        QVERIFY2(editor.saveAs(dir.filePath(QStringLiteral("copy.json")), &error),
                 qPrintable(error));
        QCOMPARE(editor.status(), QStringLiteral("Checking…"));
        QVERIFY(waitChecked(editor));
        QVERIFY2(editor.status().startsWith(QStringLiteral("✓ slow: ")),
                 qPrintable(editor.status()));
        QVERIFY(editor.network());

        editor.setText(QString(kSlowNet).replace(QStringLiteral(R"("units": 32})"),
                                                 QStringLiteral(R"("units": 0})")));
        QVERIFY(waitChecked(editor));
        QVERIFY2(editor.status().startsWith(
                     QStringLiteral("✗ %1: ").arg(dir.filePath(QStringLiteral("copy.json")))),
                 qPrintable(editor.status()));
        const QString broken = dir.filePath(QStringLiteral("broken.json"));
        QVERIFY2(editor.saveAs(broken, &error), qPrintable(error));
        QVERIFY(waitChecked(editor));
        QVERIFY2(editor.status().startsWith(QStringLiteral("✗ %1: ").arg(broken)),
                 qPrintable(editor.status()));
    }

    // A check's build runs on a thread of its own, not in the global thread pool, which the
    // application waits for as it quits (a large network's build held the closed window's
    // process for seconds); the editor closed first, the build's answer is dropped.
    void aCheckDoesNotHoldUpQuitting()
    {
        const auto slow = towers::engine::modelFromDefinition(kSlowNet.toStdString(), "slow");
        auto* editor = new ModelFileEditor(slow, QString());
        QCOMPARE(editor->status(), QStringLiteral("Checking…"));
        QCOMPARE(ModelFileEditor::buildsRunning(), 1);
        QCOMPARE(QThreadPool::globalInstance()->activeThreadCount(), 0);
        delete editor; // closed while it builds
        QTRY_COMPARE_WITH_TIMEOUT(ModelFileEditor::buildsRunning(), 0, 20000);
        QTest::qWait(50); // its answer, posted or not, reaches no one

        // The same with the window open: the answer arrives.
        ModelFileEditor open(slow, QString());
        QVERIFY(waitChecked(open));
        QVERIFY2(open.status().startsWith(QStringLiteral("✓ slow: ")), qPrintable(open.status()));
    }
};

QTEST_MAIN(TestModelPage)
#include "tst_model_page.moc"
