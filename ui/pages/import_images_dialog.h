#pragma once
// "Import images…" on the Data page: a dataset from a folder of the user's images, as
// `towers-cli import` makes one (app/data/image_folder_import.h). The folder's classes and image
// counts show once it is listed (on a worker thread, as soon as it is chosen); the name is made
// from the folder's (and may be changed); image size, channels, the share held out for testing and
// whether mirrors keep the class are the command's options. The import runs on a worker thread with
// a progress bar; Cancel (or closing the dialog) stops it and leaves nothing behind.
#include <QDialog>
#include <QFutureWatcher>

#include <atomic>
#include <optional>

#include "app/data/image_folder_import.h"
#include "app/jobs/latest_job.h"

class QCheckBox;
class QComboBox;
class QDialogButtonBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QSpinBox;

namespace towers::ui {

class ImportImagesDialog : public QDialog
{
    Q_OBJECT
public:
    // `dataDir`: where the dataset goes (empty: app::defaultDataDir()).
    explicit ImportImagesDialog(const QString& dataDir, QWidget* parent = nullptr);
    ~ImportImagesDialog() override;

    // What an import with `fit` did to each image file, said after the images' size where it is
    // not the crop (the Data page's dataset, the Classify page's checkpoint): ", each image file
    // squashed to it"; empty for Crop.
    static QString fitNote(engine::ImageFit fit);

    // Chooses the folder (as the Browse button does) and lists it on a worker (scanFinished).
    void setSource(const QString& folder);
    app::ImportOptions options() const;
    // The dataset written, once the dialog is accepted.
    const std::optional<app::ImportResult>& result() const { return m_result; }
    bool isImporting() const { return m_watcher.isRunning(); }
    bool isScanning() const { return m_scanJob.isRunning(); }

    QLineEdit* sourceEdit() const { return m_source; }
    QLineEdit* nameEdit() const { return m_name; }
    QSpinBox* sizeBox() const { return m_size; }
    QComboBox* channelsBox() const { return m_channels; }
    QComboBox* fitBox() const { return m_fit; }
    QSpinBox* testPercentBox() const { return m_testPercent; }
    QCheckBox* mirrorBox() const { return m_mirror; }
    QCheckBox* replaceBox() const { return m_replace; }
    QLabel* summaryLabel() const { return m_summary; }
    // Under the name: why the name made from the folder's is what it is, when letters of the
    // folder's name were left out (app::datasetNameFromFolder's note, as towers-cli import prints
    // it); hidden otherwise, and once the name is changed.
    QLabel* nameNoteLabel() const { return m_nameNote; }
    QLabel* statusLabel() const { return m_status; }

signals:
    // The chosen folder was listed (`ok`: classes were found; else the summary says why).
    void scanFinished(bool ok);

public slots:
    // Starts the import (the Import button); the dialog is accepted when it succeeds.
    void startImport();
    void accept() override;
    void reject() override;

private:
    void browse();
    void scan(); // on a worker; onScanned shows what it found
    void onScanned(const app::JobResult<app::ImageFolderScan>& r);
    void onFinished();
    void updateButtons();
    void growToFit();
    void showNameNote();

    QString m_dataDir;
    bool m_nameEdited = false;
    // The name made from the folder's, and its note (empty: none); the result carries the note
    // when the dataset was imported under that name.
    QString m_folderName, m_folderNameNote;
    std::optional<app::ImageFolderScan> m_scan;
    app::LatestJob<app::ImageFolderScan> m_scanJob{this};
    QString m_scannedFolder; // the folder of m_scan or of the scan under way
    std::optional<app::ImportResult> m_result;
    std::atomic<bool> m_cancel{false};
    std::atomic<qint64> m_done{0}, m_total{0};
    // The import's result, or its error's message.
    struct Outcome
    {
        std::optional<app::ImportResult> result;
        QString error;
    };
    QFutureWatcher<Outcome> m_watcher;

    QLineEdit* m_source;
    QLineEdit* m_name;
    QLabel* m_nameNote;
    QSpinBox* m_size;
    QComboBox* m_channels;
    QComboBox* m_fit;
    QSpinBox* m_testPercent;
    QCheckBox* m_mirror;
    QCheckBox* m_replace;
    QLabel* m_summary;
    QProgressBar* m_progress;
    QLabel* m_status;
    QDialogButtonBox* m_buttons;
};

} // namespace towers::ui
