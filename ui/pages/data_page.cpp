#include "ui/pages/data_page.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QListView>
#include <QLocale>
#include <QMimeData>
#include <QProgressBar>
#include <QPushButton>
#include <QRandomGenerator>
#include <QTabWidget>
#include <QThread>
#include <QVBoxLayout>

#include <algorithm>
#include <filesystem>

#include "app/data/data_dirs.h"
#include "app/data/dataset_downloader.h"
#include "app/settings/app_settings.h"
#include "engine/data/dataset_manifest.h"
#include "ui/models/layer_table_model.h"
#include "ui/models/sample_image_model.h"
#include "ui/pages/import_images_dialog.h"
#include "ui/plots/stacked_bar_chart.h"

namespace towers::ui {

namespace {

// Finds `name` as training will (engine::loadDatasetPreferring): a folder for it in the data
// folder is the one used, and a bad file there is reported, never passed over for another copy;
// otherwise the first good folder along the search path. When nothing usable is found, the reason
// a folder that looks like the dataset was refused, so the user learns what to fix.
std::pair<std::optional<engine::DatasetInfo>, QString>
scanFor(const std::string& name, const std::filesystem::path& dataDir,
        const std::vector<std::filesystem::path>& path)
{
    auto inspect = [&name](const std::filesystem::path& root)
        -> std::optional<std::pair<std::optional<engine::DatasetInfo>, QString>> {
        for (const auto& sub : engine::datasetFolderNames(name)) {
            std::error_code ec;
            const auto folder = root / sub;
            if (!std::filesystem::is_directory(folder, ec)) continue;
            try {
                return std::make_pair(std::optional(engine::inspectDataset(name, folder)),
                                      QString());
            } catch (const std::exception& e) {
                return std::make_pair(std::optional<engine::DatasetInfo>(),
                                      QString::fromUtf8(e.what()));
            }
        }
        return std::nullopt;
    };
    if (!dataDir.empty())
        if (auto preferred = inspect(dataDir)) return *preferred;
    if (auto info = engine::findDataset(name, path)) return {info, {}};
    for (const auto& root : path)
        if (auto refused = inspect(root); refused && !refused->second.isEmpty()) return *refused;
    return {std::nullopt, {}};
}

// What the dataset list holds: the table's datasets, then the imported ones along the search path
// with `dataDir` first.
std::vector<engine::DatasetSpec> listedSpecs(const QString& dataDir)
{
    std::vector<engine::DatasetSpec> specs = engine::datasetSpecs();
    const auto imported = engine::importedDatasetSpecs(app::searchPathWith(dataDir));
    specs.insert(specs.end(), imported.begin(), imported.end());
    return specs;
}

} // namespace

DataPage::DataPage(app::AppSettings& settings, QWidget* parent)
    : QWidget(parent), m_settings(settings), m_catalog(app::builtInDatasets()),
      m_baseUrl(QUrl(qEnvironmentVariable("TOWERS_DOWNLOAD_BASE_URL"))),
      m_samples(new SampleImageModel(this))
{
    buildUi();
    m_dataDirEdit->setText(m_settings.dataDir());
    // A saved name that is not in the list any more gives way to the first dataset found, as a
    // first start does: both look first, then scan (a scan of the list's first entry meanwhile
    // would tell --train that it is not there).
    refreshDatasetList();
    if (m_settings.datasetName().isEmpty()) pickFirstFound({});
    connect(m_datasetCombo, &QComboBox::currentIndexChanged, this, [this] {
        m_discover.cancel(); // chosen: no first dataset found over it
        m_missingSaved.clear();
        m_settings.setDatasetName(datasetName());
        emit datasetChanged(datasetName());
        rescan();
    });
    connect(m_dataDirEdit, &QLineEdit::editingFinished, this, [this] {
        if (QDir::cleanPath(m_dataDirEdit->text()) == QDir::cleanPath(m_settings.dataDir())) return;
        m_settings.setDataDir(dataDir());
        emit dataDirChanged(dataDir());
        refreshDatasetList();
        // A first look still under way looked in the old folder: it looks again, in this one.
        if (m_discover.isRunning())
            pickFirstFound(m_missingSaved);
        else
            rescan();
    });
    if (!m_discover.isRunning()) rescan();
}

void DataPage::showLooking()
{
    m_load.cancel();
    m_found.reset();
    m_scanProblem.clear();
    m_dataset.reset();
    m_samples->setDataset(nullptr);
    m_foundLabel->setText(tr("Looking…"));
    updateDownloadButton();
}

void DataPage::pickFirstFound(const QString& missing)
{
    m_scan.cancel();
    showLooking();
    const auto path = app::searchPathWith(dataDir());
    m_discover.start(
        [path] {
            // Debian's Fashion-MNIST, say.
            const auto found = engine::discoverDatasets(path);
            return found.empty() ? std::string() : found.front().name;
        },
        [this, missing](const app::JobResult<std::string>& r) {
            const QString first = r.ok() ? QString::fromStdString(*r.value) : QString();
            const int i = first.isEmpty() ? -1 : m_datasetCombo->findData(first);
            if (!missing.isEmpty())
                emit logMessage(
                    i >= 0 ? tr("The saved dataset %1 is not found: showing %2, the first "
                                "dataset found")
                                 .arg(missing, first)
                           : tr("The saved dataset %1 is not found, nor any other: showing %2")
                                 .arg(missing, datasetName()));
            // The saved name stays saved (a data folder on a disk not mounted today): shown in its
            // place, the first dataset found is not the user's choice, and --train does not take
            // it.
            m_missingSaved = missing;
            if (i >= 0) {
                {
                    const QSignalBlocker block(m_datasetCombo);
                    m_datasetCombo->setCurrentIndex(i);
                }
                if (missing.isEmpty()) m_settings.setDatasetName(first);
                emit datasetChanged(first);
            }
            rescan();
        });
}

DataPage::~DataPage()
{
    m_scan.cancel();
    m_load.cancel();
    if (m_downloader) {
        m_downloader->cancel();
        m_downloadThread->quit();
        m_downloadThread->wait();
    }
}

void DataPage::buildUi()
{
    auto* top = new QVBoxLayout(this);

    top->addWidget(makeSourceBox());

    // The images, and how many each class has.
    auto* tabs = new QTabWidget(this);
    tabs->addTab(makeSamplesTab(tabs), tr("Sa&mples"));
    tabs->addTab(makeClassesTab(tabs), tr("Images per &class"));
    top->addWidget(tabs, 1);

    connectSampleControls();
    updatePaging();
    updateDistortionControls();
}

QGroupBox* DataPage::makeSourceBox()
{
    auto* sourceBox = new QGroupBox(tr("Dataset"), this);
    auto* form = new QFormLayout(sourceBox);
    m_datasetCombo = new QComboBox(sourceBox); // filled by refreshDatasetList
    // Its entries' descriptions are long: the list shows them whole, the closed box as much as
    // the page's width gives it (its longest entry would widen the page past a 1024-pixel screen).
    m_datasetCombo->setMinimumContentsLength(32);
    m_datasetCombo->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    form->addRow(tr("&Dataset:"), m_datasetCombo);
    auto* dirRow = new QHBoxLayout;
    m_dataDirEdit = new QLineEdit(sourceBox);
    m_dataDirEdit->setToolTip(
        tr("Searched first, then $TOWERS_DATA, ~/.local/share/towers/datasets and "
           "/usr/share/datasets. Downloads go here."));
    auto* browse = new QPushButton(tr("&Browse…"), sourceBox);
    connect(browse, &QPushButton::clicked, this, &DataPage::browseDataDir);
    auto* rescanButton = new QPushButton(tr("&Rescan"), sourceBox);
    connect(rescanButton, &QPushButton::clicked, this, &DataPage::rescan);
    dirRow->addWidget(m_dataDirEdit, 1);
    dirRow->addWidget(browse);
    dirRow->addWidget(rescanButton);
    auto* dirLabel = new QLabel(tr("Data &folder:"), sourceBox);
    dirLabel->setBuddy(m_dataDirEdit);
    form->addRow(dirLabel, dirRow);
    m_foundLabel = new QLabel(sourceBox);
    m_foundLabel->setWordWrap(true);
    m_foundLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
    form->addRow(tr("Found:"), m_foundLabel);

    addDownloadRows(sourceBox, form);
    addImportRow(sourceBox, form);
    return sourceBox;
}

void DataPage::addDownloadRows(QGroupBox* sourceBox, QFormLayout* form)
{
    auto* downloadRow = new QHBoxLayout;
    m_downloadButton =
        new QPushButton(tr("Do&wnload"), sourceBox); // and its tooltip: updateDownloadButton
    m_cancelButton = new QPushButton(tr("Cancel"), sourceBox);
    m_cancelButton->setEnabled(false);
    m_progress = new QProgressBar(sourceBox);
    m_progress->setRange(0, 1000);
    m_progress->setValue(0);
    m_progress->setTextVisible(true);
    m_progress->setFormat(QString());
    connect(m_downloadButton, &QPushButton::clicked, this, &DataPage::startDownload);
    connect(m_cancelButton, &QPushButton::clicked, this, &DataPage::cancelDownload);
    downloadRow->addWidget(m_downloadButton);
    downloadRow->addWidget(m_cancelButton);
    downloadRow->addWidget(m_progress, 1);
    form->addRow(tr("Download:"), downloadRow);
    m_downloadStatus = new QLabel(sourceBox);
    m_downloadStatus->setWordWrap(true);
    m_downloadStatus->setTextInteractionFlags(Qt::TextSelectableByMouse);
    form->addRow(QString(), m_downloadStatus);
    m_sourceForm = form;
    setDownloadStatus({}); // its row shows once a download says something
}

void DataPage::addImportRow(QGroupBox* sourceBox, QFormLayout* form)
{
    m_importButton = new QPushButton(tr("&Import images…"), sourceBox);
    m_importButton->setToolTip(
        tr("Make a dataset from a folder of your images, one sub-folder per class (as "
           "towers-cli import): it goes to the data folder and is trained like any other. "
           "Dropping a folder on the page does the same."));
    connect(m_importButton, &QPushButton::clicked, this, [this] { importImages(); });
    setAcceptDrops(true); // a folder dropped on the page is imported (the dialog, on it)
    auto* importRow = new QHBoxLayout;
    importRow->addWidget(m_importButton);
    importRow->addStretch(1);
    form->addRow(tr("Your images:"), importRow);
}

QWidget* DataPage::makeSamplesTab(QTabWidget* tabs)
{
    auto* samplesBox = new QWidget(tabs);
    auto* samplesLayout = new QVBoxLayout(samplesBox);
    auto* controls = new QHBoxLayout;
    m_splitCombo = new QComboBox(samplesBox);
    m_splitCombo->addItem(tr("Test set"), int(SampleImageModel::Split::Test));
    m_splitCombo->addItem(tr("Training set"), int(SampleImageModel::Split::Train));
    m_classCombo = new QComboBox(samplesBox);
    m_classCombo->setMinimumContentsLength(14);
    m_classCombo->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    m_prevButton = new QPushButton(tr("◀ &Previous"), samplesBox);
    m_nextButton = new QPushButton(tr("&Next ▶"), samplesBox);
    m_pageLabel = new QLabel(samplesBox);
    m_distortCheck = new QCheckBox(tr("Show training dis&tortions"), samplesBox);
    m_redrawButton = new QPushButton(tr("Draw &again"), samplesBox);
    m_redrawButton->setToolTip(tr("New random distortions of the same images"));
    auto* splitLabel = new QLabel(tr("&Split:"), samplesBox);
    splitLabel->setBuddy(m_splitCombo);
    auto* classLabel = new QLabel(tr("C&lass:"), samplesBox);
    classLabel->setBuddy(m_classCombo);
    controls->addWidget(splitLabel);
    controls->addWidget(m_splitCombo);
    controls->addWidget(classLabel);
    controls->addWidget(m_classCombo);
    controls->addStretch(1);
    controls->addWidget(m_distortCheck);
    controls->addWidget(m_redrawButton);
    samplesLayout->addLayout(controls);
    // The pages under the grid: on the row above, the filters, the distortions and the pages
    // together are wider than a 1024-pixel screen gives the page.
    auto* paging = new QHBoxLayout;
    paging->addStretch(1);
    paging->addWidget(m_prevButton);
    paging->addWidget(m_pageLabel);
    paging->addWidget(m_nextButton);
    paging->addStretch(1);

    samplesLayout->addWidget(makeSampleGrid(samplesBox), 1);
    samplesLayout->addLayout(paging);
    setTabOrder(m_redrawButton, m_grid); // in the order they show: the pages under the grid
    setTabOrder(m_grid, m_prevButton);
    setTabOrder(m_prevButton, m_nextButton);
    return samplesBox;
}

QListView* DataPage::makeSampleGrid(QWidget* samplesBox)
{
    m_grid = new QListView(samplesBox);
    m_grid->setViewMode(QListView::IconMode);
    m_grid->setMovement(QListView::Static);
    m_grid->setResizeMode(QListView::Adjust);
    m_grid->setWrapping(true);
    m_grid->setUniformItemSizes(true);
    m_grid->setSpacing(4);
    m_grid->setIconSize(QSize(m_samples->tileSize(), m_samples->tileSize()));
    m_grid->setGridSize(
        QSize(m_samples->tileSize() + 36, m_samples->tileSize() + 2 * fontMetrics().height() + 8));
    m_grid->setTextElideMode(Qt::ElideRight);
    m_grid->setWordWrap(true);
    m_grid->setModel(m_samples);
    return m_grid;
}

QWidget* DataPage::makeClassesTab(QTabWidget* tabs)
{
    auto* classesBox = new QWidget(tabs);
    auto* classesLayout = new QVBoxLayout(classesBox);
    m_classSummary = new QLabel(classesBox);
    m_classSummary->setWordWrap(true);
    m_classSummary->setTextInteractionFlags(Qt::TextSelectableByMouse);
    classesLayout->addWidget(m_classSummary);
    // The remedy for a set whose classes are far apart in size, where the user sees that they are
    // (plain text: the page cannot switch to the Model page and tick the box itself).
    m_balanceHint = new QLabel(classesBox);
    m_balanceHint->setObjectName(QStringLiteral("balanceHint"));
    m_balanceHint->setWordWrap(true);
    m_balanceHint->setTextFormat(Qt::PlainText);
    m_balanceHint->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_balanceHint->hide();
    classesLayout->addWidget(m_balanceHint);
    m_classChart = new StackedBarChart(tr("Images per class"), Qt::Horizontal, classesBox);
    // The Train page's colours: training blue, test green.
    m_classChart->setSegments({tr("training set"), tr("test set")}, {0, 2});
    m_classChart->setUnit(tr("images"));
    m_classChart->setDecimals(0);
    m_classChart->setEmptyMessage(tr("No dataset loaded"));
    m_classChart->setToolTip(tr("Hover a bar for its counts"));
    classesLayout->addWidget(m_classChart, 1);
    return classesBox;
}

void DataPage::connectSampleControls()
{
    connect(m_splitCombo, &QComboBox::currentIndexChanged, this, [this] {
        m_samples->setSplit(SampleImageModel::Split(m_splitCombo->currentData().toInt()));
    });
    connect(m_classCombo, &QComboBox::currentIndexChanged, this,
            [this] { m_samples->setClassFilter(m_classCombo->currentData().toInt()); });
    connect(m_prevButton, &QPushButton::clicked, this,
            [this] { m_samples->setPage(m_samples->page() - 1); });
    connect(m_nextButton, &QPushButton::clicked, this,
            [this] { m_samples->setPage(m_samples->page() + 1); });
    connect(m_distortCheck, &QCheckBox::toggled, this, [this](bool on) {
        m_samples->setDistorted(on);
        updateDistortionControls();
    });
    connect(m_redrawButton, &QPushButton::clicked, this,
            [this] { m_samples->setDistortionSeed(QRandomGenerator::global()->generate64()); });
    connect(m_samples, &SampleImageModel::pagingChanged, this, &DataPage::updatePaging);
}

QString DataPage::datasetName() const
{
    return m_datasetCombo->currentData().toString();
}

QString DataPage::dataDir() const
{
    return QDir::cleanPath(m_dataDirEdit->text().trimmed());
}

QStringList DataPage::datasetNames(const QString& dataDir)
{
    QStringList names;
    for (const engine::DatasetSpec& spec : listedSpecs(dataDir))
        names << QString::fromStdString(spec.name);
    return names;
}

void DataPage::refreshDatasetList()
{
    // A saved dataset not found before is looked for again (its data folder chosen again).
    const QString current = !m_missingSaved.isEmpty() ? m_missingSaved
                            : datasetName().isEmpty() ? m_settings.datasetName()
                                                      : datasetName();
    const QSignalBlocker block(m_datasetCombo);
    m_datasetCombo->clear();
    for (const engine::DatasetSpec& spec : listedSpecs(dataDir())) {
        const QString name = QString::fromStdString(spec.name);
        m_datasetCombo->addItem(
            QStringLiteral("%1 — %2").arg(name, QString::fromStdString(spec.description)), name);
    }
    const int i = m_datasetCombo->findData(current);
    m_datasetCombo->setCurrentIndex(i >= 0 ? i : 0);
    if (i >= 0) m_missingSaved.clear();
    // Not CIFAR-10, the list's first entry, which may well not be there: the first one found.
    if (i < 0 && !current.isEmpty() && m_datasetCombo->count() > 0) pickFirstFound(current);
}

void DataPage::importImages(const QString& folder)
{
    // Window-modal and asynchronous (no nested event loop): the page goes on when it is done.
    auto* dialog = new ImportImagesDialog(dataDir(), this);
    if (!folder.isEmpty()) dialog->setSource(folder);
    connect(dialog, &QDialog::finished, this, [this, dialog](int code) {
        dialog->deleteLater();
        if (code == QDialog::Accepted && dialog->result()) onImported(*dialog->result());
    });
    dialog->open();
}

bool DataPage::droppedFolder(const QMimeData* mime, QString* folder)
{
    if (!mime || !mime->hasUrls() || mime->urls().size() != 1) return false;
    const QUrl url = mime->urls().front();
    if (!url.isLocalFile() || !QFileInfo(url.toLocalFile()).isDir()) return false;
    if (folder) *folder = url.toLocalFile();
    return true;
}

void DataPage::dragEnterEvent(QDragEnterEvent* event)
{
    if (droppedFolder(event->mimeData(), nullptr)) event->acceptProposedAction();
}

void DataPage::dropEvent(QDropEvent* event)
{
    QString folder;
    if (!droppedFolder(event->mimeData(), &folder)) return;
    event->acceptProposedAction();
    importImages(folder);
}

void DataPage::onImported(const app::ImportResult& r)
{
    const qint64 train = r.trainImages(), test = r.testImages();
    const QString name = QString::fromStdString(r.spec.name);
    emit logMessage(tr("Imported %1 into %2: %3 training + %4 test images, %5 classes%6")
                        .arg(name, r.folder)
                        .arg(train)
                        .arg(test)
                        .arg(r.spec.labels.names.size())
                        .arg(r.skipped.isEmpty()
                                 ? QString()
                                 : tr("; %1 images could not be read, the first: %2")
                                       .arg(r.skipped.size())
                                       .arg(r.skipped.front())));
    if (!r.nameNote.isEmpty()) emit logMessage(tr("Import: %1").arg(r.nameNote));
    refreshDatasetList();
    if (datasetName() == name)
        rescan(); // replaced: read it again
    else
        setDatasetName(name);
}

void DataPage::setDatasetName(const QString& name)
{
    const int i = m_datasetCombo->findData(name);
    if (i < 0) return;
    if (i != m_datasetCombo->currentIndex()) {
        m_datasetCombo->setCurrentIndex(i); // saved and scanned by its signal
    } else if (m_discover.isRunning()) {
        // The entry shown while looking for the first dataset found: chosen now.
        m_discover.cancel();
        m_settings.setDatasetName(name);
        emit datasetChanged(name);
        rescan();
    }
}

void DataPage::setDataDir(const QString& dir)
{
    m_dataDirEdit->setText(dir);
    emit m_dataDirEdit->editingFinished();
}

void DataPage::setRecipeProvider(RecipeProvider provider)
{
    m_recipeProvider = std::move(provider);
    refreshRecipe();
}

void DataPage::refreshRecipe()
{
    std::optional<engine::Preprocessing> recipe;
    m_recipeError.clear();
    if (m_dataset && m_recipeProvider) {
        try {
            recipe = m_recipeProvider(*m_dataset);
        } catch (const std::exception& e) {
            m_recipeError = QString::fromUtf8(e.what());
        }
    }
    const QString fit = m_samples->setRecipe(recipe);
    if (!fit.isEmpty()) m_recipeError = fit;
    updateDistortionControls();
}

void DataPage::setDownloadCatalog(QList<app::DatasetSpec> catalog)
{
    m_catalog = std::move(catalog);
}

void DataPage::setDownloadBaseUrl(const QUrl& url)
{
    m_baseUrl = url;
}

void DataPage::browseDataDir()
{
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Data folder"), dataDir());
    if (!dir.isEmpty()) setDataDir(dir);
}

void DataPage::rescan()
{
    showLooking();
    const std::string name = datasetName().toStdString();
    const auto path = app::searchPathWith(dataDir());
    const std::filesystem::path preferred = dataDir().toStdString();
    m_scan.start([name, preferred, path] { return scanFor(name, preferred, path); },
                 [this](const auto& r) { onScanned(r); });
}

void DataPage::onScanned(
    const app::JobResult<std::pair<std::optional<engine::DatasetInfo>, QString>>& r)
{
    if (!r.ok()) {
        m_scanProblem = r.error;
    } else {
        m_found = r.value->first;
        m_scanProblem = r.value->second;
    }
    if (!m_scanProblem.isEmpty()) {
        emit errorOccurred(tr("%1 cannot be used: %2").arg(datasetName(), m_scanProblem));
    }
    updateFoundLabel();
    emit scanFinished(m_found.has_value());
    if (!m_found) {
        emit datasetUnavailable(
            m_scanProblem.isEmpty()
                ? tr("%1 was not found (searched: %2)")
                      .arg(datasetName(), searchedFolders(dataDir()))
                : tr("%1 cannot be used: %2").arg(datasetName(), m_scanProblem));
        return;
    }
    const std::string name = m_found->name;
    const auto location = m_found->location;
    m_foundLabel->setText(m_foundLabel->text() + QStringLiteral("<br><i>") +
                          tr("Loading the images…") + QStringLiteral("</i>"));
    m_load.start(
        [name, location] {
            return std::shared_ptr<const engine::Dataset>(
                std::make_shared<engine::Dataset>(engine::loadDataset(name, location)));
        },
        [this](const auto& result) { onLoaded(result); });
}

void DataPage::onLoaded(const app::JobResult<std::shared_ptr<const engine::Dataset>>& r)
{
    updateFoundLabel();
    if (!r.ok()) {
        emit errorOccurred(tr("Loading %1 failed: %2").arg(datasetName(), r.error));
        m_foundLabel->setText(m_foundLabel->text() + QStringLiteral("<br>") +
                              r.error.toHtmlEscaped());
        emit datasetUnavailable(tr("Loading %1 failed: %2").arg(datasetName(), r.error));
        return;
    }
    m_dataset = *r.value;
    {
        const QSignalBlocker block(m_classCombo);
        m_classCombo->clear();
        m_classCombo->addItem(tr("All classes"), -1);
        for (std::size_t i = 0; i < m_dataset->classNames.size(); ++i)
            m_classCombo->addItem(QString::fromStdString(m_dataset->classNames[i]), int(i));
    }
    m_samples->setDataset(m_dataset);
    m_samples->setSplit(SampleImageModel::Split(m_splitCombo->currentData().toInt()));
    showClassCounts();
    refreshRecipe();
    emit logMessage(tr("Loaded %1 from %2")
                        .arg(QString::fromStdString(m_dataset->name),
                             QString::fromStdString(m_dataset->location.string())));
    emit datasetLoaded();
}

QString DataPage::classSummary() const
{
    return m_classSummary->text();
}

QString DataPage::classBalanceHint() const
{
    return m_balanceHint->text();
}

void DataPage::showClassCounts()
{
    const std::size_t n = m_dataset->classNames.size();
    const auto train = engine::classCounts(m_dataset->train, n);
    const auto test = engine::classCounts(m_dataset->test, n);
    QStringList labels;
    QVector<QVector<double>> values;
    for (std::size_t c = 0; c < n; ++c) {
        labels << QString::fromStdString(m_dataset->classNames[c]);
        values.push_back({double(train[c]), double(test[c])});
    }
    // The counts on the bars where they fit; the total of a class with less than half the
    // training images of the largest in bold, in the highlight colour.
    m_classChart->setValueTextsVisible(n <= 30);
    const auto b = engine::classBalance(train);
    QVector<bool> small;
    for (std::size_t c = 0; c < n; ++c) small << (b && b->small(train[c]));
    m_classChart->setBars(labels, values, small);
    // Sampling the classes equally repeats a small class's images; a class without any it cannot
    // help (the summary says that the network cannot learn it), so only the others are counted.
    const std::int64_t helped = b ? b->smallClasses : 0;
    const QString remedy =
        tr("training can sample the classes equally (Sample the classes equally on the Model & "
           "hyperparameters page, towers-cli train --sampling balanced).");
    m_balanceHint->setText(
        helped == 0   ? QString()
        : helped == 1 ? tr("1 class has less than half the largest's images: %1").arg(remedy)
                      : tr("%1 classes have less than half the largest's images: %2")
                            .arg(QLocale().toString(qint64(helped)), remedy));
    m_balanceHint->setVisible(helped > 0);
    if (!b) {
        m_classSummary->clear();
        return;
    }
    const auto nameOf = [&](std::size_t c) {
        return QString::fromStdString(m_dataset->classNames[c]);
    };
    const QLocale locale;
    m_classSummary->setText(
        b->even() ? tr("Every class has %1 training images.")
                        .arg(locale.toString(qint64(b->fewestImages)))
        : b->fewestImages == 0
            ? tr("<b>%1 has no training image</b>: the network cannot learn it.")
                  .arg(nameOf(b->smallest))
            : tr("The largest class (%1, %2 training images) has %3 times the images of the "
                 "smallest (%4, %5)%6.")
                  .arg(nameOf(b->largest), locale.toString(qint64(b->mostImages)),
                       locale.toString(b->ratio(), 'f', 1), nameOf(b->smallest),
                       locale.toString(qint64(b->fewestImages)),
                       b->small(b->fewestImages) && n <= 30
                           ? tr("; outlined: the classes with less than half the "
                                "largest's images, which the network will see less "
                                "often")
                           : QString()));
}

void DataPage::updateDownloadButton()
{
    // The download button says whether the dataset is there already (a download then puts a
    // verified copy in the data folder, which is searched first).
    const QString downloadTip =
        tr("Fetches the published files into the data folder, verifies each against its "
           "published MD5 checksum and unpacks them.");
    const bool published =
        std::any_of(m_catalog.begin(), m_catalog.end(),
                    [&](const app::DatasetSpec& s) { return s.name == datasetName(); });
    m_downloadButton->setEnabled(published && !m_downloader);
    if (!published) {
        m_downloadButton->setText(tr("Do&wnload"));
        m_downloadButton->setToolTip(
            tr("%1 is made from your images: import the folder again to change it.")
                .arg(datasetName()));
    } else if (m_found) {
        m_downloadButton->setText(tr("Do&wnload again"));
        m_downloadButton->setToolTip(
            tr("%1 is found already, in %2. %3 The data folder is searched first.")
                .arg(QString::fromStdString(m_found->name),
                     QString::fromStdString(m_found->location.string()), downloadTip));
    } else {
        m_downloadButton->setText(tr("Do&wnload"));
        m_downloadButton->setToolTip(downloadTip);
    }
}

QString DataPage::searchedFolders(const QString& dataDir)
{
    QStringList searched;
    for (const auto& f : app::searchPathWith(dataDir)) {
        const QString folder = QDir::cleanPath(QString::fromStdString(f.string()));
        if (!searched.contains(folder)) searched << folder;
    }
    return searched.join(QStringLiteral(", "));
}

void DataPage::updateFoundLabel()
{
    updateDownloadButton();
    if (!m_found) {
        QString text =
            tr("<b>%1 was not found.</b> Download it, or choose the folder that holds it. "
               "Searched: %2")
                .arg(datasetName().toHtmlEscaped(), searchedFolders(dataDir()).toHtmlEscaped());
        if (!m_scanProblem.isEmpty())
            text += QStringLiteral("<br>") +
                    tr("A folder was refused: %1").arg(m_scanProblem.toHtmlEscaped());
        m_foundLabel->setText(text);
        return;
    }
    const auto& f = *m_found;
    const QLocale locale;
    QStringList classes;
    for (const auto& c : f.classNames) classes << QString::fromStdString(c);
    const QString classText =
        classes.size() > 12 ? classes.mid(0, 12).join(QStringLiteral(", ")) + QStringLiteral(", …")
                            : classes.join(QStringLiteral(", "));
    // An imported dataset whose image files were not cropped to size says how they were brought.
    const QString fit = ImportImagesDialog::fitNote(f.imageFit);
    m_foundLabel->setText(tr("<b>%1</b> in %2<br>%3 training + %4 test images of %5 (H × W × C)%8, "
                             "%6 classes: %7")
                              .arg(QString::fromStdString(f.name).toHtmlEscaped(),
                                   QString::fromStdString(f.location.string()).toHtmlEscaped(),
                                   locale.toString(qint64(f.trainCount)),
                                   locale.toString(qint64(f.testCount)),
                                   shapeLabel(f.imageShape, false), QString::number(classes.size()),
                                   classText.toHtmlEscaped(), fit));
}

void DataPage::updatePaging()
{
    const int pages = m_samples->pageCount();
    m_pageLabel->setText(pages == 0
                             ? tr("no images")
                             : tr("page %1 of %2 (%3 images)")
                                   .arg(m_samples->page() + 1)
                                   .arg(pages)
                                   .arg(QLocale().toString(qint64(m_samples->matchCount()))));
    m_prevButton->setEnabled(m_samples->page() > 0);
    m_nextButton->setEnabled(m_samples->page() + 1 < pages);
}

void DataPage::updateDistortionControls()
{
    const bool can = m_samples->hasRecipe();
    m_distortCheck->setEnabled(can);
    if (!can && m_distortCheck->isChecked()) {
        const QSignalBlocker block(m_distortCheck);
        m_distortCheck->setChecked(false);
    }
    m_distortCheck->setToolTip(
        can ? tr("Each image as the training distortions of the chosen model make it (crop, shift, "
                 "flip, "
                 "brightness, contrast, normalisation), rescaled to 0..255 for display")
            : (m_recipeError.isEmpty() ? tr("Load a dataset first") : m_recipeError));
    m_redrawButton->setEnabled(m_samples->isDistorted());
}

void DataPage::startDownload()
{
    if (m_downloader) return;
    std::optional<app::DatasetSpec> spec;
    for (const auto& s : m_catalog)
        if (s.name == datasetName()) spec = s;
    if (!spec) {
        emit errorOccurred(tr("No download is known for %1").arg(datasetName()));
        return;
    }
    app::DatasetDownloader::Options options;
    options.dataDir = dataDir();
    options.baseUrl = m_baseUrl;
    m_downloadThread = new QThread(this);
    m_downloadThread->setObjectName(QStringLiteral("download"));
    auto* downloader = new app::DatasetDownloader(*spec, options);
    downloader->moveToThread(m_downloadThread);
    m_downloader = downloader;
    connect(m_downloadThread, &QThread::finished, downloader, &QObject::deleteLater);
    connect(downloader, &app::DatasetDownloader::progress, this, [this](qint64 done, qint64 total) {
        if (total > 0) {
            m_progress->setValue(int(1000.0 * double(done) / double(total)));
            m_progress->setFormat(tr("%1 of %2 MB")
                                      .arg(double(done) / 1e6, 0, 'f', 1)
                                      .arg(double(total) / 1e6, 0, 'f', 1));
        } else {
            m_progress->setRange(0, 0); // size unknown: busy indicator
        }
    });
    connect(downloader, &app::DatasetDownloader::statusMessage, this, [this](const QString& text) {
        setDownloadStatus(text);
        emit logMessage(text);
    });
    connect(downloader, &app::DatasetDownloader::finished, this, &DataPage::onDownloadFinished);
    m_downloadThread->start();
    m_downloadButton->setEnabled(false);
    m_cancelButton->setEnabled(true);
    m_progress->setRange(0, 1000);
    m_progress->setValue(0);
    setDownloadStatus(tr("Starting…"));
    QMetaObject::invokeMethod(downloader, &app::DatasetDownloader::start, Qt::QueuedConnection);
}

void DataPage::setDownloadStatus(const QString& text)
{
    m_downloadStatus->setText(text);
    m_sourceForm->setRowVisible(m_downloadStatus, !text.isEmpty());
}

void DataPage::cancelDownload()
{
    if (m_downloader) m_downloader->cancel(); // thread-safe
}

void DataPage::onDownloadFinished(bool ok, const QString& message)
{
    // Read before the thread ends (the downloader is deleted when it does).
    const bool cancelled =
        m_downloader && m_downloader->outcome() == app::DatasetDownloader::Outcome::Cancelled;
    m_downloadThread->quit();
    m_downloadThread->wait();
    m_downloadThread->deleteLater();
    m_downloadThread = nullptr;
    m_downloader = nullptr;
    m_downloadButton->setEnabled(true);
    m_cancelButton->setEnabled(false);
    m_progress->setRange(0, 1000);
    m_progress->setValue(ok ? 1000 : 0);
    m_progress->setFormat(QString());
    setDownloadStatus(ok ? tr("Done: %1 (every checksum verified)").arg(message) : message);
    emit logMessage(ok ? tr("Download finished: %1").arg(message)
                       : tr("Download stopped: %1").arg(message));
    if (!ok && !cancelled) emit errorOccurred(message);
    emit downloadFinished(ok, message);
    if (ok) rescan();
}

} // namespace towers::ui
