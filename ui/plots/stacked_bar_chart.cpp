#include "ui/plots/stacked_bar_chart.h"

#include <QEvent>
#include <QFontMetrics>
#include <QHelpEvent>
#include <QToolTip>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include <algorithm>
#include <cmath>

#include "ui/plots/plot_theme.h"

namespace towers::ui {

namespace {

QFont smallFont(const QFont& f)
{
    QFont small = f;
    small.setPointSizeF(small.pointSizeF() * 0.85);
    return small;
}

// Black text on light fills, white on dark ones.
QColor textOn(const QColor& fill)
{
    const double luminance = 0.299 * fill.red() + 0.587 * fill.green() + 0.114 * fill.blue();
    return luminance >= 128 ? QColor(Qt::black) : QColor(Qt::white);
}

} // namespace

StackedBarChart::StackedBarChart(const QString& title, Qt::Orientation orientation, QWidget* parent)
    : QWidget(parent), m_orientation(orientation), m_plot(new QCustomPlot(this)),
      m_empty(new EmptyMessage(m_plot, this))
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_plot);
    m_plot->setMinimumSize(160, 120);
    m_title = addPlotTitle(m_plot, title, font());
    // The legend in a row of its own under the title (rebuild() adds it), its entries side by
    // side.
    m_plot->axisRect()->insetLayout()->take(m_plot->legend);
    m_plot->legend->setFillOrder(QCPLegend::foColumnsFirst);
    m_plot->legend->setFont(smallFont(font()));
    m_plot->legend->setIconSize(12, 10);
    m_plot->legend->setMargins(QMargins(4, 1, 4, 1));
    m_plot->legend->setRowSpacing(0);
    m_plot->legend->setColumnSpacing(10);
    m_plot->legend->setVisible(false);

    QCPAxis* keyAxis = orientation == Qt::Horizontal ? m_plot->yAxis : m_plot->xAxis;
    QCPAxis* valueAxis = orientation == Qt::Horizontal ? m_plot->xAxis : m_plot->yAxis;
    keyAxis->setTickLabelFont(smallFont(font()));
    keyAxis->setLabelFont(smallFont(font()));
    valueAxis->setTickLabelFont(smallFont(font()));
    valueAxis->setLabelFont(smallFont(font()));
    if (orientation == Qt::Horizontal) keyAxis->setRangeReversed(true); // first bar on top

    connect(m_plot, &QCustomPlot::afterLayout, this, &StackedBarChart::placeTexts);
    connect(m_plot, &QCustomPlot::afterReplot, this, [this] { m_dirty = false; });
    m_plot->installEventFilter(this);
    applyPlotPalette(m_plot, palette());
    rebuild();
}

StackedBarChart::~StackedBarChart() = default;

void StackedBarChart::setTitle(const QString& title)
{
    m_title->setText(title);
    requestReplot();
}

QString StackedBarChart::title() const
{
    return m_title->text();
}

void StackedBarChart::setSegments(const QStringList& names, const QVector<int>& colorSlots)
{
    for (auto* bars : m_bars) m_plot->removePlottable(bars);
    m_bars.clear();
    m_segmentNames = names;
    m_colorSlots = colorSlots;
    QCPAxis* keyAxis = m_orientation == Qt::Horizontal ? m_plot->yAxis : m_plot->xAxis;
    QCPAxis* valueAxis = m_orientation == Qt::Horizontal ? m_plot->xAxis : m_plot->yAxis;
    for (int s = 0; s < names.size(); ++s) {
        auto* bars = new QCPBars(keyAxis, valueAxis);
        bars->setName(names[s]);
        bars->setStackingGap(0);
        if (!m_bars.isEmpty()) bars->moveAbove(m_bars.back());
        m_bars.push_back(bars);
    }
    m_labels.clear();
    m_keys.clear();
    m_values.clear();
    m_highlighted.clear();
    applyColors();
    rebuild();
}

QColor StackedBarChart::segmentColor(int segment) const
{
    return seriesColor(m_colorSlots.value(segment, segment), palette());
}

void StackedBarChart::setUnit(const QString& unit)
{
    m_unit = unit;
    (m_orientation == Qt::Horizontal ? m_plot->xAxis : m_plot->yAxis)->setLabel(unit);
    rebuild();
}

void StackedBarChart::setKeyLabel(const QString& label)
{
    m_keyLabel = label;
    (m_orientation == Qt::Horizontal ? m_plot->yAxis : m_plot->xAxis)->setLabel(label);
    requestReplot();
}

void StackedBarChart::setLegendVisible(bool visible)
{
    m_legendVisible = visible;
    rebuild();
}

void StackedBarChart::setValueTextsVisible(bool visible)
{
    m_valueTexts = visible;
    rebuild();
}

void StackedBarChart::setDecimals(int decimals)
{
    m_decimals = decimals;
    rebuild();
}

void StackedBarChart::setEmptyMessage(const QString& text)
{
    m_empty->setMessage(text);
    updateEmptyMessage();
    requestReplot(); // the axes shown or hidden
}

void StackedBarChart::setBars(const QStringList& labels, const QVector<QVector<double>>& values,
                              const QVector<bool>& highlighted)
{
    m_labelled = true;
    m_labels = labels;
    m_values = values;
    m_highlighted = highlighted;
    m_keys.clear();
    for (int i = 0; i < values.size(); ++i) m_keys.push_back(i + 1);
    rebuild();
}

void StackedBarChart::setColumns(const QVector<double>& keys,
                                 const QVector<QVector<double>>& values)
{
    m_labelled = false;
    m_labels.clear();
    m_keys = keys.mid(0, values.size());
    m_values = values.mid(0, keys.size());
    m_highlighted.clear();
    rebuild();
}

void StackedBarChart::clear()
{
    m_labels.clear();
    m_keys.clear();
    m_values.clear();
    m_highlighted.clear();
    rebuild();
}

QString StackedBarChart::label(int bar) const
{
    if (m_labelled) return m_labels.value(bar);
    const QString key = QString::number(m_keys.at(bar), 'g', 12);
    return m_keyLabel.isEmpty() ? key : m_keyLabel + QLatin1Char(' ') + key;
}

double StackedBarChart::total(int bar) const
{
    double sum = 0;
    for (double v : m_values.at(bar)) sum += std::max(0.0, v);
    return sum;
}

double StackedBarChart::barWidth() const
{
    if (m_labelled) return 0.7;
    double spacing = 0;
    for (int i = 1; i < m_keys.size(); ++i) {
        const double d = m_keys[i] - m_keys[i - 1];
        if (d > 0 && (spacing == 0 || d < spacing)) spacing = d;
    }
    return 0.8 * (spacing > 0 ? spacing : 1);
}

void StackedBarChart::applyColors()
{
    const QPalette pal = palette();
    for (int s = 0; s < m_bars.size(); ++s) {
        QColor c = segmentColor(s);
        m_bars[s]->setBrush(c);
        // Labelled bars: a thin line of the background between segments; narrow columns: none.
        m_bars[s]->setPen(m_labelled ? QPen(pal.color(QPalette::Base), 1) : QPen(Qt::NoPen));
    }
}

void StackedBarChart::rebuild()
{
    const QPalette pal = palette();
    m_width = barWidth();
    applyColors();
    double maxTotal = 0;
    for (int s = 0; s < m_bars.size(); ++s) {
        QVector<double> keys, values;
        for (int i = 0; i < m_values.size(); ++i) {
            keys << m_keys[i];
            values << std::max(0.0, m_values[i].value(s, 0.0));
        }
        m_bars[s]->setWidth(m_width);
        m_bars[s]->setData(keys, values, true);
    }
    for (int i = 0; i < m_values.size(); ++i) maxTotal = std::max(maxTotal, total(i));

    QCPAxis* keyAxis = m_orientation == Qt::Horizontal ? m_plot->yAxis : m_plot->xAxis;
    QCPAxis* valueAxis = m_orientation == Qt::Horizontal ? m_plot->xAxis : m_plot->yAxis;
    if (m_labelled) {
        auto ticker = QSharedPointer<QCPAxisTickerText>::create();
        for (int i = 0; i < m_values.size(); ++i) ticker->addTick(m_keys[i], m_labels.value(i));
        keyAxis->setTicker(ticker);
        keyAxis->grid()->setVisible(false);
        keyAxis->setTickLength(0, 0);
        keyAxis->setSubTicks(false);
        keyAxis->setRange(0.4, std::max<double>(1, m_values.size()) + 0.6);
    } else {
        if (keyAxis->ticker().dynamicCast<QCPAxisTickerText>())
            keyAxis->setTicker(QSharedPointer<QCPAxisTicker>::create());
        keyAxis->grid()->setVisible(true);
        keyAxis->setTickLength(0, 5);
        keyAxis->setSubTicks(true);
        const double spacing = m_width / 0.8;
        if (m_keys.isEmpty())
            keyAxis->setRange(0, 1);
        else if (m_keys.size() == 1)
            keyAxis->setRange(m_keys.front() - 2 * spacing, m_keys.front() + 2 * spacing);
        else
            keyAxis->setRange(m_keys.front() - 0.6 * spacing, m_keys.back() + 0.6 * spacing);
    }
    // Room for the totals at the end of the bars is made once the axis' length is known.
    valueAxis->setRange(0, maxTotal > 0 ? maxTotal * (m_labelled && m_valueTexts ? 1.2 : 1.08) : 1);

    m_plot->clearItems();
    m_segmentTexts.clear();
    m_totalTexts.clear();
    if (m_labelled && m_valueTexts) {
        const QFont small = smallFont(font());
        QColor highColor = seriesColor(3, pal); // red: "this one is off"
        for (int i = 0; i < m_values.size(); ++i) {
            double base = 0;
            for (int s = 0; s < m_bars.size(); ++s) {
                const double v = std::max(0.0, m_values[i].value(s, 0.0));
                if (v > 0) {
                    auto* text = new QCPItemText(m_plot);
                    text->position->setAxes(m_plot->xAxis, m_plot->yAxis);
                    if (m_orientation == Qt::Horizontal)
                        text->position->setCoords(base + v / 2, m_keys[i]);
                    else
                        text->position->setCoords(m_keys[i], base + v / 2);
                    text->setPositionAlignment(Qt::AlignCenter);
                    text->setFont(small);
                    text->setColor(textOn(segmentColor(s)));
                    text->setText(QString::number(v, 'f', m_decimals));
                    m_segmentTexts.push_back({text, i, s});
                }
                base += v;
            }
            const bool high = m_highlighted.value(i, false);
            auto* text = new QCPItemText(m_plot);
            text->setClipToAxisRect(false);
            QFont f = small;
            f.setBold(high);
            text->setFont(f);
            text->setColor(high ? highColor : pal.color(QPalette::Text));
            text->setText(QString::number(base, 'f', m_decimals) +
                          (m_unit.isEmpty() ? QString() : QLatin1Char(' ') + m_unit));
            text->position->setAxes(m_plot->xAxis, m_plot->yAxis);
            if (m_orientation == Qt::Horizontal) {
                text->position->setCoords(base, m_keys[i]);
                text->setPositionAlignment(Qt::AlignLeft | Qt::AlignVCenter);
                text->setPadding(QMargins(4, 0, 0, 0));
            } else {
                text->position->setCoords(m_keys[i], base);
                text->setPositionAlignment(Qt::AlignHCenter | Qt::AlignBottom);
                text->setPadding(QMargins(0, 0, 0, 2));
            }
            m_totalTexts.push_back(text);
            if (high) {
                // An outline around the whole bar.
                auto* outline = new QCPItemRect(m_plot);
                outline->setPen(QPen(highColor, 2));
                outline->setBrush(Qt::NoBrush);
                const double k0 = m_keys[i] - m_width / 2 - 0.04,
                             k1 = m_keys[i] + m_width / 2 + 0.04;
                for (auto* p : {outline->topLeft, outline->bottomRight})
                    p->setAxes(m_plot->xAxis, m_plot->yAxis);
                if (m_orientation == Qt::Horizontal) {
                    outline->topLeft->setCoords(0, k0);
                    outline->bottomRight->setCoords(base, k1);
                } else {
                    outline->topLeft->setCoords(k0, base);
                    outline->bottomRight->setCoords(k1, 0);
                }
            }
        }
    }
    // The legend's row is there only while it shows.
    const bool legend = m_legendVisible && !m_bars.isEmpty();
    if (legend && !m_plot->legend->layout()) {
        m_plot->plotLayout()->insertRow(1);
        m_plot->plotLayout()->addElement(1, 0, m_plot->legend);
        m_plot->plotLayout()->setRowStretchFactor(1, 0.001);
    } else if (!legend && m_plot->legend->layout()) {
        m_plot->plotLayout()->take(m_plot->legend);
        m_plot->plotLayout()->simplify();
    }
    m_plot->legend->setVisible(legend);
    m_plot->legend->setBorderPen(Qt::NoPen); // a key line under the title, not a box
    m_title->setTextColor(pal.color(QPalette::WindowText));
    updateEmptyMessage();
    requestReplot();
}

void StackedBarChart::placeTexts()
{
    if (!m_labelled || !m_valueTexts || m_values.isEmpty()) return;
    QCPAxis* keyAxis = m_orientation == Qt::Horizontal ? m_plot->yAxis : m_plot->xAxis;
    QCPAxis* valueAxis = m_orientation == Qt::Horizontal ? m_plot->xAxis : m_plot->yAxis;
    // Leave room for the longest total beyond the longest bar.
    double maxTotal = 0;
    int reserve = 0;
    for (int i = 0; i < m_totalTexts.size(); ++i) {
        maxTotal = std::max(maxTotal, total(i));
        const QFontMetrics fm(m_totalTexts[i]->font());
        reserve = std::max(reserve, m_orientation == Qt::Horizontal
                                        ? fm.horizontalAdvance(m_totalTexts[i]->text()) + 10
                                        : fm.height() + 6);
    }
    const QRect rect = valueAxis->axisRect()->rect();
    const int length = m_orientation == Qt::Horizontal ? rect.width() : rect.height();
    if (maxTotal > 0 && length > 2 * reserve)
        valueAxis->setRange(0, maxTotal * double(length) / double(length - reserve));
    // A segment's value where it fits inside the segment.
    for (const auto& t : m_segmentTexts) {
        const double v = std::max(0.0, m_values[t.bar].value(t.segment, 0.0));
        const double centre = m_orientation == Qt::Horizontal ? t.item->position->coords().x()
                                                              : t.item->position->coords().y();
        const double along = std::abs(valueAxis->coordToPixel(centre + v / 2) -
                                      valueAxis->coordToPixel(centre - v / 2));
        const double across = std::abs(keyAxis->coordToPixel(m_keys[t.bar] + m_width / 2) -
                                       keyAxis->coordToPixel(m_keys[t.bar] - m_width / 2));
        const QFontMetrics fm(t.item->font());
        const int w = fm.horizontalAdvance(t.item->text()) + 6, h = fm.height();
        t.item->setVisible(m_orientation == Qt::Horizontal ? along >= w && across >= h
                                                           : along >= h && across >= w);
    }
}

int StackedBarChart::barAt(const QPoint& pos) const
{
    if (m_values.isEmpty() || !m_plot->axisRect()->rect().contains(pos)) return -1;
    const QCPAxis* keyAxis = m_orientation == Qt::Horizontal ? m_plot->yAxis : m_plot->xAxis;
    const double key = keyAxis->pixelToCoord(m_orientation == Qt::Horizontal ? pos.y() : pos.x());
    // Anywhere in the bar's band: a thin segment is still easy to point at.
    const double half = m_labelled ? 0.5 : m_width / 0.8 / 2;
    int best = -1;
    for (int i = 0; i < m_keys.size(); ++i)
        if (std::abs(m_keys[i] - key) <= half &&
            (best < 0 || std::abs(m_keys[i] - key) < std::abs(m_keys[best] - key)))
            best = i;
    return best;
}

QString StackedBarChart::toolTip(int bar) const
{
    if (bar < 0 || bar >= m_values.size()) return {};
    const double sum = total(bar);
    const QString unit = m_unit.isEmpty() ? QString() : QLatin1Char(' ') + m_unit;
    QString html = QStringLiteral("<b>%1</b>: %2%3<table cellspacing=\"0\" cellpadding=\"1\">")
                       .arg(label(bar).toHtmlEscaped())
                       .arg(sum, 0, 'f', m_decimals)
                       .arg(unit);
    for (int s = 0; s < m_segmentNames.size(); ++s) {
        const double v = std::max(0.0, value(bar, s));
        html += QStringLiteral("<tr><td><span style=\"color:%1\">&#9632;</span> %2</td>"
                               "<td align=\"right\">&nbsp;%3%4</td>"
                               "<td align=\"right\">&nbsp;%5&nbsp;%</td></tr>")
                    .arg(segmentColor(s).name(), m_segmentNames[s].toHtmlEscaped())
                    .arg(v, 0, 'f', m_decimals)
                    .arg(unit)
                    .arg(sum > 0 ? std::lround(100 * v / sum) : 0);
    }
    return html + QStringLiteral("</table>");
}

bool StackedBarChart::eventFilter(QObject* watched, QEvent* event)
{
    if (watched == m_plot && event->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(event);
        const int bar = barAt(help->pos());
        if (bar < 0) return false; // the chart's own tooltip, if any
        // Shown while the mouse stays in the bar's band.
        const QCPAxis* keyAxis = m_orientation == Qt::Horizontal ? m_plot->yAxis : m_plot->xAxis;
        const double half = m_labelled ? 0.5 : m_width / 0.8 / 2;
        const int a = int(keyAxis->coordToPixel(m_keys[bar] - half)),
                  b = int(keyAxis->coordToPixel(m_keys[bar] + half));
        const QRect axisRect = m_plot->axisRect()->rect();
        const QRect band =
            m_orientation == Qt::Horizontal
                ? QRect(axisRect.left(), std::min(a, b), axisRect.width(), std::abs(b - a) + 1)
                : QRect(std::min(a, b), axisRect.top(), std::abs(b - a) + 1, axisRect.height());
        QToolTip::showText(help->globalPos(), toolTip(bar), m_plot, band);
        return true;
    }
    return QWidget::eventFilter(watched, event);
}

void StackedBarChart::requestReplot()
{
    m_dirty = true;
    if (isVisible()) m_plot->replot(QCustomPlot::rpQueuedReplot);
}

void StackedBarChart::replotNow()
{
    m_plot->replot(QCustomPlot::rpImmediateRefresh);
}

void StackedBarChart::updateEmptyMessage()
{
    m_empty->showIf(m_values.isEmpty());
}

void StackedBarChart::changeEvent(QEvent* event)
{
    if (event->type() == QEvent::PaletteChange) {
        applyPlotPalette(m_plot, palette());
        rebuild();
    }
    if (event->type() == QEvent::FontChange) m_empty->place(); // its font follows this one's
    QWidget::changeEvent(event);
}

void StackedBarChart::showEvent(QShowEvent* event)
{
    QWidget::showEvent(event);
    updateEmptyMessage();
    if (m_dirty) m_plot->replot(QCustomPlot::rpQueuedReplot);
}

void StackedBarChart::resizeEvent(QResizeEvent* event)
{
    QWidget::resizeEvent(event);
    m_empty->place();
}

} // namespace towers::ui
