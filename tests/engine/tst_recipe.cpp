// The recipes: a default model per dataset, a valid configuration per model, and preprocessing
// that fits the dataset (or a refusal that says why).
#include <QtTest>

#include <algorithm>

#include "engine/models/registry.h"
#include "engine/train/recipe.h"

using namespace towers::engine;

namespace {

Dataset dataset(const std::string& name, int side, int channels, int classes = 10)
{
    Dataset d;
    d.name = name;
    for (int i = 0; i < classes; ++i)
        d.classNames.push_back(std::string("c").append(std::to_string(i)));
    ImageSet& s = d.train;
    s.count = 4;
    s.height = s.width = side;
    s.channels = channels;
    s.pixels.resize(static_cast<std::size_t>(s.count * s.imageBytes()));
    for (std::size_t i = 0; i < s.pixels.size(); ++i)
        s.pixels[i] = static_cast<std::uint8_t>(i * 37 % 256);
    s.labels = {0, 1, 2, 3};
    d.test = s;
    return d;
}

} // namespace

class TestRecipe : public QObject
{
    Q_OBJECT
private slots:
    void defaultModels()
    {
        QCOMPARE(defaultModelFor("fashion-mnist"), std::string("fashion-fast"));
        QCOMPARE(defaultModelFor("mnist"), std::string("fashion-fast"));
        QCOMPARE(defaultModelFor("cifar10"), std::string("cifar10-tutorial"));
        // No model is meant for CIFAR-100: the best-ranked network its 32x32x3 images fit, built
        // with its 100 classes.
        QCOMPARE(defaultModelFor("cifar100"), std::string("cifar10-resnet"));
        QVERIFY_THROWS_EXCEPTION(UnknownName, defaultModelFor("imagenet"));
    }

    // A dataset's default model: the one its table entry names, else the first registered model
    // meant for it (ModelInfo::defaultDataset), else the fitting model of lowest
    // ModelInfo::anyDatasetRank; either way one that takes its images and classes.
    void defaultModelsFollowTheTables()
    {
        for (const DatasetSpec& spec : datasetSpecs()) {
            const auto& models = modelRegistry();
            const auto meant = std::find_if(models.begin(), models.end(), [&](const ModelInfo& m) {
                return m.defaultDataset == spec.name;
            });
            const std::string model = defaultModelFor(spec.name);
            if (!spec.defaultModel.empty())
                QCOMPARE(model, spec.defaultModel);
            else if (meant != models.end())
                QCOMPARE(model, meant->name);
            else
                QVERIFY(findModel(model).anyDatasetRank > 0);
            QVERIFY(modelFits(findModel(model), spec.imageShape));
            const Shape& s = spec.imageShape;
            QCOMPARE(s[0], s[1]);
            const Preprocessing p = preprocessingFor(
                findModel(model), dataset(spec.name, int(s[0]), int(s[2]), spec.labels.numClasses));
            QCOMPARE(p.channels, int(s[2]));
        }
    }

    // Each model's recipe as it has always been (the numbers of README's recipe table).
    void recipes_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("optimizer");
        QTest::addColumn<int>("schedule");
        QTest::addColumn<double>("lr");
        QTest::addColumn<int>("batch");
        QTest::addColumn<double>("epochs");
        QTest::addColumn<qint64>("steps");
        QTest::addColumn<double>("weightDecay");
        QTest::addColumn<qint64>("checkpointEvery");
        QTest::addColumn<qint64>("evalEvery");
        QTest::addColumn<qint64>("logEvery");
        const int exponential = int(LrSchedule::Kind::Exponential),
                  oneCycle = int(LrSchedule::Kind::OneCycle),
                  constant = int(LrSchedule::Kind::Constant);
        QTest::newRow("cifar10-tutorial")
            << "cifar10-tutorial"
            << "sgd" << exponential << 0.1 << 128 << 0.0 << qint64(10000) << -1.0 << qint64(1000)
            << qint64(2000) << qint64(10);
        QTest::newRow("cifar10-resnet") << "cifar10-resnet"
                                        << "nesterov" << oneCycle << 0.2 << 128 << 12.0 << qint64(0)
                                        << 5e-4 << qint64(500) << qint64(390) << qint64(10);
        QTest::newRow("fashion-fast") << "fashion-fast"
                                      << "nesterov" << oneCycle << 0.1 << 64 << 8.0 << qint64(0)
                                      << 5e-4 << qint64(500) << qint64(500) << qint64(50);
        QTest::newRow("fashion-wide") << "fashion-wide"
                                      << "nesterov" << oneCycle << 0.1 << 64 << 20.0 << qint64(0)
                                      << 5e-4 << qint64(500) << qint64(1000) << qint64(50);
        QTest::newRow("mnist-convnet") << "mnist-convnet"
                                       << "adam" << constant << 1e-3 << 128 << 2.0 << qint64(0)
                                       << -1.0 << qint64(200) << qint64(0) << qint64(10);
    }
    void recipes()
    {
        QFETCH(QString, model);
        QFETCH(QString, optimizer);
        QFETCH(int, schedule);
        QFETCH(double, lr);
        QFETCH(int, batch);
        QFETCH(double, epochs);
        QFETCH(qint64, steps);
        QFETCH(double, weightDecay);
        QFETCH(qint64, checkpointEvery);
        QFETCH(qint64, evalEvery);
        QFETCH(qint64, logEvery);
        const TrainConfig c = defaultConfigFor(model.toStdString());
        QCOMPARE(QString::fromStdString(c.optimizer.kind), optimizer);
        QCOMPARE(int(c.schedule.kind), schedule);
        QCOMPARE(c.schedule.lr, lr);
        QCOMPARE(c.batchPerTower, batch);
        QCOMPARE(c.epochs, epochs);
        QCOMPARE(qint64(c.steps), steps);
        QCOMPARE(c.weightDecay, weightDecay);
        QCOMPARE(qint64(c.checkpointEvery), checkpointEvery);
        QCOMPARE(qint64(c.evalEvery), evalEvery);
        QCOMPARE(qint64(c.logEvery), logEvery);
        if (c.schedule.kind == LrSchedule::Kind::OneCycle) {
            QCOMPARE(c.optimizer.momentum, 0.9);
            QVERIFY(!c.schedule.cosineAnneal);
            QCOMPARE(c.schedule.warmupFraction, model == "cifar10-resnet" ? 0.2 : 0.15);
        }
    }

    // A recipe says only what it changes: a ModelRecipe left as it is gives TrainConfig's defaults.
    void recipeDefaultsAreTrainConfigs()
    {
        const ModelRecipe r;
        const TrainConfig c;
        QCOMPARE(r.optimizer.kind, c.optimizer.kind);
        QCOMPARE(r.optimizer.momentum, c.optimizer.momentum);
        QVERIFY(r.schedule.kind == c.schedule.kind);
        QCOMPARE(r.schedule.lr, c.schedule.lr);
        QCOMPARE(r.batchPerTower, c.batchPerTower);
        QCOMPARE(r.steps, c.steps);
        QCOMPARE(r.epochs, c.epochs);
        QCOMPARE(r.weightDecay, c.weightDecay);
        QCOMPARE(r.emaDecay, c.emaDecay);
        QCOMPARE(r.checkpointEvery, c.checkpointEvery);
        QCOMPARE(r.evalEvery, c.evalEvery);
        QCOMPARE(r.logEvery, c.logEvery);
    }

    void everyModelHasAValidConfig()
    {
        for (const auto& info : modelRegistry()) {
            const TrainConfig c = defaultConfigFor(info.name);
            QCOMPARE(c.model, info.name);
            c.validate();
            QVERIFY2(c.steps > 0 || c.epochs > 0, info.name.c_str());
        }
        QVERIFY_THROWS_EXCEPTION(UnknownName, defaultConfigFor("vgg"));
        // The tutorial's own numbers.
        const TrainConfig t = defaultConfigFor("cifar10-tutorial");
        QCOMPARE(t.optimizer.kind, std::string("sgd"));
        QCOMPARE(t.schedule.lr, 0.1);
        QCOMPARE(t.schedule.decayEpochs, 350.0);
        QCOMPARE(t.batchPerTower, 128);
        QCOMPARE(t.emaDecay, 0.9999);
    }

    void preprocessing()
    {
        const Dataset cifar = dataset("cifar10", 32, 3), fashion = dataset("fashion-mnist", 28, 1),
                      mnist = dataset("mnist", 28, 1);
        const Preprocessing tutorial = preprocessingFor(findModel("cifar10-tutorial"), cifar);
        QCOMPARE(tutorial.height, 24); // the seeds' 24x24 crops
        QVERIFY(tutorial.flip && tutorial.brightnessDelta == 63);
        QVERIFY(tutorial.normalization == Preprocessing::Normalization::PerImage);
        const Preprocessing resnet = preprocessingFor(findModel("cifar10-resnet"), cifar);
        QCOMPARE(resnet.height, 32);
        QCOMPARE(resnet.translate, 4);
        QVERIFY(preprocessingFor(findModel("fashion-fast"), fashion).flip); // clothes mirror
        QVERIFY(!preprocessingFor(findModel("fashion-fast"), mnist).flip);  // digits do not
        QCOMPARE(preprocessingFor(findModel("fashion-wide"), fashion).translate, 2);
        QVERIFY(preprocessingFor(findModel("fashion-fast"), fashion).normalization ==
                Preprocessing::Normalization::MeanStd);
    }

    void refusals()
    {
        try {
            preprocessingFor(findModel("cifar10-tutorial"), dataset("fashion-mnist", 28, 1));
            QFAIL("a 3-channel model accepted 1-channel images");
        } catch (const InvalidArgument& e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(
                         "takes 24x24x3 images; fashion-mnist has 28x28x1"),
                     e.what());
        }
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, preprocessingFor(findModel("fashion-fast"),
                                                                   dataset("cifar10", 32, 3)));
        // Any class count from 2 is the dataset's to choose (the model is built with it); one
        // class is nothing to learn.
        QCOMPARE(preprocessingFor(findModel("fashion-fast"), dataset("emnist", 28, 1, 26)).channels,
                 1);
        try {
            preprocessingFor(findModel("fashion-fast"), dataset("one-class", 28, 1, 1));
            QFAIL("a dataset of one class was accepted");
        } catch (const InvalidArgument& e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains("1 classes; a model classifies 2 to"),
                     e.what());
        }
    }
};

QTEST_APPLESS_MAIN(TestRecipe)
#include "tst_recipe.moc"
