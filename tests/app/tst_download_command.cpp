// towers-cli download, run as a process: usage errors (exit 2), failures against the local server
// (exit 1, URL or checksum in the message), Ctrl-C (exit 130, partial download kept), and a
// complete dataset left alone.
#include <QFileInfo>
#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <csignal>

#include "cli_process.h"
#include "http_test_server.h"
#include "test_files.h"

using namespace towers;

namespace {

struct CliRun
{
    int exitCode = -1;
    QProcess::ExitStatus status = QProcess::CrashExit;
    QString out, err;
};

const QStringList kMnistFiles{"t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz",
                              "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"};

} // namespace

class TestDownloadCommand : public QObject
{
    Q_OBJECT

    test::HttpTestServer* m_server = nullptr;
    QTemporaryDir* m_tmp = nullptr;

    QProcessEnvironment environment() const
    {
        // Nothing of the user's: no mirror, and a home, XDG and TOWERS_DATA inside the test folder.
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.remove(QStringLiteral("TOWERS_DOWNLOAD_BASE_URL"));
        env.insert(QStringLiteral("HOME"), m_tmp->filePath(QStringLiteral("home")));
        env.insert(QStringLiteral("XDG_DATA_HOME"), m_tmp->filePath(QStringLiteral("xdg")));
        env.insert(QStringLiteral("TOWERS_DATA"), m_tmp->filePath(QStringLiteral("default-data")));
        return env;
    }

    // Runs towers-cli while this thread's event loop keeps the test server answering.
    CliRun runCli(const QStringList& args, const QProcessEnvironment& env,
                  const std::function<void(QProcess&)>& during = {})
    {
        QProcess p;
        p.setProgram(QStringLiteral(TOWERS_CLI));
        p.setArguments(QStringList{QStringLiteral("download")} + args);
        p.setProcessEnvironment(env);
        test::withDefaultSignals(p);
        QSignalSpy finished(&p, &QProcess::finished);
        p.start();
        if (!p.waitForStarted(10000)) qFatal("cannot start towers-cli");
        if (during) during(p);
        if (finished.isEmpty() && !finished.wait(30000)) {
            p.kill();
            p.waitForFinished();
            qFatal("towers-cli download did not finish within 30 s");
        }
        return {p.exitCode(), p.exitStatus(), QString::fromLocal8Bit(p.readAllStandardOutput()),
                QString::fromLocal8Bit(p.readAllStandardError())};
    }

    QString dataDir() const { return m_tmp->filePath(QStringLiteral("data")); }

private slots:
    void initTestCase()
    {
        m_server = new test::HttpTestServer(this);
        QVERIFY(m_server->listen());
        quint32 seed = 7;
        // Not MNIST: whatever is served fails the built-in MD5s.
        for (const QString& f : kMnistFiles)
            m_server->setFile(f.toLatin1(), test::randomBytes(20000, ++seed));
        m_server->stallAfter = 4096;
    }

    void init()
    {
        m_tmp = new QTemporaryDir;
        QVERIFY(m_tmp->isValid());
        m_server->clearRequests();
    }

    void cleanup() { delete m_tmp; }

    void usageErrors_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("expected");
        const QString names = "cifar10, cifar100, cifar100-coarse, mnist, fashion-mnist";
        QTest::newRow("no dataset") << QStringList{} << "name a dataset: " + names;
        QTest::newRow("unknown dataset")
            << QStringList{"cifar11"} << "unknown dataset 'cifar11'; known datasets: " + names;
        QTest::newRow("two datasets")
            << QStringList{"mnist", "cifar10"} << "name one dataset: " + names;
        QTest::newRow("unknown option")
            << QStringList{"mnist", "--fast"} << "Unknown option 'fast'";
        QTest::newRow("bad base url")
            << QStringList{"mnist", "--base-url", "ftp://mirror/x"}
            << "--base-url must be an http://, https:// or file:// URL, got 'ftp://mirror/x'";
        QTest::newRow("base url without host")
            << QStringList{"mnist", "--base-url", "http://"} << "--base-url must be";
    }

    void usageErrors()
    {
        QFETCH(QStringList, args);
        QFETCH(QString, expected);
        const CliRun r = runCli(args, environment());
        QCOMPARE(r.status, QProcess::NormalExit);
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains(expected), qPrintable(r.err));
        QVERIFY(r.out.isEmpty());
    }

    void badBaseUrlFromTheEnvironment()
    {
        auto env = environment();
        env.insert(QStringLiteral("TOWERS_DOWNLOAD_BASE_URL"), QStringLiteral("not a url"));
        const CliRun r = runCli({QStringLiteral("mnist")}, env);
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains(QStringLiteral("TOWERS_DOWNLOAD_BASE_URL must be")),
                 qPrintable(r.err));
    }

    void notFoundNamesTheUrl()
    {
        const QString base = m_server->baseUrl("404").toString();
        const CliRun r = runCli({QStringLiteral("mnist"), QStringLiteral("--data-dir"), dataDir(),
                                 QStringLiteral("--base-url"), base},
                                environment());
        QCOMPARE(r.status, QProcess::NormalExit);
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(QStringLiteral("error: HTTP 404 Not Found from ") + base +
                                QStringLiteral("/train-images-idx3-ubyte.gz")),
                 qPrintable(r.err));
        QVERIFY(!QFileInfo::exists(dataDir() + QStringLiteral("/mnist")));
    }

    void mirrorFromTheEnvironmentIntoTheDefaultDataDir()
    {
        auto env = environment();
        env.insert(QStringLiteral("TOWERS_DOWNLOAD_BASE_URL"), m_server->baseUrl("404").toString());
        const CliRun r = runCli({QStringLiteral("mnist")}, env);
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(
            r.err.contains(m_server->baseUrl("404").toString() + QStringLiteral("/train-images")),
            qPrintable(r.err));
        // $TOWERS_DATA is where it went, with nothing in the final place.
        const QString defaultDir = m_tmp->filePath(QStringLiteral("default-data"));
        QVERIFY(QFileInfo(defaultDir + QStringLiteral("/.mnist.partial")).isDir());
        QVERIFY(!QFileInfo::exists(defaultDir + QStringLiteral("/mnist")));
    }

    void checksumMismatchAgainstThePublishedMd5()
    {
        const CliRun r = runCli({QStringLiteral("mnist"), QStringLiteral("--data-dir"), dataDir(),
                                 QStringLiteral("--base-url"), m_server->baseUrl("ok").toString()},
                                environment());
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(QStringLiteral("checksum mismatch for train-images-idx3-ubyte.gz")),
                 qPrintable(r.err));
        QVERIFY2(
            r.err.contains(
                QStringLiteral("expected MD5 f68b3c2dcbeaaa9fbdd348bbdeb94873, got ") +
                QString::fromLatin1(test::md5Hex(m_server->file("train-images-idx3-ubyte.gz")))),
            qPrintable(r.err));
        // stderr is a pipe here: plain lines, no carriage returns or escape sequences.
        QVERIFY(!r.err.contains(QLatin1Char('\r')) && !r.err.contains(QLatin1Char('\x1b')));
        QVERIFY2(
            r.err.contains(QStringLiteral("mnist: downloading train-images-idx3-ubyte.gz from ")),
            qPrintable(r.err));
        QVERIFY(!QFileInfo::exists(dataDir() + QStringLiteral("/mnist")));
        QVERIFY(!QFileInfo::exists(
            dataDir() + QStringLiteral("/.mnist.partial/files/train-images-idx3-ubyte.gz.part")));
    }

    void ctrlCCancelsAndKeepsThePartialDownload()
    {
        QSignalSpy requested(m_server, &test::HttpTestServer::requestReceived);
        const CliRun r =
            runCli({QStringLiteral("mnist"), QStringLiteral("--data-dir"), dataDir(),
                    QStringLiteral("--base-url"), m_server->baseUrl("stall").toString()},
                   environment(), [&](QProcess& p) {
                       QVERIFY(requested.wait(10000));
                       QTest::qWait(200); // let the first bytes land
                       ::kill(pid_t(p.processId()), SIGINT);
                   });
        QCOMPARE(r.status, QProcess::NormalExit);
        QCOMPARE(r.exitCode, 130);
        QVERIFY2(r.err.contains(QStringLiteral("cancelled")), qPrintable(r.err));
        QVERIFY(!QFileInfo::exists(dataDir() + QStringLiteral("/mnist")));
        const QFileInfo part(
            dataDir() + QStringLiteral("/.mnist.partial/files/train-images-idx3-ubyte.gz.part"));
        QVERIFY(part.isFile());
        QCOMPARE(test::readAll(part.filePath()),
                 m_server->file("train-images-idx3-ubyte.gz").left(part.size()));
        QVERIFY(!QFileInfo::exists(dataDir() + QStringLiteral("/.mnist.lock")));
    }

    void completeDatasetIsLeftAlone()
    {
        for (const QString& f : kMnistFiles)
            QVERIFY(test::writeAll(dataDir() + QStringLiteral("/mnist/") + f, "present"));
        const CliRun r = runCli({QStringLiteral("mnist"), QStringLiteral("--data-dir"), dataDir(),
                                 QStringLiteral("--base-url"), m_server->baseUrl("ok").toString()},
                                environment());
        QCOMPARE(r.exitCode, 0);
        QCOMPARE(r.out, QStringLiteral("mnist is already complete in ") + dataDir() +
                            QStringLiteral("/mnist (--force downloads it again)\n"));
        QVERIFY(m_server->requests().isEmpty());
    }
};

QTEST_GUILESS_MAIN(TestDownloadCommand)
#include "tst_download_command.moc"
