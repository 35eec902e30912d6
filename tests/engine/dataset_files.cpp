#include "dataset_files.h"

#include <zlib.h>

#include <fstream>
#include <stdexcept>

#include "engine/ops/dropout_mask.h"

namespace towers::test {

namespace fs = std::filesystem;

std::uint8_t pixelValue(std::uint64_t seed, std::int64_t index, int y, int x, int c)
{
    const std::uint64_t key = (static_cast<std::uint64_t>(index) << 24) ^
                              (static_cast<std::uint64_t>(y) << 16) ^
                              (static_cast<std::uint64_t>(x) << 8) ^ static_cast<std::uint64_t>(c);
    return static_cast<std::uint8_t>(engine::splitmix64(seed ^ engine::splitmix64(key)) >> 56);
}

int labelValue(std::uint64_t seed, std::int64_t index, int classes)
{
    return static_cast<int>(engine::splitmix64(seed * 31 + static_cast<std::uint64_t>(index) + 7) %
                            static_cast<std::uint64_t>(classes));
}

void putBe32(Bytes& bytes, std::size_t offset, std::uint32_t v)
{
    for (int i = 0; i < 4; ++i)
        bytes.at(offset + static_cast<std::size_t>(i)) =
            static_cast<std::uint8_t>(v >> (24 - 8 * i));
}

Bytes idxImages(std::int64_t count, int rows, int cols, std::uint64_t seed)
{
    Bytes b(16);
    putBe32(b, 0, 0x00000803);
    putBe32(b, 4, static_cast<std::uint32_t>(count));
    putBe32(b, 8, static_cast<std::uint32_t>(rows));
    putBe32(b, 12, static_cast<std::uint32_t>(cols));
    for (std::int64_t i = 0; i < count; ++i)
        for (int y = 0; y < rows; ++y)
            for (int x = 0; x < cols; ++x) b.push_back(pixelValue(seed, i, y, x, 0));
    return b;
}

Bytes idxLabels(const std::vector<int>& labels, bool wide)
{
    Bytes b(8 + labels.size() * (wide ? 4 : 1));
    putBe32(b, 0, wide ? 0x00000C01 : 0x00000801);
    putBe32(b, 4, static_cast<std::uint32_t>(labels.size()));
    for (std::size_t i = 0; i < labels.size(); ++i) {
        if (wide)
            putBe32(b, 8 + 4 * i, static_cast<std::uint32_t>(labels[i]));
        else
            b[8 + i] = static_cast<std::uint8_t>(labels[i]);
    }
    return b;
}

std::vector<int> labelsFor(std::int64_t count, int classes, std::uint64_t seed)
{
    std::vector<int> labels;
    for (std::int64_t i = 0; i < count; ++i) labels.push_back(labelValue(seed, i, classes));
    return labels;
}

Bytes gzip(const Bytes& data)
{
    z_stream z{};
    if (deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        throw std::runtime_error("deflateInit2 failed");
    Bytes out(deflateBound(&z, static_cast<uLong>(data.size())) + 64);
    z.next_in = const_cast<Bytef*>(data.data());
    z.avail_in = static_cast<uInt>(data.size());
    z.next_out = out.data();
    z.avail_out = static_cast<uInt>(out.size());
    const int rc = deflate(&z, Z_FINISH);
    deflateEnd(&z);
    if (rc != Z_STREAM_END) throw std::runtime_error("deflate did not finish");
    out.resize(z.total_out);
    return out;
}

int cifar100Fine(std::uint64_t seed, std::int64_t index)
{
    return labelValue(seed, index, 100);
}

Bytes cifarRecords(std::int64_t first, std::int64_t count, int labelBytes, std::uint64_t seed)
{
    Bytes b;
    for (std::int64_t i = first; i < first + count; ++i) {
        if (labelBytes == 1) {
            b.push_back(static_cast<std::uint8_t>(labelValue(seed, i, 10)));
        } else {
            const int fine = cifar100Fine(seed, i);
            b.push_back(static_cast<std::uint8_t>(fine / 5));
            b.push_back(static_cast<std::uint8_t>(fine));
        }
        for (int c = 0; c < 3; ++c)
            for (int y = 0; y < 32; ++y)
                for (int x = 0; x < 32; ++x) b.push_back(pixelValue(seed, i, y, x, c));
    }
    return b;
}

void writeFile(const fs::path& path, const Bytes& bytes)
{
    if (path.has_parent_path()) fs::create_directories(path.parent_path());
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
    if (!f) throw std::runtime_error("cannot write " + path.string());
}

void writeText(const fs::path& path, const std::string& text)
{
    writeFile(path, Bytes(text.begin(), text.end()));
}

Bytes readFile(const fs::path& path)
{
    std::ifstream f(path, std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

void writeCifar10(const fs::path& folder, std::int64_t perBatch, std::int64_t test,
                  std::uint64_t seed)
{
    fs::create_directories(folder);
    for (int i = 0; i < 5; ++i)
        writeFile(folder / ("data_batch_" + std::to_string(i + 1) + ".bin"),
                  cifarRecords(i * perBatch, perBatch, 1, seed));
    writeFile(folder / "test_batch.bin", cifarRecords(kTestIndexBase, test, 1, seed));
    // As in the archive: one name per line and a trailing blank line.
    writeText(folder / "batches.meta.txt", "airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\n"
                                           "horse\nship\ntruck\n\n");
}

void writeCifar100(const fs::path& folder, std::int64_t train, std::int64_t test,
                   std::uint64_t seed)
{
    fs::create_directories(folder);
    writeFile(folder / "train.bin", cifarRecords(0, train, 2, seed));
    writeFile(folder / "test.bin", cifarRecords(kTestIndexBase, test, 2, seed));
    std::string fine, coarse;
    for (int i = 0; i < 100; ++i) fine += "fine_" + std::to_string(i) + "\n";
    for (int i = 0; i < 20; ++i) coarse += "coarse_" + std::to_string(i) + "\r\n";
    writeText(folder / "fine_label_names.txt", fine);
    writeText(folder / "coarse_label_names.txt", coarse);
}

void writeIdxDataset(const fs::path& folder, std::int64_t train, std::int64_t test, int rows,
                     int cols, bool gz, std::uint64_t seed)
{
    fs::create_directories(folder);
    const auto put = [&](const std::string& name, const Bytes& bytes) {
        writeFile(folder / (gz ? name + ".gz" : name), gz ? gzip(bytes) : bytes);
    };
    // Test images reuse the formula with indices offset by kTestIndexBase.
    Bytes testImages = idxImages(test, rows, cols, seed);
    for (std::int64_t i = 0; i < test; ++i)
        for (int y = 0; y < rows; ++y)
            for (int x = 0; x < cols; ++x)
                testImages[static_cast<std::size_t>(16 + (i * rows + y) * cols + x)] =
                    pixelValue(seed, kTestIndexBase + i, y, x, 0);
    std::vector<int> testLabels;
    for (std::int64_t i = 0; i < test; ++i)
        testLabels.push_back(labelValue(seed, kTestIndexBase + i, 10));
    put("train-images-idx3-ubyte", idxImages(train, rows, cols, seed));
    put("train-labels-idx1-ubyte", idxLabels(labelsFor(train, 10, seed)));
    put("t10k-images-idx3-ubyte", testImages);
    put("t10k-labels-idx1-ubyte", idxLabels(testLabels));
}

void writeDatasetFolder(const engine::DatasetSpec& spec, const fs::path& folder,
                        std::int64_t perFile, bool gz, std::uint64_t seed)
{
    using engine::DatasetLabels;
    fs::create_directories(folder);
    const auto put = [&](const std::string& name, const Bytes& bytes) {
        const bool zip = gz && spec.gzipAccepted;
        writeFile(folder / (zip ? name + ".gz" : name), zip ? gzip(bytes) : bytes);
    };
    // The labellings of the entries that read this folder's files (cifar100 and cifar100-coarse):
    // the folder is whole for each of them.
    std::vector<const DatasetLabels*> labellings{&spec.labels};
    for (const engine::DatasetSpec& other : engine::datasetSpecs())
        if (other.name != spec.name && other.folderNames == spec.folderNames)
            labellings.push_back(&other.labels);
    for (const DatasetLabels* l : labellings) {
        if (l->namesFile.empty()) continue;
        std::string names;
        for (int c = 0; c < l->numClasses; ++c) names += "class " + std::to_string(c) + "\n";
        writeText(folder / l->namesFile, names);
    }
    const int rows = static_cast<int>(spec.imageShape[0]),
              cols = static_cast<int>(spec.imageShape[1]);
    const int channels = static_cast<int>(spec.imageShape[2]);
    std::int64_t index = 0; // global over both splits: every image differs
    for (const auto* split : {&spec.trainFiles, &spec.testFiles}) {
        switch (spec.reader) {
        case engine::DatasetReader::Idx: {
            Bytes images = idxImages(perFile, rows, cols, seed);
            std::vector<int> labels;
            for (std::int64_t i = 0; i < perFile; ++i, ++index) {
                for (int y = 0; y < rows; ++y)
                    for (int x = 0; x < cols; ++x)
                        images[static_cast<std::size_t>(16 + (i * rows + y) * cols + x)] =
                            pixelValue(seed, index, y, x, 0);
                labels.push_back(labelValue(seed, index, spec.labels.numClasses));
            }
            put((*split)[0], images);
            put((*split)[1], idxLabels(labels));
            break;
        }
        case engine::DatasetReader::CifarBinary:
            for (const std::string& file : *split) {
                Bytes b;
                for (std::int64_t i = 0; i < perFile; ++i, ++index) {
                    for (int byte = 0; byte < spec.labelBytes; ++byte) {
                        int classes = 1;
                        for (const DatasetLabels* l : labellings)
                            if (l->labelByte == byte) classes = l->numClasses;
                        b.push_back(static_cast<std::uint8_t>(labelValue(seed, index, classes)));
                    }
                    for (int c = 0; c < channels; ++c)
                        for (int y = 0; y < rows; ++y)
                            for (int x = 0; x < cols; ++x)
                                b.push_back(pixelValue(seed, index, y, x, c));
                }
                put(file, b);
            }
            break;
        }
    }
}

} // namespace towers::test
