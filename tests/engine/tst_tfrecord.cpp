// CRC-32C and TFRecord framing, the layer under TensorBoard's event files: the published check
// values for both implementations (the CPU's crc32 instruction and the table), the two agreeing on
// every length and alignment, TensorFlow's masking, records that read back, a file cut at every
// byte reading up to its last whole record, a flipped bit refused by its CRC, and a full disk an
// IoError naming the file.
#include <QtTest>

#include <filesystem>
#include <fstream>
#include <random>

#include "engine/errors.h"
#include "engine/io/crc32c.h"
#include "engine/io/tfrecord.h"
#include "error_message.h"

using namespace towers::engine;
using towers::test::messageOf;
namespace fs = std::filesystem;

namespace {

using CrcFn = std::uint32_t (*)(const void*, std::size_t, std::uint32_t);

std::string bytes(std::initializer_list<int> values)
{
    std::string s;
    for (int v : values) s.push_back(char(v));
    return s;
}

std::string readAll(const fs::path& p)
{
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// The records of a file, for the checks below.
std::vector<std::string> recordsOf(const std::vector<std::size_t>& sizes, std::uint32_t seed)
{
    std::mt19937 rng(seed);
    std::vector<std::string> records;
    for (std::size_t n : sizes) {
        std::string r(n, '\0');
        for (char& c : r) c = char(rng());
        records.push_back(r);
    }
    return records;
}

} // namespace

class TestTfRecord : public QObject
{
    Q_OBJECT

    void addImplementations()
    {
        QTest::addColumn<int>("implementation");
        QTest::newRow("table") << 0;
        QTest::newRow("crc32 instruction") << 1;
    }
    static CrcFn implementation(int i) { return i == 0 ? &crc32cPortable : &crc32cHardware; }

private slots:
    void knownValues_data() { addImplementations(); }
    void knownValues()
    {
        QFETCH(int, implementation);
        if (implementation == 1 && !crc32cHardwareAvailable())
            QSKIP("this CPU has no SSE4.2 crc32 instruction");
        const CrcFn crc = TestTfRecord::implementation(implementation);
        auto of = [&](const std::string& s) { return crc(s.data(), s.size(), 0); };
        QCOMPARE(of("123456789"), 0xE3069283u); // the CRC catalogue's check value
        QCOMPARE(of(""), 0u);
        QCOMPARE(of("a"), 0xC1D04330u);
        // RFC 3720 (iSCSI), appendix B.4.
        QCOMPARE(of(std::string(32, '\0')), 0x8A9136AAu);
        QCOMPARE(of(std::string(32, '\xFF')), 0x62A8AB43u);
        std::string up, down;
        for (int i = 0; i < 32; ++i) {
            up.push_back(char(i));
            down.push_back(char(31 - i));
        }
        QCOMPARE(of(up), 0x46DD794Eu);
        QCOMPARE(of(down), 0x113FDB5Cu);
        QCOMPARE(
            of(bytes({0x01, 0xC0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                      0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
                      0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
                      0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00})),
            0xD9963A56u); // RFC 3720's iSCSI read command PDU
        // Continuing from an earlier part gives the CRC of the whole.
        const std::string whole = "The quick brown fox jumps over the lazy dog";
        for (std::size_t cut = 0; cut <= whole.size(); ++cut)
            QCOMPARE(crc(whole.data() + cut, whole.size() - cut, crc(whole.data(), cut, 0)),
                     of(whole));
        QCOMPARE(of(whole), 0x22620404u);
    }

    // The two implementations agree on every length and start alignment (the instruction path
    // has byte, 4-byte and 8-byte stages).
    void implementationsAgree()
    {
        if (!crc32cHardwareAvailable()) QSKIP("this CPU has no SSE4.2 crc32 instruction");
        std::mt19937 rng(5);
        std::string data(4096 + 16, '\0');
        for (char& c : data) c = char(rng());
        for (std::size_t offset = 0; offset < 16; ++offset)
            for (std::size_t n :
                 {0, 1, 3, 4, 7, 8, 9, 15, 16, 17, 31, 63, 64, 65, 255, 1000, 4096}) {
                const std::uint32_t seed = rng();
                QCOMPARE(crc32cHardware(data.data() + offset, n, seed),
                         crc32cPortable(data.data() + offset, n, seed));
            }
        // crc32c() is one of them.
        QCOMPARE(crc32c(data), crc32cPortable(data.data(), data.size()));
    }

    void masking()
    {
        // TensorFlow's crc32c::Mask: rotate right by 15, add 0xa282ead8.
        QCOMPARE(maskCrc32c(0u), 0xA282EAD8u);
        QCOMPARE(maskCrc32c(0xE3069283u),
                 ((0xE3069283u >> 15) | (0xE3069283u << 17)) + 0xA282EAD8u);
        for (std::uint32_t v : {0u, 1u, 0xE3069283u, 0xFFFFFFFFu, 0x12345678u})
            QCOMPARE(unmaskCrc32c(maskCrc32c(v)), v);
        // A TFRecord of "" is its zero length, the masked CRC of that, and the masked CRC of "".
        const std::string empty = tfRecordFrame("");
        QCOMPARE(empty.size(), std::size_t(16));
        QCOMPARE(empty.substr(0, 8), std::string(8, '\0'));
        const std::uint32_t lengthCrc = maskCrc32c(crc32c(std::string(8, '\0')));
        QCOMPARE(empty.substr(8, 4), bytes({int(lengthCrc & 0xFF), int((lengthCrc >> 8) & 0xFF),
                                            int((lengthCrc >> 16) & 0xFF), int(lengthCrc >> 24)}));
        QCOMPARE(empty.substr(12, 4),
                 bytes({0xD8, 0xEA, 0x82, 0xA2})); // mask(crc32c("")) = mask(0)
    }

    void framingRoundTrips()
    {
        const auto records = recordsOf({0, 1, 12, 100, 70000, 3}, 1);
        std::string file;
        for (const auto& r : records) file += tfRecordFrame(r);
        // Length: little-endian uint64.
        const std::string second = tfRecordFrame(records[2]);
        QCOMPARE(second.substr(0, 8), bytes({12, 0, 0, 0, 0, 0, 0, 0}));
        QCOMPARE(second.size(), std::size_t(12 + 12 + 4));
        bool complete = false;
        QCOMPARE(readTfRecords(file, &complete), records);
        QVERIFY(complete);
    }

    // A file cut at any byte (a killed writer) reads up to its last whole record.
    void truncatedReadsUpToTheLastWholeRecord()
    {
        const auto records = recordsOf({5, 0, 40, 17}, 2);
        std::string file;
        std::vector<std::size_t> ends;
        for (const auto& r : records) {
            file += tfRecordFrame(r);
            ends.push_back(file.size());
        }
        for (std::size_t cut = 0; cut <= file.size(); ++cut) {
            bool complete = false;
            const auto got = readTfRecords(std::string_view(file).substr(0, cut), &complete);
            const std::size_t whole = std::size_t(
                std::count_if(ends.begin(), ends.end(), [&](std::size_t e) { return e <= cut; }));
            QCOMPARE(got.size(), whole);
            QCOMPARE(got, std::vector<std::string>(records.begin(),
                                                   records.begin() + std::ptrdiff_t(whole)));
            QCOMPARE(complete, cut == 0 || std::find(ends.begin(), ends.end(), cut) != ends.end());
        }
    }

    // Every flipped bit of a record (length, its CRC, data, data CRC) is caught.
    void corruptionIsRefused()
    {
        const std::string framed = tfRecordFrame("hello, TensorBoard");
        for (std::size_t i = 0; i < framed.size(); ++i)
            for (int bit = 0; bit < 8; ++bit) {
                std::string bad = framed;
                bad[i] = char(bad[i] ^ (1 << bit));
                const std::string m = messageOf([&] {
                    bool complete = true;
                    const auto got = readTfRecords(bad, &complete, "events.test");
                    // A flipped length bit can make the record look longer than the file: not
                    // whole.
                    if (!got.empty() || complete) throw std::logic_error("read a damaged record");
                    if (i >= 8)
                        throw std::logic_error("a damaged record past the length read as partial");
                });
                if (i < 8)
                    QVERIFY2(m.empty() || m.find("CRC-32C") != std::string::npos, m.c_str());
                else
                    QVERIFY2(m.find("events.test") != std::string::npos &&
                                 m.find("CRC-32C") != std::string::npos,
                             m.c_str());
            }
    }

    void fileAppendsRecords()
    {
        QTemporaryDir dir;
        const fs::path path = fs::path(dir.path().toStdString()) / "events.out.tfevents.1.test";
        const auto records = recordsOf({3, 300, 0}, 3);
        {
            TfRecordFile f(path);
            f.write(records[0]);
            f.write({records[1], records[2]});
            QCOMPARE(readTfRecords(readAll(path)), records); // on disk at once, nothing buffered
        }
        // A new file never replaces one.
        const std::string m = messageOf([&] { TfRecordFile again(path); });
        QVERIFY2(m.find(path.string()) != std::string::npos &&
                     m.find("exists") != std::string::npos,
                 m.c_str());
        {
            TfRecordFile f(path, TfRecordFile::Open::Append);
            f.write("more");
        }
        auto all = records;
        all.push_back("more");
        QCOMPARE(readTfRecords(readAll(path)), all);
    }

    // A full disk: an IoError that names the file and says why; no later write goes through.
    void fullDiskIsAnErrorNamingTheFile()
    {
        if (!fs::exists("/dev/full")) QSKIP("no /dev/full here");
        TfRecordFile f("/dev/full", TfRecordFile::Open::Append);
        const std::string m = messageOf([&] { f.write(std::string(100, 'x')); });
        QVERIFY2(m.find("/dev/full") != std::string::npos &&
                     m.find("No space left on device") != std::string::npos,
                 m.c_str());
        QVERIFY_THROWS_EXCEPTION(IoError, f.write("y"));
    }
};

QTEST_APPLESS_MAIN(TestTfRecord)
#include "tst_tfrecord.moc"
