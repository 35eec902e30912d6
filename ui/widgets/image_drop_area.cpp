#include "ui/widgets/image_drop_area.h"

#include <QDragEnterEvent>
#include <QDropEvent>
#include <QMimeData>
#include <QMouseEvent>
#include <QPainter>

namespace towers::ui {

ImageDropArea::ImageDropArea(QWidget* parent) : QWidget(parent), m_hint(tr("Drop an image here"))
{
    setAcceptDrops(true);
    setFocusPolicy(Qt::StrongFocus);
    setCursor(Qt::PointingHandCursor);
}

void ImageDropArea::setImage(const QImage& image)
{
    m_image = image;
    update();
}

void ImageDropArea::setHint(const QString& hint)
{
    m_hint = hint;
    update();
}

void ImageDropArea::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    const QRect frame = rect().adjusted(1, 1, -2, -2);
    p.fillRect(frame, palette().brush(QPalette::Base));
    QPen pen(m_dragging ? palette().color(QPalette::Highlight) : palette().color(QPalette::Mid),
             m_dragging ? 3 : 1, m_image.isNull() ? Qt::DashLine : Qt::SolidLine);
    p.setPen(pen);
    p.drawRect(frame);
    if (m_image.isNull()) {
        // Inside the border with a margin, however little room there is.
        const QRect text = frame.adjusted(8, 8, -8, -8);
        p.setClipRect(text);
        p.setPen(palette().color(QPalette::PlaceholderText));
        p.drawText(text, Qt::AlignCenter | Qt::TextWordWrap, m_hint);
        return;
    }
    const QRect inner = frame.adjusted(6, 6, -5, -5);
    QSize size = m_image.size().scaled(inner.size(), Qt::KeepAspectRatio);
    // Small dataset images are enlarged by whole pixels: blocky but true to what the model sees.
    const bool enlarge = size.width() > m_image.width();
    const QRect target(inner.center() - QPoint(size.width() / 2, size.height() / 2), size);
    p.setRenderHint(QPainter::SmoothPixmapTransform, !enlarge);
    p.drawImage(target, m_image);
}

void ImageDropArea::dragEnterEvent(QDragEnterEvent* event)
{
    if (event->mimeData()->hasUrls()) {
        for (const QUrl& url : event->mimeData()->urls())
            if (url.isLocalFile()) {
                m_dragging = true;
                update();
                event->acceptProposedAction();
                return;
            }
    }
    event->ignore();
}

void ImageDropArea::dragLeaveEvent(QDragLeaveEvent* event)
{
    m_dragging = false;
    update();
    QWidget::dragLeaveEvent(event);
}

void ImageDropArea::dropEvent(QDropEvent* event)
{
    m_dragging = false;
    update();
    QStringList files;
    for (const QUrl& url : event->mimeData()->urls())
        if (url.isLocalFile()) files << url.toLocalFile();
    if (files.isEmpty()) return;
    event->acceptProposedAction();
    if (files.size() == 1)
        emit fileDropped(files.front());
    else
        emit filesDropped(files);
}

void ImageDropArea::mouseReleaseEvent(QMouseEvent* event)
{
    if (event->button() == Qt::LeftButton && rect().contains(event->pos())) emit clicked();
    QWidget::mouseReleaseEvent(event);
}

} // namespace towers::ui
