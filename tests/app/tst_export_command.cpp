// towers-cli export, run as a process as a user would: the file beside the checkpoint by default,
// --output, --json, an existing file refused without --force (and replaced with it), a damaged or
// missing checkpoint (exit code 1, the message naming the file), and bad usage (exit code 2, the
// message naming the option). The numbers inside the file are tst_onnx_export's.
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <fstream>

#include "cli_process.h"
#include "engine/models/registry.h"
#include "engine/train/checkpoint.h"

using namespace towers;

class TestExportCommand : public QObject
{
    Q_OBJECT
    QTemporaryDir m_dir;
    QString m_checkpoint;

    QString path(const char* name) const { return m_dir.filePath(QLatin1String(name)); }

    static test::CliResult exportCli(const QStringList& args)
    {
        return test::runCliProcess(QStringLiteral(TOWERS_CLI),
                                   QStringList{QStringLiteral("export")} + args,
                                   {QStringLiteral("OMP_NUM_THREADS=1")});
    }

private slots:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        auto model = engine::createModel("fashion-fast", 3);
        engine::CheckpointInfo info;
        info.dataset = "fashion-mnist";
        info.step = 42;
        m_checkpoint = path("ckpt-00000042.safetensors");
        engine::writeCheckpoint(m_checkpoint.toStdString(), engine::makeCheckpoint(*model, info));
    }

    void writesBesideTheCheckpoint()
    {
        const auto r = exportCli({QStringLiteral("--checkpoint"), m_checkpoint});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        const QString onnx = path("ckpt-00000042.onnx");
        QVERIFY2(r.out.contains(onnx), qPrintable(r.out));
        QVERIFY(r.out.contains(QLatin1String("fashion-fast")));
        QVERIFY(QFileInfo(onnx).size() > 100000);
        // The checkpoint names no preprocessing: said, not fatal.
        QVERIFY2(r.err.contains(QLatin1String("warning")), qPrintable(r.err));

        // Again: refused, the file named, the file kept; --force replaces it.
        const QDateTime before = QFileInfo(onnx).lastModified();
        const auto again = exportCli({QStringLiteral("--checkpoint"), m_checkpoint});
        QCOMPARE(again.exitCode, 1);
        QVERIFY2(again.err.contains(onnx) && again.err.contains(QLatin1String("--force")),
                 qPrintable(again.err));
        QCOMPARE(QFileInfo(onnx).lastModified(), before);
        const auto forced =
            exportCli({QStringLiteral("--checkpoint"), m_checkpoint, QStringLiteral("--force")});
        QVERIFY2(forced.exitCode == 0, qPrintable(forced.err));
    }

    // --force replaces an ONNX file, never a checkpoint: the one exported (also by another path
    // to it), another run's, or a copy under any name (what the file is decides, not its name);
    // nor a run's own config.json. Each is refused, named, and left as it was.
    void neverReplacesACheckpoint()
    {
        const QString other = path("ckpt-00000007.safetensors");
        QVERIFY(QFile::copy(m_checkpoint, other));
        const QString viaDots = m_dir.path() + QStringLiteral("/./ckpt-00000042.safetensors");
        const QString link = path("a-link.onnx"); // another name of the checkpoint itself
        QVERIFY(QFile::link(m_checkpoint, link));
        const QString renamed = path("ckpt-00000042.safetensors.bak");
        QVERIFY(QFile::copy(m_checkpoint, renamed));
        const QString upper = path("COPY.SAFETENSORS");
        QVERIFY(QFile::copy(m_checkpoint, upper));
        QVERIFY(QDir().mkpath(path("run/checkpoints")));
        const QString runConfig = path("run/config.json");
        for (const QString& file : {runConfig, path("run/metrics.jsonl")}) {
            QFile c(file);
            QVERIFY(c.open(QIODevice::WriteOnly) && c.write("{\"model\": \"fashion-fast\"}") > 0);
        }
        // A project's own config.json beside a checkpoints/ folder of other files is no run's.
        QVERIFY(QDir().mkpath(path("project/checkpoints")));
        const QString projectConfig = path("project/config.json");
        {
            QFile c(projectConfig);
            QVERIFY(c.open(QIODevice::WriteOnly) && c.write("{}") == 2);
        }
        for (const QString& target :
             {m_checkpoint, viaDots, other, link, renamed, upper, runConfig}) {
            const QByteArray before = [&] {
                QFile f(target);
                return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
            }();
            QVERIFY(!before.isEmpty());
            const auto r =
                exportCli({QStringLiteral("--checkpoint"), m_checkpoint, QStringLiteral("--output"),
                           target, QStringLiteral("--force")});
            QCOMPARE(r.exitCode, 1);
            QVERIFY2(r.err.contains(target) &&
                         r.err.contains(target == runConfig ? QLatin1String("the run's own")
                                                            : QLatin1String("checkpoint")),
                     qPrintable(r.err));
            QFile f(target);
            QVERIFY(f.open(QIODevice::ReadOnly));
            QCOMPARE(f.readAll(), before);
        }
        const auto replaced =
            exportCli({QStringLiteral("--checkpoint"), m_checkpoint, QStringLiteral("--output"),
                       projectConfig, QStringLiteral("--force")});
        QVERIFY2(replaced.exitCode == 0, qPrintable(replaced.err));
        // An output it will not write is refused before a run's checkpoint is looked for.
        QVERIFY(QFile::copy(m_checkpoint, path("run/checkpoints/ckpt-00000042.safetensors")));
        const auto early = exportCli({QStringLiteral("--checkpoint"), path("run"),
                                      QStringLiteral("--output"), projectConfig});
        QCOMPARE(early.exitCode, 1);
        QVERIFY2(early.err.contains(QStringLiteral("already exists")) &&
                     !early.err.contains(QStringLiteral("the newest checkpoint of")),
                 qPrintable(early.err));
        // Nor is an ONNX file given a checkpoint's name, where runs and eval would take it for
        // one; a folder is said to be one, not to exist already.
        const QString named = path("run/checkpoints/ckpt-00000099.Safetensors");
        auto r = exportCli(
            {QStringLiteral("--checkpoint"), m_checkpoint, QStringLiteral("--output"), named});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(QStringLiteral("is a checkpoint's name (.safetensors), which "
                                               "export never writes: name a .onnx file")),
                 qPrintable(r.err));
        QVERIFY(!QFile::exists(named));
        r = exportCli({QStringLiteral("--checkpoint"), m_checkpoint, QStringLiteral("--output"),
                       path("run/")});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(QStringLiteral("is a folder, not a file name")) &&
                     !r.err.contains(QStringLiteral("--force")),
                 qPrintable(r.err));
    }

    void outputLayoutOpsetJson()
    {
        const QString onnx = path("model.onnx");
        const auto r = exportCli(
            {QStringLiteral("--checkpoint"), m_checkpoint, QStringLiteral("--output"), onnx,
             QStringLiteral("--layout"), QStringLiteral("nchw"), QStringLiteral("--opset"),
             QStringLiteral("13"), QStringLiteral("--no-ema"), QStringLiteral("--json")});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        const QJsonObject j = QJsonDocument::fromJson(r.out.toUtf8()).object();
        QCOMPARE(j.value(QStringLiteral("output")).toString(), onnx);
        QCOMPARE(j.value(QStringLiteral("model")).toString(), QStringLiteral("fashion-fast"));
        QCOMPARE(j.value(QStringLiteral("layout")).toString(), QStringLiteral("nchw"));
        QCOMPARE(j.value(QStringLiteral("opset")).toInt(), 13);
        QCOMPARE(j.value(QStringLiteral("ema")).toBool(), false);
        QCOMPARE(j.value(QStringLiteral("foldedBatchNorms")).toInt(), 2);
        QCOMPARE(j.value(QStringLiteral("bytes")).toInteger(), QFileInfo(onnx).size());
    }

    void damagedOrMissingCheckpoint()
    {
        const QString bad = path("damaged.safetensors");
        QFile::copy(m_checkpoint, bad);
        {
            std::fstream f(bad.toStdString(), std::ios::in | std::ios::out | std::ios::binary);
            f.seekp(-64, std::ios::end);
            f.write("damaged!", 8);
        }
        const QString out = path("damaged.onnx");
        const auto r =
            exportCli({QStringLiteral("--checkpoint"), bad, QStringLiteral("--output"), out});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(bad), qPrintable(r.err));
        QVERIFY(!QFile::exists(out));

        const QString missing = path("missing.safetensors");
        const auto m =
            exportCli({QStringLiteral("--checkpoint"), missing, QStringLiteral("--output"), out});
        QCOMPARE(m.exitCode, 1);
        QVERIFY2(m.err.contains(missing), qPrintable(m.err));
        QVERIFY(!QFile::exists(out));
    }

    void badUsage_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("named");
        const QString ckpt = QStringLiteral("--checkpoint");
        QTest::newRow("no checkpoint") << QStringList{} << QStringLiteral("--checkpoint");
        QTest::newRow("unknown option")
            << QStringList{QStringLiteral("--frobnicate")} << QStringLiteral("frobnicate");
        QTest::newRow("bad layout")
            << QStringList{ckpt, QStringLiteral("x"), QStringLiteral("--layout"),
                           QStringLiteral("chwn")}
            << QStringLiteral("--layout must be nhwc or nchw, got 'chwn'");
        QTest::newRow("opset too old")
            << QStringList{ckpt, QStringLiteral("x"), QStringLiteral("--opset"),
                           QStringLiteral("7")}
            << QStringLiteral("--opset");
        QTest::newRow("opset not a number")
            << QStringList{ckpt, QStringLiteral("x"), QStringLiteral("--opset"),
                           QStringLiteral("new")}
            << QStringLiteral("--opset");
        QTest::newRow("stray argument")
            << QStringList{ckpt, QStringLiteral("x"), QStringLiteral("extra")}
            << QStringLiteral("extra");
    }
    void badUsage()
    {
        QFETCH(QStringList, args);
        QFETCH(QString, named);
        const auto r = exportCli(args);
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains(named), qPrintable(r.err));
    }
};

QTEST_GUILESS_MAIN(TestExportCommand)
#include "tst_export_command.moc"
