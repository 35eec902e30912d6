// oneDNN max pooling on NHWC memory. TensorFlow's SAME padding maps directly onto oneDNN's
// asymmetric padding_l / padding_r, and oneDNN's max pooling ignores padded positions, as the
// descriptor requires. The workspace is oneDNN's own (argmax positions in the primitive's format),
// handed to the caller as opaque UInt8 bytes.
#include "engine/cpu/cpu_common.h"

namespace towers::engine::cpu {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr auto f32 = memory::data_type::f32;

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

dnnl::pooling_forward::primitive_desc forwardPd(const dnnl::engine& eng, const PoolMds& m,
                                                const dnnl::primitive_attr& attr)
{
    const dnnl::pooling_forward::desc desc(dnnl::prop_kind::forward_training,
                                           dnnl::algorithm::pooling_max, m.src, m.dst, m.strides,
                                           m.kernel, m.padL, m.padR);
    return dnnl::pooling_forward::primitive_desc(desc, attr, eng);
}

// A pooling primitive and the size of the workspace it reads or writes.
struct PoolEntry
{
    BoundPrimitive p;
    std::int64_t workspaceBytes = 0;
};

std::string poolKey(const char* op, const Pool2dDesc& d)
{
    return std::string(op) + " " + d.win.str();
}

} // namespace

void OneDnnOps::maxPoolForwardImpl(const Pool2dDesc& d, const Tensor& x, Tensor& y,
                                   Tensor& workspace)
{
    Tensor::ensure(y, d.outputShape(), DType::Float32);

    PoolEntry* e = nullptr;
    guarded("building a max pooling", [&] {
        e = &cached<PoolEntry>(poolKey("maxpool fwd", d), [&] {
            const auto pd = forwardPd(m_engine, poolMds(d), BoundPrimitive::scratchpadAttr());
            auto s = std::make_shared<PoolEntry>();
            s->p.prim = dnnl::pooling_forward(pd);
            s->p.addArg(DNNL_ARG_SRC, pd.src_desc(), m_engine);
            s->p.addArg(DNNL_ARG_DST, pd.dst_desc(), m_engine);
            s->p.addArg(DNNL_ARG_WORKSPACE, pd.workspace_desc(), m_engine);
            s->p.addScratchpad(pd.scratchpad_desc(), m_engine);
            s->workspaceBytes = static_cast<std::int64_t>(pd.workspace_desc().get_size());
            return s;
        });
    });
    Tensor::ensure(workspace, Shape{e->workspaceBytes}, DType::UInt8);
    guarded("running a max pooling", [&] {
        e->p.bind(DNNL_ARG_SRC, x);
        e->p.bind(DNNL_ARG_DST, y);
        e->p.bind(DNNL_ARG_WORKSPACE, workspace);
        e->p.execute(m_stream);
    });
}

// x and y are not read: oneDNN's workspace already says where each maximum came from (the entry
// still checks them, as on every backend).
void OneDnnOps::maxPoolBackwardImpl(const Pool2dDesc& d, const Tensor& /*x*/, const Tensor& /*y*/,
                                    const Tensor& dy, const Tensor& workspace, Tensor& dx)
{
    requireDType(workspace, DType::UInt8, "max pool workspace");
    Tensor::ensure(dx, d.inputShape(), DType::Float32);

    PoolEntry* e = nullptr;
    guarded("building a max pooling backward", [&] {
        e = &cached<PoolEntry>(poolKey("maxpool bwd", d), [&] {
            const PoolMds m = poolMds(d);
            const auto attr = BoundPrimitive::scratchpadAttr();
            const auto hint = forwardPd(m_engine, m, attr);
            const dnnl::pooling_backward::desc desc(dnnl::algorithm::pooling_max, m.src, m.dst,
                                                    m.strides, m.kernel, m.padL, m.padR);
            const dnnl::pooling_backward::primitive_desc pd(desc, attr, m_engine, hint);
            auto s = std::make_shared<PoolEntry>();
            s->p.prim = dnnl::pooling_backward(pd);
            s->p.addArg(DNNL_ARG_DIFF_DST, pd.diff_dst_desc(), m_engine);
            s->p.addArg(DNNL_ARG_DIFF_SRC, pd.diff_src_desc(), m_engine);
            s->p.addArg(DNNL_ARG_WORKSPACE, pd.workspace_desc(), m_engine);
            s->p.addScratchpad(pd.scratchpad_desc(), m_engine);
            s->workspaceBytes = static_cast<std::int64_t>(pd.workspace_desc().get_size());
            return s;
        });
    });
    requireShape(workspace, Shape{e->workspaceBytes},
                 "max pool workspace (from the oneDNN maxPoolForward of this descriptor)");
    guarded("running a max pooling backward", [&] {
        e->p.bind(DNNL_ARG_DIFF_DST, dy);
        e->p.bind(DNNL_ARG_DIFF_SRC, dx);
        e->p.bind(DNNL_ARG_WORKSPACE, workspace);
        e->p.execute(m_stream);
    });
}

} // namespace towers::engine::cpu
