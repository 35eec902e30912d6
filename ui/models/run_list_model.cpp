#include "ui/models/run_list_model.h"

#include <QDir>
#include <QLocale>
#include <QStyle>

#include "ui/plots/plot_theme.h"

namespace towers::ui {

RunListModel::RunListModel(QObject* parent) : QAbstractTableModel(parent) {}

void RunListModel::setRuns(std::vector<app::RunSummary> runs)
{
    beginResetModel();
    m_runs = std::move(runs);
    endResetModel();
}

const app::RunSummary* RunListModel::run(int row) const
{
    return row >= 0 && row < rowCount() ? &m_runs[std::size_t(row)] : nullptr;
}

void RunListModel::updateRun(int row, app::RunSummary run)
{
    if (row < 0 || row >= rowCount()) return;
    m_runs[std::size_t(row)] = std::move(run);
    emit dataChanged(index(row, 0), index(row, ColumnCount - 1));
}

int RunListModel::rowOf(const QString& folder) const
{
    const QString clean = QDir::cleanPath(folder);
    for (std::size_t i = 0; i < m_runs.size(); ++i)
        if (QDir::cleanPath(m_runs[i].folder) == clean) return int(i);
    return -1;
}

int RunListModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_runs.size());
}

int RunListModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant RunListModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const auto& r = m_runs[std::size_t(index.row())];
    const QLocale locale;
    if (role == FolderRole) return r.folder;
    if (role == FilterRole)
        return r.config ? QStringLiteral("%1 %2 %3")
                              .arg(r.name, QString::fromStdString(r.config->model),
                                   QString::fromStdString(r.config->dataset))
                        : r.name;
    if (role == Qt::ToolTipRole && index.column() == Modified)
        return locale.toString(r.modified, QLocale::LongFormat);
    if (role == Qt::ToolTipRole && index.column() == Accuracy && r.accuracy) {
        const QString latest = (app::evaluatesOnValidation(r)
                                    ? tr("Validation accuracy %1 % at step %2, the latest "
                                         "evaluation (the test set is left for after the run)")
                                    : tr("Test accuracy %1 % at step %2, the latest evaluation"))
                                   .arg(locale.toString(*r.accuracy * 100, 'f', 2))
                                   .arg(locale.toString(qint64(r.accuracyStep)));
        return r.best ? latest + tr("\nBest checkpoint: %1 % at step %2")
                                     .arg(locale.toString(r.best->precisionAt1 * 100, 'f', 2))
                                     .arg(locale.toString(qint64(r.best->file.step)))
                      : latest;
    }
    if (role == Qt::ToolTipRole) {
        QString text = r.problem.isEmpty() ? r.folder : r.problem;
        if (r.problem.isEmpty() && r.config)
            text += tr("\n%1 on %2")
                        .arg(QString::fromStdString(r.config->model),
                             QString::fromStdString(r.config->dataset));
        return r.trainingBy ? tr("%1\nTraining now: %2").arg(text, *r.trainingBy) : text;
    }
    if (role == Qt::DecorationRole && index.column() == Run && r.trainingBy)
        return paletteIcon(QStyle::SP_MediaPlay); // visible on a dark palette too
    if (role == Qt::TextAlignmentRole && index.column() >= Steps && index.column() <= Checkpoints)
        return int(Qt::AlignRight | Qt::AlignVCenter);
    if (role == Qt::EditRole) { // raw values for sorting and tests
        switch (index.column()) {
        case Steps:
            return qint64(r.lastStep);
        case Accuracy:
            return r.accuracy ? QVariant(*r.accuracy) : QVariant();
        case Top5:
            return r.accuracyTop5 ? QVariant(*r.accuracyTop5) : QVariant();
        case Checkpoints:
            return int(r.checkpoints.size());
        case Modified:
            return r.modified;
        default:
            return data(index, Qt::DisplayRole);
        }
    }
    if (role != Qt::DisplayRole) return {};
    switch (index.column()) {
    case Run:
        return r.name;
    case Model:
        return r.config ? QString::fromStdString(r.config->model) : tr("(unreadable)");
    case Dataset:
        return r.config ? QString::fromStdString(r.config->dataset) : QString();
    case Steps: {
        QString text = locale.toString(qint64(r.lastStep));
        if (const std::int64_t total = app::runLength(r); total > 0)
            text += QStringLiteral(" / ") + locale.toString(qint64(total));
        if (app::failed(r))
            text += tr(", failed");
        else if (app::stoppedEarly(r))
            text += tr(", stopped early");
        return text;
    }
    case Accuracy:
        if (!r.accuracy) return QStringLiteral("–");
        return app::evaluatesOnValidation(r)
                   ? tr("%1 % val").arg(locale.toString(*r.accuracy * 100, 'f', 2))
                   : QStringLiteral("%1 %").arg(locale.toString(*r.accuracy * 100, 'f', 2));
    case Top5: // beside the accuracy, of the same evaluation
        return r.accuracyTop5
                   ? QStringLiteral("%1 %").arg(locale.toString(*r.accuracyTop5 * 100, 'f', 2))
                   : QStringLiteral("–");
    case Checkpoints:
        return locale.toString(int(r.checkpoints.size()));
    case Modified:
        return changedText(r.modified, QDateTime::currentDateTime());
    default:
        return {};
    }
}

QString RunListModel::changedText(const QDateTime& when, const QDateTime& now)
{
    const QLocale locale;
    if (!when.isValid()) return QStringLiteral("–");
    const QString time = locale.toString(when.time(), QLocale::ShortFormat);
    if (when.date() == now.date()) return time;
    if (when.date() == now.date().addDays(-1)) return tr("yesterday %1").arg(time);
    if (when.date().year() == now.date().year() && when.date() < now.date())
        return locale.toString(when.date(), QStringLiteral("d MMM")) + QLatin1Char(' ') + time;
    return locale.toString(when.date(), QLocale::ShortFormat);
}

QString RunListModel::columnKey(int column)
{
    switch (column) {
    case Run:
        return QStringLiteral("run");
    case Model:
        return QStringLiteral("model");
    case Dataset:
        return QStringLiteral("dataset");
    case Steps:
        return QStringLiteral("steps");
    case Accuracy:
        return QStringLiteral("accuracy");
    case Top5:
        return QStringLiteral("top5");
    case Checkpoints:
        return QStringLiteral("checkpoints");
    case Modified:
        return QStringLiteral("modified");
    default:
        return {};
    }
}

QVariant RunListModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation == Qt::Horizontal && role == Qt::ToolTipRole && section == Accuracy)
        return tr("The latest evaluation's precision @ 1: on the test set, or on the validation "
                  "set (\"val\") of a run that holds one out of its training images");
    if (orientation == Qt::Horizontal && role == Qt::ToolTipRole && section == Top5)
        return tr("The latest evaluation's precision @ 5 (its true class among the five highest), "
                  "for a run of more than 10 classes");
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
    switch (section) {
    case Run:
        return tr("Run");
    case Model:
        return tr("Model");
    case Dataset:
        return tr("Dataset");
    case Steps:
        return tr("Steps");
    case Accuracy:
        return tr("Accuracy");
    case Top5:
        return tr("Top 5");
    case Checkpoints:
        return tr("Checkpoints");
    case Modified:
        return tr("Last change");
    default:
        return {};
    }
}

} // namespace towers::ui
