// CIFAR binary records: label byte(s), then 1,024 red, 1,024 green and 1,024 blue bytes, each plane
// 32x32 row-major. No header, so the only structure to check is the record size and the labels.
#include "engine/data/cifar_reader.h"

#include <algorithm>

#include "engine/data/file_bytes.h"

namespace towers::engine {

namespace {

std::string formatName(int labelBytes)
{
    return labelBytes == 1 ? "CIFAR-10" : "CIFAR-100";
}

std::string recordWhere(const std::string& what, std::size_t record, std::size_t recordBytes)
{
    return what + ": record " + std::to_string(record) + " (byte offset " +
           std::to_string(record * recordBytes) + ")";
}

std::size_t checkRecordLayout(std::size_t size, int labelBytes, const std::string& what)
{
    const std::size_t recordBytes = static_cast<std::size_t>(labelBytes) + kCifarImageBytes;
    if (size == 0)
        throw IoError(what + ": the file is empty (expected " + std::to_string(recordBytes) +
                      "-byte " + formatName(labelBytes) + " records)");
    if (size % recordBytes != 0) {
        const std::size_t whole = size / recordBytes;
        throw IoError(recordWhere(what, whole, recordBytes) + ": truncated: the file's " +
                      std::to_string(size) + " bytes are not a whole number of " +
                      std::to_string(recordBytes) + "-byte " + formatName(labelBytes) +
                      " records (the last record has " + std::to_string(size % recordBytes) +
                      " bytes)");
    }
    return size / recordBytes;
}

} // namespace

void appendCifarRecords(const std::uint8_t* data, std::size_t size, int labelBytes, bool fine,
                        int numClasses, const std::string& what, ImageSet& into)
{
    if (labelBytes != 1 && labelBytes != 2)
        throw InvalidArgument(what + ": CIFAR records have 1 or 2 label bytes, not " +
                              std::to_string(labelBytes));
    if (numClasses < 1 || numClasses > 256)
        throw InvalidArgument(what + ": " + std::to_string(numClasses) +
                              " classes: CIFAR byte labels allow 1 to 256");
    if (into.count > 0 &&
        (into.height != kCifarSide || into.width != kCifarSide || into.channels != 3))
        throw InvalidArgument(what + ": cannot append 32x32x3 CIFAR images to a set of " +
                              into.imageShape().str() + " images");
    const std::size_t records = checkRecordLayout(size, labelBytes, what);
    const std::size_t recordBytes = static_cast<std::size_t>(labelBytes) + kCifarImageBytes;

    // Check every label before growing the set, so a bad file leaves `into` as it was.
    const int keptByte = labelBytes == 2 && fine ? 1 : 0;
    for (std::size_t r = 0; r < records; ++r) {
        const std::uint8_t* rec = data + r * recordBytes;
        for (int b = 0; b < labelBytes; ++b) {
            const bool kept = b == keptByte;
            const int range = kept ? numClasses : (b == 0 ? kCifar100Coarse : kCifar100Fine);
            if (rec[b] >= range)
                throw IoError(recordWhere(what, r, recordBytes) + ": " +
                              (labelBytes == 2 ? (b == 0 ? "coarse " : "fine ") : "") + "label " +
                              std::to_string(rec[b]) + " is out of range 0.." +
                              std::to_string(range - 1));
        }
    }

    const std::size_t first = static_cast<std::size_t>(into.count);
    into.height = into.width = kCifarSide;
    into.channels = 3;
    into.pixels.resize((first + records) * kCifarImageBytes);
    into.labels.resize(first + records);
    constexpr int plane = kCifarSide * kCifarSide;
    for (std::size_t r = 0; r < records; ++r) {
        const std::uint8_t* rec = data + r * recordBytes;
        into.labels[first + r] = rec[keptByte];
        const std::uint8_t* red = rec + labelBytes;
        std::uint8_t* out = into.pixels.data() + (first + r) * kCifarImageBytes;
        for (int p = 0; p < plane; ++p) { // planar (CHW) to interleaved (HWC)
            out[3 * p] = red[p];
            out[3 * p + 1] = red[plane + p];
            out[3 * p + 2] = red[2 * plane + p];
        }
    }
    into.count = static_cast<std::int64_t>(first + records);
}

ImageSet parseCifarRecords(const std::uint8_t* data, std::size_t size, int labelBytes, bool fine,
                           int numClasses, const std::string& what)
{
    ImageSet set;
    appendCifarRecords(data, size, labelBytes, fine, numClasses, what, set);
    return set;
}

void readCifarFile(const std::filesystem::path& path, int labelBytes, bool fine, int numClasses,
                   ImageSet& into)
{
    const std::vector<std::uint8_t> bytes = readFileBytes(path);
    appendCifarRecords(bytes.data(), bytes.size(), labelBytes, fine, numClasses, path.string(),
                       into);
}

std::int64_t inspectCifarFile(const std::filesystem::path& path, int labelBytes)
{
    return static_cast<std::int64_t>(
        checkRecordLayout(regularFileSize(path), labelBytes, path.string()));
}

std::vector<std::string> parseClassNames(const std::string& text, int expected,
                                         const std::string& what)
{
    std::vector<std::string> names;
    std::size_t pos = 0;
    while (pos <= text.size()) {
        std::size_t end = text.find('\n', pos);
        if (end == std::string::npos) end = text.size();
        std::string line = text.substr(pos, end - pos);
        const auto isSpace = [](char c) {
            return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
        };
        while (!line.empty() && isSpace(line.back())) line.pop_back();
        std::size_t lead = 0;
        while (lead < line.size() && isSpace(line[lead])) ++lead;
        line.erase(0, lead);
        if (!line.empty()) {
            if (static_cast<int>(names.size()) == expected)
                throw IoError(
                    what + ": more than the " + std::to_string(expected) +
                    " class names expected (one per line); line " +
                    std::to_string(std::count(text.begin(),
                                              text.begin() + static_cast<std::ptrdiff_t>(pos),
                                              '\n') +
                                   1) +
                    " is \"" + line.substr(0, 40) + "\"");
            names.push_back(std::move(line));
        }
        pos = end + 1;
    }
    if (static_cast<int>(names.size()) != expected)
        throw IoError(what + ": " + std::to_string(names.size()) + " class names, expected " +
                      std::to_string(expected) + " (one per line)");
    return names;
}

std::vector<std::string> readClassNames(const std::filesystem::path& path, int expected)
{
    const std::uint64_t size = regularFileSize(path);
    if (size > (1u << 20))
        throw IoError(path.string() + ": " + std::to_string(size) +
                      " bytes is too large for a list of class names");
    const std::vector<std::uint8_t> bytes = readFileBytes(path);
    return parseClassNames(std::string(bytes.begin(), bytes.end()), expected, path.string());
}

} // namespace towers::engine
