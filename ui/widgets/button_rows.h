#pragma once
// Buttons in one row where there is the room for it, else in rows of two: a row of four wide
// buttons as a pane's least width left the Runs page's run list a few letters at 1024 pixels.
#include <QList>
#include <QWidget>

class QGridLayout;
class QPushButton;

namespace towers::ui {

class ButtonRows : public QWidget
{
public:
    ButtonRows(const QList<QPushButton*>& buttons, QWidget* parent);
    // The widest row of two.
    QSize minimumSizeHint() const override;

protected:
    void resizeEvent(QResizeEvent* event) override;

private:
    int rowWidth(int first, int count) const;
    void arrange(int perRow);

    QList<QPushButton*> m_buttons;
    QGridLayout* m_grid;
    int m_perRow = 0;
};

} // namespace towers::ui
