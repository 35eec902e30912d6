#include "replication.h"

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "synthetic_batches.h"

namespace towers::test {

using namespace engine;

namespace {

// max |a - b| / max |b| (the crosscheck's measure).
double relDiff(const Tensor& a, const Tensor& b)
{
    double num = 0, den = 0;
    for (std::int64_t i = 0; i < b.numel(); ++i) {
        num = std::max(num, std::fabs(a.at(i) - b.at(i)));
        den = std::max(den, std::fabs(b.at(i)));
    }
    return num / std::max(den, 1e-30);
}

} // namespace

bool sameBytes(const Tensor& a, const Tensor& b)
{
    const Tensor ha = a.onHost(), hb = b.onHost();
    return ha.shape() == hb.shape() && ha.dtype() == hb.dtype() &&
           std::memcmp(ha.raw(), hb.raw(), ha.bytes()) == 0;
}

std::vector<Tensor> weightsOf(Model& m)
{
    std::vector<Tensor> out;
    for (auto* p : m.parameters())
        if (p->trainable) out.push_back(p->value.onHost().clone());
    return out;
}

Comparison compare(const std::vector<Tensor>& a, const std::vector<Tensor>& b,
                   const std::vector<Tensor>& w0, const std::vector<std::string>& names)
{
    Comparison c;
    double diff2 = 0, norm2 = 0, travel2 = 0, maxDiff = 0, maxAbs = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const double d = relDiff(b[i], a[i]);
        if (d > c.worst) {
            c.worst = d;
            c.where = names[i];
        }
        for (std::int64_t k = 0; k < a[i].numel(); ++k) {
            const double x = a[i].at(k), y = b[i].at(k);
            diff2 += (x - y) * (x - y);
            maxDiff = std::max(maxDiff, std::fabs(x - y));
            maxAbs = std::max(maxAbs, std::fabs(x));
            norm2 += x * x;
            travel2 += (x - w0[i].at(k)) * (x - w0[i].at(k));
        }
    }
    c.normalised = std::sqrt(diff2 / norm2);
    c.maxRelative = maxDiff / maxAbs;
    c.travelled = std::sqrt(diff2 / travel2);
    return c;
}

Replication replicate(TowerSetOptions single, TowerSetOptions multi, int steps)
{
    const Shape in{24, 24, 3};
    const double lr = 0.05;
    TowerSet one(single);
    multi.towers = 2;
    TowerSet two(multi);
    multi.towers = 4;
    TowerSet four(multi);
    SyntheticBatches s1(in, 10, 1, 64, 640, 3), s2(in, 10, 2, 32, 640, 3),
        s4(in, 10, 4, 16, 640, 3);
    const auto w0 = weightsOf(one.model());
    std::vector<std::string> names;
    for (auto* p : one.model().parameters())
        if (p->trainable) names.push_back(p->name);
    Replication r;
    std::vector<Tensor> twoBefore;
    for (int s = 0; s < steps; ++s) {
        if (s == steps - 1) twoBefore = weightsOf(two.model());
        const auto a = one.step(s1.next(), s, lr);
        const auto b = two.step(s2.next(), s, lr);
        const auto c = four.step(s4.next(), s, lr);
        r.two.lossDiff = std::max(r.two.lossDiff, std::fabs(a.loss - b.loss) / std::fabs(a.loss));
        r.four.lossDiff = std::max(r.four.lossDiff, std::fabs(a.loss - c.loss) / std::fabs(a.loss));
        if (s == 0) r.firstLoss = a.loss;
        r.lastLoss = a.loss;
    }
    const auto wa = weightsOf(one.model());
    const double l2 = r.two.lossDiff, l4 = r.four.lossDiff;
    r.two = compare(wa, weightsOf(two.model()), w0, names);
    r.four = compare(wa, weightsOf(four.model()), w0, names);
    r.two.lossDiff = l2;
    r.four.lossDiff = l4;
    r.previousStep = compare(wa, twoBefore, w0, names);
    return r;
}

void expectFloat32Replication(const Replication& r)
{
    for (const auto& [name, c] : {std::pair{"2 x 32", r.two}, std::pair{"4 x 16", r.four}}) {
        qInfo("%s: model-wide max |a - b| / max |b| = %.3g, |a - b| / |b| = %.3g, |a - b| / |b - "
              "w0| = %.3g; worst tensor %.3g (%s); losses within %.3g",
              name, c.maxRelative, c.normalised, c.travelled, c.worst, c.where.c_str(), c.lossDiff);
        QVERIFY2(c.maxRelative <= 1e-3, qPrintable(QString::number(c.maxRelative)));
        QVERIFY2(c.lossDiff <= 1e-5, qPrintable(QString::number(c.lossDiff)));
        QVERIFY2(c.normalised <= 1e-4, qPrintable(QString::number(c.normalised)));
        QVERIFY2(c.travelled <= 1e-2, qPrintable(QString::number(c.travelled)));
    }
    QVERIFY2(r.lastLoss < r.firstLoss, "the runs did not learn, so their agreement proves little");
    qInfo("one step short: |a - b| / |b - w0| = %.3g", r.previousStep.travelled);
    QVERIFY2(r.previousStep.travelled > 5e-2,
             qPrintable(QString::number(r.previousStep.travelled)));
}

void expectSameTraining(TowerSet& want, TowerSet& got, std::uint64_t seed, int steps, int nanStep)
{
    SyntheticBatches data(want.model().inputShape(), want.model().numClasses(), want.size(), 4, 64,
                          seed);
    data.injectNanAt(nanStep);
    for (int s = 0; s < steps; ++s) {
        const Batch& batch = data.next();
        const double lr = 0.05 / (1 + s);
        const auto a = want.step(batch, s, lr);
        const auto b = got.step(batch, s, lr);
        QCOMPARE(b.finite, s != nanStep); // the NaN step is skipped everywhere
        QCOMPARE(a.finite, b.finite);
        if (a.finite) QCOMPARE(b.loss, a.loss);
        // The norm before clipping, where the towers clip: the same bits, or NaN both (none, or a
        // step that was not finite).
        QCOMPARE(std::isnan(b.gradNorm), std::isnan(a.gradNorm));
        if (!std::isnan(a.gradNorm))
            QVERIFY2(b.gradNorm == a.gradNorm,
                     qPrintable(QStringLiteral("step %1: gradient norm %2, want %3")
                                    .arg(s)
                                    .arg(b.gradNorm, 0, 'g', 17)
                                    .arg(a.gradNorm, 0, 'g', 17)));
        QVERIFY(a.finite || std::isnan(a.gradNorm));
    }
    QCOMPARE(QString::fromStdString(got.compareReplicas()), QString());
    const auto& wp = want.model().parameters();
    const auto& gp = got.model().parameters();
    for (std::size_t i = 0; i < wp.size(); ++i)
        QVERIFY2(sameBytes(gp[i]->value, wp[i]->value), wp[i]->name.c_str());
    const auto ws = want.optimizer().state(wp);
    const auto gs = got.optimizer().state(gp);
    QCOMPARE(gs.size(), ws.size());
    for (std::size_t i = 0; i < ws.size(); ++i)
        QVERIFY2(sameBytes(gs[i].second, ws[i].second), ws[i].first.c_str());
}

} // namespace towers::test
