#pragma once
// Private to engine/cpu: helpers shared by the op families.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/cpu/onednn_backend.h"
#include "engine/cpu/simd_target.h"

namespace towers::engine::cpu {

// Below this many elements a parallel region costs more than it saves (a few microseconds).
constexpr std::int64_t kParallelGrain = 1 << 15;

// Element-wise kernels are compiled twice: for the baseline x86-64 the project builds for, and for
// AVX-512 (picked at run time when the CPU has it and TOWERS_SIMD_TARGET allows it: under
// TOWERS_SIMD_TARGET=AVX2 an AVX-512 machine runs the baseline copies, as a CPU without AVX-512
// would). Measured on 2 Zen 4 cores, AVX-512 makes the
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
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") && avx512Allowed();
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

// y = x converted between float32 and bfloat16 (either way, or copied when the two agree), y
// already of x's shape and of its own dtype (OneDnnOps::convertFloat's loop).
void convertActivations(const Tensor& x, Tensor& y);

// Elements per task: big enough to amortise the call, small enough to stay in L1/L2.
constexpr std::int64_t kChunk = 1 << 14;

// Runs kernel(begin, end) over items [0, n) that cost about `itemCost` elements each, in chunks
// of about kChunk elements spread statically over the OpenMP team.
template <class K> void parallelItems(std::int64_t n, std::int64_t itemCost, const K& kernel)
{
    const bool wide = cpuIsWide();
    const std::int64_t per =
        std::max<std::int64_t>(1, kChunk / std::max<std::int64_t>(1, itemCost));
    const std::int64_t chunks = (n + per - 1) / per;
#pragma omp parallel for schedule(static) if (n * itemCost > kParallelGrain)
    for (std::int64_t c = 0; c < chunks; ++c) {
        const std::int64_t b = c * per, e = std::min(n, b + per);
        if (wide)
            runWide(kernel, b, e);
        else
            runBaseline(kernel, b, e);
    }
}

// Runs kernel(begin, end) over [0, n) in chunks of kChunk elements spread statically over the
// OpenMP team: parallelItems with items of one element.
template <class K> void parallelChunks(std::int64_t n, const K& kernel)
{
    parallelItems(n, 1, kernel);
}

// As parallelChunks for a kernel that returns a double partial sum; returns the total: the chunks'
// sums added in chunk order, so that it is the same to the bit whatever the number of threads
// (towers of one run with teams of different sizes compute one gradient norm alike). With a kernel
// whose order of additions is its own (sumSquaresInLanes), it is also the same on every CPU.
template <class K> double parallelSum(std::int64_t n, const K& kernel)
{
    const bool wide = cpuIsWide();
    const std::int64_t chunks = (n + kChunk - 1) / kChunk;
    constexpr std::int64_t kOnStack = 64;
    double onStack[kOnStack];
    std::vector<double> onHeap(chunks > kOnStack ? chunks : 0);
    double* partial = chunks > kOnStack ? onHeap.data() : onStack;
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
    for (std::int64_t c = 0; c < chunks; ++c) {
        const std::int64_t b = c * kChunk, e = std::min(n, b + kChunk);
        partial[c] = wide ? runWide(kernel, b, e) : runBaseline(kernel, b, e);
    }
    double total = 0;
    for (std::int64_t c = 0; c < chunks; ++c) total += partial[c];
    return total;
}

// The sum of the squares of p[begin, end) in double, in an order of additions of its own: element
// i into lane (i - begin) mod kSumLanes, each lane in increasing i, then the lanes added pairwise,
// ((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7)). A float's square is exact in double, so neither the
// vector width a copy is compiled for nor a fused multiply-add changes a lane: the baseline and the
// AVX-512 copies give the same bits, and so do processes on machines of different instruction
// sets, which then clip their gradients by one factor and stay identical. (An OpenMP simd
// reduction's order is the vector width's: it differed in the last bits between the two.)
constexpr int kSumLanes = 8;
TOWERS_INLINE inline double sumSquaresInLanes(const float* p, std::int64_t begin, std::int64_t end)
{
    double lane[kSumLanes] = {};
    std::int64_t i = begin;
    for (; i + kSumLanes <= end; i += kSumLanes)
        for (int j = 0; j < kSumLanes; ++j) lane[j] += double(p[i + j]) * double(p[i + j]);
    for (int j = 0; i < end; ++i, ++j) lane[j] += double(p[i]) * double(p[i]);
    static_assert(kSumLanes == 8, "the lanes added pairwise below are eight");
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
           ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

// A primitive with its memories, built once per shape and cached: each call only swaps the data
// handles, so steady-state steps build no oneDNN objects and no argument maps.
struct BoundPrimitive
{
    dnnl::primitive prim;
    std::unordered_map<int, dnnl::memory> args;

    // Attributes with a user-mode scratchpad: each cache entry owns its scratch memory, allocated
    // once (addScratchpad), instead of oneDNN allocating per execution or sharing one buffer
    // between threads that run different towers.
    static dnnl::primitive_attr scratchpadAttr()
    {
        dnnl::primitive_attr attr;
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        return attr;
    }

    // An argument without storage; each call points it at a tensor with bind().
    const dnnl::memory& addArg(int arg, const dnnl::memory::desc& md, const dnnl::engine& eng)
    {
        return args.insert_or_assign(arg, dnnl::memory(md, eng, DNNL_MEMORY_NONE)).first->second;
    }
    // An argument backed by oneDNN's own buffer (allocated once), for data that stays inside the
    // backend: reordered weights, blocked copies of activations.
    const dnnl::memory& addOwnedArg(int arg, const dnnl::memory::desc& md, const dnnl::engine& eng)
    {
        return args.insert_or_assign(arg, dnnl::memory(md, eng)).first->second;
    }
    // As addOwnedArg, zeroed, for inputs a primitive wants but never reads (2.6's batch-norm
    // backward insists on the shift).
    void addZeroedArg(int arg, const dnnl::memory::desc& md, const dnnl::engine& eng)
    {
        const dnnl::memory& m = addOwnedArg(arg, md, eng);
        std::memset(m.get_data_handle(), 0, md.get_size());
    }
    // An argument that is another primitive's memory object (shared storage and handle).
    void shareArg(int arg, const dnnl::memory& m) { args.insert_or_assign(arg, m); }
    // The scratchpad the primitive descriptor asks for, if any.
    void addScratchpad(const dnnl::memory::desc& md, const dnnl::engine& eng)
    {
        if (md.get_size() > 0) addOwnedArg(DNNL_ARG_SCRATCHPAD, md, eng);
    }
    void bind(int arg, const Tensor& t) { bind(arg, t.raw()); }
    void bind(int arg, const void* p) { args.at(arg).set_data_handle(const_cast<void*>(p)); }
    const dnnl::memory& arg(int a) const { return args.at(a); }
    void execute(dnnl::stream& s)
    {
        if (!noted || OneDnnOps::recording()) {
            OneDnnOps::notePrimitive(prim);
            noted = true;
        }
        prim.execute(s, args);
        s.wait();
    }

    bool noted = false; // its implementation is in the backend's list
};

// A reorder between two layouts as a BoundPrimitive with DNNL_ARG_FROM / DNNL_ARG_TO views.
inline BoundPrimitive makeReorder(const dnnl::memory::desc& from, const dnnl::memory::desc& to,
                                  const dnnl::engine& eng)
{
    BoundPrimitive r;
    r.prim = dnnl::reorder(dnnl::reorder::primitive_desc(eng, from, eng, to));
    r.addArg(DNNL_ARG_FROM, from, eng);
    r.addArg(DNNL_ARG_TO, to, eng);
    return r;
}

// Backend-owned bytes on 64-byte boundaries (whole cache lines, aligned vector loads), allocated
// on first use and grown on demand: scratch that only some calls need costs nothing until then.
class AlignedBuffer
{
public:
    void* get(std::size_t bytes)
    {
        if (bytes > m_bytes) {
            const std::size_t rounded = (bytes + 63) / 64 * 64;
            void* p = std::aligned_alloc(64, rounded);
            if (!p) throw std::bad_alloc();
            m_data.reset(p);
            m_bytes = rounded;
        }
        return m_data.get();
    }
    float* floats(std::size_t count) { return static_cast<float*>(get(count * sizeof(float))); }
    // What get() returned last (null before the first call).
    void* peek() const { return m_data.get(); }

private:
    struct Free
    {
        void operator()(void* p) const { std::free(p); }
    };
    std::unique_ptr<void, Free> m_data;
    std::size_t m_bytes = 0;
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
