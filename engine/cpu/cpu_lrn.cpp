// oneDNN local response normalisation across channels, on NHWC memory: in blocked (nChw16c) or
// nchw layouts oneDNN 2.6 falls back to its reference kernel (tens to hundreds of times slower,
// see ONEDNN-NOTES.md); with nhwc a JIT kernel runs.
//
// TensorFlow's parameters map onto oneDNN's, which divides alpha by the window size:
//   local_size = 2 r + 1,  k = bias,  alpha_onednn = alpha_tf * (2 r + 1),  beta = beta.
#include <cstdio>

#include "engine/cpu/cpu_common.h"

namespace towers::engine::cpu {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr auto f32 = memory::data_type::f32;

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

dnnl::lrn_forward::primitive_desc forwardPd(const dnnl::engine& eng, const LrnParams& p,
                                            const dnnl::primitive_attr& attr)
{
    const dnnl::lrn_forward::desc desc(dnnl::prop_kind::forward_training,
                                       dnnl::algorithm::lrn_across_channels, p.data, p.localSize,
                                       p.alpha, p.beta, p.k);
    return dnnl::lrn_forward::primitive_desc(desc, attr, eng);
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

// An LRN primitive and the size of its workspace (0: none).
struct LrnEntry
{
    BoundPrimitive p;
    std::int64_t workspaceBytes = 0;

    void addWorkspace(const memory::desc& md, const dnnl::engine& eng)
    {
        workspaceBytes = static_cast<std::int64_t>(md.get_size());
        if (workspaceBytes > 0) p.addArg(DNNL_ARG_WORKSPACE, md, eng);
    }
    void bindWorkspace(const Tensor& w)
    {
        if (workspaceBytes > 0) p.bind(DNNL_ARG_WORKSPACE, w);
    }
};

} // namespace

void OneDnnOps::lrnForward(const LrnDesc& d, const Tensor& x, Tensor& y, Tensor& workspace)
{
    requireF32(x, "lrn x");
    requireShape(x, d.shape, "lrn x");
    Tensor::ensure(y, d.shape, DType::Float32);

    LrnEntry* e = nullptr;
    guarded("building an LRN", [&] {
        e = &cached<LrnEntry>(lrnKey("lrn fwd", d), [&] {
            const auto pd = forwardPd(m_engine, lrnParams(d), BoundPrimitive::scratchpadAttr());
            auto s = std::make_shared<LrnEntry>();
            s->p.prim = dnnl::lrn_forward(pd);
            s->p.addArg(DNNL_ARG_SRC, pd.src_desc(), m_engine);
            s->p.addArg(DNNL_ARG_DST, pd.dst_desc(), m_engine);
            s->addWorkspace(pd.workspace_desc(), m_engine);
            s->p.addScratchpad(pd.scratchpad_desc(), m_engine);
            return s;
        });
    });
    Tensor::ensure(workspace, Shape{e->workspaceBytes}, DType::UInt8);
    guarded("running an LRN", [&] {
        e->p.bind(DNNL_ARG_SRC, x);
        e->p.bind(DNNL_ARG_DST, y);
        e->bindWorkspace(workspace);
        e->p.execute(m_stream);
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

    LrnEntry* e = nullptr;
    guarded("building an LRN backward", [&] {
        e = &cached<LrnEntry>(lrnKey("lrn bwd", d), [&] {
            const LrnParams p = lrnParams(d);
            const auto attr = BoundPrimitive::scratchpadAttr();
            const auto hint = forwardPd(m_engine, p, attr);
            const dnnl::lrn_backward::desc desc(dnnl::algorithm::lrn_across_channels, p.data,
                                                p.data, p.localSize, p.alpha, p.beta, p.k);
            const dnnl::lrn_backward::primitive_desc pd(desc, attr, m_engine, hint);
            auto s = std::make_shared<LrnEntry>();
            s->p.prim = dnnl::lrn_backward(pd);
            s->p.addArg(DNNL_ARG_SRC, pd.src_desc(), m_engine);
            s->p.addArg(DNNL_ARG_DIFF_DST, pd.diff_dst_desc(), m_engine);
            s->p.addArg(DNNL_ARG_DIFF_SRC, pd.diff_src_desc(), m_engine);
            s->addWorkspace(pd.workspace_desc(), m_engine);
            s->p.addScratchpad(pd.scratchpad_desc(), m_engine);
            return s;
        });
    });
    requireShape(workspace, Shape{e->workspaceBytes},
                 "lrn workspace (from the oneDNN lrnForward of this descriptor)");
    guarded("running an LRN backward", [&] {
        e->p.bind(DNNL_ARG_SRC, x);
        e->p.bind(DNNL_ARG_DIFF_DST, dy);
        e->p.bind(DNNL_ARG_DIFF_SRC, dx);
        e->bindWorkspace(workspace);
        e->p.execute(m_stream);
    });
}

} // namespace towers::engine::cpu
