#pragma once
// A stacked bar chart: every bar is split into the same named segments (each with its colour and a
// legend entry), stacked in order from the axis. Two kinds of keys: labelled bars (one per tower,
// the Devices page's "where each tower's step goes", with the total at the end of each bar, each
// segment's value written inside it where it fits and highlighted bars outlined) or columns over a
// numeric axis (a timeline over steps). Hovering a bar shows its segments' values and shares.
#include <QStringList>
#include <QVector>
#include <QWidget>

#include "ui/plots/empty_message.h"

class QCustomPlot;
class QCPBars;
class QCPItemText;
class QCPTextElement;

namespace towers::ui {

class StackedBarChart : public QWidget
{
    Q_OBJECT
public:
    // Horizontal: labels on the left, the first bar at the top, segments stacked left to right.
    StackedBarChart(const QString& title, Qt::Orientation orientation, QWidget* parent = nullptr);
    ~StackedBarChart() override;

    void setTitle(const QString& title);
    QString title() const;
    // The segments of every bar, from the axis outwards; `colorSlots` picks each one's colour from
    // the data cycle (seriesColor). Clears the bars.
    void setSegments(const QStringList& names, const QVector<int>& colorSlots);
    int segmentCount() const { return int(m_segmentNames.size()); }
    QString segmentName(int segment) const { return m_segmentNames.at(segment); }
    // The colour a segment is drawn with (for the current palette).
    QColor segmentColor(int segment) const;

    // The unit of the values ("ms"): the value axis' label and the texts' and tooltips' suffix.
    void setUnit(const QString& unit);
    // The key axis' label for columns ("step"; the tooltip says "step 120").
    void setKeyLabel(const QString& label);
    void setLegendVisible(bool visible);
    // Totals at the end of the bars and values inside the segments (labelled bars only).
    void setValueTextsVisible(bool visible);
    void setDecimals(int decimals);
    // Shown while there are no bars.
    void setEmptyMessage(const QString& text);

    // Labelled bars; values[bar][segment] (negative values count as 0). `highlighted` (same
    // length, or empty) outlines those bars in the highlight colour.
    void setBars(const QStringList& labels, const QVector<QVector<double>>& values,
                 const QVector<bool>& highlighted = {});
    // Columns at numeric keys (increasing), e.g. steps; values[column][segment].
    void setColumns(const QVector<double>& keys, const QVector<QVector<double>>& values);
    void clear();

    int barCount() const { return int(m_values.size()); }
    QString label(int bar) const;
    double key(int bar) const { return m_keys.at(bar); }
    double value(int bar, int segment) const { return m_values.at(bar).value(segment, 0.0); }
    double total(int bar) const;
    bool isHighlighted(int bar) const { return m_highlighted.value(bar, false); }
    // The text of a bar's tooltip: its label, total and each segment's value and share.
    QString toolTip(int bar) const;
    // The bar under a point of the plot (customPlot() coordinates), or -1.
    int barAt(const QPoint& pos) const;

    QCustomPlot* customPlot() const { return m_plot; }
    // The QCPBars of a segment (its data: one point per bar, at key(bar)).
    QCPBars* segmentBars(int segment) const { return m_bars.at(segment); }
    // Replots now (tests, screenshots); otherwise replots are queued and skipped while hidden.
    void replotNow();

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;
    void changeEvent(QEvent* event) override;
    void showEvent(QShowEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;

private:
    void rebuild();
    void applyColors();
    void requestReplot();
    void placeTexts();
    void updateEmptyMessage();
    double barWidth() const;

    Qt::Orientation m_orientation;
    QCustomPlot* m_plot;
    QCPTextElement* m_title;
    EmptyMessage* m_empty;
    QVector<QCPBars*> m_bars;
    QStringList m_segmentNames;
    QVector<int> m_colorSlots;
    QString m_unit;
    QString m_keyLabel;
    bool m_legendVisible = true;
    bool m_valueTexts = false;
    int m_decimals = 1;
    bool m_labelled = true;
    QStringList m_labels;
    QVector<double> m_keys;
    QVector<QVector<double>> m_values;
    QVector<bool> m_highlighted;
    double m_width = 0.7;
    struct SegmentText
    {
        QCPItemText* item;
        int bar, segment;
    };
    QVector<SegmentText> m_segmentTexts;
    QVector<QCPItemText*> m_totalTexts;
    bool m_dirty = false;
};

} // namespace towers::ui
