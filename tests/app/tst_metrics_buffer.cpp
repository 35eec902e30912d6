// MetricsBuffer: push reports the empty -> non-empty transition (the one moment worth a signal),
// drain returns everything in order and empties the buffer, and a producer thread racing a
// draining consumer loses nothing and is never left without a pending notification.
#include <QTest>

#include <atomic>
#include <thread>

#include "app/train/metrics_buffer.h"

using towers::app::MetricsBuffer;
using towers::app::TrainingEvents;

namespace {
towers::engine::StepMetrics step(std::int64_t s)
{
    towers::engine::StepMetrics m;
    m.step = s;
    m.loss = 1.0 / double(s + 1);
    return m;
}
} // namespace

class TestMetricsBuffer : public QObject
{
    Q_OBJECT
private slots:
    void transitionsAndDrain()
    {
        MetricsBuffer b;
        QVERIFY(b.isEmpty());
        QVERIFY(b.pushStep(step(1))); // empty -> non-empty
        QVERIFY(!b.pushStep(step(2)));
        QVERIFY(!b.pushLog(QStringLiteral("step 2, loss = 0.33")));
        towers::engine::EvalResult r(10);
        r.step = 2;
        QVERIFY(!b.pushEvaluation(r));
        QVERIFY(
            !b.pushCheckpoint(QStringLiteral("/runs/a/checkpoints/ckpt-00000002.safetensors"), 2));
        TrainingEvents e = b.drain();
        QVERIFY(b.isEmpty());
        QCOMPARE(e.steps.size(), std::size_t(2));
        QCOMPARE(e.steps[1].step, 2);
        QCOMPARE(e.logLines, QStringList{QStringLiteral("step 2, loss = 0.33")});
        QCOMPARE(e.evaluations.size(), std::size_t(1));
        QCOMPARE(e.checkpoints.at(0).second, 2);
        QVERIFY(b.drain().isEmpty());
        QVERIFY(b.pushLog(QStringLiteral("again"))); // empty again: the next push notifies
    }

    void producerAndConsumer()
    {
        MetricsBuffer b;
        constexpr int kSteps = 20000;
        std::atomic<int> notifications{0};
        std::atomic<bool> done{false};
        std::thread producer([&] {
            for (int s = 1; s <= kSteps; ++s)
                if (b.pushStep(step(s))) ++notifications;
            done = true;
        });
        std::vector<std::int64_t> seen;
        int drains = 0;
        while (!done.load() || !b.isEmpty()) {
            const TrainingEvents e = b.drain();
            if (!e.isEmpty()) ++drains;
            for (const auto& m : e.steps) seen.push_back(m.step);
            std::this_thread::yield();
        }
        producer.join();
        QCOMPARE(int(seen.size()), kSteps);
        for (int i = 0; i < kSteps; ++i) QCOMPARE(seen[std::size_t(i)], std::int64_t(i + 1));
        // Every non-empty drain was preceded by exactly one notification.
        QCOMPARE(notifications.load(), drains);
    }
};

QTEST_GUILESS_MAIN(TestMetricsBuffer)
#include "tst_metrics_buffer.moc"
