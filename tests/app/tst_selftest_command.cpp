// towers-cli selftest: passes on the CPU with a line per op case (its error and tolerance), a line
// per op and exit 0; JSON with --json (every case with its outputs, every op); the table's cases
// with --list, a part of them with --filter; and refuses what it cannot do: --device cuda without
// a GPU backend (exit 1, saying why: a build without CUDA, or a plugin that cannot be loaded), an
// unknown device (exit 2), a filter that matches nothing (exit 2).
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>

#include <map>

#include "cli_process.h"

class TestSelftestCommand : public QObject
{
    Q_OBJECT

    using Result = towers::test::CliResult;

    Result run(const QStringList& args, const QStringList& env = {})
    {
        return towers::test::runCliProcess(QStringLiteral(TOWERS_CLI),
                                           QStringList{QStringLiteral("selftest")} + args, env);
    }

private slots:
    void passesOnTheCpu()
    {
        const Result r = run({});
        QVERIFY2(r.exitCode == 0, qPrintable(r.out + r.err));
        QVERIFY(r.out.contains(QStringLiteral("PASS  conv2d forward")));
        QVERIFY(r.out.contains(QStringLiteral("PASS  replication:")));
        QVERIFY(!r.out.contains(QStringLiteral("FAIL")));
        QVERIFY(r.out.contains(
            QRegularExpression(QStringLiteral("selftest: (\\d+) of \\1 checks passed on cpu"))));
        // A line per case with its error against the tolerance and each output's error.
        QVERIFY2(r.out.contains(QRegularExpression(QStringLiteral(
                     "\\nPASS  conv2d forward 5x5 s1 same \\[4,24,24,3\\]->64, bias, relu "
                     "\\(cifar10-tutorial conv1\\)  \\([0-9.e-]+ <= 1e-05\\)  y [0-9.e-]+\\n"))),
                 qPrintable(r.out));
        QVERIFY(r.out.contains(QRegularExpression(
            QStringLiteral("\\nPASS  conv2d training forward \\+ backward .*  \\([0-9.e-]+ <= "
                           "1e-05\\)  y [0-9.e-]+, dx [0-9.e-]+, dw [0-9.e-]+, db [0-9.e-]+\\n"))));
        QVERIFY(r.out.contains(QRegularExpression(
            QStringLiteral("\\nPASS  max-pool forward .*ties.*  \\(0 <= 0\\)"))));
        // Then a line per op, after every case.
        const qsizetype perOp = r.out.indexOf(QStringLiteral("\nper op:\n"));
        QVERIFY(perOp > 0);
        const QString ops = r.out.mid(perOp);
        for (const char* op : {"conv2d forward", "conv2d backward data", "max-pool forward",
                               "LRN forward + backward", "linear fused backward",
                               "batch norm backward", "optimizer Adam update"})
            QVERIFY2(ops.contains(QRegularExpression(
                         QStringLiteral("\\nPASS  %1 +\\d+ cases, worst ")
                             .arg(QRegularExpression::escape(QString::fromLatin1(op))))),
                     op);
        QVERIFY(!ops.contains(QStringLiteral("training:")) &&
                !ops.contains(QStringLiteral("replication:")));
    }

    void json()
    {
        const Result r = run({QStringLiteral("--no-training"), QStringLiteral("--json")});
        QCOMPARE(r.exitCode, 0);
        const QJsonObject j = QJsonDocument::fromJson(r.out.toUtf8()).object();
        QCOMPARE(j.value(QStringLiteral("passed")).toBool(), true);
        const QJsonArray checks = j.value(QStringLiteral("checks")).toArray();
        QVERIFY(checks.size() >= 25);
        QCOMPARE(j.value(QStringLiteral("mathMode")).toString(), QStringLiteral("float32"));
        std::map<QString, int> perOp;
        for (const auto& c : checks) {
            const QJsonObject o = c.toObject();
            QVERIFY(o.value(QStringLiteral("passed")).toBool());
            QVERIFY(
                !o.value(QStringLiteral("name")).toString().startsWith(QStringLiteral("training")));
            // Every check is an op case, named by its op and case, with its outputs.
            const QString op = o.value(QStringLiteral("op")).toString();
            QVERIFY(!op.isEmpty());
            QCOMPARE(o.value(QStringLiteral("name")).toString(),
                     op + QLatin1Char(' ') + o.value(QStringLiteral("case")).toString());
            const QJsonArray outputs = o.value(QStringLiteral("outputs")).toArray();
            QVERIFY(!outputs.isEmpty());
            double worst = 0;
            for (const auto& out : outputs) {
                QVERIFY(out.toObject().value(QStringLiteral("passed")).toBool());
                QVERIFY(out.toObject().value(QStringLiteral("error")).toDouble() <=
                        out.toObject().value(QStringLiteral("tolerance")).toDouble());
                worst = std::max(worst, out.toObject().value(QStringLiteral("error")).toDouble());
            }
            QVERIFY(o.value(QStringLiteral("error")).toDouble() <= worst);
            ++perOp[op];
        }
        // The ops, each with its count of cases.
        const QJsonArray ops = j.value(QStringLiteral("ops")).toArray();
        QCOMPARE(ops.size(), qsizetype(perOp.size()));
        for (const auto& op : ops) {
            const QJsonObject o = op.toObject();
            QCOMPARE(o.value(QStringLiteral("cases")).toInt(),
                     perOp[o.value(QStringLiteral("op")).toString()]);
            QCOMPARE(o.value(QStringLiteral("failed")).toInt(), 0);
            QVERIFY(o.value(QStringLiteral("passed")).toBool());
        }
        // --list names the same cases.
        const Result list = run({QStringLiteral("--list")});
        QCOMPARE(list.exitCode, 0);
        const QStringList lines = list.out.split(QLatin1Char('\n'), Qt::SkipEmptyParts);
        QCOMPARE(lines.size(), checks.size());
        for (qsizetype i = 0; i < lines.size(); ++i)
            QCOMPARE(lines[i], checks[i].toObject().value(QStringLiteral("name")).toString());
    }

    void filter()
    {
        const Result r = run({QStringLiteral("--no-training"), QStringLiteral("--filter"),
                              QStringLiteral("LRN forward + backward")});
        QVERIFY2(r.exitCode == 0, qPrintable(r.out + r.err));
        const auto cases =
            r.out.count(QRegularExpression(QStringLiteral("\\nPASS  LRN forward \\+ backward r")));
        QVERIFY(cases >= 5);
        QVERIFY(!r.out.contains(QStringLiteral("conv2d")));
        QVERIFY(r.out.contains(QStringLiteral("selftest: %1 of %1 checks passed").arg(cases)));
        const Result none = run({QStringLiteral("--filter"), QStringLiteral("no such op")});
        QCOMPARE(none.exitCode, 2);
        QVERIFY2(none.err.contains(QStringLiteral("matches no op case")), qPrintable(none.err));
    }

    void refusesWhatItCannotDo()
    {
        // Whatever this machine has, a plugin that is not there means no GPU backend, and says
        // where.
        const QString missing = QStringLiteral("/nonexistent/libtowers-cuda.so");
        const Result cuda = run({QStringLiteral("--device"), QStringLiteral("cuda")},
                                {QStringLiteral("TOWERS_CUDA_PLUGIN=") + missing});
        QCOMPARE(cuda.exitCode, 1);
        QVERIFY2(cuda.err.contains(QStringLiteral("No GPU backend")), qPrintable(cuda.err));
        QVERIFY2(cuda.err.contains(missing + QStringLiteral(" could not be loaded")),
                 qPrintable(cuda.err));
        // --gpu means a GPU too; it is a number, and not for the CPU.
        const Result gpu = run({QStringLiteral("--gpu"), QStringLiteral("1")},
                               {QStringLiteral("TOWERS_CUDA_PLUGIN=") + missing});
        QCOMPARE(gpu.exitCode, 1);
        QVERIFY2(gpu.err.contains(QStringLiteral("No GPU backend")), qPrintable(gpu.err));
        const Result gpuWord = run({QStringLiteral("--gpu"), QStringLiteral("one")});
        QCOMPARE(gpuWord.exitCode, 2);
        QVERIFY2(gpuWord.err.contains(QStringLiteral("--gpu must be an integer")),
                 qPrintable(gpuWord.err));
        const Result gpuOnCpu = run({QStringLiteral("--device"), QStringLiteral("cpu"),
                                     QStringLiteral("--gpu"), QStringLiteral("0")});
        QCOMPARE(gpuOnCpu.exitCode, 2);
        QVERIFY2(gpuOnCpu.err.contains(QStringLiteral("--gpu is for --device cuda")),
                 qPrintable(gpuOnCpu.err));
        const Result tf32 = run({QStringLiteral("--tf32")});
        QCOMPARE(tf32.exitCode, 2);
        const Result bad = run({QStringLiteral("--device"), QStringLiteral("tpu")});
        QCOMPARE(bad.exitCode, 2);
        QVERIFY2(bad.err.contains(QStringLiteral("tpu")), qPrintable(bad.err));
        QCOMPARE(run({QStringLiteral("--bogus")}).exitCode, 2);
    }
};

QTEST_GUILESS_MAIN(TestSelftestCommand)
#include "tst_selftest_command.moc"
