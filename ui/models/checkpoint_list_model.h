#pragma once
// The checkpoints of one run (newest first): step, the test accuracy measured at that step (the
// run's best checkpoint marked: what `towers-cli ... --best` picks and rotation keeps), file, size,
// time.
#include <QAbstractTableModel>
#include <QDateTime>

#include <optional>
#include <vector>

#include "engine/train/run_directory.h"

namespace towers::ui {

class CheckpointListModel : public QAbstractTableModel
{
    Q_OBJECT
public:
    enum Column
    {
        Step,
        Accuracy,
        File,
        Size,
        Modified,
        ColumnCount
    };
    enum Role
    {
        PathRole = Qt::UserRole + 1,
        BestRole,   // bool: the run's best checkpoint
        DamagedRole // QString: why the file does not read as a checkpoint, or empty
    };

    explicit CheckpointListModel(QObject* parent = nullptr);
    // `checkpoints` oldest first (as RunDirectory lists them); shown newest first. `evaluations`
    // (eval.jsonl's, readEvaluations) give each its accuracy and the best. Each file's header is
    // read (a few kB): one that does not read as a checkpoint (truncated by a full disk, an
    // interrupted copy) is marked damaged, the run's best too.
    void setCheckpoints(const std::vector<engine::CheckpointFile>& checkpoints,
                        const std::vector<engine::EvaluationMark>& evaluations = {});
    // New evaluations for the same checkpoints: the rows stay (and the selection with them).
    void setEvaluations(const std::vector<engine::EvaluationMark>& evaluations);
    // Which set the evaluations are on (the header, the tooltips): the run's validation set
    // (TrainConfig::validation) or, by default, the test set.
    void setValidation(bool validation);
    QString path(int row) const;
    // The row of the run's best checkpoint; -1 when none was evaluated.
    int bestRow() const { return m_best; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation,
                        int role = Qt::DisplayRole) const override;

private:
    struct Row
    {
        qint64 step;
        QString path;
        qint64 size;
        QDateTime modified;
        std::optional<double> accuracy;
        QString damaged; // why the file does not read as a checkpoint (its header), or empty
        QString newer;   // why this build cannot read it (a newer Towers' format), or empty
    };
    std::vector<Row> m_rows;
    int m_best = -1;
    bool m_validation = false;
};

} // namespace towers::ui
