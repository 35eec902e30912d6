#pragma once
// Which stream the CUDA backend's memory operations go on, as plain C++ (streams are opaque
// pointers here, no CUDA header) so that tests check it without a GPU; stream_memory.h applies it.
//
// The engine's Tensor API has no stream: a tensor allocates, frees, zeroes and copies through
// DeviceMemory (engine/tensor/device_memory.h) with a device index only. So each thread keeps the
// stream of the op it is running (StreamBinding, set by every CudaOps entry for its duration):
// what an op allocates, zeroes or copies goes on that op's stream, ordered with its kernels, and
// never on the legacy default stream, which would wait for (and be waited for by) every other
// stream of the device, two towers sharing a GPU included. Outside ops (a model being built or
// moved, checkpoints, tests) nothing is bound, and the legacy stream orders with everything.
//
// A block is freed on the stream it was allocated on, wherever its tensor dies (the op's
// temporaries die after the op returns, in the layer's code): its last use ran there, or on the
// legacy stream, which that stream waits for. When that stream is gone, its work is finished
// (CudaOps synchronises its stream before retiring it), and the legacy stream frees the block.
//
// During a capture (CudaOps::beginCapture to its end) the context's work goes on a capture stream
// of its own, and so does the memory work of its thread for that device between ops (a layer's
// copy between GPU tensors, setZero, a tensor it makes and drops): recorded into the graph with
// the ops rather than run once on the legacy stream and missing from every replay. A block
// allocated there is a graph allocation, with memory only while the graph runs: one freed inside
// the capture is the graph's to allocate and free at each replay, one still live at the capture's
// end is refused (endCapture), and when the graph is never made, such a block stands for no memory
// at all.
#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace towers::engine::cuda {

// The stream bound on this thread: `stream` serves device `device` (nullptr: none).
struct StreamBinding
{
    int device = -1;
    void* stream = nullptr;
};

inline StreamBinding& currentStreamBinding()
{
    thread_local StreamBinding binding;
    return binding;
}

// The capture under way on this thread: `stream` captures `device`'s work (nullptr: none).
inline StreamBinding& currentCaptureBinding()
{
    thread_local StreamBinding binding;
    return binding;
}

// The stream memory work for `device` goes on from this thread: the running op's, else the
// capture's under way on this thread for that device, else nullptr (the legacy default stream).
inline void* boundStream(int device)
{
    const StreamBinding& b = currentStreamBinding();
    if (b.device == device && b.stream) return b.stream;
    const StreamBinding& c = currentCaptureBinding();
    return c.device == device ? c.stream : nullptr;
}

// Whether work on `stream` is being captured by this thread rather than run (a non-null stream
// only: the legacy stream never captures).
inline bool capturedOn(void* stream)
{
    return stream && currentCaptureBinding().stream == stream;
}

// Marks the capture of `device`'s work on `stream` as under way on this thread, until
// unbindCapture() on the same thread (CUDA ends a thread-local capture only on the thread that
// began it); one capture at a time per thread.
inline void bindCapture(int device, void* stream)
{
    currentCaptureBinding() = {device, stream};
}
inline void unbindCapture()
{
    currentCaptureBinding() = {};
}

// Binds `stream` for `device` on this thread for the scope's lifetime; scopes nest (an op calling
// another gets the inner op's stream, then its own back).
class BindStream
{
public:
    BindStream(int device, void* stream) : m_previous(currentStreamBinding())
    {
        currentStreamBinding() = {device, stream};
    }
    ~BindStream() { currentStreamBinding() = m_previous; }
    BindStream(const BindStream&) = delete;
    BindStream& operator=(const BindStream&) = delete;

private:
    StreamBinding m_previous;
};

// How a live block was allocated: on which stream (nullptr: the legacy one), from a pool or not,
// and whether during a capture on that stream.
struct Allocation
{
    void* stream = nullptr;
    bool pooled = true;
    // A graph allocation of the capture under way on `stream`.
    bool captured = false;
    // A graph allocation of a capture that made no graph (refused, failed or abandoned): no memory
    // ever stood behind the address, so freeing it is forgetting it.
    bool voided = false;
};

// The live blocks of the backend, by address. Thread-safe.
//
// A void block's address is free as far as CUDA knows (its graph is gone), and may be handed out
// again while the tensor that holds the void block lives: two owners of one address, whose
// releases the table could not tell apart. So the second one never gets it: add() refuses it,
// and keeps a block allocated there quarantined, held, until the void one is let go, when
// release() frees the two together; the caller allocates again (CUDA cannot hand out a held
// address). A graph allocation is not quarantined (it could not be freed outside its graph
// later): add() refuses it, and the capture fails.
class AllocationTable
{
public:
    // Records a new live block: true. False where p is a void block's address: a block of a
    // capture then is not recorded; any other is quarantined (see above).
    bool add(void* p, Allocation a)
    {
        std::lock_guard lock(m_mutex);
        const auto it = m_live.find(p);
        if (it != m_live.end() && it->second.voided) {
            if (!a.captured) m_quarantined[p] = a;
            return false;
        }
        m_live[p] = a;
        return true;
    }
    // Forgets p and calls free(p, its Allocation) under the table's lock, so that the stream it
    // names cannot be retired (and destroyed) meanwhile; false (nothing called) for an address the
    // table does not know. A void block is forgotten with nothing called (true), and a block
    // quarantined at its address freed.
    template <class Free> bool release(void* p, Free&& free)
    {
        std::lock_guard lock(m_mutex);
        const auto it = m_live.find(p);
        if (it == m_live.end()) return false;
        const Allocation a = it->second;
        m_live.erase(it);
        if (!a.voided) {
            free(p, a);
        } else if (const auto q = m_quarantined.find(p); q != m_quarantined.end()) {
            const Allocation held = q->second;
            m_quarantined.erase(q);
            free(p, held);
        }
        return true;
    }
    // The blocks of `stream` are freed on the legacy stream from now on (the stream is about to be
    // destroyed, its work finished).
    void retire(void* stream)
    {
        std::lock_guard lock(m_mutex);
        for (auto* blocks : {&m_live, &m_quarantined})
            for (auto& [p, a] : *blocks)
                if (a.stream == stream) a.stream = nullptr;
    }
    // The live graph allocations of the capture under way on `stream`: those that would outlive
    // it, at its end.
    std::size_t captured(void* stream) const
    {
        std::lock_guard lock(m_mutex);
        std::size_t n = 0;
        for (const auto& [p, a] : m_live) n += a.captured && a.stream == stream ? 1 : 0;
        return n;
    }
    // The capture on `stream` made no graph: its live allocations become void (release() then
    // forgets them and calls nothing). Returns how many there were.
    std::size_t voidCaptured(void* stream)
    {
        std::lock_guard lock(m_mutex);
        std::size_t n = 0;
        for (auto& [p, a] : m_live)
            if (a.captured && a.stream == stream) {
                a.captured = false;
                a.voided = true;
                ++n;
            }
        return n;
    }
    std::optional<Allocation> find(void* p) const
    {
        std::lock_guard lock(m_mutex);
        const auto it = m_live.find(p);
        if (it == m_live.end()) return std::nullopt;
        return it->second;
    }
    // The blocks held: live, void and quarantined.
    std::size_t size() const
    {
        std::lock_guard lock(m_mutex);
        return m_live.size() + m_quarantined.size();
    }

private:
    mutable std::mutex m_mutex;
    std::unordered_map<void*, Allocation> m_live;
    std::unordered_map<void*, Allocation> m_quarantined; // by the void block's address
};

// Whether each device's allocations come from CUDA's stream-ordered pool (cudaMallocAsync) or
// from cudaMalloc: devices that lack pools (vGPUs, some sandboxes) say so
// (cudaDevAttrMemoryPoolsSupported = 0), or fail cudaMallocAsync with cudaErrorNotSupported, after
// which they use cudaMalloc for good. Set once before use; then thread-safe.
class PoolSupport
{
public:
    void configure(const std::vector<bool>& supported)
    {
        m_count = supported.size();
        m_use = std::make_unique<std::atomic<bool>[]>(m_count);
        for (std::size_t i = 0; i < m_count; ++i) m_use[i] = supported[i];
    }
    bool use(int device) const
    {
        return device >= 0 && std::size_t(device) < m_count && m_use[std::size_t(device)].load();
    }
    void disable(int device)
    {
        if (device >= 0 && std::size_t(device) < m_count) m_use[std::size_t(device)] = false;
    }

private:
    std::size_t m_count = 0;
    std::unique_ptr<std::atomic<bool>[]> m_use;
};

} // namespace towers::engine::cuda
