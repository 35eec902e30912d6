// LatestJob: results arrive on the owner's thread, superseded results are dropped, exceptions
// become messages.
#include <QObject>
#include <QSignalSpy>
#include <QTest>
#include <QThread>

#include <atomic>
#include <stdexcept>

#include "app/jobs/latest_job.h"

using towers::app::JobResult;
using towers::app::LatestJob;

class TestLatestJob : public QObject
{
    Q_OBJECT
private slots:
    void deliversOnOwnerThread()
    {
        QObject owner;
        LatestJob<int> job(&owner);
        QThread* workThread = nullptr;
        QThread* doneThread = nullptr;
        int value = 0;
        job.start(
            [&workThread] {
                workThread = QThread::currentThread();
                return 42;
            },
            [&](const JobResult<int>& r) {
                doneThread = QThread::currentThread();
                value = r.value.value_or(-1);
            });
        QVERIFY(job.isRunning());
        QTRY_COMPARE(value, 42);
        QVERIFY(!job.isRunning());
        QCOMPARE(doneThread, QThread::currentThread());
        QVERIFY(workThread != QThread::currentThread());
    }

    void supersededResultIsDropped()
    {
        QObject owner;
        LatestJob<int> job(&owner);
        std::atomic<bool> release{false};
        QList<int> delivered;
        // The first job is slow and finishes after the second: its answer must not arrive.
        job.start(
            [&release] {
                while (!release.load()) QThread::msleep(1);
                return 1;
            },
            [&](const JobResult<int>& r) { delivered << *r.value; });
        job.start([] { return 2; }, [&](const JobResult<int>& r) { delivered << *r.value; });
        QTRY_COMPARE(delivered, QList<int>{2});
        release = true;
        QTest::qWait(100); // the first job's result would have arrived by now
        QCOMPARE(delivered, QList<int>{2});
    }

    void cancelDropsTheResult()
    {
        QObject owner;
        LatestJob<int> job(&owner);
        std::atomic<bool> ran{false};
        int calls = 0;
        job.start(
            [&ran] {
                QThread::msleep(20);
                ran = true;
                return 7;
            },
            [&](const JobResult<int>&) { ++calls; });
        job.cancel();
        QVERIFY(!job.isRunning());
        QTRY_VERIFY(ran.load());
        QTest::qWait(50);
        QCOMPARE(calls, 0);
    }

    void exceptionBecomesError()
    {
        QObject owner;
        LatestJob<int> job(&owner);
        bool done = false;
        JobResult<int> result;
        job.start([]() -> int { throw std::runtime_error("data_batch_3.bin: record 1: label 11"); },
                  [&](const JobResult<int>& r) {
                      result = r;
                      done = true;
                  });
        QTRY_VERIFY(done);
        QVERIFY(!result.ok());
        QCOMPARE(result.error, QStringLiteral("data_batch_3.bin: record 1: label 11"));
    }
};

QTEST_GUILESS_MAIN(TestLatestJob)
#include "tst_latest_job.moc"
