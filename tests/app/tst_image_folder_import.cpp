// A dataset from a folder of images (app/data/image_folder_import.h, towers-cli import): classes
// from the folder names, images decoded as classify decodes them, the split held out per class and
// reproducible, train/ and val/ folders, grayscale found, what is no image passed over and
// reported, the written dataset found and loaded by name, and every refusal leaves the data folder
// as it was.
// towers-cli import and datasets as a user runs them, and a run trained on what import made, are
// in tst_image_folder_import_command.cpp (image_folder_import_support.h: what the two share).
#include <QDir>
#include <QImage>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include "app/data/file_names.h"
#include "app/data/image_folder_import.h"
#include "app/inference/image_files.h"
#include "cli_process.h"
#include "engine/data/dataset.h"
#include "engine/data/dataset_manifest.h"
#include "engine/errors.h"
#include "image_folder_import_support.h"

using namespace towers;
using test::writeClass;
using towers::app::ImportOptions;

namespace {

QStringList entries(const QString& dir)
{
    return QDir(dir).entryList(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot, QDir::Name);
}

engine::Dataset load(const QString& name, const QString& dataDir)
{
    return engine::loadDataset(name.toStdString(),
                               std::vector<std::filesystem::path>{dataDir.toStdString()});
}

} // namespace

class TestImageFolderImport : public test::ImageFolderImportTest
{
    Q_OBJECT

private slots:
    // Qt's removal lists no name that is not UTF-8 (namesThatAreNotUtf8AreSaid makes some), so it
    // left the folder behind in /tmp: the C++ library removes it by its bytes.
    void cleanupTestCase()
    {
        std::error_code error;
        std::filesystem::remove_all(QFile::encodeName(m_root.path()).toStdString(), error);
        QVERIFY2(!error, error.message().c_str());
    }

    void names()
    {
        QCOMPARE(app::datasetNameFromFolder(QStringLiteral("/a/My Pets!")),
                 QStringLiteral("my-pets"));
        QCOMPARE(app::datasetNameFromFolder(QStringLiteral("/a/b/")), QStringLiteral("b"));
        QCOMPARE(app::datasetNameFromFolder(QStringLiteral("/a/mnist")),
                 QStringLiteral("mnist-images"));
        QCOMPARE(app::datasetNameFromFolder(QStringLiteral("/a/___")), QStringLiteral("images"));
        // Other letters in ASCII where they have a form; where none, left out and said so.
        QString note = QStringLiteral("stale");
        QCOMPARE(app::datasetNameFromFolder(QStringLiteral("/a/ÜBER"), &note),
                 QStringLiteral("uber"));
        QVERIFY2(note.isEmpty(), qPrintable(note));
        QCOMPARE(app::datasetNameFromFolder(QStringLiteral("/a/Café Crème")),
                 QStringLiteral("cafe-creme"));
        QCOMPARE(app::datasetNameFromFolder(QStringLiteral("/a/Straße ﬁsh")),
                 QStringLiteral("strasse-fish"));
        QCOMPARE(app::datasetNameFromFolder(QStringLiteral("/a/日本"), &note),
                 QStringLiteral("images"));
        // (The option that chooses another name is towers-cli's to add, not the dialog's.)
        QVERIFY2(note.contains(QStringLiteral("the dataset is named images")) &&
                     note.contains(QStringLiteral("'日本'")) &&
                     !note.contains(QStringLiteral("--name")),
                 qPrintable(note));
        const QString japanese = path(QStringLiteral("日本 birds"));
        writeClass(japanese + QStringLiteral("/crow"), 0, 2, false);
        writeClass(japanese + QStringLiteral("/owl"), 1, 2, false);
        const auto r = test::runCliProcess(TOWERS_CLI, {QStringLiteral("import"), japanese,
                                                        QStringLiteral("--data-dir"),
                                                        path(QStringLiteral("data-named"))});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(
            r.err.contains(QStringLiteral("towers-cli import: the dataset is named birds: ")) &&
                r.err.contains(QStringLiteral("were left out (--name chooses another)\n")),
            qPrintable(r.err));
        QCOMPARE(app::datasetNameFromFolder(QStringLiteral("/a/鳥 birds 2"), &note),
                 QStringLiteral("birds-2"));
        QVERIFY(note.contains(QStringLiteral("named birds-2")));
        QCOMPARE(app::datasetNameFromFolder(QStringLiteral("/a/My Pets!"), &note),
                 QStringLiteral("my-pets"));
        QVERIFY(note.isEmpty());
        QVERIFY(!engine::isImportedDatasetName("cifar10"));
        QVERIFY(!engine::isImportedDatasetName("Pets"));
        QVERIFY(!engine::isImportedDatasetName("-pets"));
        QVERIFY(!engine::isImportedDatasetName("a/b"));
        QVERIFY(engine::isImportedDatasetName("my-pets_2.0"));
    }

    void scan()
    {
        const auto s = app::scanImageFolder(m_pets);
        QCOMPARE(s.classes, (QStringList{QStringLiteral("cat"), QStringLiteral("dog"),
                                         QStringLiteral("fox")}));
        QCOMPARE(s.trainCounts(),
                 (std::vector<qint64>{10, 12, 8})); // the broken PNG: an image by name
        QVERIFY(!s.splitFolders);
        QVERIFY2(s.ignored.contains(QStringLiteral("cat/Thumbs.db")),
                 qPrintable(s.ignored.join(',')));
        QVERIFY(s.ignored.contains(QStringLiteral("notes.txt (in no class folder)")));
        QVERIFY(s.ignored.contains(QStringLiteral("unsorted/ (no image: no class)")));
    }

    // Names that are not UTF-8 (a folder copied from an old Latin-1 system): Qt lists no such
    // entry, so they were left out without a word; each is now listed as passed over, with its
    // bytes as \\xNN, a class folder as an image file.
    void namesThatAreNotUtf8AreSaid()
    {
        const QString src = path(QStringLiteral("latin1"));
        writeClass(src + QStringLiteral("/cat"), 0, 3, false);
        writeClass(src + QStringLiteral("/dog"), 1, 3, false);
        writeClass(src + QStringLiteral("/cafe"), 2, 2, false);
        const QByteArray root = QFile::encodeName(src);
        QCOMPARE(::rename((root + "/cat/img000.png").constData(),
                          (root + "/cat/caf\xe9.png").constData()),
                 0);
        QCOMPARE(::rename((root + "/cafe").constData(), (root + "/caf\xe9").constData()), 0);
        QCOMPARE(app::namesNotUtf8(src + QStringLiteral("/cat")),
                 QStringList{QStringLiteral("caf\\xe9.png")});
        const auto s = app::scanImageFolder(src);
        QCOMPARE(s.classes, (QStringList{QStringLiteral("cat"), QStringLiteral("dog")}));
        QCOMPARE(s.trainCounts(), (std::vector<qint64>{2, 3}));
        for (const char* left :
             {"cat/caf\\xe9.png (a name that is not UTF-8: rename it to import it)",
              "caf\\xe9 (a name that is not UTF-8: rename it to import it)"})
            QVERIFY2(s.ignored.contains(QLatin1String(left)),
                     qPrintable(left + QStringLiteral(" not in: ") + s.ignored.join(',')));
        // Beside the train/ and test/ folders of a split layout too.
        const QString split = path(QStringLiteral("latin1 split"));
        writeClass(split + QStringLiteral("/train/cat"), 0, 2, false);
        writeClass(split + QStringLiteral("/train/dog"), 1, 2, false);
        writeClass(split + QStringLiteral("/test/cat"), 0, 1, false, 5);
        writeClass(split + QStringLiteral("/test/dog"), 1, 1, false, 5);
        QVERIFY(QDir().mkpath(split + QStringLiteral("/extra")));
        QCOMPARE(::rename((QFile::encodeName(split) + "/extra").constData(),
                          (QFile::encodeName(split) + "/extr\xe4").constData()),
                 0);
        const auto t = app::scanImageFolder(split);
        QVERIFY(t.splitFolders);
        QVERIFY2(t.ignored.contains(QStringLiteral(
                     "extr\\xe4 (a name that is not UTF-8: rename it to import it)")),
                 qPrintable(t.ignored.join(',')));
        QCOMPARE(app::escapedName(QByteArray("\xc3\xa9t\xc3\xa9 \xff\xe2\x82\xac\xe2\x82")),
                 QStringLiteral("\u00e9t\u00e9 \\xff\u20ac\\xe2\\x82"));
    }

    // Class folders whose names differ only in case are refused, both named: on a
    // case-insensitive filesystem they are one folder, and eval matches classes by name as one.
    void classFoldersDifferingOnlyInCase()
    {
        const QString src = path(QStringLiteral("cased"));
        writeClass(src + QStringLiteral("/Cat"), 0, 3, false);
        writeClass(src + QStringLiteral("/cat"), 0, 3, false, 10);
        writeClass(src + QStringLiteral("/dog"), 1, 3, false);
        const QString words =
            QStringLiteral("the class folders 'Cat' and 'cat' differ only in case");
        try {
            app::scanImageFolder(src);
            QFAIL("class folders 'Cat' and 'cat' were accepted");
        } catch (const engine::InvalidArgument& e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(words), e.what());
        }
        const QString data = path(QStringLiteral("data-cased"));
        const auto r = test::runCliProcess(
            TOWERS_CLI, {QStringLiteral("import"), src, QStringLiteral("--data-dir"), data});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(words), qPrintable(r.err));
        QVERIFY(!QFileInfo::exists(data + QStringLiteral("/cased")));
        // In the test folder too: a test class 'CAT' is no class of train/.
        const QString split = path(QStringLiteral("cased split"));
        writeClass(split + QStringLiteral("/train/cat"), 0, 3, false);
        writeClass(split + QStringLiteral("/train/dog"), 1, 3, false);
        writeClass(split + QStringLiteral("/test/CAT"), 0, 1, false, 20);
        try {
            app::scanImageFolder(split);
            QFAIL("a test class folder 'CAT' for train/cat was accepted");
        } catch (const engine::InvalidArgument& e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(QStringLiteral("'CAT' is not in")),
                     e.what());
        }
    }

    // Class folders that are links into a collection count (as do links to folders inside a class
    // and to image files), each folder read once; a link back to the imported folder, or above it,
    // is left out and listed, never followed into a loop.
    void linkedClassFolders()
    {
        const QString farm = path(QStringLiteral("farm"));
        QVERIFY(QDir().mkpath(farm + QStringLiteral("/fox")));
        QVERIFY(QFile::link(m_pets + QStringLiteral("/cat"), farm + QStringLiteral("/cat")));
        QVERIFY(QFile::link(QStringLiteral("../My Pets!/dog"), farm + QStringLiteral("/dog")));
        QVERIFY(QFile::link(m_pets + QStringLiteral("/fox/img000.png"),
                            farm + QStringLiteral("/fox/linked.png")));
        QVERIFY(QFile::link(m_pets + QStringLiteral("/cat"), farm + QStringLiteral("/fox/cats")));
        QVERIFY(QFile::link(QStringLiteral(".."), farm + QStringLiteral("/fox/up")));
        QVERIFY(QFile::link(QStringLiteral("../fox"), farm + QStringLiteral("/fox/again")));
        QVERIFY(QFile::link(farm, farm + QStringLiteral("/everything")));
        QVERIFY(QFile::link(QStringLiteral("/"), farm + QStringLiteral("/root")));
        const auto s = app::scanImageFolder(farm);
        QCOMPARE(s.classes, (QStringList{QStringLiteral("cat"), QStringLiteral("dog"),
                                         QStringLiteral("fox")}));
        // fox: its link only; the cats are class cat's.
        QCOMPARE(s.trainCounts(), (std::vector<qint64>{10, 12, 1}));
        for (const char* left : {"everything/ (a link to the imported folder or above it)",
                                 "root/ (a link to the imported folder or above it)",
                                 "fox/up/ (a link to the imported folder or above it)",
                                 "fox/cats/ (a link to a folder read already: class cat)",
                                 "fox/again/ (a link to a folder read already: class fox)"})
            QVERIFY2(s.ignored.contains(QLatin1String(left)),
                     qPrintable(left + QStringLiteral(" not in: ") + s.ignored.join(',')));
    }

    // A link in one class folder to another class's folder (or to one of its images) gives that
    // class's images no second label: each image file is read once across all classes and both
    // splits, the link listed as passed over with the class that has the images.
    void anImageIsReadForOneClassOnly()
    {
        const QString src = path(QStringLiteral("linked twice"));
        writeClass(src + QStringLiteral("/a"), 0, 4, true);
        writeClass(src + QStringLiteral("/b"), 1, 4, true);
        QVERIFY(QFile::link(QStringLiteral("../b"), src + QStringLiteral("/a/more")));
        QVERIFY(QFile::link(QStringLiteral("../b/img001.bmp"), src + QStringLiteral("/a/one.bmp")));
        // In b, a link to b's own image: not read twice either.
        QVERIFY(QFile::link(QStringLiteral("img002.jpg"), src + QStringLiteral("/b/again.jpg")));
        const auto s = app::scanImageFolder(src);
        QCOMPARE(s.classes, (QStringList{QStringLiteral("a"), QStringLiteral("b")}));
        QCOMPARE(s.trainCounts(), (std::vector<qint64>{4, 4}));
        for (const char* left : {"a/more/ (a link to a folder read already: class b)",
                                 "a/one.bmp (a link to an image read already: class b)",
                                 "b/again.jpg (a link to an image read already: class b)"})
            QVERIFY2(s.ignored.contains(QLatin1String(left)),
                     qPrintable(left + QStringLiteral(" not in: ") + s.ignored.join(',')));

        // A class folder that is a link to another class's, sorting before it: the real folder
        // keeps its images and its class, the link is passed over.
        const QString first = path(QStringLiteral("link sorts first"));
        writeClass(first + QStringLiteral("/b"), 0, 4, true);
        writeClass(first + QStringLiteral("/c"), 1, 3, true);
        QVERIFY(QFile::link(QStringLiteral("b"), first + QStringLiteral("/a")));
        const auto f = app::scanImageFolder(first);
        QCOMPARE(f.classes, (QStringList{QStringLiteral("b"), QStringLiteral("c")}));
        QCOMPARE(f.trainCounts(), (std::vector<qint64>{4, 3}));
        QVERIFY2(
            f.ignored.contains(QStringLiteral("a/ (a link to a folder read already: class b)")),
            qPrintable(f.ignored.join(',')));

        const QString data = path(QStringLiteral("data linked twice"));
        ImportOptions o;
        o.source = src;
        o.dataDir = data;
        o.testFraction = 0.5;
        const auto r = app::importImageFolder(o);
        QCOMPARE(r.trainImages() + r.testImages(), qint64(8));

        // With train/ and test/: a test class folder that links into train/ (or a test image
        // that links to a training one) never puts a training image into the test set.
        const QString split = path(QStringLiteral("split linked"));
        writeClass(split + QStringLiteral("/train/a"), 0, 3, true);
        writeClass(split + QStringLiteral("/train/b"), 1, 3, true);
        writeClass(split + QStringLiteral("/test/b"), 1, 2, true, 10);
        QVERIFY(QFile::link(QStringLiteral("../train/a"), split + QStringLiteral("/test/a")));
        QVERIFY(QFile::link(QStringLiteral("../../train/b/img000.png"),
                            split + QStringLiteral("/test/b/copy.png")));
        const auto t = app::scanImageFolder(split);
        QVERIFY(t.splitFolders);
        QCOMPARE(t.trainCounts(), (std::vector<qint64>{3, 3}));
        QCOMPARE(t.testFiles[0].size(), 0);
        QCOMPARE(t.testFiles[1].size(), 2);
        for (const char* left :
             {"test/a/ (a link to a folder read already: class a of train/)",
              "test/b/copy.png (a link to an image read already: class b of train/)"})
            QVERIFY2(t.ignored.contains(QLatin1String(left)),
                     qPrintable(left + QStringLiteral(" not in: ") + t.ignored.join(',')));
    }

    // A second name of an image (a hard link) in another class is that image again, passed over
    // as a link to it is; a FIFO, a broken link and a loop of links are named, never left out
    // unsaid (a FIFO or broken link with an image's name among the images that cannot be read,
    // the others among those passed over).
    void unusualEntriesAreNamed()
    {
        const QString src = path(QStringLiteral("unusual"));
        writeClass(src + QStringLiteral("/a"), 0, 3, true);
        writeClass(src + QStringLiteral("/b"), 1, 3, true);
        QVERIFY(::link(QFile::encodeName(src + QStringLiteral("/a/img001.bmp")).constData(),
                       QFile::encodeName(src + QStringLiteral("/b/hard.bmp")).constData()) == 0);
        QVERIFY(::mkfifo(QFile::encodeName(src + QStringLiteral("/a/fifo.png")).constData(),
                         0600) == 0);
        QVERIFY(::mkfifo(QFile::encodeName(src + QStringLiteral("/a/fifo")).constData(), 0600) ==
                0);
        QVERIFY(QFile::link(QStringLiteral("/nonexistent/x.png"),
                            src + QStringLiteral("/b/dangling.png")));
        QVERIFY(QFile::link(QStringLiteral("loop2"), src + QStringLiteral("/b/loop1")));
        QVERIFY(QFile::link(QStringLiteral("loop1"), src + QStringLiteral("/b/loop2")));
        const auto s = app::scanImageFolder(src);
        for (const char* left : {"b/hard.bmp (another name of an image read already: class a)",
                                 "a/fifo", "b/loop1", "b/loop2"})
            QVERIFY2(s.ignored.contains(QLatin1String(left)),
                     qPrintable(left + QStringLiteral(" not in: ") + s.ignored.join(',')));
        ImportOptions o;
        o.source = src;
        o.dataDir = path(QStringLiteral("data unusual"));
        o.testFraction = 0.34;
        const auto r = app::importImageFolder(o);
        QCOMPARE(r.trainImages() + r.testImages(), qint64(6));
        const QString unreadable = r.skipped.join('\n');
        QVERIFY2(unreadable.contains(QStringLiteral("fifo.png")) &&
                     unreadable.contains(QStringLiteral("FIFO")) &&
                     unreadable.contains(QStringLiteral("dangling.png")),
                 qPrintable(unreadable));
    }

    // An image that cannot be read is reported with its whole path and the reason apart, however
    // odd its name: a newline in it is shown as \n in quotes, and JSON has the exact path.
    void anUnreadableFileIsNamedWhole()
    {
        const QString src = path(QStringLiteral("odd names"));
        writeClass(src + QStringLiteral("/a"), 0, 3, true);
        writeClass(src + QStringLiteral("/b"), 1, 3, true);
        const QString bad = src + QStringLiteral("/a/bad\nname.png");
        QFile f(bad);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("not an image");
        f.close();
        QCOMPARE(app::quotedPath(QStringLiteral("a b/c.png")), QStringLiteral("a b/c.png"));
        QCOMPARE(app::quotedPath(QStringLiteral("a\nb\t\"\\c")),
                 QStringLiteral("\"a\\nb\\t\\\"\\\\c\""));

        ImportOptions o;
        o.source = src;
        o.dataDir = path(QStringLiteral("data odd"));
        o.testFraction = 0.3;
        const auto r = app::importImageFolder(o);
        QCOMPARE(r.unreadable.size(), std::size_t(1));
        QCOMPARE(r.unreadable[0].path, bad);
        QVERIFY2(r.unreadable[0].reason.startsWith(QStringLiteral("cannot read the image")),
                 qPrintable(r.unreadable[0].reason));
        QCOMPARE(r.skipped,
                 QStringList{app::quotedPath(bad) + QStringLiteral(": ") + r.unreadable[0].reason});
        QVERIFY(r.skipped[0].contains(QStringLiteral("/a/bad\\nname.png\": cannot read")));

        const auto text = test::runCliProcess(
            TOWERS_CLI, {QStringLiteral("import"), src, QStringLiteral("--data-dir"),
                         path(QStringLiteral("data odd cli")), QStringLiteral("--test-fraction"),
                         QStringLiteral("0.3")});
        QVERIFY2(text.exitCode == 0, qPrintable(text.err));
        QVERIFY2(text.err.contains(QStringLiteral("passed over \"") + src +
                                   QStringLiteral("/a/bad\\nname.png\": cannot read the image")),
                 qPrintable(text.err));
        const auto json = test::runCliProcess(
            TOWERS_CLI,
            {QStringLiteral("import"), src, QStringLiteral("--data-dir"),
             path(QStringLiteral("data odd cli")), QStringLiteral("--test-fraction"),
             QStringLiteral("0.3"), QStringLiteral("--force"), QStringLiteral("--json")});
        QVERIFY2(json.exitCode == 0, qPrintable(json.err));
        const QJsonObject out = QJsonDocument::fromJson(json.out.toUtf8()).object();
        const QJsonArray unreadable = out.value(QStringLiteral("unreadable")).toArray();
        QCOMPARE(unreadable.size(), 1);
        QCOMPARE(unreadable[0].toObject().value(QStringLiteral("path")).toString(), bad);
        QVERIFY(unreadable[0]
                    .toObject()
                    .value(QStringLiteral("reason"))
                    .toString()
                    .startsWith(QStringLiteral("cannot read the image")));
        const QJsonArray skipped = out.value(QStringLiteral("skipped")).toArray();
        QCOMPARE(skipped.size(), 1);
        QVERIFY(skipped[0].toString().startsWith(bad + QStringLiteral(": cannot read the image")));
    }

    // The whole import, then the dataset as training reads it: every image is the file decoded as
    // classify decodes it, each class's share held out, the same split for the same seed.
    void importsAndLoads()
    {
        const QString data = path(QStringLiteral("data"));
        ImportOptions o;
        o.source = m_pets;
        o.dataDir = data;
        o.testFraction = 0.25;
        std::vector<std::pair<qint64, qint64>> reports;
        const auto r = app::importImageFolder(o, [&](qint64 d, qint64 t) {
            reports.push_back({d, t});
        });
        QCOMPARE(r.folder, data + QStringLiteral("/my-pets"));
        QCOMPARE(QString::fromStdString(r.spec.name), QStringLiteral("my-pets"));
        QCOMPARE(r.spec.imageShape, (engine::Shape{32, 32, 3})); // colour: 32x32 by default
        // 10, 12 and 7 readable images; 25 % of the 10, 12 and 8 files held out (rounded).
        QCOMPARE(r.test[0], 3);
        QCOMPARE(r.test[1], 3);
        QCOMPARE(r.train[0] + r.test[0], 10);
        QCOMPARE(r.train[1] + r.test[1], 12);
        QCOMPARE(r.train[2] + r.test[2], 7);
        QCOMPARE(r.skipped.size(), 1);
        QVERIFY2(r.skipped.front().contains(QStringLiteral("broken.png")),
                 qPrintable(r.skipped.front()));
        QVERIFY(!reports.empty());
        QCOMPARE(reports.back(), (std::pair<qint64, qint64>{30, 30}));
        QCOMPARE(entries(data), QStringList{QStringLiteral("my-pets")}); // no temporary folder left

        const engine::Dataset d = load(QStringLiteral("my-pets"), data);
        QCOMPARE(d.classNames, (std::vector<std::string>{"cat", "dog", "fox"}));
        QCOMPARE(d.train.count, r.train[0] + r.train[1] + r.train[2]);
        QCOMPARE(d.test.count, 29 - d.train.count);
        QCOMPARE(d.train.imageShape(), (engine::Shape{32, 32, 3}));
        QVERIFY(d.mirrorSafe);
        // The first training image is cat/img000.png or another cat: find it among the cat files.
        engine::ImageSet expected;
        expected.height = expected.width = 32;
        expected.channels = 3;
        bool found = false;
        for (const QString& f : QDir(m_pets + QStringLiteral("/cat"))
                                    .entryList({QStringLiteral("img*")}, QDir::Files, QDir::Name)) {
            engine::ImageSet one = expected;
            app::appendImage(app::readImageFile(m_pets + QStringLiteral("/cat/") + f, {32, 32, 3}),
                             {32, 32, 3}, one);
            found = found || std::equal(one.pixels.begin(), one.pixels.end(), d.train.image(0));
        }
        QVERIFY2(found, "the first training image is none of the cat files as classify reads them");
        QCOMPARE(d.train.labels.front(), 0);
        // Each example's file, in the order of the records: that file, decoded as classify
        // decodes it, is the example, in its class's folder.
        const auto files = app::readImportedFiles(r.folder);
        QVERIFY(files);
        QCOMPARE(files->train.size(), d.train.count);
        QCOMPARE(files->test.size(), d.test.count);
        for (const auto& [list, set] :
             {std::pair{&files->train, &d.train}, std::pair{&files->test, &d.test}})
            for (qsizetype i = 0; i < list->size(); ++i) {
                const QString& file = (*list)[i];
                QVERIFY2(
                    file.startsWith(m_pets + QLatin1Char('/') +
                                    QString::fromStdString(
                                        d.classNames[std::size_t(set->labels[std::size_t(i)])]) +
                                    QLatin1Char('/')),
                    qPrintable(file));
                engine::ImageSet one = expected;
                app::appendImage(app::readImageFile(file, {32, 32, 3}), {32, 32, 3}, one);
                QVERIFY2(std::equal(one.pixels.begin(), one.pixels.end(), set->image(i)),
                         qPrintable(file + QStringLiteral(" is not its example")));
            }
        QVERIFY(!app::readImportedFiles(data)); // no dataset there: no lists

        // Listed by discovery with its shape and classes; the manifest says where it came from.
        const auto all = engine::discoverDatasets({data.toStdString()});
        QVERIFY(std::any_of(all.begin(), all.end(),
                            [](const engine::DatasetInfo& i) { return i.name == "my-pets"; }));
        engine::ManifestExtras extras;
        QVERIFY(engine::readDatasetManifest(r.folder.toStdString(), &extras));
        QCOMPARE(QString::fromStdString(extras.source), QDir::toNativeSeparators(m_pets));
        QCOMPARE(extras.trainCount, d.train.count);

        // The same seed holds out the same images; another seed others. A killed import's
        // temporary folder (unchanged for two hours, held by nobody) goes then; one that another
        // import holds stays, and so does a young one (another machine's import, whose lock is
        // not seen here).
        const QString killed = data + QStringLiteral("/.my-pets.import-Kx91Qa");
        const QString busy = data + QStringLiteral("/.my-pets.import-Bz22Pq");
        const QString young = data + QStringLiteral("/.my-pets.import-Yy33Rr");
        QVERIFY(QDir().mkpath(killed) && QDir().mkpath(busy) && QDir().mkpath(young));
        const timespec old[2] = {{std::time(nullptr) - 7200, 0}, {std::time(nullptr) - 7200, 0}};
        for (const QString& f : {killed, busy})
            QVERIFY(::utimensat(AT_FDCWD, QFile::encodeName(f).constData(), old, 0) == 0);
        const int held = ::open(QFile::encodeName(busy).constData(), O_RDONLY | O_DIRECTORY);
        QVERIFY(held >= 0 && ::flock(held, LOCK_EX) == 0);
        o.overwrite = true;
        app::importImageFolder(o);
        ::close(held);
        QVERIFY(!QFileInfo::exists(killed));
        QVERIFY(QFileInfo::exists(busy));
        QVERIFY(QFileInfo::exists(young));
        QCOMPARE(load(QStringLiteral("my-pets"), data).test.pixels, d.test.pixels);
        o.seed = 7;
        app::importImageFolder(o);
        QVERIFY(load(QStringLiteral("my-pets"), data).test.pixels != d.test.pixels);
        // The replaced one is removed: nothing of it stays beside (swapped or moved aside).
        QVERIFY2(QDir(data)
                     .entryList({QStringLiteral(".my-pets.old-*")},
                                QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot)
                     .isEmpty(),
                 qPrintable(QDir(data).entryList(QDir::AllEntries | QDir::Hidden).join(' ')));

        // A dataset name that is a link to a folder elsewhere (a dataset kept on another disk):
        // the link is replaced, what it points at is not touched.
        ImportOptions there = o;
        there.dataDir = path(QStringLiteral("elsewhere"));
        there.name = QStringLiteral("pets-copy");
        const QString elsewhere = app::importImageFolder(there).folder;
        {
            QFile keep(elsewhere + QStringLiteral("/keep.txt"));
            QVERIFY(keep.open(QIODevice::WriteOnly) && keep.write("mine") == 4);
        }
        QVERIFY(QFile::link(elsewhere, data + QStringLiteral("/linked-pets")));
        o.name = QStringLiteral("linked-pets");
        app::importImageFolder(o);
        const QFileInfo replaced(data + QStringLiteral("/linked-pets"));
        QVERIFY(replaced.isDir() && !replaced.isSymLink());
        QVERIFY(QFileInfo::exists(elsewhere + QStringLiteral("/keep.txt")));
        QCOMPARE(load(QStringLiteral("linked-pets"), data).test.pixels,
                 load(QStringLiteral("my-pets"), data).test.pixels);

        // What the user put into an imported dataset's folder is never deleted by replacing it:
        // the import is refused, naming it, and nothing changes.
        const QString mine = data + QStringLiteral("/my-pets");
        QVERIFY(QDir().mkpath(mine + QStringLiteral("/extra")));
        {
            QFile notes(mine + QStringLiteral("/NOTES.txt"));
            QVERIFY(notes.open(QIODevice::WriteOnly) && notes.write("mine") == 4);
        }
        o.name = QStringLiteral("my-pets");
        try {
            app::importImageFolder(o);
            QFAIL("a dataset folder with the user's files in it was replaced");
        } catch (const engine::InvalidArgument& e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(
                         QStringLiteral("holds what an import does not write (NOTES.txt, extra/), "
                                        "which replacing it would delete")),
                     e.what());
        }
        QVERIFY(QFileInfo::exists(mine + QStringLiteral("/NOTES.txt")));
        QVERIFY(QFileInfo(mine + QStringLiteral("/extra")).isDir());
        QVERIFY(QFile::remove(mine + QStringLiteral("/NOTES.txt")) &&
                QDir(mine).rmdir(QStringLiteral("extra")));
        app::importImageFolder(o); // with them moved out, it is replaced
        // Put there while the import decodes (a long one): checked again before the swap.
        const QString late = mine + QStringLiteral("/late.txt");
        try {
            app::importImageFolder(o, [&](qint64, qint64) {
                QFile f(late);
                if (!f.exists()) QVERIFY(f.open(QIODevice::WriteOnly) && f.write("x") == 1);
            });
            QFAIL("a file put into the dataset's folder during the import was deleted");
        } catch (const engine::InvalidArgument& e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(QStringLiteral("(late.txt)")), e.what());
        }
        QVERIFY(QFile::remove(late));
    }

    // train/ and val/ folders give the split; gray images make a 28x28x1 dataset; --no-flip.
    void splitFoldersAndGray()
    {
        const QString src = path(QStringLiteral("digits"));
        writeClass(src + QStringLiteral("/train/one"), 0, 6, true);
        writeClass(src + QStringLiteral("/train/two"), 1, 5, true);
        writeClass(src + QStringLiteral("/val/two"), 1, 2, true, 100);
        ImportOptions o;
        o.source = src;
        o.dataDir = path(QStringLiteral("data2"));
        o.mirrorSafe = false;
        const auto r = app::importImageFolder(o);
        QCOMPARE(r.spec.imageShape, (engine::Shape{28, 28, 1}));
        QCOMPARE(r.train, (std::vector<qint64>{6, 5}));
        QCOMPARE(r.test, (std::vector<qint64>{0, 2}));
        const engine::Dataset d = load(QStringLiteral("digits"), o.dataDir);
        QCOMPARE(d.test.count, 2);
        QCOMPARE(d.test.labels, (std::vector<std::int32_t>{1, 1}));
        QVERIFY(!d.mirrorSafe);
        // Asked for colour, gray images stay three channels.
        o.channels = 3;
        o.size = 24;
        o.name = QStringLiteral("digits-rgb");
        QCOMPARE(app::importImageFolder(o).spec.imageShape, (engine::Shape{24, 24, 3}));
        // A class in val/ that train/ lacks.
        writeClass(src + QStringLiteral("/val/three"), 2, 1, true);
        QVERIFY_THROWS_EXCEPTION(engine::InvalidArgument, app::scanImageFolder(src));
    }

    // More than 256 classes: the labels are written as 32-bit integers (IDX type 0x0C) and read
    // back, each image under its own class (classes sort by name; each holds one image of its
    // own grey level in train/ and one in test/).
    void moreThan256Classes()
    {
        const QString src = path(QStringLiteral("many"));
        const int classes = 300;
        for (int c = 0; c < classes; ++c)
            for (const char* split : {"train", "test"}) {
                const QString dir = src + QStringLiteral("/%1/c%2")
                                              .arg(QLatin1String(split))
                                              .arg(c, 3, 10, QLatin1Char('0'));
                QVERIFY(QDir().mkpath(dir));
                QImage img(8, 8, QImage::Format_Grayscale8);
                img.fill(c % 251);
                QVERIFY(img.save(dir + QStringLiteral("/i.png")));
            }
        ImportOptions o;
        o.source = src;
        o.dataDir = path(QStringLiteral("data-many"));
        o.size = 8;
        const auto r = app::importImageFolder(o);
        QCOMPARE(r.spec.labels.names.size(), std::size_t(classes));
        QFile labels(o.dataDir + QStringLiteral("/many/train-labels-idx1-ubyte"));
        QVERIFY(labels.open(QIODevice::ReadOnly));
        QCOMPARE(labels.read(4), QByteArray("\x00\x00\x0C\x01", 4));
        QCOMPARE(labels.size(), 8 + 4 * classes);
        const engine::Dataset d = load(QStringLiteral("many"), o.dataDir);
        QCOMPARE(int(d.classNames.size()), classes);
        QCOMPARE(d.train.count, classes);
        QCOMPARE(d.test.count, classes);
        for (const engine::ImageSet* set : {&d.train, &d.test})
            for (int i = 0; i < classes; ++i) {
                const int c = set->labels[std::size_t(i)];
                QCOMPARE(QString::fromStdString(d.classNames[std::size_t(c)]),
                         QStringLiteral("c%1").arg(c, 3, 10, QLatin1Char('0')));
                QCOMPARE(int(set->pixels[std::size_t(i) * 64]), c % 251);
            }
    }

    // Images already of the dataset's size come through bit for bit, in file-name order per class:
    // 28x28 grayscale PNGs (found gray, so decoded again at 28x28, never scaled twice) and 32x32
    // colour ones.
    void sameSizeImagesAreKeptExactly()
    {
        for (const bool colour : {false, true}) {
            const int side = colour ? 32 : 28;
            const QString src =
                path(colour ? QStringLiteral("exact-rgb") : QStringLiteral("exact"));
            std::vector<std::vector<std::uint8_t>> written[2];
            for (int c = 0; c < 2; ++c)
                for (int i = 0; i < 4; ++i) {
                    QImage img(side, side,
                               colour ? QImage::Format_RGB888 : QImage::Format_Grayscale8);
                    std::vector<std::uint8_t> bytes;
                    for (int y = 0; y < side; ++y) {
                        auto* line = img.scanLine(y);
                        for (int x = 0; x < side * (colour ? 3 : 1); ++x) {
                            line[x] = std::uint8_t((x * 31 + y * 17 + i * 101 + c * 53) % 256);
                            bytes.push_back(line[x]);
                        }
                    }
                    const QString dir = src + (c ? QStringLiteral("/b") : QStringLiteral("/a"));
                    QDir().mkpath(dir);
                    QVERIFY(img.save(dir + QStringLiteral("/%1.png").arg(i)));
                    written[c].push_back(std::move(bytes));
                }
            ImportOptions o;
            o.source = src;
            o.dataDir = path(QStringLiteral("exact-data"));
            o.testFraction = 0.25;
            const auto r = app::importImageFolder(o);
            QCOMPARE(r.spec.imageShape, (engine::Shape{side, side, colour ? 3 : 1}));
            const engine::Dataset d = load(QString::fromStdString(r.spec.name), o.dataDir);
            for (const engine::ImageSet* set : {&d.train, &d.test})
                for (std::int64_t k = 0; k < set->count; ++k) {
                    const auto& candidates = written[set->labels[std::size_t(k)]];
                    const bool same =
                        std::any_of(candidates.begin(), candidates.end(), [&](const auto& w) {
                            return std::equal(w.begin(), w.end(), set->image(k));
                        });
                    QVERIFY2(same, "an image changed on its way in");
                }
            QCOMPARE(d.train.count + d.test.count, 8);
        }
    }

    // Every refusal says what, and leaves the data folder as it was.
    void refusals()
    {
        const QString data = path(QStringLiteral("data3"));
        ImportOptions o;
        o.source = m_pets;
        o.dataDir = data;
        app::importImageFolder(o);
        const QByteArray manifest = [&] {
            QFile f(data + QStringLiteral("/my-pets/towers-dataset.json"));
            return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
        }();
        auto refused = [&](ImportOptions bad, const QString& words) {
            try {
                app::importImageFolder(bad);
                QFAIL(qPrintable(QStringLiteral("accepted: ") + words));
            } catch (const engine::Error& e) {
                QVERIFY2(QString::fromUtf8(e.what()).contains(words), e.what());
            }
            QCOMPARE(entries(data),
                     (QStringList{QStringLiteral("my-pets"), QStringLiteral("user-folder")}));
            QFile f(data + QStringLiteral("/my-pets/towers-dataset.json"));
            QVERIFY(f.open(QIODevice::ReadOnly));
            QCOMPARE(f.readAll(), manifest);
        };
        QVERIFY(QDir().mkpath(data + QStringLiteral("/user-folder/keep")));
        refused(o, QStringLiteral("exists in"));
        ImportOptions b = o;
        b.name = QStringLiteral("user-folder");
        b.overwrite = true;
        refused(b, QStringLiteral("is no dataset made by an import"));
        b = o;
        b.name = QStringLiteral("cifar10");
        refused(b, QStringLiteral("a dataset Towers knows"));
        b = o;
        b.name = QStringLiteral("new");
        b.size = 4;
        refused(b, QStringLiteral("from 8 to 256"));
        b.size = 0;
        b.testFraction = 1;
        refused(b, QStringLiteral("test fraction"));
        b.testFraction = 0;
        refused(b, QStringLiteral("no image is left for the test set (a test fraction of 0 holds "
                                  "none out: give one above 0, or a test/ folder)"));
        b.testFraction = 0.1;
        b.source = m_pets + QStringLiteral("/cat");
        refused(b, QStringLiteral("0 class folders with images"));
        b.source = path(QStringLiteral("nowhere"));
        refused(b, QStringLiteral("no such folder"));
        // A class folder with a line break in its name: named, the break shown.
        b.source = path(QStringLiteral("broken-names"));
        writeClass(b.source + QStringLiteral("/plain"), 0, 2, false);
        writeClass(b.source + QStringLiteral("/two\nlines"), 1, 2, false);
        refused(b, QStringLiteral("the class folder 'two\\nlines' has a line break in its name"));
        b.source = m_pets;
        std::atomic<bool> cancel{true};
        try {
            app::importImageFolder(b, {}, &cancel);
            QFAIL("a cancelled import went on");
        } catch (const engine::Error& e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(QStringLiteral("cancelled")), e.what());
        }
        QVERIFY(!QFileInfo::exists(data + QStringLiteral("/new")));
        QCOMPARE(entries(data).size(), 2);
    }
};

QTEST_GUILESS_MAIN(TestImageFolderImport)
#include "tst_image_folder_import.moc"
