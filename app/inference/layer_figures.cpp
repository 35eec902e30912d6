#include "app/inference/layer_figures.h"

#include <QLocale>

#include <cmath>

namespace towers::app {

QString layerFigure(double value, int decimals, bool localized)
{
    const double a = std::abs(value);
    const bool exponent = a != 0 && (a < 1e-3 || a >= 1e5);
    const QLocale locale = localized ? QLocale() : QLocale::c();
    return exponent ? locale.toString(value, 'e', 2) : locale.toString(value, 'f', decimals);
}

} // namespace towers::app
