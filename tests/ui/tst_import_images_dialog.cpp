// "Import images…": the dialog scans the chosen folder (classes, counts, files left out), names
// the dataset after it, imports on a worker thread and is accepted with the result; a name that is
// taken is refused in the dialog, which stays open; Cancel during an import leaves nothing. The
// Data page then lists the imported dataset, loads it and offers no download for it.
#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDir>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QImage>
#include <QLabel>
#include <QLineEdit>
#include <QMimeData>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTest>

#include "app/settings/app_settings.h"
#include "test_files.h"
#include "ui/pages/data_page.h"
#include "ui/pages/import_images_dialog.h"
#include "ui_test_support.h"

using towers::ui::DataPage;
using towers::ui::ImportImagesDialog;
namespace tt = towers::test;

namespace {

void writeImages(const QString& dir, int count, const QColor& colour)
{
    QDir().mkpath(dir);
    for (int i = 0; i < count; ++i) {
        QImage img(40, 40, QImage::Format_RGB888);
        img.fill(colour.darker(100 + 10 * i));
        QVERIFY(img.save(dir + QStringLiteral("/%1.png").arg(i)));
    }
}

// setSource lists the folder on a worker thread: wait for it.
void waitScanned(ImportImagesDialog& d)
{
    QTRY_VERIFY_WITH_TIMEOUT(!d.isScanning(), 20000);
}

QPushButton* importButton(ImportImagesDialog& d)
{
    return d.findChild<QDialogButtonBox*>()->button(QDialogButtonBox::Ok);
}

} // namespace

class TestImportImagesDialog : public QObject
{
    Q_OBJECT
    QTemporaryDir m_home;
    QString m_source;

private slots:
    void initTestCase()
    {
        qputenv("XDG_DATA_HOME", m_home.filePath(QStringLiteral("xdg")).toUtf8());
        qunsetenv("TOWERS_DATA");
        m_source = m_home.filePath(QStringLiteral("Garden Birds"));
        writeImages(m_source + QStringLiteral("/robin"), 6, Qt::red);
        writeImages(m_source + QStringLiteral("/blue tit"), 5, Qt::blue);
        QFile notes(m_source + QStringLiteral("/robin/notes.txt"));
        QVERIFY(notes.open(QIODevice::WriteOnly));
        notes.write("seen in May");
        // The counts read as English writes them ("1 file is no image"), as in towers.
        QVERIFY(tt::installPluralForms());
    }

    // A folder whose name has letters with no ASCII form: the name made from it says why it is
    // what it is, under the name (as towers-cli import's note), until the name is changed; the
    // result carries the note and the Data page's log shows it.
    void namesNoteLettersLeftOut()
    {
        const QString source = m_home.filePath(QStringLiteral("日本 photos"));
        writeImages(source + QStringLiteral("/cats"), 3, Qt::red);
        writeImages(source + QStringLiteral("/dogs"), 3, Qt::blue);
        const QString data = m_home.filePath(QStringLiteral("data-note"));
        ImportImagesDialog dialog(data);
        dialog.show();
        QVERIFY(QTest::qWaitForWindowExposed(&dialog));
        QVERIFY(!dialog.nameNoteLabel()->isVisible());
        dialog.setSource(source);
        waitScanned(dialog);
        QCOMPARE(dialog.nameEdit()->text(), QStringLiteral("photos"));
        QVERIFY(dialog.nameNoteLabel()->isVisible());
        const QString note = dialog.nameNoteLabel()->text();
        QVERIFY2(note.contains(QStringLiteral("left out")) &&
                     note.contains(QStringLiteral("日本 photos")),
                 qPrintable(note));
        // Another name: the note no longer applies; the folder's name again: it does.
        dialog.nameEdit()->setText(QStringLiteral("nippon"));
        QVERIFY(!dialog.nameNoteLabel()->isVisible());
        dialog.nameEdit()->setText(QStringLiteral("photos"));
        QVERIFY(dialog.nameNoteLabel()->isVisible());

        QSignalSpy accepted(&dialog, &QDialog::accepted);
        importButton(dialog)->click();
        QVERIFY(accepted.wait(20000));
        QVERIFY(dialog.result().has_value());
        QCOMPARE(dialog.result()->nameNote, note);

        // The Data page logs it with the import.
        QTemporaryDir settingsDir;
        towers::app::AppSettings settings(tt::settingsFile(settingsDir.path()));
        settings.setDataDir(m_home.filePath(QStringLiteral("data-note-page")));
        DataPage page(settings);
        QSignalSpy logged(&page, &DataPage::logMessage);
        page.importImages(source);
        auto* pageDialog = page.findChild<ImportImagesDialog*>();
        QVERIFY(pageDialog);
        waitScanned(*pageDialog);
        pageDialog->startImport();
        const auto log = [&logged] {
            QStringList lines;
            for (const auto& args : logged) lines << args.at(0).toString();
            return lines.join(QLatin1Char('\n'));
        };
        QTRY_VERIFY_WITH_TIMEOUT(log().contains(QStringLiteral("Imported photos")), 20000);
        QVERIFY2(log().contains(note), qPrintable(log()));
    }

    // Files that are no images are counted: "2 files are no images".
    void countsTheFilesLeftOut()
    {
        const QString source = m_home.filePath(QStringLiteral("with notes"));
        writeImages(source + QStringLiteral("/a"), 2, Qt::red);
        writeImages(source + QStringLiteral("/b"), 2, Qt::blue);
        for (const QString& name : {QStringLiteral("a/x.txt"), QStringLiteral("b/y.txt")}) {
            QFile f(source + QLatin1Char('/') + name);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write("text");
        }
        ImportImagesDialog dialog(m_home.filePath(QStringLiteral("data-notes")));
        dialog.setSource(source);
        waitScanned(dialog);
        const QString text = dialog.summaryLabel()->text();
        QVERIFY2(text.contains(QStringLiteral("2 files are no images and will be left out (")) &&
                     text.contains(QStringLiteral("a/x.txt")) &&
                     text.contains(QStringLiteral("b/y.txt")),
                 qPrintable(text));
    }

    void scansNamesAndImports()
    {
        const QString data = m_home.filePath(QStringLiteral("data"));
        ImportImagesDialog dialog(data);
        QVERIFY(!importButton(dialog)->isEnabled()); // no folder yet
        dialog.setSource(m_source);
        waitScanned(dialog);
        QVERIFY2(dialog.summaryLabel()->text().contains(QStringLiteral("2 classes")),
                 qPrintable(dialog.summaryLabel()->text()));
        QVERIFY(dialog.summaryLabel()->text().contains(QStringLiteral("blue tit (5)")));
        QVERIFY2(dialog.summaryLabel()->text().contains(
                     QStringLiteral("1 file is no image and will be left out (robin/notes.txt).")),
                 qPrintable(dialog.summaryLabel()->text()));
        QCOMPARE(dialog.nameEdit()->text(), QStringLiteral("garden-birds"));
        QVERIFY(importButton(dialog)->isEnabled());
        dialog.nameEdit()->setText(QStringLiteral("Birds!"));
        QVERIFY(!importButton(dialog)->isEnabled());
        QVERIFY2(dialog.nameEdit()->toolTip().contains(QStringLiteral("lowercase")),
                 qPrintable(dialog.nameEdit()->toolTip()));
        dialog.nameEdit()->clear();
        QTest::keyClicks(dialog.nameEdit(), QStringLiteral("birds"));
        QVERIFY(importButton(dialog)->isEnabled());
        dialog.testPercentBox()->setValue(20);
        dialog.mirrorBox()->setChecked(false);
        QCOMPARE(dialog.options().fit, towers::engine::ImageFit::Crop); // the default
        dialog.fitBox()->setCurrentIndex(1);
        QCOMPARE(dialog.options().fit, towers::engine::ImageFit::Squash);

        QSignalSpy accepted(&dialog, &QDialog::accepted);
        importButton(dialog)->click();
        QVERIFY(accepted.wait(20000));
        QVERIFY(dialog.result().has_value());
        QCOMPARE(dialog.result()->folder, data + QStringLiteral("/birds"));
        QCOMPARE(dialog.result()->spec.labels.names,
                 (std::vector<std::string>{"blue tit", "robin"}));
        QCOMPARE(dialog.result()->test, (std::vector<qint64>{1, 1}));
        QVERIFY(!dialog.result()->spec.mirrorSafe);
        QCOMPARE(dialog.result()->spec.imageFit, towers::engine::ImageFit::Squash);

        // The same name again: refused in the dialog, which stays open and says why.
        ImportImagesDialog again(data);
        again.setSource(m_source);
        waitScanned(again);
        again.nameEdit()->setText(QStringLiteral("birds"));
        QSignalSpy rejected(&again, &QDialog::rejected);
        QSignalSpy acceptedAgain(&again, &QDialog::accepted);
        importButton(again)->click();
        QTRY_VERIFY_WITH_TIMEOUT(!again.isImporting(), 20000);
        QTRY_VERIFY2(again.statusLabel()->text().contains(
                         QStringLiteral("Replace an imported dataset of the same name")),
                     qPrintable(again.statusLabel()->text()));
        QCOMPARE(acceptedAgain.count(), 0);
        QCOMPARE(rejected.count(), 0);
        // Replacing it, when asked.
        again.replaceBox()->setChecked(true);
        importButton(again)->click();
        QVERIFY(acceptedAgain.wait(20000));
        QCOMPARE(QDir(data).entryList(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot),
                 QStringList{QStringLiteral("birds")});
    }

    // The folder field's editing finishing again (its focus going to Import or Cancel) does not
    // scan the same folder again; closing the dialog with the focus in that field does not crash
    // (the scan ran with the dialog's members gone).
    void folderFieldFocusLeavingNeitherRescansNorCrashes()
    {
        const QString data = m_home.filePath(QStringLiteral("data-focus"));
        auto* dialog = new ImportImagesDialog(data);
        dialog->setSource(m_source);
        dialog->show();
        QVERIFY(QTest::qWaitForWindowExposed(dialog));
        waitScanned(*dialog);
        const QString summary = dialog->summaryLabel()->text();
        QVERIFY(summary.contains(QStringLiteral("2 classes")));
        QLineEdit* field = dialog->sourceEdit();
        emit field->editingFinished();
        QCOMPARE(dialog->summaryLabel()->text(), summary); // not "Looking…"
        QVERIFY(importButton(*dialog)->isEnabled());
        field->setFocus();
        QTRY_VERIFY(field->hasFocus());
        delete dialog;
    }

    // The Data page lists what was imported into its data folder, loads it, offers no download.
    void dataPageListsAndLoadsIt()
    {
        const QString data = m_home.filePath(QStringLiteral("data2"));
        {
            ImportImagesDialog dialog(data);
            dialog.setSource(m_source);
            waitScanned(dialog);
            waitScanned(dialog);
            QSignalSpy accepted(&dialog, &QDialog::accepted);
            importButton(dialog)->click();
            QVERIFY(accepted.wait(20000));
        }
        towers::app::AppSettings settings(tt::settingsFile(m_home.path()));
        settings.setDataDir(data);
        settings.setDatasetName(QStringLiteral("garden-birds"));
        DataPage page(settings);
        QSignalSpy loaded(&page, &DataPage::datasetLoaded);
        QVERIFY(loaded.wait(10000));
        QCOMPARE(page.datasetName(), QStringLiteral("garden-birds"));
        QCOMPARE(page.loadedDataset()->classNames, (std::vector<std::string>{"blue tit", "robin"}));
        QCOMPARE(page.found()->imageShape, (towers::engine::Shape{32, 32, 3}));
        QPushButton* download = nullptr;
        for (auto* b : page.findChildren<QPushButton*>())
            if (b->text().contains(QStringLiteral("wnload"))) download = b;
        QVERIFY(download);
        QVERIFY(!download->isEnabled());
        QVERIFY(download->toolTip().contains(QStringLiteral("your images")));
        // A folder dropped on the page: the dialog opens on it; Import chooses and loads the new
        // dataset.
        QMimeData mime;
        mime.setUrls({QUrl::fromLocalFile(m_source)});
        QDragEnterEvent enter(QPoint(10, 10), Qt::CopyAction, &mime, Qt::LeftButton,
                              Qt::NoModifier);
        QCoreApplication::sendEvent(&page, &enter);
        QVERIFY(enter.isAccepted());
        QMimeData file;
        file.setUrls({QUrl::fromLocalFile(m_source + QStringLiteral("/robin/0.png"))});
        QDragEnterEvent notAFolder(QPoint(10, 10), Qt::CopyAction, &file, Qt::LeftButton,
                                   Qt::NoModifier);
        notAFolder.setAccepted(false);
        QCoreApplication::sendEvent(&page, &notAFolder);
        QVERIFY(!notAFolder.isAccepted());
        QDropEvent drop(QPointF(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QCoreApplication::sendEvent(&page, &drop);
        auto* dialog = page.findChild<ImportImagesDialog*>();
        QVERIFY(dialog);
        QTRY_VERIFY(dialog->isVisible());
        QCOMPARE(dialog->sourceEdit()->text(), QDir::toNativeSeparators(m_source));
        waitScanned(*dialog);
        dialog->nameEdit()->setText(QStringLiteral("birds-2"));
        QSignalSpy loadedAgain(&page, &DataPage::datasetLoaded);
        importButton(*dialog)->click();
        QVERIFY(loadedAgain.wait(20000));
        QCOMPARE(page.datasetName(), QStringLiteral("birds-2"));
        QCOMPARE(page.loadedDataset()->name, std::string("birds-2"));
        QTRY_VERIFY(page.findChild<ImportImagesDialog*>() == nullptr); // gone once done

        // Another data folder without it: the list no longer has it.
        page.setDataDir(m_home.filePath(QStringLiteral("empty")));
        auto* combo = page.findChildren<QComboBox*>().front();
        QCOMPARE(combo->findData(QStringLiteral("garden-birds")), -1);
    }
};

QTEST_MAIN(TestImportImagesDialog)
#include "tst_import_images_dialog.moc"
