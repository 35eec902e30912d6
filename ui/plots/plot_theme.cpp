#include "ui/plots/plot_theme.h"

#include <QApplication>
#include <QIcon>
#include <QImage>
#include <QPixmap>
#include <QStyle>

#include <qcustomplot.h>

namespace towers::ui {

QPalette darkPalette()
{
    QPalette p;
    const QColor window(45, 45, 48), base(30, 30, 32), text(225, 225, 228), disabled(130, 130, 135);
    p.setColor(QPalette::Window, window);
    p.setColor(QPalette::WindowText, text);
    p.setColor(QPalette::Base, base);
    p.setColor(QPalette::AlternateBase, QColor(40, 40, 43));
    p.setColor(QPalette::ToolTipBase, window);
    p.setColor(QPalette::ToolTipText, text);
    p.setColor(QPalette::PlaceholderText, disabled);
    p.setColor(QPalette::Text, text);
    p.setColor(QPalette::Button, QColor(55, 55, 58));
    p.setColor(QPalette::ButtonText, text);
    p.setColor(QPalette::BrightText, QColor(255, 90, 90));
    p.setColor(QPalette::Light, QColor(75, 75, 78));
    p.setColor(QPalette::Midlight, QColor(62, 62, 65));
    p.setColor(QPalette::Mid, QColor(90, 90, 95));
    p.setColor(QPalette::Dark, QColor(25, 25, 27));
    p.setColor(QPalette::Shadow, QColor(10, 10, 10));
    p.setColor(QPalette::Highlight, QColor(42, 110, 187));
    p.setColor(QPalette::HighlightedText, Qt::white);
    p.setColor(QPalette::Link, QColor(100, 160, 240));
    for (auto role : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText})
        p.setColor(QPalette::Disabled, role, disabled);
    return p;
}

bool isDarkPalette(const QPalette& palette)
{
    return palette.color(QPalette::Base).lightness() < 128;
}

QIcon paletteIcon(QStyle::StandardPixmap which)
{
    const QIcon icon = QApplication::style()->standardIcon(which);
    const QPalette palette = QApplication::palette();
    if (!isDarkPalette(palette)) return icon;
    QImage image = icon.pixmap(32, 32).toImage().convertToFormat(QImage::Format_ARGB32);
    qint64 lightness = 0, opaque = 0;
    for (int y = 0; y < image.height(); ++y)
        for (int x = 0; x < image.width(); ++x) {
            const QColor c = image.pixelColor(x, y);
            if (c.alpha() < 128) continue;
            lightness += c.lightness();
            ++opaque;
        }
    if (opaque == 0 || lightness / opaque > 80) return icon; // coloured or light: fine as it is
    const QColor text = palette.color(QPalette::WindowText);
    for (int y = 0; y < image.height(); ++y)
        for (int x = 0; x < image.width(); ++x) {
            QColor c = text;
            c.setAlpha(image.pixelColor(x, y).alpha());
            image.setPixelColor(x, y, c);
        }
    return QIcon(QPixmap::fromImage(image));
}

QColor seriesColor(int slot, const QPalette& palette)
{
    // Matplotlib's "tab10" hues: distinguishable, and readable for most colour-blind viewers.
    static const QRgb kCycle[] = {0x1f77b4, 0xff7f0e, 0x2ca02c, 0xd62728, 0x9467bd,
                                  0x8c564b, 0xe377c2, 0x7f7f7f, 0xbcbd22, 0x17becf};
    constexpr int n = int(sizeof kCycle / sizeof kCycle[0]);
    QColor c = QColor::fromRgb(kCycle[((slot % n) + n) % n]);
    return isDarkPalette(palette) ? c.lighter(140) : c;
}

void applyAxisPalette(QCPAxis* axis, const QPalette& palette)
{
    const QColor text = palette.color(QPalette::WindowText);
    QColor grid = palette.color(QPalette::Mid);
    grid.setAlpha(110);
    QColor subGrid = grid;
    subGrid.setAlpha(45);
    axis->setBasePen(QPen(text, 1));
    axis->setTickPen(QPen(text, 1));
    axis->setSubTickPen(QPen(text, 1));
    axis->setTickLabelColor(text);
    axis->setLabelColor(text);
    axis->grid()->setPen(QPen(grid, 1, Qt::DotLine));
    axis->grid()->setSubGridPen(QPen(subGrid, 1, Qt::DotLine));
    axis->grid()->setZeroLinePen(Qt::NoPen);
}

void applyPlotPalette(QCustomPlot* plot, const QPalette& palette)
{
    plot->setBackground(palette.brush(QPalette::Base));
    for (QCPAxis* axis : plot->axisRect()->axes()) applyAxisPalette(axis, palette);
    plot->legend->setBrush(palette.brush(QPalette::Base));
    plot->legend->setBorderPen(QPen(palette.color(QPalette::Mid)));
    plot->legend->setTextColor(palette.color(QPalette::Text));
    for (int i = 0; i < plot->plotLayout()->elementCount(); ++i)
        if (auto* title = qobject_cast<QCPTextElement*>(plot->plotLayout()->elementAt(i)))
            title->setTextColor(palette.color(QPalette::WindowText));
}

QCPTextElement* addPlotTitle(QCustomPlot* plot, const QString& title, QFont font)
{
    plot->plotLayout()->insertRow(0);
    font.setBold(true);
    auto* element = new QCPTextElement(plot, title, font);
    plot->plotLayout()->addElement(0, 0, element);
    return element;
}

} // namespace towers::ui
