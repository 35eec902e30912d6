#include "app/inference/layer_figures.h"

#include <QLocale>
#include <QStringList>

#include <cmath>

namespace towers::app {

QString layerShapeText(const engine::Shape& shape, const QString& separator)
{
    QStringList dims;
    for (int d = 0; d < shape.rank(); ++d) dims << QString::number(shape[d]);
    return dims.join(separator);
}

QString layerFigure(double value, int decimals, bool localized)
{
    const double a = std::abs(value);
    const bool exponent = a != 0 && (a < 1e-3 || a >= 1e5);
    const QLocale locale = localized ? QLocale() : QLocale::c();
    return exponent ? locale.toString(value, 'e', 2) : locale.toString(value, 'f', decimals);
}

} // namespace towers::app
