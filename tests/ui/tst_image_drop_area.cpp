// ImageDropArea: accepts drags of local files only, reports the dropped file, and shows the image
// it is given.
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QLabel>
#include <QMimeData>
#include <QSignalSpy>
#include <QTest>
#include <QVBoxLayout>

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

    // The Classify page's column: the area, then a caption that can wrap to several lines ("Cannot
    // classify: <a long path>: ..."). Squeezed by its splitter, the area gives up height instead of
    // keeping it while the caption is laid out over its border; given room, it takes its size.
    void yieldsRoomToTheCaptionBelow()
    {
        // A splitter's pane: a child widget, its size the splitter's, not what its layout asks.
        QWidget window;
        auto* column = new QWidget(&window);
        auto* layout = new QVBoxLayout(column);
        auto* area = new ImageDropArea(column);
        layout->addWidget(area, 1);
        auto* caption = new QLabel(QStringLiteral("<b>Cannot classify:</b> a\nb\nc\nd"), column);
        layout->addWidget(caption);
        window.resize(400, 400);
        column->setGeometry(0, 0, 400, 400);
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        QVERIFY(area->height() >= 160);
        const int room = caption->sizeHint().height() + 100; // less than the area's 160 and all
        column->setGeometry(0, 0, 400, room);
        QCOMPARE(column->height(), room);
        layout->activate();
        QVERIFY2(!area->geometry().intersects(caption->geometry()),
                 qPrintable(QStringLiteral("the area at %1..%2, the caption from %3")
                                .arg(area->geometry().top())
                                .arg(area->geometry().bottom())
                                .arg(caption->geometry().top())));
        // The hint stays inside the dashed border, however little room there is.
        const QImage shot = area->grab().toImage();
        const QColor placeholder = area->palette().color(QPalette::PlaceholderText);
        for (int y = 0; y < shot.height(); ++y)
            for (int x = 0; x < shot.width(); ++x)
                if (x < 3 || y < 3 || x >= shot.width() - 4 || y >= shot.height() - 4)
                    QVERIFY2(QColor(shot.pixel(x, y)) != placeholder,
                             qPrintable(QStringLiteral("hint text at %1, %2").arg(x).arg(y)));
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
