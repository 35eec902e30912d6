#include "ui/widgets/error_banner.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QPainter>
#include <QStyle>
#include <QToolButton>

namespace towers::ui {

ErrorBanner::ErrorBanner(QWidget* parent)
    : QFrame(parent), m_text(new QLabel(this)), m_close(new QToolButton(this))
{
    setFrameShape(QFrame::StyledPanel);
    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(8, 4, 4, 4);
    auto* icon = new QLabel(this);
    const int size = style()->pixelMetric(QStyle::PM_SmallIconSize);
    icon->setPixmap(style()->standardIcon(QStyle::SP_MessageBoxWarning).pixmap(size, size));
    m_text->setWordWrap(true);
    m_text->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_close->setIcon(style()->standardIcon(QStyle::SP_DialogCloseButton));
    m_close->setAutoRaise(true);
    m_close->setToolTip(tr("Dismiss"));
    connect(m_close, &QToolButton::clicked, this, &QWidget::hide);
    layout->addWidget(icon, 0, Qt::AlignTop);
    layout->addWidget(m_text, 1);
    layout->addWidget(m_close, 0, Qt::AlignTop);
    hide();
}

void ErrorBanner::showMessage(const QString& message)
{
    m_text->setText(message);
    ++m_count;
    show();
}

QString ErrorBanner::message() const
{
    return m_text->text();
}

QColor ErrorBanner::tint() const
{
    // A warning in either theme, and the palette's text keeps its contrast on it.
    const QColor base = palette().color(QPalette::Window);
    const QColor red(220, 50, 47);
    return QColor(int(base.red() * 0.75 + red.red() * 0.25),
                  int(base.green() * 0.75 + red.green() * 0.25),
                  int(base.blue() * 0.75 + red.blue() * 0.25));
}

void ErrorBanner::paintEvent(QPaintEvent* event)
{
    QPainter painter(this);
    painter.fillRect(rect(), tint());
    painter.end();
    QFrame::paintEvent(event);
}

} // namespace towers::ui
