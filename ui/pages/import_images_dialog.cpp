#include "ui/pages/import_images_dialog.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDir>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QTimer>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

#include "app/data/data_dirs.h"
#include "engine/data/dataset_manifest.h"
#include "engine/errors.h"

namespace towers::ui {

ImportImagesDialog::ImportImagesDialog(const QString& dataDir, QWidget* parent)
    : QDialog(parent), m_dataDir(dataDir.isEmpty() ? app::defaultDataDir() : dataDir)
{
    setWindowTitle(tr("Import images"));
    auto* top = new QVBoxLayout(this);
    auto* intro = new QLabel(
        tr("A dataset from a folder of your images: one sub-folder per class, named after the "
           "class (or <i>train</i> and <i>test</i> folders that each hold the class folders). "
           "Each image is brought to the size as chosen below, as Classify then reads an image "
           "for a checkpoint trained on it. The dataset goes to %1.")
            .arg(QDir::toNativeSeparators(m_dataDir).toHtmlEscaped()),
        this);
    intro->setWordWrap(true);
    top->addWidget(intro);

    auto* form = new QFormLayout;
    auto* sourceRow = new QHBoxLayout;
    m_source = new QLineEdit(this);
    auto* browseButton = new QPushButton(tr("&Browse…"), this);
    sourceRow->addWidget(m_source, 1);
    sourceRow->addWidget(browseButton);
    auto* sourceLabel = new QLabel(tr("&Folder:"), this);
    sourceLabel->setBuddy(m_source);
    form->addRow(sourceLabel, sourceRow);
    m_summary = new QLabel(tr("Choose a folder."), this);
    m_summary->setWordWrap(true);
    m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
    form->addRow(tr("Found:"), m_summary);
    m_name = new QLineEdit(this);
    m_name->setToolTip(tr("Lowercase letters, digits, '-', '_' and '.': what towers-cli train "
                          "--dataset and the dataset list call it."));
    m_nameNote = new QLabel(this);
    m_nameNote->setObjectName(QStringLiteral("nameNote"));
    m_nameNote->setWordWrap(true);
    m_nameNote->setTextFormat(Qt::PlainText);
    m_nameNote->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_nameNote->hide();
    auto* nameField = new QWidget(this); // the name, its note under it
    auto* nameLayout = new QVBoxLayout(nameField);
    nameLayout->setContentsMargins(0, 0, 0, 0);
    nameLayout->setSpacing(2);
    nameLayout->addWidget(m_name);
    nameLayout->addWidget(m_nameNote);
    nameField->setFocusProxy(m_name);
    form->addRow(tr("&Name:"), nameField);
    m_size = new QSpinBox(this);
    m_size->setRange(app::kMinImportSide - 1, app::kMaxImportSide);
    m_size->setSpecialValueText(tr("automatic (28 grayscale, 32 colour)"));
    m_size->setSuffix(tr(" pixels"));
    m_size->setValue(m_size->minimum());
    m_size->setToolTip(tr("The side of the square images. The built-in networks take 24 to 32 "
                          "pixels; larger images are cropped to them."));
    form->addRow(tr("Image &size:"), m_size);
    m_channels = new QComboBox(this);
    m_channels->addItem(tr("automatic (grayscale when every image is gray)"), 0);
    m_channels->addItem(tr("grayscale"), 1);
    m_channels->addItem(tr("colour"), 3);
    form->addRow(tr("&Channels:"), m_channels);
    // NVIDIA DIGITS' resize modes (towers-cli import --fit).
    m_fit = new QComboBox(this);
    m_fit->addItem(tr("cropped to its central square, then scaled"), int(engine::ImageFit::Crop));
    m_fit->addItem(tr("squashed: the whole image scaled, its aspect ratio not kept"),
                   int(engine::ImageFit::Squash));
    m_fit->addItem(tr("fitted inside: the whole image scaled, its aspect ratio kept, on black"),
                   int(engine::ImageFit::Fill));
    m_fit->setToolTip(tr("How each image of another shape becomes a square one. Cropping loses "
                         "the sides of a wide image; squashing keeps all of it, distorted; "
                         "fitting keeps all of it, smaller, with black bands."));
    form->addRow(tr("&Each image:"), m_fit);
    m_testPercent = new QSpinBox(this);
    m_testPercent->setRange(0, 90);
    m_testPercent->setValue(10);
    m_testPercent->setSuffix(tr(" % of each class"));
    form->addRow(tr("&Test set:"), m_testPercent);
    m_mirror = new QCheckBox(tr("A left-right &mirror keeps an image's class (training may flip "
                                "images; not for text, digits or arrows)"),
                             this);
    m_mirror->setChecked(true);
    form->addRow(QString(), m_mirror);
    m_replace = new QCheckBox(tr("&Replace an imported dataset of the same name"), this);
    form->addRow(QString(), m_replace);
    top->addLayout(form);

    m_progress = new QProgressBar(this);
    m_progress->setRange(0, 1000);
    m_progress->setValue(0);
    m_progress->setFormat(QString());
    m_progress->setTextVisible(true);
    top->addWidget(m_progress);
    m_status = new QLabel(this);
    m_status->setWordWrap(true);
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
    top->addWidget(m_status);
    m_buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    m_buttons->button(QDialogButtonBox::Ok)->setText(tr("&Import"));
    top->addStretch(1); // a taller dialog's room above the buttons, not between the rows
    top->addWidget(m_buttons);

    connect(browseButton, &QPushButton::clicked, this, &ImportImagesDialog::browse);
    connect(m_source, &QLineEdit::editingFinished, this, &ImportImagesDialog::scan);
    connect(m_name, &QLineEdit::textEdited, this, [this] { m_nameEdited = true; });
    connect(m_name, &QLineEdit::textChanged, this, &ImportImagesDialog::updateButtons);
    connect(m_name, &QLineEdit::textChanged, this, &ImportImagesDialog::showNameNote);
    connect(m_buttons, &QDialogButtonBox::accepted, this, &ImportImagesDialog::startImport);
    connect(m_buttons, &QDialogButtonBox::rejected, this, &ImportImagesDialog::reject);
    connect(&m_watcher, &QFutureWatcher<Outcome>::finished, this, &ImportImagesDialog::onFinished);
    auto* ticker = new QTimer(this);
    connect(ticker, &QTimer::timeout, this, [this] {
        if (!isImporting() || m_total <= 0) return;
        m_progress->setValue(int(1000.0 * double(m_done) / double(m_total)));
        m_progress->setFormat(
            tr("%1 of %2 images")
                .arg(QLocale().toString(qint64(m_done)), QLocale().toString(qint64(m_total))));
    });
    ticker->start(100);
    updateButtons();
    resize(640, sizeHint().height());
}

ImportImagesDialog::~ImportImagesDialog()
{
    // QDialog's destructor hides the dialog, and the folder field losing its focus then would
    // scan with this dialog's members gone (a crash when the field had the focus).
    disconnect(m_source, nullptr, this, nullptr);
    m_cancel = true;
    m_watcher.waitForFinished();
}

void ImportImagesDialog::browse()
{
    const QString dir =
        QFileDialog::getExistingDirectory(this, tr("Folder of images"), m_source->text());
    if (!dir.isEmpty()) setSource(dir);
}

void ImportImagesDialog::setSource(const QString& folder)
{
    m_source->setText(QDir::toNativeSeparators(folder));
    m_scannedFolder.clear(); // chosen again: looked at again (files may have come)
    scan();
}

void ImportImagesDialog::scan()
{
    const QString folder = m_source->text().trimmed();
    // The field losing its focus (to Import or Cancel) says its editing finished again: the same
    // folder, scanned or being scanned, is not scanned again (the scan Import uses stays).
    if (!folder.isEmpty() && folder == m_scannedFolder && (m_scan || m_scanJob.isRunning())) return;
    m_scannedFolder = folder;
    m_scan.reset();
    m_folderName.clear();
    m_folderNameNote.clear();
    showNameNote();
    m_scanJob.cancel();
    if (folder.isEmpty()) {
        m_summary->setText(tr("Choose a folder."));
        updateButtons();
        return;
    }
    // Listing a large folder (or one on a network share) takes a while: off the UI thread.
    m_summary->setText(tr("Looking…"));
    updateButtons();
    m_scanJob.start([folder] { return app::scanImageFolder(folder); },
                    [this](const app::JobResult<app::ImageFolderScan>& r) { onScanned(r); });
}

void ImportImagesDialog::onScanned(const app::JobResult<app::ImageFolderScan>& r)
{
    if (!r.ok()) {
        m_summary->setText(QStringLiteral("<b>%1</b>").arg(r.error.toHtmlEscaped()));
    } else {
        m_scan = r.value;
        const auto& s = *m_scan;
        QStringList classes;
        for (qsizetype i = 0; i < s.classes.size(); ++i) {
            const qint64 n =
                qint64(s.trainFiles[std::size_t(i)].size() + s.testFiles[std::size_t(i)].size());
            classes << QStringLiteral("%1 (%2)").arg(s.classes[i].toHtmlEscaped(),
                                                     QLocale().toString(n));
        }
        QString text = tr("<b>%1 classes</b>, %2 images: %3")
                           .arg(s.classes.size())
                           .arg(QLocale().toString(s.images()),
                                classes.mid(0, 20).join(QStringLiteral(", ")) +
                                    (classes.size() > 20 ? QStringLiteral(", …") : QString()));
        if (s.splitFolders)
            text += QStringLiteral("<br>") +
                    tr("The test set is the %1/ folder.").arg(s.testFolder.toHtmlEscaped());
        if (!s.ignored.isEmpty())
            text += QStringLiteral("<br>") +
                    tr("%n file(s) are no image(s) and will be left out (%1).", nullptr,
                       int(s.ignored.size()))
                        .arg(s.ignored.mid(0, 3).join(QStringLiteral(", ")).toHtmlEscaped() +
                             (s.ignored.size() > 3 ? QStringLiteral(", …") : QString()));
        m_summary->setText(text);
        m_folderName = app::datasetNameFromFolder(s.source, &m_folderNameNote);
        if (!m_nameEdited) m_name->setText(m_folderName);
        showNameNote();
    }
    updateButtons();
    growToFit();
    emit scanFinished(m_scan.has_value());
}

void ImportImagesDialog::showNameNote()
{
    const bool shown = !m_folderNameNote.isEmpty() && m_name->text().trimmed() == m_folderName;
    const QString note = shown ? m_folderNameNote : QString();
    if (note == m_nameNote->text() && shown == !m_nameNote->isHidden()) return;
    m_nameNote->setText(note);
    m_nameNote->setVisible(shown);
    if (shown) growToFit();
}

void ImportImagesDialog::growToFit()
{
    // The summary's wrapped lines may need more height than the dialog was given.
    QLayout* l = layout();
    l->activate();
    const int h =
        l->hasHeightForWidth() ? l->totalHeightForWidth(width()) : l->totalSizeHint().height();
    if (h > height()) resize(width(), h);
}

QString ImportImagesDialog::fitNote(engine::ImageFit fit)
{
    switch (fit) {
    case engine::ImageFit::Squash:
        return tr(", each image file squashed to it");
    case engine::ImageFit::Fill:
        return tr(", each image file fitted inside it on black");
    case engine::ImageFit::Crop:
        break;
    }
    return {};
}

app::ImportOptions ImportImagesDialog::options() const
{
    app::ImportOptions o;
    o.source = m_scan ? m_scan->source : m_source->text().trimmed();
    o.name = m_name->text().trimmed();
    o.dataDir = m_dataDir;
    o.size = m_size->value() < app::kMinImportSide ? 0 : m_size->value();
    o.channels = m_channels->currentData().toInt();
    o.fit = engine::ImageFit(m_fit->currentData().toInt());
    o.testFraction = m_testPercent->value() / 100.0;
    o.mirrorSafe = m_mirror->isChecked();
    o.overwrite = m_replace->isChecked();
    o.overwriteHint = tr("check “Replace an imported dataset of the same name”");
    return o;
}

void ImportImagesDialog::updateButtons()
{
    std::string why;
    const bool nameOk = engine::isImportedDatasetName(m_name->text().trimmed().toStdString(), &why);
    m_name->setToolTip(nameOk || m_name->text().isEmpty()
                           ? tr("Lowercase letters, digits, '-', '_' and '.'")
                           : QString::fromStdString(why));
    auto* ok = m_buttons->button(QDialogButtonBox::Ok);
    ok->setEnabled(!isImporting() && !isScanning() && m_scan.has_value() && nameOk);
    for (QWidget* w : std::initializer_list<QWidget*>{m_source, m_name, m_size, m_channels, m_fit,
                                                      m_mirror, m_replace})
        w->setEnabled(!isImporting());
    m_testPercent->setEnabled(!isImporting() && !(m_scan && m_scan->splitFolders));
}

void ImportImagesDialog::startImport()
{
    if (isImporting() || !m_scan) return;
    const app::ImportOptions o = options();
    m_cancel = false;
    m_done = 0;
    m_total = 0;
    m_result.reset();
    m_status->setText(tr("Importing…"));
    m_progress->setValue(0);
    m_watcher.setFuture(QtConcurrent::run([this, o] {
        Outcome out;
        try {
            out.result = app::importImageFolder(
                o,
                [this](qint64 done, qint64 total) {
                    m_done = done;
                    m_total = total;
                },
                &m_cancel);
        } catch (const std::exception& e) {
            out.error = QString::fromUtf8(e.what());
        }
        return out;
    }));
    updateButtons();
}

void ImportImagesDialog::onFinished()
{
    const bool cancelled = m_cancel.load();
    const Outcome out = m_watcher.result();
    if (!out.result) {
        m_progress->setValue(0);
        m_progress->setFormat(QString());
        m_status->setText(QStringLiteral("<b>%1</b>").arg(out.error.toHtmlEscaped()));
        updateButtons();
        growToFit();
        if (cancelled) QDialog::reject();
        return;
    }
    m_result = out.result;
    // The note of the name made from the folder's, as the command's result carries it (the dialog
    // gives the import that name: the import itself makes none).
    if (m_result->nameNote.isEmpty() && !m_folderNameNote.isEmpty() &&
        QString::fromStdString(m_result->spec.name) == m_folderName)
        m_result->nameNote = m_folderNameNote;
    m_progress->setValue(1000);
    updateButtons();
    QDialog::accept();
}

void ImportImagesDialog::accept()
{
    startImport(); // accepted when the import has succeeded
}

void ImportImagesDialog::reject()
{
    if (isImporting()) {
        m_cancel = true; // onFinished rejects once the worker has stopped
        m_status->setText(tr("Cancelling…"));
        return;
    }
    QDialog::reject();
}

} // namespace towers::ui
