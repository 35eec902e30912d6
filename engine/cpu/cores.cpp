#include "engine/cpu/cores.h"

#include "engine/cpu/cgroups.h"

#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace towers::engine::cpu {

namespace {

std::optional<double> number(std::string_view text)
{
    text = trimmed(text);
    double v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v))
        return std::nullopt;
    return v;
}

std::vector<int> parseCpuList(std::string_view list)
{
    std::vector<int> cpus;
    std::size_t at = 0;
    while (at < list.size()) {
        const std::size_t comma = std::min(list.find(',', at), list.size());
        const std::string_view item = list.substr(at, comma - at);
        int v = 0;
        if (std::from_chars(item.data(), item.data() + item.size(), v).ec == std::errc())
            cpus.push_back(v);
        at = comma + 1;
    }
    std::sort(cpus.begin(), cpus.end());
    return cpus;
}

} // namespace

std::vector<int> affinityCpus()
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return {};
    std::vector<int> cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) cpus.push_back(c);
    return cpus;
}

std::optional<double> cpuMaxQuota(std::string_view cpuMax)
{
    const std::size_t space = cpuMax.find(' ');
    if (space == std::string_view::npos) return std::nullopt;
    const auto quota = number(cpuMax.substr(0, space)); // "max" (no limit) does not parse
    const auto period = number(cpuMax.substr(space + 1));
    if (!quota || !period || *quota <= 0 || *period <= 0) return std::nullopt;
    return *quota / *period;
}

std::optional<double> cfsQuota(std::string_view quotaUs, std::string_view periodUs)
{
    const auto quota = number(quotaUs); // -1: no limit
    const auto period = number(periodUs);
    if (!quota || !period || *quota <= 0 || *period <= 0) return std::nullopt;
    return *quota / *period;
}

std::optional<double> cgroupCpuQuota(const std::string& procSelfCgroup,
                                     const std::string& cgroupRoot)
{
    namespace fs = std::filesystem;
    return tightestInCgroups<double>(procSelfCgroup, cgroupRoot, "cpu", {"cpu,cpuacct", "cpu"},
                                     [](const fs::path& dir) {
                                         std::error_code ec;
                                         if (fs::exists(dir / "cpu.max", ec))
                                             return cpuMaxQuota(fileText(dir / "cpu.max"));
                                         return cfsQuota(fileText(dir / "cpu.cfs_quota_us"),
                                                         fileText(dir / "cpu.cfs_period_us"));
                                     });
}

int coresUnderQuota(int affinityCount, std::optional<double> quota)
{
    int cores = std::max(1, affinityCount);
    if (quota && *quota > 0) cores = std::min(cores, int(std::ceil(*quota - 1e-9)));
    return std::max(1, cores);
}

std::int64_t levelTwoCacheBytes()
{
    const long bytes = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return bytes > 0 ? std::int64_t{bytes} : std::int64_t{256} << 10;
}

std::int64_t levelThreeCacheBytes()
{
    const std::filesystem::path caches("/sys/devices/system/cpu/cpu0/cache");
    for (int i = 0; i < 16; ++i) {
        const std::filesystem::path index = caches / ("index" + std::to_string(i));
        std::ifstream levelFile(index / "level"), sizeFile(index / "size");
        int level = 0;
        std::string size;
        if (!(levelFile >> level) || level != 3 || !(sizeFile >> size)) continue;
        std::int64_t value = 0;
        const auto [end, error] = std::from_chars(size.data(), size.data() + size.size(), value);
        if (error != std::errc() || value <= 0) continue;
        const std::string_view unit(end, static_cast<std::size_t>(size.data() + size.size() - end));
        if (unit == "K") return value << 10;
        if (unit == "M") return value << 20;
        if (unit.empty()) return value;
    }
    const long bytes = sysconf(_SC_LEVEL3_CACHE_SIZE);
    return bytes > 0 ? std::int64_t{bytes} : 0;
}

std::string threadsBeyondCores(long threads, const std::string& breakdown,
                               const std::string& advice)
{
    const int cores = usableCores();
    if (threads <= cores) return {};
    return std::to_string(threads) + " compute threads (" + breakdown + ") on " +
           std::to_string(cores) +
           " cores: each step waits for threads the cores cannot run, and runs many times "
           "slower; " +
           advice;
}

int usableCores()
{
    // OpenMP's count of the process's processors: the calling thread's mask, except where
    // OMP_PROC_BIND or OMP_PLACES bind threads, whose runtime pins the main thread to one place
    // when it loads; its count is then the mask the process started with.
    const int processors = omp_get_num_procs();
    const int affinity =
        processors > 0 ? processors : int(std::max(1u, std::thread::hardware_concurrency()));
    return coresUnderQuota(affinity, cgroupCpuQuota(fileText("/proc/self/cgroup")));
}

std::string coreSetDescription(const std::string& hostName)
{
    std::string text = hostName + "|";
    const std::vector<int> cpus = affinityCpus();
    // A mask narrower than the process's (the main thread pinned by OpenMP's binding) says
    // nothing of the process's cores: none, which overlaps every set.
    if (int(cpus.size()) != omp_get_num_procs()) return text;
    for (std::size_t i = 0; i < cpus.size(); ++i) {
        if (i) text += ',';
        text += std::to_string(cpus[i]);
    }
    return text;
}

int processesSharingCores(const std::string& mine, const std::vector<std::string>& everyones)
{
    const auto split = [](const std::string& d) {
        const std::size_t bar = d.rfind('|');
        return bar == std::string::npos
                   ? std::pair{d, std::vector<int>{}}
                   : std::pair{d.substr(0, bar), parseCpuList(std::string_view(d).substr(bar + 1))};
    };
    const auto [host, cpus] = split(mine);
    int sharing = 0;
    for (const std::string& other : everyones) {
        const auto [otherHost, otherCpus] = split(other);
        if (otherHost != host) continue;
        std::vector<int> common;
        std::set_intersection(cpus.begin(), cpus.end(), otherCpus.begin(), otherCpus.end(),
                              std::back_inserter(common));
        if (cpus.empty() || otherCpus.empty() || !common.empty()) ++sharing;
    }
    return std::max(1, sharing);
}

} // namespace towers::engine::cpu
