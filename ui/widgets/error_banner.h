#pragma once
// A dismissable banner at the top of the window for errors (bad data files, failed downloads,
// a diverged run): the message stays readable, selectable and out of the way of the work. Its
// tint is blended from the palette, so it reads in light and dark themes.
#include <QFrame>

class QLabel;
class QToolButton;

namespace towers::ui {

class ErrorBanner : public QFrame
{
    Q_OBJECT
public:
    explicit ErrorBanner(QWidget* parent = nullptr);

    // Shows the banner with `message` (replacing the previous one) and counts it.
    void showMessage(const QString& message);
    QString message() const;
    int messageCount() const { return m_count; }

    // The banner's background: a quarter of red over the palette's window colour.
    QColor tint() const;

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    QLabel* m_text;
    QToolButton* m_close;
    int m_count = 0;
};

} // namespace towers::ui
