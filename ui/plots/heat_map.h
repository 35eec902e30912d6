#pragma once
// A confusion-matrix heat map (QCPColorMap): rows are the true classes, columns the predicted
// ones, each cell coloured by its share of its row and labelled with its count when the matrix
// is small enough to read. Clicking a cell emits cellClicked(row, column).
#include <QStringList>
#include <QVector>
#include <QWidget>

#include <cstdint>

class QCustomPlot;
class QCPColorMap;
class QCPColorScale;
class QMouseEvent;

namespace towers::ui {

class HeatMap : public QWidget
{
    Q_OBJECT
public:
    explicit HeatMap(QWidget* parent = nullptr);
    ~HeatMap() override;

    // counts: n x n, row-major, row = true class, column = predicted. Labels name the n classes.
    void setMatrix(const QStringList& labels, const QVector<std::int64_t>& counts);
    void clear() { setMatrix({}, {}); }
    int size() const { return int(m_labels.size()); }
    std::int64_t count(int row, int column) const { return m_counts.at(row * size() + column); }
    // The cell under a widget position, or (-1, -1).
    QPoint cellAt(const QPoint& widgetPos) const;
    // The widget position of a cell's centre (tests click it).
    QPoint cellCenter(int row, int column) const;
    QCustomPlot* customPlot() const { return m_plot; }

signals:
    void cellClicked(int row, int column);

protected:
    void changeEvent(QEvent* event) override;

private:
    void rebuild();
    void onPlotClick(QMouseEvent* event);

    QCustomPlot* m_plot;
    QCPColorMap* m_map;
    QCPColorScale* m_scale;
    QStringList m_labels;
    QVector<std::int64_t> m_counts;
};

} // namespace towers::ui
