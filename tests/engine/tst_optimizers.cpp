// The optimizers: SGD (plain, momentum, Nesterov), Adam and AdamW against PyTorch's torch.optim on
// fixed tensors (tests/optim_crosscheck.py), in float32 on the oneDNN backend (1e-6 relative) and
// in float64 on the reference backend; a step skipped by its flag; their state for checkpoints; the
// weight-decay override.
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <cstring>
#include <limits>

#include "engine/cpu/cpu_common.h"
#include "engine/cpu/onednn_ops.h"
#include "engine/io/safetensors.h"
#include "engine/models/registry.h"
#include "engine/optim/adam.h"
#include "engine/optim/sgd.h"
#include "gradcheck.h"
#include "python_oracle.h"

using namespace towers::engine;
using namespace towers::test;

namespace {

// Three parameters (one large enough to be split over the OpenMP team) and one buffer.
struct Params
{
    std::vector<Parameter> storage;
    std::vector<Parameter*> list;

    Params(DType dtype, std::uint64_t seed)
    {
        Rng rng(seed);
        const std::vector<std::pair<std::string, Shape>> shapes = {
            {"conv.weight", {8, 3, 5, 5}}, {"conv.bias", {8}}, {"fc.weight", {64, 1100}}};
        for (const auto& [name, shape] : shapes)
            storage.push_back({name, randomTensor(shape, dtype, rng), {}, true, 0});
        storage.push_back({"bn.running_mean", randomTensor({8}, dtype, rng), {}, false, 0});
        for (auto& p : storage) list.push_back(&p);
    }
    void setGradients(Rng& rng)
    {
        for (auto& p : storage)
            if (p.trainable) p.grad = randomTensor(p.value.shape(), p.value.dtype(), rng, -2, 2);
    }
};

// The weights, the optimizers' slots and a moving average after three updates of every kind (with
// and without clipping) from one seeded state, as bytes (updatesAreTheSameOnEveryCpu).
QByteArray updateBytes()
{
    auto ops = cpu::makeOneDnnOps();
    QByteArray out;
    const auto append = [&](const Tensor& t) {
        out.append(static_cast<const char*>(t.raw()), qsizetype(t.bytes()));
    };
    for (const char* kind : {"sgd", "momentum", "nesterov", "adam", "adamw"})
        for (const double clip : {0.0, 1.0}) {
            Rng rng(11);
            const std::int64_t n = 2 * cpu::kChunk + 5;
            Parameter p{"w", randomTensor({n}, DType::Float32, rng),
                        randomTensor({n}, DType::Float32, rng, -2, 2), true, 0.01};
            std::vector<Parameter*> list{&p};
            OptimizerOptions o;
            o.kind = kind;
            auto opt = makeOptimizer(o);
            opt->setMaxGradNorm(clip);
            Tensor shadow = p.value.clone();
            for (int step = 0; step < 3; ++step) {
                opt->step(*ops, list, 0.05);
                ops->emaUpdate(0.1, p.value, shadow, {}, {});
            }
            append(p.value);
            append(shadow);
            for (const auto& [name, t] : opt->state(list)) append(t);
        }
    return out;
}

std::unique_ptr<Ops> opsFor(DType dtype)
{
    if (dtype == DType::Float64) return makeReferenceOps();
    cpu::setCpuThreads(2);
    return cpu::makeOneDnnOps();
}

// Runs 5 steps of an optimizer on fixed tensors and writes what optim_crosscheck.py checks. With
// `spoil`, one element of one result is off by 1e-3. With `clip` > 0, the gradients' global norm is
// clipped to it (Optimizer::setMaxGradNorm), and the clipped gradients are written too. Returns the
// number of steps whose gradients' norm was above `clip` (0 without clipping).
int writeExchange(const QString& file, const std::string& kind, double momentum, double dampening,
                  double beta1, double beta2, double epsilon, DType dtype, bool spoil,
                  double clip = 0)
{
    auto ops = opsFor(dtype);
    OptimizerOptions o;
    o.kind = kind;
    o.momentum = momentum;
    o.dampening = dampening;
    o.beta1 = beta1;
    o.beta2 = beta2;
    o.epsilon = epsilon;
    auto opt = makeOptimizer(o);
    if (opt->name() != kind)
        throw Error("optimizer '" + opt->name() + "' built for '" + kind + "'");
    opt->setMaxGradNorm(clip);

    Params ps(dtype, 3);
    // AdamW decays each weight by its own coefficient (a parameter group each in PyTorch); the
    // bias none, as the models' biases.
    std::string decays = "0,0,0";
    if (kind == "adamw") {
        ps.storage[0].weightDecay = 0.5;
        ps.storage[2].weightDecay = 0.1;
        decays = "0.5,0,0.1";
    }
    NamedTensors ex;
    const int trainable = 3, steps = 5;
    for (int i = 0; i < trainable; ++i)
        ex.emplace_back("param." + std::to_string(i), ps.storage[std::size_t(i)].value.clone());
    const Tensor bufferBefore = ps.storage[3].value.clone();
    const double scale = kind == "adam" || kind == "adamw" ? 0.01 : 1.0;
    const std::vector<double> lrs = {0.1 * scale, 0.05 * scale, 0.02 * scale, 0.08 * scale,
                                     0.01 * scale};
    Tensor lr({steps}, DType::Float64);
    Rng rng(11);
    int clipped = 0;
    for (int s = 0; s < steps; ++s) {
        lr.data<double>()[s] = lrs[std::size_t(s)];
        ps.setGradients(rng);
        for (int i = 0; i < trainable; ++i)
            ex.emplace_back("grad." + std::to_string(s) + "." + std::to_string(i),
                            ps.storage[std::size_t(i)].grad.clone());
        opt->step(*ops, ps.list, lrs[std::size_t(s)]);
        if (clip > 0 && opt->gradSumSquares().at(0) > clip * clip) ++clipped;
        for (int i = 0; clip > 0 && i < trainable; ++i)
            ex.emplace_back("clipped." + std::to_string(s) + "." + std::to_string(i),
                            ps.storage[std::size_t(i)].grad.clone());
        for (int i = 0; i < trainable; ++i) {
            Tensor after = ps.storage[std::size_t(i)].value.clone();
            if (spoil && s == 2 && i == 2) after.setAt(7, after.at(7) + 1e-3);
            ex.emplace_back("after." + std::to_string(s) + "." + std::to_string(i), after);
        }
    }
    if (opt->stepCount() != steps) throw Error("step count not kept");
    if (maxAbsDiff(ps.storage[3].value, bufferBefore) != 0.0)
        throw Error("a buffer was changed by the optimizer");
    ex.emplace_back("lr", lr);
    for (const auto& [name, t] : opt->state(ps.list)) {
        if (name == Optimizer::kStepName) continue;
        for (int i = 0; i < trainable; ++i) { // optim.<param>.<slot> -> state.<index>.<slot>
            const std::string prefix = "optim." + ps.storage[std::size_t(i)].name + ".";
            if (name.rfind(prefix, 0) == 0)
                ex.emplace_back("state." + std::to_string(i) + "." + name.substr(prefix.size()),
                                t.clone());
        }
    }
    auto num = [](double v) { return QString::number(v, 'g', 17).toStdString(); };
    writeSafeTensors(file.toStdString(), ex,
                     {{"kind", "optimizer"},
                      {"optimizer", kind},
                      {"momentum", num(momentum)},
                      {"dampening", num(dampening)},
                      {"beta1", num(beta1)},
                      {"beta2", num(beta2)},
                      {"epsilon", num(epsilon)},
                      {"weight_decay", decays},
                      {"clip_grad_norm", num(clip)},
                      {"steps", std::to_string(steps)},
                      {"params", std::to_string(trainable)},
                      // PyTorch sums a float32 norm in float32 (Towers in double): its clipping
                      // factor is off by up to ~7e-7 of itself.
                      {"tol", dtype == DType::Float64 ? "1e-12"
                              : clip > 0              ? "2e-6"
                                                      : "1e-6"}});
    return clipped;
}

// Every parameter (buffers too) and the optimizer's whole state, copied.
std::vector<Tensor> snapshot(Optimizer& opt, const Params& ps)
{
    std::vector<Tensor> out;
    for (const auto& p : ps.storage) out.push_back(p.value.clone());
    for (const auto& [name, t] : opt.state(ps.list)) out.push_back(t.clone());
    return out;
}

bool sameBytes(const std::vector<Tensor>& a, const std::vector<Tensor>& b)
{
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (a[i].shape() != b[i].shape() || a[i].dtype() != b[i].dtype() ||
            std::memcmp(a[i].raw(), b[i].raw(), a[i].bytes()) != 0)
            return false;
    return true;
}

} // namespace

class TestOptimizers : public QObject
{
    Q_OBJECT
private slots:
    // A few steps with varying learning rates on fixed tensors for every optimizer, in float32 on
    // oneDNN and float64 on the reference backend: every intermediate parameter and the final
    // state against torch.optim, all checked in one run of the oracle. A deliberately wrong file
    // rides along to show that the oracle does fail.
    void matchesTorch()
    {
        const QString script = oracleScript(QStringLiteral("optim_crosscheck.py"));
        QVERIFY2(!script.isEmpty(), "tests/optim_crosscheck.py not found (TOWERS_SOURCE_DIR)");
        if (!torchAvailable())
            QSKIP("Debian's python3-torch is not importable by /usr/bin/python3 "
                  "(packaging/install-deps.sh --test)");
        struct Case
        {
            const char* name;
            const char* kind;
            double momentum, dampening, beta1, beta2, epsilon;
            double clip = 0;
        };
        // The gradients' norm is about 308 (71,000 elements in [-2, 2]): clipped to 1 every step,
        // and to 307.8 on steps 2 to 4 only (their norms 307.58, 307.04, 308.24, 308.46, 308.00).
        const Case cases[] = {
            {"sgd", "sgd", 0, 0, 0.9, 0.999, 1e-8},
            {"momentum", "momentum", 0.9, 0, 0.9, 0.999, 1e-8},
            {"momentum-dampened", "momentum", 0.8, 0.3, 0.9, 0.999, 1e-8},
            {"nesterov", "nesterov", 0.9, 0, 0.9, 0.999, 1e-8},
            {"adam", "adam", 0, 0, 0.9, 0.999, 1e-8},
            {"adam-betas", "adam", 0, 0, 0.8, 0.95, 1e-3},
            {"adamw", "adamw", 0, 0, 0.9, 0.999, 1e-8},
            {"adamw-betas", "adamw", 0, 0, 0.8, 0.95, 1e-3},
            {"sgd-clipped", "sgd", 0, 0, 0.9, 0.999, 1e-8, 1.0},
            {"nesterov-clipped-some-steps", "nesterov", 0.9, 0, 0.9, 0.999, 1e-8, 307.8},
            {"adam-clipped", "adam", 0, 0, 0.9, 0.999, 1e-8, 1.0},
            {"adamw-clipped", "adamw", 0, 0, 0.9, 0.999, 1e-8, 0.5},
        };
        QTemporaryDir dir;
        QStringList files;
        for (bool f64 : {false, true}) {
            for (const Case& c : cases) {
                const QString name =
                    QString::fromLatin1(c.name) +
                    (f64 ? QStringLiteral("-f64-reference") : QStringLiteral("-f32-onednn"));
                const int clipped =
                    writeExchange(dir.filePath(name + QStringLiteral(".safetensors")), c.kind,
                                  c.momentum, c.dampening, c.beta1, c.beta2, c.epsilon,
                                  f64 ? DType::Float64 : DType::Float32, false, c.clip);
                QCOMPARE(clipped, c.clip == 0 ? 0 : c.clip < 300 ? 5 : 3);
                files << name;
            }
        }
        writeExchange(dir.filePath(QStringLiteral("wrong.safetensors")), "momentum", 0.9, 0, 0.9,
                      0.999, 1e-8, DType::Float32, true);
        QStringList args;
        for (const auto& f : files) args << dir.filePath(f + QStringLiteral(".safetensors"));
        args << dir.filePath(QStringLiteral("wrong.safetensors"));
        const OracleRun r = runOracle(script, args);
        if (r.exitCode == 77) QSKIP(qPrintable(QStringLiteral("PyTorch unavailable: ") + r.output));
        QVERIFY2(r.exitCode == 1, qPrintable(r.output)); // the wrong file, and only it, mismatches
        for (const auto& f : files) {
            const QString section = oracleSection(r.output, f + QStringLiteral(".safetensors"));
            QVERIFY2(sectionPassed(section), qPrintable(f + QStringLiteral(": ") + section));
            qInfo().noquote() << f << section.split(QLatin1Char('\n')).last();
        }
        const QString wrong = oracleSection(r.output, QStringLiteral("wrong.safetensors"));
        QVERIFY2(!wrong.isEmpty() && !sectionPassed(wrong) && wrong.contains(QLatin1String("FAIL")),
                 qPrintable(wrong));
    }

    // "optim.step" and "optim.<parameter>.<slot>" for trainable parameters only.
    void stateNames()
    {
        Params ps(DType::Float32, 1);
        Sgd plain;
        QCOMPARE(plain.state(ps.list).size(), std::size_t(1));
        QCOMPARE(plain.state(ps.list).front().first, std::string("optim.step"));
        Sgd momentum({0.9, 0, false});
        const auto ms = momentum.state(ps.list);
        QCOMPARE(ms.size(), std::size_t(4));
        QCOMPARE(ms[1].first, std::string("optim.conv.weight.momentum_buffer"));
        QCOMPARE(ms[1].second.shape(), ps.storage[0].value.shape());
        Adam adam;
        const auto as = adam.state(ps.list);
        QCOMPARE(as.size(), std::size_t(7));
        QCOMPARE(as[1].first, std::string("optim.conv.weight.exp_avg"));
        QCOMPARE(as[2].first, std::string("optim.conv.weight.exp_avg_sq"));
        QCOMPARE(as[6].first, std::string("optim.fc.weight.exp_avg_sq"));
    }

    // A restored optimizer continues exactly as the original (bitwise).
    void stateRoundTrip_data()
    {
        QTest::addColumn<QString>("kind");
        QTest::newRow("momentum") << "momentum";
        QTest::newRow("nesterov") << "nesterov";
        QTest::newRow("adam") << "adam";
    }
    void stateRoundTrip()
    {
        QFETCH(QString, kind);
        auto ops = opsFor(DType::Float32);
        OptimizerOptions o;
        o.kind = kind.toStdString();
        auto a = makeOptimizer(o);
        Params pa(DType::Float32, 4);
        Rng rng(9);
        for (int s = 0; s < 3; ++s) {
            pa.setGradients(rng);
            a->step(*ops, pa.list, 0.01);
        }
        NamedTensors saved;
        for (const auto& [n, t] : a->state(pa.list)) saved.emplace_back(n, t.clone());
        Params pb(DType::Float32, 4);
        for (std::size_t i = 0; i < pa.storage.size(); ++i)
            pb.storage[i].value.copyFrom(pa.storage[i].value);
        auto b = makeOptimizer(o);
        b->loadState(saved, pb.list);
        QCOMPARE(b->stepCount(), std::int64_t(3));
        Rng r1(5), r2(5);
        pa.setGradients(r1);
        pb.setGradients(r2);
        a->step(*ops, pa.list, 0.02);
        b->step(*ops, pb.list, 0.02);
        for (std::size_t i = 0; i < pa.storage.size(); ++i)
            QCOMPARE(maxAbsDiff(pa.storage[i].value, pb.storage[i].value), 0.0);
    }

    void stateRefused()
    {
        Params ps(DType::Float32, 1);
        Sgd momentum({0.9, 0, false});
        NamedTensors good;
        for (const auto& [n, t] : momentum.state(ps.list)) good.emplace_back(n, t.clone());

        auto expectError = [&](NamedTensors state, const char* words) {
            try {
                Sgd fresh({0.9, 0, false});
                fresh.loadState(state, ps.list);
                QFAIL("accepted a bad state");
            } catch (const InvalidArgument& e) {
                QVERIFY2(QString::fromUtf8(e.what()).contains(QLatin1String(words)), e.what());
            }
        };
        NamedTensors missing(good.begin(), good.end() - 1);
        expectError(missing, "'optim.fc.weight.momentum_buffer' is missing");
        NamedTensors noStep(good.begin() + 1, good.end());
        expectError(noStep, "'optim.step' is missing");
        NamedTensors wrongShape = good;
        wrongShape[1].second = Tensor::zeros({3}, DType::Float32);
        expectError(wrongShape, "'optim.conv.weight.momentum_buffer' is float32 [3]");
        NamedTensors wrongType = good;
        wrongType[1].second = wrongType[1].second.to(DType::Float64);
        expectError(wrongType, "float64");
        Adam adam;
        NamedTensors adamState;
        for (const auto& [n, t] : adam.state(ps.list)) adamState.emplace_back(n, t.clone());
        expectError(adamState, "is missing");
        NamedTensors extra = good;
        extra.emplace_back("optim.conv.weight.exp_avg",
                           Tensor::zeros({8, 3, 5, 5}, DType::Float32));
        expectError(extra, "unexpected tensor 'optim.conv.weight.exp_avg'");
    }

    // A step skipped by its flag (a NaN gradient flagged where the parameters live) leaves every
    // parameter and every slot as they were, bit for bit; once skipped() has uncounted it, the
    // run continues exactly as one that never took it (a skipped first step: the next is a
    // fresh optimizer's first, momentum's buffer set to g, Adam's bias correction at step 1).
    void skippedStepChangesNothing_data()
    {
        QTest::addColumn<QString>("kind");
        QTest::addColumn<bool>("f64");
        for (const char* kind : {"sgd", "momentum", "nesterov", "adam", "adamw"})
            for (const bool f64 : {false, true})
                QTest::newRow(qPrintable(QStringLiteral("%1 %2").arg(
                    kind, f64 ? QStringLiteral("f64 reference") : QStringLiteral("f32 onednn"))))
                    << QString::fromLatin1(kind) << f64;
    }
    void skippedStepChangesNothing()
    {
        QFETCH(QString, kind);
        QFETCH(bool, f64);
        const DType dtype = f64 ? DType::Float64 : DType::Float32;
        auto ops = opsFor(dtype);
        OptimizerOptions o;
        o.kind = kind.toStdString();
        const double lrs[] = {0.1, 0.05, 0.02, 0.08};
        for (const int skipAt : {0, 2}) {
            auto a = makeOptimizer(o), b = makeOptimizer(o);
            Params pa(dtype, 12), pb(dtype, 12);
            if (kind == QLatin1String("adamw")) // its decay is skipped with the rest
                for (Params* p : {&pa, &pb}) p->storage[0].weightDecay = 0.5;
            Rng ra(5), rb(5);
            for (int s = 0; s < 4; ++s) {
                if (s == skipAt) {
                    Rng spoil(99);
                    pa.setGradients(spoil);
                    pa.storage[2].grad.setAt(1234, std::nan(""));
                    Tensor flag = Tensor::zeros({1}, dtype);
                    for (auto* p : pa.list)
                        if (p->trainable) ops->flagNonFinite(p->grad, flag);
                    QCOMPARE(flag.at(0), 1.0);
                    const auto before = snapshot(*a, pa);
                    a->step(*ops, pa.list, lrs[s], flag);
                    QCOMPARE(a->stepCount(), std::int64_t(s + 1));
                    a->skipped();
                    QCOMPARE(a->stepCount(), std::int64_t(s));
                    QVERIFY2(sameBytes(snapshot(*a, pa), before),
                             qPrintable(QStringLiteral("skipped step %1").arg(s)));
                }
                pa.setGradients(ra);
                pb.setGradients(rb);
                a->step(*ops, pa.list, lrs[s], Tensor::zeros({1}, dtype)); // a flag of 0
                b->step(*ops, pb.list, lrs[s]);
                QVERIFY2(sameBytes(snapshot(*a, pa), snapshot(*b, pb)),
                         qPrintable(
                             QStringLiteral("step %1 after a skipped step %2").arg(s).arg(skipAt)));
                if (s == 0 && a->slotNames() == std::vector<std::string>{"momentum_buffer"}) {
                    // The first step's buffer is the gradient itself.
                    const Tensor buf = a->state(pa.list)[1].second;
                    QCOMPARE(maxAbsDiff(buf, pa.storage[0].grad), 0.0);
                }
            }
        }
        Sgd never;
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, never.skipped());
    }

    void optionsValidated()
    {
        OptimizerOptions o;
        o.kind = "adagrad";
        QVERIFY_THROWS_EXCEPTION(UnknownName, makeOptimizer(o));
        o.kind = "momentum";
        o.momentum = 1.0;
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, makeOptimizer(o));
        o.kind = "nesterov";
        o.momentum = 0.9;
        o.dampening = 0.1;
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, makeOptimizer(o));
        o.kind = "adam";
        o.beta2 = 1.0;
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, makeOptimizer(o));
        Params ps(DType::Float32, 1);
        auto ops = opsFor(DType::Float32);
        Sgd sgd;
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, sgd.step(*ops, ps.list, 0.1)); // no gradients yet
        Rng rng(1);
        ps.setGradients(rng);
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, sgd.step(*ops, ps.list, std::nan("")));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, sgd.step(*ops, ps.list, -0.1));
        sgd.step(*ops, ps.list, 0.0); // a schedule may reach 0
        // A replayed step (CUDA graphs) reads its rate from the step's scalars: checked there too.
        StepScalars scalars;
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, sgd.fillScalars(scalars, std::nan("")));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, sgd.fillScalars(scalars, -0.1));
        Adam adam;
        QVERIFY_THROWS_EXCEPTION(
            InvalidArgument, adam.fillScalars(scalars, std::numeric_limits<double>::infinity()));
        sgd.fillScalars(scalars, 0.5);
        QCOMPARE(scalars.values[StepScalars::LearningRate], 0.5);
        // Gradient clipping's bound: finite and >= 0 (0: none).
        for (double bad : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()})
            QVERIFY_THROWS_EXCEPTION(InvalidArgument, sgd.setMaxGradNorm(bad));
        sgd.setMaxGradNorm(0);
        QCOMPARE(sgd.maxGradNorm(), 0.0);
        sgd.step(*ops, ps.list, 0.1);
        QVERIFY(sgd.gradSumSquares().empty()); // nothing clipped, nothing summed
    }

    // The gradients' norm, and so the clipped gradients and the update, are the same to the bit
    // whatever the number of threads that sum it: towers whose teams differ (or processes on
    // machines with other core counts) keep identical replicas. 4.3 million elements: 263 chunks
    // of the sum, spread over 1 or 2 threads.
    void clippingIsTheSameWhateverTheThreads()
    {
        // Four gradients: two threads' halves added together differ from one thread's sum in the
        // last bits about three times in four, so a sum that depended on the team would show.
        for (std::uint64_t seed = 7; seed < 11; ++seed) {
            Rng rng(seed);
            const Tensor value = randomTensor({2100, 2048}, DType::Float32, rng);
            const Tensor grad = randomTensor({2100, 2048}, DType::Float32, rng, -2, 2);
            std::vector<Tensor> results;
            std::vector<double> sums;
            for (int threads : {1, 2, 1}) {
                cpu::setCpuThreads(threads);
                auto ops = cpu::makeOneDnnOps();
                Parameter p{"w", value.clone(), grad.clone(), true, 0};
                std::vector<Parameter*> list{&p};
                OptimizerOptions o;
                o.kind = "momentum";
                auto opt = makeOptimizer(o);
                opt->setMaxGradNorm(1.0);
                opt->step(*ops, list, 0.1);
                sums.push_back(opt->gradSumSquares().at(0));
                results.push_back(p.value.clone());
            }
            cpu::setCpuThreads(2);
            QVERIFY(sums[0] > 1e6); // clipped from a norm of about 2,400 to 1
            for (std::size_t i = 1; i < sums.size(); ++i) {
                QVERIFY2(sums[i] == sums[0], qPrintable(QStringLiteral("seed %1: %2 and %3")
                                                            .arg(seed)
                                                            .arg(sums[0], 0, 'g', 17)
                                                            .arg(sums[i], 0, 'g', 17)));
                QVERIFY(sameBytes({results[i]}, {results[0]}));
            }
        }
    }

    // The sum of the gradients' squares that clipping scales by is the same to the bit on every
    // CPU: each chunk of cpu::kChunk elements in eight lanes (element i into lane i mod 8, each
    // lane in order, the lanes added pairwise), the chunks in order, as this test adds them. This
    // runs the AVX-512 copy where the CPU has it, and the baseline copy in the ctest entry
    // tst_optimizers_simd_target_avx2 (TOWERS_SIMD_TARGET=AVX2): both must give the bits of the
    // definition, so processes on machines of either kind clip by one factor.
    void gradientNormIsTheSameOnEveryCpu()
    {
        qInfo("the %s copy of the element-wise kernels runs here%s",
              cpu::cpuIsWide() ? "AVX-512" : "baseline",
              cpu::cpuIsWide() ? " (the baseline's: tst_optimizers_simd_target_avx2)"
                               : (cpu::avx512Allowed() ? ""
                                                       : " (the CPU has no AVX-512, or "
                                                         "TOWERS_SIMD_TARGET holds it below)"));
        auto ops = cpu::makeOneDnnOps();
        for (std::uint64_t seed = 3; seed < 7; ++seed) {
            Rng rng(seed);
            // Three chunks and a ragged end; magnitudes over six decades, so that the order of
            // the additions shows in the last bits.
            const std::int64_t n = 3 * cpu::kChunk + 13;
            Tensor grad = randomTensor({n}, DType::Float32, rng, -2, 2);
            for (std::int64_t i = 0; i < n; i += 7) grad.data<float>()[i] *= 1e3f;
            for (std::int64_t i = 3; i < n; i += 11) grad.data<float>()[i] *= 1e-3f;
            double want = 0;
            const float* p = grad.data<float>();
            for (std::int64_t b = 0; b < n; b += cpu::kChunk) {
                double lane[8] = {};
                const std::int64_t e = std::min(n, b + cpu::kChunk);
                for (std::int64_t i = b; i < e; ++i)
                    lane[(i - b) % 8] += double(p[i]) * double(p[i]);
                want += ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
                        ((lane[4] + lane[5]) + (lane[6] + lane[7]));
            }
            Tensor sum = Tensor::zeros({1}, DType::Float64);
            ops->sumSquares(grad, 1.0, sum);
            QVERIFY2(sum.at(0) == want, qPrintable(QStringLiteral("seed %1: %2, the definition %3")
                                                       .arg(seed)
                                                       .arg(sum.at(0), 0, 'g', 17)
                                                       .arg(want, 0, 'g', 17)));
        }
    }

    // Every update a replica makes from the averaged gradients gives the same bits in the AVX-512
    // and the baseline copies of the CPU kernels, so that processes on machines of either kind
    // keep identical replicas: each optimizer (clipping or not) and the moving average, three
    // steps from the same state, here and in a child process held to the baseline
    // (TOWERS_SIMD_TARGET=AVX2), compared byte for byte. A fused multiply-add in one copy and
    // not the other would show.
    void updatesAreTheSameOnEveryCpu()
    {
        if (!cpu::cpuIsWide())
            qInfo("this process runs the baseline copy already: both sides are the same copy");
        const QByteArray here = updateBytes();
        QTemporaryDir dir;
        const QString file = dir.filePath(QStringLiteral("baseline"));
        QProcess child;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("TOWERS_SIMD_TARGET"), QStringLiteral("AVX2"));
        env.insert(QStringLiteral("TOWERS_UPDATE_BYTES"), file);
        child.setProcessEnvironment(env);
        // This test program (QTEST_APPLESS_MAIN: no QCoreApplication to ask).
        child.start(QFileInfo(QStringLiteral("/proc/self/exe")).canonicalFilePath(),
                    {QStringLiteral("writeUpdateBytes")});
        QVERIFY(child.waitForFinished(120000));
        QVERIFY2(child.exitCode() == 0, child.readAllStandardOutput().constData());
        QFile f(file);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QByteArray baseline = f.readAll();
        QCOMPARE(baseline.size(), here.size());
        if (baseline != here) {
            qsizetype at = 0;
            while (baseline[at] == here[at]) ++at;
            QFAIL(qPrintable(QStringLiteral("the baseline copy's updates differ from this "
                                            "process's from byte %1 of %2")
                                 .arg(at)
                                 .arg(here.size())));
        }
    }

    // updatesAreTheSameOnEveryCpu's child: writes its update bytes where TOWERS_UPDATE_BYTES says.
    void writeUpdateBytes()
    {
        const QString file = qEnvironmentVariable("TOWERS_UPDATE_BYTES");
        if (file.isEmpty()) QSKIP("updatesAreTheSameOnEveryCpu's child process only");
        QVERIFY2(!cpu::cpuIsWide(), "TOWERS_SIMD_TARGET=AVX2 left the AVX-512 copy on");
        QFile f(file);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(updateBytes());
    }

    // AdamW is Adam with each parameter's decay applied by the update (its figures against
    // torch.optim.AdamW: matchesTorch): with no decay anywhere it is Adam to the bit; the model
    // then leaves the decay out of its loss and gradients, and the op refuses a bad decay.
    void adamwDecaysInTheUpdate()
    {
        for (const DType dtype : {DType::Float32, DType::Float64}) {
            auto ops = opsFor(dtype);
            OptimizerOptions o;
            o.kind = "adam";
            const auto adam = makeOptimizer(o);
            o.kind = "adamw";
            const auto adamw = makeOptimizer(o);
            QCOMPARE(adamw->name(), std::string("adamw"));
            QVERIFY(adamw->decaysWeights());
            QVERIFY(!adam->decaysWeights());
            QCOMPARE(adamw->slotNames(), adam->slotNames());
            Params pa(dtype, 4), pb(dtype, 4);
            Rng ra(8), rb(8);
            for (const double lr : {0.01, 0.003, 0.02}) {
                pa.setGradients(ra);
                pb.setGradients(rb);
                adam->step(*ops, pa.list, lr);
                adamw->step(*ops, pb.list, lr);
            }
            QVERIFY(sameBytes(snapshot(*adam, pa), snapshot(*adamw, pb)));
            // A decay shrinks the weight: one step of lr 0.1 with decay 0.5, by 5 %, then
            // Adam's first step, lr * sign(g) (its bias-corrected m / sqrt(v) is g / |g|).
            pb.storage[0].weightDecay = 0.5;
            pb.setGradients(rb);
            const Tensor before = pb.storage[0].value.clone(), g = pb.storage[0].grad.clone();
            makeOptimizer(o)->step(*ops, pb.list, 0.1);
            double worst = 0;
            for (std::int64_t i = 0; i < before.numel(); ++i) {
                const double want = before.at(i) * 0.95 - 0.1 * (g.at(i) > 0 ? 1 : -1);
                worst = std::max(worst, std::fabs(pb.storage[0].value.at(i) - want));
            }
            QVERIFY2(worst < 1e-4, qPrintable(QString::number(worst)));
            for (const double bad : {-0.1, std::nan(""), std::numeric_limits<double>::infinity()}) {
                AdamStep s;
                s.weightDecay = bad;
                Tensor m = Tensor::zeros({8}, dtype), v = Tensor::zeros({8}, dtype),
                       w = Tensor::zeros({8}, dtype), grad = Tensor::zeros({8}, dtype);
                QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                         ops->adamUpdate(s, grad, m, v, w, Tensor(), Tensor()));
            }
        }

        // The model's side: the same images and labels through the tutorial's network (decay
        // 0.004 on its local layers), once with the decay in the loss and gradients, once left
        // to the optimizer: the same cross-entropy, no decay term, and each gradient without
        // its L2 part (axpy(decay, w) of it is the coupled gradient, bit for bit).
        auto ops = makeReferenceOps();
        ExecContext ctx{*ops};
        auto coupled = createModel("cifar10-tutorial", 1),
             decoupled = createModel("cifar10-tutorial", 1);
        decoupled->setWeightDecayInOptimizer(true);
        Rng rng(6);
        const Tensor images = randomTensor({3, 24, 24, 3}, DType::Float32, rng);
        const Tensor labels = randomLabels(3, 10, rng);
        LossValue losses[2];
        int i = 0;
        for (Model* m : {coupled.get(), decoupled.get()}) {
            m->forward(ctx, images);
            losses[i++] = m->loss(ctx, labels);
            m->backward(ctx);
        }
        QVERIFY(losses[0].weightDecay > 0);
        QCOMPARE(losses[1].weightDecay, 0.0);
        QCOMPARE(losses[1].crossEntropy, losses[0].crossEntropy);
        int decayed = 0;
        for (Parameter* p : decoupled->parameters()) {
            if (!p->trainable) continue;
            const Parameter& q = coupled->parameter(p->name);
            Tensor grad = p->grad.clone();
            if (p->weightDecay > 0) {
                QVERIFY2(!sameBytes({grad}, {q.grad}), p->name.c_str());
                ops->axpy(p->weightDecay, p->value, grad);
                ++decayed;
            }
            QVERIFY2(sameBytes({grad}, {q.grad}), p->name.c_str());
        }
        QCOMPARE(decayed, 2); // local3.weight, local4.weight
    }

    // The override replaces the coefficient of conv and linear weights only.
    void weightDecayOverride()
    {
        auto m = createModel("cifar10-tutorial", 1);
        QCOMPARE(m->parameter("local3.weight").weightDecay, 0.004);
        QCOMPARE(m->parameter("conv1.weight").weightDecay, 0.0);
        m->overrideWeightDecay(-1);
        QCOMPARE(m->parameter("local3.weight").weightDecay, 0.004);
        m->overrideWeightDecay(5e-4);
        for (auto* p : m->parameters()) {
            const bool weight =
                p->name.size() > 7 && p->name.compare(p->name.size() - 7, 7, ".weight") == 0;
            QCOMPARE(p->weightDecay, weight ? 5e-4 : 0.0);
        }
        auto f = createModel("fashion-fast", 1);
        f->overrideWeightDecay(1e-3);
        QCOMPARE(f->parameter("conv1.weight").weightDecay, 1e-3);
        QCOMPARE(f->parameter("bn1.weight").weightDecay, 0.0); // batch norm keeps none
        QCOMPARE(f->parameter("fc2.bias").weightDecay, 0.0);
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, f->overrideWeightDecay(std::nan("")));
    }
};

QTEST_APPLESS_MAIN(TestOptimizers)
#include "tst_optimizers.moc"
