// The dataset parsers over the checked-in fuzz corpus (seeds, inputs the libFuzzer targets found
// interesting, and regressions) and over a few thousand deterministic random mutations of valid
// files: each parse succeeds or throws IoError, nothing else. Built with ASan or run under valgrind
// this also catches out-of-bounds reads; the libFuzzer targets (tests/fuzz) search much further.
#include <QDir>
#include <QtTest>

#include "dataset_files.h"
#include "engine/tensor/rng.h"
#include "tests/fuzz/fuzz_parsers.h"

using namespace towers::engine;
using namespace towers::test;

namespace {

QString corpusDir(const QString& kind)
{
    QString root = qEnvironmentVariable("TOWERS_SOURCE_DIR");
    if (root.isEmpty()) root = QStringLiteral(TOWERS_SOURCE_DIR_FALLBACK);
    return root + "/tests/engine/fuzz_corpus/" + kind;
}

// Whether any parser accepted `b`; `ok` turns false (with a warning naming `what`) when one threw
// anything but IoError.
bool parse(const QString& kind, const Bytes& b, const QString& what, bool& ok)
{
    ok = true;
    try {
        return (kind == "idx" ? towers::fuzz::parseIdx(b.data(), b.size())
                              : towers::fuzz::parseCifar(b.data(), b.size())) > 0;
    } catch (const std::exception& e) {
        ok = false;
        qWarning("%s: %s", qPrintable(what), e.what());
    }
    return false;
}

const std::uint32_t kInteresting32[] = {0,           1,           2,          28,        255,
                                        256,         4096,        4097,       60000,     0x7fffffff,
                                        0x80000000u, 0xffffffffu, 0x00000801, 0x00000803};
const std::uint8_t kInteresting8[] = {0, 1, 9, 10, 19, 20, 99, 100, 0x7f, 0x80, 0xff, 0x1f, 0x8b};

Bytes mutate(const Bytes& in, Rng& rng)
{
    Bytes b = in;
    const int ops = 1 + static_cast<int>(rng.below(3));
    for (int op = 0; op < ops; ++op) {
        const std::size_t n = b.size();
        switch (rng.below(7)) {
        case 0: // flip a bit
            if (n) b[rng.below(n)] ^= static_cast<std::uint8_t>(1u << rng.below(8));
            break;
        case 1: // an interesting byte
            if (n) b[rng.below(n)] = kInteresting8[rng.below(std::size(kInteresting8))];
            break;
        case 2: // truncate
            b.resize(rng.below(n + 1));
            break;
        case 3: // append random bytes
            for (std::uint64_t i = rng.below(64); i > 0; --i)
                b.push_back(static_cast<std::uint8_t>(rng.next()));
            break;
        case 4: { // an interesting big-endian word at a header field or anywhere
            const std::size_t at = rng.below(2) ? 4 * rng.below(4) : rng.below(n + 1);
            if (at + 4 <= n) putBe32(b, at, kInteresting32[rng.below(std::size(kInteresting32))]);
            break;
        }
        case 5: // erase a chunk
            if (n) {
                const std::size_t from = rng.below(n),
                                  len = 1 + rng.below(std::min<std::size_t>(n - from, 512));
                b.erase(b.begin() + static_cast<std::ptrdiff_t>(from),
                        b.begin() + static_cast<std::ptrdiff_t>(from + len));
            }
            break;
        default: // duplicate a chunk
            if (n) {
                const std::size_t from = rng.below(n),
                                  len = 1 + rng.below(std::min<std::size_t>(n - from, 512));
                const Bytes chunk(b.begin() + static_cast<std::ptrdiff_t>(from),
                                  b.begin() + static_cast<std::ptrdiff_t>(from + len));
                b.insert(b.begin() + static_cast<std::ptrdiff_t>(rng.below(n + 1)), chunk.begin(),
                         chunk.end());
            }
            break;
        }
    }
    return b;
}

} // namespace

class TestDataFuzzCorpus : public QObject
{
    Q_OBJECT

private slots:
    void corpus_data()
    {
        QTest::addColumn<QString>("kind");
        QTest::newRow("idx") << "idx";
        QTest::newRow("cifar") << "cifar";
    }
    void corpus()
    {
        QFETCH(QString, kind);
        const QDir dir(corpusDir(kind));
        const QStringList files = dir.entryList(QDir::Files);
        QVERIFY2(files.size() >= 5, qPrintable("no corpus in " + dir.path()));
        int accepted = 0;
        for (const QString& f : files) {
            const Bytes b = readFile(dir.filePath(f).toStdString());
            bool ok = true;
            accepted += parse(kind, b, f, ok);
            QVERIFY2(ok, qPrintable(f + ": a parser threw something other than IoError"));
        }
        QVERIFY(accepted > 0 && accepted < files.size()); // the corpus holds good and bad inputs
    }

    void mutations_data()
    {
        QTest::addColumn<QString>("kind");
        QTest::addColumn<int>("seed");
        QTest::newRow("idx images") << "idx" << 0;
        QTest::newRow("idx images, gzip") << "idx" << 1;
        QTest::newRow("idx labels") << "idx" << 2;
        QTest::newRow("idx labels, gzip") << "idx" << 3;
        QTest::newRow("cifar10") << "cifar" << 4;
        QTest::newRow("cifar100") << "cifar" << 5;
    }
    void mutations()
    {
        QFETCH(QString, kind);
        QFETCH(int, seed);
        const bool gz = seed == 1 || seed == 3;
        Bytes valid;
        switch (seed) {
        case 0:
        case 1:
            valid = idxImages(4, 6, 5, 3);
            break;
        case 2:
        case 3:
            valid = idxLabels(labelsFor(40, 10, 3));
            break;
        case 4:
            valid = cifarRecords(0, 3, 1, 3);
            break;
        default:
            valid = cifarRecords(0, 3, 2, 3);
            break;
        }
        Rng rng(1000 + static_cast<std::uint64_t>(seed));
        int accepted = 0;
        const int rounds = kind == "idx" ? 700 : 300;
        for (int i = 0; i < rounds; ++i) {
            // gzip inputs: mutate the compressed stream, or the content before compressing it.
            Bytes b = !gz ? mutate(valid, rng)
                          : (i % 2 ? mutate(gzip(valid), rng) : gzip(mutate(valid, rng)));
            bool ok = true;
            accepted += parse(kind, b, QString("mutation %1").arg(i), ok);
            QVERIFY2(
                ok,
                qPrintable(
                    QString("mutation %1 of %2 made a parser throw something other than IoError")
                        .arg(i)
                        .arg(QTest::currentDataTag())));
        }
        QVERIFY2(accepted > 0 && accepted < rounds,
                 qPrintable(QString("%1 of %2 accepted").arg(accepted).arg(rounds)));
    }
};

QTEST_APPLESS_MAIN(TestDataFuzzCorpus)
#include "tst_data_fuzz_corpus.moc"
