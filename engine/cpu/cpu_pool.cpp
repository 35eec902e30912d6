// Max pooling on NHWC memory: Towers' own kernels (pool_hwy.h) for windows of up to 256
// positions, oneDNN's for larger ones; average pooling: oneDNN's (pooling_avg_exclude_padding).
// TensorFlow's SAME padding maps directly onto oneDNN's asymmetric padding_l / padding_r, and both
// ignore padded positions, as the descriptor requires. The workspace, opaque UInt8 bytes to the
// caller, is the chosen kernel's own: Towers' one byte per output element (the winner's position in
// its window), or oneDNN's argmax positions in the primitive's format. Which one runs is a function
// of the descriptor alone, so the backward of a descriptor reads the workspace its forward wrote.
#include "engine/cpu/cpu_common.h"
#include "engine/cpu/pool_hwy.h"
#include "engine/cpu/simd_target.h"

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

PoolMds poolMds(const Pool2dDesc& d, memory::data_type type = f32)
{
    const Window2d& g = d.win;
    return {memory::desc({g.n, g.c, g.h, g.w}, type, Tag::nhwc),
            memory::desc({g.n, g.c, g.oh, g.ow}, type, Tag::nhwc),
            {g.sh, g.sw},
            {g.kh, g.kw},
            {g.padTop, g.padLeft},
            {g.padBottom, g.padRight}};
}

dnnl::pooling_forward::primitive_desc
forwardPd(const dnnl::engine& eng, const PoolMds& m, const dnnl::primitive_attr& attr,
          dnnl::algorithm algorithm, dnnl::prop_kind kind = dnnl::prop_kind::forward_training)
{
    const dnnl::pooling_forward::desc desc(kind, algorithm, m.src, m.dst, m.strides, m.kernel,
                                           m.padL, m.padR);
    return dnnl::pooling_forward::primitive_desc(desc, attr, eng);
}

// Average pooling leaves the pads out of each window's count, as the op requires.
constexpr auto kAverage = dnnl::algorithm::pooling_avg_exclude_padding;

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

bool towersPool(const Pool2dDesc& d)
{
    return d.win.kh * d.win.kw <= kMaxPoolWindowPositions;
}

// Towers' workspace: one byte per output element.
std::int64_t towersWorkspaceBytes(const Pool2dDesc& d)
{
    return d.outputShape().numel();
}

// y from x by oneDNN's pooling primitive of `makePd` that needs no workspace (average pooling,
// evaluation's bfloat16 max pooling), built once per cache key.
template <class MakePd>
void poolWithoutWorkspace(OneDnnOps& ops, const std::string& key, const char* what, const Tensor& x,
                          Tensor& y, const MakePd& makePd)
{
    BoundPrimitive* p = nullptr;
    guarded((std::string("building ") + what).c_str(), [&] {
        p = &ops.cached<BoundPrimitive>(key, [&] {
            const auto pd = makePd();
            auto s = std::make_shared<BoundPrimitive>();
            s->prim = dnnl::pooling_forward(pd);
            s->addArg(DNNL_ARG_SRC, pd.src_desc(), ops.dnnlEngine());
            s->addArg(DNNL_ARG_DST, pd.dst_desc(), ops.dnnlEngine());
            s->addScratchpad(pd.scratchpad_desc(), ops.dnnlEngine());
            return s;
        });
    });
    guarded((std::string("running ") + what).c_str(), [&] {
        p->bind(DNNL_ARG_SRC, x);
        p->bind(DNNL_ARG_DST, y);
        p->execute(ops.dnnlStream());
    });
}

} // namespace

void OneDnnOps::maxPoolForwardImpl(const Pool2dDesc& d, const Tensor& x, Tensor& y,
                                   Tensor& workspace)
{
    if (x.dtype() == DType::BFloat16) {
        // Evaluation's bfloat16 activations: exact (a maximum rounds nothing), half the bytes of
        // float32 and no workspace (no backward follows). Towers' kernel, the same winners as in
        // float32 (cifar10-resnet's layer1.pool, [250, 32, 32, 64], Intel Xeon with AMX: oneDNN's
        // bfloat16 inference kernel took 3.8 ms, about what Towers' float32 one takes for twice
        // the bytes); oneDNN's for the larger windows.
        Tensor::ensure(y, d.outputShape(), DType::BFloat16);
        workspace = Tensor();
        if (towersPool(d)) {
            applySimdTargetLimit();
            noteImplementation(poolKey("maxpool fwd bf16", d),
                               "pooling forward_inference src:acdb dst:acdb bf16",
                               "towers:" + poolTargetName());
            const Window2d& g = d.win;
            const auto* px = static_cast<const std::uint16_t*>(x.raw());
            auto* py = static_cast<std::uint16_t*>(y.raw());
            parallelItems(
                g.n * g.oh * g.ow, g.c * g.kh * g.kw,
                [&](std::int64_t b, std::int64_t e) { maxPoolForwardBf16Pixels(g, px, py, b, e); });
            return;
        }
        poolWithoutWorkspace(*this, poolKey("maxpool fwd bf16", d), "a max pooling", x, y, [&] {
            return forwardPd(m_engine, poolMds(d, memory::data_type::bf16),
                             BoundPrimitive::scratchpadAttr(), dnnl::algorithm::pooling_max,
                             dnnl::prop_kind::forward_inference);
        });
        return;
    }
    Tensor::ensure(y, d.outputShape(), DType::Float32);
    if (towersPool(d)) {
        applySimdTargetLimit();
        Tensor::ensure(workspace, Shape{towersWorkspaceBytes(d)}, DType::UInt8);
        noteImplementation(poolKey("maxpool fwd", d), "pooling forward_training src:acdb dst:acdb",
                           "towers:" + poolTargetName());
        const Window2d& g = d.win;
        const float* px = x.data<float>();
        float* py = y.data<float>();
        auto* ws = static_cast<std::uint8_t*>(workspace.raw());
        // An output pixel reads kh * kw input pixels of C floats.
        parallelItems(g.n * g.oh * g.ow, g.c * g.kh * g.kw, [&](std::int64_t b, std::int64_t e) {
            maxPoolForwardPixels(g, px, py, ws, b, e);
        });
        return;
    }

    PoolEntry* e = nullptr;
    guarded("building a max pooling", [&] {
        e = &cached<PoolEntry>(poolKey("maxpool fwd", d), [&] {
            const auto pd = forwardPd(m_engine, poolMds(d), BoundPrimitive::scratchpadAttr(),
                                      dnnl::algorithm::pooling_max);
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

// x and y are not read: the workspace already says where each maximum came from (the entry still
// checks them, as on every backend).
void OneDnnOps::maxPoolBackwardImpl(const Pool2dDesc& d, const Tensor& /*x*/, const Tensor& /*y*/,
                                    const Tensor& dy, const Tensor& workspace, Tensor& dx)
{
    requireDType(workspace, DType::UInt8, "max pool workspace");
    Tensor::ensure(dx, d.inputShape(), DType::Float32);
    if (towersPool(d)) {
        requireShape(workspace, Shape{towersWorkspaceBytes(d)},
                     "max pool workspace (from the oneDNN maxPoolForward of this descriptor)");
        applySimdTargetLimit();
        noteImplementation(poolKey("maxpool bwd", d),
                           "pooling backward_data diff_src:acdb diff_dst:acdb",
                           "towers:" + poolTargetName());
        const Window2d& g = d.win;
        const float* pdy = dy.data<float>();
        const auto* ws = static_cast<const std::uint8_t*>(workspace.raw());
        float* pdx = dx.data<float>();
        // An input pixel reads the dy and positions of the (kh / sh) * (kw / sw) windows, rounded
        // up, that cover it.
        const std::int64_t covering = ((g.kh + g.sh - 1) / g.sh) * ((g.kw + g.sw - 1) / g.sw);
        parallelItems(g.n * g.h * g.w, g.c * covering, [&](std::int64_t b, std::int64_t e) {
            maxPoolBackwardPixels(g, pdy, ws, pdx, b, e);
        });
        return;
    }

    PoolEntry* e = nullptr;
    guarded("building a max pooling backward", [&] {
        e = &cached<PoolEntry>(poolKey("maxpool bwd", d), [&] {
            const PoolMds m = poolMds(d);
            const auto attr = BoundPrimitive::scratchpadAttr();
            const auto hint = forwardPd(m_engine, m, attr, dnnl::algorithm::pooling_max);
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

void OneDnnOps::avgPoolForwardImpl(const Pool2dDesc& d, const Tensor& x, Tensor& y)
{
    Tensor::ensure(y, d.outputShape(), DType::Float32);
    poolWithoutWorkspace(*this, poolKey("avgpool fwd", d), "an average pooling", x, y, [&] {
        return forwardPd(m_engine, poolMds(d), BoundPrimitive::scratchpadAttr(), kAverage);
    });
}

void OneDnnOps::avgPoolBackwardImpl(const Pool2dDesc& d, const Tensor& dy, Tensor& dx)
{
    Tensor::ensure(dx, d.inputShape(), DType::Float32);
    BoundPrimitive* p = nullptr;
    guarded("building an average pooling backward", [&] {
        p = &cached<BoundPrimitive>(poolKey("avgpool bwd", d), [&] {
            const PoolMds m = poolMds(d);
            const auto attr = BoundPrimitive::scratchpadAttr();
            const auto hint = forwardPd(m_engine, m, attr, kAverage);
            const dnnl::pooling_backward::desc desc(kAverage, m.src, m.dst, m.strides, m.kernel,
                                                    m.padL, m.padR);
            const dnnl::pooling_backward::primitive_desc pd(desc, attr, m_engine, hint);
            auto s = std::make_shared<BoundPrimitive>();
            s->prim = dnnl::pooling_backward(pd);
            s->addArg(DNNL_ARG_DIFF_DST, pd.diff_dst_desc(), m_engine);
            s->addArg(DNNL_ARG_DIFF_SRC, pd.diff_src_desc(), m_engine);
            s->addScratchpad(pd.scratchpad_desc(), m_engine);
            return s;
        });
    });
    guarded("running an average pooling backward", [&] {
        p->bind(DNNL_ARG_DIFF_DST, dy);
        p->bind(DNNL_ARG_DIFF_SRC, dx);
        p->execute(m_stream);
    });
}

} // namespace towers::engine::cpu
