#pragma once
// What the image-folder import tests share (tst_image_folder_import,
// tst_image_folder_import_command): generated images written as class folders, and "My Pets!" made
// of them in a temporary folder for the whole test.
#include <QColor>
#include <QDir>
#include <QFile>
#include <QImage>
#include <QObject>
#include <QString>
#include <QTemporaryDir>
#include <QTest>

namespace towers::test {

// Image `i` of class `c`: a square of the class's colour on a background that varies with i, so
// every image differs and a class is learnable; `gray` makes R = G = B.
inline QImage sample(int c, int i, bool gray, int side = 48)
{
    QImage img(side + i % 5, side, QImage::Format_RGB888);
    const QColor bg(40 + 7 * i % 60, 90, 30 + 11 * i % 80);
    const QColor fg = c == 0   ? QColor(250, 30, 30)
                      : c == 1 ? QColor(30, 250, 30)
                               : QColor(30, 30, 250);
    img.fill(gray ? QColor(qGray(bg.rgb()), qGray(bg.rgb()), qGray(bg.rgb())) : bg);
    for (int y = side / 4; y < side * 3 / 4; ++y)
        for (int x = side / 4 + c * 3; x < side * 3 / 4; ++x)
            img.setPixelColor(
                x, y, gray ? QColor(qGray(fg.rgb()), qGray(fg.rgb()), qGray(fg.rgb())) : fg);
    return img;
}

inline void writeClass(const QString& dir, int c, int count, bool gray, int first = 0)
{
    QDir().mkpath(dir);
    const char* formats[] = {"PNG", "BMP", "JPG", "PPM"};
    for (int i = first; i < first + count; ++i) {
        const char* f = formats[i % 4];
        const QString path = dir + QStringLiteral("/img%1.%2")
                                       .arg(i, 3, 10, QLatin1Char('0'))
                                       .arg(QString::fromLatin1(f).toLower());
        QVERIFY(sample(c, i, gray).save(path, f));
    }
}

class ImageFolderImportTest : public QObject
{
    Q_OBJECT

protected:
    QTemporaryDir m_root;
    QString m_pets; // cat/, dog/, fox/ with 10, 12, 7 colour images, junk, a broken image

    QString path(const QString& p) const { return m_root.filePath(p); }

private slots:
    void initTestCase()
    {
        m_pets = path(QStringLiteral("My Pets!"));
        writeClass(m_pets + QStringLiteral("/cat"), 0, 10, false);
        writeClass(m_pets + QStringLiteral("/dog"), 1, 10, false);
        writeClass(m_pets + QStringLiteral("/dog/puppies"), 1, 2, false, 50); // nested: still dogs
        writeClass(m_pets + QStringLiteral("/fox"), 2, 7, false);
        QVERIFY(QDir().mkpath(m_pets + QStringLiteral("/unsorted"))); // no images: no class
        QFile junk(m_pets + QStringLiteral("/cat/Thumbs.db"));
        QVERIFY(junk.open(QIODevice::WriteOnly));
        junk.write("junk");
        junk.close();
        QFile broken(m_pets + QStringLiteral("/fox/broken.png"));
        QVERIFY(broken.open(QIODevice::WriteOnly));
        broken.write("\x89PNG\r\n\x1a\nnot really");
        broken.close();
        QFile readme(m_pets + QStringLiteral("/notes.txt"));
        QVERIFY(readme.open(QIODevice::WriteOnly));
        readme.write("where the pictures came from");
    }
};

} // namespace towers::test
