#include "ui/pages/model_page.h"

#include <QComboBox>
#include <QDir>
#include <QEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QTableView>
#include <QVBoxLayout>

#include <utility>

#include "engine/cpu/host_memory.h"
#include "engine/models/model_file.h"
#include "engine/models/registry.h"
#include "engine/train/memory_need.h"
#include "engine/train/recipe.h"
#include "ui/models/layer_table_model.h"
#include "ui/pages/model_file_editor.h"
#include "ui/widgets/hyperparameter_form.h"

namespace towers::ui {

ModelPage::ModelPage(QWidget* parent)
    : QWidget(parent), m_layers(new LayerTableModel(this)), m_form(new HyperparameterForm)
{
    auto* top = new QHBoxLayout(this);
    auto* modelBox = new QGroupBox(tr("Model"), this);
    auto* modelLayout = new QVBoxLayout(modelBox);
    auto* form = new QFormLayout;
    m_modelCombo = new QComboBox(modelBox);
    for (const auto& info : engine::modelRegistry())
        m_modelCombo->addItem(QString::fromStdString(info.name),
                              QVariant::fromValue(quintptr(&info)));
    m_openFile = new QPushButton(tr("Open model file…"), modelBox);
    m_openFile->setToolTip(tr("A network of your own: a model file (.json) listing its layers "
                              "(see docs/models.md)"));
    m_saveFile = new QPushButton(tr("Save as model file…"), modelBox);
    m_saveFile->setToolTip(tr("Write this network, its augmentation and its recipe as a model "
                              "file (.json) to start a network of your own from: edit it, then "
                              "open it again"));
    m_edit = new QPushButton(tr("Edit…"), modelBox);
    m_edit->setToolTip(tr("Edit the chosen network as a model file, checked as you type"));
    // Edit… beside the picker, the model files' buttons on a row of their own under it, from the
    // box's left edge: the three on one row beside a label's column would make the page wider than
    // a 1024-pixel screen gives it.
    auto* picker = new QHBoxLayout;
    picker->addWidget(m_modelCombo, 1);
    picker->addWidget(m_edit);
    auto* files = new QHBoxLayout;
    files->addWidget(m_openFile);
    files->addWidget(m_saveFile);
    files->addStretch(1);
    auto* modelLabel = new QLabel(tr("&Model:"), modelBox);
    modelLabel->setBuddy(m_modelCombo);
    form->addRow(modelLabel, picker);
    form->addRow(files);
    setTabOrder(m_modelCombo, m_edit); // in the order they show
    setTabOrder(m_edit, m_openFile);
    setTabOrder(m_openFile, m_saveFile);
    m_total = new QLabel(modelBox);
    form->addRow(tr("Parameters:"), m_total);
    m_memory = new QLabel(modelBox);
    m_memory->setWordWrap(true);
    form->addRow(tr("Memory:"), m_memory);
    modelLayout->addLayout(form);
    m_description = new QLabel(modelBox);
    m_description->setWordWrap(true);
    modelLayout->addWidget(m_description);
    m_table = new QTableView(modelBox);
    m_table->setModel(m_layers);
    m_table->verticalHeader()->hide();
    // Rows as tall as their text (a model of twenty layers fits without scrolling).
    m_table->verticalHeader()->setDefaultSectionSize(m_table->fontMetrics().height() + 6);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setWordWrap(false);
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_table->horizontalHeader()->setStretchLastSection(true);
    modelLayout->addWidget(m_table, 1);
    top->addWidget(modelBox, 3);

    auto* scroll = new QScrollArea(this);
    scroll->setWidget(m_form);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    // Never narrower than the form, whose fields' texts change its width: with no horizontal
    // scroll bar, its fields' right edge would be cut off. No wider either: the page fits a
    // 1024-pixel screen beside the sidebar.
    m_formScroll = scroll;
    fitFormColumn();
    m_form->installEventFilter(this);
    top->addWidget(scroll, 2);

    connect(m_openFile, &QPushButton::clicked, this, &ModelPage::chooseModelFile);
    connect(m_saveFile, &QPushButton::clicked, this, &ModelPage::chooseSaveFile);
    connect(m_edit, &QPushButton::clicked, this, &ModelPage::editModel);
    connect(m_modelCombo, &QComboBox::currentIndexChanged, this, [this] {
        showModel();
        emit modelChanged(modelName(), m_sameRecipe);
    });
    connect(m_form, &HyperparameterForm::changed, this, &ModelPage::showMemory);
    showModel();
}

ModelPage::~ModelPage() = default;

void ModelPage::fitFormColumn()
{
    m_formScroll->setMinimumWidth(m_form->minimumSizeHint().width() +
                                  m_formScroll->verticalScrollBar()->sizeHint().width() + 4);
}

bool ModelPage::eventFilter(QObject* watched, QEvent* event)
{
    if (watched == m_form && event->type() == QEvent::LayoutRequest) fitFormColumn();
    return QWidget::eventFilter(watched, event);
}

const engine::ModelInfo& ModelPage::model() const
{
    return *reinterpret_cast<const engine::ModelInfo*>(
        m_modelCombo->currentData().value<quintptr>());
}

QString ModelPage::modelName() const
{
    return QString::fromStdString(model().name);
}

QString ModelPage::modelFileItem(const QString& name)
{
    return tr("%1 (model file)").arg(name);
}

void ModelPage::setModelName(const QString& name)
{
    int i = m_modelCombo->findText(name);
    if (i < 0) i = m_modelCombo->findText(modelFileItem(name));
    if (i >= 0) m_modelCombo->setCurrentIndex(i);
}

namespace {
// What a model trains with by default, but for its name: two networks with the same recipe (an
// edited one, a file saved from a model) keep the form's values between them.
std::string recipeOf(const engine::ModelInfo& info)
{
    try {
        engine::TrainConfig c = engine::defaultConfigFor(info);
        c.model.clear();
        c.modelDefinition.clear();
        return c.toJson();
    } catch (const std::exception&) {
        return {};
    }
}
} // namespace

void ModelPage::setModel(const engine::ModelInfo& info)
{
    // The hyperparameters the user set stay where the new network's recipe is the shown one's;
    // a recipe edited in its file (or another model's) brings its own.
    const std::string recipe = recipeOf(info);
    m_sameRecipe = !recipe.empty() && recipe == recipeOf(model());
    const QVariant item = QVariant::fromValue(quintptr(&info));
    int i = m_modelCombo->findData(item);
    if (i < 0) {
        // A model file's network: in place of an earlier one of its name (another version of the
        // file), else after the built-in models.
        const QString text = modelFileItem(QString::fromStdString(info.name));
        i = m_modelCombo->findText(text);
        if (i < 0) {
            m_modelCombo->addItem(text, item);
            i = m_modelCombo->count() - 1;
        } else {
            m_modelCombo->setItemData(i, item);
            if (i == m_modelCombo->currentIndex()) {
                showModel();
                emit modelChanged(modelName(),
                                  std::exchange(m_sameRecipe, false)); // its new version
                return;
            }
        }
        m_modelCombo->setItemData(i, tr("Your network from a model file"), Qt::ToolTipRole);
    }
    m_modelCombo->setCurrentIndex(i);
    m_sameRecipe = false; // a choice in the picker brings the model's recipe
}

bool ModelPage::openModelFile(const QString& path, QString* error)
{
    try {
        const engine::ModelInfo& info = engine::loadModelFile(path.toStdString());
        m_lastFolder = QFileInfo(path).absolutePath();
        m_paths[&info] = path;
        forgetSavedNotChosen(path); // chosen now
        setModel(info);
        return true;
    } catch (const std::exception& e) {
        if (error) *error = QString::fromUtf8(e.what());
        return false;
    }
}

void ModelPage::chooseModelFile()
{
    const QString path = QFileDialog::getOpenFileName(
        this, tr("Open a model file"), m_lastFolder.isEmpty() ? QDir::homePath() : m_lastFolder,
        tr("Model files (*.json);;All files (*)"));
    if (path.isEmpty()) return;
    QString error;
    if (!openModelFile(path, &error))
        emit errorOccurred(tr("The model file was not opened: %1").arg(error));
}

bool ModelPage::saveModelFile(const QString& path, QString* error)
{
    const engine::ModelInfo& from = model();
    try {
        const std::string name = engine::modelNameForFile(path.toStdString(), from.name);
        engine::saveModelFile(from, name, path.toStdString(), true);
    } catch (const std::exception& e) {
        if (error) *error = QString::fromUtf8(e.what());
        return false;
    }
    if (!openModelFile(path, error)) return false;
    emit logMessage(tr("Saved %1 as the model file %2 (the network %3): edit it, then open it "
                       "with \"Open model file…\" to train your version")
                        .arg(QString::fromStdString(from.name), path, modelName()));
    return true;
}

void ModelPage::chooseSaveFile()
{
    const QString folder = m_lastFolder.isEmpty() ? QDir::homePath() : m_lastFolder;
    const QString name = QString::fromStdString(engine::modelNameForFile("", model().name)) +
                         QStringLiteral(".json");
    QFileDialog dialog(this, tr("Save as a model file"), QDir(folder).filePath(name),
                       tr("Model files (*.json)"));
    dialog.setAcceptMode(QFileDialog::AcceptSave);
    dialog.setDefaultSuffix(QStringLiteral("json"));
    if (dialog.exec() != QDialog::Accepted || dialog.selectedFiles().isEmpty()) return;
    QString error;
    if (!saveModelFile(dialog.selectedFiles().first(), &error))
        emit errorOccurred(tr("The model file was not saved: %1").arg(error));
}

std::unique_ptr<ModelFileEditor> ModelPage::makeEditor()
{
    auto editor = std::make_unique<ModelFileEditor>(model(), modelFilePath(), this);
    if (const QString saved = m_savedNotChosen.value(&model()); !saved.isEmpty()) {
        QString error;
        if (!editor->openFile(saved, &error)) { // gone since: the network's own text
            m_savedNotChosen.remove(&model());
            emit logMessage(tr("The network saved earlier was not opened: %1").arg(error));
        }
    }
    return editor;
}

void ModelPage::editModel()
{
    const auto editor = makeEditor();
    if (editor->exec() == QDialog::Accepted)
        useEdited(*editor);
    else
        editorCancelled(*editor);
}

void ModelPage::forgetSavedNotChosen(const QString& path)
{
    const QString file = QFileInfo(path).absoluteFilePath();
    for (auto it = m_savedNotChosen.begin(); it != m_savedNotChosen.end();)
        it = QFileInfo(it.value()).absoluteFilePath() == file ? m_savedNotChosen.erase(it)
                                                              : std::next(it);
}

void ModelPage::editorCancelled(const ModelFileEditor& editor)
{
    if (editor.savedPath().isEmpty()) return; // nothing written: nothing to say
    m_savedNotChosen[&model()] = editor.savedPath();
    m_lastFolder = QFileInfo(editor.savedPath()).absolutePath();
    emit logMessage(tr("The edited network was saved to %1 and not chosen: the page keeps %2. "
                       "Edit… opens the file again; \"Use this network\" there, or Open model "
                       "file…, chooses it")
                        .arg(editor.savedPath(), modelName()));
}

void ModelPage::useEdited(const ModelFileEditor& editor)
{
    if (!editor.network()) return;
    m_savedNotChosen.remove(&model()); // what it was edited into is chosen now
    if (!editor.path().isEmpty()) forgetSavedNotChosen(editor.path());
    const engine::ModelInfo& kept = engine::keepModel(*editor.network());
    if (!editor.path().isEmpty() && !editor.isModified()) {
        m_paths[&kept] = editor.path();
        m_lastFolder = QFileInfo(editor.path()).absolutePath();
    }
    setModel(kept);
    emit logMessage(editor.path().isEmpty() || editor.isModified()
                        ? tr("Chose the edited network %1 (not saved in a file: the run keeps "
                             "its definition)")
                              .arg(modelName())
                        : tr("Chose the edited network %1 (%2)").arg(modelName(), editor.path()));
}

QString ModelPage::modelFilePath() const
{
    return m_paths.value(&model());
}

qint64 ModelPage::totalParameters() const
{
    return m_layers->totalParameters();
}

void ModelPage::setClasses(int classes)
{
    if (classes == m_classes) return;
    m_classes = classes;
    showModel();
}

void ModelPage::showModel()
{
    const auto& info = model();
    const int classes = m_classes >= 2 ? m_classes : info.numClasses;
    // Building makes the parameters as zeros that take no memory until written (Tensor::zeros):
    // quick and small even for a network of gigabytes.
    std::unique_ptr<engine::Model> built;
    m_networkBytes.reset();
    try {
        built = info.build(classes);
    } catch (const std::exception& e) { // a model file's classifier too large for these classes
        m_buildError = QString::fromUtf8(e.what());
        m_layers->setRows({});
        m_description->setText(tr("%1 cannot be built with %2 classes: %3")
                                   .arg(QString::fromStdString(info.name).toHtmlEscaped())
                                   .arg(classes)
                                   .arg(m_buildError.toHtmlEscaped()));
        m_total->setText(QStringLiteral("–"));
        showMemory();
        return;
    }
    m_networkBytes = engine::networkBytes(*built);
    m_layers->setRows(built->layerTable());
    const QString meantFor =
        info.defaultDataset.empty()
            ? QString()
            : tr("; meant for <b>%1</b>")
                  .arg(QString::fromStdString(info.defaultDataset).toHtmlEscaped());
    m_description->setText(
        tr("%1<br>Input %2 × %3 × %4, %5 classes%6; %7 MFLOP per training example.")
            .arg(QString::fromStdString(info.description).toHtmlEscaped())
            .arg(info.inputShape[0])
            .arg(info.inputShape[1])
            .arg(info.inputShape[2])
            .arg(classes)
            .arg(meantFor)
            .arg(QLocale().toString(built->trainingFlopsPerExample() * 1e-6, 'f', 1)));
    m_total->setText(tr("<b>%1</b> trainable").arg(QLocale().toString(built->parameterCount())));
    showMemory();
}

void ModelPage::setGpuTowers(bool gpus)
{
    if (gpus == m_gpuTowers) return;
    m_gpuTowers = gpus;
    showMemory();
}

QString ModelPage::memoryText() const
{
    return m_memory->text();
}

void ModelPage::showMemory()
{
    const auto notWorkedOut = [this](const QString& why) {
        m_memory->setText(tr("not worked out: %1").arg(why));
        m_memory->setStyleSheet(QStringLiteral("color: #c62828"));
        m_memory->setToolTip(QString());
    };
    // A network that cannot be made with these classes (its classifier too large), or whose
    // weights cannot even be set aside.
    if (!m_networkBytes) return notWorkedOut(m_buildError);
    // Said here, never thrown out of the form's signal.
    try {
        const engine::TrainConfig c = m_form->config();
        if (m_gpuTowers) {
            // Each GPU's free memory is asked when the run starts (asking it here would start
            // CUDA's context on every GPU, for this application's life): a tower's part; the
            // first tower's GPU keeps the moving average besides; a tower that accumulates its
            // gradients, their sum (as checkGpuMemory counts it).
            engine::MemoryNeed need = engine::gpuMemoryNeed(
                *m_networkBytes, 1, std::max(1, c.batchPerTower), c.optimizer.kind, 0, 0);
            engine::addAccumulation(need, *m_networkBytes, c.accumulate);
            const QString average =
                c.emaDecay > 0 ? tr(" The first tower's GPU keeps the moving average too (%1).")
                                     .arg(QString::fromStdString(
                                         engine::cpu::byteText(m_networkBytes->weights)))
                               : QString();
            m_memory->setText(tr("at least %1 on a GPU for each tower × %2")
                                  .arg(QString::fromStdString(engine::cpu::byteText(need.floor())))
                                  .arg(need.batchPerTower));
            m_memory->setStyleSheet(QString());
            m_memory->setToolTip(
                tr("%1. Towers sharing a GPU need that each.%2 Where the towers make their "
                   "images on the GPUs, each holds the training set as well; CUDA's context and "
                   "cuDNN's workspaces come on top. The run is refused at its start where a GPU "
                   "has less free (docs/training.md).")
                    .arg(QString::fromStdString(need.parts()), average));
            return;
        }
        engine::MemoryNeed need =
            engine::hostMemoryNeed(*m_networkBytes, std::max(1, c.towers),
                                   std::max(1, c.batchPerTower), c.optimizer.kind, c.emaDecay > 0);
        // Towers that accumulate their gradients hold their sum besides (checkHostMemory too).
        engine::addAccumulation(need, *m_networkBytes, c.accumulate);
        // As the run's start checks it (checkHostMemory): the memory against what the machine
        // and the control group leave; under an address-space limit (ulimit -v) that and the
        // address space the run's threads set aside against what the limit leaves.
        engine::MemoryNeed inAddressSpace = need;
        inAddressSpace.threads = engine::runThreadsAddressSpace(c);
        const auto shared = engine::cpu::sharedHostMemory();
        const auto own = engine::cpu::addressSpaceRoom();
        const bool sharedShort = shared && need.floor() > shared->bytes;
        const bool ownShort = own && inAddressSpace.floor() > own->bytes;
        // Shown against the room that refuses the run, else the tighter one.
        const bool againstOwn =
            !sharedShort && own && (ownShort || !shared || own->bytes < shared->bytes);
        const std::optional<engine::cpu::HostMemory> room = againstOwn ? own : shared;
        const engine::MemoryNeed& shown = againstOwn ? inAddressSpace : need;
        const QString floor = QString::fromStdString(engine::cpu::byteText(shown.floor()));
        const QString free =
            room ? QString::fromStdString(engine::cpu::byteText(room->bytes)) : QString();
        const QString towers = tr("%n tower(s)", nullptr, need.towers);
        QString text = tr("at least %1 for %2 × %3").arg(floor, towers).arg(need.batchPerTower);
        const bool tooMuch = sharedShort || ownShort;
        if (tooMuch)
            text = tr("at least %1 for %2 × %3: more than the %4 this application may take (%5); "
                      "fewer towers, a smaller batch or a smaller network would fit")
                       .arg(floor, towers)
                       .arg(need.batchPerTower)
                       .arg(free, QString::fromStdString(room->limitedBy));
        else if (room)
            text += tr(", %1 free").arg(free);
        m_memory->setText(text);
        m_memory->setStyleSheet(tooMuch ? QStringLiteral("color: #c62828") : QString());
        m_memory->setToolTip(
            tr("%1; %2 more while a checkpoint is read back. The outputs' gradients and the "
               "convolutions' workspaces come on top (docs/training.md).")
                .arg(QString::fromStdString(shown.parts()),
                     QString::fromStdString(engine::cpu::byteText(need.checkpoint))));
    } catch (const std::exception& e) {
        notWorkedOut(QString::fromUtf8(e.what()));
    }
}

} // namespace towers::ui
