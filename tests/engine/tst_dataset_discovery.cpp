// Finding datasets: the default search path from $TOWERS_DATA and the XDG data directory, the
// folder names, precedence along the path, folders with bad files passed over (and reported when
// nothing is found), and the real Fashion-MNIST from Debian's package when it is installed.
#include <QTemporaryDir>
#include <QtTest>

#include <cstdlib>

#include "dataset_files.h"
#include "engine/data/dataset.h"
#include "engine/data/preprocessing.h"

using namespace towers::engine;
using namespace towers::test;
namespace fs = std::filesystem;

namespace {

// Sets an environment variable for one scope.
class ScopedEnv
{
public:
    ScopedEnv(const char* name, const char* value) : m_name(name)
    {
        if (const char* old = std::getenv(name)) m_old = old;
        m_had = std::getenv(name) != nullptr;
        if (value)
            ::setenv(name, value, 1);
        else
            ::unsetenv(name);
    }
    ~ScopedEnv()
    {
        if (m_had)
            ::setenv(m_name, m_old.c_str(), 1);
        else
            ::unsetenv(m_name);
    }

private:
    const char* m_name;
    std::string m_old;
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

        const std::vector<DatasetInfo> all = discoverDatasets(path);
        QCOMPARE(all.size(), std::size_t(4));
        QCOMPARE(all[3].name, std::string("fashion-mnist"));
        QCOMPARE(all[3].location, user / "fashion-mnist");
        QCOMPARE(all[3].trainCount, 7);
        QCOMPARE(all[3].testCount, 3);
        QCOMPARE(all[3].imageShape, Shape({28, 28, 1}));

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
        QVERIFY_THROWS_EXCEPTION(UnknownName, findDataset("svhn", {root}));
    }

    // Debian's dataset-fashion-mnist: the real files, checked against facts published with the
    // dataset (60,000 + 10,000 images, 6,000 / 1,000 per class, pixel mean 0.2860 and standard
    // deviation 0.3530 on the 0..1 scale).
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
};

QTEST_APPLESS_MAIN(TestDatasetDiscovery)
#include "tst_dataset_discovery.moc"
