// The cores a process may keep busy (engine/cpu/cores.h): its affinity mask, bounded by its
// control group's CPU quota (cgroup v2's cpu.max and v1's cfs quota, the tightest of the group
// and its ancestors, read from a folder laid out as /sys/fs/cgroup), and how many processes of a
// run share them.
#include <QtTest>

#include <sched.h>

#include <thread>

#include "dataset_files.h"
#include "engine/cpu/cores.h"
#include "engine/cpu/cpu_info.h"
#include "engine/train/train_config.h"

using namespace towers::engine;
using namespace towers::engine::cpu;

namespace {

// Runs `body` on this thread with its affinity held to `cpus`, then puts the mask back.
template <typename Body> void withAffinity(const std::vector<int>& cpus, Body body)
{
    cpu_set_t before;
    CPU_ZERO(&before);
    QCOMPARE(sched_getaffinity(0, sizeof before, &before), 0);
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : cpus) CPU_SET(c, &set);
    QCOMPARE(sched_setaffinity(0, sizeof set, &set), 0);
    body();
    QCOMPARE(sched_setaffinity(0, sizeof before, &before), 0);
}

} // namespace

class TestCores : public QObject
{
    Q_OBJECT

private slots:
    void quotaTexts()
    {
        QCOMPARE(cpuMaxQuota("200000 100000\n"), std::optional<double>(2.0));
        QCOMPARE(cpuMaxQuota("150000 100000"), std::optional<double>(1.5));
        QVERIFY(!cpuMaxQuota("max 100000\n"));
        QVERIFY(!cpuMaxQuota(""));
        QVERIFY(!cpuMaxQuota("garbage"));
        QVERIFY(!cpuMaxQuota("0 100000"));
        QVERIFY(!cpuMaxQuota("100000 0"));
        QCOMPARE(cfsQuota("50000\n", "100000\n"), std::optional<double>(0.5));
        QVERIFY(!cfsQuota("-1\n", "100000\n"));
        QVERIFY(!cfsQuota("", ""));

        QCOMPARE(coresUnderQuota(8, std::nullopt), 8);
        QCOMPARE(coresUnderQuota(8, 2.0), 2);
        QCOMPARE(coresUnderQuota(8, 1.5), 2); // rounded up
        QCOMPARE(coresUnderQuota(8, 0.5), 1);
        QCOMPARE(coresUnderQuota(2, 16.0), 2); // the mask is tighter
        QCOMPARE(coresUnderQuota(0, std::nullopt), 1);
    }

    // cgroup v2: the group's cpu.max and its ancestors'; the tightest holds.
    void cgroupV2TightestAncestor()
    {
        QTemporaryDir root;
        const std::string r = root.path().toStdString();
        towers::test::writeText(r + "/cpu.max", "max 100000\n");
        towers::test::writeText(r + "/machine.slice/cpu.max", "300000 100000\n");
        towers::test::writeText(r + "/machine.slice/job/cpu.max", "max 100000\n");
        QCOMPARE(cgroupCpuQuota("0::/machine.slice/job\n", r), std::optional<double>(3.0));
        towers::test::writeText(r + "/machine.slice/job/cpu.max", "100000 100000\n");
        QCOMPARE(cgroupCpuQuota("0::/machine.slice/job\n", r), std::optional<double>(1.0));
        // A container's own namespace: its group is the root of what it sees.
        QVERIFY(!cgroupCpuQuota("0::/\n", r));
        towers::test::writeText(r + "/cpu.max", "250000 100000\n");
        QCOMPARE(cgroupCpuQuota("0::/\n", r), std::optional<double>(2.5));
        // No limit anywhere, a missing group, an unreadable list: none.
        QTemporaryDir empty;
        QVERIFY(!cgroupCpuQuota("0::/a/b\n", empty.path().toStdString()));
        QVERIFY(!cgroupCpuQuota("", r));
        QVERIFY(!cgroupCpuQuota("nonsense\n", r));
        QVERIFY(!cgroupCpuQuota("0::/../../etc\n", empty.path().toStdString()));
    }

    // cgroup v1: the cpu controller's cfs quota, mounted as cpu,cpuacct/ (or cpu/).
    void cgroupV1()
    {
        QTemporaryDir root;
        const std::string r = root.path().toStdString();
        towers::test::writeText(r + "/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
        towers::test::writeText(r + "/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
        towers::test::writeText(r + "/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "400000\n");
        towers::test::writeText(r + "/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
        const std::string list = "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n"
                                 "1:name=systemd:/docker/abc\n";
        QCOMPARE(cgroupCpuQuota(list, r), std::optional<double>(4.0));
        QVERIFY(!cgroupCpuQuota("12:memory:/docker/abc\n", r));
    }

    // The mask a launcher or taskset gives is what the process shares out; never more cores
    // than the machine has.
    void usableCoresFollowTheAffinityMask()
    {
        if (qEnvironmentVariableIsSet("OMP_PROC_BIND"))
            QSKIP("OpenMP binds threads here: the count is the mask the process started with "
                  "(openMpBindingPinsNotTheCount)");
        const std::vector<int> all = affinityCpus();
        QVERIFY(!all.empty());
        QVERIFY(usableCores() >= 1);
        QVERIFY(usableCores() <= int(all.size()));
        withAffinity({all.front()}, [] {
            QCOMPARE(usableCores(), 1);
            QCOMPARE(cpuInfo().logicalCores, 1);
            // 0 threads per tower shares out what the process may use.
            TrainConfig c;
            c.threadsPerTower = 0;
            c.towers = 1;
            QCOMPARE(c.resolvedThreadsPerTower(), 1);
        });
    }

    // With OMP_PROC_BIND (tst_cores_omp_proc_bind), OpenMP pins the main thread to one place when
    // it loads: the process may still use every core it started with, and its mask says nothing
    // of the cores it shares.
    void openMpBindingPinsNotTheCount()
    {
        if (!qEnvironmentVariableIsSet("OMP_PROC_BIND"))
            QSKIP("for a run with OMP_PROC_BIND set (ctest's tst_cores_omp_proc_bind)");
        const int pinned = int(affinityCpus().size());
        if (pinned >= int(std::thread::hardware_concurrency()))
            QSKIP("the place OpenMP pinned the main thread to holds every CPU here");
        QVERIFY2(usableCores() > pinned, qPrintable(QString::number(usableCores())));
        QCOMPARE(coreSetDescription("h"), std::string("h|"));
    }

    void processesOnTheSameCores()
    {
        // mpirun binding each process to a core of its own: none shares.
        const std::vector<std::string> bound = {"a|0", "a|1", "b|0", "b|1"};
        QCOMPARE(processesSharingCores("a|0", bound), 1);
        QCOMPARE(processesSharingCores("b|1", bound), 1);
        // Unbound: every process of the host shares every core; other hosts count not.
        const std::vector<std::string> unbound = {"a|0,1,2,3", "a|0,1,2,3", "a|0,1,2,3",
                                                  "b|0,1,2,3"};
        QCOMPARE(processesSharingCores("a|0,1,2,3", unbound), 3);
        QCOMPARE(processesSharingCores("b|0,1,2,3", unbound), 1);
        // Overlapping sets share; disjoint ones not.
        const std::vector<std::string> halves = {"a|0,1", "a|1,2", "a|3"};
        QCOMPARE(processesSharingCores("a|0,1", halves), 2);
        QCOMPARE(processesSharingCores("a|3", halves), 1);
        // A set nobody could read is taken to overlap every set.
        QCOMPARE(processesSharingCores("a|", {"a|", "a|5"}), 2);
        // Itself, at least.
        QCOMPARE(processesSharingCores("a|0", {}), 1);
        const std::string mine = coreSetDescription("host-7");
        QVERIFY(mine.rfind("host-7|", 0) == 0);
        QCOMPARE(processesSharingCores(mine, {mine, mine}), 2);
        QCOMPARE(processesSharingCores(mine, {mine, "other|0"}), 1);
    }
};

QTEST_APPLESS_MAIN(TestCores)
#include "tst_cores.moc"
