#pragma once
// A path shown in one line as wide as its place: where the line is too short the path is elided
// in the middle (its start and its last folder stay), the whole path in the tooltip and copied by
// its context menu's "Copy path". A QLabel of a
// long path asked for its whole width, and the page scrolled sideways for it (the Train page's
// run folder under a deep home folder).
#include <QLabel>

namespace towers::ui {

class PathLabel : public QLabel
{
    Q_OBJECT
public:
    explicit PathLabel(QWidget* parent = nullptr);

    void setPath(const QString& path);
    QString path() const { return m_path; }
    QSize minimumSizeHint() const override;
    QSize sizeHint() const override;

protected:
    void resizeEvent(QResizeEvent* event) override;

private:
    void elide();
    QString m_path;
};

} // namespace towers::ui
