#include "ui/pages/runs_page.h"
#include <algorithm>
#include <cmath>

#include <QAction>
#include <QComboBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QMenu>
#include <QMessageBox>
#include <QPushButton>
#include <QSet>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStyle>
#include <QTableView>
#include <QVBoxLayout>

#include "app/runs/run_trash.h"
#include "app/settings/app_settings.h"
#include "ui/models/checkpoint_list_model.h"
#include "ui/models/run_list_model.h"
#include "ui/pages/run_follower.h"
#include "ui/pages/runs_page_export_dialog.h"
#include "ui/plots/plot_theme.h"
#include "ui/plots/plot_widget.h"
#include "ui/plots/rate_plot.h"
#include "ui/plots/stacked_bar_chart.h"
#include "ui/widgets/button_rows.h"
#include "ui/widgets/config_tree.h"
#include "ui/widgets/open_folder.h"

namespace towers::ui {

namespace {

// Run names short enough for a legend entry or a column header. What all the names start with
// goes, up to the separator before where they differ ("…101500" and "…114233" for the tool's
// "fashion-mnist-fashion-fast-20261130-101500" and "-114233"); what is still long keeps its start
// and its end, shortened in the middle, as short as the names stay distinct (in full where they
// would not).
QStringList shortRunNames(const QStringList& names)
{
    if (names.size() < 2) return names;
    qsizetype common = names.front().size();
    for (const QString& n : names) {
        qsizetype k = 0;
        while (k < common && k < n.size() && n[k] == names.front()[k]) ++k;
        common = k;
    }
    // Back to just after a separator, so that a word is never cut.
    qsizetype cut = common;
    while (cut > 0 && !QStringLiteral("-_. ").contains(names.front()[cut - 1])) --cut;
    QStringList tails;
    for (const QString& n : names)
        tails << (cut > 3 && cut < n.size() ? QStringLiteral("…") + n.mid(cut) : n);
    for (const int most : {16, 24, 32}) {
        QStringList out;
        for (const QString& n : tails)
            out << (n.size() <= most ? n : n.left(5) + QStringLiteral("…") + n.right(most - 6));
        if (QSet<QString>(out.begin(), out.end()).size() == names.size()) return out;
    }
    return names;
}

QString towersText(int n)
{
    return RunsPage::tr("%n tower(s)", nullptr, n);
}

// "4 towers", or across processes "2 processes × 2 towers = 4 towers"; ", bf16" after it for a
// run in bfloat16.
QString layoutText(const engine::TrainConfig& c)
{
    QString text = c.processes <= 1
                       ? towersText(c.towers)
                       : RunsPage::tr("%1 processes × %2 = %3")
                             .arg(c.processes)
                             .arg(towersText(c.towers), towersText(c.processes * c.towers));
    if (c.precision != engine::Precision::Float32)
        text += QStringLiteral(", ") +
                QString::fromStdString(std::string(engine::precisionName(c.precision)));
    return text;
}

} // namespace

RunsPage::RunsPage(app::AppSettings& settings, QWidget* parent)
    : QWidget(parent), m_settings(settings), m_follower(new RunFollower(this)),
      m_runs(new RunListModel(this)), m_checkpoints(new CheckpointListModel(this))
{
    auto* top = new QVBoxLayout(this);
    const auto [browse, refreshButton] = buildFolderRow(top);
    buildPanes(top);

    connectFolderRow(browse, refreshButton);
    connectTablesAndButtons();
    buildCheckpointMenu();
    buildRunMenu();
    connectExportFolderAndFollower();
    updateButtons();
    refresh();
}

std::pair<QPushButton*, QPushButton*> RunsPage::buildFolderRow(QVBoxLayout* top)
{
    auto* dirRow = new QHBoxLayout;
    m_dirEdit = new QLineEdit(m_settings.runsDir(), this);
    auto* dirLabel = new QLabel(tr("R&uns folder:"), this);
    dirLabel->setBuddy(m_dirEdit);
    auto* browse = new QPushButton(tr("&Browse…"), this);
    auto* refreshButton =
        new QPushButton(style()->standardIcon(QStyle::SP_BrowserReload), tr("&Refresh"), this);
    dirRow->addWidget(dirLabel);
    dirRow->addWidget(m_dirEdit, 1);
    dirRow->addWidget(browse);
    dirRow->addWidget(refreshButton);
    top->addLayout(dirRow);
    return {browse, refreshButton};
}

void RunsPage::buildPanes(QVBoxLayout* top)
{
    auto* split = new QSplitter(Qt::Horizontal, this);
    // The runs above the chosen run's configuration, the details on the right.
    auto* left = new QSplitter(Qt::Vertical, split);
    QWidget* runsBox = buildRunList(left);

    auto* details = new QWidget(split);
    auto* dl = new QVBoxLayout(details);
    dl->setContentsMargins(0, 0, 0, 0);
    buildTitleAndPlots(details, dl);
    buildCheckpointsAndButtons(details, dl);
    // The run's config.json as settings and values (a nested object as a branch).
    m_config = new ConfigTree(left);
    buildTowerChart(details, dl);
    left->addWidget(runsBox);
    left->addWidget(m_config);
    left->setStretchFactor(0, 1); // the runs as tall as the configuration: three rows on a
    left->setStretchFactor(1, 1); // 640-pixel screen were too few
    split->addWidget(left);
    split->addWidget(details);
    split->setStretchFactor(0, 1);
    split->setStretchFactor(1, 1);
    // The run list a little wider than the details: its name column takes what its figures leave.
    split->setSizes({640, 520});
    top->addWidget(split, 1);
}

QWidget* RunsPage::buildRunList(QSplitter* left)
{
    // The runs, sortable by any column (raw values: RunListModel's EditRole) and filtered by the
    // words typed above them; newest change first, as the scan lists them.
    m_sorted = new QSortFilterProxyModel(this);
    m_sorted->setSourceModel(m_runs);
    m_sorted->setSortRole(Qt::EditRole);
    m_sorted->setFilterRole(RunListModel::FilterRole);
    m_sorted->setFilterCaseSensitivity(Qt::CaseInsensitive);
    auto* runsBox = new QWidget(left);
    auto* rl = new QVBoxLayout(runsBox);
    rl->setContentsMargins(0, 0, 0, 0);
    m_filter = new QLineEdit(runsBox);
    m_filter->setPlaceholderText(tr("Filter runs by name, model or dataset"));
    m_filter->setClearButtonEnabled(true);
    rl->addWidget(m_filter);
    m_table = new QTableView(runsBox);
    m_table->setModel(m_sorted);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    // Several runs selected (Ctrl- or Shift-click): their curves on the same plots.
    m_table->setSelectionMode(QAbstractItemView::ExtendedSelection);
    m_table->setToolTip(tr("Ctrl-click or Shift-click runs to compare their curves"));
    m_table->verticalHeader()->hide();
    // Rows as tall as their text, as the other tables.
    m_table->verticalHeader()->setDefaultSectionSize(m_table->fontMetrics().height() + 6);
    // The run's name takes the room the figures leave (its middle elided, so that its dataset,
    // model and time stay), so the table needs no sideways scroll; the header's context menu
    // shows or hides the other columns (Model, Dataset and Checkpoints are hidden at first: the
    // name and the title say them), and only columns shown beyond the pane's width scroll.
    QHeaderView* header = m_table->horizontalHeader();
    header->setSectionResizeMode(QHeaderView::ResizeToContents);
    header->setSectionResizeMode(RunListModel::Run, QHeaderView::Stretch);
    header->setStretchLastSection(false);
    header->setSortIndicator(RunListModel::Modified, Qt::DescendingOrder);
    m_table->setSortingEnabled(true);
    m_table->setTextElideMode(Qt::ElideMiddle);
    m_table->setWordWrap(false);
    const QStringList hidden = m_settings.hiddenRunColumns();
    for (int c = 0; c < RunListModel::ColumnCount; ++c)
        m_table->setColumnHidden(c, c != RunListModel::Run &&
                                        hidden.contains(RunListModel::columnKey(c)));
    header->setContextMenuPolicy(Qt::CustomContextMenu);
    connect(header, &QHeaderView::customContextMenuRequested, this, [this](const QPoint& at) {
        QMenu menu(this);
        for (QAction* a : columnActions()) {
            a->setParent(&menu);
            menu.addAction(a);
        }
        menu.exec(m_table->horizontalHeader()->mapToGlobal(at));
    });
    connect(m_filter, &QLineEdit::textChanged, this, [this](const QString& text) {
        m_sorted->setFilterFixedString(text.trimmed());
        if (!m_table->currentIndex().isValid() && m_sorted->rowCount() > 0)
            m_table->setCurrentIndex(m_sorted->index(0, 0));
        showSelected();
    });
    rl->addWidget(m_table, 1);
    return runsBox;
}

void RunsPage::buildTitleAndPlots(QWidget* details, QVBoxLayout* dl)
{
    m_title = new QLabel(tr("Select a run."), details);
    m_title->setWordWrap(true);
    m_title->setTextInteractionFlags(Qt::TextSelectableByMouse);
    dl->addWidget(m_title);
    m_followStatus = new QLabel(details);
    m_followStatus->setWordWrap(true);
    m_followStatus->setFrameShape(QFrame::StyledPanel);
    m_followStatus->setMargin(4);
    m_followStatus->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_followStatus->hide();
    dl->addWidget(m_followStatus);
    // What the left plot shows: the loss, or the learning rate and the gradients' norm (to see a
    // divergence coming, a run that clips, two rates compared). A choice over the plot rather than
    // a third plot, for which the details have no room.
    auto* choiceRow = new QHBoxLayout;
    m_leftPlotChoice = new QComboBox(details);
    m_leftPlotChoice->addItem(tr("Loss"));
    m_leftPlotChoice->addItem(RatePlot::title());
    m_leftPlotChoice->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    m_leftPlotChoice->setToolTip(
        tr("What the left plot shows: the loss, or the learning rate and the gradients' norm "
           "before any clipping (for runs compared, each one's norm)"));
    auto* choiceLabel = new QLabel(tr("Left &plot:"), details);
    choiceLabel->setBuddy(m_leftPlotChoice);
    choiceRow->addWidget(choiceLabel);
    choiceRow->addWidget(m_leftPlotChoice);
    choiceRow->addStretch(1);
    dl->addLayout(choiceRow);
    // As the last session left it.
    if (m_settings.runsLeftPlot() == QLatin1String("rates")) setLeftPlot(LeftPlot::Rates);
    connect(m_leftPlotChoice, &QComboBox::currentIndexChanged, this, [this] {
        m_settings.setRunsLeftPlot(leftPlot() == LeftPlot::Rates ? QStringLiteral("rates")
                                                                 : QStringLiteral("loss"));
        showPlots();
    });
    auto* plots = new QHBoxLayout;
    m_lossPlot = new PlotWidget(tr("Loss"), details);
    m_lossPlot->setAxisLabels(tr("step"), QString());
    m_accuracyPlot = new PlotWidget(tr("Test accuracy"), details);
    m_accuracyPlot->setYRange(0, 1);
    // Under the plots, two entries a row: many runs' names would cover the curves.
    m_lossPlot->setLegendBelow(2);
    m_accuracyPlot->setLegendBelow(2);
    setPlotSeries({});
    m_accuracyPlot->setAxisLabels(tr("step"), QString());
    for (auto* p : {m_lossPlot, m_accuracyPlot}) {
        p->setMinimumHeight(170);
        p->setEmptyMessage(tr("nothing logged"));
        plots->addWidget(p);
    }
    dl->addLayout(plots, 2);
}

void RunsPage::buildCheckpointsAndButtons(QWidget* details, QVBoxLayout* dl)
{
    m_checkpointTable = new QTableView(details);
    m_checkpointTable->setModel(m_checkpoints);
    m_checkpointTable->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_checkpointTable->setSelectionMode(QAbstractItemView::SingleSelection);
    m_checkpointTable->verticalHeader()->hide();
    m_checkpointTable->verticalHeader()->setDefaultSectionSize(
        m_checkpointTable->fontMetrics().height() + 6);
    m_checkpointTable->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_checkpointTable->horizontalHeader()->setStretchLastSection(true);
    dl->addWidget(new QLabel(tr("Checkpoints (newest first):"), details));
    dl->addWidget(m_checkpointTable, 1);
    m_resume = new QPushButton(paletteIcon(QStyle::SP_MediaPlay), tr("Re&sume this run"), details);
    m_classify = new QPushButton(tr("&Classify with this checkpoint"), details);
    m_openFolder =
        new QPushButton(style()->standardIcon(QStyle::SP_DirOpenIcon), tr("Open &folder"), details);
    m_exportOnnx = new QPushButton(tr("E&xport ONNX…"), details);
    m_exportOnnx->setToolTip(
        tr("Writes the checkpoint's model as an ONNX file for onnxruntime and other "
           "tools: inference form, moving-average weights when it has them (or the raw "
           "ones), NHWC or NCHW input, an opset to choose, the preprocessing and class "
           "names in its metadata"));
    m_exportStatus = new QLabel(details);
    m_exportStatus->setWordWrap(true);
    m_exportStatus->setTextFormat(Qt::PlainText);
    m_exportStatus->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_exportStatus->hide();
    dl->addWidget(new ButtonRows({m_resume, m_classify, m_exportOnnx, m_openFolder}, details));
    dl->addWidget(m_exportStatus);
}

void RunsPage::buildTowerChart(QWidget* details, QVBoxLayout* dl)
{
    // The Devices page's parts and colours: compute blue, communication orange, data purple,
    // update green.
    m_towerChart = new StackedBarChart(tr("Latest logged step"), Qt::Horizontal, details);
    m_towerChart->setSegments({tr("data wait"), tr("compute"), tr("communication"), tr("update")},
                              {4, 0, 1, 2});
    m_towerChart->setUnit(tr("ms"));
    m_towerChart->setValueTextsVisible(true);
    m_towerChart->setToolTip(
        tr("Where each tower's latest logged step went (metrics.jsonl \"towerTimes\"): "
           "waiting for data, forward and backward, averaging the gradients not hidden behind "
           "backward (and waiting for the other towers), the update. Hover a bar for its values."));
    m_towerChart->setMinimumHeight(170);
    m_towerChart->hide();
    dl->addWidget(m_towerChart, 2);
}

void RunsPage::connectFolderRow(QPushButton* browse, QPushButton* refreshButton)
{
    connect(browse, &QPushButton::clicked, this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(this, tr("Runs folder"), runsDir());
        if (!dir.isEmpty()) setRunsDir(dir);
    });
    connect(refreshButton, &QPushButton::clicked, this, &RunsPage::refresh);
    connect(m_dirEdit, &QLineEdit::editingFinished, this, [this] {
        if (QDir::cleanPath(m_dirEdit->text()) == QDir::cleanPath(m_settings.runsDir())) return;
        m_settings.setRunsDir(runsDir());
        emit runsDirChanged(runsDir());
        refresh();
    });
}

void RunsPage::connectTablesAndButtons()
{
    connect(m_table->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            &RunsPage::showSelected);
    connect(m_table->selectionModel(), &QItemSelectionModel::selectionChanged, this,
            &RunsPage::updateComparison);
    connect(m_checkpointTable->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            &RunsPage::updateButtons);
    connect(m_resume, &QPushButton::clicked, this, [this] {
        if (!selectedRun().isEmpty()) emit resumeRequested(selectedRun());
    });
    connect(m_classify, &QPushButton::clicked, this, [this] {
        if (!selectedCheckpoint().isEmpty()) emit classifyRequested(selectedCheckpoint());
    });
    connect(m_checkpointTable, &QTableView::doubleClicked, this, [this] {
        if (!selectedCheckpoint().isEmpty()) emit classifyRequested(selectedCheckpoint());
    });
}

void RunsPage::buildCheckpointMenu()
{
    // The checkpoint's other uses: its context menu.
    m_checkpointTable->setContextMenuPolicy(Qt::ActionsContextMenu);
    auto* classifyAction = new QAction(tr("Classify with this checkpoint"), m_checkpointTable);
    auto* fineTuneAction =
        new QAction(tr("Start a new run from this checkpoint…"), m_checkpointTable);
    fineTuneAction->setToolTip(
        tr("Fine-tuning: the Model & hyperparameters page's \"Start from\" gets this checkpoint; "
           "pick the dataset and start as usual"));
    m_checkpointTable->addAction(classifyAction);
    m_checkpointTable->addAction(fineTuneAction);
    connect(classifyAction, &QAction::triggered, m_classify, &QPushButton::click);
    connect(fineTuneAction, &QAction::triggered, this, [this] {
        const QString checkpoint = selectedCheckpoint();
        if (checkpoint.isEmpty()) return;
        const auto* r = currentRun();
        emit fineTuneRequested(checkpoint, r && r->config ? QString::fromStdString(r->config->model)
                                                          : QString());
    });
}

void RunsPage::buildRunMenu()
{
    // The run's own context menu: its folder, and the trash (Delete).
    m_table->setContextMenuPolicy(Qt::ActionsContextMenu);
    auto* likeAction = new QAction(tr("New run like this…"), m_table);
    likeAction->setToolTip(tr("A new run with this run's dataset, model, hyperparameters and "
                              "towers, set on the Model & hyperparameters page to change and "
                              "start (towers-cli train --like RUN)"));
    auto* openFolderAction = new QAction(tr("Open folder"), m_table);
    m_trashAction =
        new QAction(style()->standardIcon(QStyle::SP_TrashIcon), tr("Move to trash…"), m_table);
    m_trashAction->setShortcut(QKeySequence::Delete);
    m_trashAction->setShortcutContext(Qt::WidgetShortcut);
    m_table->addAction(likeAction);
    m_table->addAction(openFolderAction);
    m_table->addAction(m_trashAction);
    connect(likeAction, &QAction::triggered, this, [this] {
        if (!selectedRun().isEmpty()) emit newRunLikeRequested(selectedRun());
    });
    connect(openFolderAction, &QAction::triggered, m_openFolder, &QPushButton::click);
    connect(m_trashAction, &QAction::triggered, this, &RunsPage::askToTrashSelectedRun);
}

void RunsPage::connectExportFolderAndFollower()
{
    connect(m_exportOnnx, &QPushButton::clicked, this, &RunsPage::openExportDialog);
    connect(m_openFolder, &QPushButton::clicked, this, [this] {
        if (selectedRun().isEmpty()) return;
        if (const QString why = openFolder(selectedRun()); !why.isEmpty()) emit errorOccurred(why);
    });
    connect(m_follower, &RunFollower::updated, this, &RunsPage::onFollowerUpdated);
    connect(m_follower, &RunFollower::stateChanged, this, [this](RunFollower::State state) {
        // The other process let the run go: its final checkpoints and step in the list too.
        if (state == RunFollower::State::Ended) refresh();
    });
}

RunsPage::~RunsPage() = default;

QString RunsPage::runsDir() const
{
    return QDir::cleanPath(m_dirEdit->text().trimmed());
}

void RunsPage::setRunsDir(const QString& dir)
{
    m_dirEdit->setText(dir);
    emit m_dirEdit->editingFinished();
}

void RunsPage::selectRun(const QString& folder)
{
    const int row = m_runs->rowOf(folder);
    if (row < 0) {
        m_pendingSelection = folder;
        return;
    }
    m_pendingSelection.clear();
    const QModelIndex index = m_sorted->mapFromSource(m_runs->index(row, 0));
    if (!index.isValid()) { // filtered out: shown again
        m_filter->clear();
        return selectRun(folder);
    }
    m_table->selectRow(index.row());
    m_table->setCurrentIndex(index);
}

int RunsPage::currentRunRow() const
{
    return m_sorted->mapToSource(m_table->currentIndex()).row();
}

const app::RunSummary* RunsPage::currentRun() const
{
    return m_runs->run(currentRunRow());
}

QList<QAction*> RunsPage::columnActions()
{
    QList<QAction*> actions;
    for (int c = 0; c < RunListModel::ColumnCount; ++c) {
        if (c == RunListModel::Run) continue; // always shown
        auto* a = new QAction(m_runs->headerData(c, Qt::Horizontal).toString(), this);
        a->setCheckable(true);
        a->setChecked(!m_table->isColumnHidden(c));
        connect(a, &QAction::toggled, this, [this, c](bool shown) {
            m_table->setColumnHidden(c, !shown);
            QStringList hidden;
            for (int i = 0; i < RunListModel::ColumnCount; ++i)
                if (m_table->isColumnHidden(i)) hidden << RunListModel::columnKey(i);
            m_settings.setHiddenRunColumns(hidden);
        });
        actions << a;
    }
    return actions;
}

QString RunsPage::selectedRun() const
{
    const auto* r = currentRun();
    return r ? r->folder : QString();
}

QString RunsPage::selectedCheckpoint() const
{
    const int row = m_checkpointTable->currentIndex().row();
    return row >= 0 ? m_checkpoints->path(row) : m_checkpoints->path(0);
}

void RunsPage::setResumeAllowed(bool allowed)
{
    m_resumeAllowed = allowed;
    updateButtons();
}

void RunsPage::setOwnRunFolder(const QString& folder)
{
    m_follower->setOwnRunFolder(folder);
    updateButtons();
}

void RunsPage::showEvent(QShowEvent* event)
{
    QWidget::showEvent(event);
    m_follower->setActive(true);
}

void RunsPage::hideEvent(QHideEvent* event)
{
    QWidget::hideEvent(event);
    m_follower->setActive(false);
}

void RunsPage::refresh()
{
    const QString dir = runsDir();
    if (m_pendingSelection.isEmpty()) m_pendingSelection = selectedRun();
    m_scan.start(
        [dir] {
            Scan scan;
            scan.runs = app::scanRuns(dir, &scan.problems);
            return scan;
        },
        [this](const auto& r) { onScanned(r); });
}

void RunsPage::onScanned(const app::JobResult<Scan>& r)
{
    const QString keep = m_pendingSelection;
    m_runs->setRuns(r.ok() ? r.value->runs : std::vector<app::RunSummary>{});
    m_folderProblem = r.ok() ? r.value->problems.folder : QString();
    // Folders that cannot be entered (a run there is not listed): said once, and again when they
    // change, not at every refresh.
    const QStringList inside = r.ok() ? r.value->problems.inside : QStringList();
    if (inside != m_shownProblems && !inside.isEmpty())
        emit errorOccurred(tr("Not listed, as their folders cannot be entered: %1")
                               .arg(inside.join(QStringLiteral("; "))));
    m_shownProblems = inside;
    if (!keep.isEmpty() && m_runs->rowOf(keep) >= 0)
        selectRun(keep);
    else if (m_sorted->rowCount() > 0)
        selectRun(m_sorted->index(0, 0).data(RunListModel::FolderRole).toString());
    else
        showSelected();
    emit refreshed();
}

void RunsPage::showSelected()
{
    const auto* r = currentRun();
    const QString folder = r ? r->folder : QString();
    if (folder != m_shownRun) {
        m_shownRun = folder;
        // Emptied, and the rate plot's series (its clipping bound) to be set up for this run.
        if (m_compared.isEmpty()) setPlotSeries({});
        m_towerChart->clear();
        m_towerChart->hide();
    }
    m_follower->setRun(folder); // reads it (again: only what was appended), follows it if live
    showConfiguration();
    if (!r) {
        m_checkpoints->setCheckpoints({});
    } else {
        m_checkpoints->setCheckpoints(r->checkpoints, r->evaluations);
        if (m_checkpoints->rowCount() > 0) m_checkpointTable->selectRow(0);
    }
    updateTitle();
    updateButtons();
}

void RunsPage::showConfiguration()
{
    if (m_compared.size() < 2) {
        const auto* r = currentRun();
        m_config->showConfig(r ? r->configJson : QString());
        return;
    }
    QStringList names, configs;
    for (const QString& folder : m_compared)
        if (const auto* r = m_runs->run(m_runs->rowOf(folder))) {
            names << r->name;
            configs << r->configJson;
        }
    m_config->showDifferences(names, shortRunNames(names), configs);
}

void RunsPage::updateTitle()
{
    const auto* r = currentRun();
    if (!r) {
        m_title->setText(
            m_runs->rowCount() ? tr("Select a run.")
            : m_folderProblem.isEmpty()
                ? tr("No runs in %1 yet: start one on the Train page.")
                      .arg(runsDir().toHtmlEscaped())
                : tr("The runs cannot be listed: %1.").arg(m_folderProblem.toHtmlEscaped()));
        m_followStatus->hide();
        return;
    }
    QString title = QStringLiteral("<b>%1</b>").arg(r->name.toHtmlEscaped());
    if (r->config)
        title += tr(" — %1 on %2, %3, step %4")
                     .arg(QString::fromStdString(r->config->model),
                          QString::fromStdString(r->config->dataset), layoutText(*r->config),
                          QLocale().toString(qint64(r->lastStep)));
    const bool validation = app::evaluatesOnValidation(*r);
    if (r->accuracy)
        title += (validation ? tr(", validation accuracy %1 % at step %2")
                             : tr(", test accuracy %1 % at step %2"))
                     .arg(QLocale().toString(*r->accuracy * 100, 'f', 2))
                     .arg(r->accuracyStep);
    if (app::failed(*r))
        title += tr(", failed after step %1: %2")
                     .arg(QString::number(r->failure->step), r->failure->error.toHtmlEscaped());
    else if (app::stoppedEarly(*r))
        title += tr(", stopped early (%1 evaluations in a row without a better one)")
                     .arg(r->config->patience);
    if (m_compared.isEmpty()) {
        m_accuracyPlot->setTitle(validation ? tr("Validation accuracy") : tr("Test accuracy"));
        if (leftPlot() == LeftPlot::Loss)
            m_lossPlot->setSeriesName(1, validation ? tr("validation cross-entropy")
                                                    : tr("test cross-entropy"));
    }
    if (r->config && !r->config->initFrom.empty())
        title += tr("; started from %1")
                     .arg(QString::fromStdString(r->config->initFrom).toHtmlEscaped());
    if (!r->problem.isEmpty()) title += QStringLiteral("<br>⚠ ") + r->problem.toHtmlEscaped();
    m_title->setText(title);

    const QString status = followStatus();
    m_followStatus->setText(status);
    m_followStatus->setVisible(!status.isEmpty());
}

QString RunsPage::followStatus() const
{
    const app::RunCurves& c = m_follower->curves();
    const QString step = c.steps.isEmpty() ? tr("nothing logged yet")
                         : c.totalSteps > 0
                             ? tr("step %1 of %2")
                                   .arg(QLocale().toString(qint64(c.steps.back())),
                                        QLocale().toString(qint64(c.totalSteps)))
                             : tr("step %1").arg(QLocale().toString(qint64(c.steps.back())));
    switch (m_follower->state()) {
    case RunFollower::State::Live: {
        QString text = tr("● Training in progress in another process (%1) — following live, "
                          "read-only: %2")
                           .arg(m_follower->holder(), step);
        if (!c.steps.isEmpty() && c.examplesPerSec > 0)
            text += tr(", %1 examples/s").arg(QLocale().toString(c.examplesPerSec, 'f', 0));
        return text + QLatin1Char('.');
    }
    case RunFollower::State::Ended: {
        // At its last step and evaluated there (a stop during that evaluation leaves it to a
        // resume), as the runs listing says.
        const bool finished = !c.steps.isEmpty() && c.totalSteps > 0 &&
                              std::int64_t(c.steps.back()) >= c.totalSteps &&
                              !c.evalSteps.isEmpty() &&
                              std::int64_t(c.evalSteps.back()) >= c.totalSteps;
        return (finished ? tr("■ Training finished in the other process (%1): %2. No longer "
                              "following: it released the run folder.")
                         : tr("■ Training stopped in the other process (%1) at %2. No longer "
                              "following: it released the run folder; resume it here or there."))
            .arg(m_follower->holder(), step);
    }
    case RunFollower::State::None:
    case RunFollower::State::Still:
        break;
    }
    return {};
}

void RunsPage::onFollowerUpdated()
{
    const auto* r = currentRun();
    if (!r || r->folder != m_follower->run()) return;
    const app::RunCurves& c = m_follower->curves();
    if (m_compared.isEmpty()) showRunCurves();
    showTowerTimes();
    showCheckpoints(m_follower->checkpoints(), app::evaluationsOf(c));

    // The list's row says what the logs say now (the scan is older).
    app::RunSummary now = *r;
    now.checkpoints = m_follower->checkpoints();
    now.lastStep = now.checkpoints.empty() ? 0 : now.checkpoints.back().step;
    if (!c.steps.isEmpty()) {
        now.lastStep = std::max(now.lastStep, std::int64_t(c.steps.back()));
        now.lastLoss = c.loss.back();
    }
    if (!c.accuracy.isEmpty()) {
        now.accuracy = c.accuracy.back();
        now.accuracyStep = std::int64_t(c.evalSteps.back());
    }
    now.evaluations = app::evaluationsOf(c);
    if (m_follower->isLive())
        now.trainingBy = m_follower->holder();
    else if (m_follower->state() == RunFollower::State::Ended)
        now.trainingBy.reset();
    m_runs->updateRun(currentRunRow(), std::move(now));
    updateTitle();
    updateButtons();
}

void RunsPage::showTowerTimes()
{
    const auto* r = currentRun();
    const app::RunCurves& c = m_follower->curves();
    if (!r || c.towerTimes.empty()) {
        m_towerChart->clear();
        m_towerChart->hide();
        return;
    }
    const int n = int(c.towerTimes.size());
    const int processes = r->config ? r->config->processes : 1;
    const int towers = r->config ? r->config->towers : n;
    // Global towers are numbered rank by rank; a log that does not match the layout is numbered
    // as it comes.
    const bool byRank = processes > 1 && processes * towers == n;
    QStringList labels;
    QVector<QVector<double>> values;
    for (int i = 0; i < n; ++i) {
        labels << (byRank ? tr("rank %1 · tower %2").arg(i / towers).arg(i % towers)
                          : tr("tower %1").arg(i));
        const engine::TowerTimes& t = c.towerTimes[std::size_t(i)];
        values.push_back({t.dataMs, t.computeMs, t.commMs, t.updateMs});
    }
    m_towerChart->setTitle(
        tr("Where each tower's step %1 went").arg(QLocale().toString(qint64(c.towerTimesStep))));
    m_towerChart->setBars(labels, values);
    m_towerChart->show();
}

void RunsPage::showCheckpoints(const std::vector<engine::CheckpointFile>& checkpoints,
                               const std::vector<engine::EvaluationMark>& evaluations)
{
    // Only when they changed: a new model would lose the row the user chose.
    bool same = int(checkpoints.size()) == m_checkpoints->rowCount();
    for (std::size_t i = 0; same && i < checkpoints.size(); ++i)
        same = m_checkpoints->path(int(checkpoints.size() - 1 - i)) ==
               QString::fromStdString(checkpoints[i].path.string());
    const auto* r = currentRun();
    m_checkpoints->setValidation(r && app::evaluatesOnValidation(*r));
    if (same) {
        m_checkpoints->setEvaluations(evaluations); // an evaluation after its checkpoint
        return;
    }
    const bool chosen = m_checkpointTable->currentIndex().row() > 0;
    const QString keep = selectedCheckpoint();
    m_checkpoints->setCheckpoints(checkpoints, evaluations);
    int row = 0;
    for (int i = 0; chosen && i < m_checkpoints->rowCount(); ++i)
        if (m_checkpoints->path(i) == keep) row = i;
    if (m_checkpoints->rowCount() > 0) m_checkpointTable->selectRow(row);
}

QStringList RunsPage::selectedRuns() const
{
    QStringList folders;
    for (const QModelIndex& index : m_table->selectionModel()->selectedRows())
        folders << index.data(RunListModel::FolderRole).toString();
    return folders;
}

RunsPage::LeftPlot RunsPage::leftPlot() const
{
    return LeftPlot(m_leftPlotChoice->currentIndex());
}

void RunsPage::setLeftPlot(LeftPlot plot)
{
    m_leftPlotChoice->setCurrentIndex(int(plot));
}

void RunsPage::setPlotSeries(const QStringList& names)
{
    const bool rates = leftPlot() == LeftPlot::Rates;
    m_lossPlot->clearSeries();
    m_accuracyPlot->clearSeries();
    m_rateSeries.reset();
    m_lossPlot->setToolTip(QString());
    // Runs compared show each one's norm alone: the choice says so.
    m_leftPlotChoice->setItemText(int(LeftPlot::Rates),
                                  names.isEmpty() ? RatePlot::title() : tr("Gradient norm"));
    if (!rates)
        m_lossPlot->setAxisLabels(tr("step"), QString());
    else if (names.isEmpty())
        RatePlot::labelAxes(m_lossPlot);
    else
        m_lossPlot->setAxisLabels(tr("step"), tr("gradient norm"));
    m_lossPlot->setEmptyMessage(rates && !names.isEmpty() ? tr("no gradient norm logged")
                                                          : tr("nothing logged"));
    if (names.isEmpty()) { // one run: its loss and accuracy, as the Train page draws them
        if (rates) {
            showRates({}); // its series as what it logged asks for, once read
        } else {
            m_lossPlot->addSeries(tr("loss"));
            m_lossPlot->addSeries(tr("test cross-entropy"), PlotWidget::SeriesStyle::evaluations());
            m_lossPlot->setTitle(tr("Loss"));
        }
        m_accuracyPlot->addSeries(tr("precision @ 1"), PlotWidget::SeriesStyle::evaluations());
        // Precision @ 5, for a run that logged it (more than 10 classes), as the Train page.
        m_accuracyPlot->addSeries(tr("precision @ 5"), PlotWidget::SeriesStyle::topFive());
        m_accuracyPlot->setSeriesVisible(1, false);
        m_accuracyPlot->setTitle(tr("Test accuracy"));
        return;
    }
    // The legend under the plots, never over the curves; names shortened there, in full in the
    // entries' tooltips.
    const QStringList shown = shortRunNames(names);
    qsizetype longest = 0;
    for (const QString& n : shown) longest = std::max(longest, n.size());
    // Short names side by side, long ones one a row, so that each entry fits the plot's width.
    const int columns = longest <= 4 ? 3 : longest <= 12 ? 2 : 1;
    m_lossPlot->setLegendBelow(columns);
    m_accuracyPlot->setLegendBelow(columns);
    for (int i = 0; i < names.size(); ++i) {
        m_lossPlot->setSeriesToolTip(m_lossPlot->addSeries(shown[i]), names[i]);
        m_accuracyPlot->setSeriesToolTip(
            m_accuracyPlot->addSeries(shown[i], PlotWidget::SeriesStyle::evaluations(-1)),
            names[i]); // each run's colour
    }
    m_lossPlot->setTitle(rates ? tr("Gradient norm of %1 runs").arg(names.size())
                               : tr("Loss of %1 runs").arg(names.size()));
    m_accuracyPlot->setTitle(tr("Accuracy of %1 runs").arg(names.size()));
}

void RunsPage::showPlots()
{
    if (!m_compared.isEmpty()) {
        // Once read: their arrival shows them otherwise.
        if (m_comparison) showComparison();
        return;
    }
    setPlotSeries({});
    updateTitle(); // the plots' titles name the shown run's evaluated set
    showRunCurves();
}

void RunsPage::showRunCurves()
{
    if (m_shownRun.isEmpty() || m_follower->run() != m_shownRun) return;
    const app::RunCurves& c = m_follower->curves();
    if (leftPlot() == LeftPlot::Rates) {
        showRates(m_follower->curves());
    } else {
        m_lossPlot->setData(0, c.steps, c.loss);
        m_lossPlot->setData(1, c.evalSteps, c.evalLoss);
    }
    m_accuracyPlot->setData(0, c.evalSteps, c.accuracy);
    if (m_accuracyPlot->seriesCount() > 1) {
        m_accuracyPlot->setSeriesVisible(1, !c.accuracyTop5.isEmpty());
        m_accuracyPlot->setData(1, c.top5Steps, c.accuracyTop5);
    }
}

void RunsPage::showRates(const app::RunCurves& rates)
{
    const auto* r = currentRun();
    const bool norm = !rates.norm.isEmpty();
    const double clip = r && r->config ? r->config->clipGradNorm : 0;
    if (m_rateSeries != std::pair(norm, clip)) {
        RatePlot::setUpSeries(m_lossPlot, clip, norm);
        m_rateSeries = std::pair(norm, clip);
    }
    // A run from before the norm was logged: its rate alone, and the title and tooltip say why,
    // so that the missing curve does not read as one that failed to load. Titles shorter than
    // the Train page's: this plot is half as wide.
    const bool older = !norm && !rates.rateSteps.isEmpty();
    m_lossPlot->setTitle(older ? tr("Rate (norm not logged)") : tr("Rate and gradient norm"));
    m_lossPlot->setToolTip(older ? tr("This run's log has no gradient norm: it was trained "
                                      "before runs logged it")
                                 : QString());
    m_lossPlot->setData(RatePlot::LearningRate, rates.rateSteps, rates.lr);
    if (!norm) return;
    m_lossPlot->setData(RatePlot::GradientNorm, rates.normSteps, rates.norm);
    // The bound across the steps that have a norm to compare with it.
    RatePlot::setClipBound(m_lossPlot, clip, rates.normSteps.front(), rates.normSteps.back());
}

void RunsPage::showComparison()
{
    QStringList names;
    for (const QString& folder : m_compared) names << QFileInfo(folder).fileName();
    setPlotSeries(names);
    if (!m_comparison) return;
    const bool rates = leftPlot() == LeftPlot::Rates;
    for (int i = 0; i < int(m_comparison->size()); ++i) {
        const app::RunCurves& run = (*m_comparison)[std::size_t(i)];
        if (!rates)
            m_lossPlot->setData(i, run.steps, run.loss);
        else if (!run.norm.isEmpty())
            m_lossPlot->setData(i, run.normSteps, run.norm);
        else // a run from before the norm was logged: its legend entry says why it has no curve
            m_lossPlot->setSeriesName(i, tr("%1 (not logged)").arg(m_lossPlot->seriesName(i)));
        m_accuracyPlot->setData(i, run.evalSteps, run.accuracy);
    }
}

void RunsPage::updateComparison()
{
    QStringList runs = selectedRuns();
    if (runs.size() < 2) runs.clear();
    if (runs == m_compared) return;
    m_compared = runs;
    m_comparison.reset();
    showConfiguration();
    if (runs.isEmpty()) {
        // Back to the shown run's curves, as its follower read them.
        m_compare.cancel();
        showPlots();
        emit comparisonShown();
        return;
    }
    m_compare.start(
        [runs] {
            std::vector<app::RunCurves> curves;
            for (const QString& folder : runs) curves.push_back(app::readRunCurves(folder));
            return curves;
        },
        [this, runs](const app::JobResult<std::vector<app::RunCurves>>& r) {
            if (runs != m_compared) return;
            m_comparison = r.ok() ? *r.value : std::vector<app::RunCurves>{};
            showComparison();
            if (!r.ok()) emit errorOccurred(tr("Cannot read the runs' curves: %1").arg(r.error));
            emit comparisonShown();
        });
}

bool RunsPage::trainedElsewhere() const
{
    const auto* r = currentRun();
    if (!r) return false;
    if (m_follower->run() == r->folder && m_follower->state() != RunFollower::State::None)
        return m_follower->isLive();
    // Not read yet: the scan's word.
    return r->trainingBy && QDir::cleanPath(r->folder) != m_follower->ownRunFolder();
}

void RunsPage::updateButtons()
{
    const auto* r = currentRun();
    const bool elsewhere = trainedElsewhere();
    // A finished run has nothing left to resume (it ended again at once, its plots empty).
    const bool done = r && app::finished(*r);
    m_resume->setEnabled(r && r->config && m_resumeAllowed && !elsewhere && !done);
    m_resume->setToolTip(
        elsewhere ? tr("Another process trains this run: it can be resumed once that stops")
        : !m_resumeAllowed ? tr("A run is training: stop it first")
        : done ? tr("It finished at step %1: to train on from its weights, start a new run from "
                    "one of its checkpoints (right-click the checkpoint)")
                     .arg(QLocale().toString(qint64(r->lastStep)))
        : r && app::stoppedEarly(*r)
            ? tr("It stopped early (patience %1): resumed with its own configuration it ends at "
                 "once; to train it on, resume it with a larger patience (towers-cli train "
                 "--resume --run-dir RUN --patience N)")
                  .arg(r->config->patience)
            : tr("Continues from the newest good checkpoint with the run's own configuration"));
    m_classify->setEnabled(!selectedCheckpoint().isEmpty());
    m_exportOnnx->setEnabled(!selectedCheckpoint().isEmpty() && !m_export.isRunning());
    m_openFolder->setEnabled(r != nullptr);
    const bool own = r && QDir::cleanPath(r->folder) == m_follower->ownRunFolder();
    m_trashAction->setEnabled(r && !elsewhere && !own);
    m_trashAction->setToolTip(
        own         ? tr("This window trains this run: stop it first")
        : elsewhere ? tr("Another process trains this run: it can go once that stops")
                    : tr("Moves the run's folder to the trash, from where it can be restored"));
}

QMessageBox* RunsPage::askToTrashSelectedRun()
{
    const auto* r = currentRun();
    if (!r || !m_trashAction->isEnabled()) return nullptr;
    const QString folder = r->folder;
    QString what = r->name;
    if (r->config)
        what += tr(" (%1 on %2, step %3, %4)")
                    .arg(QString::fromStdString(r->config->model),
                         QString::fromStdString(r->config->dataset),
                         QLocale().toString(qint64(r->lastStep)),
                         tr("%n checkpoint(s)", nullptr, int(r->checkpoints.size())));
    auto* box = new QMessageBox(QMessageBox::Question, tr("Move the run to the trash?"),
                                tr("Move %1 to the trash?").arg(what), QMessageBox::Cancel, this);
    QString along;
    if (const QStringList inside = app::runsInside(folder); !inside.isEmpty())
        along = tr(" The runs inside it go with it: %1.").arg(inside.join(QStringLiteral(", ")));
    box->setInformativeText(
        tr("Its folder %1 goes to the desktop's trash with its configuration, logs and "
           "checkpoints; restore it from there to list it again.%2")
            .arg(folder, along));
    QPushButton* yes = box->addButton(tr("Move to trash"), QMessageBox::DestructiveRole);
    box->setDefaultButton(QMessageBox::Cancel);
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->setWindowModality(Qt::WindowModal);
    connect(box, &QMessageBox::buttonClicked, this, [this, yes, folder](QAbstractButton* b) {
        if (b == yes) trashRun(folder);
    });
    box->open();
    return box;
}

bool RunsPage::trashRun(const QString& folder)
{
    const app::TrashOutcome out = app::moveRunToTrash(folder);
    if (!out.ok) {
        emit errorOccurred(tr("The run was not moved to the trash: %1").arg(out.error));
        return false;
    }
    emit runTrashed(folder, out.trashPath);
    refresh();
    return true;
}

ExportOnnxDialog* RunsPage::openExportDialog()
{
    const QString checkpoint = selectedCheckpoint();
    if (checkpoint.isEmpty() || m_export.isRunning()) return nullptr;
    auto* dialog = new ExportOnnxDialog(checkpoint, checkpointHasEma(checkpoint), this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    connect(dialog, &QDialog::accepted, this, [this, dialog] {
        exportCheckpoint(dialog->checkpoint(), dialog->output(), dialog->options());
    });
    dialog->open();
    return dialog;
}

void RunsPage::exportCheckpoint(const QString& checkpoint, const QString& output,
                                const engine::OnnxExportOptions& options)
{
    const std::filesystem::path from = checkpoint.toStdString(), to = output.toStdString();
    m_exportStatus->setText(
        tr("Exporting %1 to %2…").arg(QFileInfo(checkpoint).fileName(), output));
    m_exportStatus->show();
    m_export.start([from, to, options] { return engine::exportOnnx(from, to, options); },
                   [this, output](const app::JobResult<engine::OnnxExportSummary>& r) {
                       updateButtons();
                       if (!r.ok()) {
                           const QString message = tr("ONNX export failed: %1").arg(r.error);
                           m_exportStatus->setText(QStringLiteral("⚠ ") + message);
                           emit errorOccurred(message);
                           return;
                       }
                       const engine::OnnxExportSummary& s = *r.value;
                       QString text =
                           tr("Exported %1 (%2, opset %3, %4 input) to %5")
                               .arg(QString::fromStdString(s.model),
                                    s.usedEma ? tr("moving-average weights") : tr("raw weights"))
                               .arg(s.opset)
                               .arg(QString::fromLatin1(engine::onnxLayoutName(s.layout)).toUpper(),
                                    output);
                       for (const auto& w : s.warnings)
                           text += tr("; warning: %1").arg(QString::fromStdString(w));
                       m_exportStatus->setText(text);
                       emit exported(output);
                   });
    updateButtons();
}

} // namespace towers::ui
