// The train command's output queue: a reader that stops reading (a full pipe) never blocks the
// thread that prints; what could not wait is dropped and counted, and the count is printed once
// the output moves again; everything else arrives in order.
#include <QElapsedTimer>
#include <QFile>
#include <QTest>
#include <QTextStream>

#include <chrono>
#include <thread>
#include <unistd.h>

#include "app/cli/output_queue.h"

using namespace towers::app;

class TestOutputQueue : public QObject
{
    Q_OBJECT

private slots:
    void aStalledOutputNeverBlocksTheWriter()
    {
        int fds[2];
        QVERIFY(::pipe(fds) == 0);
        QFile file;
        QVERIFY(file.open(fds[1], QIODevice::WriteOnly, QFileDevice::AutoCloseHandle));
        QTextStream out(&file);
        OutputQueue queue(out, 100);
        queue.start();
        // Nobody reads the pipe (64 KiB): the writer thread blocks, the producer does not.
        QElapsedTimer clock;
        clock.start();
        const QString line(200, QLatin1Char('x'));
        for (int i = 0; i < 20000; ++i) queue.write(line);
        QVERIFY2(clock.elapsed() < 2000, "writing lines waited for the output");
        QVERIFY(queue.dropped() > 0);
        // The output moves again: everything queued arrives, then the count of dropped lines.
        QByteArray got;
        std::thread reader([&] {
            char buf[65536];
            for (;;) {
                const ssize_t n = ::read(fds[0], buf, sizeof buf);
                if (n <= 0) break;
                got.append(buf, int(n));
            }
        });
        // Room again in the queue once the writer has caught up with the reader.
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        queue.write(QStringLiteral("last line"));
        queue.finish();
        queue.write(QStringLiteral("after finish: written directly")); // no thread any more
        out.flush();
        file.close();
        reader.join();
        ::close(fds[0]);
        QVERIFY(got.contains("lines of output were dropped: the output was not being read"));
        QVERIFY(got.contains("last line\n"));
        QVERIFY(got.endsWith("after finish: written directly\n"));
        QVERIFY(got.indexOf("last line") < got.indexOf("after finish"));
    }

    void inOrderWhenNothingIsDropped()
    {
        QString text;
        QTextStream out(&text);
        {
            OutputQueue queue(out);
            queue.write(QStringLiteral("before"));
            queue.start();
            for (int i = 0; i < 1000; ++i) queue.write(QString::number(i));
            queue.finish();
            QCOMPARE(queue.dropped(), std::size_t(0));
        }
        QStringList want{QStringLiteral("before")};
        for (int i = 0; i < 1000; ++i) want << QString::number(i);
        QCOMPARE(text, want.join(QLatin1Char('\n')) + QLatin1Char('\n'));
    }
};

QTEST_APPLESS_MAIN(TestOutputQueue)
#include "tst_output_queue.moc"
