// ImageDropArea: accepts drags of local files only, reports the dropped file, and shows the image
// it is given.
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QMimeData>
#include <QSignalSpy>
#include <QTest>

#include "ui/widgets/image_drop_area.h"

using towers::ui::ImageDropArea;

class TestImageDropArea : public QObject
{
    Q_OBJECT
private slots:
    void dropsLocalFiles()
    {
        ImageDropArea area;
        area.resize(200, 200);
        area.show();
        QVERIFY(QTest::qWaitForWindowExposed(&area));
        QVERIFY(area.acceptDrops());
        QSignalSpy dropped(&area, &ImageDropArea::fileDropped);

        QMimeData remote;
        remote.setUrls({QUrl(QStringLiteral("https://example.org/cat.png"))});
        QDragEnterEvent enterRemote(QPoint(50, 50), Qt::CopyAction, &remote, Qt::LeftButton,
                                    Qt::NoModifier);
        QCoreApplication::sendEvent(&area, &enterRemote);
        QVERIFY(!enterRemote.isAccepted());

        QMimeData local;
        local.setUrls({QUrl::fromLocalFile(QStringLiteral("/tmp/cat.png"))});
        QDragEnterEvent enter(QPoint(50, 50), Qt::CopyAction, &local, Qt::LeftButton,
                              Qt::NoModifier);
        QCoreApplication::sendEvent(&area, &enter);
        QVERIFY(enter.isAccepted());
        QDropEvent drop(QPointF(50, 50), Qt::CopyAction, &local, Qt::LeftButton, Qt::NoModifier);
        QCoreApplication::sendEvent(&area, &drop);
        QCOMPARE(dropped.count(), 1);
        QCOMPARE(dropped.at(0).at(0).toString(), QStringLiteral("/tmp/cat.png"));

        // Several files at once: all of them, in order, remote ones left out.
        QSignalSpy many(&area, &ImageDropArea::filesDropped);
        QMimeData several;
        several.setUrls({QUrl::fromLocalFile(QStringLiteral("/tmp/b.png")),
                         QUrl(QStringLiteral("https://example.org/x.png")),
                         QUrl::fromLocalFile(QStringLiteral("/tmp/a.png"))});
        QDragEnterEvent enterMany(QPoint(50, 50), Qt::CopyAction, &several, Qt::LeftButton,
                                  Qt::NoModifier);
        QCoreApplication::sendEvent(&area, &enterMany);
        QDropEvent dropMany(QPointF(50, 50), Qt::CopyAction, &several, Qt::LeftButton,
                            Qt::NoModifier);
        QCoreApplication::sendEvent(&area, &dropMany);
        QCOMPARE(many.count(), 1);
        QCOMPARE(many.at(0).at(0).toStringList(),
                 (QStringList{QStringLiteral("/tmp/b.png"), QStringLiteral("/tmp/a.png")}));
        QCOMPARE(dropped.count(), 1);
    }

    void showsTheImage()
    {
        ImageDropArea area;
        area.resize(120, 120);
        QImage img(4, 4, QImage::Format_RGB888);
        img.fill(qRgb(200, 10, 10));
        area.setImage(img);
        QCOMPARE(area.image(), img);
        // Enlarged by whole pixels: the centre of the widget is the image's colour.
        const QImage shot = area.grab().toImage();
        QCOMPARE(QColor(shot.pixel(60, 60)), QColor(200, 10, 10));
        QSignalSpy clicked(&area, &ImageDropArea::clicked);
        area.show();
        QVERIFY(QTest::qWaitForWindowExposed(&area));
        QTest::mouseClick(&area, Qt::LeftButton, {}, QPoint(60, 60));
        QCOMPARE(clicked.count(), 1);
    }
};

QTEST_MAIN(TestImageDropArea)
#include "tst_image_drop_area.moc"
