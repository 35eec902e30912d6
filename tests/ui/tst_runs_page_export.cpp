// "Export ONNX…" on the Runs page: enabled for a selected checkpoint, it opens the dialog of
// `towers-cli export`'s choices (output file beside the checkpoint, NHWC or NCHW input, the opset
// within the supported range, "Use EMA weights" checked and enabled only for a checkpoint that has
// moving averages); accepted, the file is written off the UI thread through engine::exportOnnx
// (the CLI's function) with those choices, which the file's metadata and the page's message show.
// Replacing an existing file is asked first (no: the dialog stays open); a damaged checkpoint, or
// an existing file not to be replaced, ends in errorOccurred and a message on the page naming the
// file, the file left as it was. (The numbers inside the file are tst_onnx_export's and
// onnx_classify_test_images'; the file dialog is Qt's.) With $TOWERS_TEST_GRABS set to a folder,
// the dialog's picture is saved there, for a look at it.
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>

#include <functional>

#include "app/settings/app_settings.h"
#include "engine/models/registry.h"
#include "engine/train/checkpoint.h"
#include "engine/train/run_directory.h"
#include "ui/pages/runs_page.h"
#include "ui/pages/runs_page_export_dialog.h"
#include "ui_test_support.h"

using towers::ui::ExportOnnxDialog;
using towers::ui::RunsPage;
namespace eng = towers::engine;

namespace {

// A run folder with one real checkpoint of fashion-fast at step 10; with `ema`, it holds moving
// averages (unlike the weights) too.
QString makeRun(const QString& folder, bool ema = false)
{
    const eng::RunDirectory dir(folder.toStdString());
    eng::TrainConfig c;
    c.model = "fashion-fast";
    c.dataset = "fashion-mnist";
    c.steps = 10;
    dir.writeConfig(c.toJson());
    auto model = eng::createModel("fashion-fast", 1);
    eng::CheckpointInfo info;
    info.dataset = "fashion-mnist";
    info.step = 10;
    const auto path = dir.checkpointPath(10);
    eng::NamedTensors averages;
    if (ema)
        for (const eng::Parameter* p : model->parameters()) {
            if (!p->trainable) continue;
            eng::Tensor t = p->value.clone();
            float* v = t.data<float>();
            for (std::int64_t i = 0; i < t.numel(); ++i) v[i] *= 0.5f;
            averages.emplace_back("ema." + p->name, t);
        }
    eng::writeCheckpoint(path, eng::makeCheckpoint(*model, info, std::move(averages)));
    return QString::fromStdString(path.string());
}

QByteArray fileBytes(const QString& path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

// The value of metadata_props `key` as serialized in an ONNX file: StringStringEntryProto's key
// (field 1) then its value (field 2: tag 0x12, a one-byte length for these short values).
bool hasMetadata(const QByteArray& onnx, const QByteArray& key, const QByteArray& value)
{
    QByteArray entry = key;
    entry += char(0x12);
    entry += char(value.size());
    entry += value;
    return onnx.contains(entry);
}

// Runs `answer` on the next message box to show (a modal question blocks the test otherwise).
void answerNextMessageBox(const std::function<void(QMessageBox*)>& answer)
{
    auto* timer = new QTimer;
    timer->setInterval(20);
    QObject::connect(timer, &QTimer::timeout, timer, [timer, answer] {
        if (auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget())) {
            timer->stop();
            timer->deleteLater();
            answer(box);
        }
    });
    timer->start();
}

void saveGrab(QWidget* w, const QString& name)
{
    const QString dir = qEnvironmentVariable("TOWERS_TEST_GRABS");
    if (dir.isEmpty()) return;
    QDir().mkpath(dir);
    w->grab().save(dir + QLatin1Char('/') + name);
}

QPushButton* exportButton(RunsPage& page)
{
    for (auto* b : page.findChildren<QPushButton*>())
        if (b->text().remove(QLatin1Char('&')).startsWith(QLatin1String("Export ONNX"))) return b;
    return nullptr;
}

QString pageText(RunsPage& page)
{
    QString all;
    for (auto* l : page.findChildren<QLabel*>()) all += l->text() + QLatin1Char('\n');
    return all;
}

} // namespace

class TestRunsPageExport : public QObject
{
    Q_OBJECT
private slots:
    void exportsTheSelectedCheckpoint()
    {
        QTemporaryDir root;
        const QString checkpoint = makeRun(root.filePath(QStringLiteral("runs/one")));
        towers::app::AppSettings settings(towers::test::settingsFile(root.path()));
        settings.setRunsDir(root.filePath(QStringLiteral("runs")));
        RunsPage page(settings);
        QSignalSpy refreshed(&page, &RunsPage::refreshed);
        QVERIFY(refreshed.wait(10000));
        QCOMPARE(page.selectedCheckpoint(), checkpoint);
        QPushButton* button = exportButton(page);
        QVERIFY(button);
        QVERIFY(button->isEnabled());
        QVERIFY(!button->menu()); // a dialog, not a menu

        QSignalSpy exported(&page, &RunsPage::exported);
        QSignalSpy failed(&page, &RunsPage::errorOccurred);
        const QString output = root.filePath(QStringLiteral("model.onnx"));
        eng::OnnxExportOptions nchw;
        nchw.layout = eng::OnnxLayout::Nchw;
        page.exportCheckpoint(checkpoint, output, nchw);
        QVERIFY(page.isExporting());
        QVERIFY(!button->isEnabled()); // one export at a time
        QVERIFY(exported.wait(30000));
        QCOMPARE(exported.at(0).at(0).toString(), output);
        QVERIFY(failed.isEmpty());
        QVERIFY(QFileInfo(output).size() > 100000);
        QVERIFY2(pageText(page).contains(output), qPrintable(pageText(page)));
        QVERIFY(button->isEnabled());

        // Not replaced unless asked: an error naming the file, the file unchanged.
        const QDateTime before = QFileInfo(output).lastModified();
        page.exportCheckpoint(checkpoint, output, {});
        QVERIFY(failed.wait(30000));
        QVERIFY2(failed.at(0).at(0).toString().contains(output),
                 qPrintable(failed.at(0).at(0).toString()));
        QCOMPARE(QFileInfo(output).lastModified(), before);
        eng::OnnxExportOptions replace;
        replace.overwrite = true;
        page.exportCheckpoint(checkpoint, output, replace);
        QVERIFY(exported.wait(30000));

        // A damaged checkpoint: the error names it.
        const QString damaged = root.filePath(QStringLiteral("damaged.safetensors"));
        QFile f(damaged);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("not a checkpoint");
        f.close();
        page.exportCheckpoint(damaged, root.filePath(QStringLiteral("d.onnx")), {});
        QVERIFY(failed.wait(30000));
        QVERIFY2(failed.at(1).at(0).toString().contains(damaged),
                 qPrintable(failed.at(1).at(0).toString()));
        QVERIFY2(pageText(page).contains(damaged), qPrintable(pageText(page)));
        QVERIFY(!QFile::exists(root.filePath(QStringLiteral("d.onnx"))));
    }

    // Without moving averages: the dialog's defaults are the CLI's, the EMA box off and disabled.
    void dialogDefaults()
    {
        QTemporaryDir root;
        const QString checkpoint = makeRun(root.filePath(QStringLiteral("runs/plain")));
        QVERIFY(!towers::ui::checkpointHasEma(checkpoint));
        towers::app::AppSettings settings(towers::test::settingsFile(root.path()));
        settings.setRunsDir(root.filePath(QStringLiteral("runs")));
        RunsPage page(settings);
        QSignalSpy refreshed(&page, &RunsPage::refreshed);
        QVERIFY(refreshed.wait(10000));
        QPushButton* button = exportButton(page);
        QVERIFY(button && button->isEnabled());
        button->click();
        auto* dialog = page.findChild<ExportOnnxDialog*>();
        QVERIFY(dialog);
        QVERIFY(dialog->isVisible());
        QVERIFY(dialog->isModal());
        QCOMPARE(dialog->checkpoint(), checkpoint);
        QCOMPARE(dialog->output(),
                 QString::fromStdString(eng::defaultOnnxPath(checkpoint.toStdString()).string()));
        QCOMPARE(dialog->layoutBox()->count(), 2);
        QCOMPARE(eng::OnnxLayout(dialog->layoutBox()->currentData().toInt()),
                 eng::OnnxLayout::Nhwc);
        QCOMPARE(dialog->opsetBox()->minimum(), eng::kOnnxMinOpset);
        QCOMPARE(dialog->opsetBox()->maximum(), eng::onnxMaxOpset());
        QCOMPARE(dialog->opsetBox()->value(), eng::onnxDefaultOpset());
        QVERIFY(!dialog->emaBox()->isEnabled());
        QVERIFY(!dialog->emaBox()->isChecked());
        QVERIFY2(dialog->emaBox()->text().contains(QLatin1String("none")),
                 qPrintable(dialog->emaBox()->text()));
        const eng::OnnxExportOptions o = dialog->options();
        QCOMPARE(o.layout, eng::OnnxLayout::Nhwc);
        QCOMPARE(o.opset, eng::onnxDefaultOpset());
        QVERIFY(!o.useEma);
        QVERIFY(!o.overwrite);
        saveGrab(dialog, QStringLiteral("export-dialog-no-ema.png"));

        // Cancelled: nothing written.
        QSignalSpy exported(&page, &RunsPage::exported);
        dialog->reject();
        QTest::qWait(200);
        QVERIFY(exported.isEmpty());
        QVERIFY(!page.isExporting());
        QVERIFY(!QFile::exists(
            QString::fromStdString(eng::defaultOnnxPath(checkpoint.toStdString()).string())));
    }

    // With moving averages: the box is on; off, the raw weights are exported, at the chosen opset
    // and layout. An existing file is replaced only when the question is answered yes.
    void dialogChoicesReachTheFile()
    {
        QTemporaryDir root;
        const QString checkpoint = makeRun(root.filePath(QStringLiteral("runs/ema")), true);
        QVERIFY(towers::ui::checkpointHasEma(checkpoint));
        towers::app::AppSettings settings(towers::test::settingsFile(root.path()));
        settings.setRunsDir(root.filePath(QStringLiteral("runs")));
        RunsPage page(settings);
        QSignalSpy refreshed(&page, &RunsPage::refreshed);
        QVERIFY(refreshed.wait(10000));
        QSignalSpy exported(&page, &RunsPage::exported);
        QSignalSpy failed(&page, &RunsPage::errorOccurred);

        // Defaults: the moving averages.
        ExportOnnxDialog* dialog = page.openExportDialog();
        QVERIFY(dialog);
        QVERIFY(dialog->emaBox()->isEnabled());
        QVERIFY(dialog->emaBox()->isChecked());
        saveGrab(dialog, QStringLiteral("export-dialog.png"));
        const QString emaFile = root.filePath(QStringLiteral("ema.onnx"));
        dialog->outputEdit()->setText(emaFile);
        dialog->accept();
        QVERIFY(exported.wait(30000));
        QVERIFY2(failed.isEmpty(), qPrintable(failed.value(0).value(0).toString()));
        QVERIFY(hasMetadata(fileBytes(emaFile), "towers.weights", "ema"));
        QVERIFY(hasMetadata(fileBytes(emaFile), "towers.input_layout", "NHWC"));
        QVERIFY2(pageText(page).contains(QLatin1String("moving-average weights")),
                 qPrintable(pageText(page)));

        // Raw weights, NCHW, the oldest opset.
        dialog = page.openExportDialog();
        QVERIFY(dialog);
        const QString rawFile = root.filePath(QStringLiteral("raw.onnx"));
        dialog->outputEdit()->setText(rawFile);
        dialog->emaBox()->setChecked(false);
        dialog->layoutBox()->setCurrentIndex(
            dialog->layoutBox()->findData(int(eng::OnnxLayout::Nchw)));
        dialog->opsetBox()->setValue(eng::kOnnxMinOpset - 1); // clamped to the range
        QCOMPARE(dialog->opsetBox()->value(), eng::kOnnxMinOpset);
        dialog->accept();
        QVERIFY(exported.wait(30000));
        QCOMPARE(exported.size(), 2);
        const QByteArray raw = fileBytes(rawFile);
        QVERIFY(hasMetadata(raw, "towers.weights", "raw"));
        QVERIFY(hasMetadata(raw, "towers.input_layout", "NCHW"));
        QVERIFY2(pageText(page).contains(
                     QStringLiteral("raw weights, opset %1, NCHW input").arg(eng::kOnnxMinOpset)),
                 qPrintable(pageText(page)));
        QVERIFY(raw != fileBytes(emaFile));

        // The same file again: asked first; "No" keeps the dialog open and the file as it was.
        dialog = page.openExportDialog();
        QVERIFY(dialog);
        dialog->outputEdit()->setText(rawFile);
        const QDateTime before = QFileInfo(rawFile).lastModified();
        QString question;
        answerNextMessageBox([&question](QMessageBox* box) {
            question = box->text();
            box->button(QMessageBox::No)->click();
        });
        dialog->accept();
        QVERIFY2(question.contains(rawFile), qPrintable(question));
        QVERIFY(dialog->isVisible());
        QCOMPARE(dialog->result(), int(QDialog::Rejected));
        QVERIFY(!dialog->options().overwrite);
        QTest::qWait(200);
        QCOMPARE(exported.size(), 2);
        QCOMPARE(QFileInfo(rawFile).lastModified(), before);
        // "Yes": replaced, with the moving averages this time.
        answerNextMessageBox([](QMessageBox* box) { box->button(QMessageBox::Yes)->click(); });
        dialog->accept();
        QVERIFY(exported.wait(30000));
        QVERIFY2(failed.isEmpty(), qPrintable(failed.value(0).value(0).toString()));
        QVERIFY(hasMetadata(fileBytes(rawFile), "towers.weights", "ema"));
    }
};

QTEST_MAIN(TestRunsPageExport)
#include "tst_runs_page_export.moc"
