// TrainingSession with a dataset already in memory (what the desktop application's Data page
// holds): it trains on that very object without reading any file, and refuses one whose name is
// not the configuration's; a precision that cannot run is refused before any folder is made; a run
// starts from another run's checkpoint (fine-tuning), the classifier afresh for other classes.
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "engine/data/dataset_content.h"
#include "engine/errors.h"
#include "engine/models/registry.h"
#include "engine/tensor/rng.h"
#include "engine/train/classifier.h"
#include "engine/train/run_directory.h"
#include "engine/train/training_session.h"
#include "training_fixture.h"

using namespace towers::engine;

namespace {

std::shared_ptr<const Dataset> inMemoryMnist(std::int64_t train, std::int64_t test,
                                             int classes = 10)
{
    auto d = std::make_shared<Dataset>();
    d->name = "mnist";
    d->location = "/nonexistent/in-memory";
    for (int c = 0; c < classes; ++c) d->classNames.push_back("class " + std::to_string(c));
    Rng rng(5);
    for (auto [set, n] : {std::pair{&d->train, train}, std::pair{&d->test, test}}) {
        set->count = n;
        set->height = set->width = 28;
        set->channels = 1;
        set->pixels.resize(std::size_t(n * 28 * 28));
        for (auto& p : set->pixels) p = std::uint8_t(rng.below(256));
        for (std::int64_t i = 0; i < n; ++i)
            set->labels.push_back(std::int32_t(rng.below(std::uint64_t(classes))));
    }
    return d;
}

} // namespace

class TestTrainingSession : public QObject
{
    Q_OBJECT
    QTemporaryDir m_root;

    // A run of 3 steps with a moving average in `base` to start others from: its checkpoint.
    static std::filesystem::path trainBase(const std::string& base)
    {
        auto o = towers::test::tinyRun({}, base, 3);
        o.config.emaDecay = 0.5;
        o.dataset = inMemoryMnist(96, 24, 10);
        TrainingSession session(o);
        if (session.run() != Trainer::Outcome::Finished) throw Error("the base run did not finish");
        return RunDirectory(base).checkpoints().back().path;
    }

private slots:
    void trainsOnTheDatasetInMemory()
    {
        // No data folder at all: only the dataset in memory can be used.
        auto o = towers::test::tinyRun(m_root.filePath(QStringLiteral("no-data")).toStdString(),
                                       m_root.filePath(QStringLiteral("run")).toStdString(), 4);
        const auto dataset = inMemoryMnist(128, 32);
        o.dataset = dataset;
        TrainingSession session(o);
        QCOMPARE(&session.dataset(), dataset.get()); // the same images, not a copy
        QCOMPARE(session.run(), Trainer::Outcome::Finished);
        QVERIFY(QFile::exists(
            m_root.filePath(QStringLiteral("run/checkpoints/ckpt-00000004.safetensors"))));
    }

    // The model is built with the dataset's classes (3 here, where fashion-fast's default is 10):
    // config.json and the checkpoint record them, the checkpoint classifies into them, and a
    // resume builds the same model again.
    void buildsTheModelWithTheDatasetsClasses()
    {
        const std::string dir = m_root.filePath(QStringLiteral("three")).toStdString();
        auto o = towers::test::tinyRun({}, dir, 3);
        const auto dataset = inMemoryMnist(96, 24, 3);
        o.dataset = dataset;
        {
            TrainingSession session(o);
            QCOMPARE(session.run(), Trainer::Outcome::Finished);
        }
        const RunDirectory run(dir);
        QCOMPARE(TrainConfig::fromJson(run.readConfig().value()).classes, 3);
        // The checkpoint records the dataset's image shape (classify scales images to it).
        const auto info = readCheckpoint(run.checkpoints().back().path).info;
        QCOMPARE(info.imageShape, (Shape{28, 28, 1}));
        QCOMPARE(sourceImageShape(info), (Shape{28, 28, 1}));
        Classifier classifier(run.checkpoints().back().path, false, 1);
        QCOMPARE(classifier.numClasses(), 3);
        QCOMPARE(classifier.classNames(), dataset->classNames);
        QCOMPARE(classifier.logits(dataset->test).front().size(), std::size_t(3));

        o.resume = true;
        o.config.steps = 5;
        TrainingSession resumed(o);
        QCOMPARE(resumed.startStep(), std::int64_t(3));
        QCOMPARE(resumed.run(), Trainer::Outcome::Finished);
    }

    // A run started from another run's checkpoint (fine-tuning, TrainConfig::initFrom): every
    // tensor of the same model is the checkpoint's (its moving averages where it has them, its
    // buffers), on every tower, except the classifier's when the classes are not the checkpoint's:
    // that is the new run's own draw, as without initFrom. Another model is refused, before the
    // run folder holds anything; then the run trains.
    void startsFromAnotherRunsWeights()
    {
        const std::string base = m_root.filePath(QStringLiteral("ft-base")).toStdString();
        const auto file = trainBase(base);
        const Checkpoint ckpt = readCheckpoint(file);
        QVERIFY(!ckpt.ema.empty());

        for (const int classes : {10, 3}) {
            const std::string dir =
                m_root.filePath(QStringLiteral("ft-%1").arg(classes)).toStdString();
            auto f = towers::test::tinyRun({}, dir, 2);
            f.config.seed = 9;
            f.config.initFrom = file.string();
            f.dataset = inMemoryMnist(96, 24, classes);
            TrainingSession session(f);
            TowerSet& towers = session.trainer().towers();
            QVERIFY2(towers.compareReplicas().empty(), towers.compareReplicas().c_str());
            const Model& model = towers.model();
            const auto head = model.classifierParameters();
            QCOMPARE(head.size(), std::size_t(2)); // the last linear layer's weight and bias
            auto fresh = buildModel("fashion-fast", classes);
            fresh->initialize(9);
            for (const Parameter* p : model.parameters()) {
                const bool own =
                    classes != 10 && std::find(head.begin(), head.end(), p) != head.end();
                const Tensor& expected =
                    own ? fresh->parameter(p->name).value : *ckpt.weight(p->name, true);
                QVERIFY2(p->value.shape() == expected.shape(), p->name.c_str());
                QVERIFY2(std::memcmp(p->value.raw(), expected.raw(), p->value.bytes()) == 0,
                         p->name.c_str());
            }
            QCOMPARE(session.run(), Trainer::Outcome::Finished);
            QCOMPARE(TrainConfig::fromJson(RunDirectory(dir).readConfig().value()).initFrom,
                     file.string());
        }

        const std::string other = m_root.filePath(QStringLiteral("ft-other")).toStdString();
        auto w = towers::test::tinyRun({}, other, 2);
        w.config.model = "fashion-wide";
        w.config.initFrom = file.string();
        w.dataset = inMemoryMnist(96, 24, 10);
        try {
            TrainingSession session(w);
            QFAIL("another model's checkpoint was taken");
        } catch (const InvalidArgument& e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(
                         QStringLiteral("it is a checkpoint of fashion-fast, this run trains "
                                        "fashion-wide")),
                     e.what());
        }
        QVERIFY(!std::filesystem::exists(other));

        // Over the base run itself (--overwrite), from its own checkpoint: read before the run's
        // files are set aside; a refusal (another model) leaves them where they are.
        auto over = towers::test::tinyRun({}, base, 2);
        over.setAside = true;
        over.config.model = "fashion-wide";
        over.config.initFrom = file.string();
        over.dataset = inMemoryMnist(96, 24, 10);
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, TrainingSession{over});
        QVERIFY(std::filesystem::exists(file));
        QVERIFY(!std::filesystem::exists(std::filesystem::path(base) / "set-aside"));
        over.config.model = "fashion-fast";
        {
            TrainingSession session(over);
            QCOMPARE(session.run(), Trainer::Outcome::Finished);
        }
        QVERIFY(std::filesystem::exists(std::filesystem::path(base) / "set-aside"));
        // config.json records the checkpoint where it now lies, in set-aside/<when>/checkpoints/.
        const std::filesystem::path recorded =
            TrainConfig::fromJson(RunDirectory(base).readConfig().value()).initFrom;
        QVERIFY2(std::filesystem::exists(recorded), recorded.c_str());
        QCOMPARE(recorded.filename(), file.filename());
        QCOMPARE(recorded.parent_path().parent_path().parent_path(),
                 std::filesystem::path(base) / "set-aside");
    }

    // A run started from another run's checkpoint and ended before its first checkpoint (killed:
    // config.json and no checkpoint) resumes at step 0 from those weights, where it once took its
    // seed's draw and trained from scratch without a word; so does one none of whose checkpoints
    // loads, set aside (a resume that may start over).
    void aResumeWithoutCheckpointStartsFromTheSameWeights()
    {
        const auto file = trainBase(m_root.filePath(QStringLiteral("again-base")).toStdString());
        const Checkpoint ckpt = readCheckpoint(file);

        const std::filesystem::path dir = m_root.filePath(QStringLiteral("again")).toStdString();
        auto f = towers::test::tinyRun({}, dir, 2);
        f.config.seed = 9;
        f.config.initFrom = file.string();
        f.dataset = inMemoryMnist(96, 24, 10);
        {
            TrainingSession session(f);
            QCOMPARE(session.run(), Trainer::Outcome::Finished);
        }
        for (const bool unloadable : {false, true}) {
            std::filesystem::remove_all(dir / "checkpoints");
            std::filesystem::create_directories(dir / "checkpoints");
            if (unloadable)
                std::ofstream(dir / "checkpoints" / "ckpt-00000001.safetensors") << "damaged";
            auto r = f;
            r.resume = true;
            r.setAside = unloadable;
            struct : TrainerObserver
            {
                QString text;
                void onLog(const std::string& line) override
                {
                    text += QString::fromStdString(line) + QLatin1Char('\n');
                }
            } observer;
            TrainingSession resumed(r, &observer);
            QCOMPARE(resumed.startStep(), std::int64_t(0));
            const QString& log = observer.text;
            QVERIFY2(log.contains(QStringLiteral("weights from ") + QString::fromStdString(file)),
                     qPrintable(log));
            for (const Parameter* p : resumed.trainer().towers().model().parameters()) {
                const Tensor& expected = *ckpt.weight(p->name, true);
                QVERIFY2(std::memcmp(p->value.raw(), expected.raw(), p->value.bytes()) == 0,
                         p->name.c_str());
            }
            QCOMPARE(resumed.run(), Trainer::Outcome::Finished);
            QCOMPARE(std::filesystem::exists(dir / "set-aside"), unloadable);
        }
        // That file gone (its run's rotation deleted it), such a resume says why it wanted it,
        // and changes nothing.
        std::filesystem::remove_all(dir / "checkpoints");
        std::filesystem::create_directories(dir / "checkpoints");
        std::filesystem::rename(file, file.string() + ".away");
        auto r = f;
        r.resume = true;
        try {
            TrainingSession resumed(r);
            QFAIL("a resume from a file that is gone went on");
        } catch (const IoError& e) {
            const QString what = QString::fromUtf8(e.what());
            QVERIFY2(what.contains(QStringLiteral("this run started from '%1' (--init-from) and "
                                                  "has no checkpoint of its own, so it starts "
                                                  "from that file again, which cannot be read: ")
                                       .arg(QString::fromStdString(file.string()))) &&
                         what.contains(QStringLiteral("nothing in the run's folder was changed")),
                     e.what());
        }
        QVERIFY(std::filesystem::exists(dir / "config.json"));
        std::filesystem::rename(file.string() + ".away", file);
    }

    // The run records what it trained on (config.json's datasetContent): a resume on a dataset of
    // the same name whose classes or images changed (imported again, replaced on disk) is
    // refused naming what changed, and the run's files stay; the same data resumes. A run from
    // before the record resumes and gets one.
    void aResumeRefusesAChangedDataset()
    {
        const std::string dir = m_root.filePath(QStringLiteral("changed")).toStdString();
        auto o = towers::test::tinyRun({}, dir, 2);
        const auto dataset = inMemoryMnist(96, 24, 3);
        o.dataset = dataset;
        {
            TrainingSession session(o);
            QCOMPARE(session.run(), Trainer::Outcome::Finished);
        }
        const RunDirectory run(dir);
        const std::string recorded = TrainConfig::fromJson(run.readConfig().value()).datasetContent;
        QCOMPARE(recorded, datasetContent(*dataset));
        o.resume = true;
        o.config = TrainConfig::fromJson(run.readConfig().value()); // as a resume reads it
        o.config.steps = 3;
        auto renamed = std::make_shared<Dataset>(*dataset); // the classes in another order
        std::swap(renamed->classNames[0], renamed->classNames[2]);
        auto fewer = std::make_shared<Dataset>(*dataset); // one training image less
        fewer->train.count -= 1;
        fewer->train.pixels.resize(fewer->train.pixels.size() - 28 * 28);
        fewer->train.labels.pop_back();
        auto relabelled = std::make_shared<Dataset>(*dataset); // a test label changed
        relabelled->test.labels[0] = (relabelled->test.labels[0] + 1) % 3;
        for (const auto& [changed, words] :
             {std::pair{renamed, "its classes were class 0, class 1, class 2, they are class 2, "
                                 "class 1, class 0"},
              std::pair{fewer, "its training set had 96 examples, it has 95"},
              std::pair{relabelled, "its test set has the same number of examples (24) but "
                                    "other images or labels"}}) {
            o.dataset = changed;
            try {
                TrainingSession session(o);
                QFAIL("a changed dataset was resumed on");
            } catch (const InvalidArgument& e) {
                QFAIL(e.what());
            } catch (const Error& e) {
                const QString what = QString::fromUtf8(e.what());
                QVERIFY2(what.contains(QStringLiteral("is not the one this run trained on")) &&
                             what.contains(QLatin1String(words)),
                         e.what());
            }
            QCOMPARE(run.checkpoints().back().step, std::int64_t(2));
        }
        o.dataset = dataset;
        {
            TrainingSession session(o);
            QCOMPARE(session.run(), Trainer::Outcome::Finished);
        }
        // A run from before the record: resumed, then recorded.
        auto config = TrainConfig::fromJson(run.readConfig().value());
        config.datasetContent.clear();
        RunDirectory(dir).writeConfig(config.toJson());
        o.config = config;
        o.config.steps = 4;
        o.dataset = fewer;
        {
            TrainingSession session(o);
            QCOMPARE(session.run(), Trainer::Outcome::Finished);
        }
        QCOMPARE(TrainConfig::fromJson(run.readConfig().value()).datasetContent,
                 datasetContent(*fewer));
    }

    void refusesAnotherDataset()
    {
        auto o =
            towers::test::tinyRun({}, m_root.filePath(QStringLiteral("run2")).toStdString(), 4);
        auto other = std::make_shared<Dataset>(*inMemoryMnist(16, 16));
        other->name = "fashion-mnist";
        o.dataset = other;
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, TrainingSession{o});
    }

    // A precision the backend cannot run is refused before any folder is made, a new one or a
    // named one (bf16 on the reference backend: on no machine).
    void refusesAPrecisionBeforeAnyFolder()
    {
        for (const bool newFolder : {true, false}) {
            const QString dir = m_root.filePath(newFolder ? QStringLiteral("bf16-new")
                                                          : QStringLiteral("bf16-named"));
            auto o = towers::test::tinyRun({}, dir.toStdString(), 4);
            o.dataset = inMemoryMnist(16, 16);
            o.config.backend = "reference";
            o.config.precision = Precision::BFloat16;
            o.newFolder = newFolder;
            try {
                TrainingSession session(o);
                QFAIL("bf16 on the reference backend started");
            } catch (const Unsupported& e) {
                QVERIFY2(QString::fromUtf8(e.what()).contains(QStringLiteral("--precision bf16")),
                         e.what());
            }
            QVERIFY(!QFileInfo::exists(dir));
        }
    }
};

QTEST_GUILESS_MAIN(TestTrainingSession)
#include "tst_training_session.moc"
