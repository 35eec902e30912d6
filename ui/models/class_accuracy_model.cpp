#include "ui/models/class_accuracy_model.h"

#include <QLocale>

namespace towers::ui {

ClassAccuracyModel::ClassAccuracyModel(QObject* parent) : QAbstractTableModel(parent) {}

void ClassAccuracyModel::setResults(const QStringList& classNames, const app::TestSetPredictions& p)
{
    beginResetModel();
    m_names = classNames;
    m_counts = p.classCounts;
    m_correct = p.classCorrect;
    m_top5 = p.classTop5;
    m_top5.resize(m_counts.size(), 0);
    m_scores = engine::classScores(p.confusion, p.numClasses);
    while (m_names.size() < qsizetype(m_counts.size())) m_names << QString::number(m_names.size());
    endResetModel();
}

void ClassAccuracyModel::clear()
{
    beginResetModel();
    m_names.clear();
    m_counts.clear();
    m_correct.clear();
    m_top5.clear();
    m_scores.clear();
    endResetModel();
}

int ClassAccuracyModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_counts.size());
}

int ClassAccuracyModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant ClassAccuracyModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const auto r = std::size_t(index.row());
    const double accuracy = m_counts[r] > 0 ? double(m_correct[r]) / double(m_counts[r]) : 0;
    const double top5 = m_counts[r] > 0 ? double(m_top5[r]) / double(m_counts[r]) : 0;
    if (role == Qt::ToolTipRole) {
        const QLocale locale;
        const QString text =
            tr("%1: %2 test images, %3 right; answered %4 times")
                .arg(m_names.value(index.row()), locale.toString(qint64(m_counts[r])),
                     locale.toString(qint64(m_correct[r])),
                     locale.toString(qint64(m_scores[r].predicted)));
        return hasTop5() ? text + tr("; %1 with their class among the five most probable")
                                      .arg(locale.toString(qint64(m_top5[r])))
                         : text;
    }
    if (role == Qt::TextAlignmentRole && index.column() != Class)
        return int(Qt::AlignRight | Qt::AlignVCenter);
    if (role == Qt::EditRole) {
        switch (index.column()) {
        case Images:
            return qint64(m_counts[r]);
        case Correct:
            return qint64(m_correct[r]);
        case Accuracy:
            return accuracy;
        case Top5:
            return top5;
        case Precision:
            return m_scores[r].precision;
        case F1:
            return m_scores[r].f1;
        default:
            return m_names.value(index.row());
        }
    }
    if (role != Qt::DisplayRole) return {};
    const QLocale locale;
    switch (index.column()) {
    case Class:
        return m_names.value(index.row());
    case Images:
        return locale.toString(qint64(m_counts[r]));
    case Correct:
        return locale.toString(qint64(m_correct[r]));
    case Accuracy:
        return m_counts[r] > 0 ? QStringLiteral("%1 %").arg(locale.toString(accuracy * 100, 'f', 1))
                               : QStringLiteral("–");
    case Top5:
        return m_counts[r] > 0 ? QStringLiteral("%1 %").arg(locale.toString(top5 * 100, 'f', 1))
                               : QStringLiteral("–");
    case Precision:
        return m_scores[r].predicted > 0 ? QStringLiteral("%1 %").arg(
                                               locale.toString(m_scores[r].precision * 100, 'f', 1))
                                         : QStringLiteral("–");
    case F1:
        return m_counts[r] > 0 || m_scores[r].predicted > 0
                   ? locale.toString(m_scores[r].f1, 'f', 3)
                   : QStringLiteral("–");
    default:
        return {};
    }
}

QVariant ClassAccuracyModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation == Qt::Horizontal && role == Qt::ToolTipRole) {
        switch (section) {
        case Accuracy:
            return tr("Recall: the share of the class's images classified as it");
        case Top5:
            return tr("The share of the class's images with the class among the five most "
                      "probable (precision @ 5, class by class)");
        case Precision:
            return tr("The share of the answers \"this class\" that are right");
        case F1:
            return tr("The harmonic mean of precision and recall");
        default:
            return {};
        }
    }
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
    switch (section) {
    case Class:
        return tr("Class");
    case Images:
        return tr("Images");
    case Correct:
        return tr("Correct");
    case Accuracy:
        return tr("Accuracy");
    case Top5:
        return tr("Top 5");
    case Precision:
        return tr("Precision");
    case F1:
        return tr("F1");
    default:
        return {};
    }
}

} // namespace towers::ui
