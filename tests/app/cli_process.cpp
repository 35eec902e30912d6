#include "cli_process.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTest>

#include <csignal>
#include <sys/types.h>

namespace towers::test {

void withDefaultSignals(QProcess& p)
{
    p.setChildProcessModifier([] {
        ::signal(SIGINT, SIG_DFL);
        ::signal(SIGHUP, SIG_DFL);
    });
}

CliResult runCliProcess(const QString& program, const QStringList& args, const QStringList& env,
                        int interruptAfterMs, int timeoutMs)
{
    QProcess p;
    QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
    for (const QString& kv : env)
        e.insert(kv.section(QLatin1Char('='), 0, 0), kv.section(QLatin1Char('='), 1));
    p.setProcessEnvironment(e);
    withDefaultSignals(p);
    p.start(program, args);
    if (interruptAfterMs >= 0 && p.waitForStarted()) {
        QTest::qWait(interruptAfterMs);
        ::kill(static_cast<pid_t>(p.processId()), SIGINT);
    }
    if (!p.waitForFinished(timeoutMs)) p.kill();
    CliResult r;
    r.exitCode = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = QString::fromUtf8(p.readAllStandardOutput());
    r.err = QString::fromUtf8(p.readAllStandardError());
    return r;
}

std::vector<double> firstClassifiedLogits(const QString& out)
{
    std::vector<double> logits;
    const QJsonArray results =
        QJsonDocument::fromJson(out.toUtf8()).object().value(QStringLiteral("results")).toArray();
    if (results.isEmpty()) return logits;
    for (const auto v : results.first().toObject().value(QStringLiteral("logits")).toArray())
        logits.push_back(v.toDouble());
    return logits;
}

} // namespace towers::test
