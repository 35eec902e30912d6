#pragma once
// The memory this process may still take on its host: what the system has free for it (its
// MemAvailable and free swap), bounded by its control group's memory limit (a container's
// --memory, a batch job's allocation, systemd's MemoryMax) and its address-space limit
// (ulimit -v). Training checks a run's needs against it before it takes the memory, where
// taking too much ends in the system killing the process without a word.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace towers::engine::cpu {

// The bytes the system could give from the text of /proc/meminfo: MemAvailable plus SwapFree
// (none where MemAvailable is missing or the text does not parse).
std::optional<std::int64_t> memInfoAvailable(std::string_view meminfo);

// The room left under a memory limit: the limit's text (cgroup v2's memory.max, "max" for none;
// v1's memory.limit_in_bytes, a value near 2^63 for none) less the usage's text (memory.current;
// memory.usage_in_bytes), at least 0, where the usage's inactive file cache (the "inactive_file"
// line of v2's memory.stat, "total_inactive_file" of v1's: `stat`, the file's text) does not
// count, as the kernel takes it back before it refuses (docker's and cAdvisor's working set).
// None when there is no limit or the limit or usage does not parse.
std::optional<std::int64_t> memoryRoom(std::string_view limit, std::string_view usage,
                                       std::string_view stat = {});

// The tightest room under the memory limits of this process's control group and its ancestors,
// read from its cgroup list (the text of /proc/self/cgroup) and the cgroup file systems mounted
// at `cgroupRoot` (v2 there, or v1's memory controller in memory/).
std::optional<std::int64_t> cgroupMemoryRoom(const std::string& procSelfCgroup,
                                             const std::string& cgroupRoot = "/sys/fs/cgroup");

struct HostMemory
{
    std::int64_t bytes = 0; // what may still be taken
    std::string limitedBy;  // what bounds it: "free memory", "its control group's memory limit",
                            // "its address-space limit, ulimit -v"
};

// What this process may still take now, and what bounds it; none where the system does not say.
std::optional<HostMemory> availableHostMemory();
// The same in two parts: what the machine (free memory) and the control group leave, which the
// processes on the machine share, and what this process's own address-space limit leaves.
std::optional<HostMemory> sharedHostMemory();
std::optional<HostMemory> addressSpaceRoom();

// Under an address-space limit (ulimit -v; a batch scheduler's h_vmem), glibc's malloc sets 64
// MiB of address space aside for every arena it makes for a thread (up to 8 per core): hundreds
// of MiB of the limit that hold no memory (a run of 2 CPU towers mapped 600 MB for 225 MB
// resident). Called at the start of main, before any thread: holds malloc to kMallocArenas arenas
// there (mapped 390 MB, at the same speed), unless MALLOC_ARENA_MAX says how many. Nothing
// without a limit, or with another C library.
void fitMallocToAddressLimit();
constexpr int kMallocArenas = 2;

// The address space that `threads` more threads set aside beyond what they use, which an
// address-space limit counts: their stacks (the stack limit's size, glibc's default for a
// thread's stack; 8 MiB without one) and the arenas malloc may still make for them
// (fitMallocToAddressLimit's, or MALLOC_ARENA_MAX's).
std::int64_t threadsAddressSpace(int threads);

// Bytes as people read them: "812 MiB", "3.4 GiB".
std::string byteText(std::int64_t bytes);

} // namespace towers::engine::cpu
