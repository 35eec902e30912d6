#include "engine/io/output_file.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/errors.h"

namespace towers::engine {

namespace {

namespace fs = std::filesystem;

std::string osError(int err)
{
    return std::strerror(err);
}

// A temporary file in `target`'s folder, removed unless released.
class TempFile
{
public:
    explicit TempFile(const fs::path& target) : m_target(target)
    {
        const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
        std::string hidden = target.filename().string();
        hidden.insert(hidden.begin(), '.');
        std::string pattern = (dir / (hidden + ".tmp-XXXXXX")).string();
        m_fd = ::mkostemp(pattern.data(), O_CLOEXEC);
        if (m_fd < 0)
            throw IoError("cannot write " + quotedPath(target) +
                          ": cannot create a temporary file in " + quotedPath(dir) + ": " +
                          osError(errno));
        m_path = pattern;
    }
    ~TempFile()
    {
        if (m_fd >= 0) ::close(m_fd);
        if (!m_path.empty()) ::unlink(m_path.c_str());
    }
    TempFile(const TempFile&) = delete;
    TempFile& operator=(const TempFile&) = delete;

    // The written file's mode: a replaced file's own, else what open(..., 0666) gives a new one
    // (0666 less the umask); it was 0644 whatever the user's umask or the replaced file's.
    void write(const std::string& bytes)
    {
        const char* p = bytes.data();
        std::size_t left = bytes.size();
        while (left > 0) {
            const ssize_t n = ::write(m_fd, p, left);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) fail("cannot write " + quotedPath(m_path), errno);
            p += n;
            left -= std::size_t(n);
        }
        if (::fchmod(m_fd, targetMode()) != 0)
            fail("cannot set the permissions of " + quotedPath(m_path), errno);
        if (::fsync(m_fd) != 0) fail("cannot sync " + quotedPath(m_path), errno);
        if (::close(m_fd) != 0) {
            m_fd = -1;
            fail("cannot close " + quotedPath(m_path), errno);
        }
        m_fd = -1;
    }
    // Moves the file to the target; refuses to replace an existing one unless `overwrite`.
    void commit(bool overwrite)
    {
        if (overwrite) {
            if (::rename(m_path.c_str(), m_target.c_str()) != 0)
                fail("cannot rename " + quotedPath(m_path), errno);
        } else if (::renameat2(AT_FDCWD, m_path.c_str(), AT_FDCWD, m_target.c_str(),
                               RENAME_NOREPLACE) != 0) {
            const int err = errno;
            if (err == EEXIST) throw IoError(outputExistsMessage(m_target));
            if (err != EINVAL && err != ENOSYS) fail("cannot rename " + quotedPath(m_path), err);
            // A file system without RENAME_NOREPLACE: link() refuses an existing target too.
            if (::link(m_path.c_str(), m_target.c_str()) != 0) {
                if (errno == EEXIST) throw IoError(outputExistsMessage(m_target));
                fail("cannot link " + quotedPath(m_path), errno);
            }
            ::unlink(m_path.c_str());
        }
        m_path.clear();
        // Make the rename durable; some file systems cannot sync a directory (EINVAL).
        const fs::path dir = m_target.has_parent_path() ? m_target.parent_path() : fs::path(".");
        const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0) {
            const int rc = ::fsync(fd), err = errno;
            ::close(fd);
            if (rc != 0 && err != EINVAL)
                throw IoError("cannot sync the folder " + quotedPath(dir) + ": " + osError(err));
        }
    }

private:
    mode_t targetMode() const
    {
        struct stat st
        {
        };
        if (::lstat(m_target.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return st.st_mode & 07777;
        // The umask can only be read by setting it (racy with other threads): /proc says it.
        std::ifstream status("/proc/self/status");
        for (std::string line; std::getline(status, line);)
            if (line.rfind("Umask:", 0) == 0)
                return 0666 & ~mode_t(std::stoul(line.substr(6), nullptr, 8));
        return 0644;
    }
    [[noreturn]] void fail(const std::string& what, int err)
    {
        throw IoError("cannot write " + quotedPath(m_target) + ": " + what + ": " + osError(err));
    }
    fs::path m_target;
    std::string m_path;
    int m_fd = -1;
};

} // namespace

std::string neverReplaced(const fs::path& target)
{
    std::error_code ec;
    const fs::file_status st = fs::symlink_status(target, ec);
    if (ec || !fs::is_regular_file(st)) return {}; // a link is replaced, not what it points at
    // A checkpoint by its content, whatever its name: safetensors' 8-byte header length, then
    // the header's JSON object, '{' to '}' (or the spaces that pad it), within the file.
    if (std::FILE* f = std::fopen(target.c_str(), "rbe")) {
        unsigned char head[9] = {};
        bool checkpoint = std::fread(head, 1, sizeof head, f) == sizeof head && head[8] == '{';
        std::uint64_t length = 0;
        for (int i = 7; i >= 0; --i) length = (length << 8) | head[i];
        const auto size = fs::file_size(target, ec);
        checkpoint = checkpoint && !ec && length >= 2 && length <= size - 8 &&
                     std::fseek(f, long(8 + length - 1), SEEK_SET) == 0;
        const int last = checkpoint ? std::fgetc(f) : EOF;
        std::fclose(f);
        if (last == '}' || last == ' ')
            return quotedPath(target) +
                   " is a checkpoint (safetensors), which is never replaced: name another file";
    }
    // A run's own records, in a run's folder (one that a training locked or logged into).
    static const char* const kRunFiles[] = {"config.json", "metrics.jsonl", "eval.jsonl",
                                            "failure.json", "towers.lock"};
    const std::string name = target.filename().string();
    const fs::path folder = target.has_parent_path() ? target.parent_path() : fs::path(".");
    const bool runFile = std::any_of(std::begin(kRunFiles), std::end(kRunFiles),
                                     [&](const char* f) { return name == f; }) ||
                         name.rfind("events.out.tfevents.", 0) == 0;
    // A run's folder: locked or logged into by a training, or holding its checkpoints (a
    // project's own checkpoints/ folder of other files is no sign of one).
    const auto hasCheckpoints = [&] {
        for (fs::directory_iterator it(folder / "checkpoints", ec), end; !ec && it != end;
             it.increment(ec)) {
            const std::string f = it->path().filename().string();
            if (f.rfind("ckpt-", 0) == 0 && it->path().extension() == ".safetensors") return true;
        }
        return false;
    };
    if (runFile && (fs::exists(folder / "towers.lock", ec) ||
                    fs::exists(folder / "metrics.jsonl", ec) || hasCheckpoints()))
        return quotedPath(target) + " is the run's own " + name + " (in the run folder " +
               quotedPath(folder) + "), which is never replaced: name another file";
    return {};
}

bool isCheckpointName(const fs::path& path)
{
    std::string ext = path.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(),
                   [](unsigned char c) { return char(std::tolower(c)); });
    return ext == ".safetensors";
}

std::string outputExistsMessage(const fs::path& target)
{
    return quotedPath(target) +
           " already exists; choose another output or pass --force to replace it";
}

void checkOutputFile(const fs::path& target, bool overwrite)
{
    std::error_code ec;
    if (fs::is_directory(target, ec))
        throw IoError(quotedPath(target) + " is a folder, not a file name");
    if (isCheckpointName(target))
        throw IoError(quotedPath(target) +
                      " is a checkpoint's name (.safetensors), which only a training writes: "
                      "name another file");
    if (const std::string why = neverReplaced(target); !why.empty()) throw IoError(why);
    if (!overwrite && fs::exists(fs::symlink_status(target, ec)))
        throw IoError(outputExistsMessage(target));
}

void writeOutputFile(const fs::path& target, const std::string& bytes, bool overwrite)
{
    checkOutputFile(target, overwrite);
    TempFile file(target);
    file.write(bytes);
    file.commit(overwrite);
}

} // namespace towers::engine
