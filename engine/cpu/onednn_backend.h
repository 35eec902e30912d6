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

class OneDnnOps final : public Ops
{
public:
    OneDnnOps();
    ~OneDnnOps() override;

    std::string name() const override { return "onednn"; }
    Device device() const override { return Device::host(); }

    void conv2dForward(const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& b,
                       Tensor& y, Activation act) override;
    void conv2dBackwardData(const Conv2dDesc& d, const Tensor& dy, const Tensor& w,
                            Tensor& dx) override;
    void conv2dBackwardWeights(const Conv2dDesc& d, const Tensor& x, const Tensor& dy, Tensor& dw,
                               Tensor* db) override;
    void conv2dForwardTraining(const Conv2dDesc& d, const Tensor& x, const Tensor& w,
                               const Tensor& b, Tensor& y, Activation act, Tensor& saved) override;
    void conv2dBackward(const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& y,
                        const Tensor& dy, Activation act, const Tensor& saved, Tensor* dx,
                        Tensor& dw, Tensor* db) override;

    void maxPoolForward(const Pool2dDesc& d, const Tensor& x, Tensor& y,
                        Tensor& workspace) override;
    void maxPoolBackward(const Pool2dDesc& d, const Tensor& x, const Tensor& y, const Tensor& dy,
                         const Tensor& workspace, Tensor& dx) override;

    void lrnForward(const LrnDesc& d, const Tensor& x, Tensor& y, Tensor& workspace) override;
    void lrnBackward(const LrnDesc& d, const Tensor& x, const Tensor& y, const Tensor& dy,
                     const Tensor& workspace, Tensor& dx) override;

    void linearForward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y,
                       Activation act) override;
    void linearBackwardData(const Tensor& dy, const Tensor& w, Tensor& dx) override;
    void linearBackwardWeights(const Tensor& x, const Tensor& dy, Tensor& dw, Tensor* db) override;
    void linearBackward(const Tensor& x, const Tensor& w, const Tensor& y, const Tensor& dy,
                        Activation act, Tensor* dx, Tensor& dw, Tensor* db) override;

    void reluForward(const Tensor& x, Tensor& y) override;
    void reluBackward(const Tensor& y, const Tensor& dy, Tensor& dx) override;
    void add(const Tensor& a, const Tensor& b, Tensor& y) override;
    void dropoutForward(const Tensor& x, double rate, std::uint64_t seed, Tensor& y,
                        Tensor& mask) override;
    void dropoutBackward(const Tensor& dy, const Tensor& mask, double rate, Tensor& dx) override;

    void batchNormForwardTraining(const BatchNormDesc& d, const Tensor& x, const Tensor& gamma,
                                  const Tensor& beta, Tensor& y, Tensor& runningMean,
                                  Tensor& runningVar, Tensor& saveMean, Tensor& saveVar) override;
    void batchNormForwardInference(const BatchNormDesc& d, const Tensor& x, const Tensor& gamma,
                                   const Tensor& beta, const Tensor& runningMean,
                                   const Tensor& runningVar, Tensor& y) override;
    void batchNormBackward(const BatchNormDesc& d, const Tensor& x, const Tensor& dy,
                           const Tensor& gamma, const Tensor& saveMean, const Tensor& saveVar,
                           Tensor& dx, Tensor& dgamma, Tensor& dbeta) override;

    void nhwcToNchw(const Tensor& x, Tensor& y) override;
    void nchwToNhwc(const Tensor& x, Tensor& y) override;

    double softmaxCrossEntropyForward(const Tensor& logits, const Tensor& labels,
                                      Tensor& probs) override;
    void softmaxCrossEntropyBackward(const Tensor& probs, const Tensor& labels, double scale,
                                     Tensor& dlogits) override;

    double sumSquares(const Tensor& x) override;
    void axpy(double alpha, const Tensor& x, Tensor& y) override;

    void momentumUpdate(const MomentumStep& s, const Tensor& g, Tensor& buf, Tensor& w) override;
    void adamUpdate(const AdamStep& s, const Tensor& g, Tensor& m, Tensor& v, Tensor& w) override;

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
    // Records the implementation of `p` under the cache entry the calling thread looked up last:
    // BoundPrimitive calls it when it first runs. Every primitive lives in a cache entry and runs
    // right after the op looked that entry up on the same thread.
    static void notePrimitive(const dnnl::primitive& p);

private:
    void enterEntry(const std::string& key);

    dnnl::engine m_engine;
    dnnl::stream m_stream;
    std::unordered_map<std::string, std::shared_ptr<void>> m_cache;
    std::vector<PrimitiveImplementation> m_implementations;
};

// Throws Unsupported unless t is a non-empty Float32 tensor.
void requireF32(const Tensor& t, const char* what);
// Wraps a host tensor's bytes as a oneDNN memory with the given descriptor (no copy).
dnnl::memory wrap(OneDnnOps& ops, const dnnl::memory::desc& md, const Tensor& t);
// Runs `f`, turning a dnnl::error into a BackendError that names `what`.
void guarded(const char* what, const std::function<void()>& f);

} // namespace towers::engine::cpu
