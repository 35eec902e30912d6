#include "engine/train/run_lock.h"

#include <chrono>
#include <thread>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "engine/errors.h"

namespace towers::engine {

namespace fs = std::filesystem;

namespace {

std::string hostName()
{
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) != 0) return "an unknown host";
    return buf;
}

// The process's name (/proc/self/comm), e.g. "towers-cli".
std::string processName()
{
    std::ifstream in("/proc/self/comm");
    std::string name;
    std::getline(in, name);
    return name.empty() ? std::string("towers") : name;
}

std::string now()
{
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    ::localtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
    return buf;
}

// The holder's description from the lock file's "key value" lines.
std::string describe(const std::string& text)
{
    auto field = [&](const std::string& key) -> std::string {
        std::size_t at = 0;
        while (at < text.size()) {
            std::size_t end = text.find('\n', at);
            if (end == std::string::npos) end = text.size();
            if (text.compare(at, key.size() + 1, key + " ") == 0)
                return text.substr(at + key.size() + 1, end - at - key.size() - 1);
            at = end + 1;
        }
        return {};
    };
    const std::string pid = field("pid"), host = field("host"), since = field("since"),
                      program = field("program");
    if (pid.empty()) return "another process (it has not yet written who it is)";
    std::string s =
        "process " + pid + " on " + (host.empty() ? std::string("an unknown host") : host);
    if (!since.empty()) s += " since " + since;
    if (!program.empty()) s += " (" + program + ")";
    return s;
}

std::string readAll(int fd)
{
    std::string text;
    char buf[512];
    off_t at = 0;
    for (;;) {
        const ssize_t n = ::pread(fd, buf, sizeof buf, at);
        if (n <= 0) break;
        text.append(buf, std::size_t(n));
        at += n;
        if (text.size() > 4096) break; // not ours: no need to read on
    }
    return text;
}

} // namespace

RunLock RunLock::acquire(const fs::path& root, const std::string& program)
{
    std::error_code ec;
    fs::create_directories(root, ec);
    if (ec) throw IoError("cannot create the run folder " + quotedPath(root) + ": " + ec.message());
    const fs::path file = root / kFileName;
    const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        throw IoError("cannot open the run folder's lock file " + quotedPath(file) + ": " +
                      std::strerror(errno));
    // A reader asking who holds the folder (RunLock::holder: the Runs page, another scan) holds a
    // shared lock for a moment: retries over 0.1 s tell that from a trainer that holds it.
    int rc = 0;
    for (int attempt = 0; attempt < 20; ++attempt) {
        do {
            rc = ::flock(fd, LOCK_EX | LOCK_NB);
        } while (rc != 0 && errno == EINTR);
        if (rc == 0 || errno != EWOULDBLOCK) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (rc != 0) {
        const int err = errno;
        const std::string who = err == EWOULDBLOCK ? describe(readAll(fd)) : std::string();
        ::close(fd);
        if (err == EWOULDBLOCK)
            throw RunFolderBusy(
                "the run folder " + quotedPath(root) + " is in use by " + who +
                ": one training at a time per run folder (wait for it to end or stop it; "
                "a process that dies releases it at once)");
        throw IoError("cannot lock the run folder " + quotedPath(root) + " (" + quotedPath(file) +
                      "): " + std::strerror(err));
    }
    const std::string text = "pid " + std::to_string(::getpid()) + "\nhost " + hostName() +
                             "\nsince " + now() + "\nprogram " +
                             (program.empty() ? processName() : program) + "\n";
    // Who holds it, for the next one to read; a failure here is no reason to refuse the run.
    if (::ftruncate(fd, 0) == 0) {
        [[maybe_unused]] const ssize_t n = ::pwrite(fd, text.data(), text.size(), 0);
    }
    return RunLock(root, fd);
}

std::optional<std::string> RunLock::holder(const fs::path& root)
{
    const fs::path file = root / kFileName;
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return std::nullopt;
    std::optional<std::string> who;
    if (::flock(fd, LOCK_SH | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK) who = describe(readAll(fd));
    } else {
        ::flock(fd, LOCK_UN);
    }
    ::close(fd);
    return who;
}

RunLock::RunLock(RunLock&& other) noexcept : m_root(std::move(other.m_root)), m_fd(other.m_fd)
{
    other.m_fd = -1;
}

RunLock& RunLock::operator=(RunLock&& other) noexcept
{
    if (this != &other) {
        if (m_fd >= 0) ::close(m_fd);
        m_root = std::move(other.m_root);
        m_fd = other.m_fd;
        other.m_fd = -1;
    }
    return *this;
}

RunLock::~RunLock()
{
    if (m_fd >= 0) ::close(m_fd); // closing the last descriptor releases the flock
}

} // namespace towers::engine
