#include "engine/train/run_directory.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "engine/errors.h"
#include "engine/io/json_depth.h"
#include "engine/train/checkpoint.h"

namespace towers::engine {

namespace fs = std::filesystem;

namespace {

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
            ioFail("cannot write " + quotedPath(path), errno);
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
    if (fd < 0) ioFail("cannot create " + quotedPath(temp), errno);
    try {
        writeAll(fd, text, temp);
        if (::fsync(fd) != 0) ioFail("cannot sync " + quotedPath(temp), errno);
    } catch (...) {
        ::close(fd);
        ::unlink(temp.c_str());
        throw;
    }
    if (::close(fd) != 0) {
        const int err = errno;
        ::unlink(temp.c_str());
        ioFail("cannot close " + quotedPath(temp), err);
    }
    if (::rename(temp.c_str(), path.c_str()) != 0) {
        const int err = errno;
        ::unlink(temp.c_str());
        ioFail("cannot rename " + quotedPath(temp) + " to " + quotedPath(path), err);
    }
}

// "ckpt-00001000.safetensors" -> 1000; -1 for any other name.
std::int64_t stepOf(const std::string& name)
{
    static const std::string prefix = "ckpt-", suffix = ".safetensors";
    if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
        return -1;
    const std::string digits =
        name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (digits.empty() || digits.size() > 18 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return -1;
    return std::stoll(digits);
}

// IoError unless `file` is absent or a plain file (also through a link): a FIFO would block its
// reader or writer for good, a device never end.
void requirePlainFile(const fs::path& file)
{
    std::error_code ec;
    const fs::file_status st = fs::status(file, ec);
    if (ec || !fs::exists(st) || fs::is_regular_file(st)) return;
    const char* kind = fs::is_directory(st)                                 ? "a folder"
                       : fs::is_fifo(st)                                    ? "a FIFO"
                       : fs::is_socket(st)                                  ? "a socket"
                       : fs::is_character_file(st) || fs::is_block_file(st) ? "a device"
                                                                            : "not a file";
    throw IoError(
        quotedPath(file) + " is " + kind +
        ", not a plain file: Towers reads and writes a run folder's configuration and logs "
        "as plain files");
}

// Drops the records beyond `step` (and a partial last line); every other line stays, one this
// build cannot read too (a log is the user's).
void keepLinesUpTo(const fs::path& file, std::int64_t step)
{
    requirePlainFile(file);
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
            requireJsonDepth(line);
            const auto j = nlohmann::json::parse(line);
            if (j.is_object() && j.contains("step") && j["step"].is_number_integer() &&
                j["step"].get<std::int64_t>() > step)
                continue;
        } catch (const nlohmann::json::exception&) {
            // not a record: kept as it is
        }
        kept += line;
        kept += '\n';
    }
    if (kept != text) writeAtomically(file, kept);
}

} // namespace

std::vector<EvaluationMark> latestByStep(const std::vector<EvaluationMark>& records)
{
    std::map<std::int64_t, EvaluationMark> byStep;
    for (const EvaluationMark& e : records) byStep[e.step] = e;
    std::vector<EvaluationMark> out;
    for (const auto& entry : byStep) out.push_back(entry.second);
    return out;
}

std::vector<EvaluationMark> readEvaluations(const fs::path& evalFile) noexcept
{
    std::vector<EvaluationMark> out;
    try {
        requirePlainFile(evalFile); // else none
        std::ifstream in(evalFile, std::ios::binary);
        std::string line;
        while (in && std::getline(in, line)) {
            if (in.eof()) break; // no newline after it: a partial last line
            try {
                requireJsonDepth(line);
                const auto j = nlohmann::json::parse(line);
                if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer() ||
                    !j.contains("precisionAt1") || !j["precisionAt1"].is_number())
                    continue;
                EvaluationMark e{j["step"].get<std::int64_t>(), j["precisionAt1"].get<double>()};
                if (const auto at5 = j.find("precisionAt5"); at5 != j.end() && at5->is_number())
                    e.precisionAt5 = at5->get<double>();
                out.push_back(e);
            } catch (const nlohmann::json::exception&) {
                continue; // a damaged line
            }
        }
    } catch (...) {
        // what was read so far
    }
    try {
        return latestByStep(out);
    } catch (...) { // out of memory
        return {};
    }
}

std::optional<EvaluationMark> bestEvaluation(const std::vector<EvaluationMark>& evaluations)
{
    std::optional<EvaluationMark> best;
    for (const auto& e : evaluations)
        if (!best || e.precisionAt1 > best->precisionAt1 ||
            (e.precisionAt1 == best->precisionAt1 && e.step < best->step))
            best = e;
    return best;
}

void PatienceCount::add(double precisionAt1, double minDelta)
{
    if (!best || precisionAt1 > *best + minDelta) {
        best = precisionAt1;
        since = 0;
    } else {
        ++since; // no better (an equal one neither)
    }
}

PatienceCount patienceCount(const std::vector<EvaluationMark>& evaluations, double minDelta)
{
    PatienceCount count;
    for (const auto& e : evaluations) count.add(e.precisionAt1, minDelta);
    return count;
}

int evaluationsSinceBest(const std::vector<EvaluationMark>& evaluations, double minDelta)
{
    return patienceCount(evaluations, minDelta).since;
}

std::optional<BestCheckpoint> bestCheckpoint(const std::vector<CheckpointFile>& checkpoints,
                                             const std::vector<EvaluationMark>& evaluations)
{
    std::vector<EvaluationMark> evaluated;
    for (const auto& e : evaluations)
        if (std::any_of(checkpoints.begin(), checkpoints.end(),
                        [&](const CheckpointFile& c) { return c.step == e.step; }))
            evaluated.push_back(e);
    const auto best = bestEvaluation(evaluated);
    if (!best) return std::nullopt;
    for (const auto& c : checkpoints)
        if (c.step == best->step) return BestCheckpoint{c, best->precisionAt1};
    return std::nullopt;
}

fs::path createNewFolder(const fs::path& proposed)
{
    std::error_code ec;
    if (proposed.has_parent_path()) fs::create_directories(proposed.parent_path(), ec);
    if (ec)
        throw IoError("cannot create the folder " + quotedPath(proposed.parent_path()) + ": " +
                      ec.message());
    for (int n = 1; n < 100000; ++n) {
        const fs::path p =
            n == 1 ? proposed : fs::path(proposed.string() + "-" + std::to_string(n));
        if (::mkdir(p.c_str(), 0777) == 0) return p;
        if (errno != EEXIST) ioFail("cannot create the folder " + quotedPath(p), errno);
    }
    throw IoError("cannot create a new folder named " + quotedPath(proposed) + " or " +
                  quotedPath(proposed) + "-N");
}

RunDirectory::RunDirectory(fs::path root) : m_root(std::move(root))
{
    std::error_code ec;
    fs::create_directories(checkpointDir(), ec);
    if (ec)
        throw IoError("cannot create the run folder " + quotedPath(checkpointDir()) + ": " +
                      ec.message());
}

fs::path RunDirectory::checkpointPath(std::int64_t step) const
{
    if (step < 0) throw InvalidArgument("checkpoint step must be >= 0");
    char buf[64];
    std::snprintf(buf, sizeof buf, "ckpt-%08lld.safetensors", static_cast<long long>(step));
    return checkpointDir() / buf;
}

void RunDirectory::writeConfig(const std::string& json) const
{
    writeAtomically(configPath(), json + "\n");
}

void RunDirectory::writeFailure(std::int64_t step, const std::string& error) const
{
    writeAtomically(failurePath(), nlohmann::json{{"step", step}, {"error", error}}.dump(
                                       2, ' ', false, nlohmann::json::error_handler_t::replace) +
                                       "\n");
}

void RunDirectory::clearFailure() const
{
    std::error_code ec;
    fs::remove(failurePath(), ec);
}

std::optional<std::string> RunDirectory::readConfig() const
{
    requirePlainFile(configPath());
    std::ifstream in(configPath(), std::ios::binary);
    if (!in) return std::nullopt;
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

void RunDirectory::appendLine(const fs::path& file, const std::string& line) const
{
    if (line.find('\n') != std::string::npos)
        throw InvalidArgument("a JSON line must not contain a newline");
    requirePlainFile(file);
    // O_NONBLOCK: a FIFO put there since would block the open until it had a reader.
    const int fd =
        ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0666);
    if (fd < 0) ioFail("cannot open " + quotedPath(file), errno);
    if (struct stat st{}; ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        requirePlainFile(file);
        throw IoError(quotedPath(file) + " is not a plain file");
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK); // a plain file: the writes block
    try {
        writeAll(fd, line + "\n", file); // one write: a line is never interleaved
    } catch (...) {
        ::close(fd);
        throw;
    }
    ::close(fd);
}

void RunDirectory::appendMetrics(const std::string& jsonLine) const
{
    appendLine(metricsPath(), jsonLine);
}
void RunDirectory::appendEval(const std::string& jsonLine) const
{
    appendLine(evalPath(), jsonLine);
}

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
    if (ec) throw IoError("cannot list " + quotedPath(checkpointDir()) + ": " + ec.message());
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
    return out;
}

std::vector<std::string> RunDirectory::runContents() const
{
    std::vector<std::string> out;
    std::error_code ec;
    for (const fs::path& p : {configPath(), metricsPath(), evalPath()})
        if (fs::exists(p, ec)) out.push_back(p.filename().string());
    for (fs::directory_iterator it(m_root, ec), end; !ec && it != end; it.increment(ec))
        if (it->path().filename().string().rfind("events.out.tfevents.", 0) == 0)
            out.push_back(it->path().filename().string());
    const auto all = checkpoints();
    if (!all.empty())
        out.push_back(all.size() == 1 ? "1 checkpoint at step " + std::to_string(all.front().step)
                                      : std::to_string(all.size()) + " checkpoints, steps " +
                                            std::to_string(all.front().step) + " to " +
                                            std::to_string(all.back().step));
    return out;
}

namespace {

// A new folder set-aside/<yyyyMMdd-HHmmss>[-n] under `root`.
fs::path newSetAsideFolder(const fs::path& root)
{
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    ::localtime_r(&t, &tm);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    std::error_code ec;
    fs::create_directories(root / "set-aside", ec);
    if (ec) throw IoError("cannot create " + quotedPath(root / "set-aside") + ": " + ec.message());
    for (int n = 1; n < 10000; ++n) {
        const fs::path p =
            root / "set-aside" /
            (n == 1 ? std::string(stamp) : std::string(stamp) + "-" + std::to_string(n));
        if (::mkdir(p.c_str(), 0777) == 0) return p;
        if (errno != EEXIST) ioFail("cannot create " + quotedPath(p), errno);
    }
    throw IoError("cannot create a new folder under " + quotedPath(root / "set-aside"));
}

void moveInto(const fs::path& from, const fs::path& folder)
{
    const fs::path to = folder / from.filename();
    if (::rename(from.c_str(), to.c_str()) != 0)
        ioFail("cannot move " + quotedPath(from) + " to " + quotedPath(to), errno);
}

} // namespace

fs::path RunDirectory::setAside() const
{
    const fs::path folder = newSetAsideFolder(m_root);
    std::error_code ec;
    for (const fs::path& p :
         {configPath(), metricsPath(), evalPath(), failurePath(), checkpointDir()})
        if (fs::exists(p, ec)) moveInto(p, folder);
    std::vector<fs::path> events;
    for (fs::directory_iterator it(m_root, ec), end; !ec && it != end; it.increment(ec))
        if (it->path().filename().string().rfind("events.out.tfevents.", 0) == 0)
            events.push_back(it->path());
    for (const auto& e : events) moveInto(e, folder);
    fs::create_directories(checkpointDir(), ec);
    if (ec) throw IoError("cannot create " + quotedPath(checkpointDir()) + ": " + ec.message());
    return folder;
}

fs::path RunDirectory::setAsideCheckpoints(const std::vector<fs::path>& files) const
{
    const fs::path folder = newSetAsideFolder(m_root) / "checkpoints";
    std::error_code ec;
    fs::create_directories(folder, ec);
    if (ec) throw IoError("cannot create " + quotedPath(folder) + ": " + ec.message());
    for (const auto& f : files) moveInto(f, folder);
    return folder;
}

void RunDirectory::removeCheckpoint(const fs::path& file) const
{
    std::error_code ec;
    fs::remove(file, ec);
    if (ec)
        throw IoError("cannot delete the old checkpoint " + quotedPath(file) + ": " + ec.message());
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
                                                                 std::vector<std::string>* skipped,
                                                                 const std::string& runId,
                                                                 VerifiedCheckpoint* verified) const
{
    auto all = checkpoints();
    for (auto it = all.rbegin(); it != all.rend(); ++it) {
        try {
            const CheckpointInfo info = verifyCheckpoint(it->path, model, verified);
            if (const std::string theirs = checkpointConfigField(info, "runId", "");
                !runId.empty() && !theirs.empty() && theirs != runId) {
                if (skipped)
                    skipped->push_back(quotedPath(it->path) +
                                       " is a checkpoint of another run (run id " + theirs +
                                       "; this run's is " + runId + ")");
                continue;
            }
            return *it;
        } catch (const Error& e) {
            if (skipped) skipped->push_back(e.what());
        }
    }
    return std::nullopt;
}

} // namespace towers::engine
