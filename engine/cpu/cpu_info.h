#pragma once
// What the host CPU is and what oneDNN makes of it, for `towers-cli devices` and the GUI.
#include <cstdint>
#include <string>

namespace towers::engine::cpu {

struct CpuInfo
{
    std::string model;    // "AMD EPYC 9654 96-Core Processor" (from /proc/cpuinfo), or ""
    int logicalCores = 0; // what this process may keep busy (usableCores(): affinity, quota)
    std::string isa;      // the instruction set oneDNN's kernels use: "avx512_core", ...
    std::string
        simdTarget; // the one Towers' own kernels (Highway) run on: "AVX3" (AVX-512), "AVX2", ...
    std::string onednnVersion; // "2.6.3"
    bool bf16 =
        false; // --precision bf16 runs here (bf16Unavailable() in onednn_ops.h says why not)
    std::int64_t memoryBytes = 0; // physical memory, 0 when unknown
};

// Never throws: unknown fields stay empty / zero.
CpuInfo cpuInfo();

} // namespace towers::engine::cpu
