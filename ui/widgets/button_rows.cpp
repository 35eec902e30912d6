#include "ui/widgets/button_rows.h"

#include <QGridLayout>
#include <QPushButton>
#include <QResizeEvent>

#include <algorithm>

namespace towers::ui {

ButtonRows::ButtonRows(const QList<QPushButton*>& buttons, QWidget* parent)
    : QWidget(parent), m_buttons(buttons), m_grid(new QGridLayout(this))
{
    m_grid->setContentsMargins(0, 0, 0, 0);
    arrange(int(m_buttons.size()));
}

QSize ButtonRows::minimumSizeHint() const
{
    int widest = 0;
    for (int i = 0; i + 1 < m_buttons.size(); i += 2) widest = std::max(widest, rowWidth(i, 2));
    return {widest, QWidget::minimumSizeHint().height()};
}

void ButtonRows::resizeEvent(QResizeEvent* event)
{
    QWidget::resizeEvent(event);
    arrange(width() >= rowWidth(0, int(m_buttons.size())) ? int(m_buttons.size()) : 2);
}

int ButtonRows::rowWidth(int first, int count) const
{
    int width = std::max(m_grid->horizontalSpacing(), 6) * (count - 1);
    for (int i = first; i < first + count && i < m_buttons.size(); ++i)
        width += m_buttons[i]->sizeHint().width();
    return width;
}

void ButtonRows::arrange(int perRow)
{
    if (perRow == m_perRow) return;
    m_perRow = perRow;
    for (int i = 0; i < m_buttons.size(); ++i)
        m_grid->addWidget(m_buttons[i], i / perRow, i % perRow);
    for (int c = 0; c <= m_buttons.size(); ++c) m_grid->setColumnStretch(c, c == perRow ? 1 : 0);
}

} // namespace towers::ui
