#pragma once
// Private to engine/cpu: helpers shared by the dense, batch-norm and element-wise families.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>

#include "engine/cpu/onednn_backend.h"

namespace towers::engine::cpu {

// Below this many elements a parallel region costs more than it saves (a few microseconds).
constexpr std::int64_t kParallelGrain = 1 << 15;

// Element-wise kernels are compiled twice: for the baseline x86-64 the project builds for, and for
// AVX-512 (picked at run time when the CPU has it). Measured on 2 Zen 4 cores, AVX-512 makes the
// dropout mask 16x faster (64-bit multiplies in vectors) and ReLU backward and the sum of squares
// 2-3x faster on cache-resident tensors; the streaming ones (axpy) gain nothing but lose nothing.
// Kernels are lambdas (begin, end) marked TOWERS_INLINE, so that each target's copy below gets its
// own compilation of the loop rather than a call to a baseline one.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TOWERS_INLINE __attribute__((always_inline))
#define TOWERS_CPU_WIDE __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl")))
inline bool cpuIsWide()
{
    static const bool wide =
        __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
    return wide;
}
#else
#define TOWERS_INLINE
#define TOWERS_CPU_WIDE
inline bool cpuIsWide()
{
    return false;
}
#endif

// The kernel is taken by value: a private copy of the captured pointers cannot alias the stores,
// so they stay in registers and the loop vectorises (through a reference it does not).
template <class K> TOWERS_CPU_WIDE auto runWide(K k, std::int64_t b, std::int64_t e)
{
    return k(b, e);
}
template <class K> auto runBaseline(K k, std::int64_t b, std::int64_t e)
{
    return k(b, e);
}

// Elements per task: big enough to amortise the call, small enough to stay in L1/L2.
constexpr std::int64_t kChunk = 1 << 14;

// Runs kernel(begin, end) over [0, n) in chunks spread statically over the OpenMP team.
template <class K> void parallelChunks(std::int64_t n, const K& kernel)
{
    const bool wide = cpuIsWide();
    const std::int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
    for (std::int64_t c = 0; c < chunks; ++c) {
        const std::int64_t b = c * kChunk, e = std::min(n, b + kChunk);
        if (wide)
            runWide(kernel, b, e);
        else
            runBaseline(kernel, b, e);
    }
}

// As parallelChunks for a kernel that returns a double partial sum; returns the total.
template <class K> double parallelSum(std::int64_t n, const K& kernel)
{
    const bool wide = cpuIsWide();
    const std::int64_t chunks = (n + kChunk - 1) / kChunk;
    double total = 0;
#pragma omp parallel for schedule(static) reduction(+ : total) if (n > kParallelGrain)
    for (std::int64_t c = 0; c < chunks; ++c) {
        const std::int64_t b = c * kChunk, e = std::min(n, b + kChunk);
        total += wide ? runWide(kernel, b, e) : runBaseline(kernel, b, e);
    }
    return total;
}

// A primitive with its memories, built once per shape and cached: each call only swaps the data
// handles, so steady-state steps build no oneDNN objects and no argument maps.
struct BoundPrimitive
{
    dnnl::primitive prim;
    std::unordered_map<int, dnnl::memory> args;

    void addArg(int arg, const dnnl::memory::desc& md, const dnnl::engine& eng)
    {
        args.emplace(arg, dnnl::memory(md, eng, DNNL_MEMORY_NONE));
    }
    // An argument backed by oneDNN's own zeroed buffer, for inputs a primitive wants but never
    // reads (2.6's batch-norm backward insists on the shift).
    void addOwnedArg(int arg, const dnnl::memory::desc& md, const dnnl::engine& eng)
    {
        dnnl::memory m(md, eng);
        std::memset(m.get_data_handle(), 0, md.get_size());
        args.emplace(arg, m);
    }
    void bind(int arg, const Tensor& t)
    {
        args.at(arg).set_data_handle(const_cast<void*>(t.raw()));
    }
    void execute(dnnl::stream& s)
    {
        prim.execute(s, args);
        s.wait();
    }
};

// "4x3x2" for cache keys.
inline std::string dimsKey(const Shape& s)
{
    std::string k;
    for (int i = 0; i < s.rank(); ++i) {
        if (i) k += 'x';
        k += std::to_string(s[i]);
    }
    return k;
}

} // namespace towers::engine::cpu
