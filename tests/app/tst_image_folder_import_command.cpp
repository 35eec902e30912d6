// towers-cli import and datasets as a user runs them on a folder of images (the importer itself is
// tst_image_folder_import's; image_folder_import_support.h makes the folder), then a run trained
// on what import made: eval on its test set, on another imported dataset (classes matched by
// name) and naming its mistakes' files, classify and export; a checkpoint whose configuration
// or dataset is no longer read as it was written.
#include <QDir>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include "app/cli/command.h"
#include "app/data/image_folder_import.h"
#include "app/inference/image_files.h"
#include "cli_process.h"
#include "engine/train/checkpoint.h"
#include "engine/train/classifier.h"
#include "image_folder_import_support.h"

using namespace towers;
using test::writeClass;

class TestImageFolderImportCommand : public test::ImageFolderImportTest
{
    Q_OBJECT

    // The run on pets (imported into data4/ with 30 % of each class held out for testing: what
    // command() checks) that the eval tests read: 4 steps of cifar10-tutorial, trained by the
    // first test that needs it whatever the order the tests run in (one alone, by name); "" with
    // why logged where it cannot be made.
    QString petsRun()
    {
        const QString data = path(QStringLiteral("data4")), run = path(QStringLiteral("run"));
        if (QFileInfo::exists(run + QStringLiteral("/config.json"))) return run;
        if (!QFileInfo::exists(data + QStringLiteral("/pets"))) {
            const auto r = test::runCliProcess(
                TOWERS_CLI, {QStringLiteral("import"), m_pets, QStringLiteral("--data-dir"), data,
                             QStringLiteral("--name"), QStringLiteral("pets"),
                             QStringLiteral("--test-fraction"), QStringLiteral("0.3")});
            if (r.exitCode != 0) {
                qWarning("import of pets failed: %s", qPrintable(r.err));
                return {};
            }
        }
        const auto train = test::runCliProcess(
            TOWERS_CLI,
            {QStringLiteral("train"), QStringLiteral("--dataset"), QStringLiteral("pets"),
             QStringLiteral("--data-dir"), data, QStringLiteral("--steps"), QStringLiteral("4"),
             QStringLiteral("--batch-size"), QStringLiteral("4"), QStringLiteral("--run-dir"), run,
             QStringLiteral("--model"), QStringLiteral("cifar10-tutorial")});
        if (train.exitCode != 0) {
            qWarning("training on pets failed: %s", qPrintable(train.err + train.out));
            return {};
        }
        return run;
    }

    // Two of pets' classes, named "Cat" and "fox!", imported into data4/ as "two" (once): the
    // folder, or "" with why logged.
    QString twoPets()
    {
        const QString two = path(QStringLiteral("two pets"));
        if (QFileInfo::exists(path(QStringLiteral("data4/two")))) return two;
        writeClass(two + QStringLiteral("/Cat"), 0, 10, false);
        writeClass(two + QStringLiteral("/fox!"), 2, 7, false);
        const auto r = test::runCliProcess(
            TOWERS_CLI,
            {QStringLiteral("import"), two, QStringLiteral("--data-dir"),
             path(QStringLiteral("data4")), QStringLiteral("--name"), QStringLiteral("two")});
        if (r.exitCode != 0) {
            qWarning("import of two failed: %s", qPrintable(r.err));
            return {};
        }
        return two;
    }

    // The newest checkpoint of the run on pets (petsRun), into `c`; false when there is none.
    bool newestRunCheckpoint(engine::Checkpoint& c)
    {
        if (petsRun().isEmpty()) return false;
        const QDir checkpoints(path(QStringLiteral("run/checkpoints")));
        const QStringList all =
            checkpoints.entryList({QStringLiteral("ckpt-*.safetensors")}, QDir::Files, QDir::Name);
        if (all.isEmpty()) return false;
        c = engine::readCheckpoint(checkpoints.filePath(all.last()).toStdString());
        return true;
    }

private slots:
    // One dataset shown from --data-dir is the copy train would load: a damaged copy there is
    // reported (exit 1, naming the file), never passed over for the system's.
    void aDamagedCopyInTheDataFolderIsReported()
    {
        const QString system = QStringLiteral("/usr/share/datasets/fashion-mnist");
        if (!QFileInfo::exists(system + QStringLiteral("/train-images-idx3-ubyte.gz")))
            QSKIP("Debian's dataset-fashion-mnist is not installed here");
        QTemporaryDir data;
        QVERIFY(QDir(data.path()).mkpath(QStringLiteral("fashion-mnist")));
        for (const char* f : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                              "t10k-labels-idx1-ubyte.gz"}) // the test images left out
            QVERIFY(
                QFile::link(system + QLatin1Char('/') + QLatin1String(f),
                            data.filePath(QStringLiteral("fashion-mnist/")) + QLatin1String(f)));
        const auto shown = test::runCliProcess(
            TOWERS_CLI, {QStringLiteral("datasets"), QStringLiteral("fashion-mnist"),
                         QStringLiteral("--data-dir"), data.path()});
        QCOMPARE(shown.exitCode, 1);
        QVERIFY2(shown.err.contains(data.filePath(QStringLiteral("fashion-mnist/t10k-images"))),
                 qPrintable(shown.err));
    }

    // A class with less than half the largest's training images: datasets NAME counts them and
    // proposes balanced sampling.
    void aLongTailIsSaid()
    {
        const QString src = path(QStringLiteral("tail"));
        writeClass(src + QStringLiteral("/many"), 0, 24, true);
        writeClass(src + QStringLiteral("/more"), 1, 20, true);
        writeClass(src + QStringLiteral("/few"), 2, 5, true);
        const QString data = path(QStringLiteral("tail-data"));
        const auto imported = test::runCliProcess(
            TOWERS_CLI, {QStringLiteral("import"), src, QStringLiteral("--data-dir"), data,
                         QStringLiteral("--name"), QStringLiteral("tail")});
        QVERIFY2(imported.exitCode == 0, qPrintable(imported.err));
        // The command import proposes samples the classes equally, saying why.
        QVERIFY2(imported.out.contains(QStringLiteral("--sampling balanced   (fashion-fast, the "
                                                      "model for 28x28x1 images; 1 class has less "
                                                      "than half the largest's images)\n")),
                 qPrintable(imported.out));
        const auto detail =
            test::runCliProcess(TOWERS_CLI, {QStringLiteral("datasets"), QStringLiteral("tail"),
                                             QStringLiteral("--data-dir"), data});
        QVERIFY2(detail.exitCode == 0, qPrintable(detail.err));
        QVERIFY2(detail.out.contains(QStringLiteral("\n1 class has less than half the largest's "
                                                    "training images: train with --sampling "
                                                    "balanced to see every class equally "
                                                    "often\n")),
                 qPrintable(detail.out));
    }

    // towers-cli import as a user runs it, then train on what it made.
    // Class names in any script line up in import's and datasets' tables: a Chinese character
    // takes two columns, a combining accent none, "é" one (its two bytes were counted).
    void tablesLineUpWhateverTheScript()
    {
        const QString src = path(QStringLiteral("scripts"));
        const QStringList names{QStringLiteral("猫咪"), QStringLiteral("cafe\u0301"),
                                QStringLiteral("été"), QStringLiteral("dog")};
        for (int c = 0; c < names.size(); ++c)
            writeClass(src + QLatin1Char('/') + names[c], c, 3, false);
        const QString data = path(QStringLiteral("scripts-data"));
        const auto imported = test::runCliProcess(
            TOWERS_CLI, {QStringLiteral("import"), src, QStringLiteral("--data-dir"), data,
                         QStringLiteral("--name"), QStringLiteral("scripts")});
        QVERIFY2(imported.exitCode == 0, qPrintable(imported.err));
        const auto detail =
            test::runCliProcess(TOWERS_CLI, {QStringLiteral("datasets"), QStringLiteral("scripts"),
                                             QStringLiteral("--data-dir"), data});
        QVERIFY2(detail.exitCode == 0, qPrintable(detail.err));
        // Each class's row: the figures start at the header's column, counted as a terminal does.
        const auto figuresColumn = [](const QString& line) {
            const qsizetype digit = line.indexOf(QRegularExpression(QStringLiteral("\\d")));
            return digit < 0 ? -1 : app::textColumns(line.left(digit));
        };
        for (const QString& out : {imported.out, detail.out}) {
            const QStringList lines = out.split(QLatin1Char('\n'));
            const auto header = std::find_if(lines.begin(), lines.end(), [](const QString& l) {
                return l.startsWith(QStringLiteral("  class "));
            });
            QVERIFY2(header != lines.end(), qPrintable(out));
            const int column =
                app::textColumns(header->left(header->indexOf(QStringLiteral("train")) + 5)) -
                1; // "train"'s last letter
            int rows = 0;
            for (const QString& name : names) {
                const auto row = std::find_if(lines.begin(), lines.end(), [&](const QString& l) {
                    return l.startsWith(QStringLiteral("  ") + name + QLatin1Char(' '));
                });
                QVERIFY2(row != lines.end(), qPrintable(name + QStringLiteral(" not in:\n") + out));
                // The train figure (a one-digit count here) ends under "train"'s last letter.
                QVERIFY2(figuresColumn(*row) == column, qPrintable(out));
                ++rows;
            }
            QCOMPARE(rows, int(names.size()));
        }
        QCOMPARE(app::textColumns(QStringLiteral("猫咪")), 4);
        QCOMPARE(app::textColumns(QStringLiteral("cafe\u0301")), 4);
        QCOMPARE(app::padColumns(QStringLiteral("猫"), 5), QStringLiteral("猫   "));
    }

    void command()
    {
        const QString data = path(QStringLiteral("data4"));
        const auto r = test::runCliProcess(
            TOWERS_CLI, {QStringLiteral("import"), m_pets, QStringLiteral("--data-dir"), data,
                         QStringLiteral("--name"), QStringLiteral("pets"),
                         QStringLiteral("--test-fraction"), QStringLiteral("0.3")});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains(QStringLiteral("dataset pets in ")), qPrintable(r.out));
        QVERIFY2(r.out.contains(QStringLiteral("32x32x3 (HxWxC), 3 classes")), qPrintable(r.out));
        QVERIFY2(r.out.contains(QStringLiteral("train it: towers-cli train --dataset pets")),
                 qPrintable(r.out));
        QVERIFY2(r.err.contains(QStringLiteral("passed over")) &&
                     r.err.contains(QStringLiteral("broken.png")),
                 qPrintable(r.err));
        QVERIFY2(r.err.contains(QStringLiteral("Thumbs.db")), qPrintable(r.err));

        const auto again = test::runCliProcess(
            TOWERS_CLI, {QStringLiteral("import"), m_pets, QStringLiteral("--data-dir"), data,
                         QStringLiteral("--name"), QStringLiteral("pets")});
        QCOMPARE(again.exitCode, 1);
        QVERIFY2(again.err.contains(QStringLiteral("--force")), qPrintable(again.err));
        const auto usage =
            test::runCliProcess(TOWERS_CLI, {QStringLiteral("import"), m_pets,
                                             QStringLiteral("--channels"), QStringLiteral("2")});
        QCOMPARE(usage.exitCode, 2);
        const auto badName =
            test::runCliProcess(TOWERS_CLI, {QStringLiteral("import"), m_pets,
                                             QStringLiteral("--name"), QStringLiteral("Pets")});
        QCOMPARE(badName.exitCode, 2);

        const auto listed = test::runCliProcess(
            TOWERS_CLI, {QStringLiteral("datasets"), QStringLiteral("--data-dir"), data});
        QVERIFY2(listed.out.contains(QStringLiteral("pets ")), qPrintable(listed.out));
        QVERIFY2(listed.out.contains(QStringLiteral("(imported from ") +
                                     QDir::toNativeSeparators(m_pets)),
                 qPrintable(listed.out));
        // In detail: each class's images in both splits (cat 10, dog 12 with its puppies, fox 7
        // readable), and how unequal they are.
        const auto detail = test::runCliProcess(
            TOWERS_CLI, {QStringLiteral("datasets"), QStringLiteral("pets"),
                         QStringLiteral("--data-dir"), data, QStringLiteral("--json")});
        QVERIFY2(detail.exitCode == 0, qPrintable(detail.err));
        const QJsonArray classes = QJsonDocument::fromJson(detail.out.toUtf8())
                                       .object()
                                       .value(QStringLiteral("classes"))
                                       .toArray();
        QCOMPARE(classes.size(), 3);
        const int expected[] = {10, 12, 7};
        for (int c = 0; c < 3; ++c) {
            const QJsonObject o = classes.at(c).toObject();
            QCOMPARE(o.value(QStringLiteral("train")).toInt() +
                         o.value(QStringLiteral("test")).toInt(),
                     expected[c]);
            QVERIFY(o.value(QStringLiteral("test")).toInt() >= 1);
        }
        QCOMPARE(classes.at(1).toObject().value(QStringLiteral("class")).toString(),
                 QStringLiteral("dog"));
        const auto text =
            test::runCliProcess(TOWERS_CLI, {QStringLiteral("datasets"), QStringLiteral("pets"),
                                             QStringLiteral("--data-dir"), data});
        QVERIFY2(text.out.contains(QRegularExpression(QStringLiteral("\\n  dog +\\d+ +\\d+\\n"))) &&
                     text.out.contains(QStringLiteral("the largest class has ")),
                 qPrintable(text.out));
        // No class has less than half the largest's images: no remedy to propose.
        QVERIFY2(!text.out.contains(QStringLiteral("--sampling balanced")), qPrintable(text.out));
        QCOMPARE(test::runCliProcess(TOWERS_CLI, {QStringLiteral("datasets"), QStringLiteral("a"),
                                                  QStringLiteral("b")})
                     .exitCode,
                 2);
        const auto unnamed = test::runCliProcess(
            TOWERS_CLI, {QStringLiteral("import"), m_pets, QStringLiteral("--name"), QString()});
        QCOMPARE(unnamed.exitCode, 2);
        QVERIFY2(unnamed.err.contains(QStringLiteral("--name must not be empty")),
                 qPrintable(unnamed.err));

        QVERIFY2(!petsRun().isEmpty(), "the run on pets could not be trained (above)");
        const auto eval = test::runCliProcess(
            TOWERS_CLI, {QStringLiteral("eval"), QStringLiteral("--checkpoint"),
                         path(QStringLiteral("run")), QStringLiteral("--data-dir"), data});
        QVERIFY2(eval.exitCode == 0, qPrintable(eval.err + eval.out));
        QVERIFY2(eval.out.contains(QStringLiteral("on pets")), qPrintable(eval.out));

        // eval --dataset: the checkpoint on another imported dataset, its classes matched by
        // name (case and punctuation aside). The same cat and fox images give the same rows of
        // the confusion matrix as on pets itself (--set all: every image of both splits).
        const auto evalJson = [&](const QStringList& extra) {
            const auto e = test::runCliProcess(
                TOWERS_CLI, QStringList{QStringLiteral("eval"), QStringLiteral("--checkpoint"),
                                        path(QStringLiteral("run")), QStringLiteral("--data-dir"),
                                        data, QStringLiteral("--set"), QStringLiteral("all"),
                                        QStringLiteral("--json")} +
                                extra);
            return std::make_pair(e, QJsonDocument::fromJson(e.out.toUtf8()).object());
        };
        const QString two = twoPets();
        QVERIFY(!two.isEmpty());
        const auto [onPets, pets] = evalJson({});
        const auto [onTwo, twoPets] =
            evalJson({QStringLiteral("--dataset"), QStringLiteral("two")});
        QVERIFY2(onPets.exitCode == 0 && onTwo.exitCode == 0, qPrintable(onPets.err + onTwo.err));
        QCOMPARE(pets.value(QStringLiteral("examples")).toInt(), 29);
        QCOMPARE(twoPets.value(QStringLiteral("examples")).toInt(), 17);
        QCOMPARE(twoPets.value(QStringLiteral("dataset")).toString(), QStringLiteral("two"));
        QCOMPARE(twoPets.value(QStringLiteral("checkpoint_dataset")).toString(),
                 QStringLiteral("pets"));
        QCOMPARE(twoPets.value(QStringLiteral("classes")), pets.value(QStringLiteral("classes")));
        QCOMPARE(twoPets.value(QStringLiteral("per_class_examples")).toArray(),
                 (QJsonArray{10, 0, 7}));
        const QJsonArray petsRows = pets.value(QStringLiteral("confusion")).toArray(),
                         twoRows = twoPets.value(QStringLiteral("confusion")).toArray();
        QCOMPARE(twoRows[0], petsRows[0]); // cat
        QCOMPARE(twoRows[1], (QJsonValue(QJsonArray{0, 0, 0})));
        QCOMPARE(twoRows[2], petsRows[2]); // fox
        // A class the checkpoint does not know, and images of another size, are named.
        const QString horses = path(QStringLiteral("horses"));
        writeClass(horses + QStringLiteral("/cat"), 0, 4, false);
        writeClass(horses + QStringLiteral("/horse"), 1, 4, false);
        QCOMPARE(test::runCliProcess(
                     TOWERS_CLI, {QStringLiteral("import"), horses, QStringLiteral("--data-dir"),
                                  data, QStringLiteral("--name"), QStringLiteral("horses")})
                     .exitCode,
                 0);
        const auto unknown =
            evalJson({QStringLiteral("--dataset"), QStringLiteral("horses")}).first;
        QCOMPARE(unknown.exitCode, 1);
        QVERIFY2(unknown.err.contains(QStringLiteral("horses has a class that")) &&
                     unknown.err.contains(QStringLiteral("does not know: horse (its classes: cat, "
                                                         "dog, fox)")),
                 qPrintable(unknown.err));
        QCOMPARE(test::runCliProcess(TOWERS_CLI,
                                     {QStringLiteral("import"), two, QStringLiteral("--data-dir"),
                                      data, QStringLiteral("--name"), QStringLiteral("small"),
                                      QStringLiteral("--size"), QStringLiteral("16")})
                     .exitCode,
                 0);
        const auto small = evalJson({QStringLiteral("--dataset"), QStringLiteral("small")}).first;
        QCOMPARE(small.exitCode, 1);
        QVERIFY2(small.err.contains(QStringLiteral("small's images are 16x16x3")) &&
                     small.err.contains(QStringLiteral("--size 32 --channels 3")),
                 qPrintable(small.err));
        const auto classify = test::runCliProcess(
            TOWERS_CLI, {QStringLiteral("classify"), QStringLiteral("--checkpoint"),
                         path(QStringLiteral("run")), m_pets + QStringLiteral("/fox/img002.jpg")});
        QVERIFY2(classify.exitCode == 0, qPrintable(classify.err + classify.out));
        const auto exported = test::runCliProcess(
            TOWERS_CLI,
            {QStringLiteral("export"), QStringLiteral("--checkpoint"), path(QStringLiteral("run")),
             QStringLiteral("--output"), path(QStringLiteral("pets.onnx"))});
        QVERIFY2(exported.exitCode == 0, qPrintable(exported.err + exported.out));
        // The classes are the imported folder names.
        for (const char* c : {"cat", "dog", "fox"})
            QVERIFY2(classify.out.contains(QString::fromLatin1(c)), qPrintable(classify.out));
    }

    // import --fit: each image brought to size as chosen (here fitted inside, on black), as the
    // manifest records; a run on it records it in its checkpoints, and classify then brings an
    // image file to size the same way.
    void importFitsAsChosen()
    {
        const QString data = path(QStringLiteral("data-fit")),
                      source = path(QStringLiteral("fit pets"));
        writeClass(source + QStringLiteral("/cat"), 0, 6, false);
        writeClass(source + QStringLiteral("/fox"), 2, 6, false);
        const auto bad = test::runCliProcess(
            TOWERS_CLI, {QStringLiteral("import"), source, QStringLiteral("--data-dir"), data,
                         QStringLiteral("--fit"), QStringLiteral("stretch")});
        QCOMPARE(bad.exitCode, 2);
        QVERIFY2(bad.err.contains(QStringLiteral(
                     "--fit: unknown image fit 'stretch' (known: crop, squash, fill)")),
                 qPrintable(bad.err));
        const auto r = test::runCliProcess(
            TOWERS_CLI,
            {QStringLiteral("import"), source, QStringLiteral("--data-dir"), data,
             QStringLiteral("--name"), QStringLiteral("fitted"), QStringLiteral("--fit"),
             QStringLiteral("fill"), QStringLiteral("--json")});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QCOMPARE(QJsonDocument::fromJson(r.out.toUtf8())
                     .object()
                     .value(QStringLiteral("fit"))
                     .toString(),
                 QStringLiteral("fill"));
        const QString folder = data + QStringLiteral("/fitted");
        const engine::Dataset d = engine::loadDataset("fitted", folder.toStdString());
        QCOMPARE(d.imageFit, engine::ImageFit::Fill);
        const auto listed =
            test::runCliProcess(TOWERS_CLI, {QStringLiteral("datasets"), QStringLiteral("fitted"),
                                             QStringLiteral("--data-dir"), data});
        QVERIFY2(listed.out.contains(QStringLiteral("of 32x32x3 (imported with --fit fill), 2 "
                                                    "classes")),
                 qPrintable(listed.out));
        // A training image whose file is wider than high is that file fitted inside, not cropped.
        QFile list(folder + QLatin1Char('/') + QLatin1String(app::kImportedFilesName));
        QVERIFY(list.open(QIODevice::ReadOnly));
        const QJsonArray files = QJsonDocument::fromJson(list.readAll())
                                     .object()
                                     .value(QStringLiteral("train"))
                                     .toArray();
        QCOMPARE(files.size(), qsizetype(d.train.count));
        const engine::Shape shape = d.train.imageShape();
        const auto fitted = [&](const QString& file, engine::ImageFit fit) {
            engine::ImageSet one;
            app::appendImage(app::readImageFile(file, shape), shape, one, fit);
            return one;
        };
        qsizetype wideOne = 0;
        while (wideOne < files.size() && QImage(files.at(wideOne).toString()).width() ==
                                             QImage(files.at(wideOne).toString()).height())
            ++wideOne;
        QVERIFY(wideOne < files.size());
        const QString first = files.at(wideOne).toString();
        const auto stored = std::vector<std::uint8_t>(
            d.train.image(wideOne), d.train.image(wideOne) + d.train.imageBytes());
        QVERIFY(stored == fitted(first, engine::ImageFit::Fill).pixels);
        QVERIFY(stored != fitted(first, engine::ImageFit::Crop).pixels);

        const QString run = path(QStringLiteral("fit-run"));
        const auto train = test::runCliProcess(
            TOWERS_CLI,
            {QStringLiteral("train"), QStringLiteral("--dataset"), QStringLiteral("fitted"),
             QStringLiteral("--data-dir"), data, QStringLiteral("--steps"), QStringLiteral("2"),
             QStringLiteral("--batch-size"), QStringLiteral("4"), QStringLiteral("--run-dir"), run,
             QStringLiteral("--model"), QStringLiteral("cifar10-tutorial")});
        QVERIFY2(train.exitCode == 0, qPrintable(train.err + train.out));
        const QString checkpoint = run + QStringLiteral("/checkpoints/ckpt-00000002.safetensors");
        QCOMPARE(engine::readCheckpointInfo(checkpoint.toStdString()).imageFit,
                 engine::ImageFit::Fill);
        // A file three times as wide as high: classify answers for it fitted inside.
        QImage wide(96, 32, QImage::Format_RGB888);
        for (int y = 0; y < 32; ++y)
            for (int x = 0; x < 96; ++x) wide.setPixelColor(x, y, QColor(2 * x, 7 * y, 128));
        const QString file = path(QStringLiteral("wide.png"));
        QVERIFY(wide.save(file));
        const auto classified = test::runCliProcess(
            TOWERS_CLI, {QStringLiteral("classify"), QStringLiteral("--checkpoint"), checkpoint,
                         QStringLiteral("--json"), file});
        QVERIFY2(classified.exitCode == 0, qPrintable(classified.err));
        const std::vector<double> logits = test::firstClassifiedLogits(classified.out);
        engine::Classifier classifier(checkpoint.toStdString());
        const auto want = classifier.logits(fitted(file, engine::ImageFit::Fill)).at(0);
        const auto cropped = classifier.logits(fitted(file, engine::ImageFit::Crop)).at(0);
        QCOMPARE(logits.size(), want.size());
        double apart = 0;
        for (std::size_t j = 0; j < want.size(); ++j) {
            QVERIFY2(
                std::abs(logits[j] - want[j]) < 1e-5,
                qPrintable(
                    QStringLiteral("logit %1: %2 against %3").arg(j).arg(logits[j]).arg(want[j])));
            apart = std::max(apart, std::abs(want[j] - cropped[j]));
        }
        QVERIFY(apart > 1e-4); // the crop would have answered otherwise
    }

    // eval --mistakes on an imported dataset names each wrong answer's image file (the one in the
    // folder of its true class), beside its index; on the test set and on both splits.
    void evalNamesTheFilesOfItsMistakes()
    {
        const QString data = path(QStringLiteral("data4")), run = petsRun();
        QVERIFY2(!run.isEmpty(), "the run on pets could not be trained (above)");
        const auto files = app::readImportedFiles(data + QStringLiteral("/pets"));
        QVERIFY(files);
        for (const QString& set : {QStringLiteral("all"), QStringLiteral("test")}) {
            const auto e = test::runCliProcess(
                TOWERS_CLI,
                {QStringLiteral("eval"), QStringLiteral("--checkpoint"), run,
                 QStringLiteral("--data-dir"), data, QStringLiteral("--set"), set,
                 QStringLiteral("--mistakes"), QStringLiteral("100"), QStringLiteral("--json")});
            QVERIFY2(e.exitCode == 0, qPrintable(e.err));
            const QJsonArray mistakes = QJsonDocument::fromJson(e.out.toUtf8())
                                            .object()
                                            .value(QStringLiteral("mistakes"))
                                            .toArray();
            QVERIFY2(!mistakes.isEmpty(), "a network trained 4 steps answers some images wrongly");
            const QStringList listed =
                set == QLatin1String("all") ? files->train + files->test : files->test;
            for (const QJsonValue& v : mistakes) {
                const QJsonObject m = v.toObject();
                const QString file = m.value(QStringLiteral("file")).toString();
                QCOMPARE(file, listed.value(m.value(QStringLiteral("index")).toInt()));
                QVERIFY2(file.startsWith(m_pets + QLatin1Char('/') +
                                         m.value(QStringLiteral("truth")).toString() +
                                         QLatin1Char('/')),
                         qPrintable(file));
            }
            // In words: the file after the probability.
            const auto text = test::runCliProcess(
                TOWERS_CLI, {QStringLiteral("eval"), QStringLiteral("--checkpoint"), run,
                             QStringLiteral("--data-dir"), data, QStringLiteral("--set"), set,
                             QStringLiteral("--mistakes"), QStringLiteral("1")});
            QVERIFY2(text.exitCode == 0, qPrintable(text.err));
            const QJsonObject first = mistakes.first().toObject();
            QVERIFY2(text.out.contains(QRegularExpression(
                         QStringLiteral("\\n +%1  [a-z]+ -> [a-z]+  [0-9.]+ %  %2\\n")
                             .arg(first.value(QStringLiteral("index")).toInt())
                             .arg(QRegularExpression::escape(
                                 first.value(QStringLiteral("file")).toString())))),
                     qPrintable(text.out));
        }
    }

    // eval reads the run's configuration in the checkpoint once: one that does not read (a newer
    // Towers' field) is said once, and --set validation, which needs its share, is refused once.
    void evalReadsTheRunsConfigurationOnce()
    {
        const QString data = path(QStringLiteral("data4"));
        engine::Checkpoint c;
        QVERIFY(newestRunCheckpoint(c));
        QJsonObject config =
            QJsonDocument::fromJson(QByteArray::fromStdString(c.info.config)).object();
        QVERIFY(!config.isEmpty());
        config.insert(QStringLiteral("fromTheFuture"), 1);
        c.info.config = QJsonDocument(config).toJson().toStdString();
        const QString future = path(QStringLiteral("future.safetensors"));
        engine::writeCheckpoint(future.toStdString(), c);
        const auto count = [](const QString& text, const QString& words) {
            return text.count(words);
        };
        const auto e =
            test::runCliProcess(TOWERS_CLI, {QStringLiteral("eval"), QStringLiteral("--checkpoint"),
                                             future, QStringLiteral("--data-dir"), data});
        QVERIFY2(e.exitCode == 0, qPrintable(e.err));
        QCOMPARE(count(e.err, QStringLiteral("does not read")), 1);
        QVERIFY2(e.err.contains(QStringLiteral("fromTheFuture")), qPrintable(e.err));
        const auto v = test::runCliProcess(TOWERS_CLI,
                                           {QStringLiteral("eval"), QStringLiteral("--checkpoint"),
                                            future, QStringLiteral("--data-dir"), data,
                                            QStringLiteral("--set"), QStringLiteral("validation")});
        QCOMPARE(v.exitCode, 1);
        QCOMPARE(count(v.err, QStringLiteral("does not read")), 1);
        QVERIFY2(v.err.contains(QStringLiteral("so its validation share is unknown")),
                 qPrintable(v.err));
    }

    // A checkpoint whose dataset field is no dataset's name (a forged or damaged file with a
    // valid checksum) is the file's fault: exit 1 naming the file, where it was a usage error.
    void aCheckpointNamingNoDatasetIsTheFilesFault()
    {
        engine::Checkpoint c;
        QVERIFY(newestRunCheckpoint(c));
        for (const char* bogus : {"../../etc", "No Such Set!"}) {
            c.info.dataset = bogus;
            const QString forged = path(QStringLiteral("forged.safetensors"));
            engine::writeCheckpoint(forged.toStdString(), c);
            const auto e = test::runCliProcess(
                TOWERS_CLI, {QStringLiteral("eval"), QStringLiteral("--checkpoint"), forged});
            QVERIFY2(e.exitCode == 1, qPrintable(e.err));
            QVERIFY2(
                e.err.contains(QStringLiteral("the checkpoint says it was trained on dataset '") +
                               QLatin1String(bogus) + QStringLiteral("', which is no")),
                qPrintable(e.err));
            QVERIFY2(e.err.contains(forged), qPrintable(e.err));
        }
    }

    // eval --dataset matches classes by name, case, spaces and punctuation aside: a class that
    // matches two of the checkpoint's so is named with both, not said to be unknown.
    void ambiguousClassNamesAreSaid()
    {
        engine::Checkpoint c;
        QVERIFY(newestRunCheckpoint(c));
        QVERIFY(!twoPets().isEmpty());
        QCOMPARE(c.info.classNames.size(), std::size_t(3));
        c.info.classNames = {"cat", "CAT!", "fox"};
        const QString twins = path(QStringLiteral("twins.safetensors"));
        engine::writeCheckpoint(twins.toStdString(), c);
        const auto e = test::runCliProcess(
            TOWERS_CLI, {QStringLiteral("eval"), QStringLiteral("--checkpoint"), twins,
                         QStringLiteral("--data-dir"), path(QStringLiteral("data4")),
                         QStringLiteral("--dataset"), QStringLiteral("two")});
        QCOMPARE(e.exitCode, 1);
        QVERIFY2(e.err.contains(QStringLiteral("Cat (case, spaces and punctuation aside, it is "
                                               "each of 'cat' and 'CAT!': which one is "
                                               "ambiguous)")),
                 qPrintable(e.err));
    }
};

QTEST_GUILESS_MAIN(TestImageFolderImportCommand)
#include "tst_image_folder_import_command.moc"
