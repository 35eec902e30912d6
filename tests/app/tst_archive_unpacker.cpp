// unpackTarGz: archives built here with libarchive, the unpacked tree compared byte for byte, and
// every kind of hostile entry refused without writing outside the destination.
#include <QFileInfo>
#include <QTemporaryDir>
#include <QTest>

#include "app/data/archive_unpacker.h"
#include "archive_builder.h"
#include "test_files.h"

using namespace towers;
using towers::test::TarEntry;

class TestArchiveUnpacker : public QObject
{
    Q_OBJECT

    QString writeArchive(const QTemporaryDir& tmp, const QByteArray& bytes)
    {
        const QString path = tmp.filePath(QStringLiteral("archive.tar.gz"));
        if (!test::writeAll(path, bytes)) qFatal("cannot write the test archive");
        return path;
    }

    static QString messageOf(const std::function<void()>& f, bool* archiveError)
    {
        try {
            f();
        } catch (const app::ArchiveError& e) {
            *archiveError = true;
            return QString::fromStdString(e.what());
        } catch (const engine::IoError& e) {
            *archiveError = false;
            return QString::fromStdString(e.what());
        }
        return {};
    }

private slots:
    void unpacksFilesAndFolders()
    {
        QTemporaryDir tmp;
        QVERIFY(tmp.isValid());
        // 300 KB spans several 64 KB read blocks; "./" and "//" components are harmless.
        const QByteArray big = test::randomBytes(300 * 1024 + 7, 1);
        const QByteArray text = "airplane\nautomobile\n";
        const QString archive =
            writeArchive(tmp, test::makeTarGz({{"root/", {}, TarEntry::Dir, {}},
                                               {"root/big.bin", big, TarEntry::File, {}},
                                               {"./root/sub//meta.txt", text, TarEntry::File, {}},
                                               {"root/empty.bin", {}, TarEntry::File, {}},
                                               {"root/only-dir/", {}, TarEntry::Dir, {}}}));
        const QString dest = tmp.filePath(QStringLiteral("out"));
        QVERIFY(QDir().mkpath(dest));

        const auto result = app::unpackTarGz(archive, dest);
        QVERIFY(!result.cancelled);
        QCOMPARE(result.files,
                 (QStringList{"root/big.bin", "root/sub/meta.txt", "root/empty.bin"}));
        QCOMPARE(result.bytes, big.size() + text.size());
        QCOMPARE(test::listTree(dest),
                 (QStringList{"root/", "root/big.bin", "root/empty.bin", "root/only-dir/",
                              "root/sub/", "root/sub/meta.txt"}));
        QCOMPARE(test::readAll(dest + QStringLiteral("/root/big.bin")), big);
        QCOMPARE(test::readAll(dest + QStringLiteral("/root/sub/meta.txt")), text);
        QCOMPARE(QFileInfo(dest + QStringLiteral("/root/empty.bin")).size(), 0);
    }

    void refusesHostileEntries_data()
    {
        QTest::addColumn<QByteArray>("path");
        QTest::addColumn<int>("kind");
        QTest::addColumn<QByteArray>("target");
        QTest::addColumn<QString>("reason");
        // "@" stands for the temporary folder, so an absolute entry would land somewhere we check.
        QTest::newRow("parent") << QByteArray("../evil.txt") << int(TarEntry::File) << QByteArray()
                                << "'..' component";
        QTest::newRow("nested parent") << QByteArray("root/../../evil.txt") << int(TarEntry::File)
                                       << QByteArray() << "'..' component";
        QTest::newRow("parent folder")
            << QByteArray("root/../..") << int(TarEntry::Dir) << QByteArray() << "'..' component";
        QTest::newRow("absolute") << QByteArray("@/evil.txt") << int(TarEntry::File) << QByteArray()
                                  << "absolute path";
        QTest::newRow("symlink") << QByteArray("root/link") << int(TarEntry::Symlink)
                                 << QByteArray("/etc/passwd") << "symbolic link";
        QTest::newRow("relative symlink") << QByteArray("root/up") << int(TarEntry::Symlink)
                                          << QByteArray("..") << "symbolic link";
        QTest::newRow("hardlink") << QByteArray("root/hard") << int(TarEntry::Hardlink)
                                  << QByteArray("root/ok.txt") << "hard link";
        QTest::newRow("fifo") << QByteArray("root/fifo") << int(TarEntry::Fifo) << QByteArray()
                              << "FIFO";
    }

    void refusesHostileEntries()
    {
        QFETCH(QByteArray, path);
        QFETCH(int, kind);
        QFETCH(QByteArray, target);
        QFETCH(QString, reason);
        QTemporaryDir tmp;
        QVERIFY(tmp.isValid());
        path.replace("@", QFile::encodeName(tmp.path()));
        const QString archive =
            writeArchive(tmp, test::makeTarGz({{"root/ok.txt", "fine", TarEntry::File, {}},
                                               {path, "evil", TarEntry::Kind(kind), target}}));
        // Nested two deep, so "../evil.txt" and "root/../../evil.txt" would land in tmp/a/.
        const QString dest = tmp.filePath(QStringLiteral("a/b"));
        QVERIFY(QDir().mkpath(dest));
        const QStringList before = test::listTree(tmp.path());

        bool archiveError = false;
        const QString message = messageOf([&] { app::unpackTarGz(archive, dest); }, &archiveError);
        QVERIFY2(archiveError, qPrintable(message));
        QVERIFY2(message.contains(QString::fromUtf8(path)), qPrintable(message));
        QVERIFY2(message.contains(reason), qPrintable(message));
        QVERIFY2(message.contains(archive), qPrintable(message));
        // Nothing but the harmless first entry was written, anywhere.
        QStringList expected = before;
        expected << "a/b/root/"
                 << "a/b/root/ok.txt";
        expected.sort();
        QCOMPARE(test::listTree(tmp.path()), expected);
    }

    void rejectsDamagedOrForeignArchives_data()
    {
        QTest::addColumn<QByteArray>("bytes");
        const QByteArray good =
            test::makeTarGz({{"root/data.bin", test::randomBytes(200000, 2), TarEntry::File, {}}});
        QTest::newRow("truncated") << good.left(good.size() / 2);
        // (A flipped byte inside the data is not reliably caught here: libarchive stops at the tar
        // end marker without reading the gzip CRC. The downloader's MD5 check, done before
        // unpacking, is what catches it.)
        QTest::newRow("not gzip") << test::randomBytes(5000, 3);
        QTest::newRow("gzip but not tar") << test::gzipBytes(test::randomBytes(5000, 4));
        QTest::newRow("empty file") << QByteArray("");
        QTest::newRow("empty tar") << test::makeTarGz({});
    }

    void rejectsDamagedOrForeignArchives()
    {
        QFETCH(QByteArray, bytes);
        QTemporaryDir tmp;
        QVERIFY(tmp.isValid());
        const QString archive = writeArchive(tmp, bytes);
        const QString dest = tmp.filePath(QStringLiteral("out"));
        QVERIFY(QDir().mkpath(dest));
        bool archiveError = false;
        const QString message = messageOf([&] { app::unpackTarGz(archive, dest); }, &archiveError);
        QVERIFY2(archiveError, qPrintable(message));
        QVERIFY2(message.contains(archive), qPrintable(message));
    }

    void missingArchiveIsAnIoError()
    {
        QTemporaryDir tmp;
        QVERIFY(tmp.isValid());
        bool archiveError = true;
        const QString missing = tmp.filePath(QStringLiteral("nope.tar.gz"));
        const QString message =
            messageOf([&] { app::unpackTarGz(missing, tmp.path()); }, &archiveError);
        QVERIFY(!archiveError);
        QVERIFY2(message.contains(missing) && message.contains(QStringLiteral("no such file")),
                 qPrintable(message));
    }

    void unwritableDestinationNamesPathAndReason()
    {
        QTemporaryDir tmp;
        QVERIFY(tmp.isValid());
        const QString archive =
            writeArchive(tmp, test::makeTarGz({{"root/x.bin", "x", TarEntry::File, {}}}));
        // A regular file where the destination folder should be: fails even for root.
        const QString notAFolder = tmp.filePath(QStringLiteral("plain-file"));
        QVERIFY(test::writeAll(notAFolder, "x"));
        bool archiveError = true;
        const QString message =
            messageOf([&] { app::unpackTarGz(archive, notAFolder); }, &archiveError);
        QVERIFY(!archiveError);
        QVERIFY2(message.contains(notAFolder + QStringLiteral("/root")), qPrintable(message));
        QVERIFY2(message.contains(QStringLiteral("Not a directory")), qPrintable(message));
    }

    void limitsAreEnforced()
    {
        QTemporaryDir tmp;
        QVERIFY(tmp.isValid());
        const QString archive = writeArchive(
            tmp, test::makeTarGz({{"a.bin", test::randomBytes(4000, 5), TarEntry::File, {}},
                                  {"b.bin", test::randomBytes(4000, 6), TarEntry::File, {}}}));
        bool archiveError = false;
        QString message = messageOf(
            [&] {
                app::unpackTarGz(archive, tmp.path(), nullptr, {6000, 100});
            },
            &archiveError);
        QVERIFY2(archiveError && message.contains(QStringLiteral("more than 6000 bytes")),
                 qPrintable(message));
        message = messageOf(
            [&] {
                app::unpackTarGz(archive, tmp.path(), nullptr, {1 << 20, 1});
            },
            &archiveError);
        QVERIFY2(archiveError && message.contains(QStringLiteral("more than 1 entries")),
                 qPrintable(message));
    }

    void cancelStopsEarly()
    {
        QTemporaryDir tmp;
        QVERIFY(tmp.isValid());
        const QString archive =
            writeArchive(tmp, test::makeTarGz({{"a.bin", "abc", TarEntry::File, {}}}));
        const QString dest = tmp.filePath(QStringLiteral("out"));
        QVERIFY(QDir().mkpath(dest));
        std::atomic<bool> cancel{true};
        const auto result = app::unpackTarGz(archive, dest, &cancel);
        QVERIFY(result.cancelled);
        QVERIFY(result.files.isEmpty());
        QVERIFY(test::listTree(dest).isEmpty());
    }
};

QTEST_GUILESS_MAIN(TestArchiveUnpacker)
#include "tst_archive_unpacker.moc"
