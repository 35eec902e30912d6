// The learning-rate range test: the rate rises exponentially from the lowest to the highest over
// the steps, the loss is smoothed with bias correction, the test stops when the loss runs away
// (a huge rate makes it), or when the caller says so; the suggestion is where the smoothed loss
// falls fastest against log lr, else a tenth of the minimum's rate; bad options are refused.
#include <QtTest>

#include <cmath>
#include <filesystem>

#include "checkpoint_files.h"
#include "dataset_files.h"
#include "engine/data/dataset_spec.h"
#include "engine/errors.h"
#include "engine/train/lr_range_test.h"
#include "engine/train/recipe.h"

using namespace towers;

class TestLrRangeTest : public QObject
{
    Q_OBJECT
    QTemporaryDir m_dir;
    engine::Dataset m_data;

    engine::TrainConfig config() const
    {
        engine::TrainConfig c = engine::defaultConfigFor("fashion-fast");
        c.dataset = "mnist";
        c.towers = 2;
        c.batchPerTower = 16;
        c.threadsPerTower = 1;
        return c;
    }

private slots:
    void initTestCase()
    {
        const std::filesystem::path root = m_dir.path().toStdString();
        test::writeIdxDataset(root / "mnist", 400, 20, 28, 28, false, 5);
        m_data = engine::loadDataset("mnist", root / "mnist");
    }

    // A curve with a known steepest point: smoothed = -tanh(log10(lr) + 2) until 1e-1, then up.
    void suggestion()
    {
        engine::LrRangeResult r;
        for (int i = 0; i <= 60; ++i) {
            engine::LrRangePoint p;
            p.step = i;
            p.lr = std::pow(10.0, -5 + i * 0.1); // 1e-5 .. 1e1
            const double x = std::log10(p.lr);
            p.smoothed = x < -1 ? -std::tanh(x + 2) : -std::tanh(1.0) + 3 * (x + 1);
            r.points.push_back(p);
        }
        engine::suggestLearningRate(r);
        QVERIFY2(std::abs(std::log10(r.steepestLr) + 2) < 0.11,
                 qPrintable(QString::number(r.steepestLr)));
        QCOMPARE(r.suggestedLr, r.steepestLr);
        QVERIFY(std::abs(std::log10(r.minimumLr) + 1) < 0.11);
        // A fall of 2 % only: noise, a tenth of the minimum's rate.
        for (auto& p : r.points)
            p.smoothed = 2.3 - 0.046 * std::exp(-std::pow(std::log10(p.lr) + 2, 2));
        engine::suggestLearningRate(r);
        QCOMPARE(r.steepestLr, 0.0);
        QVERIFY(std::abs(std::log10(r.suggestedLr) + 3) < 0.11);
        // Rising from the start: no descent, a tenth of the minimum's rate.
        for (auto& p : r.points) p.smoothed = p.lr;
        engine::suggestLearningRate(r);
        QCOMPARE(r.steepestLr, 0.0);
        QCOMPARE(r.suggestedLr, r.points.front().lr / 10);
        QVERIFY(r.note.find("tenth") != std::string::npos);
        r.points.resize(3);
        engine::suggestLearningRate(r);
        QCOMPARE(r.suggestedLr, 0.0);
    }

    void sweepsAndStopsWhenTheLossRunsAway()
    {
        engine::LrRangeOptions o;
        o.minLr = 1e-4;
        o.maxLr = 1e4;
        o.steps = 40;
        std::vector<engine::LrRangePoint> seen;
        const auto r = engine::runLrRangeTest(config(), m_data, o, [&](const auto& p) {
            seen.push_back(p);
            return true;
        });
        QVERIFY(r.diverged);
        QVERIFY(!r.stopped);
        QVERIFY(r.points.size() >= 5 && r.points.size() < 40);
        QCOMPARE(seen.size() >= r.points.size(), true);
        QCOMPARE(r.points.front().lr, 1e-4);
        for (std::size_t i = 0; i < r.points.size(); ++i) {
            const double expected = 1e-4 * std::pow(1e8, double(i) / 39);
            QVERIFY(std::abs(r.points[i].lr / expected - 1) < 1e-12);
            QVERIFY(std::isfinite(r.points[i].loss));
        }
        // The first smoothed loss is the first loss (bias-corrected average).
        QVERIFY(std::abs(r.points.front().smoothed - r.points.front().loss) < 1e-12);
        QVERIFY(r.suggestedLr > 0 && r.suggestedLr < r.points.back().lr);
    }

    void callerStops()
    {
        engine::LrRangeOptions o;
        o.minLr = 1e-5;
        o.maxLr = 1e-3;
        o.steps = 30;
        const auto r =
            engine::runLrRangeTest(config(), m_data, o, [](const auto& p) { return p.step < 5; });
        QVERIFY(r.stopped && !r.diverged);
        QCOMPARE(r.points.size(), std::size_t(6));
    }

    // From a checkpoint (a fine-tuning run's test): its weights, not the seed's.
    void startsFromTheCheckpoint()
    {
        engine::LrRangeOptions o;
        o.minLr = 1e-6;
        o.maxLr = 1e-5;
        o.steps = 5;
        const auto seedOnly = engine::runLrRangeTest(config(), m_data, o);
        engine::TrainConfig c = config();
        const std::filesystem::path same =
            m_dir.filePath(QStringLiteral("same.safetensors")).toStdString();
        const std::filesystem::path other =
            m_dir.filePath(QStringLiteral("other.safetensors")).toStdString();
        test::writeFreshCheckpoint("fashion-fast", m_data, same, c.seed);
        test::writeFreshCheckpoint("fashion-fast", m_data, other, c.seed + 1);
        c.initFrom = same.string();
        const auto fromSame = engine::runLrRangeTest(c, m_data, o);
        c.initFrom = other.string();
        const auto fromOther = engine::runLrRangeTest(c, m_data, o);
        QCOMPARE(fromSame.points.size(), seedOnly.points.size());
        for (std::size_t i = 0; i < seedOnly.points.size(); ++i)
            QCOMPARE(fromSame.points[i].loss, seedOnly.points[i].loss);
        QVERIFY(fromOther.points.front().loss != seedOnly.points.front().loss);
        c.initFrom = m_dir.filePath(QStringLiteral("missing.safetensors")).toStdString();
        QVERIFY_THROWS_EXCEPTION(engine::Error, engine::runLrRangeTest(c, m_data, o));
    }

    void refusals()
    {
        engine::LrRangeOptions o;
        o.minLr = 0;
        QVERIFY_THROWS_EXCEPTION(engine::InvalidArgument, o.validate());
        o = {};
        o.maxLr = o.minLr;
        QVERIFY_THROWS_EXCEPTION(engine::InvalidArgument, o.validate());
        o = {};
        o.steps = 2;
        QVERIFY_THROWS_EXCEPTION(engine::InvalidArgument, o.validate());
        engine::TrainConfig c = config();
        c.batchPerTower = 1000; // more than the 400 training images
        QVERIFY_THROWS_EXCEPTION(engine::InvalidArgument,
                                 engine::runLrRangeTest(c, m_data, engine::LrRangeOptions{}));
    }
};

QTEST_GUILESS_MAIN(TestLrRangeTest)
#include "tst_lr_range_test.moc"
