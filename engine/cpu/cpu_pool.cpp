// oneDNN max pooling on NHWC memory. TensorFlow's SAME padding maps directly onto oneDNN's
// asymmetric padding_l / padding_r, and oneDNN's max pooling ignores padded positions, as the
// descriptor requires. The workspace is oneDNN's own (argmax positions in the primitive's format),
// handed to the caller as opaque UInt8 bytes.
#include <unordered_map>

#include "engine/cpu/onednn_backend.h"

namespace towers::engine::cpu {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr auto f32 = memory::data_type::f32;
using Args = std::unordered_map<int, memory>;

struct PoolMds
{
    memory::desc src, dst;
    memory::dims strides, kernel, padL, padR;
};

PoolMds poolMds(const Pool2dDesc& d)
{
    const Window2d& g = d.win;
    return {memory::desc({g.n, g.c, g.h, g.w}, f32, Tag::nhwc),
            memory::desc({g.n, g.c, g.oh, g.ow}, f32, Tag::nhwc),
            {g.sh, g.sw},
            {g.kh, g.kw},
            {g.padTop, g.padLeft},
            {g.padBottom, g.padRight}};
}

dnnl::pooling_forward::primitive_desc forwardPd(OneDnnOps& ops, const PoolMds& m,
                                                const dnnl::primitive_attr& attr)
{
    const dnnl::pooling_forward::desc desc(dnnl::prop_kind::forward_training,
                                           dnnl::algorithm::pooling_max, m.src, m.dst, m.strides,
                                           m.kernel, m.padL, m.padR);
    return dnnl::pooling_forward::primitive_desc(desc, attr, ops.dnnlEngine());
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

struct PoolForward
{
    dnnl::pooling_forward prim;
    memory src, dst, workspace;
    std::int64_t workspaceBytes = 0;
    Args args;
};

struct PoolBackward
{
    dnnl::pooling_backward prim;
    memory diffDst, diffSrc, workspace;
    std::int64_t workspaceBytes = 0;
    Args args;
};

std::string poolKey(const char* op, const Pool2dDesc& d)
{
    return std::string(op) + " " + d.win.str();
}

} // namespace

void OneDnnOps::maxPoolForward(const Pool2dDesc& d, const Tensor& x, Tensor& y, Tensor& workspace)
{
    requireF32(x, "max pool x");
    requireShape(x, d.inputShape(), "max pool x");
    Tensor::ensure(y, d.outputShape(), DType::Float32);

    PoolForward* e = nullptr;
    guarded("building a max pooling", [&] {
        e = &cached<PoolForward>(poolKey("maxpool fwd", d), [&] {
            const auto pd = forwardPd(*this, poolMds(d), scratchpadAttr());
            auto s = std::make_shared<PoolForward>();
            s->prim = dnnl::pooling_forward(pd);
            s->src = view(*this, pd.src_desc());
            s->dst = view(*this, pd.dst_desc());
            s->workspace = view(*this, pd.workspace_desc());
            s->workspaceBytes = static_cast<std::int64_t>(pd.workspace_desc().get_size());
            s->args = {
                {DNNL_ARG_SRC, s->src}, {DNNL_ARG_DST, s->dst}, {DNNL_ARG_WORKSPACE, s->workspace}};
            addScratchpad(*this, pd.scratchpad_desc(), s->args);
            return s;
        });
    });
    Tensor::ensure(workspace, Shape{e->workspaceBytes}, DType::UInt8);
    guarded("running a max pooling", [&] {
        bind(e->src, x);
        bind(e->dst, y);
        bind(e->workspace, workspace);
        e->prim.execute(m_stream, e->args);
        m_stream.wait();
    });
}

void OneDnnOps::maxPoolBackward(const Pool2dDesc& d, const Tensor& x, const Tensor& y,
                                const Tensor& dy, const Tensor& workspace, Tensor& dx)
{
    // x and y are not read: oneDNN's workspace already says where each maximum came from. They
    // are still checked, so that a caller's mix-up fails here on every backend.
    requireF32(x, "max pool x");
    requireF32(y, "max pool y");
    requireF32(dy, "max pool dy");
    requireShape(x, d.inputShape(), "max pool x");
    requireShape(y, d.outputShape(), "max pool y");
    requireShape(dy, d.outputShape(), "max pool dy");
    requireDType(workspace, DType::UInt8, "max pool workspace");
    Tensor::ensure(dx, d.inputShape(), DType::Float32);

    PoolBackward* e = nullptr;
    guarded("building a max pooling backward", [&] {
        e = &cached<PoolBackward>(poolKey("maxpool bwd", d), [&] {
            const PoolMds m = poolMds(d);
            const auto attr = scratchpadAttr();
            const auto hint = forwardPd(*this, m, attr);
            const dnnl::pooling_backward::desc desc(dnnl::algorithm::pooling_max, m.src, m.dst,
                                                    m.strides, m.kernel, m.padL, m.padR);
            const dnnl::pooling_backward::primitive_desc pd(desc, attr, dnnlEngine(), hint);
            auto s = std::make_shared<PoolBackward>();
            s->prim = dnnl::pooling_backward(pd);
            s->diffDst = view(*this, pd.diff_dst_desc());
            s->diffSrc = view(*this, pd.diff_src_desc());
            s->workspace = view(*this, pd.workspace_desc());
            s->workspaceBytes = static_cast<std::int64_t>(pd.workspace_desc().get_size());
            s->args = {{DNNL_ARG_DIFF_DST, s->diffDst},
                       {DNNL_ARG_DIFF_SRC, s->diffSrc},
                       {DNNL_ARG_WORKSPACE, s->workspace}};
            addScratchpad(*this, pd.scratchpad_desc(), s->args);
            return s;
        });
    });
    requireShape(workspace, Shape{e->workspaceBytes},
                 "max pool workspace (from the oneDNN maxPoolForward of this descriptor)");
    guarded("running a max pooling backward", [&] {
        bind(e->diffDst, dy);
        bind(e->diffSrc, dx);
        bind(e->workspace, workspace);
        e->prim.execute(m_stream, e->args);
        m_stream.wait();
    });
}

} // namespace towers::engine::cpu
