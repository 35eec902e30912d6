#include "ui/plots/bar_chart.h"

#include <QEvent>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include <algorithm>

#include "ui/plots/plot_theme.h"

namespace towers::ui {

BarChart::BarChart(const QString& title, Qt::Orientation orientation, QWidget* parent)
    : QWidget(parent), m_orientation(orientation), m_plot(new QCustomPlot(this))
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_plot);
    m_plot->setMinimumSize(160, 120);
    m_title = addPlotTitle(m_plot, title, font());

    QCPAxis* keyAxis = orientation == Qt::Horizontal ? m_plot->yAxis : m_plot->xAxis;
    QCPAxis* valueAxis = orientation == Qt::Horizontal ? m_plot->xAxis : m_plot->yAxis;
    m_normal = new QCPBars(keyAxis, valueAxis);
    m_high = new QCPBars(keyAxis, valueAxis);
    m_normal->setWidth(0.7);
    m_high->setWidth(0.7);
    keyAxis->setTicker(QSharedPointer<QCPAxisTickerText>::create());
    keyAxis->grid()->setVisible(false);
    keyAxis->setTickLength(0, 0);
    keyAxis->setSubTicks(false);
    if (orientation == Qt::Horizontal) keyAxis->setRangeReversed(true); // first bar on top
    QFont small = font();
    small.setPointSizeF(small.pointSizeF() * 0.85);
    keyAxis->setTickLabelFont(small);
    valueAxis->setTickLabelFont(small);
    valueAxis->setLabelFont(small);
    applyPlotPalette(m_plot, palette());
    rebuild();
}

BarChart::~BarChart() = default;

void BarChart::setValueLabel(const QString& label)
{
    (m_orientation == Qt::Horizontal ? m_plot->xAxis : m_plot->yAxis)->setLabel(label);
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

void BarChart::setValueRange(double lower, double upper)
{
    m_fixed = true;
    m_lower = lower;
    m_upper = upper;
    rebuild();
}

void BarChart::setValueText(const QString& pattern, double textScale, int decimals)
{
    m_textPattern = pattern;
    m_textScale = textScale;
    m_decimals = decimals;
    rebuild();
}

void BarChart::setBars(const QStringList& labels, const QVector<double>& values,
                       const QVector<bool>& highlighted)
{
    m_labels = labels;
    m_values = values;
    m_highlighted = highlighted;
    rebuild();
}

void BarChart::rebuild()
{
    const QPalette pal = palette();
    QColor normal = seriesColor(0, pal);
    QColor high = seriesColor(3, pal); // red: "this one is off"
    m_normal->setPen(QPen(normal.darker(120)));
    normal.setAlpha(200);
    m_normal->setBrush(normal);
    m_high->setPen(QPen(high.darker(120)));
    high.setAlpha(220);
    m_high->setBrush(high);

    QVector<double> keys, normalKeys, normalValues, highKeys, highValues;
    auto ticker = QSharedPointer<QCPAxisTickerText>::create();
    double maxValue = 0;
    for (int i = 0; i < m_values.size(); ++i) {
        const double key = i + 1;
        ticker->addTick(key, m_labels.value(i));
        (m_highlighted.value(i, false) ? highKeys : normalKeys).push_back(key);
        (m_highlighted.value(i, false) ? highValues : normalValues).push_back(m_values[i]);
        maxValue = std::max(maxValue, m_values[i]);
    }
    m_normal->setData(normalKeys, normalValues, true);
    m_high->setData(highKeys, highValues, true);
    QCPAxis* keyAxis = m_normal->keyAxis();
    QCPAxis* valueAxis = m_normal->valueAxis();
    keyAxis->setTicker(ticker);
    keyAxis->setRange(0.4, std::max<double>(1, m_values.size()) + 0.6);
    valueAxis->setRange(m_fixed ? m_lower : 0,
                        m_fixed ? m_upper : (maxValue > 0 ? maxValue * 1.15 : 1));

    m_plot->clearItems();
    if (!m_textPattern.isEmpty()) {
        for (int i = 0; i < m_values.size(); ++i) {
            auto* text = new QCPItemText(m_plot);
            text->setClipToAxisRect(false);
            text->setColor(pal.color(QPalette::Text));
            text->setText(m_textPattern.arg(m_values[i] * m_textScale, 0, 'f', m_decimals));
            text->position->setAxes(m_plot->xAxis, m_plot->yAxis);
            if (m_orientation == Qt::Horizontal) {
                text->position->setCoords(m_values[i], i + 1);
                text->setPositionAlignment(Qt::AlignLeft | Qt::AlignVCenter);
                text->setPadding(QMargins(4, 0, 0, 0));
            } else {
                text->position->setCoords(i + 1, m_values[i]);
                text->setPositionAlignment(Qt::AlignHCenter | Qt::AlignBottom);
            }
        }
    }
    m_title->setTextColor(pal.color(QPalette::WindowText));
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

void BarChart::changeEvent(QEvent* event)
{
    if (event->type() == QEvent::PaletteChange) {
        applyPlotPalette(m_plot, palette());
        rebuild();
    }
    QWidget::changeEvent(event);
}

} // namespace towers::ui
