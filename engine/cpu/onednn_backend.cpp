#include "engine/cpu/onednn_backend.h"

#include <omp.h>

#include "engine/cpu/onednn_ops.h"

namespace towers::engine::cpu {

OneDnnOps::OneDnnOps() : m_engine(dnnl::engine::kind::cpu, 0), m_stream(m_engine) {}

std::unique_ptr<Ops> makeOneDnnOps()
{
    std::unique_ptr<Ops> ops;
    guarded("creating the oneDNN CPU engine", [&] { ops = std::make_unique<OneDnnOps>(); });
    return ops;
}

void setCpuThreads(int threads)
{
    if (threads < 0) throw InvalidArgument("thread count must be >= 0");
    omp_set_num_threads(threads == 0 ? omp_get_num_procs() : threads);
}

int cpuThreads() { return omp_get_max_threads(); }

void requireF32(const Tensor& t, const char* what)
{
    if (t.empty()) throw InvalidArgument(std::string(what) + ": tensor is empty");
    if (t.dtype() != DType::Float32)
        throw Unsupported(std::string("oneDNN backend: ") + what + " must be float32, got " +
                          std::string(dtypeName(t.dtype())));
}

dnnl::memory wrap(OneDnnOps& ops, const dnnl::memory::desc& md, const Tensor& t)
{
    return dnnl::memory(md, ops.dnnlEngine(), const_cast<void*>(t.raw()));
}

void guarded(const char* what, const std::function<void()>& f)
{
    try {
        f();
    } catch (const dnnl::error& e) {
        throw BackendError(std::string("oneDNN failed while ") + what + ": " + e.what() +
                           " (status " + std::to_string(static_cast<int>(e.status)) + ")");
    }
}

} // namespace towers::engine::cpu
