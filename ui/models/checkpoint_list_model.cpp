#include "ui/models/checkpoint_list_model.h"

#include <QDateTime>
#include <QFileInfo>
#include <QLocale>

#include "ui/models/device_model.h"

namespace towers::ui {

CheckpointListModel::CheckpointListModel(QObject* parent) : QAbstractTableModel(parent) {}

void CheckpointListModel::setCheckpoints(const std::vector<engine::CheckpointFile>& checkpoints)
{
    beginResetModel();
    m_rows.clear();
    for (auto it = checkpoints.rbegin(); it != checkpoints.rend(); ++it) {
        const QString p = QString::fromStdString(it->path.string());
        const QFileInfo info(p);
        m_rows.push_back({qint64(it->step), p, info.size(), info.lastModified()});
    }
    endResetModel();
}

QString CheckpointListModel::path(int row) const
{
    return row >= 0 && row < rowCount() ? m_rows[std::size_t(row)].path : QString();
}

int CheckpointListModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_rows.size());
}

int CheckpointListModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant CheckpointListModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const Row& r = m_rows[std::size_t(index.row())];
    if (role == PathRole || role == Qt::ToolTipRole) return r.path;
    if (role == Qt::TextAlignmentRole && (index.column() == Step || index.column() == Size))
        return int(Qt::AlignRight | Qt::AlignVCenter);
    if (role == Qt::EditRole && index.column() == Step) return r.step;
    if (role == Qt::EditRole && index.column() == Size) return r.size;
    if (role != Qt::DisplayRole && role != Qt::EditRole) return {};
    switch (index.column()) {
    case Step:
        return QLocale().toString(r.step);
    case File:
        return QFileInfo(r.path).fileName();
    case Size:
        return bytesLabel(double(r.size));
    case Modified:
        return QLocale().toString(r.modified, QLocale::ShortFormat);
    default:
        return {};
    }
}

QVariant CheckpointListModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
    switch (section) {
    case Step:
        return tr("Step");
    case File:
        return tr("File");
    case Size:
        return tr("Size");
    case Modified:
        return tr("Written");
    default:
        return {};
    }
}

} // namespace towers::ui
