#pragma once
// The layer table of a model (Model::layerTable()): layer, kind, output shape, parameters,
// forward MFLOPs per example and a description, with a total in the parameter column's header
// tool tip and totalParameters(). A block's layers (a residual block's; a concat's branches, each
// with its layers) follow it as rows of their own, their names indented.
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
    // How deep row `row` of the table is in its blocks (0: a layer of the network itself).
    int depth(int row) const { return m_shown.at(std::size_t(row)).depth; }
    // The sum of the network's layers' parameters.
    qint64 totalParameters() const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation,
                        int role = Qt::DisplayRole) const override;

private:
    std::vector<engine::LayerRow> m_rows;
    std::vector<engine::ShownLayerRow> m_shown; // the table's rows (engine::shownLayerRows)
};

// "24 × 24 × 64" for [1, 24, 24, 64] (the batch dimension of 1 dropped).
QString shapeLabel(const engine::Shape& shape, bool dropBatch = true);

} // namespace towers::ui
