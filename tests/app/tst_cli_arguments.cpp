// Arguments that are not UTF-8: Qt reads every argument as UTF-8, so an invalid byte would become
// U+FFFD and a run folder another folder. towers-cli refuses such an argument with exit 2, naming
// it with its bytes as \xNN, and writes nothing; UTF-8 arguments, non-ASCII ones included, pass.
#include <QDir>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include "app/cli/cli.h"
#include "cli_process.h"

class TestCliArguments : public QObject
{
    Q_OBJECT

private slots:
    void describesTheFirstArgumentThatIsNotUtf8()
    {
        using towers::app::undecodableArgument;
        const char* utf8[] = {"towers-cli", "train", "--run-dir",
                              "r\xc3\xa9sum\xc3\xa9-\xe2\x82\xac"};
        QCOMPARE(undecodableArgument(4, utf8), QString());
        const char* bad[] = {"towers-cli", "train", "--run-dir", "run\xff\xc3\xa9x\xe2\x82"};
        QCOMPARE(undecodableArgument(4, bad),
                 QStringLiteral("argument 3, 'run\\xff\u00e9x\\xe2\\x82'"));
        // Overlong forms and UTF-16 surrogates are not UTF-8 either.
        const char* overlong[] = {"towers-cli", "\xc0\xaf", "\xed\xa0\x80"};
        QCOMPARE(undecodableArgument(3, overlong), QStringLiteral("argument 1, '\\xc0\\xaf'"));
        QCOMPARE(undecodableArgument(2, overlong + 1),
                 QStringLiteral("argument 1, '\\xed\\xa0\\x80'"));
    }

    // As a user would meet it: a folder name typed in a Latin-1 terminal; the desktop
    // application's settings file alike (before it needs a display).
    void towersCliRefusesItAndWritesNothing_data()
    {
        QTest::addColumn<QString>("program");
        QTest::addColumn<QString>("arguments");
        QTest::addColumn<QString>("message");
        QTest::newRow("towers-cli")
            << QStringLiteral(TOWERS_CLI)
            << QStringLiteral("train --dataset synthetic --steps 1 --run-dir")
            << QStringLiteral("towers-cli: error: argument 7, 'caf\\xe9', is not UTF-8 text");
        QTest::newRow("towers") << QStringLiteral(TOWERS_GUI) << QStringLiteral("--settings")
                                << QStringLiteral(
                                       "towers: error: argument 2, 'caf\\xe9', is not UTF-8 text");
    }
    void towersCliRefusesItAndWritesNothing()
    {
        QFETCH(QString, program);
        QFETCH(QString, arguments);
        QFETCH(QString, message);
        QTemporaryDir dir;
        QProcess p;
        towers::test::withDefaultSignals(p);
        p.setWorkingDirectory(dir.path());
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("XDG_DATA_HOME"), dir.filePath(QStringLiteral("data")));
        env.insert(QStringLiteral("XDG_CONFIG_HOME"), dir.filePath(QStringLiteral("config")));
        env.remove(QStringLiteral("DISPLAY")); // the refusal comes before any display is needed
        env.remove(QStringLiteral("WAYLAND_DISPLAY"));
        p.setProcessEnvironment(env);
        // The shell makes the byte: QProcess passes its arguments as UTF-8.
        p.start(QStringLiteral("/bin/sh"),
                {QStringLiteral("-c"),
                 QStringLiteral("exec \"$0\" %1 \"$(printf 'caf\\351')\"").arg(arguments),
                 program});
        QVERIFY(p.waitForFinished(60000));
        const QString err = QString::fromUtf8(p.readAllStandardError());
        QCOMPARE(p.exitStatus(), QProcess::NormalExit);
        QVERIFY2(p.exitCode() == 2, qPrintable(err));
        QVERIFY2(err.contains(message), qPrintable(err));
        QCOMPARE(QDir(dir.path()).entryList(QDir::AllEntries | QDir::NoDotAndDotDot),
                 QStringList()); // no folder, no data, no settings
    }
};

QTEST_GUILESS_MAIN(TestCliArguments)
#include "tst_cli_arguments.moc"
