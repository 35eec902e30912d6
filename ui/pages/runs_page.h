#pragma once
// The Runs & checkpoints page: the runs of the runs folder (each a run directory: config.json,
// metrics.jsonl, eval.jsonl, checkpoints/), the selected run's configuration, its loss (or its
// learning rate and gradient norm) and accuracy curves and its checkpoints; resume the run, load a
// checkpoint into Classify, or export it as an ONNX file (off the UI thread, through
// engine::exportOnnx as `towers-cli export`). Runs selected together share the plots, a curve each;
// a run goes to the trash on request. The folder is read off the UI thread. A run that another
// process trains (a cluster job writing to a shared folder) is followed live, read-only
// (RunFollower): its curves, checkpoints and each tower's step times are read again every couple of
// seconds while the page is shown.
#include <QWidget>
#include <optional>
#include <utility>

#include "app/jobs/latest_job.h"
#include "app/runs/run_scanner.h"
#include "engine/export/onnx_export.h"

class QAction;
class QComboBox;
class QLabel;
class QLineEdit;
class QMessageBox;
class QPushButton;
class QSortFilterProxyModel;
class QSplitter;
class QTableView;
class QVBoxLayout;

namespace towers::app {
class AppSettings;
}

namespace towers::ui {

class ConfigTree;

class CheckpointListModel;
class ExportOnnxDialog;
class PlotWidget;
class RunFollower;
class RunListModel;
class StackedBarChart;

class RunsPage : public QWidget
{
    Q_OBJECT
public:
    explicit RunsPage(app::AppSettings& settings, QWidget* parent = nullptr);
    ~RunsPage() override;

    QString runsDir() const;
    void setRunsDir(const QString& dir);
    RunListModel* runModel() const { return m_runs; }
    // The runs as the table shows them: sorted by the clicked column, filtered by the words typed
    // above the table.
    QSortFilterProxyModel* shownRuns() const { return m_sorted; }
    QTableView* runTable() const { return m_table; }
    QLineEdit* runFilter() const { return m_filter; }
    // One checkable action per column but the run's name, as the header's context menu offers
    // them; toggling one shows or hides its column and remembers it in the settings.
    QList<QAction*> columnActions();
    CheckpointListModel* checkpointModel() const { return m_checkpoints; }
    // Selects the run in `folder` once it is listed (after the next refresh if need be).
    void selectRun(const QString& folder);
    QString selectedRun() const;
    // The runs selected in the table (the current one among them), in the table's order; with
    // two or more, the plots compare their curves (comparedRuns()).
    QStringList selectedRuns() const;
    QStringList comparedRuns() const { return m_compared; }
    // The checkpoint chosen in the table, else the newest of the selected run.
    QString selectedCheckpoint() const;
    bool isBusy() const { return m_scan.isRunning(); }
    // Resuming is not possible while another run trains.
    void setResumeAllowed(bool allowed);
    // The run folder this window trains (empty: none): its lock is this process's, so it is not
    // "trained by another process" and not followed.
    void setOwnRunFolder(const QString& folder);
    // Writes `checkpoint` as the ONNX file `output` in the background, as `towers-cli export`
    // with `options` (an existing file is replaced only with options.overwrite); exported() or
    // errorOccurred() follows.
    void exportCheckpoint(const QString& checkpoint, const QString& output,
                          const engine::OnnxExportOptions& options);
    // "Export ONNX…": opens, window-modal, the dialog of the export's choices for the selected
    // checkpoint (nullptr when there is none or an export is running); accepted, it exports.
    ExportOnnxDialog* openExportDialog();
    bool isExporting() const { return m_export.isRunning(); }
    // "Move to trash…" (the run's context menu, Delete): asks, window-modal, whether to move the
    // selected run's folder to the trash (nullptr when no run is selected, or when this window or
    // another process trains it); confirmed, trashRun() follows.
    QMessageBox* askToTrashSelectedRun();
    // Moves the run in `folder` to the trash (app::moveRunToTrash): runTrashed() and a refresh,
    // or errorOccurred() with why it stays. Asks nothing.
    bool trashRun(const QString& folder);
    QAction* trashAction() const { return m_trashAction; }
    // What the left plot shows, as chosen over it: the loss (and the evaluations'
    // cross-entropy), or the learning rate and the gradients' norm (for runs compared, the norm
    // of each: their rates on one axis and their norms on another would not read).
    enum class LeftPlot
    {
        Loss,
        Rates
    };
    LeftPlot leftPlot() const;
    void setLeftPlot(LeftPlot plot);
    QComboBox* leftPlotChoice() const { return m_leftPlotChoice; }
    PlotWidget* lossPlot() const { return m_lossPlot; }
    PlotWidget* accuracyPlot() const { return m_accuracyPlot; }
    // Each tower's split of the selected run's latest logged step (hidden when it logged none).
    StackedBarChart* towerChart() const { return m_towerChart; }
    // Reads the selected run again and follows it while another process trains it.
    RunFollower* follower() const { return m_follower; }
    // What the page says about a followed run ("Training in progress in another process …"),
    // empty when the selected run is not (or no longer) followed.
    QString followStatus() const;

public slots:
    void refresh();

signals:
    void resumeRequested(const QString& folder);
    void classifyRequested(const QString& checkpoint);
    // A new run from this checkpoint's weights (its run's model; "" when unknown).
    void fineTuneRequested(const QString& checkpoint, const QString& model);
    // A new run with the configuration of the run in `folder` (its context menu's "New run like
    // this…").
    void newRunLikeRequested(const QString& folder);
    // An ONNX export finished (the file written) or failed (the reason).
    void exported(const QString& output);
    void errorOccurred(const QString& message);
    void runsDirChanged(const QString& dir);
    // The run in `folder` went to the trash, where it is now `trashPath`.
    void runTrashed(const QString& folder, const QString& trashPath);
    // After each refresh has been applied.
    void refreshed();
    // The plots show the compared runs' curves, or the shown run's again.
    void comparisonShown();

protected:
    void showEvent(QShowEvent* event) override;
    void hideEvent(QHideEvent* event) override;

private:
    struct Scan
    {
        std::vector<app::RunSummary> runs;
        app::RunsFolderProblems problems;
    };
    // The constructor's steps. The runs folder's row above the panes; returns its Browse and
    // Refresh buttons.
    std::pair<QPushButton*, QPushButton*> buildFolderRow(QVBoxLayout* top);
    // The panes under it: the runs and the configuration on the left, the details on the right.
    void buildPanes(QVBoxLayout* top);
    // The filter and the table of runs, in the box it returns.
    QWidget* buildRunList(QSplitter* left);
    // The details' title, the followed run's status and the loss and accuracy plots.
    void buildTitleAndPlots(QWidget* details, QVBoxLayout* dl);
    // The checkpoints' table, the run's and the checkpoint's buttons and the export's status.
    void buildCheckpointsAndButtons(QWidget* details, QVBoxLayout* dl);
    // Each tower's split of the latest logged step, at the foot of the details.
    void buildTowerChart(QWidget* details, QVBoxLayout* dl);
    // Browse, Refresh and the edited folder.
    void connectFolderRow(QPushButton* browse, QPushButton* refreshButton);
    // The tables' selections, Resume, Classify and a double-clicked checkpoint.
    void connectTablesAndButtons();
    // The checkpoint's context menu: Classify, and a new run from it.
    void buildCheckpointMenu();
    // The run's context menu: a new run like it, its folder, and the trash (Delete).
    void buildRunMenu();
    // Export ONNX…, Open folder and the follower's news.
    void connectExportFolderAndFollower();
    void onScanned(const app::JobResult<Scan>& r);
    void showSelected();
    // The configuration pane: the shown run's config.json, or for runs selected together the
    // settings that differ between them, a column each (app::configDifferences).
    void showConfiguration();
    void updateButtons();
    void updateTitle();
    void onFollowerUpdated();
    void showTowerTimes();
    void showCheckpoints(const std::vector<engine::CheckpointFile>& checkpoints,
                         const std::vector<engine::EvaluationMark>& evaluations);
    bool trainedElsewhere() const;
    // The plots' series: one per compared run (named), or the shown run's loss (or rate and
    // norm: showRates sets those, as they depend on what it logged) and accuracy.
    void setPlotSeries(const QStringList& names);
    // The plots anew, for what they compare and what the left one shows: their series, and the
    // curves as last read.
    void showPlots();
    // The shown run's curves as its follower read them last.
    void showRunCurves();
    // The shown run's rate and norm on the left plot, and its clipping bound; its series set up
    // again where what the run logged asks for others (a norm logged from a resume on).
    void showRates(const app::RunCurves& rates);
    // The compared runs' curves as last read (comparison), a curve per run.
    void showComparison();
    void updateComparison();
    // The selected run's row in m_runs (-1: none), and the run.
    int currentRunRow() const;
    const app::RunSummary* currentRun() const;

    app::AppSettings& m_settings;
    app::LatestJob<Scan> m_scan{this};
    QString m_folderProblem;     // why the runs folder could not be listed (the title says it)
    QStringList m_shownProblems; // the folders in it that could not be entered, as last said
    app::LatestJob<engine::OnnxExportSummary> m_export{this};
    app::LatestJob<std::vector<app::RunCurves>> m_compare{this};
    QStringList m_compared; // the runs whose curves the plots compare (none: the shown run's)
    // Their curves, in m_compared's order, once read (none when they could not be).
    std::optional<std::vector<app::RunCurves>> m_comparison;
    // The shown run's rate plot as last set up: with the norm or not, and its bound (0: none).
    std::optional<std::pair<bool, double>> m_rateSeries;
    QString m_pendingSelection;
    QString m_shownRun; // the run whose details are shown
    bool m_resumeAllowed = true;
    RunFollower* m_follower;

    QLineEdit* m_dirEdit;
    QTableView* m_table;
    RunListModel* m_runs;
    QSortFilterProxyModel* m_sorted;
    QLineEdit* m_filter;
    QLabel* m_title;
    QLabel* m_followStatus;
    StackedBarChart* m_towerChart;
    ConfigTree* m_config;
    QComboBox* m_leftPlotChoice;
    PlotWidget* m_lossPlot;
    PlotWidget* m_accuracyPlot;
    QTableView* m_checkpointTable;
    CheckpointListModel* m_checkpoints;
    QPushButton* m_resume;
    QPushButton* m_classify;
    QPushButton* m_exportOnnx;
    QLabel* m_exportStatus;
    QPushButton* m_openFolder;
    QAction* m_trashAction;
};

} // namespace towers::ui
