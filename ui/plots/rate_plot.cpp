#include "ui/plots/rate_plot.h"

#include <QLocale>

#include "ui/plots/plot_widget.h"

namespace towers::ui {

QString RatePlot::title()
{
    return tr("Learning rate and gradient norm");
}

void RatePlot::labelAxes(PlotWidget* plot)
{
    plot->setAxisLabels(tr("step"), tr("learning rate"));
    plot->setRightAxisLabel(tr("gradient norm"));
}

void RatePlot::setUpSeries(PlotWidget* plot, double clipGradNorm, bool norm)
{
    plot->clearSeries();
    PlotWidget::SeriesStyle lr;
    lr.colorSlot = 4;
    plot->addSeries(tr("learning rate"), lr);
    if (!norm) return;
    PlotWidget::SeriesStyle style;
    style.colorSlot = 3;
    style.width = 1;
    style.rightAxis = true;
    plot->addSeries(tr("gradient norm"), style);
    plot->setSeriesToolTip(GradientNorm,
                           tr("The global norm of the averaged gradients at each logged step, "
                              "before any clipping (the axis on the right)"));
    if (clipGradNorm <= 0) return;
    style.pen = Qt::DashLine;
    plot->addSeries(tr("clipped to %1").arg(QLocale().toString(clipGradNorm, 'g', 6)), style);
    plot->setSeriesToolTip(ClipBound, tr("The run scales the gradients down to this norm where "
                                         "theirs is larger (the axis on the right)"));
}

void RatePlot::setClipBound(PlotWidget* plot, double clipGradNorm, double first, double last)
{
    if (plot->seriesCount() > ClipBound)
        plot->setData(ClipBound, {first, last}, {clipGradNorm, clipGradNorm});
}

} // namespace towers::ui
