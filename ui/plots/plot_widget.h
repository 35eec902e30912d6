#pragma once
// A small reusable wrapper around QCustomPlot for the line plots of every page: named series,
// points appended as they arrive, axes that follow the data, colours that follow the palette, and
// replots coalesced so that however fast points arrive, the plot redraws at most 25 times a
// second (and not at all while hidden).
#include <QElapsedTimer>
#include <QString>
#include <QVector>
#include <QWidget>

#include "ui/plots/empty_message.h"

class QCustomPlot;
class QCPAxis;
class QCPGraph;
class QCPRange;
class QCPTextElement;
class QTimer;

namespace towers::ui {

class PlotWidget : public QWidget
{
    Q_OBJECT
public:
    // Fewest milliseconds between two replots.
    static constexpr int kMinReplotIntervalMs = 40;

    explicit PlotWidget(const QString& title = {}, QWidget* parent = nullptr);
    ~PlotWidget() override;

    void setTitle(const QString& title);
    QString title() const;
    void setAxisLabels(const QString& x, const QString& y);
    // The label of the axis on the right, which series of SeriesStyle::rightAxis follow; the axis
    // shows while one of them has a point.
    void setRightAxisLabel(const QString& label);
    // Whether the right axis shows now (tests).
    bool rightAxisShown() const;
    // A fixed y range (accuracy 0..1); without it the y axis follows the data.
    void setYRange(double lower, double upper);
    void setLogY(bool on);
    // Shown over the plot while no series has a point ("Waiting for the first step").
    void setEmptyMessage(const QString& text);

    struct SeriesStyle
    {
        int colorSlot = -1; // -1: the series' index
        Qt::PenStyle pen = Qt::SolidLine;
        double width = 1.5;
        bool markers = false; // a dot at every point (sparse series: evaluations)
        bool inLegend = true;
        int alpha = 255;        // raw curves under their smoothed twin are translucent
        bool rightAxis = false; // on the axis on the right, of its own scale

        // A noisy curve and its smoothed twin in one colour (`colorSlot`): the raw one thin and
        // translucent underneath, the smoothed one on top (the Train page's loss, the range test).
        static SeriesStyle raw(int colorSlot = 0)
        {
            SeriesStyle s;
            s.colorSlot = colorSlot;
            s.width = 1;
            s.alpha = 80;
            return s;
        }
        static SeriesStyle smoothed(int colorSlot = 0)
        {
            SeriesStyle s;
            s.colorSlot = colorSlot;
            s.width = 2;
            return s;
        }
        // The evaluations, a dot at each (sparse: one every few hundred steps).
        static SeriesStyle evaluations(int colorSlot = 2)
        {
            SeriesStyle s;
            s.colorSlot = colorSlot;
            s.markers = true;
            return s;
        }
        // Precision @ 5 beside the evaluations' precision @ 1: dashed, in a colour of its own
        // (the Train page's and the Runs page's accuracy plots).
        static SeriesStyle topFive()
        {
            SeriesStyle s = evaluations(3);
            s.pen = Qt::DashLine;
            return s;
        }
    };
    // Adds a series and returns its index; the legend shows once there are two or more.
    int addSeries(const QString& name, SeriesStyle style);
    int addSeries(const QString& name) { return addSeries(name, SeriesStyle{}); }
    int seriesCount() const;
    QString seriesName(int series) const;
    void setSeriesName(int series, const QString& name);
    // Shows or hides a series' curve, and its legend entry with it.
    void setSeriesVisible(int series, bool visible);
    // What the series' legend entry shows as its tooltip (a name shortened in the legend in
    // full); the series' name when none is set.
    void setSeriesToolTip(int series, const QString& text);
    QString seriesToolTip(int series) const;
    // The legend in a row of its own under the plot, entries side by side (`columns` a row), so
    // that it never covers the curves (the Runs page's comparison of many runs); else it sits in
    // the plot's top right corner.
    void setLegendBelow(int columns);
    bool isLegendBelow() const { return m_legendBelow; }

    // Points must come in increasing x (the plots are over steps or time). While every point's x
    // is a whole number (steps), the x axis has ticks at whole numbers only.
    void addPoint(int series, double x, double y);
    void addPoints(int series, const QVector<double>& x, const QVector<double>& y);
    void setData(int series, const QVector<double>& x, const QVector<double>& y);
    int pointCount(int series) const;
    // The last point's y of a series (NaN when it has none).
    double lastValue(int series) const;
    // Removes every point (the series stay) / every series.
    void clearData();
    void clearSeries();

    // Asks for a redraw: the first request after a quiet spell redraws at once (on the next event
    // loop turn), later ones are merged so that redraws are at least kMinReplotIntervalMs apart.
    void requestReplot();
    // Redraws now (screenshots, tests).
    void replotNow();
    // How many redraws happened (tests check the coalescing).
    int replotCount() const { return m_replots; }

    // For the rare plot that needs QCustomPlot itself (extra layers, items).
    QCustomPlot* customPlot() const { return m_plot; }

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;
    void changeEvent(QEvent* event) override;
    void showEvent(QShowEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;

private:
    void doReplot();
    void updateEmptyMessage();
    void rescale();
    // The range the visible series on one side have; false when none has a point.
    bool rangeOf(bool right, QCPRange& x, QCPRange& y, bool& wholeX) const;
    // Sets an axis that follows the data to `y`, padded (or a log axis' decades).
    void setFollowingRange(QCPAxis* axis, QCPRange y);
    // As many x ticks as the axis' width holds with room between their labels (at most
    // QCustomPlot's 5): a narrow plot would run "50100150" together. True when it changed.
    bool fitTicksToWidth();
    // A legend below the plot in as many of its columns as the width holds whole (one at the
    // least): a narrow plot would cut its names ("los"). True when it changed.
    bool fitLegendToWidth();

    QCustomPlot* m_plot;
    QCPTextElement* m_title = nullptr;
    EmptyMessage* m_empty;
    QTimer* m_timer;
    QElapsedTimer m_sinceReplot;
    QVector<QCPGraph*> m_graphs;
    QVector<SeriesStyle> m_styles;
    QVector<QString> m_toolTips; // per series; empty: its name
    QVector<bool> m_fractionalX; // per series: some point's x is not a whole number
    bool m_wholeXTicks = false;  // the x axis' ticker is WholeTicker
    bool m_legendBelow = false;
    int m_legendColumns = 1; // asked for by setLegendBelow
    bool m_dirty = false;
    bool m_fixedY = false;
    double m_yLower = 0, m_yUpper = 1;
    int m_replots = 0;
};

} // namespace towers::ui
