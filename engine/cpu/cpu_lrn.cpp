// oneDNN local response normalisation across channels, on NHWC memory: in blocked (nChw16c) or
// nchw layouts oneDNN 2.6 falls back to its reference kernel (tens to hundreds of times slower,
// see ONEDNN-NOTES.md); with nhwc a JIT kernel runs.
//
// TensorFlow's parameters map onto oneDNN's, which divides alpha by the window size:
//   local_size = 2 r + 1,  k = bias,  alpha_onednn = alpha_tf * (2 r + 1),  beta = beta.
#include <cstdio>
#include <unordered_map>

#include "engine/cpu/onednn_backend.h"

namespace towers::engine::cpu {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr auto f32 = memory::data_type::f32;
using Args = std::unordered_map<int, memory>;

struct LrnParams
{
    memory::desc data;
    memory::dim localSize;
    float alpha, beta, k;
};

LrnParams lrnParams(const LrnDesc& d)
{
    const Shape& s = d.shape; // NHWC
    const memory::dim size = 2 * static_cast<memory::dim>(d.depthRadius) + 1;
    return {memory::desc({s[0], s[3], s[1], s[2]}, f32, Tag::nhwc), size,
            static_cast<float>(d.alpha * static_cast<double>(size)), static_cast<float>(d.beta),
            static_cast<float>(d.bias)};
}

dnnl::lrn_forward::primitive_desc forwardPd(OneDnnOps& ops, const LrnParams& p,
                                            const dnnl::primitive_attr& attr)
{
    const dnnl::lrn_forward::desc desc(dnnl::prop_kind::forward_training,
                                       dnnl::algorithm::lrn_across_channels, p.data, p.localSize,
                                       p.alpha, p.beta, p.k);
    return dnnl::lrn_forward::primitive_desc(desc, attr, ops.dnnlEngine());
}

// Each cache entry owns its scratch memory (user-mode scratchpad), allocated once.
dnnl::primitive_attr scratchpadAttr()
{
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return attr;
}

void addScratchpad(OneDnnOps& ops, const memory::desc& md, Args& args)
{
    if (md.get_size() > 0) args[DNNL_ARG_SCRATCHPAD] = memory(md, ops.dnnlEngine());
}

memory view(OneDnnOps& ops, const memory::desc& md)
{
    return memory(md, ops.dnnlEngine(), DNNL_MEMORY_NONE);
}

void bind(const memory& m, const Tensor& t)
{
    m.set_data_handle(const_cast<void*>(t.raw()));
}

// Exact (hexadecimal) doubles in the key: two layers whose alphas differ in the 7th digit must not
// share a primitive.
std::string exact(double v)
{
    char buf[64];
    std::snprintf(buf, sizeof buf, "%a", v);
    return buf;
}

std::string lrnKey(const char* op, const LrnDesc& d)
{
    return std::string(op) + " " + d.shape.str() + " r" + std::to_string(d.depthRadius) + " k" +
           exact(d.bias) + " a" + exact(d.alpha) + " b" + exact(d.beta);
}

struct LrnForward
{
    dnnl::lrn_forward prim;
    memory src, dst, workspace;
    std::int64_t workspaceBytes = 0;
    Args args;
};

struct LrnBackward
{
    dnnl::lrn_backward prim;
    memory src, diffDst, diffSrc, workspace;
    std::int64_t workspaceBytes = 0;
    Args args;
};

} // namespace

void OneDnnOps::lrnForward(const LrnDesc& d, const Tensor& x, Tensor& y, Tensor& workspace)
{
    requireF32(x, "lrn x");
    requireShape(x, d.shape, "lrn x");
    Tensor::ensure(y, d.shape, DType::Float32);

    LrnForward* e = nullptr;
    guarded("building an LRN", [&] {
        e = &cached<LrnForward>(lrnKey("lrn fwd", d), [&] {
            const auto pd = forwardPd(*this, lrnParams(d), scratchpadAttr());
            auto s = std::make_shared<LrnForward>();
            s->prim = dnnl::lrn_forward(pd);
            s->src = view(*this, pd.src_desc());
            s->dst = view(*this, pd.dst_desc());
            s->args = {{DNNL_ARG_SRC, s->src}, {DNNL_ARG_DST, s->dst}};
            s->workspaceBytes = static_cast<std::int64_t>(pd.workspace_desc().get_size());
            if (s->workspaceBytes > 0) {
                s->workspace = view(*this, pd.workspace_desc());
                s->args[DNNL_ARG_WORKSPACE] = s->workspace;
            }
            addScratchpad(*this, pd.scratchpad_desc(), s->args);
            return s;
        });
    });
    Tensor::ensure(workspace, Shape{e->workspaceBytes}, DType::UInt8);
    guarded("running an LRN", [&] {
        bind(e->src, x);
        bind(e->dst, y);
        if (e->workspaceBytes > 0) bind(e->workspace, workspace);
        e->prim.execute(m_stream, e->args);
        m_stream.wait();
    });
}

void OneDnnOps::lrnBackward(const LrnDesc& d, const Tensor& x, const Tensor& y, const Tensor& dy,
                            const Tensor& workspace, Tensor& dx)
{
    // y is not read (oneDNN recomputes from x and its workspace) but is checked all the same.
    requireF32(x, "lrn x");
    requireF32(y, "lrn y");
    requireF32(dy, "lrn dy");
    requireShape(x, d.shape, "lrn x");
    requireShape(y, d.shape, "lrn y");
    requireShape(dy, d.shape, "lrn dy");
    requireDType(workspace, DType::UInt8, "lrn workspace");
    Tensor::ensure(dx, d.shape, DType::Float32);

    LrnBackward* e = nullptr;
    guarded("building an LRN backward", [&] {
        e = &cached<LrnBackward>(lrnKey("lrn bwd", d), [&] {
            const LrnParams p = lrnParams(d);
            const auto attr = scratchpadAttr();
            const auto hint = forwardPd(*this, p, attr);
            const dnnl::lrn_backward::desc desc(dnnl::algorithm::lrn_across_channels, p.data,
                                                p.data, p.localSize, p.alpha, p.beta, p.k);
            const dnnl::lrn_backward::primitive_desc pd(desc, attr, dnnlEngine(), hint);
            auto s = std::make_shared<LrnBackward>();
            s->prim = dnnl::lrn_backward(pd);
            s->src = view(*this, pd.src_desc());
            s->diffDst = view(*this, pd.diff_dst_desc());
            s->diffSrc = view(*this, pd.diff_src_desc());
            s->args = {{DNNL_ARG_SRC, s->src},
                       {DNNL_ARG_DIFF_DST, s->diffDst},
                       {DNNL_ARG_DIFF_SRC, s->diffSrc}};
            s->workspaceBytes = static_cast<std::int64_t>(pd.workspace_desc().get_size());
            if (s->workspaceBytes > 0) {
                s->workspace = view(*this, pd.workspace_desc());
                s->args[DNNL_ARG_WORKSPACE] = s->workspace;
            }
            addScratchpad(*this, pd.scratchpad_desc(), s->args);
            return s;
        });
    });
    requireShape(workspace, Shape{e->workspaceBytes},
                 "lrn workspace (from the oneDNN lrnForward of this descriptor)");
    guarded("running an LRN backward", [&] {
        bind(e->src, x);
        bind(e->diffDst, dy);
        bind(e->diffSrc, dx);
        if (e->workspaceBytes > 0) bind(e->workspace, workspace);
        e->prim.execute(m_stream, e->args);
        m_stream.wait();
    });
}

} // namespace towers::engine::cpu
