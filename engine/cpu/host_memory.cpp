#include "engine/cpu/host_memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include "engine/cpu/cgroups.h"

namespace towers::engine::cpu {

namespace {

std::optional<std::int64_t> integer(std::string_view text)
{
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
    while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || v < 0) return std::nullopt;
    return v;
}

// A "Name:   1234 kB" line's bytes.
std::optional<std::int64_t> memInfoField(std::string_view meminfo, std::string_view name)
{
    std::size_t at = 0;
    while (at < meminfo.size()) {
        const std::size_t end = std::min(meminfo.find('\n', at), meminfo.size());
        std::string_view line = meminfo.substr(at, end - at);
        at = end + 1;
        if (!line.starts_with(name) || line.size() <= name.size() || line[name.size()] != ':')
            continue;
        line.remove_prefix(name.size() + 1);
        std::int64_t factor = 1;
        if (line.ends_with(" kB")) {
            line.remove_suffix(3);
            factor = 1024;
        }
        const auto v = integer(line);
        if (!v || *v > std::numeric_limits<std::int64_t>::max() / factor) return std::nullopt;
        return *v * factor;
    }
    return std::nullopt;
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
    std::int64_t used = *u;
    // "inactive_file 1234" (v2), "total_inactive_file 1234" (v1, the group and its children).
    for (const std::string_view name : {"total_inactive_file", "inactive_file"}) {
        std::size_t at = 0;
        while (at < stat.size()) {
            const std::size_t end = std::min(stat.find('\n', at), stat.size());
            const std::string_view line = stat.substr(at, end - at);
            at = end + 1;
            if (line.size() > name.size() && line.starts_with(name) && line[name.size()] == ' ')
                if (const auto cache = integer(line.substr(name.size() + 1)))
                    used = std::max<std::int64_t>(0, used - std::min(*cache, used));
        }
        if (used != *u) break;
    }
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

void takeTighter(std::optional<HostMemory>& room, std::optional<std::int64_t> bytes,
                 const char* what)
{
    if (bytes && (!room || *bytes < room->bytes)) room = HostMemory{*bytes, what};
}

} // namespace

std::optional<HostMemory> sharedHostMemory()
{
    std::optional<HostMemory> room;
    takeTighter(room, memInfoAvailable(fileText("/proc/meminfo")), "free memory");
    takeTighter(room, cgroupMemoryRoom(fileText("/proc/self/cgroup")),
                "its control group's memory limit");
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

std::optional<HostMemory> availableHostMemory()
{
    std::optional<HostMemory> room = sharedHostMemory();
    if (const auto own = addressSpaceRoom())
        takeTighter(room, own->bytes, "its address-space limit, ulimit -v");
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
