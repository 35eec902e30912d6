// towers-cli selftest: passes on the CPU with a line per check and exit 0, JSON with --json, and
// refuses what it cannot do: --device cuda without a GPU backend (exit 1, saying why: a build
// without CUDA, or a plugin that cannot be loaded), an unknown device (exit 2).
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>

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
    }

    void json()
    {
        const Result r = run({QStringLiteral("--no-training"), QStringLiteral("--json")});
        QCOMPARE(r.exitCode, 0);
        const QJsonObject j = QJsonDocument::fromJson(r.out.toUtf8()).object();
        QCOMPARE(j.value(QStringLiteral("passed")).toBool(), true);
        const QJsonArray checks = j.value(QStringLiteral("checks")).toArray();
        QVERIFY(checks.size() >= 25);
        for (const auto& c : checks) {
            QVERIFY(c.toObject().value(QStringLiteral("passed")).toBool());
            QVERIFY(!c.toObject()
                         .value(QStringLiteral("name"))
                         .toString()
                         .startsWith(QStringLiteral("training")));
        }
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
