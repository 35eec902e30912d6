#include "ui/plots/plot_widget.h"

#include <QEvent>
#include <QFontMetrics>
#include <QHelpEvent>
#include <QLocale>
#include <QTimer>
#include <QToolTip>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include <algorithm>
#include <cmath>

#include "ui/plots/plot_theme.h"

namespace towers::ui {

namespace {

// Ticks at whole numbers only, for an axis of steps: a readable step (1, 2, 5 or 2.5 times a
// power of ten) of at least 1, 2.5 itself made 2, and sub-ticks at whole numbers too.
class WholeTicker : public QCPAxisTicker
{
protected:
    double getTickStep(const QCPRange& range) override
    {
        const double step = QCPAxisTicker::getTickStep(range);
        return step < 1 ? 1 : std::floor(step + 1e-9);
    }
    int getSubTickCount(double tickStep) override
    {
        // 1, 2 and 5: a sub-tick at each whole number between; from 10 on the default's
        // sub-ticks (every 2, 5 or 10...) are whole.
        return tickStep < 10 ? std::max(0, int(std::lround(tickStep)) - 1)
                             : QCPAxisTicker::getSubTickCount(tickStep);
    }
};

bool isWhole(double x)
{
    return std::isfinite(x) && x == std::floor(x);
}

} // namespace

PlotWidget::PlotWidget(const QString& title, QWidget* parent)
    : QWidget(parent), m_plot(new QCustomPlot(this)), m_empty(new EmptyMessage(m_plot, this)),
      m_timer(new QTimer(this))
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_plot);
    m_plot->setMinimumSize(160, 120);
    m_plot->setNoAntialiasingOnDrag(true);
    m_plot->legend->setVisible(false);
    m_plot->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
    QFont small = font();
    small.setPointSizeF(small.pointSizeF() * 0.85);
    m_plot->legend->setFont(small);
    m_plot->xAxis->setTickLabelFont(small);
    m_plot->yAxis->setTickLabelFont(small);
    m_plot->xAxis->setLabelFont(small);
    m_plot->yAxis->setLabelFont(small);
    m_plot->yAxis2->setTickLabelFont(small);
    m_plot->yAxis2->setLabelFont(small);
    m_plot->yAxis2->grid()->setVisible(false); // the left axis' grid is the plot's
    if (!title.isEmpty()) setTitle(title);

    m_timer->setSingleShot(true);
    connect(m_timer, &QTimer::timeout, this, &PlotWidget::doReplot);
    applyPlotPalette(m_plot, palette());
    m_plot->installEventFilter(this); // the legend entries' tooltips
}

bool PlotWidget::eventFilter(QObject* watched, QEvent* event)
{
    if (watched != m_plot || event->type() != QEvent::ToolTip)
        return QWidget::eventFilter(watched, event);
    auto* help = static_cast<QHelpEvent*>(event);
    auto* item = qobject_cast<QCPPlottableLegendItem*>(m_plot->layoutElementAt(help->pos()));
    const int series =
        item ? int(m_graphs.indexOf(qobject_cast<QCPGraph*>(item->plottable()))) : -1;
    if (series < 0) {
        QToolTip::hideText();
        return false; // the plot's own tooltip, if any
    }
    QToolTip::showText(help->globalPos(), seriesToolTip(series), m_plot);
    return true;
}

void PlotWidget::setSeriesToolTip(int series, const QString& text)
{
    if (m_toolTips.size() < m_graphs.size()) m_toolTips.resize(m_graphs.size());
    m_toolTips[series] = text;
}

QString PlotWidget::seriesToolTip(int series) const
{
    const QString tip = series < m_toolTips.size() ? m_toolTips.at(series) : QString();
    return tip.isEmpty() ? m_graphs.at(series)->name() : tip;
}

void PlotWidget::setLegendBelow(int columns)
{
    if (!m_legendBelow) {
        m_plot->axisRect()->insetLayout()->take(m_plot->legend);
        m_plot->plotLayout()->addElement(m_plot->plotLayout()->rowCount(), 0, m_plot->legend);
        m_plot->plotLayout()->setRowStretchFactor(m_plot->plotLayout()->rowCount() - 1, 0.001);
        m_plot->legend->setMargins(QMargins(4, 2, 4, 2));
        m_plot->legend->setIconSize(20, 10); // the names need the width more
        m_legendBelow = true;
    }
    m_legendColumns = std::max(1, columns);
    m_plot->legend->setWrap(m_legendColumns);
    m_plot->legend->setFillOrder(QCPLegend::foColumnsFirst, true); // in that wrap
    fitLegendToWidth();
    requestReplot();
}

PlotWidget::~PlotWidget() = default;

void PlotWidget::setTitle(const QString& title)
{
    if (!m_title) {
        m_title = addPlotTitle(m_plot, title, font());
        m_title->setTextColor(palette().color(QPalette::WindowText));
    }
    m_title->setText(title);
    requestReplot();
}

QString PlotWidget::title() const
{
    return m_title ? m_title->text() : QString();
}

void PlotWidget::setAxisLabels(const QString& x, const QString& y)
{
    m_plot->xAxis->setLabel(x);
    m_plot->yAxis->setLabel(y);
    requestReplot();
}

void PlotWidget::setRightAxisLabel(const QString& label)
{
    m_plot->yAxis2->setLabel(label);
    requestReplot();
}

bool PlotWidget::rightAxisShown() const
{
    return m_plot->yAxis2->visible();
}

void PlotWidget::setYRange(double lower, double upper)
{
    m_fixedY = true;
    m_yLower = lower;
    m_yUpper = upper;
    m_plot->yAxis->setRange(lower, upper);
    requestReplot();
}

void PlotWidget::setLogY(bool on)
{
    m_plot->yAxis->setScaleType(on ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
    if (on)
        m_plot->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>::create());
    else
        m_plot->yAxis->setTicker(QSharedPointer<QCPAxisTicker>::create());
    requestReplot();
}

void PlotWidget::setEmptyMessage(const QString& text)
{
    m_empty->setMessage(text);
    updateEmptyMessage();
    requestReplot(); // the axes shown or hidden
}

int PlotWidget::addSeries(const QString& name, SeriesStyle style)
{
    QCPGraph* g =
        style.rightAxis ? m_plot->addGraph(m_plot->xAxis, m_plot->yAxis2) : m_plot->addGraph();
    g->setName(name);
    g->setAdaptiveSampling(true);
    m_graphs.push_back(g);
    m_styles.push_back(style);
    m_fractionalX.push_back(false);
    const int index = int(m_graphs.size()) - 1;
    QColor c = seriesColor(style.colorSlot >= 0 ? style.colorSlot : index, palette());
    c.setAlpha(style.alpha);
    g->setPen(QPen(c, style.width, style.pen));
    if (style.markers) g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, c, c, 5));
    if (!style.inLegend) g->removeFromLegend();
    m_plot->legend->setVisible(m_plot->legend->itemCount() >= 2);
    requestReplot();
    return index;
}

int PlotWidget::seriesCount() const
{
    return int(m_graphs.size());
}

QString PlotWidget::seriesName(int series) const
{
    return m_graphs.at(series)->name();
}

void PlotWidget::setSeriesName(int series, const QString& name)
{
    m_graphs.at(series)->setName(name);
    requestReplot();
}

void PlotWidget::setSeriesVisible(int series, bool visible)
{
    QCPGraph* g = m_graphs.at(series);
    if (g->visible() == visible) return;
    g->setVisible(visible);
    // A hidden series has no legend entry: a curve that is not drawn is not named.
    if (m_styles.at(series).inLegend) {
        if (visible)
            g->addToLegend();
        else
            g->removeFromLegend();
        m_plot->legend->setVisible(m_plot->legend->itemCount() >= 2);
        fitLegendToWidth();
    }
    requestReplot();
}

void PlotWidget::addPoint(int series, double x, double y)
{
    m_graphs.at(series)->addData(x, y);
    if (!isWhole(x)) m_fractionalX[series] = true;
    updateEmptyMessage();
    requestReplot();
}

void PlotWidget::addPoints(int series, const QVector<double>& x, const QVector<double>& y)
{
    if (x.isEmpty()) return;
    m_graphs.at(series)->addData(x, y, true);
    if (!std::all_of(x.begin(), x.end(), isWhole)) m_fractionalX[series] = true;
    updateEmptyMessage();
    requestReplot();
}

void PlotWidget::setData(int series, const QVector<double>& x, const QVector<double>& y)
{
    m_graphs.at(series)->setData(x, y, true);
    m_fractionalX[series] = !std::all_of(x.begin(), x.end(), isWhole);
    updateEmptyMessage();
    requestReplot();
}

int PlotWidget::pointCount(int series) const
{
    return m_graphs.at(series)->dataCount();
}

double PlotWidget::lastValue(int series) const
{
    const auto points = m_graphs.at(series)->data();
    return points->isEmpty() ? std::nan("") : (points->constEnd() - 1)->value;
}

void PlotWidget::clearData()
{
    for (auto* g : m_graphs) g->data()->clear();
    m_fractionalX.fill(false);
    updateEmptyMessage();
    requestReplot();
}

void PlotWidget::clearSeries()
{
    m_plot->clearGraphs();
    m_graphs.clear();
    m_styles.clear();
    m_fractionalX.clear();
    m_toolTips.clear();
    m_plot->legend->setVisible(false);
    updateEmptyMessage();
    requestReplot();
}

void PlotWidget::requestReplot()
{
    m_dirty = true;
    if (m_timer->isActive()) return;
    const qint64 since = m_sinceReplot.isValid() ? m_sinceReplot.elapsed() : kMinReplotIntervalMs;
    m_timer->start(int(std::max<qint64>(0, kMinReplotIntervalMs - since)));
}

void PlotWidget::replotNow()
{
    m_dirty = true;
    doReplot();
}

bool PlotWidget::rangeOf(bool right, QCPRange& x, QCPRange& y, bool& wholeX) const
{
    bool any = false;
    for (int i = 0; i < m_graphs.size(); ++i) {
        QCPGraph* g = m_graphs[i];
        if (m_styles[i].rightAxis != right || !g->visible() || g->data()->isEmpty()) continue;
        bool okX = false, okY = false;
        const QCPRange gx = g->getKeyRange(okX);
        const QCPRange gy = g->getValueRange(okY, QCP::sdBoth);
        if (!okX || !okY) continue;
        wholeX = wholeX && !m_fractionalX[i];
        if (!any) {
            x = gx;
            y = gy;
            any = true;
        } else {
            x.expand(gx);
            y.expand(gy);
        }
    }
    return any;
}

void PlotWidget::setFollowingRange(QCPAxis* axis, QCPRange y)
{
    if (axis->scaleType() == QCPAxis::stLogarithmic) {
        if (y.lower <= 0) y.lower = y.upper > 0 ? y.upper * 1e-3 : 1e-6;
        axis->setRange(y.lower / 1.2, y.upper * 1.2);
        return;
    }
    const double pad = y.size() > 0 ? y.size() * 0.06 : std::max(std::abs(y.upper) * 0.05, 1e-3);
    axis->setRange(y.lower - pad, y.upper + pad);
}

void PlotWidget::rescale()
{
    bool wholeX = true;
    QCPRange x, y, rightX, rightY;
    const bool left = rangeOf(false, x, y, wholeX);
    const bool right = rangeOf(true, rightX, rightY, wholeX);
    // The right axis, with its ticks and label, only while a series of it has points.
    if (m_plot->yAxis2->visible() != right) {
        m_plot->yAxis2->setVisible(right);
        m_plot->yAxis2->setTickLabels(right);
    }
    if (!left && !right) return;
    if (!left)
        x = rightX;
    else if (right)
        x.expand(rightX);
    if (x.size() <= 0) x = QCPRange(x.lower - 0.5, x.upper + 0.5);
    m_plot->xAxis->setRange(x);
    // Steps are whole: their axis never shows 299.6 / 299.8 / 300 around a single point.
    if (wholeX != m_wholeXTicks) {
        m_wholeXTicks = wholeX;
        if (wholeX)
            m_plot->xAxis->setTicker(QSharedPointer<WholeTicker>::create());
        else
            m_plot->xAxis->setTicker(QSharedPointer<QCPAxisTicker>::create());
    }
    fitTicksToWidth();
    fitLegendToWidth();
    if (right) setFollowingRange(m_plot->yAxis2, rightY);
    if (left && !m_fixedY) setFollowingRange(m_plot->yAxis, y);
}

void PlotWidget::doReplot()
{
    if (!m_dirty) return;
    if (!isVisible()) return; // showEvent redraws
    m_dirty = false;
    rescale();
    m_plot->replot(QCustomPlot::rpImmediateRefresh);
    m_sinceReplot.restart();
    ++m_replots;
}

void PlotWidget::updateEmptyMessage()
{
    bool empty = true;
    for (auto* g : m_graphs) empty = empty && g->data()->isEmpty();
    m_empty->showIf(empty);
}

void PlotWidget::changeEvent(QEvent* event)
{
    if (event->type() == QEvent::PaletteChange || event->type() == QEvent::StyleChange) {
        applyPlotPalette(m_plot, palette());
        for (int i = 0; i < m_graphs.size(); ++i) {
            const auto& s = m_styles[i];
            QColor c = seriesColor(s.colorSlot >= 0 ? s.colorSlot : i, palette());
            c.setAlpha(s.alpha);
            QPen pen = m_graphs[i]->pen();
            pen.setColor(c);
            m_graphs[i]->setPen(pen);
            if (s.markers)
                m_graphs[i]->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, c, c, 5));
        }
        requestReplot();
    }
    if (event->type() == QEvent::FontChange) m_empty->place(); // its font follows this one's
    QWidget::changeEvent(event);
}

void PlotWidget::showEvent(QShowEvent* event)
{
    QWidget::showEvent(event);
    updateEmptyMessage();
    if (m_dirty) requestReplot();
}

} // namespace towers::ui

namespace towers::ui {

void PlotWidget::resizeEvent(QResizeEvent* event)
{
    QWidget::resizeEvent(event);
    m_empty->place();
    const bool ticks = fitTicksToWidth();
    if (fitLegendToWidth() || ticks) requestReplot();
}

bool PlotWidget::fitLegendToWidth()
{
    if (!m_legendBelow) return false;
    QCPLegend* legend = m_plot->legend;
    // QCustomPlot counts the cells of its grid as items: a last row that is not full has empty
    // ones (null), passed over.
    int widest = 1, items = 0;
    for (int i = 0; i < legend->itemCount(); ++i)
        if (const QCPAbstractLegendItem* item = legend->item(i)) {
            widest = std::max(widest, item->minimumOuterSizeHint().width());
            ++items;
        }
    const QMargins margins = legend->margins();
    const int room = m_plot->width() - margins.left() - margins.right();
    int columns = std::clamp((room + legend->columnSpacing()) / (widest + legend->columnSpacing()),
                             1, m_legendColumns);
    // Not taller than three rows (or the rows asked for): many runs' names are cut rather than
    // take the plot's height.
    const auto rows = [items](int c) { return (items + c - 1) / c; };
    while (columns < m_legendColumns && rows(columns) > std::max(3, rows(m_legendColumns)))
        ++columns;
    if (legend->wrap() == columns) return false;
    legend->setWrap(columns);
    legend->setFillOrder(legend->fillOrder(), true); // the items laid out again in that wrap
    return true;
}

bool PlotWidget::fitTicksToWidth()
{
    QCPAxis* x = m_plot->xAxis;
    if (x->scaleType() != QCPAxis::stLinear) return false;
    // The widest label the range can have, and a gap of two digits' width after it.
    const QFontMetrics metrics(x->tickLabelFont());
    const double extent = std::max(std::abs(x->range().lower), std::abs(x->range().upper));
    const int label = metrics.horizontalAdvance(
        QLocale::c().toString(-extent, 'g', x->numberPrecision()) + QStringLiteral("00"));
    // The axis rect's width as last laid out; before the first layout the plot's less a margin.
    const int rect = m_plot->axisRect()->width();
    const int width = rect > 0 ? std::min(rect, m_plot->width()) : m_plot->width() - 60;
    const int count = std::clamp(width / std::max(1, label), 2, 5);
    if (x->ticker()->tickCount() == count) return false;
    x->ticker()->setTickCount(count);
    return true;
}

} // namespace towers::ui
