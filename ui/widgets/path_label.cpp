#include "ui/widgets/path_label.h"

#include <QFontMetrics>

namespace towers::ui {

PathLabel::PathLabel(QWidget* parent) : QLabel(parent)
{
    setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    setTextFormat(Qt::PlainText);
}

void PathLabel::setPath(const QString& path)
{
    m_path = path;
    setToolTip(path);
    elide();
}

QSize PathLabel::minimumSizeHint() const
{
    return {0, QLabel::minimumSizeHint().height()};
}

QSize PathLabel::sizeHint() const
{
    return {fontMetrics().horizontalAdvance(m_path) + 2 * margin(), QLabel::sizeHint().height()};
}

void PathLabel::resizeEvent(QResizeEvent* event)
{
    QLabel::resizeEvent(event);
    elide();
}

void PathLabel::elide()
{
    const QString shown =
        fontMetrics().elidedText(m_path, Qt::ElideMiddle, std::max(0, contentsRect().width()));
    if (shown != text()) setText(shown);
}

} // namespace towers::ui
