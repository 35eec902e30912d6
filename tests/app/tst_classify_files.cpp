// app::classifyFiles, behind the Classify page's "Classify many": every file answered in its
// order, across batches; a file that cannot be read answered with its reason while the others go
// on; the answers equal the classifier's on each image alone; a cancel stops between batches; and
// the CSV of the answers (RFC 4180 quoting, an error column).
#include <QFile>
#include <QImage>
#include <QTemporaryDir>
#include <QtTest>

#include <atomic>

#include "app/inference/classify_files.h"
#include "app/inference/image_files.h"
#include "checkpoint_files.h"
#include "dataset_files.h"

using namespace towers;

class TestClassifyFiles : public QObject
{
    Q_OBJECT
    QTemporaryDir m_dir;
    QString m_checkpoint;
    QStringList m_files; // 70 images, a text file and a missing one among them

private slots:
    void initTestCase()
    {
        const std::filesystem::path root = m_dir.path().toStdString();
        test::writeIdxDataset(root / "mnist", 20, 80, 28, 28, false, 5);
        const engine::Dataset data = engine::loadDataset("mnist", root / "mnist");
        m_checkpoint = m_dir.filePath(QStringLiteral("ckpt.safetensors"));
        test::writeFreshCheckpoint("fashion-fast", data, m_checkpoint.toStdString());
        for (int i = 0; i < 70; ++i) {
            // One name with a comma and a quote, for the CSV.
            const QString name =
                i == 3 ? QStringLiteral("a, \"b\".png") : QStringLiteral("%1.png").arg(i);
            QVERIFY(app::toQImage(data.test, i).save(m_dir.filePath(name)));
            m_files << m_dir.filePath(name);
            if (i == 10) {
                QFile text(m_dir.filePath(QStringLiteral("notes.png")));
                QVERIFY(text.open(QIODevice::WriteOnly));
                text.write("not an image");
                m_files << text.fileName();
            }
            if (i == 65) m_files << m_dir.filePath(QStringLiteral("missing.png"));
        }
    }

    void everyFileInOrder()
    {
        engine::Classifier classifier(m_checkpoint.toStdString(), true, 1);
        QVector<int> progress;
        const auto answers =
            app::classifyFiles(classifier, m_files, 3, nullptr, [&](int done, int total) {
                QCOMPARE(total, int(m_files.size()));
                progress << done;
            });
        QCOMPARE(progress, (QVector<int>{64, 72}));
        QCOMPARE(answers.size(), std::size_t(72));
        for (std::size_t i = 0; i < answers.size(); ++i) {
            const app::FileAnswer& a = answers[i];
            QCOMPARE(a.file, m_files[int(i)]);
            if (a.file.endsWith(QStringLiteral("notes.png")) ||
                a.file.endsWith(QStringLiteral("missing.png"))) {
                QVERIFY2(a.error.contains(a.file), qPrintable(a.error));
                QVERIFY(a.top.empty() && a.input.isNull());
                continue;
            }
            QVERIFY2(a.error.isEmpty(), qPrintable(a.error));
            QCOMPARE(a.top.size(), std::size_t(3));
            QCOMPARE(a.input.size(), QSize(28, 28));
            // The oracle: the image alone, read as the CLI reads it.
            engine::ImageSet one;
            one.height = one.width = 28;
            one.channels = 1;
            app::appendImage(app::readImageFile(a.file, classifier.sourceShape()),
                             classifier.sourceShape(), one);
            const auto alone = engine::Classifier::topK(classifier.probabilities(one).at(0), 3);
            for (std::size_t j = 0; j < 3; ++j) {
                QCOMPARE(a.top[j].label, alone[j].label);
                // A batch and a lone image may take different kernels: float32 rounding apart.
                QVERIFY(std::abs(a.top[j].probability - alone[j].probability) < 1e-5);
            }
        }

        // The CSV: a header, the quoted name, the error column.
        const QByteArray csv = app::answersCsv(answers, classifier.classNames(), 3);
        const QList<QByteArray> lines = csv.split('\n');
        QCOMPARE(lines.size(), 74); // header, 72 rows, the empty rest after the last CRLF
        QCOMPARE(lines[0], QByteArray("file,class 1,probability 1,class 2,probability 2,class 3,"
                                      "probability 3,error\r"));
        QVERIFY(lines[4].startsWith(
            '"' + m_dir.filePath(QStringLiteral("a, \"\"b\"\".png")).toUtf8() + "\","));
        QVERIFY2(
            lines[12].startsWith(m_dir.filePath(QStringLiteral("notes.png")).toUtf8() + ",,,,,,,"),
            lines[12].constData());
        QCOMPARE(lines[1].count(','), 7);
    }

    void cancelStopsBetweenBatches()
    {
        engine::Classifier classifier(m_checkpoint.toStdString(), true, 1);
        std::atomic<bool> cancel{false};
        const auto answers = app::classifyFiles(classifier, m_files, 1, &cancel,
                                                [&](int, int) { cancel.store(true); });
        QCOMPARE(answers.size(), std::size_t(64));
    }
};

QTEST_GUILESS_MAIN(TestClassifyFiles)
#include "tst_classify_files.moc"
