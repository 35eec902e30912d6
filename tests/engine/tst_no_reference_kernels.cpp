// No reference kernels in a training step, on the CPU at hand. oneDNN picks an implementation per
// primitive and per instruction set, and where it has no optimised one it silently runs a
// reference loop: oneDNN 2.6's LRN in nhwc was a JIT kernel on AVX-512 and lrn_ref on AVX2, 72 %
// of a cifar10-tutorial step there. For every registered model, at its recipe's batch per tower,
// on the oneDNN backend: forward, loss, backward, the recipe optimizer's update and an evaluation
// forward, one layer at a time as Sequential runs them, so that a reference implementation is
// reported with the layer, the op's direction and the memory layouts.
//
// Each model in float32 and with --precision bf16 (where the CPU has AVX512_BF16 or AMX; skipped
// with the reason elsewhere), whose bfloat16 convolutions and matrix products must not be
// reference loops either. CTest runs this twice: on the CPU as it is, and with
// ONEDNN_MAX_CPU_ISA=AVX2, which holds oneDNN to the kernels of an AVX2 machine (the kind most
// users have) even on an AVX-512 CPU.
#include <QtTest>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "engine/cpu/cpu_info.h"
#include "engine/cpu/lrn_hwy.h"
#include "engine/cpu/onednn_ops.h"
#include "engine/cpu/primitive_implementations.h"
#include "engine/models/registry.h"
#include "engine/optim/optimizer.h"
#include "engine/train/recipe.h"
#include "gradcheck.h"

using namespace towers::engine;
using towers::test::randomLabels;
using towers::test::randomTensor;

namespace {

// An implementation and the stage of the step that first ran it.
struct Seen
{
    std::string stage;
    cpu::PrimitiveImplementation impl;
};

// Runs a step stage by stage and gives each stage the implementations the backend recorded
// while it ran.
class StepRecorder
{
public:
    explicit StepRecorder(Ops& ops) : m_ops(ops) {}

    template <class F> void run(const std::string& stage, const F& f)
    {
        f();
        const auto all = cpu::primitiveImplementations(m_ops);
        for (std::size_t i = m_count; i < all.size(); ++i) m_seen.push_back({stage, all[i]});
        m_count = all.size();
    }
    const std::vector<Seen>& seen() const { return m_seen; }

private:
    Ops& m_ops;
    std::size_t m_count = 0;
    std::vector<Seen> m_seen;
};

} // namespace

class TestNoReferenceKernels : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase()
    {
        const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
        qInfo("oneDNN kernels for %s%s; Towers' LRN on %s", cpu::cpuInfo().isa.c_str(),
              cap ? qPrintable(QStringLiteral(" (ONEDNN_MAX_CPU_ISA=%1)").arg(cap)) : "",
              cpu::lrnTargetName().c_str());
    }

    void trainingStep_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<bool>("bf16");
        for (const auto& info : modelRegistry()) {
            QTest::newRow(info.name.c_str()) << QString::fromStdString(info.name) << false;
            QTest::newRow((info.name + " bf16").c_str())
                << QString::fromStdString(info.name) << true;
        }
    }
    void trainingStep()
    {
        QFETCH(QString, model);
        QFETCH(bool, bf16);
        if (const std::string no = cpu::bf16Unavailable(); bf16 && !no.empty()) QSKIP(no.c_str());
        const std::string name = model.toStdString();
        // A fresh backend: its list holds this model's primitives only.
        const std::unique_ptr<Ops> ops =
            cpu::makeOneDnnOps(bf16 ? Precision::BFloat16 : Precision::Float32);
        auto m = createModel(name, 1);
        const TrainConfig config = defaultConfigFor(name);
        auto optimizer = makeOptimizer(config.optimizer);
        const std::int64_t batch = config.batchPerTower;

        Rng rng(5);
        const Shape& in = m->inputShape();
        const Tensor images = randomTensor({batch, in[0], in[1], in[2]}, DType::Float32, rng);
        const Tensor labels = randomLabels(batch, m->numClasses(), rng);

        // Model::forward, loss and backward, one top-level layer at a time (as Sequential).
        const auto& layers = m->net().layers();
        const std::size_t n = layers.size();
        std::vector<Tensor> acts(n), grads(n);
        Tensor probs, loss, dlogits;
        StepRecorder rec(*ops);
        const auto layerStage = [&](std::size_t i, const char* what) {
            return "layer " + layers[i]->name() + " (" + layers[i]->kind() + ") " + what;
        };
        ExecContext ctx{*ops, true, 0, 0};
        for (std::size_t i = 0; i < n; ++i)
            rec.run(layerStage(i, "forward"),
                    [&] { layers[i]->forward(ctx, i == 0 ? images : acts[i - 1], acts[i]); });
        rec.run("loss", [&] {
            ops->softmaxCrossEntropyForward(acts[n - 1], labels, 0.0, probs, loss);
            Tensor decay = Tensor::zeros({1}, DType::Float64);
            for (auto* p : m->parameters())
                if (p->trainable && p->weightDecay > 0)
                    ops->sumSquares(p->value, p->weightDecay * 0.5, decay);
        });
        rec.run("loss backward", [&] {
            ops->softmaxCrossEntropyBackward(probs, labels, 0.0, 1.0 / static_cast<double>(batch),
                                             grads[n - 1]);
        });
        for (std::size_t i = n; i-- > 0;)
            rec.run(layerStage(i, "backward"), [&] {
                layers[i]->backward(ctx, i == 0 ? images : acts[i - 1], acts[i], grads[i],
                                    i == 0 ? nullptr : &grads[i - 1]);
            });
        rec.run("weight decay and " + config.optimizer.kind + " update", [&] {
            for (auto* p : m->parameters())
                if (p->trainable && p->weightDecay > 0)
                    ops->axpy(p->weightDecay, p->value, p->grad);
            optimizer->step(*ops, m->parameters(), 0.01);
        });
        ExecContext eval{*ops, false, 0, 0};
        for (std::size_t i = 0; i < n; ++i)
            rec.run(layerStage(i, "evaluation forward"),
                    [&] { layers[i]->forward(eval, i == 0 ? images : acts[i - 1], acts[i]); });

        QVERIFY2(!rec.seen().empty(), "the oneDNN backend recorded no primitive");
        const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
        const bool capAvx2 =
            cap && QString::fromLatin1(cap).compare("AVX2", Qt::CaseInsensitive) == 0;
        QStringList references, beyondCap;
        for (const auto& s : rec.seen()) {
            const QString line =
                QStringLiteral("%1: %2 on %3 [%4]")
                    .arg(QString::fromStdString(s.stage), QString::fromStdString(s.impl.primitive),
                         QString::fromStdString(s.impl.impl), QString::fromStdString(s.impl.label));
            qInfo("%s", qPrintable(line));
            if (cpu::isReferenceImplementation(s.impl.impl)) references << line;
            if (capAvx2 && QString::fromStdString(s.impl.impl).contains("avx512"))
                beyondCap << line;
        }
        QVERIFY2(beyondCap.isEmpty(),
                 qPrintable("ONEDNN_MAX_CPU_ISA=AVX2 did not hold oneDNN to AVX2:\n" +
                            beyondCap.join('\n')));
        QVERIFY2(references.isEmpty(),
                 qPrintable(QStringLiteral("%1 at batch %2 runs %3 reference implementation(s):\n")
                                .arg(model)
                                .arg(batch)
                                .arg(references.size()) +
                            references.join('\n')));
    }
};

QTEST_APPLESS_MAIN(TestNoReferenceKernels)
#include "tst_no_reference_kernels.moc"
