// The run configuration: its JSON form round-trips every field, and bad values are refused with
// a message naming the field; whether its precision runs here, and why not.
#include <QtTest>

#include <algorithm>
#include <thread>

#include "engine/cpu/cores.h"
#include "engine/cpu/cpu_info.h"
#include "engine/cpu/onednn_ops.h"
#include "engine/data/dataset_content.h"
#include "engine/gpu/gpu_backend.h"
#include "engine/train/train_config.h"

using namespace towers::engine;

namespace {

void expectRefused(const std::string& json, const char* words)
{
    try {
        TrainConfig::fromJson(json);
        QFAIL(qPrintable(QStringLiteral("accepted: ") + QString::fromStdString(json)));
    } catch (const InvalidArgument& e) {
        QVERIFY2(QString::fromUtf8(e.what()).contains(QLatin1String(words)), e.what());
    }
}

} // namespace

// A configuration from before runs across processes (no "processes" field) is one process's.
int s_processesDefault()
{
    return towers::engine::TrainConfig::fromJson(R"({"steps": 1})").processes;
}

class TestTrainConfig : public QObject
{
    Q_OBJECT
private slots:
    void defaultsNeedALength()
    {
        TrainConfig c;
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, c.validate()); // neither steps nor epochs
        c.steps = 10;
        c.validate();
        QCOMPARE(c.totalSteps(390), std::int64_t(10));
        c.steps = 0;
        c.epochs = 2.5;
        QCOMPARE(c.totalSteps(390), std::int64_t(975));
        c.epochs = 0.001;
        QCOMPARE(c.totalSteps(390), std::int64_t(1));
        // Beyond what an int64 counts: refused, never a run of 1 step (the cast's undefined
        // result, INT64_MIN, raised to 1).
        c.epochs = TrainConfig::kMaxEpochs;
        QCOMPARE(c.totalSteps(390), std::int64_t(390000000));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, c.totalSteps(std::int64_t(1) << 62));
        c.threadsPerTower = 0;
        c.towers = 2;
        QVERIFY(c.resolvedThreadsPerTower() >= 1);
        // The cores are shared out among the towers of every process of a run on those cores.
        const int cores = towers::engine::cpu::usableCores();
        QCOMPARE(c.resolvedThreadsPerTower(2), std::max(1, cores / 4));
        c.threadsPerTower = 3;
        QCOMPARE(c.resolvedThreadsPerTower(2), 3);
    }

    void jsonRoundTrip()
    {
        TrainConfig c;
        c.model = "fashion-fast";
        c.backend = "reference";
        c.towers = 3;
        c.processes = 4;
        c.threadsPerTower = 2;
        c.batchPerTower = 17;
        c.steps = 1234;
        c.epochs = 1.5;
        c.optimizer.kind = "nesterov";
        c.optimizer.momentum = 0.85;
        c.optimizer.beta1 = 0.7;
        c.optimizer.beta2 = 0.9;
        c.optimizer.epsilon = 1e-6;
        c.schedule.kind = LrSchedule::Kind::Step;
        c.schedule.lr = 0.3;
        c.schedule.gamma = 0.2;
        c.schedule.milestones = {3, 9};
        c.schedule.cosineAnneal = false;
        c.weightDecay = 5e-4;
        c.emaDecay = 0.9999;
        c.labelSmoothing = 0.15;
        c.clipGradNorm = 2.5;
        c.accumulate = 3;
        c.sampling = "balanced";
        c.dropout = false;
        c.seed = 18446744073709551615ull;
        c.checkpointEvery = 50;
        c.keepCheckpoints = 2;
        c.evalEvery = 100;
        c.evalBatchSize = 500;
        c.validation = 0.125;
        c.patience = 4;
        c.minDelta = 0.0025;
        c.logEvery = 7;
        c.verifyEvery = 9;
        c.dataset = "fashion-mnist";
        c.dataDir = "/data/fashion";
        c.datasetContent =
            R"({"classes":["a","b"],"test":{"crc32":7,"examples":2},"train":{"crc32":9,"examples":4}})";
        c.augmentation = "off";
        c.precision = Precision::BFloat16;
        const TrainConfig r = TrainConfig::fromJson(c.toJson());
        QVERIFY(r.precision == Precision::BFloat16);
        QVERIFY(c.toJson().find(R"("precision": "bf16")") != std::string::npos);
        QCOMPARE(r.toJson(), c.toJson());
        QCOMPARE(r.datasetContent, c.datasetContent);
        QVERIFY(c.toJson().find(R"("datasetContent": {)") != std::string::npos); // an object
        QCOMPARE(r.seed, c.seed);
        QCOMPARE(r.processes, 4);
        QCOMPARE(r.validation, 0.125);
        QCOMPARE(r.patience, 4);
        QCOMPARE(r.minDelta, 0.0025);
        QCOMPARE(r.labelSmoothing, 0.15);
        QCOMPARE(TrainConfig::fromJson(R"({"steps": 1})").labelSmoothing, 0.0); // an older run's
        QCOMPARE(r.clipGradNorm, 2.5);
        QCOMPARE(TrainConfig::fromJson(R"({"steps": 1})").clipGradNorm, 0.0); // no clipping
        QCOMPARE(r.accumulate, 3);
        QCOMPARE(r.examplesPerTowerStep(), std::int64_t(3) * r.batchPerTower);
        QCOMPARE(TrainConfig::fromJson(R"({"steps": 1})").accumulate, 1); // an older run's
        QCOMPARE(r.sampling, std::string("balanced"));
        QCOMPARE(TrainConfig::fromJson(R"({"steps": 1})").sampling, std::string("uniform"));
        QCOMPARE(s_processesDefault(), 1);
        QCOMPARE(r.schedule.milestones, c.schedule.milestones);
        QCOMPARE(r.optimizer.kind, std::string("nesterov"));
        QVERIFY(!r.dropout);
        // A GPU run's towers and TF32 choice.
        TrainConfig g;
        g.steps = 3;
        g.backend = "cuda";
        g.towers = 3;
        g.gpus = {0, 1, 0};
        g.allowTf32 = true;
        g.gpuData = "off";
        QVERIFY(g.cudaGraphs); // on by default
        QVERIFY(g.toJson().find(R"("cudaGraphs": true)") != std::string::npos);
        g.cudaGraphs = false;
        QVERIFY(!g.cudnnBenchmark); // cuDNN's heuristics by default
        g.cudnnBenchmark = true;
        const TrainConfig gr = TrainConfig::fromJson(g.toJson());
        QVERIFY(gr.cudnnBenchmark);
        QVERIFY(gr.toJson().find(R"("cudnnBenchmark": true)") != std::string::npos);
        QCOMPARE(gr.gpus, g.gpus);
        QVERIFY(gr.allowTf32);
        QCOMPARE(gr.gpuData, std::string("off"));
        QVERIFY(!gr.cudaGraphs);
        QVERIFY(gr.toJson().find(R"("cudaGraphs": false)") != std::string::npos);
        QCOMPARE(gr.toJson(), g.toJson());
        // Short forms and defaults.
        const TrainConfig s = TrainConfig::fromJson(
            R"({"steps": 5, "optimizer": "adam", "schedule": "cosine", "lr": 0.001})");
        QCOMPARE(s.optimizer.kind, std::string("adam"));
        QVERIFY(s.schedule.kind == LrSchedule::Kind::Cosine);
        QCOMPARE(s.schedule.lr, 0.001);
        QCOMPARE(s.model, std::string("cifar10-tutorial"));
        QCOMPARE(s.gpuData, std::string("auto")); // absent (a run from before it): auto
        QVERIFY(s.cudaGraphs);                    // absent (a run from before it): on
        QVERIFY(!s.cudnnBenchmark);               // absent: cuDNN's heuristics
        QCOMPARE(s.validation, 0.0);              // absent (a run from before it): the test set
        QCOMPARE(s.patience, 0);                  // absent: never stops early
        QCOMPARE(s.minDelta, 0.0);                // absent: any gain is better
        QVERIFY(TrainConfig::fromJson(R"({"steps": 1, "cudaGraphs": true})").cudaGraphs);
        // A run from before --precision is float32; the name as --precision spells it.
        QVERIFY(s.precision == Precision::Float32);
        QVERIFY(s.toJson().find(R"("precision": "fp32")") != std::string::npos);
        QVERIFY(TrainConfig::fromJson(R"({"steps": 1, "precision": "bf16"})").precision ==
                Precision::BFloat16);
    }

    // The record of what a run trained on, and how another differs from it, in words.
    void datasetContentRecords()
    {
        Dataset d;
        d.name = std::string("x"); // not `= "x"`: GCC 12 warns falsely (-Wrestrict, PR 105329)
        d.classNames = {"cat", "dog"};
        d.train.count = 2;
        d.train.height = d.train.width = d.train.channels = 1;
        d.train.pixels = {1, 2};
        d.train.labels = {0, 1};
        d.test = d.train;
        const std::string record = datasetContent(d);
        QCOMPARE(datasetContentChange(record, record), std::string());
        QCOMPARE(*datasetContentClasses(record), d.classNames);
        // What the processes of a run compare: the examples and checksums, a line each.
        const QString lines = QString::fromStdString(datasetContentLines(record));
        QVERIFY2(QRegularExpression(QStringLiteral("^training examples 2, CRC-32 \\d+\ntest "
                                                   "examples 2, CRC-32 \\d+$"))
                     .match(lines)
                     .hasMatch(),
                 qPrintable(lines));
        Dataset e = d;
        e.classNames = {"dog", "cat"};
        e.test.pixels[0] = 9;
        e.train.count = 1;
        e.train.pixels.pop_back();
        e.train.labels.pop_back();
        const std::string change = datasetContentChange(record, datasetContent(e));
        QVERIFY2(change.find("its classes were cat, dog, they are dog, cat; its training set had "
                             "2 examples, it has 1; its test set has the same number of examples "
                             "(2) but other images or labels (CRC-32 ") == 0,
                 change.c_str());
        QVERIFY(!datasetContentClasses("{}"));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, datasetContentChange("nonsense", record));
    }

    void precisionWhereItRuns()
    {
        for (const char* backend : {"onednn", "reference", "cuda"})
            QCOMPARE(TrainConfig::precisionUnavailable(backend, Precision::Float32), std::string());
        const std::string cpu = TrainConfig::precisionUnavailable("onednn", Precision::BFloat16);
        QCOMPARE(cpu.empty(), cpu::cpuInfo().bf16);
        QCOMPARE(cpu, cpu::bf16Unavailable());
        const std::string ref = TrainConfig::precisionUnavailable("reference", Precision::BFloat16);
        QVERIFY2(ref.find("the reference backend is the float32 and float64 oracle") !=
                     std::string::npos,
                 ref.c_str());
        bool capable = false; // a GPU that runs bfloat16
        if (GpuBackend* gpu = cudaBackend())
            for (int g = 0; g < gpu->deviceCount(); ++g)
                capable = capable || gpu->deviceInfo(g).computeMajor >= 8;
        const std::string gpuWhy = TrainConfig::precisionUnavailable("cuda", Precision::BFloat16);
        QCOMPARE(gpuWhy.empty(), capable);
        if (!capable) QVERIFY2(gpuWhy.rfind("--precision bf16 ", 0) == 0, gpuWhy.c_str());
        TrainConfig c;
        c.steps = 1;
        c.backend = "reference";
        c.checkPrecision(); // float32
        c.precision = Precision::BFloat16;
        c.validate(); // a configuration that does not run here is still a valid one (config.json)
        try {
            c.checkPrecision();
            QFAIL("bf16 on the reference backend was accepted");
        } catch (const Unsupported& e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(QStringLiteral("--precision bf16")),
                     e.what());
        }
        c.backend = "onednn";
        if (cpu.empty())
            c.checkPrecision();
        else
            QVERIFY_THROWS_EXCEPTION(Unsupported, c.checkPrecision());
    }

    void refusedNamingTheField_data()
    {
        QTest::addColumn<QString>("json");
        QTest::addColumn<QString>("words");
        QTest::newRow("not json") << "{steps: 1"
                                  << "not valid JSON";
        QTest::newRow("not an object") << "[1]"
                                       << "expected a JSON object";
        QTest::newRow("unknown field") << R"({"steps": 1, "lerningRate": 0.1})"
                                       << "lerningRate: unknown field";
        QTest::newRow("unknown nested")
            << R"({"steps": 1, "schedule": {"kind": "step", "gama": 2}})"
            << "schedule.gama: unknown field";
        QTest::newRow("wrong type") << R"({"steps": 1, "towers": "two"})"
                                    << "towers: expected an integer";
        QTest::newRow("negative seed") << R"({"steps": 1, "seed": -1})"
                                       << "seed: expected an integer >= 0";
        QTest::newRow("towers") << R"({"steps": 1, "towers": 0})"
                                << "towers: must be in [1, 256]";
        QTest::newRow("processes") << R"({"steps": 1, "processes": 0})"
                                   << "processes: must be in [1, 65536]";
        QTest::newRow("batch") << R"({"steps": 1, "batchPerTower": 0})"
                               << "batchPerTower: must be at least 1";
        QTest::newRow("length") << R"({"steps": 0, "epochs": 0})"
                                << "steps: give the length of the run";
        QTest::newRow("dataset content") << R"({"steps": 1, "datasetContent": {"classes": 3}})"
                                         << "datasetContent: expected the record of a dataset's";
        QTest::newRow("epochs") << R"({"epochs": 1e16})"
                                << "epochs: must be a number from 0 to 1e+06, got 1e+16";
        QTest::newRow("steps") << R"({"steps": 9223372036854775807})"
                               << "steps: must be a number from 0 to 1000000000000, got "
                                  "9223372036854775807";
        QTest::newRow("model") << R"({"steps": 1, "model": "resnet-1000"})"
                               << "model: unknown model 'resnet-1000'";
        QTest::newRow("backend") << R"({"steps": 1, "backend": "tpu"})"
                                 << "backend: must be onednn, reference or cuda";
        QTest::newRow("gpus on the cpu") << R"({"steps": 1, "gpus": [0]})"
                                         << "gpus: only for the cuda backend";
        QTest::newRow("gpus per tower")
            << R"({"steps": 1, "backend": "cuda", "towers": 2, "gpus": [0]})"
            << "gpus: names 1 GPUs for 2 towers";
        QTest::newRow("gpus not numbers") << R"({"steps": 1, "backend": "cuda", "gpus": ["a"]})"
                                          << "gpus: expected GPU numbers";
        QTest::newRow("gpu data") << R"({"steps": 1, "gpuData": "always"})"
                                  << "gpuData: must be auto or off, got 'always'";
        QTest::newRow("cuda graphs") << R"({"steps": 1, "cudaGraphs": "on"})"
                                     << "cudaGraphs: expected true or false";
        QTest::newRow("cudnn benchmark") << R"({"steps": 1, "cudnnBenchmark": 1})"
                                         << "cudnnBenchmark: expected true or false";
        QTest::newRow("optimizer") << R"({"steps": 1, "optimizer": "rmsprop"})"
                                   << "unknown optimizer 'rmsprop'";
        QTest::newRow("nesterov")
            << R"({"steps": 1, "optimizer": {"kind": "nesterov", "dampening": 0.1}})"
            << "optimizer: ";
        QTest::newRow("schedule kind") << R"({"steps": 1, "schedule": "triangle"})"
                                       << "schedule.kind: unknown learning-rate schedule";
        QTest::newRow("decay rate")
            << R"({"steps": 1, "schedule": {"kind": "exponential", "decayRate": 2}})"
            << "schedule.decayRate";
        QTest::newRow("anneal")
            << R"({"steps": 1, "schedule": {"kind": "onecycle", "anneal": "cubic"}})"
            << "schedule.anneal";
        QTest::newRow("milestones")
            << R"({"steps": 1, "schedule": {"kind": "step", "milestones": [1.5]}})"
            << "schedule.milestones";
        QTest::newRow("lr") << R"({"steps": 1, "lr": 0})"
                            << "schedule.lr";
        QTest::newRow("ema") << R"({"steps": 1, "emaDecay": 1.0})"
                             << "emaDecay: must be in [0, 1)";
        QTest::newRow("label smoothing") << R"({"steps": 1, "labelSmoothing": -0.1})"
                                         << "labelSmoothing: must be in [0, 1)";
        QTest::newRow("clip") << R"({"steps": 1, "clipGradNorm": -1})"
                              << "clipGradNorm: must be a finite number >= 0";
        QTest::newRow("sampling") << R"({"steps": 1, "sampling": "weighted"})"
                                  << "sampling: must be uniform or balanced, got 'weighted'";
        QTest::newRow("accumulate") << R"({"steps": 1, "accumulate": 0})"
                                    << "accumulate: must be in [1, 4096]";
        QTest::newRow("accumulated batch")
            << R"({"steps": 1, "batchPerTower": 1048576, "accumulate": 4096})"
            << "accumulate: batchPerTower x accumulate must be at most 2147483647";
        QTest::newRow("keep") << R"({"steps": 1, "keepCheckpoints": 0})"
                              << "keepCheckpoints: must be at least 1";
        QTest::newRow("log") << R"({"steps": 1, "logEvery": 0})"
                             << "logEvery: must be at least 1";
        QTest::newRow("dropout") << R"({"steps": 1, "dropout": 1})"
                                 << "dropout: expected true or false";
        QTest::newRow("precision") << R"({"steps": 1, "precision": "fp16"})"
                                   << "precision: unknown precision 'fp16' (known: fp32, bf16)";
        QTest::newRow("precision type") << R"({"steps": 1, "precision": 16})"
                                        << "precision: expected a string";
        QTest::newRow("validation") << R"({"steps": 1, "validation": 0.6})"
                                    << "validation: must be a share in [0, 0.5]";
        QTest::newRow("validation negative") << R"({"steps": 1, "validation": -0.1})"
                                             << "validation: must be a share in [0, 0.5]";
        QTest::newRow("patience") << R"({"steps": 1, "evalEvery": 5, "patience": -1})"
                                  << "patience: must be >= 0";
        QTest::newRow("minDelta negative")
            << R"({"steps": 1, "evalEvery": 5, "patience": 2, "minDelta": -0.01})"
            << "minDelta: must be a share of precision @ 1 in [0, 0.5]";
        QTest::newRow("minDelta above half") << R"({"steps": 1, "minDelta": 0.6})"
                                             << "minDelta: must be a share of precision @ 1";
        QTest::newRow("patience without evaluations")
            << R"({"steps": 1, "patience": 3})"
            << "patience: counts evaluations, and evalEvery is 0";
    }
    void refusedNamingTheField()
    {
        QFETCH(QString, json);
        QFETCH(QString, words);
        expectRefused(json.toStdString(), words.toUtf8().constData());
    }
};

QTEST_APPLESS_MAIN(TestTrainConfig)
#include "tst_train_config.moc"
