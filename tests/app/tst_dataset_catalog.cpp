// The built-in dataset table (checked against the published facts of DATASETS.md, transcribed
// here independently), spec validation, and the completeness check.
#include <QFile>
#include <QFileInfo>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>

#include "app/data/dataset_catalog.h"
#include "engine/data/dataset_spec.h"
#include "engine/errors.h"
#include "test_files.h"

using namespace towers;

class TestDatasetCatalog : public QObject
{
    Q_OBJECT

    static app::DatasetSpec validSpec()
    {
        return {QStringLiteral("tiny"),
                QStringLiteral("test"),
                {{QStringLiteral("a.gz"), QUrl(QStringLiteral("https://example.org/a.gz")),
                  QByteArray(32, 'a'), 10}},
                QString(),
                {QStringLiteral("a.gz")},
                QString()};
    }

private slots:
    void namesInOrder()
    {
        QCOMPARE(app::builtInDatasetNames(),
                 (QStringList{"cifar10", "cifar100", "cifar100-coarse", "mnist", "fashion-mnist"}));
        QVERIFY(!app::findBuiltInDataset(QStringLiteral("cifar11")));
        QCOMPARE(app::findBuiltInDataset(QStringLiteral("mnist"))->name, QStringLiteral("mnist"));
    }

    void builtInsValidate()
    {
        for (const auto& spec : app::builtInDatasets()) app::validateDatasetSpec(spec);
    }

    void publishedFacts_data()
    {
        QTest::addColumn<QString>("dataset");
        QTest::addColumn<QString>("url");
        QTest::addColumn<QByteArray>("md5");
        QTest::addColumn<qint64>("size");
        const QString mnist = "https://ossci-datasets.s3.amazonaws.com/mnist/";
        const QString fashion = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/";
        QTest::newRow("cifar10") << "cifar10"
                                 << "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"
                                 << QByteArray("c32a1d4ab5d03f1284b67883e8d87530")
                                 << qint64(170052171);
        QTest::newRow("cifar100") << "cifar100"
                                  << "https://www.cs.toronto.edu/~kriz/cifar-100-binary.tar.gz"
                                  << QByteArray("03b5dce01913d631647c71ecec9e9cb8")
                                  << qint64(168513733);
        QTest::newRow("mnist 1") << "mnist" << mnist + "train-images-idx3-ubyte.gz"
                                 << QByteArray("f68b3c2dcbeaaa9fbdd348bbdeb94873") << qint64(-1);
        QTest::newRow("mnist 2") << "mnist" << mnist + "train-labels-idx1-ubyte.gz"
                                 << QByteArray("d53e105ee54ea40749a09fcbcd1e9432") << qint64(-1);
        QTest::newRow("mnist 3") << "mnist" << mnist + "t10k-images-idx3-ubyte.gz"
                                 << QByteArray("9fb629c4189551a2d022fa330f9573f3") << qint64(-1);
        QTest::newRow("mnist 4") << "mnist" << mnist + "t10k-labels-idx1-ubyte.gz"
                                 << QByteArray("ec29112dd5afa0611ce80d1b7f02629c") << qint64(-1);
        QTest::newRow("fashion 1") << "fashion-mnist" << fashion + "train-images-idx3-ubyte.gz"
                                   << QByteArray("8d4fb7e6c68d591d4c3dfef9ec88bf0d") << qint64(-1);
        QTest::newRow("fashion 2") << "fashion-mnist" << fashion + "train-labels-idx1-ubyte.gz"
                                   << QByteArray("25c81989df183df01b3e8a0aad5dffbe") << qint64(-1);
        QTest::newRow("fashion 3") << "fashion-mnist" << fashion + "t10k-images-idx3-ubyte.gz"
                                   << QByteArray("bef4ecab320f06d8554ea6380940ec79") << qint64(-1);
        QTest::newRow("fashion 4") << "fashion-mnist" << fashion + "t10k-labels-idx1-ubyte.gz"
                                   << QByteArray("bb300cfdad3c16e7a12a480ee83cd310") << qint64(-1);
    }

    void publishedFacts()
    {
        QFETCH(QString, dataset);
        QFETCH(QString, url);
        QFETCH(QByteArray, md5);
        QFETCH(qint64, size);
        const auto spec = app::findBuiltInDataset(dataset);
        QVERIFY(spec);
        const auto it = std::find_if(spec->files.begin(), spec->files.end(),
                                     [&](const app::DatasetFile& f) { return f.url == QUrl(url); });
        QVERIFY2(it != spec->files.end(), qPrintable(url));
        QCOMPARE(it->md5, md5);
        QCOMPARE(it->name, url.section(QLatin1Char('/'), -1));
        if (size >= 0) QCOMPARE(it->size, size);
    }

    void debianFashionMnistSizes()
    {
        // Debian's dataset-fashion-mnist ships the same data re-gzipped without the stored file
        // name (gzip -n): each published file is exactly the name's length + 1 bytes larger.
        // That pins the progress sizes of the table to real files.
        const auto spec = app::findBuiltInDataset(QStringLiteral("fashion-mnist"));
        for (const auto& f : spec->files) {
            const QString local = QStringLiteral("/usr/share/datasets/fashion-mnist/") + f.name;
            if (!QFile::exists(local)) QSKIP("dataset-fashion-mnist is not installed");
            const QString stored = f.name.chopped(3); // the name gzip stored: without ".gz"
            QCOMPARE(f.size, QFileInfo(local).size() + stored.size() + 1);
        }
    }

    void archiveLayouts()
    {
        const auto cifar10 = app::findBuiltInDataset(QStringLiteral("cifar10"));
        QCOMPARE(cifar10->archiveRoot, QStringLiteral("cifar-10-batches-bin"));
        QCOMPARE(cifar10->requiredFiles.size(), 7);
        QVERIFY(cifar10->requiredFiles.contains(QStringLiteral("batches.meta.txt")));
        const auto cifar100 = app::findBuiltInDataset(QStringLiteral("cifar100"));
        QCOMPARE(cifar100->archiveRoot, QStringLiteral("cifar-100-binary"));
        QCOMPARE(cifar100->requiredFiles,
                 (QStringList{"train.bin", "test.bin", "fine_label_names.txt"}));
        QCOMPARE(cifar100->folderName(), QStringLiteral("cifar100"));
        // The same archive, read by the other label byte, into the same folder.
        const auto coarse = app::findBuiltInDataset(QStringLiteral("cifar100-coarse"));
        QCOMPARE(coarse->archiveRoot, cifar100->archiveRoot);
        QCOMPARE(coarse->files.first().url, cifar100->files.first().url);
        QCOMPARE(coarse->requiredFiles,
                 (QStringList{"train.bin", "test.bin", "coarse_label_names.txt"}));
        QCOMPARE(coarse->folderName(), QStringLiteral("cifar100"));
        for (const char* plain : {"mnist", "fashion-mnist"}) {
            const auto spec = app::findBuiltInDataset(QString::fromLatin1(plain));
            QVERIFY(spec->archiveRoot.isEmpty());
            QCOMPARE(spec->requiredFiles.size(), 4);
            for (const auto& f : spec->files) QVERIFY(spec->requiredFiles.contains(f.name));
        }
    }

    // The catalogue is the engine's dataset table in the downloader's types: every entry that
    // has downloads, in table order, with its files at the entry's base URL; an archive's required
    // files are what the engine's reader needs.
    void followsTheEngineTable()
    {
        QStringList expected;
        for (const engine::DatasetSpec& e : engine::datasetSpecs()) {
            if (e.downloads.files.empty()) continue;
            expected << QString::fromStdString(e.name);
            const auto spec = app::findBuiltInDataset(QString::fromStdString(e.name));
            QVERIFY(spec);
            QCOMPARE(spec->description, QString::fromStdString(e.description));
            QCOMPARE(spec->files.size(), qsizetype(e.downloads.files.size()));
            for (qsizetype i = 0; i < spec->files.size(); ++i) {
                const engine::PublishedFile& f = e.downloads.files[std::size_t(i)];
                QCOMPARE(spec->files[i].url.toString(),
                         QString::fromStdString(e.downloads.baseUrl + f.name));
                QCOMPARE(spec->files[i].md5, QByteArray::fromStdString(f.md5));
            }
            QCOMPARE(spec->archiveRoot, QString::fromStdString(e.downloads.archiveRoot));
            if (!spec->archiveRoot.isEmpty()) {
                QStringList reader;
                for (const std::string& r : e.readerFiles()) reader << QString::fromStdString(r);
                QCOMPARE(spec->requiredFiles, reader);
            }
        }
        QCOMPARE(app::builtInDatasetNames(), expected);
    }

    void validationRejects_data()
    {
        QTest::addColumn<int>("mutation");
        QTest::addColumn<QString>("expected");
        QTest::newRow("slash in name") << 0 << "plain folder name";
        QTest::newRow("hidden name") << 1 << "plain folder name";
        QTest::newRow("no files") << 2 << "no files";
        QTest::newRow("upper-case md5") << 3 << "MD5";
        QTest::newRow("relative url") << 4 << "URL";
        QTest::newRow("file name with slash") << 5 << "not a plain file name";
        QTest::newRow("duplicate file") << 6 << "listed twice";
        QTest::newRow("archive of two files") << 7 << "exactly one .tar.gz";
        QTest::newRow("climbing required file") << 8 << "plain relative path";
        QTest::newRow("no required files") << 9 << "no required files";
        QTest::newRow("climbing folder") << 10 << "the folder '..' is not a plain folder name";
    }

    void validationRejects()
    {
        QFETCH(int, mutation);
        QFETCH(QString, expected);
        app::validateDatasetSpec(validSpec()); // the base is fine
        auto spec = validSpec();
        switch (mutation) {
        case 0:
            spec.name = QStringLiteral("a/b");
            break;
        case 1:
            spec.name = QStringLiteral(".x");
            break;
        case 2:
            spec.files.clear();
            break;
        case 3:
            spec.files[0].md5 = QByteArray(32, 'A');
            break;
        case 4:
            spec.files[0].url = QUrl(QStringLiteral("a.gz"));
            break;
        case 5:
            spec.files[0].name = QStringLiteral("x/a.gz");
            break;
        case 6:
            spec.files << spec.files[0];
            break;
        case 7:
            spec.archiveRoot = QStringLiteral("root");
            spec.files << spec.files[0];
            spec.files[1].name = QStringLiteral("b.tar.gz");
            spec.files[0].name = QStringLiteral("a.tar.gz");
            break;
        case 8:
            spec.requiredFiles = {QStringLiteral("../a.gz")};
            break;
        case 9:
            spec.requiredFiles.clear();
            break;
        case 10:
            spec.folder = QStringLiteral("..");
            break;
        }
        try {
            app::validateDatasetSpec(spec);
            QFAIL("accepted a bad spec");
        } catch (const engine::InvalidArgument& e) {
            QVERIFY2(QString::fromStdString(e.what()).contains(expected), e.what());
        }
    }

    void completeness()
    {
        QTemporaryDir tmp;
        QVERIFY(tmp.isValid());
        app::DatasetSpec spec = validSpec();
        spec.requiredFiles = {QStringLiteral("a.bin"), QStringLiteral("sub/b.bin")};
        QVERIFY(!app::isDatasetComplete(spec, tmp.filePath(QStringLiteral("missing"))));
        QVERIFY(test::writeAll(tmp.filePath(QStringLiteral("a.bin")), "a"));
        QVERIFY(!app::isDatasetComplete(spec, tmp.path()));
        QVERIFY(test::writeAll(tmp.filePath(QStringLiteral("sub/b.bin")), ""));
        QVERIFY(!app::isDatasetComplete(spec, tmp.path())); // empty file
        QVERIFY(test::writeAll(tmp.filePath(QStringLiteral("sub/b.bin")), "b"));
        QVERIFY(app::isDatasetComplete(spec, tmp.path()));
        // A link to a file kept elsewhere counts.
        QVERIFY(QFile::remove(tmp.filePath(QStringLiteral("a.bin"))));
        QVERIFY(test::writeAll(tmp.filePath(QStringLiteral("elsewhere/a.bin")), "a"));
        QVERIFY(QFile::link(tmp.filePath(QStringLiteral("elsewhere/a.bin")),
                            tmp.filePath(QStringLiteral("a.bin"))));
        QVERIFY(app::isDatasetComplete(spec, tmp.path()));
    }
};

QTEST_GUILESS_MAIN(TestDatasetCatalog)
#include "tst_dataset_catalog.moc"
