#include "python_oracle.h"

#include <QFile>
#include <QProcess>
#include <QRegularExpression>

namespace towers::test {

QString oracleScript(const QString& name)
{
    const QString dir = qEnvironmentVariable("TOWERS_SOURCE_DIR");
    if (dir.isEmpty()) return {};
    const QString path = dir + QStringLiteral("/tests/") + name;
    return QFile::exists(path) ? path : QString();
}

bool torchAvailable()
{
    static const bool available = [] {
        QProcess probe;
        probe.start(QStringLiteral("/usr/bin/python3"),
                    {QStringLiteral("-c"), QStringLiteral("import torch")});
        return probe.waitForFinished(120000) && probe.exitStatus() == QProcess::NormalExit &&
               probe.exitCode() == 0;
    }();
    return available;
}

OracleRun runOracle(const QString& script, const QStringList& args)
{
    QProcess py;
    py.setProcessChannelMode(QProcess::MergedChannels);
    py.start(QStringLiteral("/usr/bin/python3"), QStringList{script} + args);
    OracleRun r;
    if (!py.waitForFinished(300000)) {
        py.kill();
        py.waitForFinished();
        r.output = QStringLiteral("the oracle did not finish in 5 minutes");
        return r;
    }
    r.output = QString::fromUtf8(py.readAll());
    r.exitCode = py.exitStatus() == QProcess::NormalExit ? py.exitCode() : -1;
    return r;
}

QString oracleSection(const QString& output, const QString& fileName)
{
    const QString header = QStringLiteral("== ") + fileName + QLatin1Char('\n');
    const qsizetype begin = output.indexOf(header);
    if (begin < 0) return {};
    const qsizetype start = begin + header.size();
    const qsizetype end = output.indexOf(QStringLiteral("\n== "), start);
    return output.mid(start, end < 0 ? -1 : end - start).trimmed();
}

bool sectionPassed(const QString& section)
{
    static const QRegularExpression summary(QStringLiteral("(\\d+)/(\\d+) tensors within"));
    const auto m = summary.match(section);
    return m.hasMatch() && m.captured(1) == m.captured(2) &&
           !section.contains(QLatin1String("FAIL"));
}

} // namespace towers::test
