// Learning-rate schedules: hand-computed values at the boundaries, and every step of a run
// against the torch.optim.lr_scheduler that corresponds (tests/optim_crosscheck.py).
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <numbers>

#include "engine/io/safetensors.h"
#include "engine/optim/lr_schedule.h"
#include "python_oracle.h"

using namespace towers::engine;
using namespace towers::test;

namespace {

LrSchedule make(LrSchedule::Kind kind, double lr)
{
    LrSchedule s;
    s.kind = kind;
    s.lr = lr;
    return s;
}

bool close(double a, double b)
{
    return std::fabs(a - b) <= 1e-12 * std::max(1.0, std::fabs(b));
}

// The learning rates of every step of an 83-step run (7 steps per epoch) for optim_crosscheck.py.
void writeExchange(const QString& file, const std::string& kind, const std::string& variant)
{
    LrSchedule s;
    s.kind = LrSchedule::kindFromName(kind);
    s.lr = 0.3;
    s.decayRate = 0.5;
    s.decayEpochs = 1.5;
    s.staircase = variant == "staircase";
    s.gamma = 0.3;
    s.milestones = {3, 7, 8};
    s.warmupEpochs = variant == "warmup" ? 2 : 0;
    s.minLr = 0.01;
    s.warmupFraction = 0.25;
    s.cosineAnneal = variant != "linear";
    s.divFactor = 10;
    s.finalDivFactor = 100;
    s.validate();
    const std::int64_t perEpoch = 7, total = 83;
    Tensor lr({total}, DType::Float64);
    for (std::int64_t i = 0; i < total; ++i) lr.data<double>()[i] = s.at(i, perEpoch, total);
    auto num = [](double v) { return QString::number(v, 'g', 17).toStdString(); };
    writeSafeTensors(file.toStdString(), {{"lr", lr}},
                     {{"kind", "schedule"},
                      {"schedule", kind},
                      {"lr", num(s.lr)},
                      {"decayRate", num(s.decayRate)},
                      {"decayEpochs", num(s.decayEpochs)},
                      {"staircase", s.staircase ? "true" : "false"},
                      {"gamma", num(s.gamma)},
                      {"milestones", "3,7,8"},
                      {"warmupEpochs", num(s.warmupEpochs)},
                      {"minLr", num(s.minLr)},
                      {"warmupFraction", num(s.warmupFraction)},
                      {"anneal", s.cosineAnneal ? "cos" : "linear"},
                      {"divFactor", num(s.divFactor)},
                      {"finalDivFactor", num(s.finalDivFactor)},
                      {"steps", std::to_string(total)},
                      {"stepsPerEpoch", std::to_string(perEpoch)}});
}

} // namespace

class TestLrSchedule : public QObject
{
    Q_OBJECT
private slots:
    void constant()
    {
        const LrSchedule s = make(LrSchedule::Kind::Constant, 0.05);
        QCOMPARE(s.at(0, 10, 100), 0.05);
        QCOMPARE(s.at(99, 10, 100), 0.05);
    }

    // The tutorial: 0.1 x 0.1^floor(step / decay_steps), decay_steps = int(batches per epoch x
    // 350).
    void tutorialExponential()
    {
        LrSchedule s = make(LrSchedule::Kind::Exponential, 0.1);
        s.decayRate = 0.1;
        s.decayEpochs = 350;
        const std::int64_t perEpoch = 390, decaySteps = 390 * 350, total = 1000000;
        QCOMPARE(s.at(0, perEpoch, total), 0.1);
        QCOMPARE(s.at(decaySteps - 1, perEpoch, total), 0.1);
        QVERIFY(close(s.at(decaySteps, perEpoch, total), 0.01));
        QVERIFY(close(s.at(2 * decaySteps + 5, perEpoch, total), 0.001));
        s.staircase = false;
        QVERIFY(close(s.at(decaySteps / 2, perEpoch, total), 0.1 * std::pow(0.1, 0.5)));
        // A fractional number of decay epochs: int(10 * 2.5) = 25 steps.
        s.staircase = true;
        s.decayEpochs = 2.5;
        QCOMPARE(s.at(24, 10, 100), 0.1);
        QVERIFY(close(s.at(25, 10, 100), 0.01));
    }

    void step()
    {
        LrSchedule s = make(LrSchedule::Kind::Step, 0.4);
        s.gamma = 0.5;
        s.milestones = {2, 5};
        QCOMPARE(s.at(19, 10, 100), 0.4);
        QCOMPARE(s.at(20, 10, 100), 0.2);
        QCOMPARE(s.at(49, 10, 100), 0.2);
        QCOMPARE(s.at(50, 10, 100), 0.1);
        QCOMPARE(s.at(99, 10, 100), 0.1);
    }

    void cosine()
    {
        LrSchedule s = make(LrSchedule::Kind::Cosine, 1.0);
        s.warmupEpochs = 1;
        s.minLr = 0.1;
        // Warm-up over the first 10 steps: (step + 1) / 10.
        QVERIFY(close(s.at(0, 10, 110), 0.1));
        QVERIFY(close(s.at(4, 10, 110), 0.5));
        QVERIFY(close(s.at(9, 10, 110), 1.0));
        // Then a half cosine over the remaining 100 steps from 1.0 to 0.1.
        QVERIFY(close(s.at(10, 10, 110), 1.0));
        QVERIFY(close(s.at(60, 10, 110), 0.55));
        QVERIFY(close(s.at(109, 10, 110), 0.1 + 0.9 * (1 + std::cos(std::numbers::pi * 0.99)) / 2));
        s.warmupEpochs = 0;
        QVERIFY(close(s.at(0, 10, 100), 1.0));
        QVERIFY(close(s.at(50, 10, 100), 0.55));
    }

    void oneCycle()
    {
        LrSchedule s = make(LrSchedule::Kind::OneCycle, 0.5);
        s.warmupFraction = 0.3;
        s.divFactor = 25;
        s.finalDivFactor = 1e4;
        s.cosineAnneal = false;
        const double initial = 0.5 / 25, last = initial / 1e4;
        // Up linearly until step 0.3 * 101 - 1 = 29.3, then down linearly to step 100.
        QVERIFY(close(s.at(0, 10, 101), initial));
        QVERIFY(close(s.at(29, 10, 101), initial + (0.5 - initial) * 29 / 29.3));
        QVERIFY(close(s.at(100, 10, 101), last));
        QVERIFY(close(s.at(30, 10, 101), 0.5 + (last - 0.5) * (0.7 / 70.7)));
        s.cosineAnneal = true;
        QVERIFY(close(s.at(29, 10, 101),
                      initial + (0.5 - initial) * 29 / 29.3)); // still a linear way up
        QVERIFY(close(s.at(100, 10, 101), last));
        QVERIFY(close(s.at(65, 10, 101),
                      last + (0.5 - last) * (1 + std::cos(std::numbers::pi * 35.7 / 70.7)) / 2));
        QVERIFY(s.at(100, 10, 101) < 1e-5); // about zero at the end
    }

    void validation()
    {
        LrSchedule s = make(LrSchedule::Kind::Exponential, 0.1);
        s.decayRate = 1.5;
        try {
            s.validate();
            QFAIL("accepted a decay rate of 1.5");
        } catch (const InvalidArgument& e) {
            QVERIFY2(QString::fromUtf8(e.what()).startsWith(QLatin1String("schedule.decayRate")),
                     e.what());
        }
        LrSchedule st = make(LrSchedule::Kind::Step, 0.1);
        st.milestones = {5, 3};
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, st.validate());
        LrSchedule c = make(LrSchedule::Kind::Cosine, 0.1);
        c.minLr = 0.2;
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, c.validate());
        LrSchedule o = make(LrSchedule::Kind::OneCycle, 0.1);
        o.warmupFraction = 1.0;
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, o.validate());
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, make(LrSchedule::Kind::Constant, -1).validate());
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 make(LrSchedule::Kind::Constant, 0.1).at(0, 0, 10));
        QVERIFY_THROWS_EXCEPTION(UnknownName, LrSchedule::kindFromName("linear-warmup"));
        for (auto k :
             {LrSchedule::Kind::Constant, LrSchedule::Kind::Exponential, LrSchedule::Kind::Step,
              LrSchedule::Kind::Cosine, LrSchedule::Kind::OneCycle})
            QVERIFY(LrSchedule::kindFromName(LrSchedule::kindName(k)) == k);
    }

    // Every step of a run against the corresponding torch scheduler, all variants in one run of
    // the oracle.
    void matchesTorch()
    {
        const QString script = oracleScript(QStringLiteral("optim_crosscheck.py"));
        QVERIFY2(!script.isEmpty(), "tests/optim_crosscheck.py not found (TOWERS_SOURCE_DIR)");
        if (!torchAvailable())
            QSKIP("Debian's python3-torch is not importable by /usr/bin/python3 "
                  "(packaging/install-deps.sh --test)");
        const std::pair<const char*, const char*> variants[] = {
            {"exponential", "staircase"},
            {"exponential", "smooth"},
            {"step", ""},
            {"cosine", ""},
            {"cosine", "warmup"},
            {"onecycle", "linear"},
            {"onecycle", "cos"},
        };
        QTemporaryDir dir;
        QStringList names;
        for (const auto& [kind, variant] : variants) {
            const QString name =
                QString::fromLatin1(kind) +
                (*variant ? QLatin1Char('-') + QString::fromLatin1(variant) : QString()) +
                QStringLiteral(".safetensors");
            writeExchange(dir.filePath(name), kind, variant);
            names << name;
        }
        QStringList args;
        for (const auto& n : names) args << dir.filePath(n);
        args << QStringLiteral("--tol") << QStringLiteral("1e-9");
        const OracleRun r = runOracle(script, args);
        if (r.exitCode == 77) QSKIP(qPrintable(QStringLiteral("PyTorch unavailable: ") + r.output));
        QVERIFY2(r.exitCode == 0, qPrintable(r.output));
        for (const auto& n : names) {
            const QString section = oracleSection(r.output, n);
            QVERIFY2(sectionPassed(section), qPrintable(n + QStringLiteral(": ") + section));
            qInfo().noquote() << n << section.split(QLatin1Char('\n')).last();
        }
    }
};

QTEST_APPLESS_MAIN(TestLrSchedule)
#include "tst_lr_schedule.moc"
