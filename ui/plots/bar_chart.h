#pragma once
// A bar chart with a label per bar, some of them highlighted: the top-5 classes of an image
// (horizontal, probabilities). Bars split into parts: StackedBarChart.
#include <QStringList>
#include <QVector>
#include <QWidget>

class QCustomPlot;
class QCPBars;
class QCPTextElement;

namespace towers::ui {

class BarChart : public QWidget
{
    Q_OBJECT
public:
    // Horizontal: labels on the left, the first bar at the top.
    BarChart(const QString& title, Qt::Orientation orientation, QWidget* parent = nullptr);
    ~BarChart() override;

    void setValueLabel(const QString& label);
    // A fixed value axis (0..1 for probabilities); without it the axis follows the values from 0.
    void setValueRange(double lower, double upper);
    // Text drawn at the end of each bar, e.g. "%1 %" (arg: the value times `textScale`); empty:
    // none.
    void setValueText(const QString& pattern, double textScale = 1, int decimals = 1);
    // Replaces the bars; `highlighted` (same length, or empty) draws those bars in the
    // highlight colour.
    void setBars(const QStringList& labels, const QVector<double>& values,
                 const QVector<bool>& highlighted = {});
    void clear() { setBars({}, {}); }

    int barCount() const { return int(m_values.size()); }
    QString label(int i) const { return m_labels.at(i); }
    double value(int i) const { return m_values.at(i); }
    bool isHighlighted(int i) const { return m_highlighted.value(i, false); }
    QCustomPlot* customPlot() const { return m_plot; }

protected:
    void changeEvent(QEvent* event) override;

private:
    void rebuild();

    Qt::Orientation m_orientation;
    QCustomPlot* m_plot;
    QCPTextElement* m_title;
    QCPBars* m_normal;
    QCPBars* m_high;
    QStringList m_labels;
    QVector<double> m_values;
    QVector<bool> m_highlighted;
    bool m_fixed = false;
    double m_lower = 0, m_upper = 1;
    QString m_textPattern;
    double m_textScale = 1;
    int m_decimals = 1;
};

} // namespace towers::ui
