#pragma once
// What a plot says in place of its data while it has none ("Start a run to see it here"): a label
// over the plot's area below its title, the plot's axes hidden behind it (no stale axes of the
// data it had), its font made smaller where the text would not fit a small plot.
#include <QLabel>

class QCustomPlot;

namespace towers::ui {

class EmptyMessage : public QLabel
{
    Q_OBJECT
public:
    // Over `plot`, a child of `parent` (the plot widget, whose rect it fills).
    EmptyMessage(QCustomPlot* plot, QWidget* parent);

    void setMessage(const QString& text);
    // Shown (with the axes hidden) when `empty` and there is a message, else hidden with the axes
    // shown. The plot is not redrawn here: its owner's next replot shows the change.
    void showIf(bool empty);
    // After the parent's resize: the rect, and the font that fits it.
    void place();

private:
    QCustomPlot* m_plot;
};

} // namespace towers::ui
