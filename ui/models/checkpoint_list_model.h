#pragma once
// The checkpoints of one run (newest first): step, file, size, time.
#include <QAbstractTableModel>
#include <QDateTime>

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
        File,
        Size,
        Modified,
        ColumnCount
    };
    enum Role
    {
        PathRole = Qt::UserRole + 1
    };

    explicit CheckpointListModel(QObject* parent = nullptr);
    // `checkpoints` oldest first (as RunDirectory lists them); shown newest first.
    void setCheckpoints(const std::vector<engine::CheckpointFile>& checkpoints);
    QString path(int row) const;

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
    };
    std::vector<Row> m_rows;
};

} // namespace towers::ui
