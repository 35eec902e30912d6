// defaultDataDir: $TOWERS_DATA first, then $XDG_DATA_HOME, then ~/.local/share.
#include <QDir>
#include <QTest>

#include "app/data/data_dirs.h"

using namespace towers;

class TestDataDirs : public QObject
{
    Q_OBJECT

private slots:
    void init()
    {
        qunsetenv("TOWERS_DATA");
        qunsetenv("XDG_DATA_HOME");
        qputenv("HOME", "/home/towers-test");
    }

    void firstFolderOfTowersData_data()
    {
        QTest::addColumn<QByteArray>("value");
        QTest::addColumn<QString>("expected");
        QTest::newRow("one") << QByteArray("/srv/data") << "/srv/data";
        QTest::newRow("several") << QByteArray("/a/b:/c/d") << "/a/b";
        QTest::newRow("empty entries skipped") << QByteArray("::/c/d:") << "/c/d";
        QTest::newRow("cleaned") << QByteArray("/a//b/./c/") << "/a/b/c";
        QTest::newRow("relative") << QByteArray("rel/x:/y")
                                  << QDir::current().absoluteFilePath("rel/x");
    }

    void firstFolderOfTowersData()
    {
        QFETCH(QByteArray, value);
        QFETCH(QString, expected);
        qputenv("TOWERS_DATA", value);
        qputenv("XDG_DATA_HOME", "/xdg");
        QCOMPARE(app::defaultDataDir(), expected);
    }

    void emptyTowersDataFallsBack()
    {
        qputenv("TOWERS_DATA", ":");
        qputenv("XDG_DATA_HOME", "/xdg/share");
        QCOMPARE(app::defaultDataDir(), QStringLiteral("/xdg/share/towers/datasets"));
    }

    void xdgDataHome()
    {
        qputenv("XDG_DATA_HOME", "/xdg/share");
        QCOMPARE(app::defaultDataDir(), QStringLiteral("/xdg/share/towers/datasets"));
    }

    void homeLocalShare()
    {
        QCOMPARE(app::defaultDataDir(),
                 QStringLiteral("/home/towers-test/.local/share/towers/datasets"));
    }
};

QTEST_GUILESS_MAIN(TestDataDirs)
#include "tst_data_dirs.moc"
