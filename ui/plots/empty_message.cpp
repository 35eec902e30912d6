#include "ui/plots/empty_message.h"

#include <qcustomplot.h>

namespace towers::ui {

EmptyMessage::EmptyMessage(QCustomPlot* plot, QWidget* parent) : QLabel(parent), m_plot(plot)
{
    setAlignment(Qt::AlignCenter);
    setWordWrap(true);
    setForegroundRole(QPalette::PlaceholderText);
    setAttribute(Qt::WA_TransparentForMouseEvents); // the plot's own menus and tooltips
    hide();
}

void EmptyMessage::setMessage(const QString& text)
{
    setText(text);
    place();
}

void EmptyMessage::showIf(bool empty)
{
    const bool show = empty && !text().isEmpty();
    m_plot->xAxis->setVisible(!show);
    m_plot->yAxis->setVisible(!show);
    setVisible(show);
    if (show) {
        place();
        raise();
    }
}

void EmptyMessage::place()
{
    if (!isVisible() || !parentWidget()) return;
    // Below the title's row, clear of the edges.
    const QRect area = parentWidget()->rect().adjusted(12, 24, -12, -8);
    setGeometry(area);
    // The largest of the parent's font and three smaller steps that the wrapped text fits.
    QFont f = parentWidget()->font();
    const qreal base = f.pointSizeF() > 0 ? f.pointSizeF() : 9;
    for (const qreal scale : {1.0, 0.9, 0.8, 0.7}) {
        f.setPointSizeF(base * scale);
        const QRect needed = QFontMetrics(f).boundingRect(
            QRect(0, 0, area.width(), 1 << 20), int(alignment()) | Qt::TextWordWrap, text());
        if (needed.height() <= area.height()) break;
    }
    setFont(f);
}

} // namespace towers::ui
