// The recipes: a default model per dataset, a valid configuration per model, and preprocessing
// that fits the dataset (or a refusal that says why).
#include <QtTest>

#include "engine/models/registry.h"
#include "engine/train/recipe.h"

using namespace towers::engine;

namespace {

Dataset dataset(const std::string& name, int side, int channels, int classes = 10)
{
    Dataset d;
    d.name = name;
    for (int i = 0; i < classes; ++i) d.classNames.push_back("c" + std::to_string(i));
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
        QVERIFY_THROWS_EXCEPTION(UnknownName,
                                 defaultModelFor("cifar100")); // 100 classes: no built-in net
        QVERIFY_THROWS_EXCEPTION(UnknownName, defaultModelFor("imagenet"));
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
        const Preprocessing tutorial = preprocessingFor("cifar10-tutorial", cifar);
        QCOMPARE(tutorial.height, 24); // the seeds' 24x24 crops
        QVERIFY(tutorial.flip && tutorial.brightnessDelta == 63);
        QVERIFY(tutorial.normalization == Preprocessing::Normalization::PerImage);
        const Preprocessing resnet = preprocessingFor("cifar10-resnet", cifar);
        QCOMPARE(resnet.height, 32);
        QCOMPARE(resnet.translate, 4);
        QVERIFY(preprocessingFor("fashion-fast", fashion).flip); // clothes mirror
        QVERIFY(!preprocessingFor("fashion-fast", mnist).flip);  // digits do not
        QCOMPARE(preprocessingFor("fashion-wide", fashion).translate, 2);
        QVERIFY(preprocessingFor("fashion-fast", fashion).normalization ==
                Preprocessing::Normalization::MeanStd);
    }

    void refusals()
    {
        try {
            preprocessingFor("cifar10-tutorial", dataset("fashion-mnist", 28, 1));
            QFAIL("a 3-channel model accepted 1-channel images");
        } catch (const InvalidArgument& e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(
                         "takes 24x24x3 images; fashion-mnist has 28x28x1"),
                     e.what());
        }
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 preprocessingFor("fashion-fast", dataset("cifar10", 32, 3)));
        try {
            preprocessingFor("fashion-fast", dataset("emnist", 28, 1, 26));
            QFAIL("a 10-class model accepted 26 classes");
        } catch (const InvalidArgument& e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains("10 classes"), e.what());
        }
    }
};

QTEST_APPLESS_MAIN(TestRecipe)
#include "tst_recipe.moc"
