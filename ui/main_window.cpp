#include "ui/main_window.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDateTime>
#include <QDialog>
#include <QDir>
#include <QDockWidget>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QListWidget>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QScreen>
#include <QScrollArea>
#include <QStackedWidget>
#include <QStyle>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>

#include <utility>

#include "app/data/data_dirs.h"
#include "app/runs/run_builder.h"
#include "app/settings/app_settings.h"
#include "engine/data/dataset_manifest.h"
#include "engine/train/checkpoint.h"
#include "engine/train/recipe.h"
#include "ui/models/device_model.h"
#include "ui/pages/classify_page.h"
#include "ui/pages/data_page.h"
#include "ui/pages/devices_page.h"
#include "ui/pages/lr_finder_dialog.h"
#include "ui/pages/model_page.h"
#include "ui/pages/runs_page.h"
#include "ui/pages/train_page.h"
#include "ui/plots/plot_theme.h"
#include "ui/widgets/error_banner.h"
#include "ui/widgets/hyperparameter_form.h"
#include "ui/widgets/wheel_guard.h"

namespace towers::ui {

MainWindow::MainWindow(app::AppSettings& settings, QWidget* parent)
    : QMainWindow(parent), m_settings(settings), m_banner(new ErrorBanner(this)),
      m_sidebar(new QListWidget(this)), m_stack(new QStackedWidget(this)),
      m_log(new QPlainTextEdit(this))
{
    setWindowTitle(tr("Towers"));
    auto* central = new QWidget(this);
    auto* outer = new QVBoxLayout(central);
    outer->setContentsMargins(6, 6, 6, 6);
    outer->addWidget(m_banner);
    auto* row = new QHBoxLayout;
    m_sidebar->setFocusPolicy(Qt::StrongFocus);
    m_sidebar->setIconSize(QSize(20, 20));
    m_sidebar->setSpacing(2);
    auto* column = new QVBoxLayout;
    column->addWidget(m_sidebar, 1);
    m_logButton = new QToolButton(this);
    m_logButton->setToolButtonStyle(Qt::ToolButtonTextOnly);
    m_logButton->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
    column->addWidget(m_logButton);
    row->addLayout(column);
    row->addWidget(m_stack, 1);
    outer->addLayout(row, 1);
    setCentralWidget(central);

    m_log->setReadOnly(true);
    m_log->setMaximumBlockCount(5000);
    m_log->setLineWrapMode(QPlainTextEdit::NoWrap);
    auto* dock = new QDockWidget(tr("Log"), this);
    dock->setObjectName(QStringLiteral("logDock"));
    dock->setWidget(m_log);
    dock->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetClosable);
    addDockWidget(Qt::BottomDockWidgetArea, dock);
    resizeDocks({dock}, {90}, Qt::Vertical);
    // Closed, the log comes back from under the sidebar (or Ctrl+L): there is no menu bar to
    // find it in.
    QAction* showLog = dock->toggleViewAction();
    showLog->setText(tr("&Log"));
    showLog->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_L));
    showLog->setToolTip(tr("Shows or hides the log (Ctrl+L)"));
    m_logButton->setDefaultAction(showLog);
    addAction(showLog);

    buildPages();
    restoreConfig();
    connectPages();
    // A settings file that could be written at start and no longer can (a full disk, a folder
    // made read-only): said when it happens, not only at exit; and when it can be again.
    connect(&m_settings, &app::AppSettings::saveFailed, this, &MainWindow::sayUnsavedSettings);
    connect(&m_settings, &app::AppSettings::saveRecovered, this, [this] {
        appendLog(tr("The settings are saved again to %1").arg(m_settings.fileName()));
    });

    connect(m_sidebar, &QListWidget::currentRowChanged, m_stack, &QStackedWidget::setCurrentIndex);
    connect(m_sidebar, &QListWidget::currentRowChanged, this,
            [this](int p) { m_settings.setLastPage(p); });
    for (int p = 0; p < PageCount; ++p) {
        auto* action = new QAction(this);
        action->setShortcut(QKeySequence(Qt::CTRL | Qt::Key(Qt::Key_1 + p)));
        connect(action, &QAction::triggered, this, [this, p] { showPage(p); });
        addAction(action);
    }
    m_sidebar->setFixedWidth(
        std::max(m_sidebar->sizeHintForColumn(0) + 2 * m_sidebar->frameWidth() + 12, 140));

    // A first start: 1280 x 800, or the screen's room where it is smaller (a 1366 x 768 laptop's
    // window was taller than its screen), less a little for the title bar and frame around it.
    if (!restoreGeometry(m_settings.windowGeometry()))
        resize(QSize(1280, 800).boundedTo(screen()->availableSize() * 0.95));
    showPage(std::clamp(m_settings.lastPage(), 0, PageCount - 1));
    appendLog(tr("Towers %1 started").arg(QStringLiteral(TOWERS_VERSION)));
}

MainWindow::~MainWindow() = default;

QString MainWindow::pageTitle(int page)
{
    switch (page) {
    case Data:
        return tr("Data");
    case Model:
        return tr("Model && hyperparameters");
    case Devices:
        return tr("Devices");
    case Train:
        return tr("Train");
    case Runs:
        return tr("Runs && checkpoints");
    case Classify:
        return tr("Classify");
    default:
        return {};
    }
}

void MainWindow::buildPages()
{
    m_data = new DataPage(m_settings, m_stack);
    m_model = new ModelPage(m_stack);
    m_devices = new DevicesPage(m_stack);
    m_train = new TrainPage(m_stack);
    m_runs = new RunsPage(m_settings, m_stack);
    m_classify = new ClassifyPage(m_stack);
    const QStyle::StandardPixmap icons[] = {
        QStyle::SP_DirOpenIcon, QStyle::SP_FileDialogDetailedView, QStyle::SP_ComputerIcon,
        QStyle::SP_MediaPlay,   QStyle::SP_FileDialogListView,     QStyle::SP_DialogApplyButton};
    QWidget* pages[] = {m_data, m_model, m_devices, m_train, m_runs, m_classify};
    for (int p = 0; p < PageCount; ++p) {
        guardWheel(pages[p]); // every page's boxes: the wheel scrolls, it does not edit
        // Each page scrolls where the window is smaller than it: the window's minimum is not the
        // largest page's (about 1211 x 742, more than a laptop's screen gives it).
        auto* scroll = new QScrollArea(m_stack);
        scroll->setObjectName(QStringLiteral("pageScroll"));
        scroll->setWidget(pages[p]);
        scroll->setWidgetResizable(true);
        scroll->setFrameShape(QFrame::NoFrame);
        m_stack->addWidget(scroll);
        auto* item = new QListWidgetItem(
            paletteIcon(icons[p]), pageTitle(p).replace(QStringLiteral("&&"), QStringLiteral("&")));
        item->setToolTip(tr("%1 (Ctrl+%2)").arg(item->text()).arg(p + 1));
        m_sidebar->addItem(item);
    }
}

void MainWindow::restoreConfig()
{
    // The last configuration, or the chosen model's defaults.
    m_restoring = true;
    std::optional<engine::TrainConfig> last;
    if (const QString json = m_settings.lastConfigJson(); !json.isEmpty()) {
        try {
            last = engine::TrainConfig::fromJson(json.toStdString());
        } catch (const std::exception& e) {
            appendLog(
                tr("The saved configuration was not used: %1").arg(QString::fromUtf8(e.what())));
        }
    }
    if (!last) {
        m_modelFromFirstDataset = true;
        std::string model = m_model->modelName().toStdString();
        try {
            model = defaultModelOf(m_data->datasetName().toStdString());
        } catch (const std::exception&) {
        }
        last = engine::defaultConfigFor(model);
    }
    applyConfig(*last);
    if (m_modelFromFirstDataset) m_firstConfigJson = m_model->form()->config().toJson();
    m_restoring = false;
}

void MainWindow::applyConfig(const engine::TrainConfig& c)
{
    const bool restoring = std::exchange(m_restoring, true); // no model defaults over it
    try {
        m_model->setModel(engine::resolveModel(c.model, c.modelDefinition));
    } catch (const std::exception& e) {
        appendLog(tr("The model was not chosen: %1").arg(QString::fromUtf8(e.what())));
    }
    m_devices->setTowers(c.towers);
    m_devices->setThreadsPerTower(c.threadsPerTower);
    m_devices->setPrecision(c.precision);
    m_devices->setGpuData(c.gpuData);
    m_devices->setAllreduce(c.allreduce);
    m_devices->setCudaGraphs(c.cudaGraphs);
    m_devices->setTf32(c.allowTf32);
    m_devices->setCudnnBenchmark(c.cudnnBenchmark);
    m_devices->setBucketMb(c.bucketMb);
    m_model->form()->setConfig(c);
    m_model->form()->setTowers(c.towers);
    m_restoring = restoring;
}

bool MainWindow::newRunLike(const QString& folder)
{
    engine::TrainConfig c;
    try {
        c = app::likeRunConfig(folder);
    } catch (const std::exception& e) {
        showError(tr("Cannot start a run like %1: %2").arg(folder, QString::fromUtf8(e.what())));
        return false;
    }
    // Its data folder where it is here (the user's own stays otherwise: a run copied from another
    // machine named a folder that is not here, and the Data page then found nothing).
    const QString runData = QString::fromStdString(c.dataDir);
    if (!runData.isEmpty() && QFileInfo(runData).isDir())
        m_data->setDataDir(runData);
    else if (!runData.isEmpty())
        appendLog(tr("Its data folder %1 is not here: the Data page's own is kept").arg(runData));
    m_data->setDatasetName(QString::fromStdString(c.dataset));
    m_modelFromFirstDataset = false;
    applyConfig(c);
    configChanged();
    appendLog(tr("A new run like %1: its dataset, model, hyperparameters and towers; change what "
                 "you will and start it")
                  .arg(folder));
    if (c.backend == "cuda")
        appendLog(tr("That run trained on GPUs: check them on the Devices page"));
    showPage(Model);
    return true;
}

void MainWindow::connectPages()
{
    auto* form = m_model->form();
    m_data->setRecipeProvider([this](const engine::Dataset& d) {
        return std::optional<engine::Preprocessing>(engine::preprocessingFor(m_model->model(), d));
    });
    connect(m_data, &DataPage::errorOccurred, this, &MainWindow::showError);
    connect(m_data, &DataPage::logMessage, this, &MainWindow::appendLog);
    connect(m_data, &DataPage::datasetLoaded, this, &MainWindow::onDatasetLoaded);
    connect(m_data, &DataPage::datasetChanged, this, &MainWindow::configChanged);
    connect(m_data, &DataPage::dataDirChanged, this, &MainWindow::configChanged);
    connect(m_data, &DataPage::scanFinished, this, [this, form](bool found) {
        form->setTrainingSetSize(found ? m_data->found()->trainCount : 0);
        configChanged();
    });
    connect(m_model, &ModelPage::modelChanged, this, &MainWindow::onModelChosen);
    connect(m_model, &ModelPage::errorOccurred, this, &MainWindow::showError);
    connect(m_model, &ModelPage::logMessage, this, &MainWindow::appendLog);
    connect(form, &HyperparameterForm::changed, this, &MainWindow::configChanged);
    connect(m_devices, &DevicesPage::towerSetupChanged, this, [this, form](int towers, int) {
        m_model->setGpuTowers(!m_devices->selectedGpus().empty());
        form->setTowers(towers);
        configChanged();
    });
    connect(m_devices, &DevicesPage::precisionChanged, this, &MainWindow::configChanged);
    connect(m_devices, &DevicesPage::towerOptionsChanged, this, &MainWindow::configChanged);

    m_train->setOptionsProvider([this](QString* error) { return newRunOptions(error); });
    m_train->setStartBlocker([this] { return lrTestBusy(); });
    connect(m_train, &TrainPage::errorOccurred, this, &MainWindow::showError);
    connect(m_train, &TrainPage::towerTimes, m_devices, &DevicesPage::showTowerTimes);
    connect(m_train, &TrainPage::activeChanged, this, [this](bool active) {
        if (!active) return; // the runFinished handler undoes these
        m_devices->setTowerSetupEnabled(false);
        m_runs->setResumeAllowed(false);
        m_runs->setOwnRunFolder(m_train->runDirectory()); // our lock: not "another process"
    });
    // Only once the session has really started: a start that fails at once (its folder locked by
    // another trainer) neither claims it trained nor wipes the last run's tower times.
    connect(m_train, &TrainPage::runStarted, this, [this](const QString& dir) {
        m_devices->clearTowerTimes();
        m_runs->setOwnRunFolder(dir); // our lock: not "another process", not followed
        appendLog(tr("Training in %1").arg(dir));
    });
    connect(m_train, &TrainPage::checkpointWritten, this, [this](const QString& file, qint64 step) {
        appendLog(tr("Checkpoint of step %1: %2").arg(step).arg(file));
        m_runs->refresh();
    });
    connect(m_train, &TrainPage::runFinished, this,
            [this](auto, const QString& message, const QString& dir) {
                m_devices->setTowerSetupEnabled(true);
                m_runs->setResumeAllowed(true);
                m_runs->setOwnRunFolder(QString());
                appendLog(tr("Run in %1: %2").arg(dir, message));
                m_runs->selectRun(dir);
                m_runs->refresh();
                if (m_closeAfterStop) close();
            });

    connect(m_runs, &RunsPage::resumeRequested, this, &MainWindow::resumeRun);
    connect(m_runs, &RunsPage::classifyRequested, this, &MainWindow::classifyWith);
    connect(m_runs, &RunsPage::fineTuneRequested, this, &MainWindow::fineTuneFrom);
    connect(m_runs, &RunsPage::newRunLikeRequested, this, &MainWindow::newRunLike);
    connect(m_model->form(), &HyperparameterForm::initFromChosen, this, &MainWindow::fineTuneFrom);
    connect(m_model->form(), &HyperparameterForm::findLearningRateRequested, this,
            &MainWindow::findLearningRate);

    m_classify->setDatasetProvider([this](const std::string& name) {
        ClassifyPage::DatasetSource source;
        const auto loaded = m_data->loadedDataset();
        if (loaded && loaded->name == name) source.loaded = loaded;
        source.searchPath = app::searchPathWith(m_data->dataDir());
        return source;
    });
    connect(m_classify, &ClassifyPage::errorOccurred, this, &MainWindow::showError);
    connect(m_runs, &RunsPage::errorOccurred, this, &MainWindow::showError);
    connect(m_runs, &RunsPage::runTrashed, this, [this](const QString& folder, const QString& to) {
        appendLog(tr("Moved the run %1 to the trash: %2 (restore it from there)").arg(folder, to));
    });
    connect(m_classify, &ClassifyPage::logMessage, this, &MainWindow::appendLog);
    // The Devices page chose its towers before these connections (GPUs ticked where usable).
    m_model->setGpuTowers(!m_devices->selectedGpus().empty());
    configChanged();
}

void MainWindow::onModelChosen(const QString& model, bool keepHyperparameters)
{
    if (m_restoring) return;
    if (!m_choosingModel) m_modelFromFirstDataset = false;
    if (keepHyperparameters) {
        // The network edited (or its file read again): the user's optimizer, schedule, batch and
        // length stay; only the images' recipe follows the network.
        m_model->form()->setModel(m_model->model().name, m_model->model().definition);
        m_data->refreshRecipe();
        appendLog(tr("Network %1, with the hyperparameters as they were").arg(model));
        configChanged();
        return;
    }
    // A model comes with its own optimizer, schedule, batch and length; the towers stay.
    engine::TrainConfig c = engine::defaultConfigFor(m_model->model());
    c.towers = m_devices->towers();
    c.threadsPerTower = m_devices->threadsPerTower();
    m_model->form()->setConfig(c);
    m_data->refreshRecipe();
    appendLog(tr("Model %1 with its default hyperparameters").arg(model));
    configChanged();
}

void MainWindow::onDatasetLoaded()
{
    const auto dataset = m_data->loadedDataset();
    if (!dataset) return;
    m_model->form()->setTrainingSetSize(
        dataset->train.count, engine::classCounts(dataset->train, dataset->classNames.size()));
    m_model->setClasses(int(dataset->classNames.size()));
    // No model was chosen yet, nor a hyperparameter changed: the dataset's own model, without a
    // word of switching (a learning rate the user set before a first dataset came stays).
    if (std::exchange(m_modelFromFirstDataset, false) &&
        m_model->form()->config().toJson() == m_firstConfigJson) {
        try {
            const QString model = QString::fromStdString(defaultModelOf(dataset->name));
            if (model != m_model->modelName()) {
                const bool choosing = std::exchange(m_choosingModel, true);
                m_model->setModelName(model);
                m_choosingModel = choosing;
            }
        } catch (const std::exception&) {
        }
    }
    // A model that cannot take these images gives way to the dataset's default model.
    try {
        engine::preprocessingFor(m_model->model(), *dataset);
    } catch (const std::exception& e) {
        try {
            const QString fallback = QString::fromStdString(defaultModelOf(dataset->name));
            // Said in the window's words (the engine's names towers-cli's --model).
            const auto shape = [](const engine::Shape& s) {
                return QStringLiteral("%1×%2×%3").arg(s[0]).arg(s[1]).arg(s[2]);
            };
            const engine::Shape in = m_model->model().inputShape;
            const engine::Shape images = dataset->train.imageShape();
            const QString why =
                in.rank() == 3 && images.rank() == 3
                    ? tr("%1 takes %2 images, and %3 has %4")
                          .arg(QString::fromStdString(m_model->model().name), shape(in),
                               QString::fromStdString(dataset->name), shape(images))
                    : QString::fromUtf8(e.what());
            appendLog(tr("%1: switching to %2, a model for its images").arg(why, fallback));
            m_model->setModelName(fallback);
        } catch (const std::exception& none) {
            appendLog(QString::fromUtf8(none.what()));
        }
    }
    configChanged();
}

std::string MainWindow::defaultModelOf(const std::string& dataset) const
{
    return engine::defaultModelFor(
        engine::datasetSpecAlong(dataset, app::searchPathWith(m_data->dataDir())));
}

engine::TrainConfig MainWindow::pagesConfig() const
{
    engine::TrainConfig c = m_model->form()->config();
    c.model = m_model->model().name;
    c.modelDefinition = m_model->model().definition;
    c.dataset = m_data->datasetName().toStdString();
    c.towers = m_devices->towers();
    c.threadsPerTower = m_devices->threadsPerTower();
    c.precision = m_devices->precision();
    c.gpuData = m_devices->gpuData();
    c.allreduce = m_devices->allreduce();
    c.cudaGraphs = m_devices->cudaGraphs();
    c.allowTf32 = m_devices->tf32();
    c.cudnnBenchmark = m_devices->cudnnBenchmark();
    c.bucketMb = m_devices->bucketMb();
    return c;
}

void MainWindow::configChanged()
{
    if (m_restoring || !m_train) return;
    if (m_model->form()->isSavable()) {
        const engine::TrainConfig c = pagesConfig();
        m_settings.setLastConfigJson(QString::fromStdString(c.toJson()));
    }
    m_train->refreshStartability();
}

std::optional<engine::SessionOptions> MainWindow::newRunOptions(QString* error) const
{
    auto fail = [error](const QString& why) {
        if (error) *error = why;
        return std::nullopt;
    };
    if (const QString busy = lrTestBusy(); !busy.isEmpty()) return fail(busy);
    if (!m_model->form()->isValid())
        return fail(tr("%1 (Model & hyperparameters)").arg(m_model->form()->error()));
    if (!m_data->found())
        return fail(tr("%1 is not available (Data page)").arg(m_data->datasetName()));
    engine::TrainConfig c = pagesConfig();
    if (const auto gpus = m_devices->selectedGpus(); !gpus.empty()) { // one tower per checked GPU
        c.backend = "cuda";
        c.gpus = gpus;
    } else { // the GPU options mean nothing to CPU towers: a CPU run records neither
        c.allowTf32 = c.cudnnBenchmark = false;
    }
    c.dataDir = QDir(m_data->dataDir()).absolutePath().toStdString();
    try {
        c.validate();
        if (const auto dataset = m_data->loadedDataset(); dataset && dataset->name == c.dataset)
            engine::preprocessingFor(engine::resolveModel(c.model, c.modelDefinition),
                                     *dataset); // the model must take these images
        app::NewRunRequest r;
        r.config = c;
        r.runsDir = m_runs->runsDir();
        r.searchPath = app::searchPathWith(m_data->dataDir());
        // The Data page found it as training would (loadDatasetPreferring): train on those images
        // rather than reading the files a second time.
        if (auto loaded = m_data->loadedDataset(); loaded && loaded->name == c.dataset)
            r.dataset = loaded;
        return app::planNewRun(std::move(r)); // a new folder, made when the run starts
    } catch (const std::exception& e) {
        return fail(QString::fromUtf8(e.what()));
    }
}

std::optional<engine::SessionOptions> MainWindow::resumeOptions(const QString& folder,
                                                                QString* error) const
{
    try {
        app::ResumeRequest r;
        r.runDir = folder;
        r.searchPath = app::searchPathWith(m_data->dataDir());
        return app::planResume(std::move(r));
    } catch (const std::exception& e) {
        if (error) *error = QString::fromUtf8(e.what());
        return std::nullopt;
    }
}

QString MainWindow::lrTestBusy() const
{
    return m_lrTestRunning && m_lrTestRunning()
               ? tr("a learning-rate range test is training: stop it or close its window first "
                    "(they would share the cores)")
               : QString();
}

void MainWindow::resumeRun(const QString& folder)
{
    QString error;
    auto options = resumeOptions(folder, &error);
    if (!options) {
        showError(tr("Cannot resume %1: %2").arg(folder, error));
        return;
    }
    if (m_train->isActive()) {
        showError(tr("A run is training: stop it before resuming another"));
        return;
    }
    if (const QString busy = lrTestBusy(); !busy.isEmpty()) {
        showError(tr("Cannot resume %1: %2").arg(folder, busy));
        return;
    }
    // Checkpoints of which none loads: the run cannot continue. Starting it over is the user's
    // call, and moves its files aside rather than deleting them.
    const auto unloadable = app::unloadableCheckpoints(*options);
    if (!unloadable.isEmpty()) {
        ++m_restartQuestions;
        const bool startOver =
            m_restartAnswer
                ? *m_restartAnswer
                : QMessageBox::question(this, tr("No checkpoint loads"),
                                        tr("No checkpoint of %1 loads, so the run cannot "
                                           "continue:\n\n%2\n\nStart the run "
                                           "over from step 0? Its files are moved to "
                                           "%1/set-aside/; nothing is deleted.")
                                            .arg(folder, unloadable.join(QLatin1Char('\n'))),
                                        QMessageBox::Yes | QMessageBox::No,
                                        QMessageBox::No) == QMessageBox::Yes;
        if (!startOver) {
            appendLog(tr("Not resumed: no checkpoint of %1 loads").arg(folder));
            return;
        }
        options->setAside = true;
    }
    if (!m_train->startSession(*options)) {
        showError(tr("A run is training: stop it before resuming another"));
        return;
    }
    showPage(Train);
}

void MainWindow::classifyWith(const QString& checkpoint)
{
    m_classify->openCheckpoint(checkpoint);
    showPage(Classify);
}

LrFinderDialog* MainWindow::findLearningRate()
{
    if (m_lrFinder && m_lrFinder->isRunning()) {
        // One at a time: two tests would share the cores (and each other's figures).
        m_lrFinder->raise();
        m_lrFinder->activateWindow();
        return m_lrFinder;
    }
    if (const QString busy = lrTestBusy(); !busy.isEmpty()) {
        showError(tr("The last range test is finishing its step: try again in a moment"));
        return nullptr;
    }
    if (m_lrFinder) m_lrFinder->close(); // a finished test's window: a new test, new figures
    if (m_train->isActive()) {
        showError(tr("A run is training: the range test would share the cores with it. Stop the "
                     "run first."));
        return nullptr;
    }
    const auto dataset = m_data->loadedDataset();
    if (!dataset || dataset->name != m_data->datasetName().toStdString()) {
        showError(tr("Load a dataset on the Data page first: the range test trains on it."));
        return nullptr;
    }
    if (!m_model->form()->isValid()) {
        showError(tr("The hyperparameters are not valid: %1").arg(m_model->form()->error()));
        return nullptr;
    }
    const engine::TrainConfig tested = pagesConfig();
    auto* dialog = new LrFinderDialog(tested, dataset, {}, this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    m_lrFinder = dialog;
    m_lrTestRunning = dialog->runningProbe();
    m_train->refreshStartability(); // no run while the test trains
    connect(dialog, &LrFinderDialog::testEnded, m_train, &TrainPage::refreshStartability);
    // Closed while it trains: its worker ends after the step under way; Start waits for it.
    connect(dialog, &QObject::destroyed, this, [this] {
        auto* poll = new QTimer(this);
        connect(poll, &QTimer::timeout, this, [this, poll] {
            if (!lrTestBusy().isEmpty()) return;
            poll->deleteLater();
            m_train->refreshStartability();
        });
        poll->start(100);
    });
    connect(dialog, &LrFinderDialog::learningRateChosen, this, [this, tested](double lr) {
        // A rate measured for another setup is not this one's (the pages changed meanwhile).
        const engine::TrainConfig now = pagesConfig();
        QStringList changed;
        if (now.model != tested.model || now.modelDefinition != tested.modelDefinition)
            changed << tr("the model");
        if (now.dataset != tested.dataset) changed << tr("the dataset");
        if (now.batchPerTower != tested.batchPerTower || now.accumulate != tested.accumulate ||
            now.towers != tested.towers)
            changed << tr("the batch");
        if (now.optimizer.kind != tested.optimizer.kind) changed << tr("the optimizer");
        if (now.precision != tested.precision) changed << tr("the precision");
        if (!changed.isEmpty()) {
            showError(tr("The range test's rate was not used: %1 changed since it ran (Find… "
                         "runs it again)")
                          .arg(changed.join(QStringLiteral(", "))));
            return;
        }
        m_model->form()->setLearningRate(lr);
        appendLog(tr("Learning rate %1, from the range test").arg(lr));
    });
    dialog->show();
    return dialog;
}

void MainWindow::fineTuneFrom(const QString& checkpoint, const QString& model)
{
    m_modelFromFirstDataset = false;
    // Choosing the model loads its defaults; the checkpoint comes after. The checkpoint's own
    // model: a model file's network comes with it.
    try {
        const engine::CheckpointInfo info = engine::readCheckpointInfo(checkpoint.toStdString());
        m_model->setModel(engine::resolveModel(info.model, info.modelDefinition));
    } catch (const std::exception&) {
        if (!model.isEmpty() && model != m_model->modelName()) m_model->setModelName(model);
    }
    m_model->form()->setInitFrom(checkpoint);
    appendLog(tr("A new run will start from the weights of %1").arg(checkpoint));
    showPage(Model);
}

void MainWindow::showPage(int page)
{
    if (page < 0 || page >= PageCount) return;
    m_sidebar->setCurrentRow(page);
    m_stack->setCurrentIndex(page);
}

int MainWindow::currentPage() const
{
    return m_stack->currentIndex();
}

QWidget* MainWindow::page(int page) const
{
    const auto* scroll = qobject_cast<QScrollArea*>(m_stack->widget(page));
    return scroll ? scroll->widget() : nullptr;
}

void MainWindow::sayUnsavedSettings(const QString& error)
{
    showError(tr("Your settings are not being saved: %1. Your changes are kept while Towers runs, "
                 "and saved if the file can be written before it quits.")
                  .arg(error));
}

void MainWindow::showError(const QString& message)
{
    m_banner->showMessage(message);
    appendLog(tr("error: %1").arg(message));
}

void MainWindow::appendLog(const QString& line)
{
    m_log->appendPlainText(QStringLiteral("%1  %2").arg(
        QTime::currentTime().toString(QStringLiteral("HH:mm:ss")), line));
}

QIcon MainWindow::applicationIcon()
{
    return QIcon::fromTheme(QStringLiteral(TOWERS_APP_ID),
                            QIcon(QStringLiteral(":/icons/towers.svg")));
}

void MainWindow::closeWithoutAsking(const QString& why)
{
    appendLog(why);
    // A dialog open (a file chooser, the model file editor, a question it asks) runs an event
    // loop of its own, which would keep the application up after the window closed: each is
    // dismissed as cancelled, the innermost first, without the questions a cancel may ask (done,
    // not reject).
    for (int i = 0; i < 32; ++i) {
        QWidget* modal = QApplication::activeModalWidget();
        if (!modal) break;
        if (auto* dialog = qobject_cast<QDialog*>(modal))
            dialog->done(QDialog::Rejected);
        else
            modal->hide();
    }
    m_train->clearQueue(); // nothing more starts, and nothing asks
    if (!m_train->isActive()) {
        close();
        return;
    }
    if (m_closeAfterStop) return; // already stopping
    m_closeAfterStop = true;
    appendLog(tr("Stopping the run before closing…"));
    showPage(Train);
    m_train->stop(); // runFinished closes the window
}

void MainWindow::closeEvent(QCloseEvent* event)
{
    if (m_train->isActive()) {
        if (m_closeAfterStop) { // already stopping: wait for it
            event->ignore();
            return;
        }
        bool stop = false;
        if (m_closeAnswer) {
            stop = *m_closeAnswer;
        } else {
            QString text = tr("Stop the run and close? The run stops after its current step and "
                              "writes a checkpoint, so you can resume it later.");
            if (const int queued = m_train->queuedRuns(); queued > 0)
                text +=
                    QLatin1Char(' ') + tr("The %n queued run(s) will not start.", nullptr, queued);
            stop = QMessageBox::question(this, tr("A run is training"), text,
                                         QMessageBox::Yes | QMessageBox::No,
                                         QMessageBox::No) == QMessageBox::Yes;
        }
        event->ignore();
        if (stop) {
            m_closeAfterStop = true;
            appendLog(tr("Stopping the run before closing…"));
            showPage(Train);
            m_train->stop(); // runFinished closes the window
        }
        return;
    }
    if (const int queued = m_train->queuedRuns(); queued > 0 && !m_closeAfterStop) {
        const bool close =
            m_closeAnswer
                ? *m_closeAnswer
                : QMessageBox::question(
                      this, tr("Runs are queued"),
                      tr("%n run(s) wait in the queue and will not start. Close anyway?", nullptr,
                         queued),
                      QMessageBox::Yes | QMessageBox::No, QMessageBox::No) == QMessageBox::Yes;
        if (!close) {
            event->ignore();
            return;
        }
    }
    m_settings.setWindowGeometry(saveGeometry());
    m_settings.sync();
    event->accept();
}

} // namespace towers::ui
