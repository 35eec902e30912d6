// A network of the user's own, from a model file, through towers-cli as a user runs it: models
// shows it (and saves a built-in model as one to start from), train trains it; with the file gone,
// the run's checkpoints evaluate, classify and export, the run resumes, and new runs start like it
// or from its weights (the definition travels in the run). A file that describes no network stops
// the command with exit code 1, naming the file, the layer and the field.
#include <QDir>
#include <QFile>
#include <QImage>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <sys/stat.h>

#include "cli_process.h"
#include "dataset_files.h"
#include "model_files.h"

using namespace towers;

class TestModelFileCommand : public QObject
{
    Q_OBJECT
    QTemporaryDir m_tmp;

    QString path(const QString& name) const { return m_tmp.filePath(name); }

    test::CliResult cli(const QStringList& args) const
    {
        return test::runCliProcess(
            QStringLiteral(TOWERS_CLI), args,
            {QStringLiteral("HOME=") + path(QStringLiteral("home")),
             QStringLiteral("XDG_DATA_HOME=") + path(QStringLiteral("xdg")),
             QStringLiteral("TOWERS_DATA=") + path(QStringLiteral("data")),
             QStringLiteral("TOWERS_RUNS=") + path(QStringLiteral("runs")),
             QStringLiteral("OMP_NUM_THREADS=1"),
             // The CPU's runs on any machine.
             QStringLiteral("TOWERS_CUDA_PLUGIN=/nonexistent/libtowers-cuda.so")});
    }

    void write(const QString& name, const std::string& text) const
    {
        QFile f(path(name));
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(text.c_str());
    }

    static QJsonObject config(const QString& run)
    {
        QFile f(run + QStringLiteral("/config.json"));
        if (!f.open(QIODevice::ReadOnly)) return {};
        return QJsonDocument::fromJson(f.readAll()).object();
    }

private slots:
    void initTestCase()
    {
        QVERIFY(m_tmp.isValid());
        // 256 training and 64 test images of 28x28 in the real (gzip'ed IDX) format.
        test::writeIdxDataset(path(QStringLiteral("data/fashion-mnist")).toStdString(), 256, 64, 28,
                              28, true, 7);
        QImage image(28, 28, QImage::Format_Grayscale8);
        image.fill(90);
        QVERIFY(image.save(path(QStringLiteral("shirt.png"))));
    }

    void trainsAndTravelsWithTheRun()
    {
        const QString net = path(QStringLiteral("net.json"));
        write(QStringLiteral("net.json"), test::everyLayerDefinition("mine", "[24, 24, 1]"));
        auto r = cli({"models", net});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.out.startsWith(QStringLiteral("mine: input 24x24x1")), qPrintable(r.out));
        QVERIFY2(r.out.contains(QStringLiteral("inner.weight")), qPrintable(r.out));
        // A block's layers and a concat's branches indented under it, with their shapes.
        QVERIFY2(r.out.contains(QRegularExpression(QStringLiteral("\n  inner +1x12x12x6 +324 "))),
                 qPrintable(r.out));
        QVERIFY2(r.out.contains(QRegularExpression(
                     QStringLiteral("\n  branch 2 +1x6x6x3 +216  2 layers\n    pool2 +1x6x6x8 +0 "
                                    ".*\n    tower +1x6x6x3 +216 .*\n  branch 3 +1x6x6x8 +0  "
                                    "the input itself\n"))),
                 qPrintable(r.out));
        r = cli({"models", net, "--json"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        const QJsonArray layers =
            QJsonDocument::fromJson(r.out.toUtf8()).object().value("layers").toArray();
        QJsonObject concat;
        for (const auto& l : layers)
            if (l.toObject().value("kind") == QStringLiteral("concat")) concat = l.toObject();
        const QJsonArray branches = concat.value("layers").toArray();
        QCOMPARE(branches.size(), 3);
        QCOMPARE(branches[1].toObject().value("layers").toArray()[1].toObject().value("name"),
                 QStringLiteral("tower"));

        const QString run = path(QStringLiteral("runs/mine"));
        r = cli({"train", "--dataset", "fashion-mnist", "--model", net, "--steps", "4", "--run-dir",
                 run, "--log-every", "2"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        QVERIFY2(r.out.contains(QStringLiteral("training mine on 1 tower x 16 examples")),
                 qPrintable(r.out)); // the file's recipe: batch 16
        const QJsonObject c = config(run);
        QCOMPARE(c.value(QStringLiteral("model")).toString(), QStringLiteral("mine"));
        QCOMPARE(c.value(QStringLiteral("optimizer")).toObject().value("kind").toString(),
                 QStringLiteral("adam"));
        QCOMPARE(c.value(QStringLiteral("modelDefinition"))
                     .toObject()
                     .value(QStringLiteral("name"))
                     .toString(),
                 QStringLiteral("mine"));

        // The file goes; the run keeps its network.
        QVERIFY(QFile::remove(net));
        r = cli({"eval", "--checkpoint", run});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains(QStringLiteral("mine at step 4 on fashion-mnist")),
                 qPrintable(r.out));
        r = cli({"classify", "--checkpoint", run, path(QStringLiteral("shirt.png"))});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains(QStringLiteral("shirt.png")), qPrintable(r.out));
        r = cli({"export", "--checkpoint", run, "--output", path(QStringLiteral("mine.onnx"))});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY(QFileInfo(path(QStringLiteral("mine.onnx"))).size() > 1000);
        r = cli({"train", "--resume", "--run-dir", run, "--steps", "6"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        QVERIFY2(r.out.contains(QStringLiteral("finished at step 6 of 6")), qPrintable(r.out));
        r = cli({"runs", run});
        QVERIFY2(r.exitCode == 0 && r.out.contains(QStringLiteral("mine on fashion-mnist")),
                 qPrintable(r.err + r.out));

        // A new run like it, and one from its weights: the same network, from the run alone.
        const QString like = path(QStringLiteral("runs/like"));
        r = cli({"train", "--like", run, "--steps", "2", "--run-dir", like});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        QCOMPARE(config(like).value(QStringLiteral("modelDefinition")),
                 c.value(QStringLiteral("modelDefinition")));
        const QString tuned = path(QStringLiteral("runs/tuned"));
        r = cli({"train", "--dataset", "fashion-mnist", "--init-from", run, "--steps", "2",
                 "--run-dir", tuned});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        QCOMPARE(config(tuned).value(QStringLiteral("model")).toString(), QStringLiteral("mine"));
        QCOMPARE(config(tuned).value(QStringLiteral("modelDefinition")),
                 c.value(QStringLiteral("modelDefinition")));
    }

    // A job script that is requeued as it is (--resume-or-start --model FILE) resumes: the file
    // describes the run's network (kept in its config.json), by whatever path; a file edited to
    // another network, or another model's, is refused naming what differs.
    void aRequeuedScriptWithAModelFileResumes()
    {
        write(QStringLiteral("requeued.json"),
              test::everyLayerDefinition("requeued", "[24, 24, 1]"));
        const QString net = path(QStringLiteral("requeued.json"));
        const QString run = path(QStringLiteral("runs/requeued"));
        const auto script = [&](const QString& model, const QString& steps) {
            return cli({"train", "--resume-or-start", "--dataset", "fashion-mnist", "--model",
                        model, "--steps", steps, "--run-dir", run});
        };
        auto r = script(net, QStringLiteral("2"));
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        r = script(net, QStringLiteral("3"));
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        QVERIFY2(r.out.contains(QStringLiteral("at step 2")), qPrintable(r.out));
        QVERIFY2(r.out.contains(QStringLiteral("finished at step 3 of 3")), qPrintable(r.out));
        // The same file by another path.
        r = script(path(QStringLiteral("runs/../requeued.json")), QStringLiteral("3"));
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));

        write(QStringLiteral("requeued.json"),
              R"({"name": "requeued", "input": [24, 24, 1], "layers": [{"type": "flatten"},
                  {"type": "linear", "units": "classes"}]})");
        r = script(net, QStringLiteral("4"));
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains(QStringLiteral("--model cannot change when resuming: %1 describes "
                                               "a different 'requeued' than the run's copy (its "
                                               "network, recipe or description differ) (the run "
                                               "keeps its model in its config.json")
                                    .arg(net)),
                 qPrintable(r.err));
        // A file that is gone: said as a missing file is (exit 1), with what a resume may do.
        r = script(path(QStringLiteral("gone.json")), QStringLiteral("4"));
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(QStringLiteral("a resume may leave --model out")),
                 qPrintable(r.err));
        write(QStringLiteral("another-model.json"),
              test::everyLayerDefinition("other", "[24, 24, 1]"));
        r = script(path(QStringLiteral("another-model.json")), QStringLiteral("4"));
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains(QStringLiteral("describes the model 'other', not the run's "
                                               "'requeued' (")),
                 qPrintable(r.err));
    }

    // A built-in model saved as a model file to start from (models NAME --save), edited and
    // trained; an existing file is kept unless --force; the option's mistakes are usage errors.
    void customisesABuiltIn()
    {
        const QString file = path(QStringLiteral("narrow.json"));
        auto r = cli({"models", "fashion-fast", "--save", file});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains(QStringLiteral("Wrote fashion-fast as the model file %1 (network "
                                               "'narrow')")
                                    .arg(file)),
                 qPrintable(r.out));
        QVERIFY2(
            r.out.contains(QStringLiteral("'towers-cli train --model %1' trains it").arg(file)),
            qPrintable(r.out));
        // The user's edit: half the first convolution's filters.
        QFile f(file);
        QVERIFY(f.open(QIODevice::ReadOnly));
        QString text = QString::fromUtf8(f.readAll());
        f.close();
        QCOMPARE(text.count(QStringLiteral("\"filters\": 32")), 1);
        text.replace(QStringLiteral("\"filters\": 32"), QStringLiteral("\"filters\": 16"));
        write(QStringLiteral("narrow.json"), text.toStdString());
        r = cli({"models", file});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains(QStringLiteral("conv1.weight")) &&
                     r.out.contains(QStringLiteral("16x1x3x3")),
                 qPrintable(r.out));
        const QString run = path(QStringLiteral("runs/narrow"));
        r = cli({"train", "--dataset", "fashion-mnist", "--model", file, "--steps", "2",
                 "--run-dir", run});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QCOMPARE(config(run).value(QStringLiteral("model")).toString(), QStringLiteral("narrow"));
        QCOMPARE(config(run).value(QStringLiteral("batchPerTower")).toInt(), 64); // the recipe's

        // Saved again: the edited file is kept.
        r = cli({"models", "fashion-fast", "--save", file});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(QStringLiteral("towers-cli models: error: '%1' already exists; "
                                               "choose another output or pass --force")
                                    .arg(file)),
                 qPrintable(r.err));
        QVERIFY(f.open(QIODevice::ReadOnly));
        QVERIFY(f.readAll().contains("\"filters\": 16"));
        f.close();
        r = cli({"models", "fashion-fast", "--save", file, "--force", "--name", "wide", "--json"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        const QJsonObject o = QJsonDocument::fromJson(r.out.toUtf8()).object();
        QCOMPARE(o.value(QStringLiteral("name")).toString(), QStringLiteral("wide"));
        QCOMPARE(o.value(QStringLiteral("from")).toString(), QStringLiteral("fashion-fast"));
        QVERIFY(f.open(QIODevice::ReadOnly));
        QVERIFY(f.readAll().contains("\"name\": \"wide\""));
        f.close();

        struct Refusal
        {
            QStringList args;
            int exitCode;
            QString message;
        };
        const QString other = path(QStringLiteral("other.json"));
        for (const Refusal& bad : {
                 Refusal{{"models", "--save", other}, 2, "--save takes a model and a file"},
                 Refusal{{"models", "fashion-fast", "--name", "x"}, 2, "--name goes with --save"},
                 Refusal{{"models", "fashion-fast", "--save", other, "--name", "a b"},
                         2,
                         "the network's name: expected 1 to 64 letters"},
                 Refusal{{"models", "fashion-fast", "--save", other, "--name", "cifar10-resnet"},
                         2,
                         "is a built-in model's"},
                 Refusal{{"models", "nonesuch", "--save", other}, 2, "unknown model"},
                 Refusal{{"models", "fashion-fast", "--save", path(QStringLiteral("no/such.json"))},
                         1,
                         "cannot write"},
             }) {
            r = cli(bad.args);
            QVERIFY2(
                r.exitCode == bad.exitCode && r.err.contains(bad.message),
                qPrintable(bad.args.join(' ') + ": " + QString::number(r.exitCode) + ": " + r.err));
            QVERIFY(!QFile::exists(other));
        }

        // --force never replaces the run's checkpoint (whatever its name) or its config.json,
        // and no model file takes a checkpoint's name.
        const QString checkpoint = run + QStringLiteral("/checkpoints/ckpt-00000002.safetensors");
        const QString renamed = path(QStringLiteral("weights.bak"));
        QVERIFY(QFile::copy(checkpoint, renamed));
        const QString runConfig = run + QStringLiteral("/config.json");
        for (const auto& [target, message] :
             {std::pair{checkpoint, QStringLiteral("is a checkpoint's name (.safetensors)")},
              std::pair{renamed, QStringLiteral("is a checkpoint (safetensors), which is never "
                                                "replaced")},
              std::pair{runConfig, QStringLiteral("is the run's own config.json (in the run "
                                                  "folder '") +
                                       run + QStringLiteral("'), which is never replaced")},
              std::pair{path(QStringLiteral("new.SafeTensors")),
                        QStringLiteral("a model file is JSON, name a .json file")}}) {
            QFile before(target);
            const QByteArray bytes = before.open(QIODevice::ReadOnly) ? before.readAll() : "";
            before.close();
            r = cli({"models", "fashion-fast", "--save", target, "--force"});
            QVERIFY2(r.exitCode == 1 && r.err.contains(message), qPrintable(target + ": " + r.err));
            QFile after(target);
            QCOMPARE(after.open(QIODevice::ReadOnly) ? after.readAll() : QByteArray(""), bytes);
        }
        QVERIFY(!QFile::exists(path(QStringLiteral("new.SafeTensors"))));
    }

    // A written file has the mode the user's umask gives a new file, and a replaced file keeps its
    // own (they were 0644 whatever: a private 0600 file became readable by all).
    void writtenFilesFollowTheUmask()
    {
        const mode_t before = ::umask(077); // towers-cli inherits it
        const auto saved = cli({QStringLiteral("models"), QStringLiteral("fashion-fast"),
                                QStringLiteral("--save"), path(QStringLiteral("private.json"))});
        ::umask(before);
        QVERIFY2(saved.exitCode == 0, qPrintable(saved.err));
        struct stat st
        {
        };
        QCOMPARE(::stat(QFile::encodeName(path(QStringLiteral("private.json"))).constData(), &st),
                 0);
        QCOMPARE(st.st_mode & 0777, mode_t(0600));
        write(QStringLiteral("shared.json"), "{}");
        QVERIFY(::chmod(QFile::encodeName(path(QStringLiteral("shared.json"))).constData(), 0640) ==
                0);
        const auto replaced =
            cli({QStringLiteral("models"), QStringLiteral("fashion-fast"), QStringLiteral("--save"),
                 path(QStringLiteral("shared.json")), QStringLiteral("--force")});
        QVERIFY2(replaced.exitCode == 0, qPrintable(replaced.err));
        QCOMPARE(::stat(QFile::encodeName(path(QStringLiteral("shared.json"))).constData(), &st),
                 0);
        QCOMPARE(st.st_mode & 0777, mode_t(0640));
    }

    void refusesWhatIsNoNetwork_data()
    {
        QTest::addColumn<QString>("file");
        QTest::addColumn<QString>("text");
        QTest::addColumn<QStringList>("command");
        QTest::addColumn<int>("exitCode");
        QTest::addColumn<QString>("message");
        const QString flat =
            R"({"name": "bad", "input": [28, 28, 1], "layers": [{"type": "flatten"}, )";
        QTest::newRow("missing file") << "none.json" << QString() << QStringList{"models"} << 1
                                      << "cannot read the model file '%1'";
        QTest::newRow("not json") << "broken.json"
                                  << "{\"name\": " << QStringList{"models"} << 1
                                  << "%1: not valid JSON";
        QTest::newRow("a layer's mistake")
            << "kernel.json"
            << flat + R"({"type": "linear", "units": "classes", "activation": "gelu"}]})"
            << QStringList{"train", "--steps", "1"} << 1
            << "towers-cli train: error: %1: layers[1] (fc1): activation: expected \"relu\" or "
               "\"none\", got \"gelu\"";
        QTest::newRow("a recipe's mistake")
            << "recipe.json"
            << flat + R"({"type": "linear", "units": "classes"}], "recipe": {"lr": 0}})"
            << QStringList{"lr-find"} << 1 << "%1: model 'bad': recipe: schedule.lr";
        QTest::newRow("bench")
            << "bench.json"
            << R"({"name": "bad", "input": [28, 28, 1], "layers": [{"type": "flatten"}]})"
            << QStringList{"bench"} << 1
            << "%1: layers[0] (flatten): the last layer must be the classifier";
        // A model file whose name looks like a model's: the message says how to give it.
        QTest::newRow("file named like a model")
            << "mynet" << QString::fromStdString(test::fashionFastDefinition("mynet"))
            << QStringList{"bench"} << 2 << "give it as ./mynet";
        // A network for other images, as a built-in model that does not fit: a usage error.
        QTest::newRow("other images")
            << "colour.json"
            << QString::fromStdString(test::everyLayerDefinition("colour", "[24, 24, 3]"))
            << QStringList{"train", "--steps", "1"} << 2 << "colour takes 24x24x3 images";
    }
    void refusesWhatIsNoNetwork()
    {
        QFETCH(QString, file);
        QFETCH(QString, text);
        QFETCH(QStringList, command);
        QFETCH(int, exitCode);
        QFETCH(QString, message);
        if (!text.isEmpty()) write(file, text.toStdString());
        // A name without ".json" is given as it is, from the folder it is in.
        QVERIFY(QDir::setCurrent(m_tmp.path()));
        const QString modelFile = file.endsWith(QLatin1String(".json")) ? path(file) : file;
        QStringList args = command;
        if (command.first() == QLatin1String("models"))
            args << modelFile;
        else if (command.first() == QLatin1String("bench"))
            args << QStringList{"--model", modelFile};
        else
            args << QStringList{"--dataset", "fashion-mnist", "--model", modelFile};
        if (command.first() == QLatin1String("train"))
            args << QStringList{"--run-dir", path(QStringLiteral("runs/refused-") + file)};
        const auto r = cli(args);
        QCOMPARE(r.exitCode, exitCode);
        QVERIFY2(r.err.contains(message.contains(QLatin1String("%1")) ? message.arg(modelFile)
                                                                      : message),
                 qPrintable(r.err));
        // Nothing half-made.
        QVERIFY(!QFileInfo::exists(path(QStringLiteral("runs/refused-") + file)));
    }
};

QTEST_GUILESS_MAIN(TestModelFileCommand)
#include "tst_model_file_command.moc"
