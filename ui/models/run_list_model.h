#pragma once
// The runs of the runs folder (app::scanRuns): run, model, dataset, steps reached, latest test
// accuracy (and precision @ 5, for a run that logs it), checkpoints and when it last changed; a run
// being trained right now has a "playing" icon and says by whom in its tooltip.
#include <QAbstractTableModel>
#include <QDateTime>

#include <vector>

#include "app/runs/run_scanner.h"

namespace towers::ui {

class RunListModel : public QAbstractTableModel
{
    Q_OBJECT
public:
    enum Column
    {
        Run,
        Model,
        Dataset,
        Steps,
        Accuracy,
        Top5,
        Checkpoints,
        Modified,
        ColumnCount
    };
    enum Role
    {
        FolderRole = Qt::UserRole + 1,
        // What a filter matches: the run's name, model and dataset.
        FilterRole
    };
    // A column's name in settings ("model", "checkpoints"), stable across translations.
    static QString columnKey(int column);
    // When a run last changed, as short as it reads unambiguously from `now`: the time today,
    // "yesterday" and the time, the day, month and time this year, else the date.
    static QString changedText(const QDateTime& when, const QDateTime& now);

    explicit RunListModel(QObject* parent = nullptr);
    void setRuns(std::vector<app::RunSummary> runs);
    const std::vector<app::RunSummary>& runs() const { return m_runs; }
    const app::RunSummary* run(int row) const;
    // Replaces what row `row` says (a followed run's progress); the row's place stays.
    void updateRun(int row, app::RunSummary run);
    // The row of the run in `folder`, or -1.
    int rowOf(const QString& folder) const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation,
                        int role = Qt::DisplayRole) const override;

private:
    std::vector<app::RunSummary> m_runs;
};

} // namespace towers::ui
