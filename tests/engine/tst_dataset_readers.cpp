// The dataset readers: good files of every format (checked pixel by pixel against the formula
// that wrote them, so the CHW-to-HWC conversion and the IDX layout are verified independently),
// and every kind of corruption, each with its message checked for the file and the offset.
#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>

#include <functional>

#include "dataset_files.h"
#include "engine/data/dataset.h"

using namespace towers::engine;
using namespace towers::test;
namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t kSeed = 42;

// Runs `f`, which must throw IoError; returns its message (empty and a failure otherwise).
template <class F> QString ioErrorOf(F&& f)
{
    try {
        f();
    } catch (const IoError& e) {
        return QString::fromStdString(e.what());
    } catch (const std::exception& e) {
        return QStringLiteral("unexpected exception type: ") + e.what();
    }
    return QStringLiteral("no exception");
}

bool sameImage(const ImageSet& set, std::int64_t i, std::int64_t index, std::uint64_t seed)
{
    const std::uint8_t* img = set.image(i);
    for (int y = 0; y < set.height; ++y)
        for (int x = 0; x < set.width; ++x)
            for (int c = 0; c < set.channels; ++c)
                if (img[(y * set.width + x) * set.channels + c] != pixelValue(seed, index, y, x, c))
                    return false;
    return true;
}

struct Corruption
{
    const char* name;
    const char* dataset; // written good, then corrupted
    bool gz;             // IDX datasets: the .gz forms
    const char* file;    // the file the message must name
    std::function<void(const fs::path& folder)> corrupt;
    std::vector<std::string> expected; // substrings of the message
};

void editFile(const fs::path& path, const std::function<void(Bytes&)>& edit)
{
    Bytes b = readFile(path);
    edit(b);
    writeFile(path, b);
}

const std::vector<Corruption>& corruptions()
{
    // IDX sets: 5 training and 3 test images of 28x28 (3,936 and 2,368 bytes with the header);
    // CIFAR-10: 5 files of 3 records and 2 test records; CIFAR-100: 4 and 2 records.
    static const std::vector<Corruption> cases = {
        {"idx truncated",
         "mnist",
         false,
         "train-images-idx3-ubyte",
         [](const fs::path& f) {
             editFile(f / "train-images-idx3-ubyte", [](Bytes& b) { b.resize(1000); });
         },
         {": truncated: header says 5 images of 28x28 (3936 bytes), file has 1000 bytes"}},
        {"idx gzip content truncated",
         "mnist",
         true,
         "train-images-idx3-ubyte.gz",
         [](const fs::path& f) {
             Bytes b = idxImages(5, 28, 28, kSeed);
             b.resize(1000);
             writeFile(f / "train-images-idx3-ubyte.gz", gzip(b));
         },
         {": truncated: header says 5 images of 28x28 (3936 bytes), file has 1000 bytes"}},
        {"idx truncated gzip stream",
         "mnist",
         true,
         "train-labels-idx1-ubyte.gz",
         [](const fs::path& f) {
             editFile(f / "train-labels-idx1-ubyte.gz", [](Bytes& b) { b.resize(b.size() - 9); });
         },
         {": truncated gzip stream: the compressed data ends at byte"}},
        {"idx garbage gzip",
         "mnist",
         true,
         "t10k-images-idx3-ubyte.gz",
         [](const fs::path& f) {
             Bytes b = {0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0, 3};
             for (int i = 0; i < 300; ++i) b.push_back(static_cast<std::uint8_t>(i * 37 + 11));
             writeFile(f / "t10k-images-idx3-ubyte.gz", b);
         },
         {": not a valid gzip stream: ", "(at compressed byte offset "}},
        {"idx gzip checksum",
         "mnist",
         true,
         "t10k-labels-idx1-ubyte.gz",
         [](const fs::path& f) {
             editFile(f / "t10k-labels-idx1-ubyte.gz", [](Bytes& b) { b[b.size() - 6] ^= 0x40; });
         },
         {": not a valid gzip stream: incorrect data check"}},
        {"idx gzip longer than header",
         "mnist",
         true,
         "train-labels-idx1-ubyte.gz",
         [](const fs::path& f) {
             Bytes b = idxLabels(labelsFor(5, 10, kSeed));
             b.insert(b.end(), 7, 1);
             writeFile(f / "train-labels-idx1-ubyte.gz", gzip(b));
         },
         {": 7 unexpected bytes after the content (expected 5 labels (13 bytes), the file inflates "
          "to 20 bytes)"}},
        {"idx wrong magic (labels as images)",
         "mnist",
         false,
         "train-images-idx3-ubyte",
         [](const fs::path& f) {
             fs::copy_file(f / "train-labels-idx1-ubyte", f / "train-images-idx3-ubyte",
                           fs::copy_options::overwrite_existing);
         },
         {": wrong magic number 0x00000801 at byte offset 0: expected 0x00000803", "labels file"}},
        {"idx not idx at all",
         "mnist",
         false,
         "t10k-labels-idx1-ubyte",
         [](const fs::path& f) {
             writeText(f / "t10k-labels-idx1-ubyte", "<html>not found</html>");
         },
         {": wrong magic number 0x3C68746D at byte offset 0", "not an IDX file"}},
        {"idx wrong dimensions",
         "mnist",
         false,
         "train-images-idx3-ubyte",
         [](const fs::path& f) {
             editFile(f / "train-images-idx3-ubyte", [](Bytes& b) { putBe32(b, 8, 0); });
         },
         {": the header (byte offset 8) says images are 0x28"}},
        {"idx huge header",
         "mnist",
         true,
         "train-images-idx3-ubyte.gz",
         [](const fs::path& f) {
             Bytes b = idxImages(1, 28, 28, kSeed);
             putBe32(b, 4, 0xFFFFFFFFu);
             putBe32(b, 8, 4096);
             putBe32(b, 12, 4096);
             writeFile(f / "train-images-idx3-ubyte.gz", gzip(b));
         },
         {"images of 4096x4096", "more than the 4 GiB"}},
        {"idx trailing bytes",
         "mnist",
         false,
         "train-images-idx3-ubyte",
         [](const fs::path& f) {
             editFile(f / "train-images-idx3-ubyte", [](Bytes& b) { b.insert(b.end(), 5, 0); });
         },
         {": 5 unexpected bytes at byte offset 3936 after the data"}},
        {"idx count mismatch",
         "mnist",
         false,
         "train-labels-idx1-ubyte",
         [](const fs::path& f) {
             writeFile(f / "train-labels-idx1-ubyte", idxLabels(labelsFor(4, 10, kSeed)));
         },
         {"train-labels-idx1-ubyte: 4 labels, but ", "train-images-idx3-ubyte holds 5 images"}},
        {"idx label out of range",
         "mnist",
         false,
         "t10k-labels-idx1-ubyte",
         [](const fs::path& f) {
             editFile(f / "t10k-labels-idx1-ubyte", [](Bytes& b) { b[8 + 2] = 10; });
         },
         {": item 2 (byte offset 10): label 10 is out of range 0..9"}},
        {"idx label out of range (gzip)",
         "fashion-mnist",
         true,
         "train-labels-idx1-ubyte.gz",
         [](const fs::path& f) {
             std::vector<int> l = labelsFor(5, 10, kSeed);
             l[4] = 200;
             writeFile(f / "train-labels-idx1-ubyte.gz", gzip(idxLabels(l)));
         },
         {": item 4 (inflated byte offset 12): label 200 is out of range 0..9"}},
        {"idx empty file",
         "mnist",
         false,
         "train-images-idx3-ubyte",
         [](const fs::path& f) { writeFile(f / "train-images-idx3-ubyte", {}); },
         {": the file is empty (expected IDX images)"}},
        {"idx empty gzip file",
         "mnist",
         true,
         "train-images-idx3-ubyte.gz",
         [](const fs::path& f) {
             writeFile(f / "train-images-idx3-ubyte.gz", {0x1f, 0x8b});
         },
         {": truncated gzip stream"}},
        {"idx gzip of nothing",
         "mnist",
         true,
         "t10k-images-idx3-ubyte.gz",
         [](const fs::path& f) { writeFile(f / "t10k-images-idx3-ubyte.gz", gzip({})); },
         {": the gzip stream inflates to nothing (expected IDX images)"}},
        {"idx missing file",
         "mnist",
         false,
         "t10k-images-idx3-ubyte",
         [](const fs::path& f) { fs::remove(f / "t10k-images-idx3-ubyte"); },
         {"t10k-images-idx3-ubyte: file not found (nor t10k-images-idx3-ubyte.gz)"}},
        {"idx test images of another size",
         "mnist",
         false,
         "t10k-images-idx3-ubyte",
         [](const fs::path& f) {
             writeFile(f / "t10k-images-idx3-ubyte", idxImages(3, 27, 28, kSeed));
         },
         {": test images are [27, 28, 1] but the training images are [28, 28, 1]"}},
        {"cifar10 truncated",
         "cifar10",
         false,
         "data_batch_2.bin",
         [](const fs::path& f) {
             editFile(f / "data_batch_2.bin", [](Bytes& b) { b.resize(b.size() - 100); });
         },
         {": record 2 (byte offset 6146): truncated: the file's 9119 bytes are not a whole number "
          "of "
          "3073-byte CIFAR-10 records"}},
        {"cifar10 label out of range",
         "cifar10",
         false,
         "data_batch_3.bin",
         [](const fs::path& f) {
             editFile(f / "data_batch_3.bin", [](Bytes& b) { b[3073] = 11; });
         },
         {": record 1 (byte offset 3073): label 11 is out of range 0..9"}},
        {"cifar10 empty file",
         "cifar10",
         false,
         "test_batch.bin",
         [](const fs::path& f) { writeFile(f / "test_batch.bin", {}); },
         {": the file is empty (expected 3073-byte CIFAR-10 records)"}},
        {"cifar10 missing file",
         "cifar10",
         false,
         "data_batch_5.bin",
         [](const fs::path& f) { fs::remove(f / "data_batch_5.bin"); },
         {": file not found"}},
        {"cifar10 class names",
         "cifar10",
         false,
         "batches.meta.txt",
         [](const fs::path& f) {
             writeText(f / "batches.meta.txt", "a\nb\nc\nd\ne\nf\ng\nh\ni\n");
         },
         {": 9 class names, expected 10 (one per line)"}},
        {"cifar100 fine label out of range",
         "cifar100",
         false,
         "train.bin",
         [](const fs::path& f) {
             editFile(f / "train.bin", [](Bytes& b) { b[3074 * 3 + 1] = 100; });
         },
         {": record 3 (byte offset 9222): fine label 100 is out of range 0..99"}},
        {"cifar100 coarse label out of range",
         "cifar100",
         false,
         "test.bin",
         [](const fs::path& f) { editFile(f / "test.bin", [](Bytes& b) { b[3074] = 20; }); },
         {": record 1 (byte offset 3074): coarse label 20 is out of range 0..19"}},
        {"cifar100 truncated",
         "cifar100",
         false,
         "test.bin",
         [](const fs::path& f) { editFile(f / "test.bin", [](Bytes& b) { b.pop_back(); }); },
         {": record 1 (byte offset 3074): truncated", "the last record has 3073 bytes"}},
    };
    return cases;
}

void writeGood(const std::string& dataset, bool gz, const fs::path& folder)
{
    if (dataset == "cifar10")
        writeCifar10(folder, 3, 2, kSeed);
    else if (dataset == "cifar100")
        writeCifar100(folder, 4, 2, kSeed);
    else
        writeIdxDataset(folder, 5, 3, 28, 28, gz, kSeed);
}

} // namespace

class TestDatasetReaders : public QObject
{
    Q_OBJECT

private slots:
    void idxImages_data()
    {
        QTest::addColumn<bool>("gz");
        QTest::newRow("plain") << false;
        QTest::newRow("gzip") << true;
    }
    void idxImages()
    {
        QFETCH(bool, gz);
        const Bytes plain = towers::test::idxImages(7, 5, 6, kSeed);
        const ImageSet set = parseIdxImages(gz ? gzip(plain) : plain, "images");
        QCOMPARE(set.count, 7);
        QCOMPARE(set.height, 5);
        QCOMPARE(set.width, 6);
        QCOMPARE(set.channels, 1);
        QCOMPARE(set.pixels.size(), std::size_t(7 * 5 * 6));
        QVERIFY(set.labels.empty());
        for (int i = 0; i < 7; ++i) QVERIFY(sameImage(set, i, i, kSeed));
    }

    // 4-dimensional IDX (count, rows, columns, channels; what towers-cli import writes for
    // colour): the pixels as they are, channels last; a header of other than 1 or 3 channels, or
    // one cut before its fifth size, is refused; the same from gzip (a reader that took 20 bytes
    // of a 3-dimensional gzip header as its header would shift every pixel: idxImages above).
    void idxColourImages_data() { idxImages_data(); }
    void idxColourImages()
    {
        QFETCH(bool, gz);
        Bytes plain(20);
        putBe32(plain, 0, 0x00000804);
        putBe32(plain, 4, 2);
        putBe32(plain, 8, 3);
        putBe32(plain, 12, 4);
        putBe32(plain, 16, 3);
        for (int i = 0; i < 2 * 3 * 4 * 3; ++i) plain.push_back(std::uint8_t(i * 7 + 1));
        const ImageSet set = parseIdxImages(gz ? gzip(plain) : plain, "colour");
        QCOMPARE(set.count, 2);
        QCOMPARE(set.imageShape(), (Shape{3, 4, 3}));
        QCOMPARE(set.pixels, Bytes(plain.begin() + 20, plain.end()));
        Bytes two = plain;
        putBe32(two, 16, 2);
        try {
            parseIdxImages(gz ? gzip(two) : two, "two");
            QFAIL("2 channels accepted");
        } catch (const IoError& e) {
            QVERIFY2(QString(e.what()).contains("says images have 2 channels: expected 1 or 3"),
                     e.what());
        }
        const Bytes cut(plain.begin(), plain.begin() + 18);
        QVERIFY_THROWS_EXCEPTION(IoError, parseIdxImages(gz ? gzip(cut) : cut, "cut"));
        Bytes more = plain;
        more.push_back(0);
        QVERIFY_THROWS_EXCEPTION(IoError, parseIdxImages(gz ? gzip(more) : more, "more"));
    }

    void idxLabels_data() { idxImages_data(); }
    void idxLabels()
    {
        QFETCH(bool, gz);
        const std::vector<int> want = labelsFor(50, 10, kSeed);
        const Bytes plain = towers::test::idxLabels(want);
        const std::vector<std::int32_t> got =
            parseIdxLabels(gz ? gzip(plain) : plain, 10, "labels");
        QCOMPARE(got.size(), want.size());
        for (std::size_t i = 0; i < want.size(); ++i) QCOMPARE(got[i], want[i]);
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, parseIdxLabels(plain, 0, "labels"));
    }

    // Labels as big-endian 32-bit integers (IDX type 0x0C: an import of more than 256 classes):
    // read plain and gzip'ed; a label beyond the classes named with its item and offset (one
    // of 2^32 - 1 too: never negative); IDX types other than bytes and 32-bit integers refused.
    void idxWideLabels_data() { idxImages_data(); }
    void idxWideLabels()
    {
        QFETCH(bool, gz);
        const std::vector<int> want = labelsFor(700, 1000, kSeed);
        QVERIFY(*std::max_element(want.begin(), want.end()) > 255);
        const Bytes plain = towers::test::idxLabels(want, true);
        const std::vector<std::int32_t> got =
            parseIdxLabels(gz ? gzip(plain) : plain, 1000, "labels");
        QCOMPARE(got.size(), want.size());
        for (std::size_t i = 0; i < want.size(); ++i) QCOMPARE(got[i], want[i]);
        for (const std::uint32_t bad : {1000u, 0xFFFFFFFFu}) {
            Bytes b = plain;
            for (int k = 0; k < 4; ++k) b[8 + 4 * 3 + k] = std::uint8_t(bad >> (24 - 8 * k));
            try {
                parseIdxLabels(gz ? gzip(b) : b, 1000, "labels");
                QFAIL("a label beyond the classes was taken");
            } catch (const IoError& e) {
                QVERIFY2(
                    QString(e.what()).contains(QStringLiteral("item 3 (") +
                                               (gz ? "inflated " : "") + "byte offset 20): label " +
                                               QString::number(bad) + " is out of range 0..999"),
                    e.what());
            }
        }
        Bytes shorts = plain;
        shorts[2] = 0x0B;
        try {
            parseIdxLabels(gz ? gzip(shorts) : shorts, 1000, "labels");
            QFAIL("16-bit labels were taken");
        } catch (const IoError& e) {
            QVERIFY2(
                QString(e.what()).contains("not unsigned bytes (0x08) or 32-bit integers (0x0C)"),
                e.what());
        }
        const Bytes cut(plain.begin(), plain.end() - 2);
        QVERIFY_THROWS_EXCEPTION(IoError, parseIdxLabels(gz ? gzip(cut) : cut, 1000, "cut"));
    }

    void cifarRecords_data()
    {
        QTest::addColumn<int>("labelBytes");
        QTest::addColumn<bool>("fine");
        QTest::newRow("cifar10") << 1 << false;
        QTest::newRow("cifar100 fine") << 2 << true;
        QTest::newRow("cifar100 coarse") << 2 << false;
    }
    void cifarRecords()
    {
        QFETCH(int, labelBytes);
        QFETCH(bool, fine);
        const Bytes b = towers::test::cifarRecords(0, 4, labelBytes, kSeed);
        const int classes = labelBytes == 1 ? 10 : (fine ? 100 : 20);
        const ImageSet set = parseCifarRecords(b.data(), b.size(), labelBytes, fine, classes, "x");
        QCOMPARE(set.count, 4);
        QCOMPARE(set.imageShape(), Shape({32, 32, 3}));
        for (int i = 0; i < 4; ++i) {
            QVERIFY(sameImage(set, i, i, kSeed));
            const int want = labelBytes == 1
                                 ? labelValue(kSeed, i, 10)
                                 : (fine ? cifar100Fine(kSeed, i) : cifar100Fine(kSeed, i) / 5);
            QCOMPARE(set.labels[static_cast<std::size_t>(i)], want);
        }
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 parseCifarRecords(b.data(), b.size(), 3, false, 10, "x"));
    }

    void loadCifar10()
    {
        QTemporaryDir tmp;
        const fs::path folder = fs::path(tmp.path().toStdString()) / "cifar-10-batches-bin";
        writeCifar10(folder, 3, 4, kSeed);
        const Dataset d = loadDataset("cifar10", folder);
        QCOMPARE(d.name, std::string("cifar10"));
        QCOMPARE(d.location, folder);
        QCOMPARE(d.classNames.size(), std::size_t(10));
        QCOMPARE(d.classNames.front(), std::string("airplane"));
        QCOMPARE(d.classNames.back(), std::string("truck"));
        QCOMPARE(d.train.count, 15);
        QCOMPARE(d.test.count, 4);
        QCOMPARE(d.train.pixels.size(), std::size_t(15 * 3072));
        for (int i = 0; i < 15; ++i) { // data_batch_1 .. _5 in order
            QVERIFY(sameImage(d.train, i, i, kSeed));
            QCOMPARE(d.train.labels[static_cast<std::size_t>(i)], labelValue(kSeed, i, 10));
        }
        for (int j = 0; j < 4; ++j) QVERIFY(sameImage(d.test, j, kTestIndexBase + j, kSeed));

        const DatasetInfo info = inspectDataset("cifar10", folder);
        QCOMPARE(info.trainCount, 15);
        QCOMPARE(info.testCount, 4);
        QCOMPARE(info.imageShape, Shape({32, 32, 3}));
        QCOMPARE(info.classNames, d.classNames);
    }

    void loadCifar100()
    {
        QTemporaryDir tmp;
        const fs::path folder = fs::path(tmp.path().toStdString()) / "cifar100";
        writeCifar100(folder, 6, 3, kSeed);
        const Dataset fine = loadDataset("cifar100", folder);
        QCOMPARE(fine.classNames.size(), std::size_t(100));
        QCOMPARE(fine.classNames[42], std::string("fine_42"));
        QCOMPARE(fine.train.count, 6);
        QCOMPARE(fine.test.count, 3);
        const Dataset coarse = loadDataset("cifar100-coarse", folder); // the same files
        QCOMPARE(coarse.classNames.size(), std::size_t(20));
        QCOMPARE(coarse.classNames[19], std::string("coarse_19")); // "\r\n" lines
        for (int i = 0; i < 6; ++i) {
            QCOMPARE(fine.train.labels[static_cast<std::size_t>(i)], cifar100Fine(kSeed, i));
            QCOMPARE(coarse.train.labels[static_cast<std::size_t>(i)], cifar100Fine(kSeed, i) / 5);
            QVERIFY(sameImage(coarse.train, i, i, kSeed));
        }
        QCOMPARE(inspectDataset("cifar100", folder).trainCount, 6);
        QCOMPARE(inspectDataset("cifar100-coarse", folder).classNames, coarse.classNames);
        // Found by the same folder names.
        QCOMPARE(findDataset("cifar100-coarse", {folder.parent_path()})->location,
                 findDataset("cifar100", {folder.parent_path()})->location);
    }

    void loadIdx_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<bool>("gz");
        QTest::newRow("mnist plain") << "mnist" << false;
        QTest::newRow("mnist gzip") << "mnist" << true;
        QTest::newRow("fashion-mnist gzip") << "fashion-mnist" << true;
    }
    void loadIdx()
    {
        QFETCH(QString, name);
        QFETCH(bool, gz);
        QTemporaryDir tmp;
        const fs::path folder = fs::path(tmp.path().toStdString()) / name.toStdString();
        writeIdxDataset(folder, 9, 4, 28, 28, gz, kSeed);
        const Dataset d = loadDataset(name.toStdString(), folder);
        QCOMPARE(d.train.count, 9);
        QCOMPARE(d.test.count, 4);
        QCOMPARE(d.train.imageShape(), Shape({28, 28, 1}));
        for (int i = 0; i < 9; ++i) {
            QVERIFY(sameImage(d.train, i, i, kSeed));
            QCOMPARE(d.train.labels[static_cast<std::size_t>(i)], labelValue(kSeed, i, 10));
        }
        for (int j = 0; j < 4; ++j) {
            QVERIFY(sameImage(d.test, j, kTestIndexBase + j, kSeed));
            QCOMPARE(d.test.labels[static_cast<std::size_t>(j)],
                     labelValue(kSeed, kTestIndexBase + j, 10));
        }
        QCOMPARE(d.classNames.size(), std::size_t(10));
        QCOMPARE(d.classNames[0], name == "mnist" ? std::string("0") : std::string("T-shirt/top"));
        QCOMPARE(d.classNames[9], name == "mnist" ? std::string("9") : std::string("Ankle boot"));
        const DatasetInfo info = inspectDataset(name.toStdString(), folder);
        QCOMPARE(info.trainCount, 9);
        QCOMPARE(info.testCount, 4);
        QCOMPARE(info.imageShape, Shape({28, 28, 1}));
    }

    void corruption_data()
    {
        QTest::addColumn<int>("index");
        for (std::size_t i = 0; i < corruptions().size(); ++i)
            QTest::newRow(corruptions()[i].name) << static_cast<int>(i);
    }
    void corruption()
    {
        QFETCH(int, index);
        const Corruption& c = corruptions()[static_cast<std::size_t>(index)];
        QTemporaryDir tmp;
        const fs::path folder = fs::path(tmp.path().toStdString()) / c.dataset;
        writeGood(c.dataset, c.gz, folder);
        loadDataset(c.dataset, folder); // good before the corruption
        c.corrupt(folder);
        const QString message = ioErrorOf([&] { loadDataset(c.dataset, folder); });
        const QString file = QString::fromStdString((folder / c.file).string());
        QVERIFY2(message.contains(file),
                 qPrintable("the message does not name " + file + ": " + message));
        for (const std::string& e : c.expected)
            QVERIFY2(message.contains(QString::fromStdString(e)),
                     qPrintable("expected \"" + QString::fromStdString(e) + "\" in: " + message));
        // Header-only inspection also rejects it, unless the fault is in data it does not read.
        const QString inspected = ioErrorOf([&] { inspectDataset(c.dataset, folder); });
        const bool dataOnly = QString(c.name).contains("label out of range") ||
                              QString(c.name).contains("gzip stream") ||
                              QString(c.name).contains("checksum") ||
                              QString(c.name).contains("content truncated") ||
                              QString(c.name).contains("garbage gzip") ||
                              QString(c.name).contains("longer than header");
        if (!dataOnly) QVERIFY2(inspected.contains(file), qPrintable("inspect: " + inspected));
    }

    void classNamesFile()
    {
        QTemporaryDir tmp;
        const fs::path folder = fs::path(tmp.path().toStdString()) / "cifar10";
        writeCifar10(folder, 1, 1, kSeed);
        writeText(folder / "batches.meta.txt",
                  " airplane \r\n\n automobile\r\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\ntruck");
        QCOMPARE(loadDataset("cifar10", folder).classNames[1], std::string("automobile"));
        writeText(folder / "batches.meta.txt", "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\n");
        const QString m = ioErrorOf([&] { loadDataset("cifar10", folder); });
        QVERIFY2(m.contains("more than the 10 class names expected") && m.contains("line 11"),
                 qPrintable(m));
    }

    void unknownDataset()
    {
        QVERIFY_THROWS_EXCEPTION(UnknownName, requireKnownDataset("imagenet"));
        try {
            loadDataset("cifar-10", fs::path("/nonexistent"));
            QFAIL("no exception");
        } catch (const UnknownName& e) {
            QVERIFY(QString(e.what()).contains(
                "cifar10, cifar100, cifar100-coarse, mnist, fashion-mnist"));
        }
        QCOMPARE(knownDatasets().size(), std::size_t(5));
    }
};

QTEST_APPLESS_MAIN(TestDatasetReaders)
#include "tst_dataset_readers.moc"
