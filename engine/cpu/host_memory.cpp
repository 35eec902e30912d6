#include "engine/cpu/host_memory.h"

#include <sys/resource.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "engine/cpu/cgroups.h"

namespace towers::engine::cpu {

namespace {

std::optional<std::int64_t> integer(std::string_view text)
{
    text = trimmed(text);
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || v < 0) return std::nullopt;
    return v;
}

// What follows `name` and `separator` on the first line of `text` that starts with them
// (/proc/meminfo's "MemAvailable:   1234 kB", memory.stat's "inactive_file 1234").
std::optional<std::string_view> lineValue(std::string_view text, std::string_view name,
                                          char separator)
{
    std::size_t at = 0;
    while (at < text.size()) {
        const std::size_t end = std::min(text.find('\n', at), text.size());
        const std::string_view line = text.substr(at, end - at);
        at = end + 1;
        if (line.size() > name.size() && line.starts_with(name) && line[name.size()] == separator)
            return line.substr(name.size() + 1);
    }
    return std::nullopt;
}

// A "Name:   1234 kB" line's bytes.
std::optional<std::int64_t> memInfoField(std::string_view meminfo, std::string_view name)
{
    std::optional<std::string_view> value = lineValue(meminfo, name, ':');
    if (!value) return std::nullopt;
    std::int64_t factor = 1;
    if (value->ends_with(" kB")) {
        value->remove_suffix(3);
        factor = 1024;
    }
    const auto v = integer(*value);
    if (!v || *v > std::numeric_limits<std::int64_t>::max() / factor) return std::nullopt;
    return *v * factor;
}

} // namespace

std::optional<std::int64_t> memInfoAvailable(std::string_view meminfo)
{
    const auto available = memInfoField(meminfo, "MemAvailable");
    if (!available) return std::nullopt;
    return *available + memInfoField(meminfo, "SwapFree").value_or(0);
}

std::optional<std::int64_t> memoryRoom(std::string_view limit, std::string_view usage,
                                       std::string_view stat)
{
    const auto l = integer(limit); // "max": no limit
    const auto u = integer(usage);
    // cgroup v1 writes "no limit" as the largest page multiple below 2^63.
    if (!l || !u || *l >= (std::int64_t(1) << 62)) return std::nullopt;
    // "total_inactive_file 1234" (v1: the group and its children), else "inactive_file 1234"
    // (v2; v1's own group alone).
    std::optional<std::int64_t> cache;
    for (const std::string_view name : {"total_inactive_file", "inactive_file"})
        if (!cache)
            if (const auto value = lineValue(stat, name, ' ')) cache = integer(*value);
    const std::int64_t used = *u - std::min(cache.value_or(0), *u);
    return std::max<std::int64_t>(0, *l - used);
}

std::optional<std::int64_t> cgroupMemoryRoom(const std::string& procSelfCgroup,
                                             const std::string& cgroupRoot)
{
    namespace fs = std::filesystem;
    return tightestInCgroups<std::int64_t>(
        procSelfCgroup, cgroupRoot, "memory", {"memory"}, [](const fs::path& dir) {
            std::error_code ec;
            if (fs::exists(dir / "memory.max", ec))
                return memoryRoom(fileText(dir / "memory.max"), fileText(dir / "memory.current"),
                                  fileText(dir / "memory.stat"));
            return memoryRoom(fileText(dir / "memory.limit_in_bytes"),
                              fileText(dir / "memory.usage_in_bytes"),
                              fileText(dir / "memory.stat"));
        });
}

namespace {

void takeTighter(std::optional<HostMemory>& room, std::optional<HostMemory> other)
{
    if (other && (!room || other->bytes < room->bytes)) room = std::move(other);
}

std::optional<HostMemory> bounded(std::optional<std::int64_t> bytes, const char* what)
{
    if (!bytes) return std::nullopt;
    return HostMemory{*bytes, what};
}

} // namespace

std::optional<HostMemory> sharedHostMemory()
{
    std::optional<HostMemory> room;
    takeTighter(room, bounded(memInfoAvailable(fileText("/proc/meminfo")), "free memory"));
    takeTighter(room, bounded(cgroupMemoryRoom(fileText("/proc/self/cgroup")),
                              "its control group's memory limit"));
    return room;
}

std::optional<HostMemory> addressSpaceRoom()
{
    // ulimit -v: the address space left (what is mapped already counts, used or not).
    rlimit limit{};
    if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return std::nullopt;
    std::ifstream statm("/proc/self/statm");
    std::int64_t pages = 0;
    if (!(statm >> pages)) return std::nullopt;
    const std::int64_t mapped = pages * std::int64_t(sysconf(_SC_PAGESIZE));
    return HostMemory{std::max<std::int64_t>(0, std::int64_t(limit.rlim_cur) - mapped),
                      "its address-space limit, ulimit -v"};
}

namespace {

// MALLOC_ARENA_MAX where it says a number of arenas (glibc reads it so), else none.
std::optional<int> arenasGiven()
{
    const char* given = std::getenv("MALLOC_ARENA_MAX");
    if (!given || !*given) return std::nullopt;
    int n = 0;
    const auto [end, ec] = std::from_chars(given, given + std::strlen(given), n);
    if (ec != std::errc() || *end != '\0' || n < 1) return std::nullopt;
    return n;
}

} // namespace

void fitMallocToAddressLimit()
{
#ifdef __GLIBC__
    rlimit limit{};
    if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return;
    if (arenasGiven()) return; // the user's
    mallopt(M_ARENA_MAX, kMallocArenas);
#endif
}

std::int64_t threadsAddressSpace(int threads)
{
    constexpr std::int64_t kMiB = std::int64_t(1) << 20;
    rlimit stack{};
    const std::int64_t perThread = getrlimit(RLIMIT_STACK, &stack) == 0 &&
                                           stack.rlim_cur != RLIM_INFINITY &&
                                           stack.rlim_cur >= 64 * 1024
                                       ? std::int64_t(stack.rlim_cur)
                                       : 8 * kMiB;
    // Each arena besides the main one (which grows the heap) reserves 64 MiB on a 64-bit system:
    // fitMallocToAddressLimit's, or as many as MALLOC_ARENA_MAX says, at most one a thread.
    const int arenas = arenasGiven().value_or(kMallocArenas);
    const int more = std::min(arenas - 1, std::max(threads, 0));
    return std::int64_t(std::max(threads, 0)) * perThread + std::int64_t(more) * 64 * kMiB;
}

std::optional<HostMemory> availableHostMemory()
{
    std::optional<HostMemory> room = sharedHostMemory();
    takeTighter(room, addressSpaceRoom());
    return room;
}

std::string byteText(std::int64_t bytes)
{
    const double mib = double(bytes) / double(1 << 20);
    char text[32];
    if (mib < 1024)
        std::snprintf(text, sizeof text, "%.0f MiB", mib);
    else
        std::snprintf(text, sizeof text, "%.1f GiB", mib / 1024);
    return text;
}

} // namespace towers::engine::cpu
