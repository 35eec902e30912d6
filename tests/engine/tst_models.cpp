// The registered models: structure, whole-model gradients by finite differences on the float64
// reference backend, the oneDNN backend against the reference (both also for a model file's network
// with every layer type), and that SGD steps learn.
#include <QtTest>

#include <algorithm>
#include <set>

#include "engine/cpu/onednn_ops.h"
#include "engine/models/model_file.h"
#include "engine/models/registry.h"
#include "engine/nn/conv2d.h"
#include "engine/nn/dropout.h"
#include "engine/nn/pool2d.h"
#include "engine/optim/sgd.h"
#include "gradcheck.h"
#include "model_files.h"

using namespace towers::engine;
using namespace towers::test;

namespace {

// A registered model, or "every-layer": the model file's network with every layer type
// (model_files.h), initialised from `seed`.
std::unique_ptr<Model> modelNamed(const QString& name, std::uint64_t seed)
{
    const std::string n = name.toStdString();
    auto m = buildModel(n != "every-layer"
                            ? findModel(n)
                            : resolveModel(n, canonicalModelDefinition(everyLayerDefinition(), n)));
    m->initialize(seed);
    return m;
}

Tensor imagesFor(const Model& m, std::int64_t n, DType dtype, std::uint64_t seed)
{
    Rng rng(seed);
    const Shape& s = m.inputShape();
    return randomTensor({n, s[0], s[1], s[2]}, dtype, rng, -1.0, 1.0);
}

// Counts the batch norms folded into the convolution before them, and fails a folded one that
// also ran on its own.
class FoldCounter final : public LayerProfiler
{
public:
    void begin(ExecContext&, const Layer& layer, bool) override
    {
        if (m_folded.count(&layer)) m_ranAlone = true;
    }
    void end(ExecContext&, const Layer&, bool) override {}
    void folded(ExecContext&, const Layer& layer, const Layer& into) override
    {
        if (layer.kind() == "batchnorm" && into.kind() == "conv2d") m_folded.insert(&layer);
    }
    std::size_t count() const { return m_folded.size(); }
    bool ranAlone() const { return m_ranAlone; }

private:
    std::set<const Layer*> m_folded;
    bool m_ranAlone = false;
};

} // namespace

class TestModels : public QObject
{
    Q_OBJECT
private slots:
    void registry_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<qint64>("params");
        QTest::addColumn<QString>("firstParam");
        QTest::addColumn<QString>("lastParam");
        // cifar10-tutorial's count is the TensorFlow tutorial's: 4,864 + 102,464 + 885,120 + 73,920
        // + 1,930.
        QTest::newRow("cifar10-tutorial") << "cifar10-tutorial" << qint64(1068298) << "conv1.weight"
                                          << "softmax_linear.bias";
        QTest::newRow("mnist-convnet") << "mnist-convnet" << qint64(20217226) << "conv1.weight"
                                       << "fc3.bias";
        QTest::newRow("fashion-fast") << "fashion-fast" << qint64(421738) << "conv1.weight"
                                      << "fc2.bias";
        // 288 + 64 + 9,216 + 64 + 18,432 + 128 + 36,864 + 128 + 803,072 + 2,570
        QTest::newRow("fashion-wide") << "fashion-wide" << qint64(870826) << "conv1.weight"
                                      << "fc2.bias";
        QTest::newRow("cifar10-resnet") << "cifar10-resnet" << qint64(1646112) << "prep.conv.weight"
                                        << "fc.weight";
    }
    void registry()
    {
        QFETCH(QString, name);
        QFETCH(qint64, params);
        QFETCH(QString, firstParam);
        QFETCH(QString, lastParam);
        const auto& info = findModel(name.toStdString());
        auto m = createModel(info.name, 3);
        QCOMPARE(m->name(), info.name);
        QCOMPARE(m->inputShape(), info.inputShape);
        QCOMPARE(m->parameterCount(), params);
        QCOMPARE(QString::fromStdString(m->parameters().front()->name), firstParam);
        QCOMPARE(QString::fromStdString(m->parameters().back()->name), lastParam);
        QVERIFY(m->trainingFlopsPerExample() > 0);
        // Names are unique.
        std::set<std::string> names;
        for (auto* p : m->parameters()) QVERIFY2(names.insert(p->name).second, p->name.c_str());
        // Same seed, same weights; another seed, other weights.
        auto again = createModel(info.name, 3), other = createModel(info.name, 4);
        QCOMPARE(maxAbsDiff(again->parameters()[0]->value, m->parameters()[0]->value), 0.0);
        QVERIFY(maxAbsDiff(other->parameters()[0]->value, m->parameters()[0]->value) > 0);
    }
    void tutorialInitialisation()
    {
        // The seeds' initialisers: truncated normal (std 5e-2 conv, 0.04 fc, 1/192 last layer),
        // biases 0.0 / 0.1 / 0.1 / 0.1 / 0.0.
        auto m = createModel("cifar10-tutorial", 1);
        auto stdOf = [](const Tensor& t) {
            double s = 0;
            for (std::int64_t i = 0; i < t.numel(); ++i) s += t.at(i) * t.at(i);
            return std::sqrt(s / double(t.numel()));
        };
        auto maxOf = [](const Tensor& t) {
            double v = 0;
            for (std::int64_t i = 0; i < t.numel(); ++i) v = std::max(v, std::fabs(t.at(i)));
            return v;
        };
        // A normal truncated at 2 sigma has a standard deviation of 0.88 sigma.
        QVERIFY(std::fabs(stdOf(m->parameter("conv2.weight").value) / 5e-2 - 0.88) < 0.02);
        QVERIFY(std::fabs(stdOf(m->parameter("local3.weight").value) / 0.04 - 0.88) < 0.02);
        QVERIFY(maxOf(m->parameter("local3.weight").value) <= 2 * 0.04 + 1e-7);
        QVERIFY(maxOf(m->parameter("softmax_linear.weight").value) <= 2.0 / 192 + 1e-7);
        QCOMPARE(maxOf(m->parameter("conv1.bias").value), 0.0);
        QCOMPARE(m->parameter("conv2.bias").value.at(5), 0.1f);
        QCOMPARE(m->parameter("local4.bias").value.at(0), 0.1f);
        QCOMPARE(m->parameter("local3.weight").weightDecay, 0.004);
        QCOMPARE(m->parameter("local4.weight").weightDecay, 0.004);
        QCOMPARE(m->parameter("conv1.weight").weightDecay, 0.0);
        QCOMPARE(m->parameter("softmax_linear.weight").weightDecay, 0.0);
    }
    void badArguments()
    {
        QVERIFY_THROWS_EXCEPTION(UnknownName, findModel("resnet-1000"));
        auto ops = makeReferenceOps();
        ExecContext ctx{*ops};
        auto m = createModel("fashion-fast");
        Rng rng(1);
        QVERIFY_THROWS_EXCEPTION(
            ShapeError, m->forward(ctx, randomTensor({2, 28, 28, 3}, DType::Float32, rng)));
        QVERIFY_THROWS_EXCEPTION(
            ShapeError, m->forward(ctx, randomTensor({2, 32, 32, 1}, DType::Float32, rng)));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, m->loss(ctx, randomLabels(2, 10, rng)));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, m->backward(ctx));
        m->forward(ctx, imagesFor(*m, 2, DType::Float32, 1));
        QVERIFY_THROWS_EXCEPTION(ShapeError, m->loss(ctx, randomLabels(3, 10, rng)));
        Tensor bad = randomLabels(2, 10, rng);
        bad.data<std::int32_t>()[1] = 10;
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, m->loss(ctx, bad));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, Sgd().step(*ops, m->parameters(), -1.0));
    }

    // d(loss)/d(parameter) for every parameter of every model, by central differences in double
    // precision on the reference backend: a random directional derivative over each whole tensor,
    // plus single elements sampled per tensor where the model is cheap enough.
    void wholeModelGradients_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<int>("batch");
        QTest::addColumn<int>("samples");
        QTest::newRow("cifar10-tutorial") << "cifar10-tutorial" << 3 << 4;
        QTest::newRow("mnist-convnet") << "mnist-convnet" << 1 << 0;
        QTest::newRow("fashion-fast") << "fashion-fast" << 3 << 4;
        QTest::newRow("fashion-wide") << "fashion-wide" << 2 << 2;
        QTest::newRow("cifar10-resnet") << "cifar10-resnet" << 1 << 0;
        QTest::newRow("model file") << "every-layer" << 3 << 4;
    }
    void wholeModelGradients()
    {
        QFETCH(QString, name);
        QFETCH(int, batch);
        QFETCH(int, samples);
        auto ops = makeReferenceOps();
        ExecContext ctx{*ops, true, 7};
        auto m = modelNamed(name, 11);
        m->convertTo(DType::Float64);
        // The tutorial's fc layers carry weight decay; make it large enough to matter.
        for (auto* p : m->parameters())
            if (p->weightDecay > 0) p->weightDecay = 0.01;
        const Tensor images = imagesFor(*m, batch, DType::Float64, 5);
        Rng rng(9);
        const Tensor labels = randomLabels(batch, m->numClasses(), rng);
        m->forward(ctx, images);
        m->loss(ctx, labels);
        m->backward(ctx);
        auto lossOnly = [&] {
            m->forward(ctx, images);
            return m->loss(ctx, labels).total();
        };
        for (auto* p : m->parameters()) {
            if (!p->trainable) continue;
            const Tensor analytic = p->grad.clone();
            const auto d = checkDirectionalGradient(lossOnly, p->value, analytic, 1e-5, 4);
            QVERIFY2(d.maxRelError < 1e-3, (p->name + " (direction): " + d.str()).c_str());
            if (samples == 0) continue;
            const auto r = checkGradient(lossOnly, p->value, analytic, 1e-6, samples, 3, 1e-7);
            QVERIFY2(r.maxRelError < 1e-4, (p->name + ": " + r.str()).c_str());
            QVERIFY2(r.checked == std::min<std::int64_t>(samples, p->value.numel()),
                     (p->name + ": too many kinks: " + r.str()).c_str());
        }
    }

    // Gradient accumulation (Model::backwardPart): after the last of 3 parts of a batch, every
    // gradient is d/dw of the parts' mean loss plus the weight decay once, by central differences
    // in float64 on fashion-fast, each part with its own batch-norm statistics and dropout stream
    // (as a tower runs them); a part out of range is refused.
    void accumulatedGradients()
    {
        auto ops = makeReferenceOps();
        auto m = modelNamed("fashion-fast", 11);
        m->convertTo(DType::Float64);
        for (auto* p : m->parameters())
            if (p->weightDecay > 0) p->weightDecay = 0.01;
        constexpr int kParts = 3, kBatch = 2;
        const Tensor images = imagesFor(*m, kBatch * kParts, DType::Float64, 5);
        Rng rng(9);
        const Tensor labels = randomLabels(kBatch * kParts, m->numClasses(), rng);
        const auto partContext = [&](int part) {
            ExecContext c{*ops, true, 7};
            c.replica = std::uint64_t(part);
            return c;
        };
        const auto rows = [](const Tensor& t, int part) {
            return t.slice(part * kBatch, (part + 1) * kBatch);
        };
        for (int part = 0; part < kParts; ++part) {
            ExecContext c = partContext(part);
            m->forward(c, rows(images, part));
            m->computeLoss(c, rows(labels, part));
            m->backwardPart(c, part, kParts);
        }
        const auto meanLoss = [&] {
            double crossEntropy = 0, decay = 0;
            for (int part = 0; part < kParts; ++part) {
                ExecContext c = partContext(part);
                m->forward(c, rows(images, part));
                const LossValue v = m->loss(c, rows(labels, part));
                crossEntropy += v.crossEntropy;
                decay = v.weightDecay; // the same weights for every part
            }
            return crossEntropy / kParts + decay;
        };
        for (auto* p : m->parameters()) {
            if (!p->trainable) continue;
            const Tensor analytic = p->grad.clone();
            const auto d = checkDirectionalGradient(meanLoss, p->value, analytic, 1e-5, 4);
            QVERIFY2(d.maxRelError < 1e-3, (p->name + " (direction): " + d.str()).c_str());
            const auto r = checkGradient(meanLoss, p->value, analytic, 1e-6, 4, 3, 1e-7);
            QVERIFY2(r.maxRelError < 1e-4, (p->name + ": " + r.str()).c_str());
        }
        ExecContext c = partContext(0);
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, m->backwardPart(c, 3, 3));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, m->backwardPart(c, 0, 0));
    }

    // A concat's branches in every arrangement: 'c' a 1x1 convolution (4 filters), 'p' a SAME 3x3
    // max pool then a 3x3 convolution (3 filters), 'e' an empty branch (x itself). Its output is
    // each branch's in order along the channels, and dx (the sum of the branches', however many
    // pass x through and wherever they are) and every weight's gradient agree with central
    // differences, on the float64 reference backend.
    void concatBranches_data()
    {
        QTest::addColumn<QString>("pattern");
        for (const char* p : {"cp", "ecp", "cep", "cpe", "ece", "pc"}) QTest::newRow(p) << p;
    }
    void concatBranches()
    {
        QFETCH(QString, pattern);
        std::vector<std::unique_ptr<Sequential>> branches;
        int n = 0;
        for (const QChar k : pattern) {
            auto seq = std::make_unique<Sequential>();
            const std::string id = std::to_string(++n);
            Conv2dOptions o;
            o.inChannels = 3;
            if (k == 'c') {
                o.outChannels = 4;
                o.kernelH = o.kernelW = 1;
                seq->add(std::make_unique<Conv2d>("c" + id, o));
            } else if (k == 'p') {
                seq->add(std::make_unique<MaxPool2d>("p" + id, 3, 1, Padding::Same));
                o.outChannels = 3;
                o.bias = false;
                seq->add(std::make_unique<Conv2d>("pc" + id, o));
            }
            branches.push_back(std::move(seq));
        }
        Concat cat("cat", std::move(branches));
        Rng rng(21);
        cat.initialize(rng);
        std::vector<Parameter*> params;
        cat.collectParameters(params);
        for (auto* p : params) p->value = p->value.to(DType::Float64);

        auto ops = makeReferenceOps();
        ExecContext ctx{*ops, true, 0};
        Tensor x = distinctTensor({2, 5, 5, 3}, DType::Float64, rng);
        const Shape out = cat.outputShape(x.shape());
        const Tensor w = randomTensor(out, DType::Float64, rng); // loss = <y, w>, so dy = w
        Tensor y, dx;
        cat.forward(ctx, x, y);
        QCOMPARE(y.shape(), out);
        // Each branch's output, run alone, is its channels of y.
        std::int64_t offset = 0;
        for (const auto& b : cat.branches()) {
            Tensor part;
            if (b->layers().empty())
                part = x;
            else
                b->forward(ctx, x, part);
            const std::int64_t c = part.dim(3);
            for (std::int64_t i = 0; i < part.numel(); ++i)
                QCOMPARE(y.at(i / c * out[3] + offset + i % c), part.at(i));
            offset += c;
        }
        QCOMPARE(offset, out[3]);
        cat.forward(ctx, x, y);
        cat.backward(ctx, x, y, w, &dx);
        auto loss = [&] {
            Tensor yy;
            cat.forward(ctx, x, yy);
            return dot(yy, w);
        };
        const Tensor analytic = dx.clone();
        const auto r = checkGradient(loss, x, analytic, 1e-6, 150);
        QVERIFY2(r.maxRelError < 1e-6, ("dx: " + r.str()).c_str());
        for (auto* p : params) {
            const Tensor g = p->grad.clone();
            const auto d = checkGradient(loss, p->value, g, 1e-6, 40);
            QVERIFY2(d.maxRelError < 1e-6, (p->name + ": " + d.str()).c_str());
        }
        // Without dx the weights' gradients are the same.
        std::vector<Tensor> before;
        for (auto* p : params) before.push_back(p->grad.clone());
        cat.forward(ctx, x, y);
        cat.backward(ctx, x, y, w, nullptr);
        for (std::size_t i = 0; i < params.size(); ++i)
            QCOMPARE(maxAbsDiff(params[i]->grad, before[i]), 0.0);
    }

    // The oneDNN backend runs the same model to the reference's numbers.
    void onednnMatchesReference_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<int>("batch");
        for (const auto& info : modelRegistry())
            QTest::newRow(info.name.c_str()) << QString::fromStdString(info.name) << 2;
        QTest::newRow("model file") << QStringLiteral("every-layer") << 2;
    }
    void onednnMatchesReference()
    {
        QFETCH(QString, name);
        QFETCH(int, batch);
        cpu::setCpuThreads(2);
        auto ref = makeReferenceOps();
        auto dnn = cpu::makeOneDnnOps();
        auto a = modelNamed(name, 21);
        auto b = modelNamed(name, 21);
        const Tensor images = imagesFor(*a, batch + 1, DType::Float32, 6);
        Rng rng(10);
        const Tensor labels = randomLabels(batch + 1, a->numClasses(), rng);
        ExecContext cr{*ref, true, 3}, cd{*dnn, true, 3};
        a->forward(cr, images);
        b->forward(cd, images);
        QVERIFY2(normalisedError(b->logits(), a->logits()) < 1e-5, "logits differ");
        const double la = a->loss(cr, labels).total(), lb = b->loss(cd, labels).total();
        QVERIFY2(std::fabs(la - lb) <= 1e-5 * std::fabs(la),
                 qPrintable(QStringLiteral("loss %1 vs %2").arg(la).arg(lb)));
        a->backward(cr);
        b->backward(cd);
        for (auto* p : a->parameters()) {
            Parameter& q = b->parameter(p->name);
            const Tensor& x = p->trainable ? p->grad : p->value;
            const Tensor& y = p->trainable ? q.grad : q.value;
            const double e = normalisedError(y, x);
            QVERIFY2(e < 1e-4, (p->name + ": normalised error " + std::to_string(e)).c_str());
        }
    }

    // SGD steps on one fixed batch lower the cross-entropy by a quarter (every model can start to
    // fit a small batch of noise). Plain SGD at these rates has spikes (cifar10-tutorial's loss
    // jumps back up around step 20 and comes down again), and where a spike falls in the last
    // steps depends on rounding (the reference backend and oneDNN land on different sides of a
    // fixed threshold at step 30), so the test asks for the best loss of the run, and for the
    // last one to be below the first.
    void sgdLearns_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<double>("lr");
        QTest::newRow("cifar10-tutorial") << "cifar10-tutorial" << 0.1;
        QTest::newRow("mnist-convnet") << "mnist-convnet" << 0.05;
        QTest::newRow("fashion-fast") << "fashion-fast" << 0.05;
        QTest::newRow("fashion-wide") << "fashion-wide" << 0.05;
        QTest::newRow("cifar10-resnet") << "cifar10-resnet" << 0.05;
    }
    void sgdLearns()
    {
        QFETCH(QString, name);
        QFETCH(double, lr);
        cpu::setCpuThreads(2);
        auto ops = cpu::makeOneDnnOps();
        auto m = createModel(name.toStdString(), 2);
        const Tensor images = imagesFor(*m, 16, DType::Float32, 8);
        Rng rng(12);
        const Tensor labels = randomLabels(16, m->numClasses(), rng);
        Sgd sgd;
        ExecContext ctx{*ops, true, 0};
        double first = 0, last = 0, best = 0;
        QString trace;
        for (int step = 0; step < 30; ++step) {
            ctx.step = std::uint64_t(step);
            m->forward(ctx, images);
            last = m->loss(ctx, labels).crossEntropy;
            if (step == 0) first = best = last;
            best = std::min(best, last);
            trace += QString::number(last, 'f', 3) + QLatin1Char(' ');
            QVERIFY(std::isfinite(last));
            m->backward(ctx);
            sgd.step(*ops, m->parameters(), lr);
        }
        QVERIFY2(best < 0.75 * first && last < first,
                 qPrintable(QStringLiteral("losses ") + trace));
    }

    // Evaluation with the batch norms folded into the convolutions before them (what eval and
    // classify run) gives the logits of the unfolded pass, up to rounding, on the reference and
    // oneDNN backends; every conv-then-batch-norm pair folds (those in residual blocks and concat
    // branches too), with running statistics, scales and shifts far from a fresh model's.
    void foldedBatchNormsMatchUnfolded_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QString>("backend");
        QTest::addColumn<int>("pairs");
        for (const char* backend : {"reference", "onednn"}) {
            QTest::addRow("fashion-fast %s", backend) << "fashion-fast" << backend << 2;
            // prep, layer1, layer2 and layer3, and two in each of the residual blocks.
            QTest::addRow("cifar10-resnet %s", backend) << "cifar10-resnet" << backend << 8;
            // The residual block's inner convolution; the first one's batch norm follows an LRN.
            QTest::addRow("every-layer %s", backend) << "every-layer" << backend << 1;
            // A convolution with a bias folds; one with a ReLU of its own keeps its batch norm.
            QTest::addRow("bias, relu %s", backend) << "fold-cases" << backend << 1;
        }
    }
    void foldedBatchNormsMatchUnfolded()
    {
        QFETCH(QString, name);
        QFETCH(QString, backend);
        QFETCH(int, pairs);
        cpu::setCpuThreads(2);
        auto ops = backend == "reference" ? makeReferenceOps() : cpu::makeOneDnnOps();
        auto m =
            name != "fold-cases"
                ? modelNamed(name, 5)
                : buildModel(resolveModel("fold-cases", canonicalModelDefinition(R"({
            "name": "fold-cases", "input": [8, 8, 2], "layers": [
                {"type": "conv2d", "filters": 5, "kernel": 3},
                {"type": "batchnorm", "relu": true},
                {"type": "conv2d", "filters": 4, "kernel": 3, "activation": "relu"},
                {"type": "batchnorm"},
                {"type": "flatten"},
                {"type": "linear", "units": "classes"}]})",
                                                                                 "fold-cases")));
        if (name == "fold-cases") m->initialize(5);
        Rng rng(31);
        const std::string runningVar = ".running_var";
        std::set<std::string> batchNorms; // the batch norms' names, from their running variances
        for (const auto* p : m->parameters())
            if (p->name.ends_with(runningVar))
                batchNorms.insert(p->name.substr(0, p->name.size() - runningVar.size()));
        for (auto* p : m->parameters()) {
            const std::string& n = p->name;
            const auto dot = n.rfind('.');
            if (dot == std::string::npos || !batchNorms.count(n.substr(0, dot)) ||
                p->value.dtype() != DType::Float32)
                continue;
            const bool var = n.ends_with(".running_var") || n.ends_with(".weight");
            p->value = var ? randomTensor(p->value.shape(), DType::Float32, rng, 0.5, 2.0)
                           : randomTensor(p->value.shape(), DType::Float32, rng, -0.5, 0.5);
        }
        const Tensor images = imagesFor(*m, 3, DType::Float32, 7);
        ExecContext plain{*ops, false, 0}, folding{*ops, false, 0};
        folding.foldBatchNorms = true;
        FoldCounter counter;
        folding.profiler = &counter;
        const Tensor want = m->forward(plain, images).clone();
        const Tensor got = m->forward(folding, images).clone();
        QCOMPARE(counter.count(), std::size_t(pairs));
        QVERIFY(!counter.ranAlone());
        const double e = normalisedError(got, want);
        QVERIFY2(e < 1e-5, qPrintable(QStringLiteral("normalised error %1").arg(e)));
        // The unfolded pass afterwards still computes every layer's output.
        QCOMPARE(maxAbsDiff(m->forward(plain, images), want), 0.0);
    }

    // Evaluation mode: dropout is the identity and batch norm uses running statistics, so two
    // evaluation passes agree and differ from a training pass.
    void evaluationMode()
    {
        auto ops = makeReferenceOps();
        auto m = createModel("fashion-fast", 4);
        const Tensor images = imagesFor(*m, 4, DType::Float32, 2);
        ExecContext train{*ops, true, 0}, eval{*ops, false, 0};
        const Tensor t = m->forward(train, images).clone();
        const Tensor e1 = m->forward(eval, images).clone();
        const Tensor e2 = m->forward(eval, images).clone();
        QCOMPARE(maxAbsDiff(e1, e2), 0.0);
        QVERIFY(maxAbsDiff(t, e1) > 1e-6);
        QCOMPARE(m->parameter("bn1.num_batches_tracked").value.at(0), 1.0);
    }
};

QTEST_APPLESS_MAIN(TestModels)
#include "tst_models.moc"
