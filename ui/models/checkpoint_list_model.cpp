#include "ui/models/checkpoint_list_model.h"

#include <QApplication>
#include <QDateTime>
#include <QFileInfo>
#include <QFont>
#include <QLocale>
#include <QStyle>

#include "engine/errors.h"
#include "engine/train/checkpoint.h"
#include "ui/models/device_model.h"

namespace towers::ui {

CheckpointListModel::CheckpointListModel(QObject* parent) : QAbstractTableModel(parent) {}

void CheckpointListModel::setCheckpoints(const std::vector<engine::CheckpointFile>& checkpoints,
                                         const std::vector<engine::EvaluationMark>& evaluations)
{
    beginResetModel();
    m_rows.clear();
    for (auto it = checkpoints.rbegin(); it != checkpoints.rend(); ++it) {
        const QString p = QString::fromStdString(it->path.string());
        const QFileInfo info(p);
        QString damaged, newer;
        try {
            (void)engine::readCheckpointInfo(it->path);
        } catch (const engine::Unsupported& e) { // a newer Towers' format: not damaged
            newer = QString::fromUtf8(e.what());
        } catch (const engine::Error& e) {
            damaged = QString::fromUtf8(e.what());
        }
        m_rows.push_back(
            {qint64(it->step), p, info.size(), info.lastModified(), std::nullopt, damaged, newer});
    }
    m_best = -1;
    endResetModel();
    setEvaluations(evaluations);
}

void CheckpointListModel::setEvaluations(const std::vector<engine::EvaluationMark>& evaluations)
{
    std::vector<engine::CheckpointFile> files;
    for (Row& r : m_rows) {
        r.accuracy.reset();
        for (const auto& e : evaluations)
            if (e.step == r.step) r.accuracy = e.precisionAt1;
        files.push_back({r.step, r.path.toStdString()});
    }
    m_best = -1;
    if (const auto best = engine::bestCheckpoint(files, evaluations))
        for (std::size_t i = 0; i < m_rows.size(); ++i)
            if (m_rows[i].step == best->file.step) m_best = int(i);
    if (!m_rows.empty()) emit dataChanged(index(0, 0), index(rowCount() - 1, ColumnCount - 1));
}

void CheckpointListModel::setValidation(bool validation)
{
    if (validation == m_validation) return;
    m_validation = validation;
    emit headerDataChanged(Qt::Horizontal, Accuracy, Accuracy);
    if (!m_rows.empty()) emit dataChanged(index(0, Accuracy), index(rowCount() - 1, Accuracy));
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
    const bool best = index.row() == m_best;
    if (role == BestRole) return best;
    if (role == DamagedRole) return r.damaged;
    if (!r.newer.isEmpty() && role == Qt::ToolTipRole)
        return tr("This build cannot read this checkpoint: %1").arg(r.newer);
    if (!r.damaged.isEmpty()) {
        if (role == Qt::ToolTipRole)
            return tr("This file does not read as a checkpoint: %1").arg(r.damaged);
        if (role == Qt::DecorationRole && index.column() == File)
            return QApplication::style()->standardIcon(QStyle::SP_MessageBoxWarning);
    }
    if (role == Qt::ToolTipRole && index.column() == Accuracy)
        return best
                   ? (m_validation
                          ? tr("The run's best checkpoint: the highest validation accuracy of "
                               "its evaluations. Rotation keeps it besides the newest; "
                               "towers-cli picks it with --best. Measure it on the test set "
                               "(Use for classifying, or towers-cli eval --checkpoint RUN --best).")
                          : tr("The run's best checkpoint: the highest test accuracy of its "
                               "evaluations. Rotation keeps it besides the newest; towers-cli "
                               "picks it with --best."))
               : r.accuracy
                   ? (m_validation ? tr("The validation accuracy (precision @ 1) measured at "
                                        "this step")
                                   : tr("The test accuracy (precision @ 1) measured at this step"))
                   : tr("Not evaluated at this step");
    if (role == PathRole || role == Qt::ToolTipRole) return r.path;
    if (role == Qt::FontRole && best && index.column() == Accuracy) {
        QFont bold;
        bold.setBold(true);
        return bold;
    }
    if (role == Qt::TextAlignmentRole && index.column() == Accuracy)
        return int(Qt::AlignRight | Qt::AlignVCenter);
    if (role == Qt::EditRole && index.column() == Accuracy)
        return r.accuracy ? QVariant(*r.accuracy) : QVariant();
    if (role == Qt::TextAlignmentRole && (index.column() == Step || index.column() == Size))
        return int(Qt::AlignRight | Qt::AlignVCenter);
    if (role == Qt::EditRole && index.column() == Step) return r.step;
    if (role == Qt::EditRole && index.column() == Size) return r.size;
    if (role != Qt::DisplayRole && role != Qt::EditRole) return {};
    switch (index.column()) {
    case Step:
        return QLocale().toString(r.step);
    case Accuracy:
        if (!r.accuracy) return QString();
        if (best && !r.damaged.isEmpty())
            return tr("%1 % best, damaged").arg(QLocale().toString(*r.accuracy * 100, 'f', 2));
        return best ? tr("%1 % best").arg(QLocale().toString(*r.accuracy * 100, 'f', 2))
                    : tr("%1 %").arg(QLocale().toString(*r.accuracy * 100, 'f', 2));
    case File:
        if (!r.damaged.isEmpty()) return tr("%1 (damaged)").arg(QFileInfo(r.path).fileName());
        if (!r.newer.isEmpty()) return tr("%1 (a newer Towers')").arg(QFileInfo(r.path).fileName());
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
    case Accuracy:
        return m_validation ? tr("Validation accuracy") : tr("Test accuracy");
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
