#pragma once
// The cores this process may compute on: its affinity mask (taskset, numactl, a batch
// scheduler's cpuset, mpirun's binding), bounded by a CPU quota of its control group (a
// container's --cpus, systemd's CPUQuota). std::thread::hardware_concurrency() counts the
// machine's cores, which is what a process pinned to a few of them or held to a quota must not
// share out among its threads.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace towers::engine::cpu {

// The cores this process may keep busy at once: at least 1. The calling thread's mask (OpenMP's
// omp_get_num_procs: the mask the process started with where OMP_PROC_BIND or OMP_PLACES pinned
// the main thread).
int usableCores();

// Where `threads` compute threads are more than usableCores(): "8 compute threads (BREAKDOWN) on 2
// cores: each step waits for threads the cores cannot run, and runs many times slower; ADVICE"
// (OpenMP's teams meet at every op); empty where the cores can run them all.
std::string threadsBeyondCores(long threads, const std::string& breakdown,
                               const std::string& advice);

// One core's level-2 cache in bytes, as the C library reads it from the CPU (sysconf); 256 KiB,
// the smallest of current x86 cores, where it does not say.
std::int64_t levelTwoCacheBytes();
// The last-level (level-3) cache in bytes as the kernel's sysfs describes it for CPU 0 (what lscpu
// shows: in a virtual machine the part the guest is told of, where the C library's sysconf can
// give a whole socket's); else sysconf's; 0 where neither says.
std::int64_t levelThreeCacheBytes();

// The CPUs of this process's affinity mask, ascending ({} where the system does not say).
std::vector<int> affinityCpus();

// The quota of a control group's CPU limit in cores (quota over period) from the text of a
// cgroup v2 cpu.max file ("200000 100000" -> 2.0; "max 100000" -> none), or from cgroup v1's
// cpu.cfs_quota_us and cpu.cfs_period_us texts ("-1" -> none). Unparsable text -> none.
std::optional<double> cpuMaxQuota(std::string_view cpuMax);
std::optional<double> cfsQuota(std::string_view quotaUs, std::string_view periodUs);

// The tightest CPU quota on this process's control group and its ancestors, read from the
// process's cgroup list (the text of /proc/self/cgroup) and the cgroup file systems mounted at
// `cgroupRoot` (/sys/fs/cgroup: v2 there, or v1's cpu controller in cpu,cpuacct/ or cpu/).
std::optional<double> cgroupCpuQuota(const std::string& procSelfCgroup,
                                     const std::string& cgroupRoot = "/sys/fs/cgroup");

// Cores under a quota: the affinity's count, or fewer when the quota is lower (rounded up: a
// quota of 1.5 cores keeps two threads busy part of the time). At least 1.
int coresUnderQuota(int affinityCount, std::optional<double> quota);

// How many processes of a run share this process's cores, from each process's
// coreSetDescription() ("host|0,1,2,3"): those on the same host whose CPU sets overlap this
// one's, this one included (a launcher that binds each process to its own cores gives 1; one
// that binds none gives every process on the host). An unreadable set overlaps every set.
std::string coreSetDescription(const std::string& hostName);
int processesSharingCores(const std::string& mine, const std::vector<std::string>& everyones);

} // namespace towers::engine::cpu
