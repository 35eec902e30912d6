#pragma once
// One owner per run folder: an advisory lock (flock) on <run>/towers.lock, taken before anything
// of the run is written and held for as long as the RunLock lives. The kernel releases it when the
// process ends however it ends (a crash or kill -9 leaves no stale lock), and flock works across
// machines on file systems that support it (NFS v4, CephFS, Lustre with -o flock). The file holds
// who owns the run (PID, host, since when, what program) so that a refused second trainer can say
// who holds it. The file itself is never deleted: deleting a lock file races with its next owner.
#include <filesystem>
#include <optional>
#include <string>

#include "engine/errors.h"

namespace towers::engine {

// A second trainer asked for a run folder that another process holds.
class TOWERS_VISIBLE RunFolderBusy : public IoError
{
public:
    using IoError::IoError;
};

class RunLock
{
public:
    static constexpr const char* kFileName = "towers.lock";

    // Creates `root` when missing, then locks it for this process. `program` says who takes it
    // (default: this process's name, e.g. "towers-cli"). Throws RunFolderBusy naming the folder and
    // its holder when another process (or another RunLock of this process) holds it, IoError when
    // the folder or the lock file cannot be made.
    static RunLock acquire(const std::filesystem::path& root, const std::string& program = {});

    // Who holds `root`'s lock ("process 1234 on host h since 2026-11-24 01:02:03 (towers-cli
    // train)"), or nullopt when nobody does (or the folder has no lock file). Takes no lock that
    // outlives the call. Never throws.
    static std::optional<std::string> holder(const std::filesystem::path& root);

    RunLock(RunLock&& other) noexcept;
    RunLock& operator=(RunLock&& other) noexcept;
    RunLock(const RunLock&) = delete;
    RunLock& operator=(const RunLock&) = delete;
    ~RunLock(); // releases the lock

    const std::filesystem::path& root() const { return m_root; }

private:
    RunLock(std::filesystem::path root, int fd) : m_root(std::move(root)), m_fd(fd) {}
    std::filesystem::path m_root;
    int m_fd = -1;
};

} // namespace towers::engine
