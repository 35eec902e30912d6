// Finding datasets: the default search path from $TOWERS_DATA and the XDG data directory, the
// folder names, precedence along the path, folders with bad files passed over (and reported when
// nothing is found), and the real Fashion-MNIST from Debian's package when it is installed.
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <cstdlib>

#include "dataset_files.h"
#include "engine/data/dataset.h"
#include "engine/data/dataset_manifest.h"
#include "engine/data/preprocessing.h"
#include "error_message.h"

using namespace towers::engine;
using namespace towers::test;
namespace fs = std::filesystem;

namespace {

// Sets an environment variable for one scope. Through Qt's qputenv, not ::setenv: QtTest's
// watchdog thread reads the environment (QTEST_FUNCTION_TIMEOUT) as the first test function
// starts, and Qt's environment functions share a lock; a bare setenv meanwhile can move the
// environment under its getenv (a crash seen once in CI).
class ScopedEnv
{
public:
    ScopedEnv(const char* name, const char* value) : m_name(name)
    {
        m_had = qEnvironmentVariableIsSet(name);
        m_old = qgetenv(name);
        if (value)
            qputenv(name, QByteArray(value));
        else
            qunsetenv(name);
    }
    ~ScopedEnv()
    {
        if (m_had)
            qputenv(m_name, m_old);
        else
            qunsetenv(m_name);
    }

private:
    const char* m_name;
    QByteArray m_old;
    bool m_had = false;
};

std::vector<fs::path> withoutSystemFolder(std::vector<fs::path> path)
{
    std::erase(path, fs::path("/usr/share/datasets"));
    return path;
}

} // namespace

class TestDatasetDiscovery : public QObject
{
    Q_OBJECT

private slots:
    void defaultSearchPath_data()
    {
        QTest::addColumn<QString>("towersData");
        QTest::addColumn<QString>("xdg");
        QTest::addColumn<QStringList>("expected");
        QTest::newRow("both") << "/a::/b/c"
                              << "/x"
                              << QStringList{"/a", "/b/c", "/x/towers/datasets",
                                             "/usr/share/datasets"};
        QTest::newRow("no TOWERS_DATA")
            << QString() << "/x" << QStringList{"/x/towers/datasets", "/usr/share/datasets"};
        QTest::newRow("relative XDG ignored")
            << "/a"
            << "rel"
            << QStringList{"/a", "/home/u/.local/share/towers/datasets", "/usr/share/datasets"};
        QTest::newRow("no XDG") << "/a:" << QString()
                                << QStringList{"/a", "/home/u/.local/share/towers/datasets",
                                               "/usr/share/datasets"};
    }
    void defaultSearchPath()
    {
        QFETCH(QString, towersData);
        QFETCH(QString, xdg);
        QFETCH(QStringList, expected);
        const QByteArray t = towersData.toUtf8(), x = xdg.toUtf8();
        ScopedEnv e1("TOWERS_DATA", towersData.isNull() ? nullptr : t.constData());
        ScopedEnv e2("XDG_DATA_HOME", xdg.isNull() ? nullptr : x.constData());
        ScopedEnv e3("HOME", "/home/u");
        QStringList got;
        for (const fs::path& p : towers::engine::defaultSearchPath())
            got << QString::fromStdString(p.string());
        QCOMPARE(got, expected);
        QCOMPARE(QString::fromStdString(userDatasetDirectory().string()),
                 expected[expected.size() - 2]);
    }

    void findAlongThePath()
    {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        const fs::path first = root / "first", second = root / "second", xdg = root / "xdg";
        // first: a CIFAR-10 folder with a truncated file, and MNIST (which must win over XDG's).
        writeCifar10(first / "cifar10", 2, 2, 1);
        fs::resize_file(first / "cifar10" / "data_batch_2.bin", 100);
        writeIdxDataset(first / "mnist", 4, 2, 28, 28, false, 1);
        // second: a good CIFAR-10 under the archive's own folder name.
        writeCifar10(second / "cifar-10-batches-bin", 3, 2, 2);
        // the user's data directory: MNIST and Fashion-MNIST (gzip), CIFAR-100 nested as unpacked.
        const fs::path user = xdg / "towers" / "datasets";
        writeIdxDataset(user / "mnist", 6, 2, 28, 28, true, 3);
        writeIdxDataset(user / "fashion-mnist", 7, 3, 28, 28, true, 4);
        writeCifar100(user / "cifar100" / "cifar-100-binary", 5, 2, 5);

        const std::string towersData = first.string() + ":" + second.string();
        ScopedEnv e1("TOWERS_DATA", towersData.c_str());
        ScopedEnv e2("XDG_DATA_HOME", xdg.c_str());
        const std::vector<fs::path> path = withoutSystemFolder(towers::engine::defaultSearchPath());
        QCOMPARE(path.size(), std::size_t(3));

        const auto cifar10 = findDataset("cifar10", path);
        QVERIFY(cifar10);
        QCOMPARE(cifar10->location, second / "cifar-10-batches-bin"); // the bad one is passed over
        QCOMPARE(cifar10->trainCount, 15);
        const auto mnist = findDataset("mnist", path);
        QVERIFY(mnist);
        QCOMPARE(mnist->location, first / "mnist"); // $TOWERS_DATA before the XDG folder
        QCOMPARE(mnist->trainCount, 4);
        const auto cifar100 = findDataset("cifar100", path);
        QVERIFY(cifar100);
        QCOMPARE(cifar100->location, user / "cifar100" / "cifar-100-binary");
        QCOMPARE(cifar100->classNames.size(), std::size_t(100));

        // CIFAR-100's files hold its coarse labels too: found as cifar100-coarse in the same
        // folder, by its 20 classes.
        const auto coarse = findDataset("cifar100-coarse", path);
        QVERIFY(coarse);
        QCOMPARE(coarse->location, cifar100->location);
        QCOMPARE(coarse->classNames.size(), std::size_t(20));

        const std::vector<DatasetInfo> all = discoverDatasets(path);
        QCOMPARE(all.size(), std::size_t(5));
        QCOMPARE(all[2].name, std::string("cifar100-coarse"));
        QCOMPARE(all[4].name, std::string("fashion-mnist"));
        QCOMPARE(all[4].location, user / "fashion-mnist");
        QCOMPARE(all[4].trainCount, 7);
        QCOMPARE(all[4].testCount, 3);
        QCOMPARE(all[4].imageShape, Shape({28, 28, 1}));

        const Dataset loaded = loadDataset("cifar10", path);
        QCOMPARE(loaded.location, second / "cifar-10-batches-bin");
        QCOMPARE(loaded.train.count, 15);

        // Loading the bad folder directly says what is wrong with it.
        QVERIFY_THROWS_EXCEPTION(IoError, loadDataset("cifar10", first / "cifar10"));
    }

    void notFoundSaysWhereItLooked()
    {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        writeCifar10(root / "a" / "cifar10", 2, 2, 1);
        writeText(root / "a" / "cifar10" / "batches.meta.txt", "only one name\n");
        fs::create_directories(root / "b");
        try {
            loadDataset("cifar10", std::vector<fs::path>{root / "a", root / "b"});
            QFAIL("no exception");
        } catch (const IoError& e) {
            const QString m = e.what();
            QVERIFY2(m.contains("dataset \"cifar10\" not found; looked in:"), qPrintable(m));
            QVERIFY2(m.contains(QString::fromStdString(
                                    (root / "a" / "cifar10" / "batches.meta.txt").string()) +
                                ": 1 class names, expected 10"),
                     qPrintable(m));
            QVERIFY2(m.contains(
                         QString::fromStdString((root / "b").string()) +
                         ": no cifar10, cifar-10-batches-bin, cifar10/cifar-10-batches-bin folder"),
                     qPrintable(m));
        }
        QVERIFY(!findDataset("mnist", {root / "a", root / "b", root / "missing"}));
        QVERIFY(discoverDatasets({}).empty());
        // A name of no table entry may be an imported dataset's: not found, and unknown.
        QVERIFY(!findDataset("svhn", {root}));
        QVERIFY_THROWS_EXCEPTION(UnknownName, datasetSpecAlong("svhn", {root}));
        // It names the manifest an import writes (towers-dataset.json), not another file.
        const std::string unknown = messageOf([&] { datasetSpecAlong("svhn", {root}); });
        QVERIFY2(unknown.find("no folder svhn/ with a towers-dataset.json in ") !=
                     std::string::npos,
                 unknown.c_str());
        QVERIFY_THROWS_EXCEPTION(UnknownName, findDataset("Not a name/", {root}));
    }

    // Debian's dataset-fashion-mnist: the real files, checked against facts published with the
    // dataset (60,000 + 10,000 images, 6,000 / 1,000 per class, pixel mean 0.2860 and standard
    // deviation 0.3530 on the 0..1 scale).
    // A dataset imported from a folder of images: found by its folder's name along the search path
    // (after the table's), loaded with the manifest's classes and flips, refused with the
    // manifest's name when the manifest is bad or does not match the files; a name of the table's
    // is never an imported dataset.
    void importedDatasets()
    {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        const fs::path birds = root / "birds";
        writeIdxDataset(birds, 12, 4, 28, 28, false, 9);
        // writeIdxDataset's labels are of 10 classes: name 10.
        std::vector<std::string> classes;
        for (int c = 0; c < 10; ++c) classes.push_back("bird " + std::to_string(c));
        const DatasetSpec spec = importedDatasetSpec("birds", {28, 28, 1}, classes, false, "mine");
        writeText(birds / kDatasetManifest, datasetManifestJson(spec, {}));

        QCOMPARE(importedDatasetNames({root}), std::vector<std::string>{"birds"});
        QCOMPARE(datasetSpecAlong("birds", {root}).labels.names, classes);
        const auto found = discoverDatasets({root});
        QCOMPARE(found.size(), std::size_t(1));
        QCOMPARE(found[0].name, std::string("birds"));
        QCOMPARE(found[0].classNames, classes);
        const Dataset d = loadDataset("birds", std::vector<fs::path>{root});
        QCOMPARE(d.train.count, 12);
        QVERIFY(!d.mirrorSafe);
        QCOMPARE(d.imageFit, ImageFit::Crop); // the default
        // How the images were brought to size (--fit), as the manifest says; one written before
        // --fit has none, and was cropped.
        writeText(birds / kDatasetManifest,
                  datasetManifestJson(importedDatasetSpec("birds", {28, 28, 1}, classes, false,
                                                          "mine", ImageFit::Squash),
                                      {}));
        QCOMPARE(loadDataset("birds", birds).imageFit, ImageFit::Squash);
        QCOMPARE(datasetSpecAlong("birds", {root}).imageFit, ImageFit::Squash);
        std::string older = datasetManifestJson(spec, {});
        const auto fitAt = older.find("\"fit\"");
        QVERIFY(fitAt != std::string::npos);
        older.erase(fitAt, older.find('\n', fitAt) + 1 - fitAt);
        writeText(birds / kDatasetManifest, older);
        QCOMPARE(loadDataset("birds", birds).imageFit, ImageFit::Crop);
        writeText(birds / kDatasetManifest, datasetManifestJson(spec, {}));
        QCOMPARE(datasetFolderIn("birds", birds).value(), birds); // the folder itself, named so
        QCOMPARE(datasetFolderIn("birds", root).value(), birds);

        // The manifest says 32x32x3, the files are 28x28x1.
        writeText(birds / kDatasetManifest,
                  datasetManifestJson(
                      importedDatasetSpec("birds", {32, 32, 3}, classes, false, "mine"), {}));
        try {
            loadDataset("birds", birds);
            QFAIL("a manifest that does not match the files was accepted");
        } catch (const IoError& e) {
            QVERIFY2(QString(e.what()).contains("towers-dataset.json says [32, 32, 3]"), e.what());
        }
        // Not JSON, another format, a class list too short for the labels, an unknown fit.
        std::string stretched = datasetManifestJson(spec, {});
        stretched.replace(stretched.find("\"crop\""), 6, "\"stretch\"");
        for (const std::string& bad :
             {std::string("{not json"), std::string(R"({"format": "other"})"), stretched,
              datasetManifestJson(importedDatasetSpec("birds", {28, 28, 1}, {"a", "b"}, true, ""),
                                  {})}) {
            writeText(birds / kDatasetManifest, bad);
            try {
                loadDataset("birds", std::vector<fs::path>{root});
                QFAIL("a bad manifest was accepted");
            } catch (const Error& e) {
                QVERIFY2(QString(e.what()).contains("birds"), e.what());
            }
        }
        // A manifest that cannot be read is left out of the listings, not an error there.
        writeText(birds / kDatasetManifest, "{not json");
        QVERIFY(importedDatasetNames({root}).empty());
        QVERIFY(discoverDatasets({root}).empty());
        // The table's names, and names no folder can have, are refused.
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 importedDatasetSpec("mnist", {28, 28, 1}, classes, false, ""));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 importedDatasetSpec("a", {28, 28, 1}, {"x", "x"}, false, ""));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 importedDatasetSpec("a", {28, 28, 1}, {"x"}, false, ""));
    }

    // A folder the user names: the dataset's sub-folder, or its files directly in it; otherwise the
    // reason. A folder where an IDX file belongs is named as such, not "file not found".
    void namedFolder()
    {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        writeIdxDataset(root / "sub" / "fashion-mnist", 32, 8, 28, 28, true, 1);
        writeIdxDataset(root / "direct", 32, 8, 28, 28, false, 1);
        fs::create_directories(root / "empty");
        QCOMPARE(*datasetFolderIn("fashion-mnist", root / "sub"), root / "sub" / "fashion-mnist");
        QCOMPARE(*datasetFolderIn("fashion-mnist", root / "direct"), root / "direct");
        QCOMPARE(loadDatasetPreferring("fashion-mnist", root / "direct", {}).train.count,
                 std::int64_t(32));
        std::string why;
        QVERIFY(!datasetFolderIn("fashion-mnist", root / "empty", &why));
        QVERIFY2(why.find("holds no fashion-mnist") != std::string::npos &&
                     why.find("train-images-idx3-ubyte") != std::string::npos,
                 why.c_str());
        QVERIFY(!datasetFolderIn("cifar10", root / "nowhere", &why));
        QVERIFY2(why.find("does not exist") != std::string::npos, why.c_str());

        fs::remove(root / "direct" / "t10k-labels-idx1-ubyte");
        fs::create_directories(root / "direct" / "t10k-labels-idx1-ubyte");
        try {
            loadDataset("fashion-mnist", root / "direct");
            QFAIL("a folder was read as an IDX file");
        } catch (const IoError& e) {
            QVERIFY2(std::string(e.what()).find("t10k-labels-idx1-ubyte: a folder") !=
                         std::string::npos,
                     e.what());
        }
    }

    void realFashionMnist()
    {
        const fs::path folder = "/usr/share/datasets/fashion-mnist";
        if (!fs::exists(folder / "train-images-idx3-ubyte.gz"))
            QSKIP("Debian's dataset-fashion-mnist is not installed "
                  "(/usr/share/datasets/fashion-mnist)");
        const std::optional<DatasetInfo> info =
            findDataset("fashion-mnist", {"/usr/share/datasets"});
        QVERIFY(info);
        QCOMPARE(info->trainCount, 60000);
        QCOMPARE(info->testCount, 10000);
        const Dataset d = loadDataset("fashion-mnist", folder);
        QCOMPARE(d.train.count, 60000);
        QCOMPARE(d.test.count, 10000);
        QCOMPARE(d.train.imageShape(), Shape({28, 28, 1}));
        std::vector<int> trainPerClass(10), testPerClass(10);
        for (std::int32_t l : d.train.labels) ++trainPerClass[static_cast<std::size_t>(l)];
        for (std::int32_t l : d.test.labels) ++testPerClass[static_cast<std::size_t>(l)];
        for (int c = 0; c < 10; ++c) {
            QCOMPARE(trainPerClass[static_cast<std::size_t>(c)], 6000);
            QCOMPARE(testPerClass[static_cast<std::size_t>(c)], 1000);
        }
        std::vector<double> mean, stddev;
        channelStatistics(d.train, mean, stddev);
        QVERIFY2(std::abs(mean[0] - 0.2860) < 5e-4, qPrintable(QString::number(mean[0])));
        QVERIFY2(std::abs(stddev[0] - 0.3530) < 5e-4, qPrintable(QString::number(stddev[0])));
        QCOMPARE(d.classNames[0], std::string("T-shirt/top"));
    }

    // Every entry of the dataset table, in its own layout (writeDatasetFolder follows the entry,
    // not a list of datasets): found under each of its folder names, inspected and loaded with its
    // classes and image shape, and its files recognised directly in a folder a user names.
    void everyTableEntry_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<bool>("gz");
        for (const DatasetSpec& spec : datasetSpecs()) {
            QTest::newRow(spec.name.c_str()) << QString::fromStdString(spec.name) << false;
            if (spec.gzipAccepted)
                QTest::newRow((spec.name + " gzip").c_str())
                    << QString::fromStdString(spec.name) << true;
        }
    }
    void everyTableEntry()
    {
        QFETCH(QString, name);
        QFETCH(bool, gz);
        const std::string n = name.toStdString();
        const DatasetSpec& spec = datasetSpec(n);
        validateDatasetSpec(spec);
        QCOMPARE(findDatasetSpec(n), &spec);
        QCOMPARE(datasetFolderNames(n), spec.folderNames);
        QCOMPARE(datasetImageShape(n), spec.imageShape);
        const std::int64_t perFile = 3;
        const auto filesPerSplit = [&](const std::vector<std::string>& files) {
            return spec.reader == DatasetReader::Idx ? std::int64_t(1)
                                                     : static_cast<std::int64_t>(files.size());
        };
        const std::int64_t train = perFile * filesPerSplit(spec.trainFiles);
        const std::int64_t test = perFile * filesPerSplit(spec.testFiles);
        for (const std::string& sub : spec.folderNames) {
            QTemporaryDir tmp;
            const fs::path root = tmp.path().toStdString();
            writeDatasetFolder(spec, root / sub, perFile, gz, 9);
            fs::create_directories(root / "empty");
            const std::optional<DatasetInfo> info = findDataset(n, {root / "empty", root});
            QVERIFY2(info, sub.c_str());
            QCOMPARE(info->location, root / sub);
            QCOMPARE(info->trainCount, train);
            QCOMPARE(info->testCount, test);
            QCOMPARE(info->imageShape, spec.imageShape);
            QCOMPARE(int(info->classNames.size()), spec.labels.numClasses);
            const Dataset d = loadDataset(n, std::vector<fs::path>{root});
            QCOMPARE(d.name, n);
            QCOMPARE(d.train.count, train);
            QCOMPARE(d.test.count, test);
            QCOMPARE(d.train.imageShape(), spec.imageShape);
            QCOMPARE(d.classNames, info->classNames);
            for (const std::int32_t l : d.train.labels)
                QVERIFY(l >= 0 && l < spec.labels.numClasses);
            // The files directly in a folder the user names.
            QCOMPARE(*datasetFolderIn(n, root / sub), root / sub);
            QCOMPARE(loadDatasetPreferring(n, root / sub, {}).test.count, test);
            std::string why;
            QVERIFY(!datasetFolderIn(n, root / "empty", &why));
            QVERIFY2(why.find(spec.markerFiles().front()) != std::string::npos, why.c_str());
        }
        QVERIFY(std::find(knownDatasets().begin(), knownDatasets().end(), n) !=
                knownDatasets().end());
    }

    // The table's own checks: an entry that could not be found, read or downloaded is refused,
    // naming the entry and what is wrong.
    void tableValidation_data()
    {
        QTest::addColumn<QString>("base");
        QTest::addColumn<int>("mutation");
        QTest::addColumn<QString>("expected");
        QTest::newRow("climbing folder") << "mnist" << 0 << "is not a plain relative path";
        QTest::newRow("no test files") << "mnist" << 1 << "no test files";
        QTest::newRow("IDX split of three files") << "mnist" << 2 << "two files";
        QTest::newRow("too few class names") << "mnist" << 3 << "lists 3 class names";
        QTest::newRow("names and a names file") << "mnist" << 4 << "not both";
        QTest::newRow("upper-case MD5") << "mnist" << 5 << "MD5";
        QTest::newRow("a reader file not published")
            << "fashion-mnist" << 6 << "not among the published files";
        QTest::newRow("archive of two files") << "cifar10" << 7 << "exactly one .tar.gz";
        QTest::newRow("CIFAR records of another shape") << "cifar10" << 8 << "32x32x3";
        QTest::newRow("CIFAR gzip") << "cifar100" << 9 << "never gzip";
        QTest::newRow("label byte beyond the record's") << "cifar100" << 10 << "label byte 2";
        QTest::newRow("no URL scheme") << "cifar100" << 11 << "must start with http";
        QTest::newRow("IDX of 2 channels") << "fashion-mnist" << 12 << "1 or 3 channels";
    }
    void tableValidation()
    {
        QFETCH(QString, base);
        QFETCH(int, mutation);
        QFETCH(QString, expected);
        DatasetSpec spec = datasetSpec(base.toStdString());
        validateDatasetSpec(spec); // the base is fine
        switch (mutation) {
        case 0:
            spec.folderNames.push_back("mnist/../../etc");
            break;
        case 1:
            spec.testFiles.clear();
            break;
        case 2:
            spec.trainFiles.push_back("extra-idx1-ubyte");
            break;
        case 3:
            spec.labels.names.resize(3);
            break;
        case 4:
            spec.labels.namesFile = "names.txt";
            break;
        case 5:
            spec.downloads.files[0].md5 = std::string(32, 'A');
            break;
        case 6:
            spec.downloads.files.pop_back();
            break;
        case 7:
            spec.downloads.files.push_back({"more.tar.gz", std::string(32, 'a'), -1});
            break;
        case 8:
            spec.imageShape = {28, 28, 3};
            break;
        case 9:
            spec.gzipAccepted = true;
            break;
        case 10:
            spec.labels.labelByte = 2;
            break;
        case 11:
            spec.downloads.baseUrl = "www.cs.toronto.edu/~kriz/";
            break;
        case 12:
            spec.imageShape = {28, 28, 2};
            break;
        }
        try {
            validateDatasetSpec(spec);
            QFAIL("a bad entry was accepted");
        } catch (const InvalidArgument& e) {
            const QString m = QString::fromUtf8(e.what());
            QVERIFY2(m.contains(expected), e.what());
            QVERIFY2(m.contains("'" + base + "'"), e.what());
        }
    }
};

QTEST_APPLESS_MAIN(TestDatasetDiscovery)
#include "tst_dataset_discovery.moc"
