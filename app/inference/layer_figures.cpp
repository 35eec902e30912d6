#include "app/inference/layer_figures.h"

#include <QLocale>
#include <QStringList>

#include <cmath>

namespace towers::app {

QString layerFigure(double value, int decimals, bool localized)
{
    const double a = std::abs(value);
    const bool exponent = a != 0 && (a < 1e-3 || a >= 1e5);
    const QLocale locale = localized ? QLocale() : QLocale::c();
    return exponent ? locale.toString(value, 'e', 2) : locale.toString(value, 'f', decimals);
}

QString channelList(const std::vector<std::int64_t>& channels, std::size_t shown)
{
    QStringList names;
    for (std::size_t i = 0; i < channels.size() && i < shown; ++i)
        names << QString::number(channels[i]);
    QString text = names.join(QStringLiteral(", "));
    if (channels.size() > shown)
        text += QStringLiteral(" and %1 more").arg(channels.size() - shown);
    return text;
}

} // namespace towers::app
