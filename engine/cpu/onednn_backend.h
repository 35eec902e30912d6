#pragma once
// Private to engine/cpu: the oneDNN backend class. Each op family is implemented in its own file
// (cpu_conv.cpp, cpu_pool.cpp, ...). Primitives are built once per shape and kept in a cache keyed
// by a string that encodes the op and its full geometry.
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "engine/cpu/primitive_implementations.h"
#include "engine/ops/ops.h"

namespace towers::engine::cpu {

// The ops oneDNN (and Towers' own kernels beside it) implement: all, the composite ones fused.
#define TOWERS_ONEDNN_OPS(X) TOWERS_OPS(X)

class OneDnnOps final : public Ops
{
public:
    explicit OneDnnOps(Precision precision = Precision::Float32);
    ~OneDnnOps() override;

    std::string name() const override { return "onednn"; }
    Device device() const override { return Device::host(); }
    Precision precision() const override { return m_precision; }
    bool bf16Activations() const override { return m_precision == Precision::BFloat16; }
    // The level-2 caches of the threads that ops called from this thread use.
    std::int64_t evaluationCacheBytes() const override;

    dnnl::engine& dnnlEngine() { return m_engine; }
    dnnl::stream& dnnlStream() { return m_stream; }

    // Returns the cache entry for `key`, building it with `make` the first time. T is any
    // per-shape state a family needs (primitive descriptors, primitives, scratch memories).
    template <class T>
    T& cached(const std::string& key, const std::function<std::shared_ptr<T>()>& make)
    {
        auto it = m_cache.find(key);
        if (it == m_cache.end()) it = m_cache.emplace(key, make()).first;
        enterEntry(it->first);
        return *static_cast<T*>(it->second.get());
    }

    // The implementation of every primitive (and Towers kernel) this backend has run
    // (primitive_implementations.h).
    const std::vector<PrimitiveImplementation>& implementations() const
    {
        return m_implementations;
    }
    // Records a kernel of Towers' own, once per distinct entry.
    void noteImplementation(const std::string& label, const std::string& primitive,
                            const std::string& impl);
    // While `impls` is set, the implementation of every primitive and kernel this backend runs
    // is appended to it, each time, not only the first: what one stretch of work ran, including
    // the geometries an earlier one ran first (primitive_implementations.h).
    void recordImplementations(std::vector<std::string>* impls) { m_recorded = impls; }
    // Whether the backend whose cache entry the calling thread looked up last is recording
    // (BoundPrimitive then notes every run, not only its first).
    static bool recording();
    // Records the implementation of `p` under the cache entry the calling thread looked up last:
    // BoundPrimitive calls it when it first runs (and every run while recording). Every primitive
    // lives in a cache entry and runs right after the op looked that entry up on the same thread.
    static void notePrimitive(const dnnl::primitive& p);

protected:
    TOWERS_ONEDNN_OPS(TOWERS_OP_OVERRIDE)

private:
    void enterEntry(const std::string& key);

    Precision m_precision;
    dnnl::engine m_engine;
    dnnl::stream m_stream;
    std::unordered_map<std::string, std::shared_ptr<void>> m_cache;
    std::vector<PrimitiveImplementation> m_implementations;
    std::vector<std::string>* m_recorded = nullptr;
};

// Wraps a host tensor's bytes as a oneDNN memory with the given descriptor (no copy).
dnnl::memory wrap(OneDnnOps& ops, const dnnl::memory::desc& md, const Tensor& t);
// Runs `f`, turning a dnnl::error into a BackendError that names `what`.
void guarded(const char* what, const std::function<void()>& f);

} // namespace towers::engine::cpu
