#include "engine/cpu/onednn_backend.h"

#include <algorithm>
#include <numeric>

#include <omp.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include "engine/cpu/cores.h"
#include "engine/cpu/onednn_ops.h"

namespace towers::engine::cpu {

namespace {

// The backend and the cache entry the calling thread looked up last: where the implementation of
// the primitive it runs next is recorded.
struct CurrentEntry
{
    OneDnnOps* ops = nullptr;
    const std::string* label = nullptr;
};
thread_local CurrentEntry t_current;

// A memory layout in oneDNN's notation: dimensions from the outermost, a capital for a blocked
// one, then the blocks ("acdb" is nhwc for N, C, H, W; "aBcd16b" is nChw16c).
std::string layoutName(const dnnl_memory_desc_t& md)
{
    if (md.format_kind == dnnl_format_kind_any) return "any";
    if (md.format_kind != dnnl_blocked) return "special";
    const dnnl_blocking_desc_t& b = md.format_desc.blocking;
    std::vector<int> order(static_cast<std::size_t>(md.ndims));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int l, int r) { return b.strides[l] > b.strides[r]; });
    std::string name;
    for (int dim : order) {
        bool blocked = false;
        for (int i = 0; i < b.inner_nblks; ++i) blocked = blocked || b.inner_idxs[i] == dim;
        name += static_cast<char>((blocked ? 'A' : 'a') + dim);
    }
    for (int i = 0; i < b.inner_nblks; ++i)
        name += std::to_string(b.inner_blks[i]) + static_cast<char>('a' + b.inner_idxs[i]);
    return name;
}

// "convolution backward_weights src:acdb diff_weights:Abcd16a diff_dst:acdb".
std::string describe(const_dnnl_primitive_desc_t pd)
{
    dnnl_primitive_kind_t kind = dnnl_undefined_primitive;
    dnnl_primitive_desc_query(pd, dnnl_query_primitive_kind, 0, &kind);
    std::string text = dnnl_prim_kind2str(kind);
    dnnl_prop_kind_t prop = dnnl_prop_kind_undef;
    if (dnnl_primitive_desc_query(pd, dnnl_query_prop_kind, 0, &prop) == dnnl_success &&
        prop != dnnl_prop_kind_undef)
        text += std::string(" ") + dnnl_prop_kind2str(prop);
    const std::pair<dnnl_query_t, const char*> memories[] = {
        {dnnl_query_src_md, "src"},         {dnnl_query_diff_src_md, "diff_src"},
        {dnnl_query_weights_md, "weights"}, {dnnl_query_diff_weights_md, "diff_weights"},
        {dnnl_query_dst_md, "dst"},         {dnnl_query_diff_dst_md, "diff_dst"},
    };
    for (const auto& [query, name] : memories) {
        const dnnl_memory_desc_t* md = dnnl_primitive_desc_query_md(pd, query, 0);
        if (md && md->ndims > 0) text += std::string(" ") + name + ":" + layoutName(*md);
    }
    return text;
}

} // namespace

OneDnnOps::OneDnnOps(Precision precision)
    : Ops(opSet({TOWERS_ONEDNN_OPS(TOWERS_OP_ID)})), m_precision(precision),
      m_engine(dnnl::engine::kind::cpu, 0), m_stream(m_engine)
{
}

std::int64_t OneDnnOps::evaluationCacheBytes() const
{
    return levelTwoCacheBytes() * cpuThreads();
}

OneDnnOps::~OneDnnOps()
{
    if (t_current.ops == this) t_current = {};
}

void OneDnnOps::enterEntry(const std::string& key)
{
    t_current = {this, &key};
}

bool OneDnnOps::recording()
{
    return t_current.ops && t_current.ops->m_recorded;
}

void OneDnnOps::noteImplementation(const std::string& label, const std::string& primitive,
                                   const std::string& impl)
{
    if (m_recorded) m_recorded->push_back(impl);
    const auto same = [&](const PrimitiveImplementation& r) {
        return r.label == label && r.primitive == primitive && r.impl == impl;
    };
    if (std::none_of(m_implementations.begin(), m_implementations.end(), same))
        m_implementations.push_back({label, primitive, impl});
}

void OneDnnOps::notePrimitive(const dnnl::primitive& p)
{
    if (!t_current.ops) return;
    const_dnnl_primitive_desc_t pd = nullptr;
    if (dnnl_primitive_get_primitive_desc(p.get(), &pd) != dnnl_success || !pd) return;
    const char* impl = nullptr;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl)
        impl = "unknown";
    t_current.ops->noteImplementation(*t_current.label, describe(pd), impl);
}

std::vector<PrimitiveImplementation> primitiveImplementations(Ops& ops)
{
    auto* dnn = dynamic_cast<OneDnnOps*>(&ops);
    if (!dnn)
        throw InvalidArgument("primitiveImplementations: '" + ops.name() +
                              "' is not the oneDNN backend");
    return dnn->implementations();
}

void recordImplementations(Ops& ops, std::vector<std::string>* impls)
{
    auto* dnn = dynamic_cast<OneDnnOps*>(&ops);
    if (!dnn)
        throw InvalidArgument("recordImplementations: '" + ops.name() +
                              "' is not the oneDNN backend");
    dnn->recordImplementations(impls);
}

bool isReferenceImplementation(const std::string& impl)
{
    return impl.find("ref") != std::string::npos;
}

std::unique_ptr<Ops> makeOneDnnOps(Precision precision)
{
    if (precision == Precision::BFloat16) {
        const std::string why = bf16Unavailable();
        if (!why.empty()) throw Unsupported(why);
    }
    std::unique_ptr<Ops> ops;
    guarded("creating the oneDNN CPU engine",
            [&] { ops = std::make_unique<OneDnnOps>(precision); });
    return ops;
}

void setCpuThreads(int threads)
{
    if (threads < 0) throw InvalidArgument("thread count must be >= 0");
    omp_set_num_threads(threads == 0 ? usableCores() : threads);
}

int cpuThreads()
{
    return omp_get_max_threads();
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
