// "Export ONNX…" on the Runs page: enabled for a selected checkpoint, writes the file off the UI
// thread through engine::exportOnnx (the CLI's function) and says so on the page; a damaged
// checkpoint, or an existing file not to be replaced, ends in errorOccurred and a message on the
// page naming the file, the file left as it was. (The numbers inside the file are
// tst_onnx_export's; the file dialog is Qt's.)
#include <QFile>
#include <QFileInfo>
#include <QLabel>
#include <QMenu>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include "app/settings/app_settings.h"
#include "engine/models/registry.h"
#include "engine/train/checkpoint.h"
#include "engine/train/run_directory.h"
#include "ui/pages/runs_page.h"
#include "ui_test_support.h"

using towers::ui::RunsPage;
namespace eng = towers::engine;

namespace {

// A run folder with one real checkpoint of fashion-fast at step 10.
QString makeRun(const QString& folder)
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
    eng::writeCheckpoint(path, eng::makeCheckpoint(*model, info));
    return QString::fromStdString(path.string());
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
        QVERIFY(button->menu());
        QCOMPARE(button->menu()->actions().size(), 2); // NHWC, NCHW

        QSignalSpy exported(&page, &RunsPage::exported);
        QSignalSpy failed(&page, &RunsPage::errorOccurred);
        const QString output = root.filePath(QStringLiteral("model.onnx"));
        page.exportCheckpoint(checkpoint, output, eng::OnnxLayout::Nchw, false);
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
        page.exportCheckpoint(checkpoint, output, eng::OnnxLayout::Nhwc, false);
        QVERIFY(failed.wait(30000));
        QVERIFY2(failed.at(0).at(0).toString().contains(output),
                 qPrintable(failed.at(0).at(0).toString()));
        QCOMPARE(QFileInfo(output).lastModified(), before);
        page.exportCheckpoint(checkpoint, output, eng::OnnxLayout::Nhwc, true);
        QVERIFY(exported.wait(30000));

        // A damaged checkpoint: the error names it.
        const QString damaged = root.filePath(QStringLiteral("damaged.safetensors"));
        QFile f(damaged);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("not a checkpoint");
        f.close();
        page.exportCheckpoint(damaged, root.filePath(QStringLiteral("d.onnx")),
                              eng::OnnxLayout::Nhwc, false);
        QVERIFY(failed.wait(30000));
        QVERIFY2(failed.at(1).at(0).toString().contains(damaged),
                 qPrintable(failed.at(1).at(0).toString()));
        QVERIFY2(pageText(page).contains(damaged), qPrintable(pageText(page)));
        QVERIFY(!QFile::exists(root.filePath(QStringLiteral("d.onnx"))));
    }
};

QTEST_MAIN(TestRunsPageExport)
#include "tst_runs_page_export.moc"
