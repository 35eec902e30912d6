#include "ui/widgets/path_label.h"

#include <QAction>
#include <QClipboard>
#include <QFontMetrics>
#include <QGuiApplication>

namespace towers::ui {

PathLabel::PathLabel(QWidget* parent) : QLabel(parent)
{
    setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    setTextFormat(Qt::PlainText);
    // The shown text may be elided: the whole path is what is copied.
    auto* copy = new QAction(tr("Copy path"), this);
    connect(copy, &QAction::triggered, this,
            [this] { QGuiApplication::clipboard()->setText(m_path); });
    addAction(copy);
    setContextMenuPolicy(Qt::ActionsContextMenu);
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
