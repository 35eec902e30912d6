#include "engine/cpu/cpu_info.h"

#include "engine/cpu/cores.h"
#include "engine/cpu/lrn_hwy.h"
#include "engine/cpu/onednn_ops.h"
#include "engine/cpu/simd_target.h"
#include "engine/errors.h"

#include <cstdlib>
#include <fstream>

#include <unistd.h>

#include <oneapi/dnnl/dnnl.hpp>

namespace towers::engine::cpu {

namespace {

std::string isaName(dnnl::cpu_isa isa)
{
    switch (isa) {
    case dnnl::cpu_isa::sse41:
        return "sse41";
    case dnnl::cpu_isa::avx:
        return "avx";
    case dnnl::cpu_isa::avx2:
        return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
        return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic:
        return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops:
        return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core:
        return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
        return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
        return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
        return "avx512_core_amx";
    case dnnl::cpu_isa::all:
        return "all";
    }
    return "unknown";
}

std::string cpuModelName()
{
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) != 0) continue;
        const auto colon = line.find(':');
        if (colon == std::string::npos) break;
        auto value = line.substr(colon + 1);
        const auto first = value.find_first_not_of(" \t");
        return first == std::string::npos ? std::string() : value.substr(first);
    }
    return {};
}

} // namespace

std::string bf16Needs()
{
    std::string isa;
    try {
        // Bit sets: avx512_core_bf16's bits are in every later ISA's (AMX's too).
        const dnnl::cpu_isa effective = dnnl::get_effective_cpu_isa();
        const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
        if ((static_cast<unsigned>(effective) & bf16) == bf16) return {};
        isa = isaName(effective);
    } catch (const dnnl::error&) {
        isa = "unknown";
    }
    std::string needs = "a CPU with AVX512_BF16 or AMX (Intel Cooper Lake, Sapphire Rapids or "
                        "later; AMD Zen 4 or later), where oneDNN runs bfloat16 natively; "
                        "oneDNN's kernels here are for " +
                        isa;
    if (std::getenv("ONEDNN_MAX_CPU_ISA") || std::getenv("DNNL_MAX_CPU_ISA"))
        needs += " (held there by ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA)";
    return needs;
}

std::string bf16Unavailable()
{
    const std::string needs = bf16Needs();
    return needs.empty() ? needs : "--precision bf16 needs " + needs + ": use --precision fp32";
}

CpuInfo cpuInfo()
{
    CpuInfo info;
    info.model = cpuModelName();
    info.logicalCores = usableCores();
    try {
        info.isa = isaName(dnnl::get_effective_cpu_isa());
    } catch (const dnnl::error&) {
        info.isa = "unknown";
    }
    try {
        applySimdTargetLimit(); // TOWERS_SIMD_TARGET, before the target is read
        info.simdTarget = lrnTargetName();
    } catch (const Error& e) {
        info.simdTarget = e.what();
    }
    info.bf16 = bf16Unavailable().empty();
    const auto* v = dnnl::version();
    info.onednnVersion =
        std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
    const long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
    if (pages > 0 && pageSize > 0) info.memoryBytes = static_cast<std::int64_t>(pages) * pageSize;
    return info;
}

} // namespace towers::engine::cpu
