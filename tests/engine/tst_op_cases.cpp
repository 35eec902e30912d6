// The op-case table (engine/selftest/op_cases.h) on every backend this machine has, a row per case
// and backend: oneDNN on each SIMD target Towers' own kernels (LRN, max pooling, Winograd, Adam)
// were compiled for and this CPU runs (oneDNN's own instruction set can only be capped before it
// starts: CTest's tst_no_reference_kernels_onednn_max_isa_avx2 does that), oneDNN staged through
// the host (ops/staged_ops.h), and the CUDA backend on GPU 0 in float32 and in TF32 (skipped,
// saying why, without a GPU or the plugin). `towers-cli selftest --device X` runs the same table.
//
// Also: the table covers every op of Ops and every registered model, its inputs are the same on
// every call, an update skipped by its flag changes nothing, and the comparison catches what it
// must (a wrong output, an exact output off by one element, an op that throws).
#include <QtTest>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "engine/cpu/onednn_ops.h"
#include "engine/cpu/simd_target.h"
#include "engine/gpu/gpu_backend.h"
#include "engine/models/registry.h"
#include "engine/ops/staged_ops.h"
#include "engine/selftest/op_cases.h"
#include "engine/train/train_config.h"
#include "simd_targets.h"

using namespace towers::engine;

namespace {

enum class BackendKind
{
    OneDnnTarget, // oneDNN with Towers' kernels held to one SIMD target
    Staged,       // oneDNN behind makeStagedOps
    OneDnnBf16,   // oneDNN with --precision bf16
    Cuda,         // GPU 0, float32
    CudaTf32,     // GPU 0, TF32
    CudaBf16,     // GPU 0, --precision bf16
};

// The GPU backend when it can run, else nullptr with the reason in `why`.
GpuBackend* gpuOrWhy(std::string& why)
{
    GpuBackend* gpu = cudaBackend(&why);
    if (gpu && gpu->deviceCount() == 0) {
        why = "no GPU: " + gpu->unavailableReason();
        return nullptr;
    }
    return gpu;
}

// The groups that check each op of Ops (engine/ops/ops.h): the table must have cases in all of
// them.
const std::vector<std::string>& expectedOps()
{
    static const std::vector<std::string> ops = {
        "conv2d forward",                            // conv2dForward
        "conv2d backward data",                      // conv2dBackwardData
        "conv2d backward weights",                   // conv2dBackwardWeights
        "conv2d training forward + backward",        // conv2dForwardTraining, conv2dBackward
        "conv2d backward without saved state",       // conv2dBackward
        "max-pool forward",                          // maxPoolForward
        "max-pool forward + backward",               // maxPoolBackward
        "average-pool forward",                      // avgPoolForward
        "average-pool backward",                     // avgPoolBackward
        "LRN forward",                               // lrnForward
        "LRN forward + backward",                    // lrnBackward
        "linear forward",                            // linearForward
        "linear backward data",                      // linearBackwardData
        "linear backward weights",                   // linearBackwardWeights
        "linear fused backward",                     // linearBackward
        "relu forward",                              // reluForward
        "relu backward",                             // reluBackward
        "add",                                       // add
        "dropout forward",                           // dropoutForward
        "dropout backward",                          // dropoutBackward
        "batch norm training forward",               // batchNormForwardTraining
        "batch norm inference forward",              // batchNormForwardInference
        "batch norm inference forward + activation", // batchNormActForwardInference
        "batch norm backward",                       // batchNormBackward
        "batch norm training forward + backward",    // batchNormActForwardTraining, -ActBackward
        "batch norm backward without saved state",   // batchNormActBackward
        "batch norm folded into weights",            // foldBatchNorm
        "convert to bfloat16 and back",              // convertFloat
        "layout NHWC to NCHW",                       // nhwcToNchw
        "layout NCHW to NHWC",                       // nchwToNhwc
        "copy channels",                             // copyChannels
        "softmax cross-entropy forward",             // softmaxCrossEntropyForward
        "softmax cross-entropy backward",            // softmaxCrossEntropyBackward
        "sum of squares",                            // sumSquares
        "non-finite flag",                           // flagNonFinite
        "axpy",                                      // axpy
        "optimizer SGD update",                      // sgdUpdate
        "optimizer momentum update",                 // momentumUpdate
        "optimizer Adam update",                     // adamUpdate
        "moving average update",                     // emaUpdate
        "preprocess images",                         // preprocessImages
    };
    return ops;
}

const OpCase* findCase(const std::string& label)
{
    for (const auto& c : opCases())
        if (c.label() == label) return &c;
    return nullptr;
}

// The reference backend, noting which ops the cases call: every op of the op list
// (engine/ops/op_list.h) must be called by some case. Generated from the list, so a new op is
// missed here until the table has a case for it.
class CountingOps final : public Ops
{
public:
    CountingOps() : Ops(allOps()), m_inner(makeReferenceOps()) {}
    std::string name() const override { return "reference (counting)"; }
    Device device() const override { return Device::host(); }
    bool runsFloat(DType dtype) const override { return m_inner->runsFloat(dtype); }
    OpSet called;

protected:
#define TOWERS_COUNTING(n) TOWERS_OP_##n(TOWERS_COUNTING_DEF)
#define TOWERS_COUNTING_DEF(n, R, P, A)                                                            \
    R n##Impl P override                                                                           \
    {                                                                                              \
        called.set(static_cast<std::size_t>(Op::n));                                               \
        return m_inner->n A;                                                                       \
    }
    TOWERS_OPS(TOWERS_COUNTING)
#undef TOWERS_COUNTING_DEF
#undef TOWERS_COUNTING

private:
    std::unique_ptr<Ops> m_inner;
};

} // namespace

class TestOpCases : public QObject
{
    Q_OBJECT

    // The reference's outputs of the latest case (rows run case by case, every backend of a
    // case in a row, so one entry is enough).
    int m_cachedCase = -1;
    std::vector<Tensor> m_inputs;
    std::vector<OpOutput> m_reference;

    std::map<qint64, std::unique_ptr<Ops>> m_targetOps;
    std::unique_ptr<Ops> m_bf16;
    std::unique_ptr<Ops> m_staged, m_cuda, m_cudaTf32, m_cudaBf16;

    void reference(int index)
    {
        if (m_cachedCase == index) return;
        m_cachedCase = -1;
        const OpCase& c = opCases()[static_cast<std::size_t>(index)];
        m_inputs = opCaseInputs(c);
        m_reference = opCaseReference(c, m_inputs);
        m_cachedCase = index;
    }

private slots:
    void initTestCase()
    {
        cpu::setCpuThreads(2);
        qInfo("%zu op cases in %zu ops", opCases().size(), opCaseOps().size());
    }

    // --- the table itself ---

    void coversEveryOp()
    {
        // Every op of Ops has its group (a new op adds one of its own).
        const auto ops = opCaseOps();
        for (const auto& op : expectedOps())
            QVERIFY2(std::find(ops.begin(), ops.end(), op) != ops.end(), op.c_str());
        std::map<std::string, int> count;
        for (const auto& c : opCases()) ++count[c.op];
        for (const auto& op : ops)
            QVERIFY2(count[op] >= 3, (op + ": " + std::to_string(count[op]) + " cases").c_str());
        QVERIFY(opCases().size() >= 250);
    }

    void callsEveryOpOfTheList()
    {
        CountingOps ops;
        for (const auto& c : opCases()) {
            const OpCaseResult r = runOpCase(c, ops, MathMode::Float32);
            QVERIFY2(r.passed, (c.label() + ": " + r.detail()).c_str());
        }
        for (int i = 0; i < kOpCount; ++i)
            QVERIFY2(ops.called.test(std::size_t(i)),
                     (std::string(opName(Op(i))) + " is called by no case of the table").c_str());
    }

    void coversEveryModel()
    {
        // Each registered model's layers are in the table (engine/selftest/op_cases_models.cpp),
        // named after it: a new model brings its shapes there.
        for (const auto& info : modelRegistry()) {
            std::map<std::string, int> ops;
            for (const auto& c : opCases())
                if (c.name.find("(" + info.name + " ") != std::string::npos) ++ops[c.op];
            QVERIFY2(ops["linear forward"] >= 1 && ops["linear backward data"] >= 1 &&
                         ops["linear backward weights"] >= 1 && ops["linear fused backward"] >= 1,
                     (info.name + " has no linear layer in the op-case table").c_str());
            int cases = 0;
            for (const auto& [op, count] : ops) cases += count;
            QVERIFY2(cases >= 8, (info.name + ": " + std::to_string(cases) + " cases").c_str());
        }
    }

    void labelsAreUnique()
    {
        std::set<std::string> labels;
        for (const auto& c : opCases())
            QVERIFY2(labels.insert(c.label()).second, c.label().c_str());
    }

    void inputsAreDeterministic()
    {
        for (const char* label :
             {"conv2d training forward + backward 5x5 s1 same [4,24,24,3]->64, bias, relu, dx "
              "(cifar10-tutorial conv1)",
              "dropout backward [37,1001] (odd sizes), rate 0.4",
              "softmax cross-entropy forward [7,10] logits +-8"}) {
            const OpCase* c = findCase(label);
            QVERIFY2(c, label);
            const auto a = opCaseInputs(*c), b = opCaseInputs(*c), other = opCaseInputs(*c, 2);
            QCOMPARE(a.size(), b.size());
            bool differs = false;
            for (std::size_t i = 0; i < a.size(); ++i) {
                QCOMPARE(a[i].shape(), b[i].shape());
                QCOMPARE(a[i].dtype(), b[i].dtype());
                QCOMPARE(std::memcmp(a[i].raw(), b[i].raw(), a[i].bytes()), 0);
                differs = differs || std::memcmp(a[i].raw(), other[i].raw(), a[i].bytes()) != 0;
                // Float inputs hold float32 values: both backends start from the same numbers.
                if (a[i].dtype() == DType::Float64)
                    for (std::int64_t k = 0; k < a[i].numel(); ++k)
                        QCOMPARE(double(float(a[i].at(k))), a[i].at(k));
            }
            QVERIFY2(differs, "another seed draws other inputs");
        }
    }

    void tiesCaseHasTies()
    {
        // The ties cases are what they claim: windows whose maximum appears more than once.
        const OpCase* c = findCase("max-pool forward + backward 3x3 s2 same [2,9,9,4] (ties: the "
                                   "first maximum wins)");
        QVERIFY(c);
        const Tensor x = opCaseInputs(*c)[0];
        const auto d = makePool2dDesc(x.shape(), 3, 3, 2, 2, Padding::Same);
        int tiedWindows = 0;
        for (std::int64_t oy = 0; oy < d.win.oh; ++oy)
            for (std::int64_t ox = 0; ox < d.win.ow; ++ox) {
                double best = -1;
                int count = 0;
                for (int i = 0; i < 3; ++i)
                    for (int j = 0; j < 3; ++j) {
                        const std::int64_t iy = oy * 2 - d.win.padTop + i,
                                           ix = ox * 2 - d.win.padLeft + j;
                        if (iy < 0 || iy >= d.win.h || ix < 0 || ix >= d.win.w) continue;
                        const double v = x.at((iy * d.win.w + ix) * d.win.c);
                        count = v > best ? 1 : count + (v == best);
                        best = std::max(best, v);
                    }
                tiedWindows += count > 1;
            }
        QVERIFY2(tiedWindows > 5, qPrintable(QString::number(tiedWindows)));
    }

    void skippedUpdatesChangeNothing()
    {
        // Each update has cases with a skip flag of 0 and a set one; with the flag set the
        // reference's outputs are its inputs, bit for bit (and the backends' must equal them).
        std::map<std::string, int> clear, set;
        for (const auto& c : opCases()) {
            if (c.name.find("skip flag 0") != std::string::npos) ++clear[c.op];
            if (c.name.find("skip flag set") == std::string::npos) continue;
            ++set[c.op];
            const auto inputs = opCaseInputs(c);
            QCOMPARE(inputs.back().shape(), Shape({1}));
            QCOMPARE(inputs.back().at(0), 1.0);
            for (const auto& o : opCaseReference(c, inputs)) {
                QVERIFY2(o.exact, (c.label() + ": " + o.name).c_str());
                bool found = false;
                for (const auto& in : inputs)
                    found =
                        found || (in.shape() == o.value.shape() && in.dtype() == o.value.dtype() &&
                                  std::memcmp(in.raw(), o.value.raw(), in.bytes()) == 0);
                QVERIFY2(found, (c.label() + ": " + o.name + " changed").c_str());
            }
        }
        for (const char* op : {"optimizer SGD update", "optimizer momentum update",
                               "optimizer Adam update", "moving average update"}) {
            QVERIFY2(clear[op] >= 1, op);
            QVERIFY2(set[op] >= 1, op);
        }
    }

    // --- the comparison catches what it must ---

    void detectsWrongOutputs()
    {
        const OpCase* c = findCase("LRN forward + backward r4 bias 1 alpha 0.05 beta 0.75 "
                                   "[2,12,12,64] (12x12x64, strong alpha)");
        QVERIFY(c);
        auto ops = cpu::makeOneDnnOps();
        const auto inputs = opCaseInputs(*c);
        const auto want = opCaseReference(*c, inputs);
        const OpCaseResult good = runOpCase(*c, *ops, MathMode::Float32, inputs, want);
        QVERIFY2(good.passed, good.detail().c_str());
        QCOMPARE(int(good.outputs.size()), 2);
        QVERIFY(good.error > 0 && good.error <= 1e-5);

        // A reference from other inputs: every output fails, and the result says by how much.
        const auto other = opCaseReference(*c, opCaseInputs(*c, 7));
        const OpCaseResult bad = runOpCase(*c, *ops, MathMode::Float32, inputs, other);
        QVERIFY(!bad.passed);
        QVERIFY(bad.error > 0.1);
        for (const auto& o : bad.outputs) QVERIFY(!o.passed);
        QVERIFY2(bad.detail().find("over 1e-05") != std::string::npos, bad.detail().c_str());

        // One element of dx (18,432 of them, about 0.5 each) off by 0.01 is caught at float32's
        // tolerance, not at TF32's.
        auto nudged = want;
        nudged[1].value = nudged[1].value.clone();
        nudged[1].value.setAt(100, nudged[1].value.at(100) + 0.01);
        QVERIFY(!runOpCase(*c, *ops, MathMode::Float32, inputs, nudged).passed);
        QVERIFY(runOpCase(*c, *ops, MathMode::Tf32, inputs, nudged, 1e-2).passed);
    }

    void exactOutputsStayExact()
    {
        const OpCase* c = findCase("dropout forward [16,24,24,8], rate 0.5");
        QVERIFY(c);
        auto ops = cpu::makeOneDnnOps();
        const auto inputs = opCaseInputs(*c);
        auto want = opCaseReference(*c, inputs);
        QVERIFY(runOpCase(*c, *ops, MathMode::Tf32, inputs, want).passed);
        // One mask element flipped fails the case even with a loose tolerance.
        QCOMPARE(want[1].name, std::string("mask"));
        QVERIFY(want[1].exact);
        want[1].value = want[1].value.clone();
        want[1].value.data<std::uint8_t>()[5] ^= 1;
        const OpCaseResult r = runOpCase(*c, *ops, MathMode::Tf32, inputs, want, 0.5);
        QVERIFY(!r.passed);
        QCOMPARE(r.tolerance, 0.0);
        QVERIFY(r.outputs[0].passed);
        QVERIFY(!r.outputs[1].passed);
    }

    void anOpThatThrowsFails()
    {
        OpCase c{"relu forward", "float64 on oneDNN", Tolerance::exact(),
                 [](Rng& rng) {
                     return std::vector<Tensor>{Tensor::filled({3}, DType::Float64, rng.uniform())};
                 },
                 [](Ops& ops, const std::vector<Tensor>& in) {
                     Tensor y;
                     ops.reluForward(in[0].to(DType::Float64), y); // oneDNN refuses float64
                     return std::vector<OpOutput>{{"y", y}};
                 }};
        auto ops = cpu::makeOneDnnOps();
        const OpCaseResult r = runOpCase(c, *ops, MathMode::Float32);
        QVERIFY(!r.passed);
        QVERIFY2(!r.failure.empty(), r.detail().c_str());
    }

    // --- every case on every backend ---

    void backendMatchesTheReference_data()
    {
        QTest::addColumn<int>("kind");
        QTest::addColumn<qint64>("target");
        QTest::addColumn<QString>("backendName");
        QTest::addColumn<int>("caseIndex"); // -1: the backend cannot run here (skipped)
        QTest::addColumn<QString>("why");
        struct Backend
        {
            BackendKind kind;
            qint64 target;
            QString name;
        };
        std::vector<Backend> present;
        for (const auto& t : cpu::simdTargets()) {
            const QString name = QStringLiteral("onednn %1").arg(QString::fromStdString(t.name));
            if (t.supported)
                present.push_back({BackendKind::OneDnnTarget, qint64(t.id), name});
            else
                QTest::newRow(qPrintable(name + QStringLiteral(": every case")))
                    << int(BackendKind::OneDnnTarget) << qint64(t.id) << name << -1
                    << towers::test::notRunnableHere(name);
        }
        present.push_back({BackendKind::Staged, 0, QStringLiteral("onednn staged")});
        if (const std::string no = cpu::bf16Unavailable(); no.empty())
            present.push_back({BackendKind::OneDnnBf16, 0, QStringLiteral("onednn bf16")});
        else
            QTest::newRow("onednn bf16: every case")
                << int(BackendKind::OneDnnBf16) << qint64(0) << QStringLiteral("onednn bf16") << -1
                << QString::fromStdString(no);
        std::string why;
        if (gpuOrWhy(why)) {
            present.push_back({BackendKind::Cuda, 0, QStringLiteral("cuda")});
            present.push_back({BackendKind::CudaTf32, 0, QStringLiteral("cuda TF32")});
            if (const std::string no =
                    TrainConfig::precisionUnavailable("cuda", Precision::BFloat16);
                no.empty())
                present.push_back({BackendKind::CudaBf16, 0, QStringLiteral("cuda bf16")});
            else
                QTest::newRow("cuda bf16: every case")
                    << int(BackendKind::CudaBf16) << qint64(0) << QStringLiteral("cuda bf16") << -1
                    << QString::fromStdString(no);
        } else {
            QTest::newRow("cuda: every case")
                << int(BackendKind::Cuda) << qint64(0) << QStringLiteral("cuda") << -1
                << QStringLiteral("needs an NVIDIA GPU and the CUDA backend: ") +
                       QString::fromStdString(why);
        }
        // Case by case, so that the reference runs once per case.
        const auto& cases = opCases();
        for (std::size_t i = 0; i < cases.size(); ++i)
            for (const auto& b : present)
                QTest::newRow(qPrintable(b.name + QStringLiteral(": ") +
                                         QString::fromStdString(cases[i].label())))
                    << int(b.kind) << b.target << b.name << int(i) << QString();
    }
    void backendMatchesTheReference()
    {
        QFETCH(int, kind);
        QFETCH(qint64, target);
        QFETCH(QString, backendName);
        QFETCH(int, caseIndex);
        QFETCH(QString, why);
        if (caseIndex < 0) QSKIP(qPrintable(why));
        const OpCase& c = opCases()[static_cast<std::size_t>(caseIndex)];
        reference(caseIndex);

        std::unique_ptr<cpu::ForcedSimdTarget> forced;
        Ops* ops = nullptr;
        MathMode mode = MathMode::Float32;
        switch (BackendKind(kind)) {
        case BackendKind::OneDnnTarget: {
            forced = std::make_unique<cpu::ForcedSimdTarget>(target);
            // One backend per target: the algorithms it picks and caches depend on the target.
            auto& o = m_targetOps[target];
            if (!o) o = cpu::makeOneDnnOps();
            ops = o.get();
            break;
        }
        case BackendKind::Staged:
            if (!m_staged) m_staged = makeStagedOps(cpu::makeOneDnnOps());
            ops = m_staged.get();
            break;
        case BackendKind::OneDnnBf16:
            if (!m_bf16) m_bf16 = cpu::makeOneDnnOps(Precision::BFloat16);
            ops = m_bf16.get();
            mode = MathMode::BFloat16;
            break;
        case BackendKind::Cuda:
        case BackendKind::CudaTf32:
        case BackendKind::CudaBf16: {
            const bool tf32 = BackendKind(kind) == BackendKind::CudaTf32;
            const bool bf16 = BackendKind(kind) == BackendKind::CudaBf16;
            auto& o = tf32 ? m_cudaTf32 : bf16 ? m_cudaBf16 : m_cuda;
            std::string reason;
            GpuBackend* gpu = gpuOrWhy(reason);
            QVERIFY2(gpu, reason.c_str());
            GpuOpsOptions options;
            options.allowTf32 = tf32;
            options.precision = bf16 ? Precision::BFloat16 : Precision::Float32;
            if (!o) o = gpu->makeOps(0, options);
            ops = o.get();
            mode = tf32 ? MathMode::Tf32 : bf16 ? MathMode::BFloat16 : MathMode::Float32Fast;
            break;
        }
        }
        const OpCaseResult r = runOpCase(c, *ops, mode, m_inputs, m_reference);
        QVERIFY2(r.passed,
                 qPrintable(QStringLiteral("%1 in %2: %3 (tolerance %4)")
                                .arg(backendName, QString::fromStdString(mathModeName(mode)),
                                     QString::fromStdString(r.detail()))
                                .arg(r.tolerance)));
        QCOMPARE(r.outputs.size(), m_reference.size());
    }
};

QTEST_APPLESS_MAIN(TestOpCases)
#include "tst_op_cases.moc"
