#include "ui/models/layer_table_model.h"

#include <QFont>
#include <QLocale>

#include <algorithm>
#include <cmath>

namespace towers::ui {

QString shapeLabel(const engine::Shape& shape, bool dropBatch)
{
    QStringList parts;
    for (int i = (dropBatch && shape.rank() > 1) ? 1 : 0; i < shape.rank(); ++i)
        parts << QString::number(shape[i]);
    return parts.join(QStringLiteral(" × "));
}

namespace {

// Three significant digits in every row, never in exponent form: 0.00256, 0.450, 12.3, 123, and
// large ones whole with the locale's thousands separator (1,235).
QString mflopText(double mflops, const QLocale& locale)
{
    // The decimals of the value rounded to three digits (9.996 is 10.0, not 9.996's 10.00).
    const double rounded = QString::number(mflops, 'g', 3).toDouble();
    const int decimals = std::max(0, 2 - int(std::floor(std::log10(rounded))));
    return locale.toString(mflops, 'f', decimals);
}

} // namespace

LayerTableModel::LayerTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void LayerTableModel::setRows(std::vector<engine::LayerRow> rows)
{
    beginResetModel();
    m_rows = std::move(rows);
    m_shown = engine::shownLayerRows(m_rows);
    endResetModel();
}

qint64 LayerTableModel::totalParameters() const
{
    qint64 total = 0;
    for (const auto& r : m_rows) total += r.parameters;
    return total;
}

int LayerTableModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_shown.size());
}

int LayerTableModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant LayerTableModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const engine::ShownLayerRow& shown = m_shown[std::size_t(index.row())];
    const auto& r = *shown.row;
    const QLocale locale;
    if (role == Qt::DisplayRole) {
        switch (index.column()) {
        case Layer:
            return QString(3 * shown.depth, QLatin1Char(' ')) + QString::fromStdString(r.name);
        case Kind:
            return QString::fromStdString(r.kind);
        case OutputShape:
            return shapeLabel(r.outputShape);
        case Parameters:
            return r.parameters ? locale.toString(qint64(r.parameters)) : QStringLiteral("–");
        case MFlops:
            // "–" where none are counted (pooling, batch norm, ...).
            if (r.forwardFlops <= 0) return QStringLiteral("–");
            return mflopText(r.forwardFlops * 1e-6, locale);
        case Description:
            return QString::fromStdString(r.description);
        default:
            return {};
        }
    }
    if (role == Qt::EditRole) { // raw values, for sorting and tests
        switch (index.column()) {
        case Parameters:
            return qint64(r.parameters);
        case MFlops:
            return r.forwardFlops * 1e-6;
        default:
            return data(index, Qt::DisplayRole);
        }
    }
    if (role == Qt::TextAlignmentRole && (index.column() == Parameters || index.column() == MFlops))
        return int(Qt::AlignRight | Qt::AlignVCenter);
    if (role == Qt::ToolTipRole) return QString::fromStdString(r.description);
    if (role == Qt::FontRole && r.kind == "branch") { // a concat's branch, not a layer
        QFont italic;
        italic.setItalic(true);
        return italic;
    }
    return {};
}

QVariant LayerTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal) return {};
    if (role == Qt::DisplayRole) {
        switch (section) {
        case Layer:
            return tr("Layer");
        case Kind:
            return tr("Kind");
        case OutputShape:
            return tr("Output");
        case Parameters:
            return tr("Parameters");
        case MFlops:
            return tr("MFLOP/example");
        case Description:
            return tr("Description");
        default:
            return {};
        }
    }
    if (role == Qt::ToolTipRole && section == Parameters)
        return tr("Trainable elements; %1 in total").arg(QLocale().toString(totalParameters()));
    if (role == Qt::ToolTipRole && section == OutputShape)
        return tr("The layer's output for one example: height × width × channels");
    if (role == Qt::ToolTipRole && section == MFlops)
        return tr("Forward floating-point operations per example, in millions: those of "
                  "convolutions and matrix products (– for layers without)");
    return {};
}

} // namespace towers::ui
