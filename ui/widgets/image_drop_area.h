#pragma once
// Shows an image scaled to fit (pixels kept crisp when enlarged) and accepts image files dropped
// on it, or clicked to open one; draws a palette-coloured frame and a hint while empty.
#include <QImage>
#include <QWidget>

namespace towers::ui {

class ImageDropArea : public QWidget
{
    Q_OBJECT
public:
    explicit ImageDropArea(QWidget* parent = nullptr);

    void setImage(const QImage& image);
    QImage image() const { return m_image; }
    void setHint(const QString& hint);
    QSize sizeHint() const override { return {280, 280}; }
    // What a layout gives it where it can; a hint, not a minimum size, so that where its pane is
    // squeezed (the Classify page's splitter) it yields height rather than keep it while the
    // layout places the caption under it over its border.
    QSize minimumSizeHint() const override { return {160, 160}; }

signals:
    // A local file was dropped (or chosen by clicking).
    void fileDropped(const QString& path);
    // Several local files were dropped at once, in the order given.
    void filesDropped(const QStringList& paths);
    void clicked();

protected:
    void paintEvent(QPaintEvent* event) override;
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dragLeaveEvent(QDragLeaveEvent* event) override;
    void dropEvent(QDropEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;

private:
    QImage m_image;
    QString m_hint;
    bool m_dragging = false;
};

} // namespace towers::ui
