// Every model against its PyTorch twin (python/towers_torch.py) on Debian's python3-torch: the
// same weights and inputs, one training-mode forward and backward, logits, loss, every gradient
// (also with label smoothing, and clipped by their global norm) and the batch-norm running
// statistics within 1e-4 relative error (tests/torch_crosscheck.py). Our side runs the float64
// reference backend from float32-representable weights and inputs, so both sides compute the same
// real-number function; the oneDNN backend is held to the reference by tst_models.
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include "engine/io/safetensors.h"
#include "engine/models/model_file.h"
#include "engine/models/registry.h"
#include "engine/nn/dropout.h"
#include "engine/optim/optimizer.h"
#include "gradcheck.h"
#include "model_files.h"

using namespace towers::engine;
using namespace towers::test;

class TestTorchCrosscheck : public QObject
{
    Q_OBJECT
private slots:
    void initTestCase()
    {
        m_script = qEnvironmentVariable("TOWERS_SOURCE_DIR") +
                   QStringLiteral("/tests/torch_crosscheck.py");
        if (!QFile::exists(m_script))
            QFAIL(qPrintable(QStringLiteral("oracle not found: ") + m_script));
        QProcess probe;
        probe.start(QStringLiteral("/usr/bin/python3"),
                    {QStringLiteral("-c"), QStringLiteral("import torch")});
        if (!probe.waitForFinished(120000) || probe.exitStatus() != QProcess::NormalExit ||
            probe.exitCode() != 0)
            QSKIP("Debian's python3-torch is not importable by /usr/bin/python3 "
                  "(install it with packaging/install-deps.sh --test)");
    }

    void model_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QString>("definition"); // a model file's, for its network
        QTest::addColumn<double>("smoothing");   // the loss's label smoothing
        QTest::addColumn<double>("clip");        // the gradients' largest norm (0: none)
        for (const auto& info : modelRegistry())
            QTest::newRow(info.name.c_str())
                << QString::fromStdString(info.name) << QString() << 0.0 << 0.0;
        QTest::newRow("model file")
            << QStringLiteral("every-layer")
            << QString::fromStdString(canonicalModelDefinition(everyLayerDefinition(), "test"))
            << 0.0 << 0.0;
        // PyTorch's CrossEntropyLoss(label_smoothing) (its tutorial's weight decay beside it).
        QTest::newRow("cifar10-tutorial, label smoothing 0.1")
            << QStringLiteral("cifar10-tutorial") << QString() << 0.1 << 0.0;
        QTest::newRow("fashion-fast, label smoothing 0.3")
            << QStringLiteral("fashion-fast") << QString() << 0.3 << 0.0;
        // clip_grad_norm_ after backward, of the gradient of the loss with its L2 term, as the
        // optimizer clips it (Optimizer::setMaxGradNorm; a step of rate 0 changes no weight).
        QTest::newRow("cifar10-tutorial, gradients clipped to 0.5")
            << QStringLiteral("cifar10-tutorial") << QString() << 0.0 << 0.5;
        QTest::newRow("fashion-fast, label smoothing 0.1, gradients clipped to 0.2")
            << QStringLiteral("fashion-fast") << QString() << 0.1 << 0.2;
    }
    void model()
    {
        QFETCH(QString, name);
        QFETCH(QString, definition);
        QFETCH(double, smoothing);
        QFETCH(double, clip);
        auto m = buildModel(resolveModel(name.toStdString(), definition.toStdString()), 10);
        m->initialize(17);
        m->setLabelSmoothing(smoothing);
        NamedTensors ex;
        for (auto* p : m->parameters())
            ex.emplace_back(p->name, p->value.clone()); // before the step
        m->convertTo(DType::Float64);
        const Shape& s = m->inputShape();
        Rng rng(23);
        const std::int64_t batch = 4;
        const Tensor images32 = randomTensor({batch, s[0], s[1], s[2]}, DType::Float32, rng, -1, 1);
        const Tensor labels = randomLabels(batch, m->numClasses(), rng);
        auto ops = makeReferenceOps();
        ExecContext ctx{*ops, true, 5};
        m->forward(ctx, images32.to(DType::Float64));
        const LossValue loss = m->loss(ctx, labels);
        m->backward(ctx);
        if (clip > 0) {
            auto sgd = makeOptimizer(OptimizerOptions{});
            sgd->setMaxGradNorm(clip);
            sgd->step(*ops, m->parameters(), 0.0);
            const double norm = std::sqrt(sgd->gradSumSquares().at(0));
            QVERIFY2(norm > 1.5 * clip, qPrintable(QStringLiteral("the gradients' norm %1 is not "
                                                                  "clipped by %2")
                                                       .arg(norm)
                                                       .arg(clip)));
        }

        ex.emplace_back("input", images32);
        ex.emplace_back("labels", labels);
        ex.emplace_back("expected.logits", m->logits().to(DType::Float32));
        ex.emplace_back("expected.loss", Tensor::filled({1}, DType::Float32, loss.total()));
        for (auto* p : m->parameters()) {
            if (p->trainable)
                ex.emplace_back("expected.grad." + p->name, p->grad.to(DType::Float32));
            else if (p->value.dtype() == DType::Float64)
                ex.emplace_back("expected.buffer." + p->name, p->value.to(DType::Float32));
        }
        m->net().visit([&](Layer& l) {
            if (auto* d = dynamic_cast<Dropout*>(&l))
                ex.emplace_back("dropout." + d->name(), d->mask().clone());
        });

        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const QString file = dir.filePath(QStringLiteral("exchange.safetensors"));
        std::map<std::string, std::string> meta{{"model", m->name()}};
        if (!definition.isEmpty()) meta["model_definition"] = definition.toStdString();
        if (smoothing > 0) meta["label_smoothing"] = QString::number(smoothing).toStdString();
        if (clip > 0) meta["clip_grad_norm"] = QString::number(clip).toStdString();
        writeSafeTensors(file.toStdString(), ex, meta);
        QProcess py;
        py.setProcessChannelMode(QProcess::MergedChannels);
        py.start(QStringLiteral("/usr/bin/python3"),
                 {m_script, file, QStringLiteral("--tol"), QStringLiteral("1e-4")});
        QVERIFY2(py.waitForFinished(300000), "the PyTorch oracle did not finish in 5 minutes");
        const QString out = QString::fromUtf8(py.readAll());
        if (py.exitCode() == 77) QSKIP(qPrintable(QStringLiteral("PyTorch unavailable: ") + out));
        QVERIFY2(py.exitStatus() == QProcess::NormalExit && py.exitCode() == 0, qPrintable(out));
        qInfo().noquote() << out.trimmed().split(QLatin1Char('\n')).last();
    }

private:
    QString m_script;
};

QTEST_APPLESS_MAIN(TestTorchCrosscheck)
#include "tst_torch_crosscheck.moc"
