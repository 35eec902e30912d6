#pragma once
// The Data page: which dataset and data folder; what discovery found (counts, shape, classes) or
// why nothing usable was found; a download with progress, cancel and checksum verification
// (app::DatasetDownloader on its own thread); a paged grid of sample images with their class
// names, a class filter, and a toggle that shows the images after the training distortions.
// Scanning and loading run off the UI thread; results of superseded jobs are dropped.
#include <QList>
#include <QPointer>
#include <QStringList>
#include <QUrl>
#include <QWidget>

#include <functional>
#include <memory>
#include <optional>

#include "app/data/dataset_catalog.h"
#include "app/data/dataset_downloader.h"
#include "app/data/image_folder_import.h"
#include "app/jobs/latest_job.h"
#include "engine/data/dataset.h"
#include "engine/data/preprocessing.h"

class QCheckBox;
class QDragEnterEvent;
class QDropEvent;
class QMimeData;
class QComboBox;
class QFormLayout;
class QGroupBox;
class QLabel;
class QLineEdit;
class QListView;
class QProgressBar;
class QPushButton;
class QTabWidget;
class QThread;

namespace towers::app {
class AppSettings;
}

namespace towers::ui {

class SampleImageModel;
class StackedBarChart;

class DataPage : public QWidget
{
    Q_OBJECT
public:
    using RecipeProvider =
        std::function<std::optional<engine::Preprocessing>(const engine::Dataset&)>;

    explicit DataPage(app::AppSettings& settings, QWidget* parent = nullptr);
    ~DataPage() override;

    QString datasetName() const;
    // The saved dataset that was not found at start (the page shows the first dataset found in
    // its place, the saved name kept): empty once the user chooses one, or it is found again.
    QString missingSavedDataset() const { return m_missingSaved; }
    QString dataDir() const;
    // Chooses `name` when the list has it (datasetNames); another name changes nothing.
    void setDatasetName(const QString& name);
    // The names the dataset list holds with `dataDir` as the data folder: the table's, then the
    // imported datasets along the search path (the data folder first). What --dataset accepts.
    static QStringList datasetNames(const QString& dataDir);
    // Where datasets are looked for: the search path with `dataDir` first, each folder once.
    static QString searchedFolders(const QString& dataDir);
    // The dataset list: the table's, then the imported datasets along the search path (with the
    // data folder first); keeps the chosen one where it is still there. A chosen name that is not
    // there any more (an imported dataset deleted) gives way to the first dataset found, as on a
    // first start, and the log says so.
    void refreshDatasetList();
    void setDataDir(const QString& dir);

    // What the distortion toggle applies: the recipe the chosen model trains with (nullopt: none).
    void setRecipeProvider(RecipeProvider provider);
    // Asks the provider again (the model changed).
    void refreshRecipe();

    // The latest scan's answer and the images loaded for the grid.
    const std::optional<engine::DatasetInfo>& found() const { return m_found; }
    std::shared_ptr<const engine::Dataset> loadedDataset() const { return m_dataset; }
    SampleImageModel* sampleModel() const { return m_samples; }
    // The loaded dataset's images per class, training and test (the "Images per class" tab).
    StackedBarChart* classChart() const { return m_classChart; }
    QString classSummary() const;
    // Under the summary, where some classes with training images have less than half the
    // largest's: how many, and that training can sample the classes equally; empty otherwise.
    QString classBalanceHint() const;
    bool isBusy() const
    {
        return m_discover.isRunning() || m_scan.isRunning() || m_load.isRunning();
    }
    bool isDownloading() const { return m_downloader != nullptr; }

    // Tests and mirrors: the datasets the download button knows, and a base URL for every file
    // (default: builtInDatasets() and $TOWERS_DOWNLOAD_BASE_URL, as towers-cli download).
    void setDownloadCatalog(QList<app::DatasetSpec> catalog);
    void setDownloadBaseUrl(const QUrl& url);

public slots:
    void rescan();
    void startDownload();
    // "Import images…": the dialog (on `folder`, when given; window-modal, it returns at once),
    // then the new dataset chosen and loaded. A folder dropped on the page opens it too.
    void importImages(const QString& folder = {});
    void cancelDownload();

signals:
    void datasetChanged(const QString& name);
    void dataDirChanged(const QString& dir);
    // After every scan; `found` tells whether the dataset is usable.
    void scanFinished(bool found);
    // The images are in memory (the grid shows them).
    void datasetLoaded();
    // The dataset chosen cannot be loaded: not found, refused, or its files failed to load. `why`
    // says which, in a sentence that names the dataset (a refused or failed one is also reported
    // by errorOccurred). Never while the page is still looking for the first dataset found.
    void datasetUnavailable(const QString& why);
    void downloadFinished(bool ok, const QString& message);
    // A problem the window shows in its banner and log (bad files, failed downloads).
    void errorOccurred(const QString& message);
    void logMessage(const QString& line);

private:
    void buildUi();
    // buildUi's steps, in order. The Dataset box: the dataset, the data folder and what was
    // found, then the download and import rows.
    QGroupBox* makeSourceBox();
    // The download button, its cancel and progress, and the status row under them.
    void addDownloadRows(QGroupBox* sourceBox, QFormLayout* form);
    // "Import images…", and a folder dropped on the page accepted.
    void addImportRow(QGroupBox* sourceBox, QFormLayout* form);
    // The Samples tab: the split, class and distortion controls, the grid, the pages under it.
    QWidget* makeSamplesTab(QTabWidget* tabs);
    QListView* makeSampleGrid(QWidget* samplesBox); // the images as tiles, their class names
    QWidget* makeClassesTab(QTabWidget* tabs);      // the "Images per class" summary and chart
    // The Samples tab's controls to the model: split, class, pages, distortions.
    void connectSampleControls();
    // A first start (`missing` empty), or a saved dataset `missing` that is not in the list: the
    // first dataset discovery finds is chosen (and saved), then scanned; none found, the list's
    // first entry is scanned (and not saved).
    void pickFirstFound(const QString& missing);
    // Nothing found or loaded yet: "Looking…", no samples, a load under way cancelled.
    void showLooking();
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;
    // Whether `mime` is one local folder (its path in `folder`).
    static bool droppedFolder(const QMimeData* mime, QString* folder);
    void onImported(const app::ImportResult& r);
    void onScanned(const app::JobResult<std::pair<std::optional<engine::DatasetInfo>, QString>>& r);
    void onLoaded(const app::JobResult<std::shared_ptr<const engine::Dataset>>& r);
    void showClassCounts();
    void onDownloadFinished(bool ok, const QString& message);
    void updateFoundLabel();
    void updateDownloadButton(); // its text and tooltip: found already or not
    void updatePaging();
    void setDownloadStatus(const QString& text); // its row hidden while empty
    void updateDistortionControls();
    void browseDataDir();

    app::AppSettings& m_settings;
    RecipeProvider m_recipeProvider;
    QString m_recipeError;
    std::optional<engine::DatasetInfo> m_found;
    QString m_scanProblem;
    QString m_missingSaved;
    std::shared_ptr<const engine::Dataset> m_dataset;
    app::LatestJob<std::pair<std::optional<engine::DatasetInfo>, QString>> m_scan{this};
    app::LatestJob<std::shared_ptr<const engine::Dataset>> m_load{this};
    app::LatestJob<std::string> m_discover{this};
    QList<app::DatasetSpec> m_catalog;
    QUrl m_baseUrl;

    QThread* m_downloadThread = nullptr;
    QPointer<app::DatasetDownloader> m_downloader;

    QComboBox* m_datasetCombo;
    QLineEdit* m_dataDirEdit;
    QLabel* m_foundLabel;
    QPushButton* m_downloadButton;
    QPushButton* m_cancelButton;
    QPushButton* m_importButton;
    QProgressBar* m_progress;
    QLabel* m_downloadStatus;
    QFormLayout* m_sourceForm = nullptr;
    QComboBox* m_splitCombo;
    QComboBox* m_classCombo;
    QPushButton* m_prevButton;
    QPushButton* m_nextButton;
    QLabel* m_pageLabel;
    QCheckBox* m_distortCheck;
    QPushButton* m_redrawButton;
    QListView* m_grid;
    SampleImageModel* m_samples;
    StackedBarChart* m_classChart;
    QLabel* m_classSummary;
    QLabel* m_balanceHint; // classBalanceHint(), hidden while empty
};

} // namespace towers::ui
