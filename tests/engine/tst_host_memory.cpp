// The memory a process may still take (engine/cpu/host_memory.h): /proc/meminfo's MemAvailable and
// free swap, the tightest memory limit of its control group and their ancestors (cgroup v2's
// memory.max, v1's memory.limit_in_bytes, read from a folder laid out as /sys/fs/cgroup), and its
// address-space limit (ulimit -v).
#include <QtTest>

#include <sys/resource.h>

#include <fstream>

#include "dataset_files.h"
#include "engine/cpu/host_memory.h"

using namespace towers::engine::cpu;

namespace {

constexpr std::int64_t kMiB = std::int64_t(1) << 20;

} // namespace

class TestHostMemory : public QObject
{
    Q_OBJECT

private slots:
    void memInfoText()
    {
        const char* meminfo = "MemTotal:       24000000 kB\n"
                              "MemFree:         1000000 kB\n"
                              "MemAvailable:   20000000 kB\n"
                              "Buffers:           12345 kB\n"
                              "SwapTotal:       2097148 kB\n"
                              "SwapFree:        1048576 kB\n";
        QCOMPARE(memInfoAvailable(meminfo),
                 std::optional<std::int64_t>((20000000LL + 1048576) * 1024));
        // No swap line: MemAvailable alone; no MemAvailable (kernels before 3.14): none.
        QCOMPARE(memInfoAvailable("MemAvailable: 2048 kB\n"),
                 std::optional<std::int64_t>(2 * kMiB));
        QVERIFY(!memInfoAvailable("MemTotal: 2048 kB\nMemFree: 1024 kB\n"));
        QVERIFY(!memInfoAvailable("MemAvailable: lots kB\n"));
        QVERIFY(!memInfoAvailable(""));
        // A name that only begins like it is another field.
        QVERIFY(!memInfoAvailable("MemAvailableX: 2048 kB\n"));
        // This machine's.
        std::ifstream in("/proc/meminfo");
        std::stringstream text;
        text << in.rdbuf();
        const auto here = memInfoAvailable(text.str());
        QVERIFY(here && *here > 0);
    }

    void roomUnderALimit()
    {
        // The inactive file cache is the kernel's to take back: not counted as used.
        const char* v2Stat = "anon 104857600\nfile 209715200\ninactive_file 134217728\n";
        QCOMPARE(memoryRoom("1073741824\n", "268435456\n", v2Stat),
                 std::optional<std::int64_t>(896 * kMiB));
        const char* v1Stat = "cache 209715200\ninactive_file 1\ntotal_inactive_file 134217728\n";
        QCOMPARE(memoryRoom("1073741824\n", "268435456\n", v1Stat),
                 std::optional<std::int64_t>(896 * kMiB));
        QCOMPARE(memoryRoom("1073741824\n", "268435456\n", "inactive_file lots\n"),
                 std::optional<std::int64_t>(768 * kMiB));
        QCOMPARE(memoryRoom("1073741824\n", "268435456\n"),
                 std::optional<std::int64_t>(768 * kMiB));
        QCOMPARE(memoryRoom("1073741824\n", "2147483648\n"), std::optional<std::int64_t>(0));
        QVERIFY(!memoryRoom("max\n", "268435456\n"));
        QVERIFY(!memoryRoom("9223372036854771712\n", "268435456\n")); // v1's "no limit"
        QVERIFY(!memoryRoom("1073741824\n", ""));
        QVERIFY(!memoryRoom("", ""));
    }

    // cgroup v2: memory.max less memory.current at the group and each ancestor; the tightest.
    void cgroupV2TightestAncestor()
    {
        QTemporaryDir root;
        const std::string r = root.path().toStdString();
        towers::test::writeText(r + "/user.slice/memory.max", "8589934592\n"); // 8 GiB,
        towers::test::writeText(r + "/user.slice/memory.current",
                                "7516192768\n"); // 7 GiB used: 1 GiB left
        towers::test::writeText(r + "/user.slice/job/memory.max", "4294967296\n"); // 4 GiB,
        towers::test::writeText(r + "/user.slice/job/memory.current",
                                "536870912\n"); // 512 MiB used: 3.5 GiB
        QCOMPARE(cgroupMemoryRoom("0::/user.slice/job\n", r),
                 std::optional<std::int64_t>(1024 * kMiB));
        towers::test::writeText(r + "/user.slice/memory.max", "max\n");
        QCOMPARE(cgroupMemoryRoom("0::/user.slice/job\n", r),
                 std::optional<std::int64_t>(3584 * kMiB));
        QTemporaryDir empty;
        QVERIFY(!cgroupMemoryRoom("0::/a/b\n", empty.path().toStdString()));
        QVERIFY(!cgroupMemoryRoom("", r));
        QVERIFY(!cgroupMemoryRoom("0::/../../etc\n", empty.path().toStdString()));
    }

    // cgroup v1: the memory controller's hierarchy, mounted as memory/; other controllers' lines
    // are not read for it.
    void cgroupV1()
    {
        QTemporaryDir root;
        const std::string r = root.path().toStdString();
        towers::test::writeText(r + "/memory/memory.limit_in_bytes", "9223372036854771712\n");
        towers::test::writeText(r + "/memory/memory.usage_in_bytes", "4000000000\n");
        towers::test::writeText(r + "/memory/docker/abc/memory.limit_in_bytes", "2147483648\n");
        towers::test::writeText(r + "/memory/docker/abc/memory.usage_in_bytes", "1073741824\n");
        const std::string list = "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n";
        QCOMPARE(cgroupMemoryRoom(list, r), std::optional<std::int64_t>(1024 * kMiB));
        QVERIFY(!cgroupMemoryRoom("4:cpu,cpuacct:/docker/abc\n", r));
    }

    // ulimit -v bounds what this process may take: the limit less what it has mapped.
    void addressSpaceLimit()
    {
        const auto before = availableHostMemory();
        QVERIFY(before && before->bytes > 0);
        rlimit old{};
        QCOMPARE(getrlimit(RLIMIT_AS, &old), 0);
        std::int64_t pages = 0;
        std::ifstream("/proc/self/statm") >> pages;
        const std::int64_t mapped = pages * sysconf(_SC_PAGESIZE);
        rlimit tight = old;
        tight.rlim_cur = rlim_t(mapped + 64 * kMiB);
        if (old.rlim_max != RLIM_INFINITY && tight.rlim_cur > old.rlim_max)
            QSKIP("the hard address-space limit is lower than this test needs");
        QCOMPARE(setrlimit(RLIMIT_AS, &tight), 0);
        const auto under = availableHostMemory();
        QCOMPARE(setrlimit(RLIMIT_AS, &old), 0);
        QVERIFY(under);
        QVERIFY2(under->bytes <= 64 * kMiB && under->bytes > 32 * kMiB,
                 qPrintable(QString::number(under->bytes)));
        QCOMPARE(QString::fromStdString(under->limitedBy),
                 QStringLiteral("its address-space limit, ulimit -v"));
    }

    // What threads set aside of the address space: a stack each (the stack limit's size, 8 MiB
    // where it has none) and malloc's second arena, 64 MiB.
    void threadsSetAddressSpaceAside()
    {
        const QByteArray given = qgetenv("MALLOC_ARENA_MAX"); // the test's own, put back below
        qunsetenv("MALLOC_ARENA_MAX");
        QCOMPARE(threadsAddressSpace(0), std::int64_t(0));
        rlimit old{};
        QCOMPARE(getrlimit(RLIMIT_STACK, &old), 0);
        rlimit small = old;
        small.rlim_cur = rlim_t(4 * kMiB);
        if (old.rlim_max != RLIM_INFINITY && small.rlim_cur > old.rlim_max)
            QSKIP("the hard stack limit is lower than 4 MiB");
        QCOMPARE(setrlimit(RLIMIT_STACK, &small), 0);
        const std::int64_t four = threadsAddressSpace(3);
        // As many arenas as MALLOC_ARENA_MAX says, at most one a thread.
        qputenv("MALLOC_ARENA_MAX", "4");
        const std::int64_t fourArenas = threadsAddressSpace(5), twoThreads = threadsAddressSpace(2);
        qunsetenv("MALLOC_ARENA_MAX");
        small.rlim_cur = RLIM_INFINITY;
        const bool unlimited =
            old.rlim_max == RLIM_INFINITY && setrlimit(RLIMIT_STACK, &small) == 0;
        const std::int64_t none = threadsAddressSpace(3);
        QCOMPARE(setrlimit(RLIMIT_STACK, &old), 0);
        if (!given.isNull()) qputenv("MALLOC_ARENA_MAX", given);
        QCOMPARE(four, 3 * 4 * kMiB + (kMallocArenas - 1) * 64 * kMiB);
        QCOMPARE(fourArenas, 5 * 4 * kMiB + 3 * 64 * kMiB);
        QCOMPARE(twoThreads, 2 * 4 * kMiB + 2 * 64 * kMiB);
        if (unlimited) QCOMPARE(none, 3 * 8 * kMiB + (kMallocArenas - 1) * 64 * kMiB);
    }

    void bytesAsPeopleReadThem()
    {
        QCOMPARE(byteText(0), std::string("0 MiB"));
        QCOMPARE(byteText(600 * kMiB), std::string("600 MiB"));
        QCOMPARE(byteText(1023 * kMiB), std::string("1023 MiB"));
        QCOMPARE(byteText(1536 * kMiB), std::string("1.5 GiB"));
        QCOMPARE(byteText(40960 * kMiB), std::string("40.0 GiB"));
    }
};

QTEST_APPLESS_MAIN(TestHostMemory)
#include "tst_host_memory.moc"
