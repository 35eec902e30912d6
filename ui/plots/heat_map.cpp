#include "ui/plots/heat_map.h"

#include <QEvent>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include "ui/plots/plot_theme.h"

namespace towers::ui {

HeatMap::HeatMap(QWidget* parent) : QWidget(parent), m_plot(new QCustomPlot(this))
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_plot);
    m_plot->setMinimumSize(240, 200);
    m_map = new QCPColorMap(m_plot->xAxis, m_plot->yAxis);
    m_scale = new QCPColorScale(m_plot);
    m_plot->plotLayout()->addElement(0, 1, m_scale);
    m_scale->setType(QCPAxis::atRight);
    m_scale->axis()->setLabel(tr("share of the true class"));
    m_map->setColorScale(m_scale);
    m_map->setInterpolate(false);
    auto* group = new QCPMarginGroup(m_plot);
    m_plot->axisRect()->setMarginGroup(QCP::msBottom | QCP::msTop, group);
    m_scale->setMarginGroup(QCP::msBottom | QCP::msTop, group);
    m_plot->xAxis->setLabel(tr("predicted class"));
    m_plot->yAxis->setLabel(tr("true class"));
    m_plot->yAxis->setRangeReversed(true); // row 0 at the top, as a matrix is read
    QFont small = font();
    small.setPointSizeF(small.pointSizeF() * 0.8);
    for (QCPAxis* a : {m_plot->xAxis, m_plot->yAxis, m_scale->axis()}) {
        a->setTickLabelFont(small);
        a->setLabelFont(small);
    }
    m_plot->xAxis->setTickLabelRotation(45);
    // A label names each row and column: tick marks would only reach into the first column's and
    // the last row's cells, a stroke before their counts ("-14") or a lone "–" in an empty one.
    for (QCPAxis* a : {m_plot->xAxis, m_plot->yAxis}) {
        a->setTickLength(0, 0);
        a->setSubTicks(false);
    }
    connect(m_plot, &QCustomPlot::mousePress, this, &HeatMap::onPlotClick);
    rebuild();
}

HeatMap::~HeatMap() = default;

void HeatMap::setMatrix(const QStringList& labels, const QVector<std::int64_t>& counts)
{
    m_labels = labels;
    m_counts = counts;
    if (m_counts.size() != qsizetype(labels.size()) * labels.size()) {
        m_labels.clear();
        m_counts.clear();
    }
    rebuild();
}

void HeatMap::rebuild()
{
    const QPalette pal = palette();
    applyPlotPalette(m_plot, pal);
    applyAxisPalette(m_scale->axis(), pal);
    // From the background to the highlight colour: readable in light and dark palettes alike.
    QCPColorGradient gradient;
    gradient.clearColorStops();
    gradient.setColorStopAt(0, pal.color(QPalette::Base));
    gradient.setColorStopAt(1, pal.color(QPalette::Highlight));
    m_map->setGradient(gradient);

    const int n = size();
    m_plot->clearItems();
    m_map->data()->setSize(std::max(n, 1), std::max(n, 1));
    m_map->data()->setRange(QCPRange(0, std::max(n - 1, 0)), QCPRange(0, std::max(n - 1, 0)));
    m_map->data()->fill(0);
    auto xTicks = QSharedPointer<QCPAxisTickerText>::create();
    auto yTicks = QSharedPointer<QCPAxisTickerText>::create();
    for (int r = 0; r < n; ++r) {
        std::int64_t rowTotal = 0;
        for (int c = 0; c < n; ++c) rowTotal += m_counts[r * n + c];
        for (int c = 0; c < n; ++c) {
            const double share = rowTotal > 0 ? double(m_counts[r * n + c]) / double(rowTotal) : 0;
            m_map->data()->setCell(c, r, share); // key = predicted (x), value = true (y)
            if (n <= 20 && m_counts[r * n + c] > 0) {
                auto* text = new QCPItemText(m_plot);
                text->position->setCoords(c, r);
                text->setText(QString::number(m_counts[r * n + c]));
                QFont f = font();
                f.setPointSizeF(f.pointSizeF() * (n <= 10 ? 0.8 : 0.6));
                text->setFont(f);
                // Text that stays readable on the cell's colour.
                const QColor cell = gradient.color(share, QCPRange(0, 1));
                text->setColor(cell.lightness() < 128 ? QColor(Qt::white) : QColor(Qt::black));
            }
        }
        xTicks->addTick(r, m_labels.value(r));
        yTicks->addTick(r, m_labels.value(r));
    }
    m_plot->xAxis->setTicker(xTicks);
    m_plot->yAxis->setTicker(yTicks);
    m_plot->xAxis->setTickLabels(n <= 20);
    m_plot->yAxis->setTickLabels(n <= 20);
    m_plot->xAxis->grid()->setVisible(false);
    m_plot->yAxis->grid()->setVisible(false);
    m_map->setDataRange(QCPRange(0, 1));
    m_plot->xAxis->setRange(-0.5, std::max(n, 1) - 0.5);
    m_plot->yAxis->setRange(-0.5, std::max(n, 1) - 0.5);
    m_map->setVisible(n > 0);
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

QPoint HeatMap::cellAt(const QPoint& widgetPos) const
{
    const int n = size();
    if (n == 0) return {-1, -1};
    const QPoint p = m_plot->mapFrom(this, widgetPos);
    if (!m_plot->axisRect()->rect().contains(p)) return {-1, -1};
    const int c = int(std::lround(m_plot->xAxis->pixelToCoord(p.x())));
    const int r = int(std::lround(m_plot->yAxis->pixelToCoord(p.y())));
    if (r < 0 || c < 0 || r >= n || c >= n) return {-1, -1};
    return {r, c};
}

QPoint HeatMap::cellCenter(int row, int column) const
{
    const QPoint p(int(m_plot->xAxis->coordToPixel(column)), int(m_plot->yAxis->coordToPixel(row)));
    return m_plot->mapTo(this, p);
}

void HeatMap::onPlotClick(QMouseEvent* event)
{
    const QPoint cell = cellAt(m_plot->mapTo(this, event->pos()));
    if (cell.x() >= 0) emit cellClicked(cell.x(), cell.y());
}

void HeatMap::changeEvent(QEvent* event)
{
    if (event->type() == QEvent::PaletteChange) rebuild();
    QWidget::changeEvent(event);
}

} // namespace towers::ui
