#pragma once
// Colours for plots that follow the window's palette, light or dark: the plot's background, axes,
// grid and text come from the palette; data series take hues from a fixed cycle, lightened on a
// dark background so they keep their contrast.
#include <QColor>
#include <QIcon>
#include <QPalette>
#include <QStyle>

class QCustomPlot;
class QCPAxis;
class QCPTextElement;
class QFont;
class QString;

namespace towers::ui {

// A dark palette for the Fusion style (`towers --dark`, and the dark screenshots): what a dark
// desktop theme gives on platforms that have one.
QPalette darkPalette();
// True when the palette's base (the plot background) is dark.
bool isDarkPalette(const QPalette& palette);
// The style's standard icon `which`; where it is a black glyph (the media icons) and the
// application's palette is dark, drawn in the palette's text colour instead, so that it stays
// visible (the sidebar, the Start/Pause/Stop buttons, the live run's marker).
QIcon paletteIcon(QStyle::StandardPixmap which);
// Colour number `slot` of the data cycle (blue, orange, green, red, purple, ...), for `palette`.
QColor seriesColor(int slot, const QPalette& palette);
// Applies `palette` to the plot's background, axes, tick labels, grid and legend.
void applyPlotPalette(QCustomPlot* plot, const QPalette& palette);
// The same for one axis.
void applyAxisPalette(QCPAxis* axis, const QPalette& palette);
// Puts `title`, in bold `font`, in a row of its own above the plot; the plot owns it.
QCPTextElement* addPlotTitle(QCustomPlot* plot, const QString& title, QFont font);

} // namespace towers::ui
