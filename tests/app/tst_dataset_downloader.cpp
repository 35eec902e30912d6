// DatasetDownloader against a local HTTP server, with the built-in CIFAR-10 and MNIST layouts and
// test-made files (their MD5s injected): exact final layouts, atomicity (no dataset folder after
// any failure), resume, cancel (also from another thread), the lock, and hostile archives.
#include <QFileInfo>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>

#include "app/data/dataset_downloader.h"
#include "archive_builder.h"
#include "http_test_server.h"
#include "test_files.h"

using namespace towers;
using app::DatasetDownloader;
using Outcome = DatasetDownloader::Outcome;
using test::TarEntry;

namespace {

const QStringList kCifarFiles{"batches.meta.txt", "data_batch_1.bin", "data_batch_2.bin",
                              "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin",
                              "readme.html",      "test_batch.bin"};

struct Run
{
    Outcome outcome = Outcome::NotStarted;
    bool ok = false;
    QString message;
    QStringList statuses;
    QList<QList<QVariant>> progress, fileStarted;
};

} // namespace

class TestDatasetDownloader : public QObject
{
    Q_OBJECT

    test::HttpTestServer* m_server = nullptr;
    QTemporaryDir* m_tmp = nullptr;
    QString m_dataDir;
    QHash<QString, QByteArray> m_cifarContents; // file name -> bytes inside the archive

    // The built-in spec with the MD5s and sizes of what the test server holds.
    app::DatasetSpec servedSpec(const QString& name) const
    {
        app::DatasetSpec spec = *app::findBuiltInDataset(name);
        for (auto& f : spec.files) {
            const QByteArray bytes = m_server->file(f.name.toLatin1());
            f.md5 = test::md5Hex(bytes);
            f.size = bytes.size();
        }
        return spec;
    }

    QByteArray cifarArchive(const QList<TarEntry>& extra = {}, const QStringList& skip = {}) const
    {
        QList<TarEntry> entries{{"cifar-10-batches-bin/", {}, TarEntry::Dir, {}}};
        for (const QString& f : kCifarFiles)
            if (!skip.contains(f))
                entries << TarEntry{"cifar-10-batches-bin/" + f.toLatin1(),
                                    m_cifarContents.value(f),
                                    TarEntry::File,
                                    {}};
        entries << extra;
        return test::makeTarGz(entries);
    }

    DatasetDownloader::Options options(const QByteArray& behaviours, bool force = false) const
    {
        DatasetDownloader::Options o;
        o.dataDir = m_dataDir;
        o.baseUrl = m_server->baseUrl(behaviours);
        o.force = force;
        o.transferTimeoutMs = 5000;
        return o;
    }

    static void attach(DatasetDownloader& d, Run& r)
    {
        connect(&d, &DatasetDownloader::statusMessage, &d,
                [&r](const QString& s) { r.statuses << s; });
        connect(&d, &DatasetDownloader::progress, &d, [&r](qint64 done, qint64 total) {
            r.progress << QList<QVariant>{done, total};
        });
        connect(&d, &DatasetDownloader::fileStarted, &d, [&r](const QString& f, int i, int n) {
            r.fileStarted << QList<QVariant>{f, i, n};
        });
    }

    Run run(const app::DatasetSpec& spec, const DatasetDownloader::Options& o,
            const std::function<void(DatasetDownloader&)>& during = {})
    {
        Run r;
        DatasetDownloader d(spec, o);
        attach(d, r);
        QSignalSpy finished(&d, &DatasetDownloader::finished);
        if (during) during(d);
        d.start();
        if (!finished.wait(20000)) qFatal("the download did not finish within 20 s");
        if (finished.size() != 1) qFatal("finished was emitted more than once");
        r.outcome = d.outcome();
        r.ok = finished.first().at(0).toBool();
        r.message = finished.first().at(1).toString();
        return r;
    }

    QStringList cifarTree() const
    {
        QStringList t{"cifar10/"};
        for (const QString& f : kCifarFiles) t << QStringLiteral("cifar10/") + f;
        return t;
    }

private slots:
    void initTestCase()
    {
        m_server = new test::HttpTestServer(this);
        QVERIFY(m_server->listen());
        quint32 seed = 100;
        for (const QString& f : kCifarFiles)
            m_cifarContents[f] = f.endsWith(QLatin1String(".bin"))
                                     ? test::randomBytes(2 * 3073, ++seed)
                                     : f.toLatin1() + " text\n";
        m_server->setFile("cifar-10-binary.tar.gz", cifarArchive());
        QList<TarEntry> cifar100{{"cifar-100-binary/", {}, TarEntry::Dir, {}}};
        for (const char* f :
             {"train.bin", "test.bin", "coarse_label_names.txt", "fine_label_names.txt"})
            cifar100 << TarEntry{QByteArray("cifar-100-binary/") + f,
                                 test::randomBytes(3074, ++seed),
                                 TarEntry::File,
                                 {}};
        m_server->setFile("cifar-100-binary.tar.gz", test::makeTarGz(cifar100));
        const auto mnist = app::findBuiltInDataset(QStringLiteral("mnist"));
        for (const auto& f : mnist->files)
            m_server->setFile(f.name.toLatin1(), test::gzipBytes(test::randomBytes(30000, ++seed)));
    }

    void init()
    {
        m_tmp = new QTemporaryDir;
        QVERIFY(m_tmp->isValid());
        m_dataDir = m_tmp->filePath(QStringLiteral("data"));
        m_server->clearRequests();
        m_server->truncateAt = 1000;
        m_server->stallAfter = 4096;
    }

    void cleanup() { delete m_tmp; }

    void downloadsAndUnpacksAnArchive()
    {
        const auto spec = servedSpec(QStringLiteral("cifar10"));
        const Run r = run(spec, options("ok"));
        QCOMPARE(r.outcome, Outcome::Downloaded);
        QVERIFY(r.ok);
        QCOMPARE(r.message, m_dataDir + QStringLiteral("/cifar10"));
        // Exactly the archive folder's contents; no archive, partial folder or lock left.
        QCOMPARE(test::listTree(m_dataDir), cifarTree());
        for (const QString& f : kCifarFiles)
            QCOMPARE(test::readAll(m_dataDir + QStringLiteral("/cifar10/") + f),
                     m_cifarContents.value(f));
        const qint64 size = spec.files.first().size;
        QCOMPARE(r.progress.last(), (QList<QVariant>{size, size}));
        QCOMPARE(r.fileStarted, (QList<QList<QVariant>>{{"cifar-10-binary.tar.gz", 0, 1}}));
        QVERIFY(r.statuses.join('|').contains(QStringLiteral("unpacking cifar-10-binary.tar.gz")));
        QCOMPARE(m_server->requests().size(), 1);
        QCOMPARE(m_server->requests().first().path, QByteArray("/ok/cifar-10-binary.tar.gz"));
        QVERIFY(m_server->requests().first().headers.value("user-agent").startsWith("towers/"));
    }

    void downloadsPlainFiles()
    {
        const auto spec = servedSpec(QStringLiteral("mnist"));
        const Run r = run(spec, options("ok"));
        QCOMPARE(r.outcome, Outcome::Downloaded);
        QStringList expected{"mnist/"};
        qint64 total = 0;
        for (const auto& f : spec.files) {
            expected << QStringLiteral("mnist/") + f.name;
            total += f.size;
            QCOMPARE(test::readAll(m_dataDir + QStringLiteral("/mnist/") + f.name),
                     m_server->file(f.name.toLatin1()));
        }
        expected.sort();
        QCOMPARE(test::listTree(m_dataDir), expected);
        QCOMPARE(r.fileStarted.size(), 4);
        QCOMPARE(r.fileStarted.at(3), (QList<QVariant>{"t10k-labels-idx1-ubyte.gz", 3, 4}));
        QCOMPARE(r.progress.last(), (QList<QVariant>{total, total}));
        for (const auto& p : r.progress)
            QVERIFY(p.at(0).toLongLong() <= total && p.at(1).toLongLong() == total);
    }

    void completeDatasetIsNotDownloadedAgain()
    {
        const auto spec = servedSpec(QStringLiteral("mnist"));
        QCOMPARE(run(spec, options("ok")).outcome, Outcome::Downloaded);
        const QStringList tree = test::listTree(m_dataDir);
        m_server->clearRequests();
        Run r = run(spec, options("ok"));
        QCOMPARE(r.outcome, Outcome::AlreadyPresent);
        QVERIFY(r.ok);
        QVERIFY(m_server->requests().isEmpty());

        r = run(spec, options("ok", /*force=*/true));
        QCOMPARE(r.outcome, Outcome::Downloaded);
        QCOMPARE(m_server->requests().size(), 4);
        QCOMPARE(test::listTree(m_dataDir), tree);

        // An incomplete dataset folder is replaced as a whole.
        QVERIFY(QFile::remove(m_dataDir + QStringLiteral("/mnist/t10k-images-idx3-ubyte.gz")));
        QVERIFY(test::writeAll(m_dataDir + QStringLiteral("/mnist/stray.txt"), "stray"));
        QCOMPARE(run(spec, options("ok")).outcome, Outcome::Downloaded);
        QCOMPARE(test::listTree(m_dataDir), tree);
    }

    void failuresLeaveNoDatasetFolder_data()
    {
        QTest::addColumn<QByteArray>("behaviours");
        QTest::addColumn<QString>("expected");
        QTest::newRow("404") << QByteArray("404") << "HTTP 404 Not Found from http://127.0.0.1";
        QTest::newRow("corrupt") << QByteArray("corrupt")
                                 << "checksum mismatch for cifar-10-binary.tar.gz";
        QTest::newRow("truncated") << QByteArray("truncate") << "ended after 1000 of";
    }

    void failuresLeaveNoDatasetFolder()
    {
        QFETCH(QByteArray, behaviours);
        QFETCH(QString, expected);
        const Run r = run(servedSpec(QStringLiteral("cifar10")), options(behaviours));
        QCOMPARE(r.outcome, Outcome::Failed);
        QVERIFY(!r.ok);
        QVERIFY2(r.message.contains(expected), qPrintable(r.message));
        QVERIFY2(r.message.contains(QStringLiteral("cifar-10-binary.tar.gz")),
                 qPrintable(r.message));
        QVERIFY(!QFileInfo::exists(m_dataDir + QStringLiteral("/cifar10")));
        for (const QString& entry : test::listTree(m_dataDir))
            QVERIFY2(entry.startsWith(QStringLiteral(".cifar10.partial/")), qPrintable(entry));
    }

    void interruptedDownloadResumesWithRange()
    {
        const auto spec = servedSpec(QStringLiteral("cifar10"));
        // The "truncate" server cuts each file's first answer short; a second run of the same
        // dataset must ask for the rest only.
        QCOMPARE(run(spec, options("truncate")).outcome, Outcome::Failed);
        const QString part =
            m_dataDir + QStringLiteral("/.cifar10.partial/files/cifar-10-binary.tar.gz.part");
        QCOMPARE(QFileInfo(part).size(), 1000);
        const Run r = run(spec, options("truncate"));
        QCOMPARE(r.outcome, Outcome::Downloaded);
        const auto requests = m_server->requestsFor("cifar-10-binary.tar.gz");
        QVERIFY(requests.size() >= 2);
        QCOMPARE(requests.last().headers.value("range"), QByteArray("bytes=1000-"));
        QCOMPARE(test::listTree(m_dataDir), cifarTree());
        QCOMPARE(test::readAll(m_dataDir + QStringLiteral("/cifar10/data_batch_3.bin")),
                 m_cifarContents.value(QStringLiteral("data_batch_3.bin")));
    }

    void cancelKeepsPartialFilesAndResumes()
    {
        const auto spec = servedSpec(QStringLiteral("mnist"));
        const Run r = run(spec, options("stall"), [](DatasetDownloader& d) {
            connect(&d, &DatasetDownloader::progress, &d, [&d](qint64 done, qint64) {
                if (done >= 4096) d.cancel();
            });
        });
        QCOMPARE(r.outcome, Outcome::Cancelled);
        QVERIFY(!r.ok);
        QVERIFY2(r.message.contains(QStringLiteral("cancelled")), qPrintable(r.message));
        QCOMPARE(test::listTree(m_dataDir),
                 (QStringList{".mnist.partial/", ".mnist.partial/files/",
                              ".mnist.partial/files/train-images-idx3-ubyte.gz.part"}));

        const Run resumed = run(spec, options("ok"));
        QCOMPARE(resumed.outcome, Outcome::Downloaded);
        QCOMPARE(m_server->requestsFor("train-images-idx3-ubyte.gz").last().headers.value("range"),
                 QByteArray("bytes=4096-"));
        QCOMPARE(test::readAll(m_dataDir + QStringLiteral("/mnist/train-images-idx3-ubyte.gz")),
                 m_server->file("train-images-idx3-ubyte.gz"));
    }

    void cancelBeforeItBegins()
    {
        const Run r = run(servedSpec(QStringLiteral("mnist")), options("ok"),
                          [](DatasetDownloader& d) { d.cancel(); });
        QCOMPARE(r.outcome, Outcome::Cancelled);
        QVERIFY(m_server->requests().isEmpty());
        QVERIFY(!QFileInfo::exists(m_dataDir + QStringLiteral("/mnist")));
    }

    void verifiedFilesOfAFailedRunAreKept()
    {
        auto spec = servedSpec(QStringLiteral("mnist"));
        const QByteArray last = m_server->file("t10k-labels-idx1-ubyte.gz");
        spec.files.last().name = QStringLiteral("not-served.gz"); // 404 for the last file
        spec.requiredFiles.replace(
            spec.requiredFiles.indexOf(QStringLiteral("t10k-labels-idx1-ubyte.gz")),
            QStringLiteral("not-served.gz"));
        QCOMPARE(run(spec, options("ok")).outcome, Outcome::Failed);
        m_server->setFile("not-served.gz", last);
        m_server->clearRequests();
        QCOMPARE(run(spec, options("ok")).outcome, Outcome::Downloaded);
        // Only the missing file was fetched again; the other three were checked on disk.
        QCOMPARE(m_server->requests().size(), 1);
        QCOMPARE(m_server->requests().first().path, QByteArray("/ok/not-served.gz"));
        QCOMPARE(test::listTree(m_dataDir).size(), 5);
    }

    void hostileArchiveIsRefused_data()
    {
        QTest::addColumn<QByteArray>("entry");
        QTest::addColumn<int>("kind");
        QTest::newRow("climbs out")
            << QByteArray("cifar-10-batches-bin/../../evil.txt") << int(TarEntry::File);
        QTest::newRow("absolute") << QByteArray("/tmp/towers-evil.txt") << int(TarEntry::File);
        QTest::newRow("symlink") << QByteArray("cifar-10-batches-bin/evil")
                                 << int(TarEntry::Symlink);
    }

    void hostileArchiveIsRefused()
    {
        QFETCH(QByteArray, entry);
        QFETCH(int, kind);
        const QByteArray archive =
            cifarArchive({{entry, "evil", TarEntry::Kind(kind), "/etc/passwd"}});
        m_server->setFile("cifar-10-binary.tar.gz", archive);
        const Run r = run(servedSpec(QStringLiteral("cifar10")), options("ok"));
        m_server->setFile("cifar-10-binary.tar.gz", cifarArchive());
        QCOMPARE(r.outcome, Outcome::Failed);
        QVERIFY2(r.message.contains(QString::fromLatin1(entry)) &&
                     r.message.contains(QStringLiteral("refusing")),
                 qPrintable(r.message));
        QVERIFY(!QFileInfo::exists(m_dataDir + QStringLiteral("/cifar10")));
        QVERIFY(!QFileInfo::exists(m_tmp->filePath(QStringLiteral("evil.txt"))));
        QVERIFY(!QFileInfo::exists(QStringLiteral("/tmp/towers-evil.txt")));
    }

    void archiveWithoutARequiredFileFails()
    {
        m_server->setFile("cifar-10-binary.tar.gz",
                          cifarArchive({}, {QStringLiteral("test_batch.bin")}));
        const Run r = run(servedSpec(QStringLiteral("cifar10")), options("ok"));
        m_server->setFile("cifar-10-binary.tar.gz", cifarArchive());
        QCOMPARE(r.outcome, Outcome::Failed);
        QVERIFY2(r.message.contains(QStringLiteral("cifar-10-batches-bin/test_batch.bin")),
                 qPrintable(r.message));
        QVERIFY(!QFileInfo::exists(m_dataDir + QStringLiteral("/cifar10")));
    }

    void archiveWithoutItsFolderFails()
    {
        m_server->setFile("cifar-10-binary.tar.gz",
                          test::makeTarGz({{"other/data_batch_1.bin", "x", TarEntry::File, {}}}));
        const Run r = run(servedSpec(QStringLiteral("cifar10")), options("ok"));
        m_server->setFile("cifar-10-binary.tar.gz", cifarArchive());
        QCOMPARE(r.outcome, Outcome::Failed);
        QVERIFY2(r.message.contains(QStringLiteral(
                     "no folder cifar-10-batches-bin/ (its top level holds: other)")),
                 qPrintable(r.message));
    }

    void unwritableDataDirNamesPathAndReason()
    {
        const QString plainFile = m_tmp->filePath(QStringLiteral("plain-file"));
        QVERIFY(test::writeAll(plainFile, "x"));
        auto o = options("ok");
        o.dataDir = plainFile + QStringLiteral("/data");
        const Run r = run(servedSpec(QStringLiteral("mnist")), o);
        QCOMPARE(r.outcome, Outcome::Failed);
        QVERIFY2(r.message.contains(o.dataDir) &&
                     r.message.contains(QStringLiteral("Not a directory")),
                 qPrintable(r.message));
        QVERIFY(m_server->requests().isEmpty());
    }

    // CIFAR-100 by its coarse labels reads CIFAR-100's files: its download goes to cifar100/,
    // and the other is then already there (one 168 MB download, not two).
    void datasetsOfOneFolderShareTheDownload()
    {
        const auto coarse = servedSpec(QStringLiteral("cifar100-coarse"));
        QCOMPARE(coarse.folderName(), QStringLiteral("cifar100"));
        const Run r = run(coarse, options("ok"));
        QCOMPARE(r.outcome, Outcome::Downloaded);
        QCOMPARE(r.message, m_dataDir + QStringLiteral("/cifar100"));
        QVERIFY(QFileInfo::exists(m_dataDir + QStringLiteral("/cifar100/fine_label_names.txt")));
        QVERIFY(!QFileInfo::exists(m_dataDir + QStringLiteral("/cifar100-coarse")));
        QCOMPARE(m_server->requests().size(), 1);
        const Run fine = run(servedSpec(QStringLiteral("cifar100")), options("ok"));
        QCOMPARE(fine.outcome, Outcome::AlreadyPresent);
        QCOMPARE(m_server->requests().size(), 1);
    }

    // One lock per folder: a second download into it is refused while one runs, of the same
    // dataset or of another that shares the folder.
    void secondDownloadIntoTheSameFolderFails_data()
    {
        QTest::addColumn<QString>("first");
        QTest::addColumn<QString>("second");
        QTest::addColumn<QString>("folder");
        QTest::newRow("the same dataset") << "mnist"
                                          << "mnist"
                                          << "mnist";
        QTest::newRow("a dataset of the same folder") << "cifar100"
                                                      << "cifar100-coarse"
                                                      << "cifar100";
    }
    void secondDownloadIntoTheSameFolderFails()
    {
        QFETCH(QString, first);
        QFETCH(QString, second);
        QFETCH(QString, folder);
        DatasetDownloader running(servedSpec(first), options("stall"));
        QSignalSpy runningDone(&running, &DatasetDownloader::finished);
        QSignalSpy requested(m_server, &test::HttpTestServer::requestReceived);
        running.start();
        QVERIFY(requested.wait(10000));
        const Run refused = run(servedSpec(second), options("ok"));
        QCOMPARE(refused.outcome, Outcome::Failed);
        QVERIFY2(refused.message.contains(
                     QStringLiteral("another download into %1/%2").arg(m_dataDir, folder)),
                 qPrintable(refused.message));
        running.cancel();
        QVERIFY(runningDone.wait(10000));
        QCOMPARE(running.outcome(), Outcome::Cancelled);
        // The lock went with the first one.
        QCOMPARE(run(servedSpec(second), options("ok")).outcome, Outcome::Downloaded);
    }

    void runsInAWorkerThreadAndCancelsFromAnother()
    {
        QThread worker;
        worker.start();
        for (const bool cancel : {true, false}) {
            auto* d = new DatasetDownloader(servedSpec(QStringLiteral("mnist")),
                                            options(cancel ? "stall" : "ok"));
            d->moveToThread(&worker);
            bool done = false, ok = false;
            // Queued into this thread: the spy-free way to watch an object of another thread.
            connect(d, &DatasetDownloader::finished, this, [&](bool success) {
                done = true;
                ok = success;
            });
            QSignalSpy requested(m_server, &test::HttpTestServer::requestReceived);
            QMetaObject::invokeMethod(d, &DatasetDownloader::start, Qt::QueuedConnection);
            if (cancel) {
                QVERIFY(requested.wait(10000));
                d->cancel(); // from this thread, while the worker runs it
            }
            QTRY_VERIFY_WITH_TIMEOUT(done, 20000);
            QCOMPARE(ok, !cancel);
            QCOMPARE(d->outcome(), cancel ? Outcome::Cancelled : Outcome::Downloaded);
            QMetaObject::invokeMethod(
                d, [d] { delete d; }, Qt::BlockingQueuedConnection);
        }
        worker.quit();
        worker.wait();
        QCOMPARE(test::listTree(m_dataDir).size(), 5);
    }

    void invalidSpecFailsWithAReason()
    {
        auto spec = servedSpec(QStringLiteral("mnist"));
        spec.files[1].md5 = "not-an-md5";
        const Run r = run(spec, options("ok"));
        QCOMPARE(r.outcome, Outcome::Failed);
        QVERIFY2(r.message.contains(QStringLiteral("train-labels-idx1-ubyte.gz")) &&
                     r.message.contains(QStringLiteral("MD5")),
                 qPrintable(r.message));
        QVERIFY(!QFileInfo::exists(m_dataDir));
    }

    void fileUrlJoinsTheBase()
    {
        const auto f = app::findBuiltInDataset(QStringLiteral("mnist"))->files.first();
        QCOMPARE(DatasetDownloader::fileUrl(f, {}), f.url);
        QCOMPARE(DatasetDownloader::fileUrl(f, QUrl(QStringLiteral("http://mirror:8080/data"))),
                 QUrl(QStringLiteral("http://mirror:8080/data/train-images-idx3-ubyte.gz")));
        QCOMPARE(DatasetDownloader::fileUrl(f, QUrl(QStringLiteral("https://mirror/data/"))),
                 QUrl(QStringLiteral("https://mirror/data/train-images-idx3-ubyte.gz")));
        QCOMPARE(DatasetDownloader::fileUrl(f, QUrl(QStringLiteral("file:///srv/mirror"))),
                 QUrl::fromLocalFile(QStringLiteral("/srv/mirror/train-images-idx3-ubyte.gz")));
    }
};

QTEST_GUILESS_MAIN(TestDatasetDownloader)
#include "tst_dataset_downloader.moc"
