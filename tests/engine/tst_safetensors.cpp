// safetensors checkpoints: round trips, validation of corrupt files, atomic writes that fail
// cleanly, and interoperability with PyTorch through python/towers_torch.py.
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/io/safetensors.h"

using namespace towers::engine;
namespace fs = std::filesystem;

namespace {

// The deterministic contents shared with the Python side of the interop test (keep the formulas
// in sync with kPythonScript below).
NamedTensors sampleTensors()
{
    NamedTensors out;
    Tensor f32({2, 3, 4}, DType::Float32);
    for (int i = 0; i < 24; ++i) f32.data<float>()[i] = static_cast<float>(i / 3.0 - 4.0);
    Tensor f64({5}, DType::Float64);
    for (int i = 0; i < 5; ++i) f64.data<double>()[i] = i / 7.0 - 0.5;
    Tensor bf16({4, 2}, DType::BFloat16);
    for (int i = 0; i < 8; ++i) bf16.setAt(i, (i - 3) * 0.5);
    Tensor i32({3, 1, 2}, DType::Int32);
    for (int i = 0; i < 6; ++i) i32.data<std::int32_t>()[i] = i * 100000 - 7;
    Tensor i64({3}, DType::Int64);
    for (int i = 0; i < 3; ++i)
        i64.data<std::int64_t>()[i] = (i + 1) * std::int64_t(1000000000000000) + 7;
    Tensor u8({300}, DType::UInt8);
    for (int i = 0; i < 300; ++i) u8.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(i * 7);
    Tensor scalar = Tensor::filled(Shape(std::vector<std::int64_t>{}), DType::Float32, 42.5);
    Tensor empty = Tensor::zeros({0, 3}, DType::Float32);
    out.emplace_back("conv1.weight", f32);
    out.emplace_back("f64", f64);
    out.emplace_back("bf16", bf16);
    out.emplace_back("labels", i32);
    out.emplace_back("bn.num_batches_tracked", i64);
    out.emplace_back("mask", u8);
    out.emplace_back("scalar", scalar);
    out.emplace_back("empty", empty);
    return out;
}

bool sameTensor(const Tensor& a, const Tensor& b)
{
    return a.shape() == b.shape() && a.dtype() == b.dtype() && a.bytes() == b.bytes() &&
           (a.bytes() == 0 || std::memcmp(a.raw(), b.raw(), a.bytes()) == 0);
}

// A file of a u64 header length, the header text and `dataBytes` bytes of data.
QByteArray makeFile(const QByteArray& header, int dataBytes, qint64 lengthOverride = -1)
{
    const quint64 n = lengthOverride >= 0 ? quint64(lengthOverride) : quint64(header.size());
    QByteArray out;
    for (int i = 0; i < 8; ++i) out.append(char((n >> (8 * i)) & 0xff));
    out.append(header);
    out.append(QByteArray(dataBytes, '\x11'));
    return out;
}

void writeBytes(const fs::path& path, const QByteArray& bytes)
{
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(bytes.constData(), bytes.size());
}

QByteArray readBytes(const fs::path& path)
{
    std::ifstream f(path, std::ios::binary);
    return QByteArray::fromStdString(
        std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()));
}

QStringList entries(const QString& dir)
{
    return QDir(dir).entryList(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot, QDir::Name);
}

// Runs `write` and expects an IoError whose message contains every one of `needles`.
template <class F> void expectIoError(F&& write, const QStringList& needles)
{
    try {
        write();
        QFAIL("no IoError was thrown");
    } catch (const IoError& e) {
        const QString msg = QString::fromUtf8(e.what());
        for (const QString& n : needles)
            QVERIFY2(msg.contains(n), qPrintable("'" + n + "' not in: " + msg));
    }
}

// Reads the two file names from argv: checks what Towers wrote, then writes its own file. Single
// quotes only: moc mis-parses raw strings that hold an odd number of double quotes.
const char* kPythonScript = R"PY(
import os, sys
try:
    import torch
except ImportError:
    sys.exit(77)
sys.path.insert(0, os.path.join(os.environ['TOWERS_SOURCE_DIR'], 'python'))
import towers_torch as tt

src, dst = sys.argv[1], sys.argv[2]
got, meta = tt.load_safetensors(src)
assert meta == {'writer': 'towers', 'note': 'caf\u00e9 \u2713'}, meta
ar = lambda n, dt=torch.float64: torch.arange(n, dtype=dt)
expected = {
    'conv1.weight': (ar(24) / 3.0 - 4.0).float().reshape(2, 3, 4),
    'f64': ar(5) / 7.0 - 0.5,
    'bf16': ((ar(8) - 3) * 0.5).to(torch.bfloat16).reshape(4, 2),
    'labels': (ar(6, torch.int64) * 100000 - 7).int().reshape(3, 1, 2),
    'bn.num_batches_tracked': (ar(3, torch.int64) + 1) * 10**15 + 7,
    'mask': (ar(300, torch.int64) * 7 % 256).to(torch.uint8),
    'scalar': torch.tensor(42.5),
    'empty': torch.zeros(0, 3),
}
assert list(got) == list(expected), list(got)
for name, ref in expected.items():
    t = got[name]
    assert t.dtype == ref.dtype and t.shape == ref.shape, (name, t.dtype, t.shape)
    assert torch.equal(t, ref), (name, t, ref)
out = {'echo.' + k: v for k, v in got.items()}
out['py.linspace'] = torch.linspace(-1.0, 1.0, 9, dtype=torch.float32)
out['py.bf16'] = torch.tensor([[1.5, -2.0], [0.125, 3e38]]).to(torch.bfloat16)
out['py.int64'] = torch.tensor([-(2**62), 2**62 + 1], dtype=torch.int64)
tt.save_safetensors(dst, out, {'writer': 'python', 'torch': torch.__version__})
print('python: ok')
)PY";

} // namespace

class TestSafeTensors : public QObject
{
    Q_OBJECT
private slots:
    void roundTripEveryDtype()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const fs::path path = fs::path(dir.path().toStdString()) / "model.safetensors";
        const NamedTensors tensors = sampleTensors();
        const std::map<std::string, std::string> meta{{"model", "cifar10-tutorial"},
                                                      {"step", "1200"}};
        writeSafeTensors(path, tensors, meta);

        const QByteArray bytes = readBytes(path);
        quint64 headerBytes = 0;
        for (int i = 7; i >= 0; --i) headerBytes = (headerBytes << 8) | quint8(bytes[i]);
        QCOMPARE(headerBytes % 8, quint64(0)); // the data region starts 8-byte aligned
        QVERIFY(bytes.mid(8, int(headerBytes)).contains("\"dtype\":\"BF16\""));

        const SafeTensors back = readSafeTensors(path);
        QCOMPARE(back.metadata, meta);
        QCOMPARE(back.tensors.size(), tensors.size());
        for (std::size_t i = 0; i < tensors.size(); ++i) {
            QCOMPARE(back.tensors[i].first, tensors[i].first); // written order is kept
            QVERIFY2(sameTensor(back.tensors[i].second, tensors[i].second),
                     tensors[i].first.c_str());
        }
        QVERIFY(back.find("mask") != nullptr);
        QCOMPARE(back.find("mask")->dtype(), DType::UInt8);
        QCOMPARE(back.find("scalar")->rank(), 0);
        QCOMPARE(back.find("scalar")->at(0), 42.5);
        QCOMPARE(back.find("bf16")->at(7), 2.0);
        QVERIFY(back.find("nope") == nullptr);
        QCOMPARE(entries(dir.path()), QStringList{"model.safetensors"}); // no temp file left
    }

    void overwriteAndEmptyFile()
    {
        QTemporaryDir dir;
        const fs::path path = fs::path(dir.path().toStdString()) / "a.safetensors";
        writeSafeTensors(path, sampleTensors());
        writeSafeTensors(path, {}, {}); // replaces the old file atomically
        const SafeTensors back = readSafeTensors(path);
        QVERIFY(back.tensors.empty());
        QVERIFY(back.metadata.empty());
        QCOMPARE(entries(dir.path()), QStringList{"a.safetensors"});
    }

    void writeRejectsBadArguments()
    {
        QTemporaryDir dir;
        const fs::path path = fs::path(dir.path().toStdString()) / "bad.safetensors";
        const Tensor t = Tensor::zeros({2}, DType::Float32);
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, writeSafeTensors(path, {{"a", t}, {"a", t}}));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, writeSafeTensors(path, {{"", t}}));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, writeSafeTensors(path, {{"__metadata__", t}}));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, writeSafeTensors(path, {{"a", Tensor()}}));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, writeSafeTensors(path, {{"bad\xff utf8", t}}));
        QVERIFY(entries(dir.path()).isEmpty());
    }

    void corruptFilesAreRejected_data()
    {
        QTest::addColumn<QByteArray>("bytes");
        QTest::addColumn<QString>("message");
        const QByteArray ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
        auto entry = [](const char* dtype, const char* shape, const char* offsets) {
            // (moc mis-parses raw strings holding an odd number of quotes)
            return QByteArray("{\"a\":{\"dtype\":\"") + dtype + "\",\"shape\":" + shape +
                   ",\"data_offsets\":" + offsets + "}}";
        };
        QTest::newRow("empty file") << QByteArray() << "shorter than the 8-byte";
        QTest::newRow("7 bytes") << QByteArray(7, '\0') << "7 bytes long";
        QTest::newRow("length past end")
            << makeFile(ok, 8, 4000)
            << QString("says 4000 bytes, but only %1 follow").arg(ok.size() + 8);
        QTest::newRow("absurd length") << makeFile(ok, 8, qint64(1) << 40) << "100 MB limit";
        QTest::newRow("length u64 max")
            << makeFile(ok, 8).replace(0, 8, QByteArray(8, '\xff')) << "100 MB limit";
        QTest::newRow("invalid json")
            << makeFile(R"({"a": {"dtype": )", 0) << "not valid JSON (near file byte offset";
        QTest::newRow("binary garbage")
            << makeFile(QByteArray("\x01\x02\xfe\xff{}", 6), 0) << "not valid JSON";
        QTest::newRow("not an object") << makeFile("[1, 2]", 0) << "must be a JSON object";
        QTest::newRow("entry not object")
            << makeFile(R"({"a": 5})", 0) << "tensor 'a': expected an object";
        QTest::newRow("missing dtype") << makeFile(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", 8)
                                       << "tensor 'a': missing key \"dtype\"";
        QTest::newRow("missing shape")
            << makeFile(R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", 8)
            << "missing key \"shape\"";
        QTest::newRow("missing offsets") << makeFile(R"({"a":{"dtype":"F32","shape":[2]}})", 8)
                                         << "missing key \"data_offsets\"";
        QTest::newRow("unknown dtype")
            << makeFile(entry("F16", "[2]", "[0,4]"), 4) << "unsupported dtype \"F16\"";
        QTest::newRow("dtype not string")
            << makeFile(entry("F32", "[2]", "[0,8]").replace("\"F32\"", "32"), 8)
            << "\"dtype\" must be a string";
        QTest::newRow("negative dim")
            << makeFile(entry("F32", "[-2]", "[0,8]"), 8) << "non-negative integers";
        QTest::newRow("fractional dim")
            << makeFile(entry("F32", "[2.5]", "[0,8]"), 8) << "non-negative integers";
        QTest::newRow("shape not array")
            << makeFile(entry("F32", "2", "[0,8]"), 8) << "\"shape\" must be an array";
        QTest::newRow("shape/size mismatch") << makeFile(entry("F32", "[3]", "[0,8]"), 8)
                                             << "needs 12 bytes, but data_offsets [0, 8] span 8";
        QTest::newRow("overflowing shape")
            << makeFile(entry("F32", "[4611686018427387904, 4]", "[0,8]"), 8) << "impossibly large";
        QTest::newRow("overflowing empty shape")
            << makeFile(entry("F32", "[1099511627776, 1099511627776, 0]", "[0,0]"), 0)
            << "impossibly large";
        QTest::newRow("shape beyond file")
            << makeFile(entry("F32", "[1099511627776]", "[0,8]"), 8) << "needs 4398046511104 bytes";
        QTest::newRow("byte count overflows")
            << makeFile(entry("F64", "[2305843009213693952]", "[0,8]"), 8)
            << "more bytes than the file holds";
        QTest::newRow("offsets arity")
            << makeFile(entry("F32", "[2]", "[8]"), 8) << "must be two non-negative integers";
        QTest::newRow("offsets huge")
            << makeFile(entry("F32", "[2]", "[0, 1e30]"), 8) << "must be two non-negative integers";
        QTest::newRow("offsets reversed")
            << makeFile(entry("U8", "[0]", "[8,0]"), 8) << "end before they begin";
        QTest::newRow("offsets past end") << makeFile(entry("F32", "[4]", "[0,16]"), 8)
                                          << "run past the end of the data region (8 bytes)";
        QTest::newRow("truncated data") << makeFile(ok, 5) << "run past the end";
        QTest::newRow("overlap") << makeFile(
                                        R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                        12)
                                 << "overlaps tensor 'a'";
        QTest::newRow("gap") << makeFile(
                                    R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                    R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                                    12)
                             << "bytes 4 to 8 of the data region";
        QTest::newRow("trailing bytes")
            << makeFile(entry("F32", "[1]", "[0,4]"), 8) << "last 4 bytes of the data region";
        QTest::newRow("duplicate names")
            << makeFile(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                        R"("a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                        2)
            << "names tensor 'a' more than once";
        QTest::newRow("metadata not object")
            << makeFile(R"({"__metadata__": [1]})", 0) << "\"__metadata__\" must be an object";
        QTest::newRow("metadata not string") << makeFile(R"({"__metadata__": {"step": 3}})", 0)
                                             << "metadata \"step\" must be a string";
        const QByteArray deep = "{\"a\":" + QByteArray(200000, '[') + QByteArray(200000, ']') + "}";
        QTest::newRow("deeply nested") << makeFile(deep, 0) << "nested more than 128 levels deep";
    }
    void corruptFilesAreRejected()
    {
        QFETCH(QByteArray, bytes);
        QFETCH(QString, message);
        QTemporaryDir dir;
        const fs::path path = fs::path(dir.path().toStdString()) / "corrupt.safetensors";
        writeBytes(path, bytes);
        expectIoError([&] { (void)readSafeTensors(path); },
                      {QString::fromStdString(path.string()), message});
    }

    void missingFileAndDirectory()
    {
        QTemporaryDir dir;
        const fs::path d = dir.path().toStdString();
        expectIoError([&] { (void)readSafeTensors(d / "none.safetensors"); },
                      {"none.safetensors", "No such file or directory"});
        expectIoError([&] { (void)readSafeTensors(d); }, {"not a regular file"});
        // A FIFO named like a checkpoint is refused at once, never waited on for a writer (the
        // test would hang there), by the whole read and the header read alike.
        const fs::path fifo = d / "fifo.safetensors";
        QCOMPARE(::mkfifo(fifo.c_str(), 0600), 0);
        expectIoError([&] { (void)readSafeTensors(fifo); },
                      {"fifo.safetensors", "not a regular file"});
        expectIoError([&] { (void)readSafeTensorsMetadata(fifo); }, {"not a regular file"});
    }

    // The header alone: the metadata, without reading the tensors, and the same refusals for a
    // header that does not fit the file (here, a truncated one).
    void metadataAlone()
    {
        QTemporaryDir dir;
        const fs::path file = dir.filePath(QStringLiteral("m.safetensors")).toStdString();
        Tensor t(Shape{1000}, DType::Float32);
        t.fill(1.5);
        writeSafeTensors(file, {{"w", t}}, {{"model", "fashion-fast"}, {"step", "7"}});
        const auto meta = readSafeTensorsMetadata(file);
        QCOMPARE(meta.size(), std::size_t(2));
        QCOMPARE(meta.at("model"), std::string("fashion-fast"));
        QCOMPARE(meta.at("step"), std::string("7"));
        std::filesystem::resize_file(file, std::filesystem::file_size(file) - 4);
        expectIoError([&] { (void)readSafeTensorsMetadata(file); }, {"m.safetensors"});
    }

    // Every truncation of a valid file and many random byte flips: an IoError or a valid result,
    // never a crash, a hang or another exception.
    void mangledFilesNeverCrash()
    {
        QTemporaryDir dir;
        const fs::path good = fs::path(dir.path().toStdString()) / "good.safetensors";
        writeSafeTensors(good, sampleTensors(), {{"k", "v"}});
        const QByteArray bytes = readBytes(good);
        const fs::path bad = fs::path(dir.path().toStdString()) / "bad.safetensors";
        for (int n = 0; n < bytes.size(); ++n) {
            writeBytes(bad, bytes.left(n));
            QVERIFY_THROWS_EXCEPTION(IoError, readSafeTensors(bad));
        }
        std::uint64_t state = 12345;
        auto next = [&] {
            return (state = state * 6364136223846793005ull + 1442695040888963407ull) >> 33;
        };
        int accepted = 0;
        for (int trial = 0; trial < 3000; ++trial) {
            QByteArray m = bytes;
            const int flips = 1 + int(next() % 3);
            for (int f = 0; f < flips; ++f) {
                // Mostly the length and the header, where the structure is.
                const int limit = trial % 4 == 0 ? int(m.size()) : std::min(int(m.size()), 700);
                m[int(next() % quint64(limit))] = char(next() & 0xff);
            }
            writeBytes(bad, m);
            try {
                (void)readSafeTensors(bad);
                ++accepted; // e.g. a flipped data byte, or a flip inside a metadata string
            } catch (const IoError&) {
            }
        }
        QVERIFY(accepted > 0);
    }

    void writeIntoMissingDirectory()
    {
        QTemporaryDir dir;
        const fs::path path = fs::path(dir.path().toStdString()) / "nope" / "x.safetensors";
        expectIoError([&] { writeSafeTensors(path, sampleTensors()); },
                      {QString::fromStdString(path.string()), "No such file or directory"});
        QVERIFY(entries(dir.path()).isEmpty());
    }

    void writeBelowAFile()
    {
        QTemporaryDir dir;
        const fs::path file = fs::path(dir.path().toStdString()) / "file";
        writeBytes(file, "x");
        expectIoError([&] { writeSafeTensors(file / "x.safetensors", sampleTensors()); },
                      {"Not a directory"});
        QCOMPARE(entries(dir.path()), QStringList{"file"});
    }

    void writeOntoADirectoryRemovesTheTempFile()
    {
        QTemporaryDir dir;
        const fs::path target = fs::path(dir.path().toStdString()) / "taken";
        fs::create_directory(target);
        expectIoError([&] { writeSafeTensors(target, sampleTensors()); },
                      {"taken", "renaming", "Is a directory"});
        QCOMPARE(entries(dir.path()), QStringList{"taken"});
    }

    void writeIntoReadOnlyDirectory()
    {
        QTemporaryDir dir;
        const fs::path d = dir.path().toStdString();
        fs::permissions(d, fs::perms::owner_read | fs::perms::owner_exec);
        const bool writable = ::access(d.c_str(), W_OK) == 0;
        if (!writable) {
            expectIoError([&] { writeSafeTensors(d / "x.safetensors", sampleTensors()); },
                          {"x.safetensors", "Permission denied"});
        }
        fs::permissions(d, fs::perms::owner_all);
        QVERIFY(entries(dir.path()).isEmpty());
        if (writable)
            QSKIP("running with CAP_DAC_OVERRIDE (as root?): a read-only directory is writable");
    }

    // A full disk, simulated with a file-size limit (write() fails with EFBIG): the old file is
    // kept intact and no temporary file is left behind.
    void fullDiskKeepsTheOldFile()
    {
        QTemporaryDir dir;
        const fs::path path = fs::path(dir.path().toStdString()) / "ckpt.safetensors";
        writeSafeTensors(path, sampleTensors(), {{"step", "1"}});
        const QByteArray before = readBytes(path);

        rlimit old{};
        QCOMPARE(::getrlimit(RLIMIT_FSIZE, &old), 0);
        auto oldHandler = std::signal(SIGXFSZ, SIG_IGN);
        rlimit small = old;
        small.rlim_cur = 4096;
        QCOMPARE(::setrlimit(RLIMIT_FSIZE, &small), 0);
        const Tensor big = Tensor::zeros({100000}, DType::Float32);
        QString message;
        try {
            writeSafeTensors(path, {{"big", big}});
        } catch (const IoError& e) {
            message = QString::fromUtf8(e.what());
        }
        ::setrlimit(RLIMIT_FSIZE, &old);
        std::signal(SIGXFSZ, oldHandler);

        QVERIFY2(message.contains(QString::fromStdString(path.string())), qPrintable(message));
        QVERIFY2(message.contains(QString::fromUtf8(std::strerror(EFBIG))), qPrintable(message));
        QCOMPARE(readBytes(path), before);
        QCOMPARE(entries(dir.path()), QStringList{"ckpt.safetensors"});
    }

    void interopWithPyTorch()
    {
        const QString python = QStringLiteral("/usr/bin/python3");
        const QByteArray source = qgetenv("TOWERS_SOURCE_DIR");
        if (source.isEmpty())
            QSKIP("TOWERS_SOURCE_DIR is not set (run through ctest) so python/ cannot be found");
        if (!QFileInfo::exists(QString::fromLocal8Bit(source) + "/python/towers_torch.py"))
            QSKIP("python/towers_torch.py not found under TOWERS_SOURCE_DIR");
        if (!QFileInfo(python).isExecutable())
            QSKIP("/usr/bin/python3 is not installed (Debian: python3-torch)");

        QTemporaryDir dir;
        const fs::path ours = fs::path(dir.path().toStdString()) / "towers.safetensors";
        const fs::path theirs = fs::path(dir.path().toStdString()) / "torch.safetensors";
        const NamedTensors tensors = sampleTensors();
        writeSafeTensors(ours, tensors, {{"writer", "towers"}, {"note", "caf\u00e9 \u2713"}});

        QProcess py;
        py.setProcessChannelMode(QProcess::MergedChannels);
        py.start(python,
                 {"-c", QString::fromUtf8(kPythonScript), QString::fromStdString(ours.string()),
                  QString::fromStdString(theirs.string())});
        QVERIFY(py.waitForFinished(180000));
        const QString output = QString::fromUtf8(py.readAll());
        if (py.exitStatus() == QProcess::NormalExit && py.exitCode() == 77)
            QSKIP("/usr/bin/python3 cannot import torch (Debian: python3-torch)");
        QVERIFY2(py.exitStatus() == QProcess::NormalExit && py.exitCode() == 0, qPrintable(output));

        const SafeTensors back = readSafeTensors(theirs);
        QCOMPARE(back.metadata.at("writer"), std::string("python"));
        for (const auto& [name, t] : tensors) {
            const Tensor* echo = back.find("echo." + name);
            QVERIFY2(echo && sameTensor(*echo, t), name.c_str());
        }
        const Tensor* lin = back.find("py.linspace");
        QVERIFY(lin && lin->dtype() == DType::Float32 && lin->shape() == Shape({9}));
        for (int i = 0; i < 9; ++i) QCOMPARE(lin->at(i), -1.0 + 0.25 * i);
        const Tensor* b = back.find("py.bf16");
        QVERIFY(b && b->dtype() == DType::BFloat16 && b->shape() == Shape({2, 2}));
        QCOMPARE(b->at(0), 1.5);
        QCOMPARE(b->at(1), -2.0);
        QCOMPARE(b->at(2), 0.125);
        QVERIFY(std::abs(b->at(3) / 3e38 - 1.0) < 1e-2);
        const Tensor* i64 = back.find("py.int64");
        QVERIFY(i64 && i64->dtype() == DType::Int64);
        QCOMPARE(i64->data<std::int64_t>()[0], -(std::int64_t(1) << 62));
        QCOMPARE(i64->data<std::int64_t>()[1], (std::int64_t(1) << 62) + 1);
    }
};

QTEST_APPLESS_MAIN(TestSafeTensors)
#include "tst_safetensors.moc"
