#include "engine/train/run_directory.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "engine/train/checkpoint.h"

namespace towers::engine {

namespace fs = std::filesystem;

namespace {

std::string quoted(const fs::path& p)
{
    std::string s = p.string();
    s.insert(s.begin(), '\'');
    s.push_back('\'');
    return s;
}

[[noreturn]] void ioFail(const std::string& what, int err)
{
    throw IoError(what + ": " + std::strerror(err));
}

void writeAll(int fd, const std::string& text, const fs::path& path)
{
    const char* p = text.data();
    std::size_t left = text.size();
    while (left > 0) {
        const ssize_t n = ::write(fd, p, left);
        if (n < 0) {
            if (errno == EINTR) continue;
            ioFail("cannot write " + quoted(path), errno);
        }
        p += n;
        left -= std::size_t(n);
    }
}

// Writes `text` to `path` through a temporary file in the same folder, fsync'ed and renamed.
void writeAtomically(const fs::path& path, const std::string& text)
{
    std::string name = path.filename().string();
    name.insert(name.begin(), '.');
    name += ".tmp-" + std::to_string(::getpid());
    const fs::path temp = path.parent_path() / name;
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) ioFail("cannot create " + quoted(temp), errno);
    try {
        writeAll(fd, text, temp);
        if (::fsync(fd) != 0) ioFail("cannot sync " + quoted(temp), errno);
    } catch (...) {
        ::close(fd);
        ::unlink(temp.c_str());
        throw;
    }
    if (::close(fd) != 0) {
        const int err = errno;
        ::unlink(temp.c_str());
        ioFail("cannot close " + quoted(temp), err);
    }
    if (::rename(temp.c_str(), path.c_str()) != 0) {
        const int err = errno;
        ::unlink(temp.c_str());
        ioFail("cannot rename " + quoted(temp) + " to " + quoted(path), err);
    }
}

// "ckpt-00001000.safetensors" -> 1000; -1 for any other name.
std::int64_t stepOf(const std::string& name)
{
    static const std::string prefix = "ckpt-", suffix = ".safetensors";
    if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
        return -1;
    const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (digits.empty() || digits.size() > 18 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return -1;
    return std::stoll(digits);
}

void keepLinesUpTo(const fs::path& file, std::int64_t step)
{
    std::ifstream in(file, std::ios::binary);
    if (!in) return;
    std::stringstream all;
    all << in.rdbuf();
    const std::string text = all.str();
    std::string kept;
    std::size_t begin = 0;
    while (begin < text.size()) {
        const std::size_t end = text.find('\n', begin);
        if (end == std::string::npos) break; // a partial last line: dropped
        const std::string line = text.substr(begin, end - begin);
        begin = end + 1;
        try {
            const auto j = nlohmann::json::parse(line);
            if (j.is_object() && j.contains("step") && j["step"].is_number_integer() &&
                j["step"].get<std::int64_t>() > step)
                continue;
        } catch (const nlohmann::json::exception&) {
            continue; // a damaged line
        }
        kept += line;
        kept += '\n';
    }
    if (kept != text) writeAtomically(file, kept);
}

} // namespace

RunDirectory::RunDirectory(fs::path root) : m_root(std::move(root))
{
    std::error_code ec;
    fs::create_directories(checkpointDir(), ec);
    if (ec) throw IoError("cannot create the run folder " + quoted(checkpointDir()) + ": " + ec.message());
}

fs::path RunDirectory::checkpointPath(std::int64_t step) const
{
    if (step < 0) throw InvalidArgument("checkpoint step must be >= 0");
    char buf[64];
    std::snprintf(buf, sizeof buf, "ckpt-%08lld.safetensors", static_cast<long long>(step));
    return checkpointDir() / buf;
}

void RunDirectory::writeConfig(const std::string& json) const { writeAtomically(configPath(), json + "\n"); }

std::optional<std::string> RunDirectory::readConfig() const
{
    std::ifstream in(configPath(), std::ios::binary);
    if (!in) return std::nullopt;
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

void RunDirectory::appendLine(const fs::path& file, const std::string& line) const
{
    if (line.find('\n') != std::string::npos) throw InvalidArgument("a JSON line must not contain a newline");
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    if (fd < 0) ioFail("cannot open " + quoted(file), errno);
    try {
        writeAll(fd, line + "\n", file); // one write: a line is never interleaved
    } catch (...) {
        ::close(fd);
        throw;
    }
    ::close(fd);
}

void RunDirectory::appendMetrics(const std::string& jsonLine) const { appendLine(metricsPath(), jsonLine); }
void RunDirectory::appendEval(const std::string& jsonLine) const { appendLine(evalPath(), jsonLine); }

void RunDirectory::truncateLogs(std::int64_t step) const
{
    keepLinesUpTo(metricsPath(), step);
    keepLinesUpTo(evalPath(), step);
}

std::vector<CheckpointFile> RunDirectory::checkpoints() const
{
    std::vector<CheckpointFile> out;
    std::error_code ec;
    for (fs::directory_iterator it(checkpointDir(), ec), end; !ec && it != end; it.increment(ec)) {
        const std::int64_t step = stepOf(it->path().filename().string());
        if (step >= 0 && it->is_regular_file(ec)) out.push_back({step, it->path()});
    }
    if (ec) throw IoError("cannot list " + quoted(checkpointDir()) + ": " + ec.message());
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
    return out;
}

void RunDirectory::pruneCheckpoints(int keep) const
{
    if (keep < 1) throw InvalidArgument("keepCheckpoints: must be at least 1");
    const auto all = checkpoints();
    for (std::size_t i = 0; i + std::size_t(keep) < all.size(); ++i) {
        std::error_code ec;
        fs::remove(all[i].path, ec);
        if (ec) throw IoError("cannot delete the old checkpoint " + quoted(all[i].path) + ": " + ec.message());
    }
}

std::vector<fs::path> RunDirectory::removeCheckpointsAfter(std::int64_t step) const
{
    std::vector<fs::path> removed;
    for (const auto& c : checkpoints()) {
        if (c.step <= step) continue;
        std::error_code ec;
        fs::remove(c.path, ec);
        if (ec) throw IoError("cannot delete the checkpoint " + quoted(c.path) + ": " + ec.message());
        removed.push_back(c.path);
    }
    return removed;
}

void RunDirectory::removeStaleTemporaries() const
{
    std::error_code ec;
    for (fs::directory_iterator it(checkpointDir(), ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.rfind(".ckpt-", 0) == 0 && name.find(".tmp-") != std::string::npos) {
            std::error_code rm;
            fs::remove(it->path(), rm);
        }
    }
}

std::optional<CheckpointFile> RunDirectory::newestGoodCheckpoint(const Model* model,
                                                                 std::vector<std::string>* skipped) const
{
    auto all = checkpoints();
    for (auto it = all.rbegin(); it != all.rend(); ++it) {
        try {
            const Checkpoint c = readCheckpoint(it->path);
            if (model) validateCheckpoint(c, *model, it->path);
            return *it;
        } catch (const Error& e) {
            if (skipped) skipped->push_back(e.what());
        }
    }
    return std::nullopt;
}

} // namespace towers::engine
