// The Classify page (classify_page.h): its widgets, the checkpoint, image files and the answers
// it shows; the dataset's sets (choosing one, its images, the whole set's results, the dead
// channels counted over it) are in classify_page_sets.cpp.
#include "ui/pages/classify_page.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QGridLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QImageReader>
#include <QLabel>
#include <QListView>
#include <QLocale>
#include <QPointer>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QSplitter>
#include <QStandardItemModel>
#include <QTableView>
#include <QTimer>
#include <QVBoxLayout>

#include <algorithm>
#include <utility>

#include "app/devices/device_list.h"
#include "app/inference/image_files.h"
#include "engine/train/train_config.h"
#include "ui/models/class_accuracy_model.h"
#include "ui/models/sample_image_model.h"
#include "ui/pages/classify_many_dialog.h"
#include "ui/pages/import_images_dialog.h"
#include "ui/pages/layers_dialog.h"
#include "ui/plots/bar_chart.h"
#include "ui/plots/heat_map.h"
#include "ui/widgets/image_drop_area.h"

namespace towers::ui {

namespace {

// The classes an answer shows: the chart's five, Classify many's and its CSV's.
constexpr int kTopClasses = 5;

} // namespace

ClassifyPage::ClassifyPage(QWidget* parent)
    : QWidget(parent), m_progressTimer(new QTimer(this)),
      m_classModel(new ClassAccuracyModel(this)), m_cellImages(new SampleImageModel(this))
{
    buildUi();
    std::vector<RunOn> runOn{{tr("CPU"), {}}};
    for (const app::DeviceDescription& d : app::listDevices()) {
        if (d.kind != app::DeviceDescription::Kind::Gpu || d.cudaNumber < 0) continue;
        engine::InferenceDevice gpu;
        gpu.backend = "cuda";
        gpu.gpu = d.cudaNumber;
        runOn.push_back({tr("%1, %2").arg(app::gpuLabel(d), d.name), gpu});
    }
    setRunOnChoices(std::move(runOn));
    m_progressTimer->setInterval(100);
    connect(m_progressTimer, &QTimer::timeout, this, [this] {
        if (m_done && m_images)
            m_progress->setValue(int(1000 * double(m_done->load()) /
                                     double(std::max<std::int64_t>(1, m_images->count))));
    });
    updateControls();
}

ClassifyPage::~ClassifyPage()
{
    if (m_cancel) m_cancel->store(true); // a whole-set job still running stops after its chunk
}

void ClassifyPage::buildUi()
{
    auto* top = new QVBoxLayout(this);
    top->addLayout(makeCheckpointRow());

    auto* split = new QSplitter(Qt::Vertical, this);
    // One image and its top 5.
    split->addWidget(makeSingleImage(split));

    // A whole set.
    split->addWidget(makeSetBox(split));
    split->setStretchFactor(0, 2);
    split->setStretchFactor(1, 5);
    top->addWidget(split, 1);

    connectSignals();
    updateSetTexts();
}

QHBoxLayout* ClassifyPage::makeCheckpointRow()
{
    auto* ckRow = new QHBoxLayout;
    auto* openCk = new QPushButton(tr("Open &checkpoint…"), this);
    connect(openCk, &QPushButton::clicked, this, &ClassifyPage::chooseCheckpoint);
    m_info = new QLabel(
        tr("Open a checkpoint (a run's checkpoints/ckpt-*.safetensors) to classify with it."),
        this);
    m_info->setWordWrap(true);
    m_info->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_runOnBox = new QWidget(this);
    auto* runOnRow = new QHBoxLayout(m_runOnBox);
    runOnRow->setContentsMargins(0, 0, 0, 0);
    m_runOn = new QComboBox(m_runOnBox);
    m_runOn->setObjectName(QStringLiteral("runOn"));
    m_runOn->setToolTip(tr("Where the network runs: the CPU, or a GPU (as towers-cli eval "
                           "--device cuda --gpu N)"));
    connect(m_runOn, &QComboBox::activated, this, &ClassifyPage::setRunOn);
    auto* runOnLabel = new QLabel(tr("Ru&n on"), m_runOnBox);
    runOnLabel->setBuddy(m_runOn);
    runOnRow->addWidget(runOnLabel);
    runOnRow->addWidget(m_runOn);
    m_mirror = new QCheckBox(tr("&Average with the mirror image"), this);
    m_mirror->setObjectName(QStringLiteral("averageMirror"));
    connect(m_mirror, &QCheckBox::toggled, this, &ClassifyPage::onMirrorToggled);
    ckRow->addWidget(openCk, 0, Qt::AlignTop);
    ckRow->addWidget(m_info, 1);
    ckRow->addWidget(m_mirror, 0, Qt::AlignTop);
    ckRow->addWidget(m_runOnBox, 0, Qt::AlignTop);
    updateMirrorChoice();
    return ckRow;
}

QWidget* ClassifyPage::makeSingleImage(QSplitter* split)
{
    auto* single = new QWidget(split);
    auto* singleLayout = new QHBoxLayout(single);
    singleLayout->setContentsMargins(0, 0, 0, 0);
    auto* imageColumn = new QVBoxLayout;
    m_image = new ImageDropArea(single);
    m_image->setHint(
        tr("Drop an image file here, or click to open one (several files: each in a table)"));
    imageColumn->addWidget(m_image, 1);
    auto* captionRow = new QHBoxLayout;
    m_inputView = new QLabel(single);
    m_inputView->setToolTip(tr("What the model sees: the image brought to the dataset's size"));
    m_caption = new QLabel(single);
    m_caption->setWordWrap(true);
    captionRow->addWidget(m_inputView);
    captionRow->addWidget(m_caption, 1);
    imageColumn->addLayout(captionRow);
    auto* imageButtons = new QHBoxLayout;
    m_openImage = new QPushButton(tr("Open &image…"), single);
    m_imageIndex = new QSpinBox(single);
    m_imageIndex->setRange(0, 0);
    m_classifyIndex = new QPushButton(tr("Cla&ssify"), single);
    m_randomImage = new QPushButton(single);
    m_invert = new QCheckBox(tr("In&vert"), single);
    m_invert->setToolTip(
        tr("For grey-scale models: dark strokes on white become light on black, as in MNIST"));
    imageButtons->addWidget(m_openImage);
    imageButtons->addWidget(m_imageIndex);
    imageButtons->addWidget(m_classifyIndex);
    imageButtons->addWidget(m_randomImage);
    imageButtons->addWidget(m_invert);
    m_layersButton = new QPushButton(tr("&Layers…"), single);
    m_layersButton->setToolTip(
        tr("What each layer of the network makes of this image: its outputs as pictures, a "
           "convolution's filters, and their figures"));
    connect(m_layersButton, &QPushButton::clicked, this, &ClassifyPage::openLayers);
    imageButtons->addWidget(m_layersButton);
    imageButtons->addStretch(1);
    imageColumn->addLayout(imageButtons);
    singleLayout->addLayout(imageColumn, 1);
    m_topChart = new BarChart(tr("Five most probable classes"), Qt::Horizontal, single);
    m_topChart->setValueRange(0, 1.2);
    m_topChart->setValueText(QStringLiteral("%1 %"), 100, 1);
    m_topChart->setValueLabel(tr("probability"));
    singleLayout->addWidget(m_topChart, 1);
    return single;
}

QGroupBox* ClassifyPage::makeSetBox(QSplitter* split)
{
    auto* all = new QGroupBox(split);
    m_setBox = all;
    auto* allLayout = new QVBoxLayout(all);
    auto* allRow = new QHBoxLayout;
    m_setChoice = new QComboBox(all);
    m_setChoice->setObjectName(QStringLiteral("evalSet"));
    m_setChoice->addItem(tr("Test set"), int(EvalSet::Test));
    m_setChoice->addItem(tr("Validation set"), int(EvalSet::Validation));
    m_setChoice->addItem(tr("Training set"), int(EvalSet::Train));
    m_classifyAll = new QPushButton(all);
    m_cancelAll = new QPushButton(tr("Cancel"), all);
    m_progress = new QProgressBar(all);
    m_progress->setRange(0, 1000);
    m_summary = new QLabel(all);
    m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
    allRow->addWidget(m_setChoice);
    allRow->addWidget(m_classifyAll);
    allRow->addWidget(m_cancelAll);
    allRow->addWidget(m_progress, 1);
    allLayout->addLayout(allRow);
    allLayout->addWidget(m_summary);
    allLayout->addWidget(makeSetResults(all), 1);
    return all;
}

QSplitter* ClassifyPage::makeSetResults(QGroupBox* all)
{
    auto* results = new QSplitter(Qt::Horizontal, all);
    m_classTable = new QTableView(results);
    m_classTable->setModel(m_classModel);
    m_classTable->verticalHeader()->hide();
    m_classTable->verticalHeader()->setDefaultSectionSize(m_classTable->fontMetrics().height() + 6);
    m_classTable->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_classTable->horizontalHeader()->setSectionResizeMode(ClassAccuracyModel::Class,
                                                           QHeaderView::Stretch);
    // The counts are each row's tooltip: the scores need the room.
    m_classTable->setColumnHidden(ClassAccuracyModel::Images, true);
    m_classTable->setColumnHidden(ClassAccuracyModel::Correct, true);
    m_classTable->setColumnHidden(ClassAccuracyModel::Top5, true); // for more than 10 classes
    m_heatMap = new HeatMap(results);
    m_heatMap->setToolTip(tr("Click a cell to see its images"));
    QWidget* cellBox = makeCellBox(results);
    results->addWidget(m_classTable);
    results->addWidget(m_heatMap);
    results->addWidget(cellBox);
    results->setStretchFactor(0, 3);
    results->setStretchFactor(1, 5);
    results->setStretchFactor(2, 3);
    return results;
}

QWidget* ClassifyPage::makeCellBox(QSplitter* results)
{
    auto* cellBox = new QWidget(results);
    auto* cellLayout = new QVBoxLayout(cellBox);
    cellLayout->setContentsMargins(0, 0, 0, 0);
    m_cellLabel = new QLabel(
        tr("Click a cell of the matrix to see its images; double-click an image to classify it."),
        cellBox);
    m_cellLabel->setWordWrap(true);
    m_surestMistakes = new QPushButton(tr("Surest &mistakes"), cellBox);
    m_surestMistakes->setToolTip(
        tr("The %1 wrong answers the network was most sure of: where mislabelled images and "
           "classes that look alike show first")
            .arg(kSurestMistakes));
    m_cellView = new QListView(cellBox);
    m_cellView->setViewMode(QListView::IconMode);
    m_cellView->setMovement(QListView::Static);
    m_cellView->setResizeMode(QListView::Adjust);
    m_cellView->setUniformItemSizes(true);
    m_cellImages->setTileSize(56);
    m_cellImages->setShowLabels(false); // every image of a cell has the same true class
    m_cellImages->setPageSize(200);
    m_cellView->setIconSize(QSize(56, 56));
    m_cellView->setGridSize(QSize(64, 64));
    m_cellView->setModel(m_cellImages);
    auto* cellTop = new QHBoxLayout;
    cellTop->addWidget(m_cellLabel, 1);
    cellTop->addWidget(m_surestMistakes, 0, Qt::AlignTop);
    cellLayout->addLayout(cellTop);
    cellLayout->addWidget(m_cellView, 1);
    return cellBox;
}

void ClassifyPage::connectSignals()
{
    connect(m_image, &ImageDropArea::fileDropped, this, &ClassifyPage::classifyFile);
    connect(m_image, &ImageDropArea::filesDropped, this, &ClassifyPage::classifyFiles);
    connect(m_image, &ImageDropArea::clicked, this, &ClassifyPage::chooseImage);
    connect(m_openImage, &QPushButton::clicked, this, &ClassifyPage::chooseImage);
    connect(m_classifyIndex, &QPushButton::clicked, this,
            [this] { classifySetImage(m_imageIndex->value()); });
    connect(m_randomImage, &QPushButton::clicked, this, &ClassifyPage::classifyRandomSetImage);
    connect(m_classifyAll, &QPushButton::clicked, this, &ClassifyPage::classifyWholeSet);
    connect(m_cancelAll, &QPushButton::clicked, this, &ClassifyPage::cancelWholeSet);
    connect(m_setChoice, &QComboBox::activated, this,
            [this] { setEvalSet(EvalSet(m_setChoice->currentData().toInt())); });
    connect(m_heatMap, &HeatMap::cellClicked, this, &ClassifyPage::showCell);
    connect(m_surestMistakes, &QPushButton::clicked, this, &ClassifyPage::showSurestMistakes);
    connect(m_cellView, &QListView::doubleClicked, this, [this](const QModelIndex& i) {
        classifySetImage(m_cellImages->data(i, SampleImageModel::DatasetIndexRole).toLongLong());
    });
}

bool ClassifyPage::isBusy() const
{
    return m_load.isRunning() || m_datasetJob.isRunning() || m_imageJob.isRunning() ||
           m_wholeSetJob.isRunning();
}

QString ClassifyPage::summaryText() const
{
    return m_summary->text();
}

QString ClassifyPage::checkpointText() const
{
    return m_info->text();
}

QString ClassifyPage::checkpointToolTip() const
{
    return m_info->toolTip();
}

QString ClassifyPage::captionText() const
{
    return m_caption->text();
}

void ClassifyPage::chooseCheckpoint()
{
    const QString path =
        QFileDialog::getOpenFileName(this, tr("Open a checkpoint"), m_checkpointPath,
                                     tr("Towers checkpoints (*.safetensors);;All files (*)"));
    if (!path.isEmpty()) openCheckpoint(path);
}

void ClassifyPage::setRunOnChoices(std::vector<RunOn> choices)
{
    if (choices.empty()) choices.push_back({tr("CPU"), {}});
    m_runOnChoices = std::move(choices);
    m_runOn->clear();
    for (const RunOn& r : m_runOnChoices) m_runOn->addItem(r.name);
    m_runOnBox->setVisible(m_runOnChoices.size() > 1);
    setRunOnChoiceShown(0);
    if (!m_requestedPath.isEmpty()) openCheckpoint(m_requestedPath); // on the first choice
}

void ClassifyPage::setRunOn(int index)
{
    if (index < 0 || index >= int(m_runOnChoices.size())) return;
    const bool changed = index != m_runOnIndex;
    setRunOnChoiceShown(index);
    if (changed && !m_requestedPath.isEmpty()) openCheckpoint(m_requestedPath);
}

void ClassifyPage::setRunOnChoiceShown(int index)
{
    if (index < 0 || index >= int(m_runOnChoices.size())) index = 0; // of choices since replaced
    m_runOnIndex = index;
    m_runOn->setCurrentIndex(index);
}

void ClassifyPage::openCheckpoint(const QString& path)
{
    cancelWholeSet();
    m_imageJob.cancel();
    m_requestedPath = path;
    const RunOn& where = m_runOnChoices.at(std::size_t(m_runOnIndex));
    m_info->setText(where.device.backend == "onednn"
                        ? tr("Loading %1…").arg(path.toHtmlEscaped())
                        : tr("Loading %1 on %2…").arg(path.toHtmlEscaped(), where.name));
    m_info->setToolTip(QString());
    m_load.start(
        [path, device = where.device, runOn = m_runOnIndex] {
            auto shared = std::make_shared<Shared>();
            shared->runOn = runOn;
            shared->classifier = std::make_unique<engine::Classifier>(
                path.toStdString(), /*useEma=*/true, 0, std::nullopt, device);
            shared->filters = shared->classifier->convolutionFilters();
            // The validation set its run held out (TrainConfig::validation), drawn again as the
            // run drew it when it is chosen.
            const std::string& config = shared->classifier->info().config;
            if (config.empty()) {
                shared->noValidation = tr("the checkpoint does not carry its run's configuration");
            } else {
                try {
                    shared->validationShare = engine::TrainConfig::fromJson(config).validation;
                    if (shared->validationShare <= 0)
                        shared->noValidation =
                            tr("the checkpoint's run held out no validation set (train with a "
                               "validation set to hold one out)");
                } catch (const std::exception& e) {
                    shared->noValidation =
                        tr("the checkpoint's run configuration cannot be read: %1")
                            .arg(QString::fromUtf8(e.what()));
                }
            }
            return shared;
        },
        [this, path](const auto& r) { onCheckpoint(r, path); });
    updateControls();
}

void ClassifyPage::onCheckpoint(const app::JobResult<std::shared_ptr<Shared>>& r,
                                const QString& path)
{
    if (!r.ok()) {
        // On a GPU the device may be what failed (its memory, its driver): the page says where,
        // and goes on with what it had, on the device that had it.
        const RunOn& tried = m_runOnChoices.at(std::size_t(m_runOnIndex));
        const QString where = tried.device.backend == "onednn" ? QString() : tried.name;
        if (m_classifier) setRunOnChoiceShown(m_classifier->runOn);
        const QString why =
            where.isEmpty()
                ? tr("cannot use %1: %2").arg(path.toHtmlEscaped(), r.error.toHtmlEscaped())
                : tr("cannot use %1 on %2: %3")
                      .arg(path.toHtmlEscaped(), where.toHtmlEscaped(), r.error.toHtmlEscaped());
        // The page answers with the checkpoint it had: the header names it, then the failure.
        m_info->setText(
            m_classifier ? tr("<b>Still using %1</b> (in %2); %3")
                               .arg(QFileInfo(m_checkpointPath).fileName().toHtmlEscaped(),
                                    QFileInfo(m_checkpointPath).absolutePath().toHtmlEscaped(), why)
                         : tr("<b>No checkpoint:</b> %1").arg(why));
        emit errorOccurred(where.isEmpty()
                               ? tr("Cannot load the checkpoint: %1").arg(r.error)
                               : tr("Cannot load the checkpoint on %1: %2").arg(where, r.error));
        emit checkpointLoaded(false);
        updateControls();
        return;
    }
    m_classifier = *r.value;
    m_checkpointPath = path;
    setRunOnChoiceShown(m_classifier->runOn);
    const engine::Classifier& c = *m_classifier->classifier;
    const auto& info = c.info();
    m_classNames.clear();
    for (const auto& n : c.classNames()) m_classNames << QString::fromStdString(n);
    while (m_classNames.size() < c.numClasses())
        m_classNames << QString::number(m_classNames.size());
    m_source = c.sourceShape();
    if (m_dataset && m_dataset->name != info.dataset) m_dataset.reset();
    // The set stays chosen where this checkpoint's run has it too; its images are drawn again,
    // as another run may have held out another share.
    if (m_set == EvalSet::Validation && validationShare() <= 0) m_set = EvalSet::Test;
    m_images.reset();
    m_activity.reset();
    clearWholeSetResults();
    m_topChart->clear();
    m_top.clear();
    m_layers.clear();
    m_info->setText(
        tr("<b>%1</b> — %2 trained on %3 for %4 steps%5; %6 classes; images of %7 × %8 × %9")
            .arg(QFileInfo(path).fileName().toHtmlEscaped(), QString::fromStdString(info.model),
                 info.dataset.empty() ? tr("an unnamed dataset")
                                      : QString::fromStdString(info.dataset),
                 QLocale().toString(qint64(info.step)),
                 c.usesEma() ? tr(" (moving-average weights)") : QString(),
                 QString::number(c.numClasses()))
            .arg(m_source[0])
            .arg(m_source[1])
            .arg(m_source[2]) +
        // How an image file becomes one, where its dataset was imported otherwise than cropped.
        ImportImagesDialog::fitNote(info.imageFit) +
        // A run trained in bf16 is evaluated as it evaluated itself, where this CPU can; the
        // reason why not in the tooltip.
        (!c.precisionNote().empty()
             ? (c.device().isHost()
                    ? tr("; trained in bf16, evaluated in float32 (this CPU does not run bf16)")
                    : tr("; trained in bf16, evaluated in float32 (this GPU does not run bf16)"))
         : c.precision() == engine::Precision::BFloat16 ? tr("; evaluated in bf16, as its run was")
                                                        : QString()) +
        (c.device().isHost()
             ? QString()
             : tr("; on %1").arg(
                   m_runOnChoices.at(std::size_t(m_runOnIndex)).name.toHtmlEscaped())));
    m_info->setToolTip(QString::fromStdString(c.precisionNote()));
    m_invert->setEnabled(m_source[2] == 1);
    m_classifyShownAgain = nullptr;
    updateMirrorChoice();
    updateSetTexts();
    emit logMessage(tr("Classifier loaded from %1").arg(path));
    emit checkpointLoaded(true);
    updateControls();
}

void ClassifyPage::chooseImage()
{
    if (!hasClassifier()) return;
    QStringList patterns;
    for (const QByteArray& f : QImageReader::supportedImageFormats())
        patterns << QStringLiteral("*.") + QString::fromLatin1(f);
    const QStringList paths = QFileDialog::getOpenFileNames(
        this, tr("Open images (several: classify many)"), QString(),
        tr("Images (%1);;All files (*)").arg(patterns.join(QLatin1Char(' '))));
    if (paths.size() == 1)
        classifyFile(paths.front());
    else if (paths.size() > 1)
        classifyFiles(paths);
}

ClassifyManyDialog* ClassifyPage::classifyFiles(const QStringList& paths)
{
    if (!hasClassifier()) {
        emit errorOccurred(tr("Open a checkpoint before classifying images"));
        return nullptr;
    }
    if (m_manyCancel) m_manyCancel->store(true); // the previous window's files stop
    auto cancel = std::make_shared<std::atomic<bool>>(false);
    m_manyCancel = cancel;
    auto* dialog =
        new ClassifyManyDialog(m_classifier->classifier->classNames(), kTopClasses, this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    auto done = std::make_shared<std::atomic<int>>(0);
    dialog->watchProgress(done, int(paths.size()));
    connect(dialog, &ClassifyManyDialog::cancelRequested, this, [cancel] { cancel->store(true); });
    connect(dialog, &QObject::destroyed, this, [cancel] { cancel->store(true); });
    connect(dialog, &ClassifyManyDialog::imageChosen, this, &ClassifyPage::classifyFile);
    dialog->show();
    const QPointer<ClassifyManyDialog> guard(dialog);
    const auto shared = m_classifier;
    m_manyJob.start(
        [shared, paths, cancel, done, mirror = averagesMirror()] {
            std::lock_guard lock(shared->mutex);
            useMirror(*shared->classifier, mirror);
            return app::classifyFiles(*shared->classifier, paths, kTopClasses, cancel.get(),
                                      [done](int n, int) { done->store(n); });
        },
        [this, guard, cancel,
         n = paths.size()](const app::JobResult<std::vector<app::FileAnswer>>& r) {
            if (!guard) return;
            if (!r.ok()) {
                guard->setAnswers({}, false);
                emit errorOccurred(tr("Classifying the files failed: %1").arg(r.error));
                return;
            }
            guard->setAnswers(*r.value, cancel->load() && qsizetype(r.value->size()) < n);
            // Only the files answered count as classified; the unreadable ones are named apart.
            const auto unread = std::count_if(r.value->begin(), r.value->end(),
                                              [](const auto& a) { return !a.error.isEmpty(); });
            const qsizetype classified = qsizetype(r.value->size()) - qsizetype(unread);
            QString line = tr("Classified %1 of %n file(s)", nullptr, int(n)).arg(classified);
            if (unread > 0) line += tr("; %n could not be read", nullptr, int(unread));
            emit logMessage(line);
        });
    return dialog;
}

void ClassifyPage::classifyFile(const QString& path)
{
    if (!hasClassifier()) {
        emit errorOccurred(tr("Open a checkpoint before classifying images"));
        return;
    }
    // The reading of `towers-cli classify`, with its guarantees (app/inference/image_files.h):
    // only a regular file is opened (a FIFO or a folder dropped here never blocks), an image over
    // the size limits is refused from its header, and one is decoded no larger than the model
    // needs. Bounded so, the decoding stays on this thread.
    QImage image;
    try {
        image = app::readImageFile(path, m_source);
    } catch (const std::exception& e) {
        showImageError(QString::fromUtf8(e.what()));
        return;
    }
    classifyImage(image, QFileInfo(path).fileName());
}

void ClassifyPage::showImageError(const QString& message)
{
    // The page no longer shows the previous answer, as if it were this file's.
    m_imageJob.cancel();
    m_classifyShownAgain = nullptr;
    m_image->setImage(QImage());
    m_inputView->clear();
    m_topChart->clear();
    m_top.clear();
    m_layers.clear();
    updateControls();
    m_caption->setText(tr("<b>Cannot classify:</b> %1").arg(message.toHtmlEscaped()));
    emit errorOccurred(message);
}

ClassifyPage::ImageAnswer ClassifyPage::answerFor(engine::Classifier& classifier,
                                                  const engine::ImageSet& one)
{
    // The answer as towers-cli classify and eval give it (batch norms folded into the
    // convolutions before them); every layer's output from a pass of its own, layer by layer.
    auto layers = classifier.layerOutputs(one, 0);
    return ImageAnswer{app::toQImage(one, 0),
                       engine::Classifier::topK(classifier.probabilities(one).at(0), kTopClasses),
                       std::move(layers)};
}

bool ClassifyPage::averagesMirror() const
{
    return m_mirror->isEnabled() && m_mirror->isChecked();
}

void ClassifyPage::useMirror(engine::Classifier& classifier, bool mirror)
{
    classifier.setTestTimeAugmentation(mirror ? engine::TestTimeAugmentation::Mirror
                                              : engine::TestTimeAugmentation::None);
}

void ClassifyPage::updateMirrorChoice()
{
    const QString what =
        tr("Test-time augmentation (towers-cli eval --tta mirror): each image's answer from the "
           "mean of its logits and its left-right mirror image's, as the fast CIFAR-10 trainers "
           "evaluate. Twice the work; often a few tenths of a percent more accuracy.");
    if (!m_classifier) {
        m_mirror->setEnabled(false);
        m_mirror->setToolTip(what + QLatin1Char('\n') + tr("Open a checkpoint first."));
        return;
    }
    const std::string unseen = m_classifier->classifier->mirrorUnseen();
    const QSignalBlocker quiet(m_mirror); // nothing was classified with another choice yet
    m_mirror->setEnabled(unseen.empty());
    if (!unseen.empty()) m_mirror->setChecked(false);
    m_mirror->setToolTip(
        unseen.empty()
            ? what
            : what + QLatin1Char('\n') +
                  tr("Not for this checkpoint: %1.").arg(QString::fromStdString(unseen)));
}

void ClassifyPage::onMirrorToggled()
{
    // The answers shown were given with the other choice.
    cancelWholeSet();
    clearWholeSetResults();
    if (m_classifyShownAgain) m_classifyShownAgain();
}

void ClassifyPage::classifyImage(const QImage& image, const QString& caption)
{
    if (!hasClassifier()) return;
    m_classifyShownAgain = [this, image, caption] { classifyImage(image, caption); };
    QImage input = image;
    if (m_invert->isEnabled() && m_invert->isChecked()) input.invertPixels();
    m_image->setImage(image);
    const auto shared = m_classifier;
    const engine::Shape source = m_source;
    m_imageJob.start(
        [shared, input, source, mirror = averagesMirror()] {
            std::lock_guard lock(shared->mutex);
            useMirror(*shared->classifier, mirror);
            engine::ImageSet set;
            set.height = source[0];
            set.width = source[1];
            set.channels = source[2];
            // As the checkpoint's dataset brought its image files to size (import --fit).
            app::appendImage(input, source, set, shared->classifier->info().imageFit);
            return answerFor(*shared->classifier, set);
        },
        [this, caption](const app::JobResult<ImageAnswer>& r) {
            if (!r.ok()) {
                showImageError(tr("Classifying %1 failed: %2").arg(caption, r.error));
                return;
            }
            showAnswer(*r.value, caption);
        });
}

void ClassifyPage::showAnswer(const ImageAnswer& answer, const QString& caption)
{
    m_top.clear();
    QStringList labels;
    QVector<double> values;
    for (const auto& s : answer.top) {
        const QString name = m_classNames.value(s.label, QString::number(s.label));
        m_top.emplace_back(name, s.probability);
        labels << name;
        values << s.probability;
    }
    m_topChart->setBars(labels, values);
    const int thumb = 3 * int(std::max<std::int64_t>(m_source[0], 16));
    m_inputView->setPixmap(QPixmap::fromImage(
        answer.input.scaled(thumb, thumb, Qt::KeepAspectRatio, Qt::FastTransformation)));
    m_caption->setText(m_top.empty()
                           ? caption
                           : tr("%1<br><b>%2</b> (%3 %)")
                                 .arg(caption.toHtmlEscaped(), m_top.front().first.toHtmlEscaped(),
                                      QLocale().toString(m_top.front().second * 100, 'f', 1)));
    m_layers = answer.layers;
    updateControls();
    emit imageClassified();
}

void ClassifyPage::updateControls()
{
    const bool ready = hasClassifier() && !m_load.isRunning();
    for (QWidget* w : std::initializer_list<QWidget*>{m_openImage, m_imageIndex, m_classifyIndex,
                                                      m_randomImage, m_classifyAll})
        w->setEnabled(ready);
    m_setChoice->setEnabled(ready);
    // The validation set only where the checkpoint's run held one out (setEvalSet's rule).
    if (auto* items = qobject_cast<QStandardItemModel*>(m_setChoice->model()))
        items->item(m_setChoice->findData(int(EvalSet::Validation)))
            ->setEnabled(validationShare() > 0);
    m_image->setEnabled(ready);
    m_cancelAll->setEnabled(m_wholeSetJob.isRunning());
    m_invert->setEnabled(ready && m_source.rank() == 3 && m_source[2] == 1);
    m_layersButton->setEnabled(ready && !m_layers.empty());
    m_surestMistakes->setEnabled(m_predictions.has_value() && m_dataset != nullptr);
}

LayersDialog* ClassifyPage::openLayers()
{
    if (m_layers.empty() || !m_classifier) return nullptr;
    auto* dialog =
        new LayersDialog(m_layers, m_classifier->filters,
                         // The caption is this image's: an error clears the layers with the answer.
                         tr("%1 — %2").arg(m_caption->text(),
                                           QFileInfo(m_checkpointPath).fileName().toHtmlEscaped()),
                         this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    dialog->show();
    countDeadChannels(dialog);
    return dialog;
}

} // namespace towers::ui
