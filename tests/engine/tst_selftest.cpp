// The self-test behind `towers-cli selftest`: it passes on the oneDNN backend, and it finds a
// fault: a backend whose LRN is off by a little fails exactly the LRN cases of the op-case table.
#include <QtTest>

#include <set>

#include "engine/errors.h"
#include "engine/reference/reference_ops.h"
#include "engine/selftest/selftest.h"

using namespace towers::engine;

namespace {

// The reference backend with one wrong op: LRN's first output is 1% too large.
class FaultyLrnOps : public reference::ReferenceOps
{
protected:
    void lrnForwardImpl(const LrnDesc& d, const Tensor& x, Tensor& y, Tensor& workspace) override
    {
        ReferenceOps::lrnForwardImpl(d, x, y, workspace);
        for (std::int64_t i = 0; i < y.numel(); i += 97) y.setAt(i, y.at(i) * 1.01);
    }
};

} // namespace

class TestSelfTest : public QObject
{
    Q_OBJECT

private slots:
    void passesOnOneDnn()
    {
        SelfTestOptions o;
        int reported = 0;
        const auto results = runSelfTest(o, [&](const SelfTestResult&) { ++reported; });
        QCOMPARE(reported, int(results.size()));
        QVERIFY(results.size() >= 27);
        std::set<std::string> names;
        for (const auto& r : results) {
            QVERIFY2(r.passed, (r.name + ": " + std::to_string(r.error) + " " + r.detail).c_str());
            QVERIFY2(names.insert(r.name).second, ("duplicate check " + r.name).c_str());
        }
        // The op checks are exactly the op-case table, in its order, each reporting its outputs.
        std::vector<std::string> labels;
        for (const auto& r : results)
            if (!r.op.empty()) {
                labels.push_back(r.name);
                QCOMPARE(r.name, r.op + " " + r.caseName);
                QVERIFY2(!r.outputs.empty(), r.name.c_str());
            }
        QCOMPARE(labels.size(), opCases().size());
        for (std::size_t i = 0; i < labels.size(); ++i) QCOMPARE(labels[i], opCases()[i].label());
        // Every op family and the training checks are there.
        for (const char* family :
             {"conv2d forward", "conv2d backward data", "conv2d backward weights", "max-pool",
              "LRN", "linear", "dropout", "batch norm", "softmax", "optimizer",
              "training:", "replication:"}) {
            bool found = false;
            for (const auto& n : names) found = found || n.find(family) != std::string::npos;
            QVERIFY2(found, family);
        }
    }

    void findsAFaultyOp()
    {
        SelfTestOptions o;
        o.training = false;
        o.makeOps = [] { return std::make_unique<FaultyLrnOps>(); };
        const auto results = runSelfTest(o);
        int failed = 0;
        for (const auto& r : results) {
            const bool isLrn = r.name.rfind("LRN", 0) == 0;
            QVERIFY2(r.passed != isLrn, r.name.c_str());
            if (!r.passed) {
                ++failed;
                QVERIFY(r.error > r.tolerance);
            }
        }
        // Exactly the LRN cases of the op-case table, forward and forward + backward, fail.
        int lrnCases = 0;
        for (const auto& c : opCases()) lrnCases += c.op.rfind("LRN", 0) == 0 ? 1 : 0;
        QVERIFY(lrnCases >= 2);
        QCOMPARE(failed, lrnCases);
        // The lines per op say the same.
        for (const auto& op : summarizeByOp(results)) {
            const bool isLrn = op.op.rfind("LRN", 0) == 0;
            QCOMPARE(op.failed, isLrn ? op.cases : 0);
            QCOMPARE(op.worstPassed, !isLrn);
            if (isLrn) QVERIFY(op.worstError > op.worstTolerance);
        }
    }

    void filter()
    {
        SelfTestOptions o;
        o.training = false;
        o.filter = "cifar10-tutorial";
        const auto results = runSelfTest(o);
        QVERIFY(results.size() >= 10);
        for (const auto& r : results) {
            QVERIFY2(r.name.find("cifar10-tutorial") != std::string::npos, r.name.c_str());
            QVERIFY2(r.passed, (r.name + ": " + r.detail).c_str());
        }
        const auto ops = summarizeByOp(results);
        int cases = 0;
        for (const auto& op : ops) cases += op.cases;
        QCOMPARE(cases, int(results.size()));
        QVERIFY(ops.size() >= 5);
    }

    void unknownBackend()
    {
        SelfTestOptions o;
        o.backend = "tpu";
        QVERIFY_THROWS_EXCEPTION(UnknownName, runSelfTest(o));
    }
};

QTEST_APPLESS_MAIN(TestSelfTest)
#include "tst_selftest.moc"
