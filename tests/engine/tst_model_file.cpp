// Networks from model files (engine/models/model_file.h): a file that writes out a built-in model
// builds that model exactly (layers, names, the same weights from a seed), and so does every
// built-in model written as a file by Towers (modelFileText, saveModelFile); every layer type's
// options reach the layer (tst_models checks the gradients of that network and oneDNN against the
// reference, as for every built-in model); every mistake in a file is refused with a message
// naming the field; the definition travels in a run's configuration and its checkpoints, and one
// text is one network.
#include <QtTest>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "engine/data/dataset_spec.h"
#include "engine/models/model_file.h"
#include "engine/models/registry.h"
#include "engine/train/checkpoint.h"
#include "engine/train/classifier.h"
#include "engine/train/recipe.h"
#include "gradcheck.h"
#include "model_files.h"
#include "resident_memory.h"

using namespace towers::engine;
using namespace towers::test;

namespace {

// A definition with `layers` (JSON text of the array) on 12x12x3 input.
std::string withLayers(const std::string& layers, const std::string& extra = {})
{
    return R"({"name": "t", "input": [12, 12, 3], "layers": )" + layers + extra + "}";
}

const char* kHead = R"([{"type": "conv2d", "filters": 4}, {"type": "flatten"}, )";

// A model file's name for a built-in model's layer ("layer1.res1.conv": "layer1_res1_conv").
std::string fileName(std::string name)
{
    std::replace(name.begin(), name.end(), '.', '_');
    return name;
}

// `mine` is `builtIn` (its names as a model file writes them): the same layer table, and from one
// seed the same state_dict, bitwise, with the same weight decay on each tensor.
void compareRows(const std::vector<LayerRow>& a, const std::vector<LayerRow>& b)
{
    QCOMPARE(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        QCOMPARE(a[i].name, fileName(b[i].name));
        QCOMPARE(a[i].kind, b[i].kind);
        QCOMPARE(a[i].description, b[i].description);
        QCOMPARE(a[i].outputShape, b[i].outputShape);
        QCOMPARE(a[i].parameters, b[i].parameters);
        compareRows(a[i].children, b[i].children); // a block's layers
    }
}

void compareNetworks(Model& mine, Model& builtIn)
{
    compareRows(mine.layerTable(), builtIn.layerTable());
    mine.initialize(5);
    builtIn.initialize(5);
    QCOMPARE(mine.parameters().size(), builtIn.parameters().size());
    for (std::size_t i = 0; i < mine.parameters().size(); ++i) {
        const Parameter& p = *mine.parameters()[i];
        const Parameter& q = *builtIn.parameters()[i];
        const std::size_t dot = q.name.rfind('.'); // "<layer>.<tensor>"
        QCOMPARE(p.name, fileName(q.name.substr(0, dot)) + q.name.substr(dot));
        QCOMPARE(p.value.shape(), q.value.shape());
        QCOMPARE(p.trainable, q.trainable);
        QCOMPARE(p.weightDecay, q.weightDecay);
        QCOMPARE(maxAbsDiff(p.value, q.value), 0.0);
    }
}

// A run's configuration as JSON, less what tells the models apart (its name and definition) and
// the optimizer's and schedule's fields their kinds ignore.
nlohmann::json trainingOf(const TrainConfig& c)
{
    nlohmann::json o = nlohmann::json::parse(c.toJson());
    o.erase("model");
    o.erase("modelDefinition");
    auto keep = [&](const char* key, std::vector<std::string> fields) {
        fields.push_back("kind");
        nlohmann::json kept;
        for (const auto& f : fields) kept[f] = o[key][f];
        o[key] = kept;
    };
    keep("optimizer", optimizerFields(c.optimizer.kind));
    keep("schedule", LrSchedule::fieldsOf(c.schedule.kind));
    return o;
}

} // namespace

class TestModelFile : public QObject
{
    Q_OBJECT
    QTemporaryDir m_dir;

private slots:
    // fashion-fast written as a file is fashion-fast: the same table, state_dict and weights.
    void sameAsBuiltIn()
    {
        const ModelInfo info = modelFromDefinition(fashionFastDefinition(), "fast.json");
        QCOMPARE(info.name, std::string("fast-file"));
        QCOMPARE(info.inputShape, (Shape{28, 28, 1}));
        auto mine = buildModel(info, 10);
        auto builtIn = buildModel("fashion-fast", 10);
        compareNetworks(*mine, *builtIn);
        // Another class count builds another classifier.
        QCOMPARE(buildModel(info, 3)->parameter("fc2.weight").value.shape(), (Shape{3, 128}));
        // No recipe: the fast trainers' (TrainConfig's fields where it says nothing).
        const TrainConfig c = defaultConfigFor(info);
        QCOMPARE(c.model, std::string("fast-file"));
        QCOMPARE(c.modelDefinition, info.definition);
        QCOMPARE(c.optimizer.kind, std::string("nesterov"));
        QCOMPARE(c.schedule.kind, LrSchedule::Kind::OneCycle);
        QCOMPARE(c.batchPerTower, 128);
        QCOMPARE(c.epochs, 10.0);
        QCOMPARE(c.weightDecay, 5e-4);
    }

    // Every layer type's options reach the layer, and the file's recipe and augmentation reach
    // the run's configuration.
    void everyLayer()
    {
        const ModelInfo info = modelFromDefinition(everyLayerDefinition(), "every.json");
        QCOMPARE(info.description, std::string("every layer type"));
        auto m = buildModel(info, 5);
        m->initialize(3);
        QStringList names;
        for (const auto& row : m->layerTable()) names << QString::fromStdString(row.name);
        QCOMPARE(names, (QStringList{"conv1", "norm1", "bn1", "pool1", "res1", "avgpool1", "conv3",
                                     "concat1", "avgpool2", "flatten", "drop1", "fc1", "fc2"}));
        const auto rows = m->layerTable();
        QCOMPARE(rows[0].outputShape, (Shape{1, 6, 6, 6})); // stride 2, one pixel of padding
        QCOMPARE(rows[3].outputShape, (Shape{1, 6, 6, 6})); // 3x3 SAME, stride 1
        QCOMPARE(rows[5].outputShape, (Shape{1, 3, 3, 6})); // 3x3 SAME, stride 2
        QCOMPARE(rows[5].description, std::string("3x3 average pool, stride 2, SAME"));
        // The branches side by side: 4 + 3 channels and the 8 passed through.
        QCOMPARE(rows[7].outputShape, (Shape{1, 3, 3, 15}));
        QCOMPARE(rows[7].description, std::string("concat of 3 branches (1 | 2 | 0 layers)"));
        // Its branches under it, each with its layers; the residual block's layers under it.
        const auto& branches = rows[7].children;
        QCOMPARE(branches.size(), std::size_t(3));
        QCOMPARE(branches[1].name, std::string("branch 2"));
        QCOMPARE(branches[1].kind, std::string("branch"));
        QCOMPARE(branches[1].outputShape, (Shape{1, 3, 3, 3}));
        QCOMPARE(branches[1].parameters, std::int64_t(3 * 8 * 9));
        QCOMPARE(branches[1].children.size(), std::size_t(2));
        QCOMPARE(branches[1].children[1].name, std::string("tower"));
        QCOMPARE(branches[2].description, std::string("the input itself"));
        QCOMPARE(branches[2].outputShape, (Shape{1, 3, 3, 8}));
        QVERIFY(branches[2].children.empty());
        QCOMPARE(rows[4].children.size(), std::size_t(2));
        QCOMPARE(rows[4].children[0].name, std::string("inner"));
        QVERIFY(m->parameter("conv4.weight").value.shape() == (Shape{4, 8, 1, 3})); // [1, 3]
        QVERIFY(m->parameter("tower.weight").value.shape() == (Shape{3, 8, 3, 3}));
        QCOMPARE(rows[8].outputShape, (Shape{1, 1, 1, 15})); // global
        QCOMPARE(rows[8].description, std::string("global average pool"));
        QVERIFY(m->parameter("inner.weight").value.numel() == 6 * 6 * 9);
        QVERIFY_THROWS_EXCEPTION(UnknownName, m->parameter("fc2.bias"));
        QCOMPARE(m->parameter("conv1.weight").weightDecay, 0.01);
        QCOMPARE(m->parameter("conv1.bias").value.at(3), 0.05f);
        QVERIFY(QString::fromStdString(rows[1].description).contains("radius 2"));
        QCOMPARE(info.augmentation.translate, 2);
        QCOMPARE(info.augmentation.flip, false);
        const TrainConfig c = defaultConfigFor(info);
        QCOMPARE(c.optimizer.kind, std::string("adam"));
        QCOMPARE(c.schedule.lr, 0.002);
        QCOMPARE(c.schedule.kind, LrSchedule::Kind::Constant);
        QCOMPARE(c.steps, std::int64_t(300));
        QCOMPARE(c.epochs, 0.0); // the file's length replaces the default's
        QCOMPARE(c.batchPerTower, 16);
        QCOMPARE(c.weightDecay, 5e-4); // the default recipe's, which the file left alone
        QCOMPARE(c.labelSmoothing, 0.05);

        // A classifier of more weights than a layer may have, for a dataset of many classes:
        // refused when the model is built with them, before it allocates.
        const ModelInfo wide = modelFromDefinition(
            R"({"name": "w", "input": [64, 64, 1], "layers": [{"type": "flatten"},
                {"type": "linear", "units": "classes", "bias": false}]})",
            "w.json");
        QCOMPARE(buildModel(wide, 1000)->parameterCount(), 4096 * 1000);
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, buildModel(wide, 100000));
    }

    void mistakes_data()
    {
        QTest::addColumn<QString>("definition");
        QTest::addColumn<QString>("message");
        const QString head = QString::fromLatin1(kHead);
        auto layers = [](const QString& l) {
            return QString::fromStdString(withLayers(l.toStdString()));
        };
        QTest::newRow("not json") << "{\"name\": "
                                  << "t.json: not valid JSON";
        QTest::newRow("not an object") << "[1]"
                                       << "t.json: expected a JSON object";
        // Brackets 100,000 deep (200 KB): refused as they are read, never quoted back (a quote
        // of them recursed once per level and overflowed the stack).
        QTest::newRow("nested too deep")
            << QStringLiteral(R"({"name": "deep", "input": [12, 12, 3], "layers": %1})")
                   .arg(QString(100000, QLatin1Char('[')) + QString(100000, QLatin1Char(']')))
            << "t.json: not valid JSON: [json.exception.parse_error.101] parse error at byte 177: "
               "nested more than 128 levels deep";
        QTest::newRow("deep but within bounds")
            << QStringLiteral(R"({"name": "deep", "input": [12, 12, 3], "layers": %1})")
                   .arg(QString(127, QLatin1Char('[')) + QString(127, QLatin1Char(']')))
            << "t.json: layers[0]: expected a layer object, got [[[[";
        QTest::newRow("no name") << R"({"input": [12, 12, 3], "layers": []})"
                                 << "t.json: name: missing";
        QTest::newRow("built-in name")
            << R"({"name": "cifar10-resnet", "input": [12, 12, 3], "layers": []})"
            << "t.json: name: \"cifar10-resnet\" is a built-in model's";
        QTest::newRow("bad model name")
            << R"({"name": "my net", "input": [12, 12, 3], "layers": []})"
            << "t.json: name: expected";
        QTest::newRow("unknown top field")
            << QString::fromStdString(withLayers("[]", R"(, "optimiser": {})"))
            << "t.json: optimiser: unknown field";
        QTest::newRow("no input") << R"({"name": "t", "layers": []})"
                                  << "t.json: input: missing";
        QTest::newRow("input of two") << R"({"name": "t", "input": [12, 12], "layers": []})"
                                      << "t.json: input: expected [height, width, channels]";
        QTest::newRow("no layers") << layers("[]") << "a network needs at least one layer";
        QTest::newRow("layers not a list") << layers("{}") << "layers: expected an array";
        QTest::newRow("unknown type")
            << layers(R"([{"type": "dense", "units": 3}])")
            << R"(t.json: layers[0]: "type": expected one of avgpool, batchnorm, concat, conv2d, dropout, flatten, linear, lrn, maxpool, residual, got "dense")";
        QTest::newRow("no type") << layers(R"([{"units": 3}])") << "layers[0]: \"type\"";
        QTest::newRow("unknown field")
            << layers(head + R"({"type": "linear", "units": "classes", "unit": 3}])")
            << "t.json: layers[2] (fc1): unit: unknown field (this one takes activation, bias";
        QTest::newRow("filters missing")
            << layers(R"([{"type": "conv2d"}])") << "layers[0] (conv1): filters: missing";
        QTest::newRow("kernel 0")
            << layers(R"([{"type": "conv2d", "filters": 3, "kernel": 0}])")
            << "layers[0] (conv1): kernel: expected an integer from 1 to 64, got 0";
        QTest::newRow("kernel of three sides")
            << layers(R"([{"type": "conv2d", "filters": 3, "kernel": [1, 3, 3]}])")
            << "layers[0] (conv1): kernel: expected a side or [height, width], each from 1 to 64, "
               "got [1,3,3]";
        QTest::newRow("kernel side 0")
            << layers(R"([{"type": "conv2d", "filters": 3, "kernel": [0, 3]}])")
            << "kernel: expected a side or [height, width]";
        QTest::newRow("filters not a number")
            << layers(R"([{"type": "conv2d", "filters": "many"}])")
            << "filters: expected an integer from 1 to 65536, got \"many\"";
        QTest::newRow("bad padding")
            << layers(R"([{"type": "conv2d", "filters": 3, "padding": "full"}])")
            << "padding: expected \"same\", \"valid\" or the zeros added on each side";
        QTest::newRow("bad activation")
            << layers(R"([{"type": "conv2d", "filters": 3, "activation": "gelu"}])")
            << "activation: expected \"relu\" or \"none\", got \"gelu\"";
        QTest::newRow("bad init")
            << layers(R"([{"type": "conv2d", "filters": 3, "weight_init": {"normal": 0}}])")
            << "weight_init: expected \"torch\", \"glorot\"";
        QTest::newRow("too many weights")
            << layers(R"([{"type": "conv2d", "filters": 65536, "kernel": 64}])")
            << "layers[0] (conv1): 805306368 weights, more than a layer may have (268435456)";
        QTest::newRow("window too large")
            << layers(R"([{"type": "maxpool", "size": 13}])") << "layers[0] (pool1): ";
        QTest::newRow("global with a size")
            << layers(R"([{"type": "maxpool", "global": true, "size": 2}])")
            << "global: a global pool takes no size, stride or padding";
        QTest::newRow("linear on an image")
            << layers(R"([{"type": "linear", "units": "classes"}])")
            << "layers[0] (fc1): takes features, but its input is the image 12x12x3: put a "
               "{\"type\": \"flatten\"}";
        QTest::newRow("conv on features")
            << layers(head + R"({"type": "conv2d", "filters": 3}])")
            << "layers[2] (conv2): takes images [H, W, C], but its input is 576 features";
        QTest::newRow("no classifier") << layers(head + R"({"type": "linear", "units": 10}])")
                                       << "layers[2] (fc1): the last layer must be the classifier";
        QTest::newRow("classes in the middle")
            << layers(
                   head +
                   R"({"type": "linear", "units": "classes"}, {"type": "linear", "units": "classes"}])")
            << "layers[2] (fc1): units: \"classes\" is for the last layer";
        QTest::newRow("dropout rate 1")
            << layers(head +
                      R"({"type": "dropout", "rate": 1}, {"type": "linear", "units": "classes"}])")
            << "rate: expected a number from 0 to below 1, got 1";
        QTest::newRow("residual changes the shape")
            << layers(R"([{"type": "residual", "layers": [{"type": "conv2d", "filters": 8}]}])")
            << "layers[0] (res1): its layers turn 12x12x3 into 12x12x8";
        QTest::newRow("mistake inside a residual")
            << layers(
                   R"([{"type": "residual", "layers": [{"type": "conv2d", "filters": 3, "kernel": 99}]}])")
            << "t.json: layers[0] (res1): layers[0] (conv1): kernel: expected an integer";
        QTest::newRow("concat without branches")
            << layers(R"([{"type": "concat"}])") << "layers[0] (concat1): branches: missing";
        QTest::newRow("concat of one branch")
            << layers(R"([{"type": "concat", "branches": [[]]}])")
            << "layers[0] (concat1): branches: expected two or more arrays of layers";
        QTest::newRow("concat branch not a list")
            << layers(R"([{"type": "concat", "branches": [[], {"type": "flatten"}]}])")
            << "t.json: layers[0] (concat1): branches[1]: expected an array of layers";
        QTest::newRow("concat branch shrinks the image")
            << layers(R"([{"type": "concat", "branches": [[], [{"type": "maxpool", "size": 2}]]}])")
            << "t.json: layers[0] (concat1): branches[1]: turns 12x12x3 into 6x6x3; the branches "
               "are joined along the channels";
        QTest::newRow("concat branch flattens")
            << layers(R"([{"type": "concat", "branches": [[], [{"type": "flatten"}]]}])")
            << "branches[1]: turns 12x12x3 into 432 features";
        QTest::newRow("mistake inside a branch")
            << layers(
                   R"([{"type": "concat", "branches": [[], [{"type": "conv2d", "filters": 0}]]}])")
            << "t.json: layers[0] (concat1): branches[1][0] (conv1): filters: expected an integer";
        QTest::newRow("concat of features")
            << layers(head + R"({"type": "concat", "branches": [[], []]}])")
            << "layers[2] (concat1): takes images [H, W, C], but its input is 576 features";
        {
            // Eight blocks, residual and concat by turns, one inside the other.
            QString nested = QStringLiteral(R"({"type": "conv2d", "filters": 3})");
            for (int i = 0; i < 8; ++i)
                nested = i % 2
                             ? QStringLiteral(R"({"type": "residual", "layers": [%1]})").arg(nested)
                             : QStringLiteral(R"({"type": "concat", "branches": [[%1], []]})")
                                   .arg(nested);
            QTest::newRow("blocks nested too deep")
                << layers("[" + nested + "]")
                << "(concat4): blocks (residual, concat) nest at most 7 deep";
        }
        QTest::newRow("two layers of a name")
            << layers(
                   R"([{"type": "conv2d", "filters": 4, "name": "a"}, {"type": "flatten", "name": "a"}, {"type": "linear", "units": "classes"}])")
            << "layers[1] (a): name: \"a\" names another layer too";
        QTest::newRow("a checkpoint's own name")
            << layers(
                   R"([{"type": "flatten", "name": "optim"}, {"type": "linear", "units": "classes"}])")
            << "\"optim\" is kept for the checkpoint's own tensors";
        QTest::newRow("a dotted layer name")
            << layers(
                   R"([{"type": "flatten", "name": "a.b"}, {"type": "linear", "units": "classes"}])")
            << "layers[0] (a.b): name: expected 1 to 64 letters, digits, '_' or '-', got \"a.b\"";
        QTest::newRow("augmentation kind")
            << QString::fromStdString(
                   withLayers(R"([{"type": "flatten"}, {"type": "linear", "units": "classes"}])",
                              R"(, "augmentation": {"kind": "mixup"})"))
            << "t.json: augmentation: kind: expected \"translate\" or \"distorted-inputs\"";
        QTest::newRow("recipe not an object")
            << QString::fromStdString(
                   withLayers(R"([{"type": "flatten"}, {"type": "linear", "units": "classes"}])",
                              R"(, "recipe": 3)"))
            << "t.json: recipe: expected an object";
    }
    void mistakes()
    {
        QFETCH(QString, definition);
        QFETCH(QString, message);
        try {
            (void)modelFromDefinition(definition.toStdString(), "t.json");
            QFAIL("accepted");
        } catch (const InvalidArgument& e) {
            QVERIFY2(QString::fromStdString(e.what()).contains(message), e.what());
        }
    }

    // A recipe's mistakes are the configuration's, named with the model.
    void recipeMistakes()
    {
        const auto info = [](const std::string& recipe) {
            return modelFromDefinition(
                withLayers(R"([{"type": "flatten"}, {"type": "linear", "units": "classes"}])",
                           R"(, "recipe": )" + recipe),
                "t.json");
        };
        auto refused = [&](const std::string& recipe, const char* message) {
            try {
                (void)defaultConfigFor(info(recipe));
                return QString("accepted");
            } catch (const InvalidArgument& e) {
                return QString::fromStdString(e.what()).contains(QLatin1String(message))
                           ? QString()
                           : QString::fromStdString(e.what());
            }
        };
        QVERIFY(refused(R"({"towers": 2})", "model 't': recipe: towers: unknown field").isEmpty());
        QVERIFY(refused(R"({"lr": -1})", "model 't': recipe: schedule.lr").isEmpty());
        QVERIFY(refused(R"({"optimizer": {"kind": "rmsprop"}})", "unknown optimizer 'rmsprop'")
                    .isEmpty());
        QCOMPARE(defaultConfigFor(info(R"({"optimizer": {"momentum": 0.8}})")).optimizer.kind,
                 std::string("nesterov")); // the default's kind, the file's momentum
        QCOMPARE(defaultConfigFor(info(R"({"optimizer": {"momentum": 0.8}})")).optimizer.momentum,
                 0.8);
    }

    // One network, one text: spacing and key order do not matter; another text of the same name
    // is another network; the text must name the model it is resolved for.
    void oneTextOneNetwork()
    {
        const std::string a =
            withLayers(R"([{"type": "flatten"}, {"type": "linear", "units": "classes"}])");
        const std::string b =
            R"({ "layers" : [ {"type":"flatten"}, {"units":"classes","type":"linear"} ],
                                   "input":[12,12,3], "name":"t" })";
        const std::string flat =
            R"({"input":[12,12,3],"layers":[{"type":"flatten"},{"type":"linear","units":"classes"}],"name":"t"})";
        QCOMPARE(canonicalModelDefinition(a, "a"), flat);
        QCOMPARE(canonicalModelDefinition(b, "b"), flat);
        const std::string other = withLayers(
            R"([{"type": "flatten"}, {"type": "linear", "units": "classes", "bias": false}])");
        const ModelInfo& first = resolveModel("t", canonicalModelDefinition(a, "a"));
        QCOMPARE(&resolveModel("t", flat), &first);
        const ModelInfo& second = resolveModel("t", canonicalModelDefinition(other, "other"));
        QVERIFY(&second != &first); // the same name, another network
        QCOMPARE(buildModel(second, 3)->parameters().size(), std::size_t(1));
        QCOMPARE(buildModel(first, 3)->parameters().size(), std::size_t(2));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, resolveModel("u", flat));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, resolveModel("t", "{"));
        QCOMPARE(&resolveModel("fashion-fast", ""), &findModel("fashion-fast"));
        QVERIFY(namesModelFile("net.json"));
        QVERIFY(namesModelFile("models/net"));
        QVERIFY(!namesModelFile("fashion-fast"));
    }

    // The run's configuration keeps the definition (config.json and every checkpoint), so a
    // checkpoint classifies without the file.
    void travelsWithTheRun()
    {
        const ModelInfo info = modelFromDefinition(everyLayerDefinition(), "every.json");
        TrainConfig c = defaultConfigFor(info);
        c.classes = 4;
        const TrainConfig back = TrainConfig::fromJson(c.toJson());
        QCOMPARE(back.modelDefinition, info.definition);
        QCOMPARE(back.model, std::string("every-layer"));
        QVERIFY(nlohmann::json::parse(c.toJson())["modelDefinition"].is_object());
        // A configuration whose definition is not valid names the field.
        auto broken = nlohmann::json::parse(c.toJson());
        broken["modelDefinition"]["layers"] = nlohmann::json::array();
        try {
            (void)TrainConfig::fromJson(broken.dump());
            QFAIL("accepted");
        } catch (const InvalidArgument& e) {
            QVERIFY2(QString(e.what()).contains("model: the model definition of 'every-layer': "
                                                "layers: a network needs at least one layer"),
                     e.what());
        }

        auto model = buildModel(info, 4);
        model->initialize(2);
        CheckpointInfo ci;
        ci.dataset = "tiny";
        ci.classNames = {"a", "b", "c", "d"};
        ci.preprocessing = distortedInputs({12, 12, 3}).toJson();
        ci.config = c.toJson();
        const std::filesystem::path file = m_dir.filePath("every.safetensors").toStdString();
        writeCheckpoint(file, makeCheckpoint(*model, ci));
        QCOMPARE(readCheckpointInfo(file).modelDefinition, info.definition);
        Classifier classifier(file, false, 1);
        QCOMPARE(classifier.info().model, std::string("every-layer"));
        QCOMPARE(classifier.numClasses(), 4);
    }

    // Every built-in model written as a model file (towers-cli models NAME --save) reads back as
    // that model: the same network and weights from a seed, the same training configuration,
    // augmentation, input and dataset; and written again, the same text.
    void builtInsWrittenAsFiles_data()
    {
        QTest::addColumn<QString>("model");
        for (const ModelInfo& m : modelRegistry())
            QTest::newRow(m.name.c_str()) << QString::fromStdString(m.name);
    }
    void builtInsWrittenAsFiles()
    {
        QFETCH(QString, model);
        const ModelInfo& builtIn = findModel(model.toStdString());
        const std::string name = "my-" + builtIn.name;
        const std::string text = modelFileText(builtIn, name, modelFileRecipeFields(builtIn));
        const ModelInfo file = modelFromDefinition(text, "mine.json");
        QCOMPARE(file.name, name);
        QCOMPARE(file.inputShape, builtIn.inputShape);
        QCOMPARE(file.defaultDataset, builtIn.defaultDataset);
        QVERIFY(file.description.starts_with(builtIn.description));
        QCOMPARE(file.augmentation.kind, builtIn.augmentation.kind);
        QCOMPARE(file.augmentation.translate, builtIn.augmentation.translate);
        QCOMPARE(file.augmentation.flip, builtIn.augmentation.flip);
        for (const int classes : {builtIn.numClasses, 3}) {
            auto mine = buildModel(file, classes);
            auto theirs = buildModel(builtIn, classes);
            compareNetworks(*mine, *theirs);
        }
        QCOMPARE(trainingOf(defaultConfigFor(file)), trainingOf(defaultConfigFor(builtIn)));
        QCOMPARE(modelFileText(file, name, modelFileRecipeFields(file)), text);
        // A layer a line: the file is for people to edit.
        const auto lines = std::count(text.begin(), text.end(), '\n');
        QVERIFY2(lines >= std::int64_t(buildModel(builtIn)->layerTable().size()), text.c_str());
    }

    // saveModelFile writes the file whole, and replaces one only when told to; the names it
    // takes and the name a file suggests.
    void savesAFile()
    {
        const std::filesystem::path path = m_dir.filePath("saved.json").toStdString();
        const ModelInfo& from = findModel("cifar10-resnet");
        saveModelFile(from, "saved", path, false);
        const ModelInfo& saved = readModelFile(path);
        QCOMPARE(saved.name, std::string("saved"));
        try {
            saveModelFile(findModel("fashion-fast"), "saved", path, false);
            QFAIL("replaced the file");
        } catch (const IoError& e) {
            QVERIFY2(QString(e.what()).contains("already exists; choose another output or pass "
                                                "--force to replace it"),
                     e.what());
        }
        QCOMPARE(&readModelFile(path), &saved); // untouched: the same text
        saveModelFile(findModel("fashion-fast"), "saved", path, true);
        QCOMPARE(readModelFile(path).inputShape, (Shape{28, 28, 1}));
        // Nothing but the file in the folder: no temporary file left behind.
        QCOMPARE(QDir(m_dir.path()).entryList(QDir::Files | QDir::Hidden).filter("saved"),
                 QStringList{"saved.json"});
        for (const char* bad : {"has space", "", "cifar10-resnet", ".dot"}) {
            try {
                saveModelFile(from, bad, m_dir.filePath("bad.json").toStdString(), false);
                QFAIL(bad);
            } catch (const InvalidArgument& e) {
                QVERIFY2(QString(e.what()).startsWith("the network's name: "), e.what());
            }
        }
        QVERIFY(!QFile::exists(m_dir.filePath("bad.json")));
        try {
            saveModelFile(from, "x", m_dir.path().toStdString(), true);
            QFAIL("wrote over a folder");
        } catch (const IoError& e) {
            QVERIFY2(QString(e.what()).contains("is a folder"), e.what());
        }
        QCOMPARE(modelNameForFile("nets/wide.json", "cifar10-resnet"), std::string("wide"));
        QCOMPARE(modelNameForFile("cifar10-resnet.json", "cifar10-resnet"),
                 std::string("my-cifar10-resnet"));
        QCOMPARE(modelNameForFile("a b.json", "fashion-fast"), std::string("my-fashion-fast"));
    }

    // The line a mistake points at, for the editor to mark: the field it names, else its layer
    // (nested in a residual block or a concat's branch too), a top-level field; nothing for what
    // the text lacks at the top or a message of another source.
    void mistakeLines_data()
    {
        QTest::addColumn<QString>("change"); // "old=>new" in the text below
        QTest::addColumn<int>("line");
        QTest::newRow("a field") << R"("kernel": 3=>"kernel": 0)" << 7;
        QTest::newRow("a missing field: its layer") << R"("filters": 8, =>)" << 5;
        QTest::newRow("a field on its own line") << R"("rate": 0.2=>"rate": 2)" << 17;
        QTest::newRow("a layer's type") << R"("type": "flatten"=>"type": "flat")" << 15;
        QTest::newRow("inside a residual block")
            << R"("filters": 4, "name": "inner"=>"filters": 4, "name": "inner", "bias": 1)" << 10;
        QTest::newRow("inside a branch")
            << R"("filters": 2, "kernel": [1, 3]=>"filters": 2, "kernel": [1, 0])" << 13;
        QTest::newRow("the shape a block makes") << R"("filters": 8}]}=>"filters": 9}]})" << 8;
        QTest::newRow("a top-level field") << R"("input": [12, 12, 3]=>"input": [12, 12])" << 3;
        QTest::newRow("a top-level field missing") << R"("input": [12, 12, 3],=>)" << 0;
        QTest::newRow("unknown top-level field")
            << R"("name": "t",=>"name": "t", "extra": 1,)" << 2;
    }
    void mistakeLines()
    {
        QFETCH(QString, change);
        QFETCH(int, line);
        std::string text = R"({
  "name": "t",
  "input": [12, 12, 3],
  "layers": [
    {"type": "conv2d",
     "bias": false,
     "filters": 8, "kernel": 3},
    {"type": "residual", "layers": [
      {"type": "conv2d",
       "filters": 4, "name": "inner"},
      {"type": "conv2d", "filters": 8}]},
    {"type": "concat", "branches": [[],
      [{"type": "conv2d", "filters": 2, "kernel": [1, 3]}]]},
    {"type": "maxpool", "global": true},
    {"type": "flatten"},
    {"type": "dropout",
     "rate": 0.2},
    {"type": "linear", "units": "classes"}]
})";
        QVERIFY(modelFromDefinition(text, "t.json").name == "t");
        const QStringList parts = change.split(QStringLiteral("=>"));
        const std::string from = parts[0].toStdString();
        QVERIFY2(text.find(from) != std::string::npos, from.c_str());
        text.replace(text.find(from), from.size(), parts[1].toStdString());
        try {
            (void)modelFromDefinition(text, "t.json");
            QFAIL("accepted");
        } catch (const InvalidArgument& e) {
            QVERIFY2(mistakeLine(text, "t.json", e.what()) == line,
                     (e.what() + std::string(": line ") +
                      std::to_string(mistakeLine(text, "t.json", e.what())))
                         .c_str());
        }
        QCOMPARE(mistakeLine(text, "t.json", "other.json: layers[0] (conv1): kernel: x"), 0);
        // Text that is not JSON ends the scan, never hangs it.
        const std::string nul("{\"layers\": [\n\0, }", 17);
        QCOMPARE(nul.size(), std::size_t(17));
        for (const std::string& broken :
             {nul, std::string("{\"layers\": [}}}"), std::string("[[[\n"),
              std::string("{\"a\" 1, \"layers\": [{\"type\": x}]}")})
            QVERIFY(mistakeLine(broken, "t.json", "t.json: layers[0] (c): kernel: x") >= 0);
        QCOMPARE(mistakeLine(text, "t.json", "t.json: model 't': recipe: lr: x"), 0);
        // Where the JSON breaks, as its parser says.
        const std::string unread = "{\n  \"name\": \"x\",\n  \"layers\": [,]\n}";
        try {
            (void)modelFromDefinition(unread, "t.json");
            QFAIL("accepted");
        } catch (const InvalidArgument& e) {
            QCOMPARE(mistakeLine(unread, "t.json", e.what()), 3);
        }
    }

    // The examples docs/models.md starts from (installed in /usr/share/doc/towers/examples) are
    // valid networks, their recipes too, each for its dataset's images.
    void examples()
    {
        int checked = 0;
        for (const auto& entry : std::filesystem::directory_iterator(TOWERS_MODEL_FILES)) {
            if (entry.path().extension() != ".json") continue;
            const ModelInfo& info = readModelFile(entry.path());
            QCOMPARE(info.name, entry.path().stem().string());
            const TrainConfig c = defaultConfigFor(info);
            QVERIFY(c.epochs > 0);
            const DatasetSpec* spec = findDatasetSpec(info.defaultDataset);
            QVERIFY2(spec, info.defaultDataset.c_str());
            QVERIFY(modelFits(info, spec->imageShape));
            QVERIFY(buildModel(info, int(spec->labels.numClasses))->parameterCount() > 0);
            ++checked;
        }
        QCOMPARE(checked, 3);
    }

    // A network of 3 GiB of weights is read, checked, built and counted without taking their
    // memory (the GUI's model page and model file editor do this as the user picks or types):
    // parameters take memory when initialised.
    void hugeNetworkTakesNoMemoryUntilInitialised()
    {
        const std::string text =
            R"({"name": "huge", "input": [128, 128, 1], "layers": [{"type": "flatten"},
                {"type": "linear", "units": 16384}, {"type": "linear", "units": 16384},
                {"type": "linear", "units": 16384}, {"type": "linear", "units": "classes"}]})";
        const std::int64_t before = residentBytes();
        std::unique_ptr<Model> model;
        try {
            model = buildModel(modelFromDefinition(text, "huge.json"), 10);
        } catch (const std::bad_alloc&) {
            QSKIP("the system does not set 3 GiB aside unwritten here (no overcommit, or "
                  "ulimit -v)");
        }
        QCOMPARE(model->parameterCount(), 3 * (std::int64_t(16384) * 16384 + 16384) + 163850);
        QCOMPARE(model->layerTable().size(), std::size_t(5));
        QVERIFY(model->trainingFlopsPerExample() > 1e9);
        QVERIFY2(residentBytes() - before < (std::int64_t(64) << 20),
                 qPrintable(QStringLiteral("%1 MiB resident after building a 3 GiB network")
                                .arg((residentBytes() - before) >> 20)));
    }

    // readModelFile: a file's problems are IoErrors naming it.
    void readsAFile()
    {
        const QString path = m_dir.filePath("net.json");
        {
            std::ofstream out(path.toStdString());
            out << fashionFastDefinition("from-file");
        }
        const ModelInfo& info = readModelFile(path.toStdString());
        QCOMPARE(info.name, std::string("from-file"));
        QCOMPARE(&readModelFile(path.toStdString()), &info);
        try {
            (void)readModelFile(m_dir.filePath("none.json").toStdString());
            QFAIL("accepted");
        } catch (const IoError& e) {
            QVERIFY2(QString(e.what()).contains("cannot read the model file"), e.what());
        }
        {
            std::ofstream out(path.toStdString());
            out << std::string(5 << 20, ' ') << fashionFastDefinition("from-file");
        }
        try {
            (void)readModelFile(path.toStdString());
            QFAIL("accepted");
        } catch (const IoError& e) {
            QVERIFY2(QString(e.what()).contains("bytes, more than a model file may have"),
                     e.what());
        }
        {
            std::ofstream out(path.toStdString());
            out << R"({"name": "from-file", "input": [1, 1, 1], "layers": [{"type": "flatten"}]})";
        }
        try {
            (void)readModelFile(path.toStdString());
            QFAIL("accepted");
        } catch (const IoError& e) {
            QVERIFY2(QString(e.what()).startsWith(path + ": layers[0] (flatten): the last layer"),
                     e.what());
        }
    }
};

QTEST_APPLESS_MAIN(TestModelFile)
#include "tst_model_file.moc"
