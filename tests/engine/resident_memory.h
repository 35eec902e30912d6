#pragma once
// This process's resident memory now (Linux: /proc/self/statm), for tests that check that memory
// is not taken: a peak (ru_maxrss) would not fall back after a block is freed.
#include <unistd.h>

#include <cstdint>
#include <fstream>

namespace towers::test {

inline std::int64_t residentBytes()
{
    std::ifstream statm("/proc/self/statm");
    std::int64_t size = 0, resident = 0;
    statm >> size >> resident;
    return resident * std::int64_t(sysconf(_SC_PAGESIZE));
}

} // namespace towers::test
