#pragma once
// The layer table of a model (Model::layerTable()): layer, kind, output shape, parameters,
// forward MFLOPs per example and a description, with a total in the parameter column's header
// tool tip and totalParameters().
#include <QAbstractTableModel>

#include <vector>

#include "engine/models/model.h"

namespace towers::ui {

class LayerTableModel : public QAbstractTableModel
{
    Q_OBJECT
public:
    enum Column
    {
        Layer,
        Kind,
        OutputShape,
        Parameters,
        MFlops,
        Description,
        ColumnCount
    };

    explicit LayerTableModel(QObject* parent = nullptr);

    void setRows(std::vector<engine::LayerRow> rows);
    const std::vector<engine::LayerRow>& rows() const { return m_rows; }
    // The sum of the rows' parameters.
    qint64 totalParameters() const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation,
                        int role = Qt::DisplayRole) const override;

private:
    std::vector<engine::LayerRow> m_rows;
};

// "24 × 24 × 64" for [1, 24, 24, 64] (the batch dimension of 1 dropped).
QString shapeLabel(const engine::Shape& shape, bool dropBatch = true);

} // namespace towers::ui
