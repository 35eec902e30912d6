#pragma once
// The fixture the towers-cli train / eval / classify tests share (tst_train_command,
// tst_train_command_resume, tst_train_command_stops): a small generated Fashion-MNIST-format
// dataset in a temporary folder, towers-cli (TOWERS_CLI) run there as a process with the test's
// folders, and what a run leaves to read back.
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QList>
#include <QObject>
#include <QProcess>
#include <QProcessEnvironment>
#include <QString>
#include <QStringList>
#include <QTemporaryDir>
#include <QTest>

#include <filesystem>
#include <functional>

#include "cli_process.h"
#include "dataset_files.h"
#include "engine/train/checkpoint.h"

namespace towers::test {

class TrainCommandTest : public QObject
{
    Q_OBJECT

protected:
    struct CliRun
    {
        int exitCode = -1;
        QString out, err;
        QList<QJsonObject> events; // --json lines
    };

    static QList<QJsonObject> jsonLines(const QString& text)
    {
        QList<QJsonObject> events;
        for (const QString& line : text.split(QLatin1Char('\n'), Qt::SkipEmptyParts)) {
            const auto doc = QJsonDocument::fromJson(line.toUtf8());
            if (doc.isObject()) events << doc.object();
        }
        return events;
    }

    QTemporaryDir m_tmp;

    QString path(const QString& name) const { return m_tmp.filePath(name); }

    // The test's folders, plus `extra` ("NAME=value").
    QProcessEnvironment environment(const QStringList& extra = {}) const
    {
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("HOME"), path(QStringLiteral("home")));
        env.insert(QStringLiteral("XDG_DATA_HOME"), path(QStringLiteral("xdg")));
        env.insert(QStringLiteral("TOWERS_DATA"), path(QStringLiteral("data")));
        env.insert(QStringLiteral("TOWERS_RUNS"), path(QStringLiteral("runs")));
        env.insert(QStringLiteral("OMP_NUM_THREADS"), QStringLiteral("1"));
        // These runs are the CPU's, on any machine: no GPU backend (tst_gpu_backend has the GPU's).
        env.insert(QStringLiteral("TOWERS_CUDA_PLUGIN"),
                   QStringLiteral("/nonexistent/libtowers-cuda.so"));
        for (const QString& e : extra)
            env.insert(e.section(QLatin1Char('='), 0, 0), e.section(QLatin1Char('='), 1));
        return env;
    }

    CliRun run(const QStringList& args, int timeoutMs = 120000,
               const std::function<void(QProcess&)>& during = {}, const QStringList& env = {})
    {
        QProcess p;
        p.setProgram(QStringLiteral(TOWERS_CLI));
        p.setArguments(args);
        p.setProcessEnvironment(environment(env));
        test::withDefaultSignals(p);
        p.start();
        if (!p.waitForStarted(10000)) qFatal("cannot start towers-cli");
        if (during) during(p);
        if (!p.waitForFinished(timeoutMs)) {
            p.kill();
            p.waitForFinished();
            qWarning("towers-cli %s timed out", qPrintable(args.join(QLatin1Char(' '))));
        }
        CliRun r;
        r.exitCode = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
        r.out = QString::fromUtf8(p.readAllStandardOutput());
        r.err = QString::fromUtf8(p.readAllStandardError());
        r.events = jsonLines(r.out);
        return r;
    }

    // The options of a small, fast, exact run (no augmentation).
    static QStringList small(const QString& runDir)
    {
        return {QStringLiteral("train"),
                QStringLiteral("--dataset"),
                QStringLiteral("fashion-mnist"),
                QStringLiteral("--batch-size"),
                QStringLiteral("16"),
                QStringLiteral("--towers"),
                QStringLiteral("2"),
                QStringLiteral("--augment"),
                QStringLiteral("none"),
                QStringLiteral("--log-every"),
                QStringLiteral("2"),
                QStringLiteral("--run-dir"),
                runDir,
                QStringLiteral("--json")};
    }

    static QByteArray readFile(const QString& file)
    {
        QFile f(file);
        return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
    }

    // Whether a --json run logged a line containing `text`.
    static bool logged(const CliRun& r, const QString& text)
    {
        for (const auto& e : r.events)
            if (e.value(QStringLiteral("event")).toString() == QLatin1String("log") &&
                e.value(QStringLiteral("message")).toString().contains(text))
                return true;
        return false;
    }

    static engine::Checkpoint checkpointAt(const QString& runDir, int step)
    {
        return engine::readCheckpoint(
            std::filesystem::path(runDir.toStdString()) / "checkpoints" /
            QStringLiteral("ckpt-%1.safetensors").arg(step, 8, 10, QLatin1Char('0')).toStdString());
    }

private slots:
    void initTestCase()
    {
        QVERIFY(m_tmp.isValid());
        // 256 training and 64 test images of 28x28 in the real (gzip'ed IDX) format.
        test::writeIdxDataset(path(QStringLiteral("data/fashion-mnist")).toStdString(), 256, 64, 28,
                              28, true, 7);
    }
};

} // namespace towers::test
