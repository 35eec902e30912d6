#pragma once
// A run's learning rate and gradients' norm on one plot, as the Train page draws the live run's
// and the Runs page a logged one's: the rate on the left axis, the averaged gradients' global norm
// (before any clipping) on an axis of its own on the right, and for a run that clips them
// (TrainConfig::clipGradNorm > 0) the bound as a dashed line on that axis.
#include <QCoreApplication>
#include <QString>

namespace towers::ui {

class PlotWidget;

class RatePlot
{
    Q_DECLARE_TR_FUNCTIONS(RatePlot)
public:
    // The plot's series, in this order; the bound only for a run that clips.
    enum Series
    {
        LearningRate,
        GradientNorm, // on the right axis
        ClipBound     // on the right axis
    };

    // "Learning rate and gradient norm".
    static QString title();
    // Steps along the bottom, the rate on the left, the norm on the right.
    static void labelAxes(PlotWidget* plot);
    // Replaces the plot's series by the rate's, the norm's and, for a run that clips its gradients
    // to `clipGradNorm` (0: one that does not), the bound's. Without `norm` (a run that logged
    // none: one from before the norm was logged) the rate's alone, so that neither the legend nor
    // an axis names a curve that is not there.
    static void setUpSeries(PlotWidget* plot, double clipGradNorm, bool norm = true);
    // The bound `clipGradNorm` from step `first` to step `last`, on a plot set up with it.
    static void setClipBound(PlotWidget* plot, double clipGradNorm, double first, double last);
};

} // namespace towers::ui
