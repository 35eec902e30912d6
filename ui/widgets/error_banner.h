#pragma once
// A dismissable banner at the top of the window for errors (bad data files, failed downloads,
// a diverged run): the message stays readable, selectable and out of the way of the work. Its
// tint is blended from the palette, so it reads in light and dark themes. It shows the latest
// message; the earlier ones not yet dismissed stay a click away ("+2 earlier"), so that a later
// error does not hide a warning said at start-up. Dismissing it clears them all.
#include <QFrame>
#include <QStringList>

class QLabel;
class QToolButton;

namespace towers::ui {

class ErrorBanner : public QFrame
{
    Q_OBJECT
public:
    // At most this many messages are kept (the oldest go first; the log has them all).
    static constexpr int kMaxKept = 10;

    explicit ErrorBanner(QWidget* parent = nullptr);

    // Shows the banner with `message` on top of the earlier ones and counts it.
    void showMessage(const QString& message);
    // The latest message.
    QString message() const;
    // The messages since the banner was last dismissed, oldest first.
    QStringList messages() const { return m_messages; }
    int messageCount() const { return m_count; }
    // Whether the earlier messages show under the latest ("+N earlier" clicked).
    bool isExpanded() const { return m_expanded; }
    void setExpanded(bool expanded);
    // Hides the banner and forgets its messages (its close button).
    void dismiss();

    // The banner's background: a quarter of red over the palette's window colour.
    QColor tint() const;

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    void updateText();

    QLabel* m_text;
    QToolButton* m_earlier; // "+N earlier" / "Latest only"
    QToolButton* m_close;
    QStringList m_messages;
    bool m_expanded = false;
    int m_count = 0;
};

} // namespace towers::ui
