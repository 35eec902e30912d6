// AppSettings: defaults without a file, values kept across instances (what a restart sees).
#include <QDir>
#include <QFile>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include "app/data/data_dirs.h"
#include "app/settings/app_settings.h"

using towers::app::AppSettings;

class TestAppSettings : public QObject
{
    Q_OBJECT
private slots:
    void defaults()
    {
        QTemporaryDir dir;
        qputenv("XDG_DATA_HOME", dir.filePath(QStringLiteral("xdg")).toUtf8());
        qunsetenv("TOWERS_DATA");
        AppSettings s(dir.filePath(QStringLiteral("s.ini")));
        QCOMPARE(s.dataDir(), towers::app::defaultDataDir());
        QCOMPARE(s.dataDir(), dir.filePath(QStringLiteral("xdg/towers/datasets")));
        QCOMPARE(s.runsDir(), dir.filePath(QStringLiteral("xdg/towers/runs")));
        QVERIFY(s.datasetName().isEmpty()); // the Data page picks the first dataset found
        QVERIFY(s.lastConfigJson().isEmpty());
        QCOMPARE(s.lastPage(), 0);
        QVERIFY(s.windowGeometry().isEmpty());
    }

    void persistsAcrossInstances()
    {
        QTemporaryDir dir;
        const QString file = dir.filePath(QStringLiteral("s.ini"));
        {
            AppSettings s(file);
            s.setDataDir(QStringLiteral("/data/sets"));
            s.setRunsDir(QStringLiteral("/data/runs"));
            s.setDatasetName(QStringLiteral("fashion-mnist"));
            s.setLastConfigJson(QStringLiteral("{\"model\": \"fashion-fast\"}"));
            s.setLastPage(3);
            s.setWindowGeometry(QByteArray("\x01\x02\x03", 3));
            s.sync();
        }
        AppSettings again(file);
        QCOMPARE(again.dataDir(), QStringLiteral("/data/sets"));
        QCOMPARE(again.runsDir(), QStringLiteral("/data/runs"));
        QCOMPARE(again.datasetName(), QStringLiteral("fashion-mnist"));
        QCOMPARE(again.lastConfigJson(), QStringLiteral("{\"model\": \"fashion-fast\"}"));
        QCOMPARE(again.lastPage(), 3);
        QCOMPARE(again.windowGeometry(), QByteArray("\x01\x02\x03", 3));
    }

    // QSettings keeps what it cannot write in memory and says nothing: the user's changes would
    // be lost at exit without a word. saveError names the file and why.
    void unwritableFileIsReported_data()
    {
        QTest::addColumn<QString>("place"); // in the temporary folder
        QTest::addColumn<QString>("why");
        QTest::newRow("a folder in its place") << QStringLiteral("s.ini") << "it is a folder";
        QTest::newRow("under a file")
            << QStringLiteral("plain/sub/s.ini") << "/plain is a file, not a folder";
    }

    void unwritableFileIsReported()
    {
        QFETCH(QString, place);
        QFETCH(QString, why);
        QTemporaryDir dir;
        QVERIFY(QDir(dir.path()).mkdir(QStringLiteral("s.ini"))); // the first row's folder
        QFile plain(dir.filePath(QStringLiteral("plain")));
        QVERIFY(plain.open(QIODevice::WriteOnly));
        plain.close();
        const QString file = dir.filePath(place);
        AppSettings s(file);
        s.setDatasetName(QStringLiteral("mnist"));
        s.sync();
        const QString error = s.saveError();
        QVERIFY2(error.contains(file) && error.contains(why), qPrintable(error));
    }

    // The file's text on disk (another AppSettings in this process would show QSettings' memory).
    static QByteArray onDisk(const QString& file)
    {
        QFile f(file);
        return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
    }

    // A file that becomes unwritable during the session (a folder in its place) is said when a
    // change is written, a moment after it, not only at exit; once. When it can be written again,
    // that is said, and what was kept is in the file.
    void unwritableMidSessionIsSaidOnce_data()
    {
        QTest::addColumn<bool>("malformedAtStart");
        QTest::newRow("a good file") << false;
        // QSettings' status stays FormatError for good: the failure must be seen all the same.
        QTest::newRow("lines that are not INI at start") << true;
    }

    void unwritableMidSessionIsSaidOnce()
    {
        QFETCH(bool, malformedAtStart);
        QTemporaryDir dir;
        const QString file = dir.filePath(QStringLiteral("s.ini"));
        if (malformedAtStart) {
            QFile f(file);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write("[data]\ndataset=cifar10\n[[x\n");
        }
        AppSettings s(file);
        QSignalSpy failed(&s, &AppSettings::saveFailed);
        QSignalSpy recovered(&s, &AppSettings::saveRecovered);
        s.setDatasetName(QStringLiteral("mnist"));
        QTRY_VERIFY(onDisk(file).contains("dataset=mnist")); // written alone, a moment after
        QVERIFY(failed.isEmpty());
        QVERIFY(QFile::remove(file));
        QVERIFY(QDir(dir.path()).mkdir(QStringLiteral("s.ini")));
        s.setLastPage(2);
        QVERIFY(failed.wait(5000));
        const QString error = failed.at(0).at(0).toString();
        QVERIFY2(error.contains(file) && error.contains(QStringLiteral("it is a folder")),
                 qPrintable(error));
        s.setLastPage(3);
        QTest::qWait(2 * AppSettings::kWriteDelayMs + 100);
        QCOMPARE(failed.count(), 1);
        QCOMPARE(s.saveError(), error);
        QVERIFY(recovered.isEmpty());
        // The folder gone: the next change's write takes what was kept too.
        QVERIFY(QDir(file).removeRecursively());
        s.setRunsDir(dir.filePath(QStringLiteral("runs")));
        QVERIFY(recovered.wait(5000));
        QVERIFY2(s.saveError().isEmpty(), qPrintable(s.saveError()));
        // The changes made while it failed (QSettings reads the file again as it writes: what
        // was in the file the folder replaced is gone with it).
        const QByteArray text = onDisk(file);
        QVERIFY2(text.contains("page=3") && text.contains("runsDir="), text.constData());
        QCOMPARE(failed.count(), 1);
    }

    // A failure found by the caller's own sync() (the window's start says it) is not signalled
    // again while it lasts.
    void errorReadIsNotSignalled()
    {
        QTemporaryDir dir;
        QVERIFY(QDir(dir.path()).mkdir(QStringLiteral("s.ini")));
        AppSettings s(dir.filePath(QStringLiteral("s.ini")));
        QSignalSpy failed(&s, &AppSettings::saveFailed);
        s.setDatasetName(QStringLiteral("mnist"));
        s.sync();
        QVERIFY(!s.saveError().isEmpty());
        s.setLastPage(2);
        QTest::qWait(2 * AppSettings::kWriteDelayMs + 100);
        QVERIFY(failed.isEmpty());
    }

    void writableFileHasNoError()
    {
        QTemporaryDir dir;
        AppSettings s(dir.filePath(QStringLiteral("new/folder/s.ini"))); // folders made
        s.setDatasetName(QStringLiteral("mnist"));
        s.sync();
        QVERIFY2(s.saveError().isEmpty(), qPrintable(s.saveError()));
        QCOMPARE(AppSettings(s.fileName()).datasetName(), QStringLiteral("mnist"));
    }

    // A file with lines that are not INI is read for the rest and written again: said as that,
    // not as settings not being saved (the changes are kept).
    void malformedLinesAreSaidAsSuch()
    {
        QTemporaryDir dir;
        const QString file = dir.filePath(QStringLiteral("s.ini"));
        QFile f(file);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("[data]\ndataset=mnist\n[[x\n");
        f.close();
        AppSettings s(file);
        QCOMPARE(s.datasetName(), QStringLiteral("mnist"));
        s.setLastPage(2);
        s.sync();
        QVERIFY2(s.saveError().isEmpty(), qPrintable(s.saveError()));
        QVERIFY2(s.readError().contains(file) &&
                     s.readError().contains(QStringLiteral("not in the INI format")),
                 qPrintable(s.readError()));
        const AppSettings again(file);
        QCOMPARE(again.lastPage(), 2);
        QCOMPARE(again.datasetName(), QStringLiteral("mnist"));
    }

    void emptyValueFallsBackToDefault()
    {
        QTemporaryDir dir;
        AppSettings s(dir.filePath(QStringLiteral("s.ini")));
        s.setRunsDir(QString());
        QCOMPARE(s.runsDir(), AppSettings::defaultRunsDir());
    }
};

QTEST_GUILESS_MAIN(TestAppSettings)
#include "tst_app_settings.moc"
