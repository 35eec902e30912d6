#include "engine/io/safetensors.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <set>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "engine/errors.h"
#include "engine/io/json_depth.h"

namespace towers::engine {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host needs byte swapping");

namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

// A header this large is a corrupt length field, not a real checkpoint (the reference
// implementation uses the same bound).
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
constexpr std::string_view kMetadataKey = "__metadata__";

struct DTypeCode
{
    std::string_view code;
    DType dtype;
};
constexpr DTypeCode kDTypeCodes[] = {
    {"F32", DType::Float32}, {"F64", DType::Float64}, {"BF16", DType::BFloat16},
    {"I32", DType::Int32},   {"I64", DType::Int64},   {"U8", DType::UInt8},
};

std::string_view codeOf(DType t)
{
    for (const auto& c : kDTypeCodes)
        if (c.dtype == t) return c.code;
    throw InvalidArgument("dtype " + std::string(dtypeName(t)) + " has no safetensors code");
}

std::optional<DType> dtypeFromCode(std::string_view code)
{
    for (const auto& c : kDTypeCodes)
        if (c.code == code) return c.dtype;
    return std::nullopt;
}

std::string osError(int err)
{
    return std::strerror(err);
}

// Closes a file descriptor on scope exit unless it was closed explicitly (with error checking).
class Fd
{
public:
    explicit Fd(int fd) : m_fd(fd) {}
    ~Fd()
    {
        if (m_fd >= 0) ::close(m_fd);
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    int get() const { return m_fd; }
    // Returns 0 or the errno of close().
    int close()
    {
        const int rc = ::close(m_fd);
        m_fd = -1;
        return rc == 0 ? 0 : errno;
    }

private:
    int m_fd;
};

// ------------------------------------------------------------------------------------------------
// Reading

class Reader
{
public:
    explicit Reader(const std::filesystem::path& path) : m_path(path) {}

    // The whole file, or (withData false) its header only: the metadata, and every tensor's
    // entry checked but no tensor read.
    SafeTensors read(bool withData = true);
    // The header to `header`, then (with `visit`) the tensors one at a time in file order, each
    // dropped after its call.
    std::map<std::string, std::string> visit(const SafeTensorsHeaderFn& header,
                                             const SafeTensorFn& visit);

private:
    struct Entry
    {
        std::string name;
        DType dtype;
        std::vector<std::int64_t> dims;
        std::uint64_t begin;
        std::uint64_t end;
    };

    [[noreturn]] void fail(const std::string& what) const
    {
        throw IoError("cannot read safetensors file " + quotedPath(m_path) + ": " + what);
    }
    void readAt(void* dst, std::uint64_t bytes, std::uint64_t offset, const char* what) const;
    Json parseHeader(std::uint64_t headerBytes) const;
    Entry parseEntry(const std::string& name, const Json& info, std::uint64_t dataBytes) const;
    void parseMetadata(const Json& meta, SafeTensors& out) const;
    void checkCoverage(std::vector<Entry>& entries, std::uint64_t dataBytes,
                       std::uint64_t dataStart) const;

    std::filesystem::path m_path;
    int m_fd = -1;
    std::uint64_t m_fileSize = 0;
};

void Reader::readAt(void* dst, std::uint64_t bytes, std::uint64_t offset, const char* what) const
{
    auto* p = static_cast<char*>(dst);
    while (bytes > 0) {
        const std::size_t chunk = static_cast<std::size_t>(std::min<std::uint64_t>(bytes, 1 << 30));
        const ssize_t n = ::pread(m_fd, p, chunk, static_cast<off_t>(offset));
        if (n < 0) {
            if (errno == EINTR) continue;
            fail(std::string("reading ") + what + " at byte offset " + std::to_string(offset) +
                 " failed: " + osError(errno));
        }
        if (n == 0)
            fail(std::string("unexpected end of file reading ") + what + " at byte offset " +
                 std::to_string(offset) + " (the file changed while it was read?)");
        p += n;
        bytes -= static_cast<std::uint64_t>(n);
        offset += static_cast<std::uint64_t>(n);
    }
}

Json Reader::parseHeader(std::uint64_t headerBytes) const
{
    std::string text(static_cast<std::size_t>(headerBytes), '\0');
    readAt(text.data(), headerBytes, 8, "the JSON header");
    // nlohmann keeps the last of duplicate keys silently; the callback sees every top-level key.
    std::set<std::string> seen;
    std::string duplicate;
    auto onEvent = [&](int depth, Json::parse_event_t event, Json& parsed) {
        if (event == Json::parse_event_t::key && depth == 1 && duplicate.empty() &&
            parsed.is_string() && !seen.insert(parsed.get<std::string>()).second)
            duplicate = parsed.get<std::string>();
        return true;
    };
    Json header;
    try {
        requireJsonDepth(text);
        header = Json::parse(text, onEvent);
    } catch (const Json::parse_error& e) {
        // e.byte is 1-based within the header; report the file offset.
        fail("the header is not valid JSON (near file byte offset " +
             std::to_string(8 + (e.byte > 0 ? e.byte - 1 : 0)) + "): " + e.what());
    } catch (const Json::exception& e) {
        fail(std::string("the header is not valid JSON: ") + e.what());
    }
    if (!duplicate.empty()) fail("the header names tensor '" + duplicate + "' more than once");
    if (!header.is_object())
        fail(std::string("the header must be a JSON object, found ") + header.type_name());
    return header;
}

Reader::Entry Reader::parseEntry(const std::string& name, const Json& info,
                                 std::uint64_t dataBytes) const
{
    const std::string where = "tensor '" + name + "': ";
    if (!info.is_object()) fail(where + "expected an object, found " + info.type_name());
    for (const char* key : {"dtype", "shape", "data_offsets"})
        if (!info.contains(key)) fail(where + "missing key \"" + key + "\"");

    const Json& code = info["dtype"];
    if (!code.is_string()) fail(where + "\"dtype\" must be a string");
    const auto dtype = dtypeFromCode(code.get_ref<const std::string&>());
    if (!dtype)
        fail(where + "unsupported dtype \"" + code.get<std::string>() +
             "\" (supported: F32, F64, BF16, I32, I64, U8)");

    const Json& shape = info["shape"];
    if (!shape.is_array()) fail(where + "\"shape\" must be an array");
    if (shape.size() > 64) fail(where + "\"shape\" has " + std::to_string(shape.size()) + " dims");
    Entry e{name, *dtype, {}, 0, 0};
    // Product of the non-zero dims, overflow-checked, so that Shape::numel() cannot overflow
    // either, even for an empty tensor.
    std::uint64_t product = 1;
    bool hasZero = false;
    for (const Json& d : shape) {
        if (!d.is_number_unsigned()) fail(where + "\"shape\" must hold non-negative integers");
        const std::uint64_t v = d.get<std::uint64_t>();
        if (v == 0) {
            hasZero = true;
        } else if (product > std::numeric_limits<std::int64_t>::max() / v) {
            fail(where + "shape " + shape.dump() + " is impossibly large");
        } else {
            product *= v;
        }
        e.dims.push_back(static_cast<std::int64_t>(v));
    }
    const std::uint64_t numel = hasZero ? 0 : product;

    const Json& offsets = info["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned())
        fail(where + "\"data_offsets\" must be two non-negative integers [begin, end]");
    e.begin = offsets[0].get<std::uint64_t>();
    e.end = offsets[1].get<std::uint64_t>();
    const std::string range = "[" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
    if (e.end < e.begin) fail(where + "data_offsets " + range + " end before they begin");
    if (e.end > dataBytes)
        fail(where + "data_offsets " + range + " run past the end of the data region (" +
             std::to_string(dataBytes) + " bytes): the file is truncated or the header is wrong");
    const std::uint64_t elementSize = dtypeSize(*dtype);
    const bool countable = numel <= std::numeric_limits<std::uint64_t>::max() / elementSize;
    if (!countable || numel * elementSize != e.end - e.begin)
        fail(where + "shape " + shape.dump() + " of " + code.get<std::string>() + " needs " +
             (countable ? std::to_string(numel * elementSize) + " bytes"
                        : std::string("more bytes than the file holds")) +
             ", but data_offsets " + range + " span " + std::to_string(e.end - e.begin));
    return e;
}

void Reader::parseMetadata(const Json& meta, SafeTensors& out) const
{
    if (!meta.is_object())
        fail(std::string("\"__metadata__\" must be an object of strings, found ") +
             meta.type_name());
    for (const auto& [key, value] : meta.items()) {
        if (!value.is_string())
            fail("metadata \"" + key + "\" must be a string, found " + value.type_name());
        out.metadata.emplace(key, value.get<std::string>());
    }
}

void Reader::checkCoverage(std::vector<Entry>& entries, std::uint64_t dataBytes,
                           std::uint64_t dataStart) const
{
    // The byte buffer must be exactly tiled by the tensors: no overlap, no gap, nothing after.
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    std::uint64_t cursor = 0;
    const Entry* previous = nullptr;
    for (const Entry& e : entries) {
        if (e.begin < cursor)
            fail("tensor '" + e.name + "' (data_offsets [" + std::to_string(e.begin) + ", " +
                 std::to_string(e.end) + "]) overlaps tensor '" + previous->name + "'");
        if (e.begin > cursor)
            fail("bytes " + std::to_string(cursor) + " to " + std::to_string(e.begin) +
                 " of the data region (file offset " + std::to_string(dataStart + cursor) +
                 ") belong to no tensor");
        if (e.end > cursor) {
            cursor = e.end;
            previous = &e;
        }
    }
    if (cursor != dataBytes)
        fail("the last " + std::to_string(dataBytes - cursor) +
             " bytes of the data region (from file offset " + std::to_string(dataStart + cursor) +
             ") belong to no tensor");
}

SafeTensors Reader::read(bool withData)
{
    SafeTensors out;
    const SafeTensorFn keep = [&out](const std::string& name, Tensor& t) {
        out.tensors.emplace_back(name, std::move(t));
    };
    out.metadata =
        visit([&out](const std::map<std::string, std::string>&,
                     const std::vector<SafeTensorEntry>& e) { out.tensors.reserve(e.size()); },
              withData ? keep : SafeTensorFn());
    return out;
}

std::map<std::string, std::string> Reader::visit(const SafeTensorsHeaderFn& onHeader,
                                                 const SafeTensorFn& onTensor)
{
    // Non-blocking, so that a FIFO named like a checkpoint is refused below instead of waiting
    // for a writer; a regular file's reads do not block either way.
    m_fd = ::open(m_path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (m_fd < 0) fail(osError(errno));
    Fd guard(m_fd);
    struct stat st = {};
    if (::fstat(m_fd, &st) != 0) fail(osError(errno));
    if (!S_ISREG(st.st_mode)) fail("not a regular file");
    m_fileSize = static_cast<std::uint64_t>(st.st_size);
    if (m_fileSize < 8)
        fail("the file is " + std::to_string(m_fileSize) +
             " bytes long, shorter than the 8-byte header length");

    unsigned char lengthBytes[8];
    readAt(lengthBytes, 8, 0, "the header length");
    std::uint64_t headerBytes = 0;
    for (int i = 7; i >= 0; --i) headerBytes = (headerBytes << 8) | lengthBytes[i];
    if (headerBytes > kMaxHeaderBytes)
        fail("the header length at byte offset 0 says " + std::to_string(headerBytes) +
             " bytes, more than the 100 MB limit: not a safetensors file or corrupt");
    if (headerBytes > m_fileSize - 8)
        fail("the header length at byte offset 0 says " + std::to_string(headerBytes) +
             " bytes, but only " + std::to_string(m_fileSize - 8) +
             " follow: the file is truncated or not a safetensors file");
    if (headerBytes < 2) fail("the header is " + std::to_string(headerBytes) + " bytes long");

    const Json header = parseHeader(headerBytes);
    const std::uint64_t dataStart = 8 + headerBytes;
    const std::uint64_t dataBytes = m_fileSize - dataStart;

    SafeTensors out;
    std::vector<Entry> entries;
    for (const auto& [name, info] : header.items()) {
        if (name == kMetadataKey)
            parseMetadata(info, out);
        else
            entries.push_back(parseEntry(name, info, dataBytes));
    }
    checkCoverage(entries, dataBytes, dataStart);
    if (onHeader) {
        std::vector<SafeTensorEntry> described;
        described.reserve(entries.size());
        for (const Entry& e : entries) described.push_back({e.name, e.dtype, Shape(e.dims)});
        onHeader(out.metadata, described);
    }
    if (!onTensor) return std::move(out.metadata);

    for (const Entry& e : entries) {
        Tensor t;
        try {
            // Pages of the system's for a large tensor (Tensor::zeros): they go back to it when
            // the tensor goes, where the heap may keep them (visit reads tensor after tensor).
            t = Tensor::zeros(Shape(e.dims), e.dtype);
        } catch (const std::bad_alloc&) {
            throw FileOutOfMemory("cannot read safetensors file " + quotedPath(m_path) +
                                  ": out of memory allocating tensor '" + e.name + "' (" +
                                  std::to_string(e.end - e.begin) + " bytes)");
        }
        const std::string what = "tensor '" + e.name + "'";
        if (t.bytes()) readAt(t.raw(), t.bytes(), dataStart + e.begin, what.c_str());
        onTensor(e.name, t);
    }
    return std::move(out.metadata);
}

// ------------------------------------------------------------------------------------------------
// Writing

std::string buildHeader(const NamedTensors& tensors,
                        const std::map<std::string, std::string>& metadata)
{
    OrderedJson header = OrderedJson::object();
    if (!metadata.empty()) {
        OrderedJson meta = OrderedJson::object();
        for (const auto& [k, v] : metadata) meta[k] = v;
        header[std::string(kMetadataKey)] = std::move(meta);
    }
    std::set<std::string_view> names;
    std::uint64_t offset = 0;
    for (const auto& [name, t] : tensors) {
        if (name.empty()) throw InvalidArgument("safetensors: a tensor name is empty");
        if (name == kMetadataKey)
            throw InvalidArgument("safetensors: \"__metadata__\" is reserved, not a tensor name");
        if (!names.insert(name).second)
            throw InvalidArgument("safetensors: tensor name '" + name + "' is used twice");
        if (t.empty()) throw InvalidArgument("safetensors: tensor '" + name + "' is empty");
        if (!t.device().isHost())
            throw InvalidArgument("safetensors: tensor '" + name + "' is on " + t.device().str() +
                                  "; copy it to the host first");
        OrderedJson info;
        info["dtype"] = codeOf(t.dtype());
        info["shape"] = t.shape().dims();
        info["data_offsets"] = {offset, offset + t.bytes()};
        header[name] = std::move(info);
        offset += t.bytes();
    }
    std::string text;
    try {
        text = header.dump();
    } catch (const OrderedJson::exception& e) {
        throw InvalidArgument(std::string("safetensors: names and metadata must be UTF-8: ") +
                              e.what());
    }
    // Pad with spaces so that the data region starts 8-byte aligned.
    text.append((8 - text.size() % 8) % 8, ' ');
    return text;
}

class AtomicWriter
{
public:
    explicit AtomicWriter(const std::filesystem::path& path) : m_path(path)
    {
        if (!m_path.has_filename()) fail("not a file name");
        m_dir = m_path.parent_path().empty() ? std::filesystem::path(".") : m_path.parent_path();
        static std::atomic<unsigned> counter{0};
        for (int attempt = 0; attempt < 100 && m_fd < 0; ++attempt) {
            std::string name = ".";
            name += m_path.filename().string();
            name += ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
            m_temp = m_dir / name;
            m_fd = ::open(m_temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
            if (m_fd < 0 && errno != EEXIST)
                fail("cannot create a temporary file in " + quotedPath(m_dir) + ": " +
                     osError(errno));
        }
        if (m_fd < 0) fail("cannot create a unique temporary file in " + quotedPath(m_dir));
    }
    ~AtomicWriter()
    {
        if (m_fd >= 0) ::close(m_fd);
        if (!m_committed) ::unlink(m_temp.c_str());
    }
    AtomicWriter(const AtomicWriter&) = delete;
    AtomicWriter& operator=(const AtomicWriter&) = delete;

    void write(const void* data, std::size_t bytes)
    {
        const char* p = static_cast<const char*>(data);
        while (bytes > 0) {
            const ssize_t n = ::write(m_fd, p, std::min<std::size_t>(bytes, 1 << 30));
            if (n < 0) {
                if (errno == EINTR) continue;
                fail("writing " + quotedPath(m_temp) + " failed: " + osError(errno));
            }
            p += n;
            bytes -= static_cast<std::size_t>(n);
        }
    }

    void commit()
    {
        if (::fsync(m_fd) != 0)
            fail("fsync of " + quotedPath(m_temp) + " failed: " + osError(errno));
        const int fd = m_fd;
        m_fd = -1;
        if (::close(fd) != 0) fail("closing " + quotedPath(m_temp) + " failed: " + osError(errno));
        if (::rename(m_temp.c_str(), m_path.c_str()) != 0)
            fail("renaming " + quotedPath(m_temp) + " failed: " + osError(errno));
        m_committed = true;
        // Make the rename itself durable. Some file systems cannot fsync a directory (EINVAL).
        Fd dir(::open(m_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (dir.get() < 0 || (::fsync(dir.get()) != 0 && errno != EINVAL))
            fail("the file was written, but syncing its directory " + quotedPath(m_dir) +
                 " failed: " + osError(errno));
    }

private:
    [[noreturn]] void fail(const std::string& what) const
    {
        throw IoError("cannot write " + quotedPath(m_path) + ": " + what);
    }

    std::filesystem::path m_path;
    std::filesystem::path m_dir;
    std::filesystem::path m_temp;
    int m_fd = -1;
    bool m_committed = false;
};

} // namespace

const Tensor* SafeTensors::find(std::string_view name) const
{
    for (const auto& [n, t] : tensors)
        if (n == name) return &t;
    return nullptr;
}

void writeSafeTensors(const std::filesystem::path& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata)
{
    const std::string header = buildHeader(tensors, metadata);
    unsigned char length[8];
    for (int i = 0; i < 8; ++i)
        length[i] = static_cast<unsigned char>(std::uint64_t(header.size()) >> (8 * i));

    AtomicWriter out(path);
    out.write(length, sizeof length);
    out.write(header.data(), header.size());
    for (const auto& [name, t] : tensors)
        if (t.bytes()) out.write(t.raw(), t.bytes());
    out.commit();
}

SafeTensors readSafeTensors(const std::filesystem::path& path)
{
    return Reader(path).read();
}

std::map<std::string, std::string> readSafeTensorsMetadata(const std::filesystem::path& path)
{
    return Reader(path).read(false).metadata;
}

std::map<std::string, std::string> visitSafeTensors(const std::filesystem::path& path,
                                                    const SafeTensorsHeaderFn& header,
                                                    const SafeTensorFn& visit)
{
    return Reader(path).visit(header, visit);
}

std::vector<SafeTensorEntry> describeTensors(const NamedTensors& tensors)
{
    std::vector<SafeTensorEntry> out;
    out.reserve(tensors.size());
    for (const auto& [name, t] : tensors) out.push_back({name, t.dtype(), t.shape()});
    return out;
}

} // namespace towers::engine
