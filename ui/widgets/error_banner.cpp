#include "ui/widgets/error_banner.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QPainter>
#include <QStyle>
#include <QToolButton>

namespace towers::ui {

ErrorBanner::ErrorBanner(QWidget* parent)
    : QFrame(parent), m_text(new QLabel(this)), m_earlier(new QToolButton(this)),
      m_close(new QToolButton(this))
{
    setFrameShape(QFrame::StyledPanel);
    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(8, 4, 4, 4);
    auto* icon = new QLabel(this);
    const int size = style()->pixelMetric(QStyle::PM_SmallIconSize);
    icon->setPixmap(style()->standardIcon(QStyle::SP_MessageBoxWarning).pixmap(size, size));
    m_text->setObjectName(QStringLiteral("text"));
    m_text->setWordWrap(true);
    m_text->setTextFormat(Qt::PlainText); // a file's name is not markup
    m_text->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_earlier->setObjectName(QStringLiteral("earlier"));
    m_earlier->setAutoRaise(true);
    m_earlier->hide();
    m_close->setObjectName(QStringLiteral("dismiss"));
    m_close->setIcon(style()->standardIcon(QStyle::SP_DialogCloseButton));
    m_close->setAutoRaise(true);
    m_close->setToolTip(tr("Dismiss (the earlier messages too)"));
    connect(m_earlier, &QToolButton::clicked, this, [this] { setExpanded(!m_expanded); });
    connect(m_close, &QToolButton::clicked, this, &ErrorBanner::dismiss);
    layout->addWidget(icon, 0, Qt::AlignTop);
    layout->addWidget(m_text, 1);
    layout->addWidget(m_earlier, 0, Qt::AlignTop);
    layout->addWidget(m_close, 0, Qt::AlignTop);
    hide();
}

void ErrorBanner::showMessage(const QString& message)
{
    m_messages << message;
    if (m_messages.size() > kMaxKept) m_messages.removeFirst();
    ++m_count;
    updateText();
    show();
}

QString ErrorBanner::message() const
{
    return m_messages.isEmpty() ? QString() : m_messages.last();
}

void ErrorBanner::setExpanded(bool expanded)
{
    m_expanded = expanded;
    updateText();
}

void ErrorBanner::dismiss()
{
    m_messages.clear();
    m_expanded = false;
    updateText();
    hide();
}

void ErrorBanner::updateText()
{
    const auto earlier = int(m_messages.size()) - 1;
    if (earlier <= 0) m_expanded = false;
    // The latest first; expanded, the earlier ones under it, newest first.
    QStringList shown;
    for (auto i = m_messages.size() - 1; i >= 0 && (m_expanded || shown.isEmpty()); --i)
        shown << m_messages[i];
    if (shown.size() > 1)
        for (QString& line : shown) line.prepend(QStringLiteral("• "));
    m_text->setText(shown.join(QLatin1Char('\n')));
    m_earlier->setVisible(earlier > 0);
    m_earlier->setText(m_expanded ? tr("Latest only") : tr("+%1 earlier").arg(earlier));
    m_earlier->setToolTip(
        m_expanded ? tr("Shows only the latest message")
                   : tr("Shows the %n earlier message(s) under this one", nullptr, earlier));
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
